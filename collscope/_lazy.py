"""Lazy re-exports for package ``__init__`` files (PEP 562 module ``__getattr__`` and ``__dir__``).

A package names its public API in ``__all__`` and maps each name to the module that defines it; the
module is imported on first use of the name, so importing the package (or any one of its modules)
loads nothing else. Each ``__init__`` also imports the same names under ``TYPE_CHECKING`` for mypy;
``tests/test_imports.py`` checks that the two agree and that every name resolves.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, given module name -> names it defines.

    ``__getattr__(name)`` imports the defining module, caches the value on the package and returns it;
    an unknown name raises ``AttributeError`` (so ``from package import submodule`` still finds submodules).
    """
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} exported from both {where[name]} and {module}")
            where[name] = module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
