"""The one place where collscope's errors become exit codes and one-line messages."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from collscope.errors import CollscopeError, ParseError

F = TypeVar("F", bound=Callable[..., Any])


def _user_errors(func: F) -> F:
    """Map collscope's errors to exit code 2 with a one-line message."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ParseError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except CollscopeError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
