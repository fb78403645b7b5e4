"""The one place where collscope's errors become exit codes and one-line messages.

:class:`CollscopeGroup` (the ``collscope`` group) runs every command inside :func:`user_errors`, so a
:class:`~collscope.errors.CollscopeError` raised anywhere below a command (bad input, a bad option value, a
missing tool) ends the program with exit code 2 and one line, ``error: <message>``, on stderr; never a traceback.
Commands raise collscope's errors (or click's own usage errors) and never catch them for this.

A signal is not bad input: Ctrl-C (SIGINT, Python's KeyboardInterrupt) ends any command with exit code 130, and an
error that says how the run was stopped (``exit_code``, as :class:`collscope.sweeps.termination.SweepTerminated`
for SIGTERM: 143) with that code; 128 + the signal's number, as a shell reports a process the signal killed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from collscope.errors import CollscopeError

__all__ = ["UserError", "user_errors", "USER_ERROR_EXIT", "INTERRUPTED_EXIT"]

USER_ERROR_EXIT = 2
"""Exit code of bad usage or bad input (0 success, 1 the work found a failure, 2 bad input)."""
INTERRUPTED_EXIT = 128 + 2
"""Exit code after Ctrl-C (SIGINT is signal 2)."""


class UserError(click.ClickException):
    """A collscope error shown to the user: ``error: <message>`` on stderr, exit code 2."""

    exit_code = USER_ERROR_EXIT

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=file is None, file=file)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a CollscopeError raised inside the block into :class:`UserError` (click prints it and exits 2), or,
    when the error names its own ``exit_code`` (a run stopped by a signal), into that code with one line
    ``stopped: <message>``; Ctrl-C into exit code 130 with ``interrupted (SIGINT)``."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo("interrupted (SIGINT)", err=True)
        raise click.exceptions.Exit(INTERRUPTED_EXIT) from None
    except CollscopeError as exc:
        code = getattr(exc, "exit_code", USER_ERROR_EXIT)
        if isinstance(code, int) and code != USER_ERROR_EXIT:
            click.echo(f"stopped: {exc}", err=True)
            raise click.exceptions.Exit(code) from exc
        raise UserError(str(exc)) from exc
