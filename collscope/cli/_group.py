"""A click group whose commands are imported only when one runs or help lists it.

``collscope bench --engine mpi`` is started once per rank and per sweep point, so the group must not import the
analysis and topology commands (pandas, networkx, matplotlib) to run it. :class:`CollscopeGroup` holds a
``name -> "module:attribute"`` table; its ``commands`` mapping imports a command's module on first access
(``get_command``, a listing in ``--help``), while ``list_commands`` and name suggestions read only the names.
Every command runs inside :func:`~collscope.cli._errors.user_errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import click

from collscope.cli._errors import user_errors
from collscope.cli._terminal import escaped_output

__all__ = ["CollscopeGroup", "LazyCommands"]


class LazyCommands(MutableMapping[str, click.Command]):
    """Commands by name; a lazily named one (``"pkg.module:attr"``) is imported when it is first looked up."""

    def __init__(self, lazy: Mapping[str, str]) -> None:
        self._lazy = dict(lazy)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            target = self._lazy[name]  # KeyError: not a command, as for a plain dict
            module_name, _, attr = target.partition(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{target} is not a click command")
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        found = self._lazy.pop(name, None) is not None
        found = self._loaded.pop(name, None) is not None or found
        if not found:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._lazy
        yield from (name for name in self._loaded if name not in self._lazy)

    def __len__(self) -> int:
        return len(self._lazy.keys() | self._loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded

    def loaded(self) -> list[str]:
        """Names of the commands imported so far."""
        return sorted(self._loaded)


class CollscopeGroup(click.Group):
    """The ``collscope`` group: lazy subcommands (``lazy_commands``) and collscope errors mapped to exit 2."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        eager = dict(self.commands)
        self.commands = LazyCommands(lazy_commands or {})
        for name, command in eager.items():
            self.commands[name] = command

    def invoke(self, ctx: click.Context) -> Any:
        with user_errors():
            return super().invoke(ctx)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """The whole run (output, usage errors, error lines) prints through :func:`escaped_output`."""
        with escaped_output():
            return super().main(*args, **kwargs)
