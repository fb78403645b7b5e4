"""The package's import structure: every module imports on its own, layers point down, light paths stay light.

- Every module under ``collscope/`` is imported in a process of its own, with no other collscope module
  loaded before it, so an import cycle (which only shows for some import orders) cannot come back.
- Imports are read with ``ast`` (function-level ones too): no library package imports click or
  ``collscope.cli``, ``analysis`` never imports ``sweeps``, and the lower layers import nothing above them.
- ``import collscope.proc``, the reaper every sweep point starts and the per-rank bench modules load no
  pandas, networkx or matplotlib.
- Each package ``__init__`` names its API lazily: ``__all__``, the ``TYPE_CHECKING`` imports that mypy
  reads and the runtime map agree, and every name resolves to the object its module defines.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "collscope"
HEAVY = ("pandas", "networkx", "matplotlib")
RUNS_ON_IMPORT = {"collscope.__main__"}  # runs the CLI when imported


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py"))
PACKAGES = sorted(_module_name(p) for p in PACKAGE.rglob("__init__.py"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _python(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(), cwd=ROOT,
                          timeout=timeout_s, check=False)


# ---- every module on its own ----------------------------------------------------------------------------

# The parent loads third-party libraries once (never collscope), then forks one child per module; each child
# imports its module into an interpreter holding no collscope module, exactly as `python -c "import X"` would.
_EACH_ALONE = textwrap.dedent("""
    import importlib, json, os, sys, traceback
    for lib in ("numpy", "pandas", "networkx", "yaml", "click", "matplotlib"):
        try:
            importlib.import_module(lib)
        except ImportError:
            pass
    assert not any(m == "collscope" or m.startswith("collscope.") for m in sys.modules)
    failures = {}
    for name in json.loads(sys.argv[1]):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            code = 0
            try:
                importlib.import_module(name)
            except BaseException:
                os.write(write, traceback.format_exc(limit=6).encode())
                code = 1
            os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            message = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        if status != 0:
            failures[name] = message or f"exit status {status}"
    print(json.dumps(failures))
