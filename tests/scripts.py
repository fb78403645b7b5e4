"""Load one of the project's scripts (``scripts/*.py``, ``bench/*.py``) as a module, for tests that call its
functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as a module named ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_bench(name: str, as_name: str | None = None) -> ModuleType:
    """``bench/<name>.py`` imported as a module named ``as_name`` (default ``name``), registered in ``sys.modules``
    (its dataclasses resolve their module by name); a different ``as_name`` gives a module of its own."""
    module_name = as_name or name
    spec = importlib.util.spec_from_file_location(module_name, ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
