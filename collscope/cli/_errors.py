"""The one place where collscope's errors become exit codes and one-line messages.

:class:`CollscopeGroup` (the ``collscope`` group) runs every command inside :func:`user_errors`, so a
:class:`~collscope.errors.CollscopeError` raised anywhere below a command (bad input, a bad option value, a
missing tool) ends the program with exit code 2 and one line, ``error: <message>``, on stderr; never a traceback.
Commands raise collscope's errors (or click's own usage errors) and never catch them for this.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from collscope.errors import CollscopeError

__all__ = ["UserError", "user_errors", "USER_ERROR_EXIT"]

USER_ERROR_EXIT = 2
"""Exit code of bad usage or bad input (0 success, 1 the work found a failure, 2 bad input)."""


class UserError(click.ClickException):
    """A collscope error shown to the user: ``error: <message>`` on stderr, exit code 2."""

    exit_code = USER_ERROR_EXIT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=file is None, file=file)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a CollscopeError raised inside the block into :class:`UserError` (click prints it and exits 2)."""
    try:
        yield
    except CollscopeError as exc:
        raise UserError(str(exc)) from exc