""")


def test_module_list_is_complete():
    assert "collscope.proc" in MODULES and "collscope.collectives.nccl_log.records" in MODULES
    assert len(MODULES) > 100


def test_every_module_imports_on_its_own():
    names = [m for m in MODULES if m not in RUNS_ON_IMPORT]
    result = _python("-c", _EACH_ALONE, json.dumps(names), timeout_s=300)
    assert result.returncode == 0, result.stderr
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    listing = "\n".join(f"--- {name}\n{message}" for name, message in sorted(failures.items()))
    assert not failures, f"{len(failures)} module(s) fail to import on their own:\n{listing}"


def test_a_broken_module_would_be_reported(tmp_path):
    """The fork runner reports a module that fails; it is not silently passing everything."""
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("")
    (tmp_path / "brokenpkg" / "a.py").write_text("from brokenpkg.b import B\nA = 1\n")
    (tmp_path / "brokenpkg" / "b.py").write_text("from brokenpkg.a import A\nB = 2\n")
    env = _env()
    env["PYTHONPATH"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", _EACH_ALONE, json.dumps(["brokenpkg.a", "brokenpkg"])],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(failures) == ["brokenpkg.a"]
    assert "partially initialized module" in failures["brokenpkg.a"]


# ---- layers, read from the source -----------------------------------------------------------------------


def _root_lazy_map() -> dict[str, str]:
    """Name -> defining module of the root package's lazy exports (``from collscope import load_results``)."""
    return _type_checking_imports(PACKAGE / "__init__.py")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of the code (``from collscope import X`` resolved)."""
    root_names = _root_lazy_map()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            assert node.level == 0, f"{path}:{node.lineno}: relative import (the project uses absolute imports)"
            found.add(node.module)
            for alias in node.names:
                if node.module == "collscope" and alias.name in root_names:
                    found.add(root_names[alias.name])
                else:
                    found.add(f"{node.module}.{alias.name}")
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


LIBRARY = {"geometry", "vocab", "results", "topo", "collectives", "sweeps", "locate", "analysis", "errors", "files",
           "units", "proc", "atomic", "_reaper", "_lazy", "observe"}
"""Packages and modules below the CLI: they never import click or ``collscope.cli``."""

FORBIDDEN: dict[str, set[str]] = {
    "analysis": {"sweeps", "locate", "demo", "cli"},
    "sweeps": {"locate", "demo", "cli"},
    "locate": {"demo", "cli"},
    "observe": {"sweeps", "demo", "cli"},
    "topo": {"analysis", "sweeps", "locate", "demo", "cli"},
    "collectives": {"analysis", "sweeps", "locate", "demo", "cli"},
    "traces": {"analysis", "sweeps", "locate", "demo", "cli", "topo", "results"},
    "results": {"analysis", "sweeps", "locate", "demo", "cli"},
    "vocab": {"topo", "collectives", "results", "analysis", "sweeps", "locate", "demo", "cli"},
    **{bottom: {"vocab", "topo", "collectives", "results", "analysis", "sweeps", "locate", "demo", "cli"}
       for bottom in ("errors", "geometry", "files", "units", "proc", "atomic", "_reaper", "_lazy")},
}
"""Layer -> collscope layers it must not import (DESIGN.md "Arrows point down only": cli -> (triage, canary,
observe, locate) -> (analysis, sweeps, traces) -> (collectives, topo, results) -> vocab -> (errors, units, proc))."""


def _violations() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        layer = _layer(module)
        for imported in sorted(_imports(path)):
            top = imported.split(".")[0]
            if layer in LIBRARY and top == "click":
                out.append(f"{module} imports click")
            if top == "collscope" and _layer(imported) in FORBIDDEN.get(layer, set()):
                out.append(f"{module} ({layer}) imports {imported}")
    return out


def test_layers_point_down_only():
    problems = _violations()
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_the_layer_check_sees_function_level_imports(tmp_path, monkeypatch):
    fake = tmp_path / "collscope" / "analysis"
    fake.mkdir(parents=True)
    (tmp_path / "collscope" / "__init__.py").write_text((PACKAGE / "__init__.py").read_text())
    (fake / "__init__.py").write_text("")
    (fake / "bad.py").write_text("def f():\n    import click\n    from collscope.sweeps.plan import plan_sweep\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "collscope")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _violations() == ["collscope.analysis.bad imports click",
                             "collscope.analysis.bad (analysis) imports collscope.sweeps.plan",
                             "collscope.analysis.bad (analysis) imports collscope.sweeps.plan.plan_sweep"]


# ---- light paths ----------------------------------------------------------------------------------------


def _loaded_after(*code: str) -> list[str]:
    script = "import sys\n" + "\n".join(code) + f"\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    result = _python("-c", script)
    assert result.returncode == 0, result.stderr
    return list(ast.literal_eval(result.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("module", [
    "collscope",
    "collscope.proc",
    "collscope.collectives",
    "collscope.collectives.harness.mpi",
    "collscope.collectives.harness.mpit",
    "collscope.collectives.harness.worker",
    "collscope.collectives.spec",
    "collscope.collectives.nccl_log",
    "collscope.topo",
    "collscope.topo.nvidia_smi.matrix",
    "collscope.topo.infiniband.host",
    "collscope.topo.nccl_xml.parse",
    "collscope.analysis",
    "collscope.sweeps",
    "collscope.locate",
    "collscope.locate.search",
])
def test_light_modules_load_no_pandas_networkx_matplotlib(module):
    assert _loaded_after(f"import {module}") == []


def test_the_root_api_still_loads_what_it_names():
    """The light check is not vacuous: using a root name does load its library."""
    assert "networkx" in _loaded_after("from collscope import build_node")


def test_reaper_loads_no_pandas_networkx_matplotlib():
    result = _python("-X", "importtime", "-m", "collscope._reaper", "--", "true")
    assert result.returncode == 0, result.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "collscope.proc" in loaded or "collscope" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []


# ---- package APIs ---------------------------------------------------------------------------------------


def _type_checking_imports(init: Path) -> dict[str, str]:
    """Name -> module of the ``from M import name`` lines under ``if TYPE_CHECKING:`` in ``init``."""
    names: dict[str, str] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module is not None:
                    names.update({alias.asname or alias.name: stmt.module for alias in stmt.names})
    return names


def _lazy_map(init: Path) -> dict[str, str] | None:
    """Name -> module from the ``lazy_exports(__name__, {...})`` call in ``init``; None without one."""
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_exports":
            mapping = ast.literal_eval(node.args[1])
            return {name: module for module, names in mapping.items() for name in names}
    return None


def _init_of(package: str) -> Path:
    return ROOT.joinpath(*package.split("."), "__init__.py")


LAZY_PACKAGES = [p for p in PACKAGES if _lazy_map(_init_of(p)) is not None]


def test_the_sub_packages_name_their_api():
    for package in ("collscope", "collscope.topo", "collscope.topo.nvidia_smi", "collscope.topo.infiniband",
                    "collscope.topo.nccl_xml", "collscope.collectives", "collscope.collectives.harness",
                    "collscope.collectives.nccl_tests", "collscope.collectives.nccl_log", "collscope.sweeps",
                    "collscope.sweeps.adaptive", "collscope.analysis", "collscope.analysis.recommend",
                    "collscope.analysis.nccl_model"):
        assert package in LAZY_PACKAGES, package


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_package_api_is_consistent(package):
    init = _init_of(package)
    lazy = _lazy_map(init)
    assert lazy is not None
    assert _type_checking_imports(init) == lazy, "the TYPE_CHECKING imports and the lazy map differ"
    pkg = importlib.import_module(package)
    eager = {"__version__"} | {n for n in vars(pkg) if n[:1].isupper() and n.endswith("Error")}
    assert set(pkg.__all__) == set(lazy) | (eager & set(pkg.__all__)), "__all__ and the lazy map differ"
    assert len(pkg.__all__) == len(set(pkg.__all__))
    submodules = {p.stem for p in init.parent.glob("*.py")} | {p.parent.name for p in init.parent.glob("*/__init__.py")}
    clash = sorted(set(lazy) & submodules)
    assert not clash, f"exported names that are also submodule names (import order would decide): {clash}"
    for name, module in lazy.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(module), name), name
    assert set(lazy) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="no_such_name"):
        pkg.no_such_name  # noqa: B018


def test_root_names_keep_working():
    from collscope import NodeTopology, build_node, load_captures, sample_path

    node = build_node(load_captures([sample_path()]))
    assert isinstance(node, NodeTopology)
    assert node.gpus


# ---- no cycles, not even type-only ones ---------------------------------------------------------------


def _import_graph() -> dict[str, set[str]]:
    """collscope module -> collscope modules it imports anywhere, ``TYPE_CHECKING`` blocks included.

    A package ``__init__``'s ``TYPE_CHECKING`` re-exports are left out: they only name the API for mypy and
    never run. ``from package import name`` counts as importing ``package.name`` when that is a module.
    """
    known = set(MODULES)
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        skipped: set[int] = set()
        if path.name == "__init__.py":
            for node in tree.body:
                if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
                    skipped.update(id(stmt) for stmt in node.body)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in known)
            elif isinstance(node, ast.ImportFrom) and node.module in known:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in known else node.module)
        graph[module] = edges - {module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycles_not_even_type_only():
    cycles = _cycles(_import_graph())
    assert not cycles, "modules that import each other (directly or around a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_type_only_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


# ---- docs show the public API ---------------------------------------------------------------------------

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_DEEP_REFERENCE = re.compile(r"`(collscope(?:\.[a-z_]+)+)\.([A-Za-z_]+)(?:\([^`]*\))?`")


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _is_package(module: str) -> bool:
    return ROOT.joinpath(*module.split("."), "__init__.py").is_file()


def test_doc_code_samples_import_packages_not_modules():
    deep = []
    blocks = 0
    for page in _doc_pages():
        for block in _PYTHON_BLOCK.findall(page.read_text()):
            blocks += 1
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("collscope"):
                    if not _is_package(node.module or ""):
                        deep.append(f"{page.name}: from {node.module} import ...")
    assert blocks >= 1
    assert not deep, "docs import deep modules instead of the public API:\n" + "\n".join(deep)


def test_docs_name_library_functions_by_their_public_path():
    """Prose like `collscope.analysis.load.load_results` should say `collscope.analysis.load_results`."""
    deep = []
    for page in _doc_pages():
        if page.name == "cli.md":  # generated from the CLI's --help
            continue
        for module, name in _DEEP_REFERENCE.findall(page.read_text()):
            if not _is_package(module) and ROOT.joinpath(*module.split(".")).with_suffix(".py").is_file():
                deep.append(f"{page.name}: {module}.{name}")
    assert not deep, "\n".join(deep)
