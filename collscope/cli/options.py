"""Options that several commands share, declared once: one name, one type, one help text each.

:data:`SIZE` is the one byte-size type of the command line (``8``, ``64K``, ``16M``, binary suffixes as in
nccl-tests' ``-b``/``-e``), over :func:`collscope.units.parse_size`; :data:`SIZE_LIST` takes comma-separated
sizes with the same rules. A bad size is a click usage error (exit 2) naming the option and the bad item.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from collscope.errors import ConfigError
from collscope.files import check_output_dir
from collscope.units import parse_size
from collscope.vocab.engines import ENGINE_NAMES

__all__ = ["SIZE", "SIZE_LIST", "SizeType", "SizeListType", "engine_option", "geometry_options", "gpu_option",
           "link_options", "nccl_tests_dir_option", "size_range_options", "sizes_option", "topo_option",
           "check_output_file", "parse_settings", "setting_option"]

F = TypeVar("F", bound=Callable[..., Any])


class SizeType(click.ParamType):
    """A byte size such as ``8``, ``64K``, ``16M`` (binary suffixes, as nccl-tests' -b/-e) -> int bytes."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class SizeListType(click.ParamType):
    """Comma-separated byte sizes (``8,1K,64K``) -> a tuple of int bytes, each parsed as :class:`SizeType` and
    at least ``minimum`` bytes."""

    name = "sizes"

    def __init__(self, minimum: int = 0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        items = [item.strip() for item in str(value).split(",") if item.strip()]
        if not items:
            self.fail(f"no sizes in {value!r} (expected sizes separated by commas, e.g. 8,1K,64K)", param, ctx)
        try:
            sizes = tuple(parse_size(item) for item in items)
        except ValueError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)
        small = [item for item, size in zip(items, sizes, strict=True) if size < self.minimum]
        if small:
            rule = "> 0" if self.minimum == 1 else f">= {self.minimum}"
            self.fail(f"{value!r}: sizes must be {rule} bytes, got {', '.join(small)}", param, ctx)
        return sizes


SIZE = SizeType()
SIZE_LIST = SizeListType()


def _apply(func: F, *decorators: Callable[[F], F]) -> F:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def topo_option(param: str = "topo", *, cluster: bool = True) -> Callable[[F], F]:
    """``--topo PATH`` (repeatable): the topology a command uses, loaded by :mod:`collscope.topo.load`.

    ``cluster``: the command also models a cluster directory (one capture directory per node); without it the
    command needs one node's topology.
    """
    what = ("Topology: captured files or directories (as `topo show --from`), a cluster directory, or the JSON of "
            "`topo show --json`. Repeatable." if cluster else
            "Topology of one node: captured files or directories (as `topo show --from`), or the JSON of "
            "`topo show --json`. Repeatable.")
    return click.option("--topo", param, multiple=True, metavar="PATH", help=what)


def gpu_option(func: F) -> F:
    """``--gpu NAME``: the GPU model when the captures do not name it."""
    return click.option("--gpu", default=None, metavar="NAME",
                        help="GPU model (e.g. H100) when the captures do not name it; sets the NVLink/PCIe "
                             "link rates.")(func)


def size_range_options(*, short_flags: bool = False, min_default: str | None = None,
                       max_default: str | None = None) -> Callable[[F], F]:
    """``--min-bytes B`` / ``--max-bytes B`` (``-b``/``-e`` with ``short_flags``), both of type :data:`SIZE`."""
    def note(default: str | None) -> str:
        return f"  [default: {default}]" if default is not None else ""

    min_opts = ("--min-bytes", "-b") if short_flags else ("--min-bytes",)
    max_opts = ("--max-bytes", "-e") if short_flags else ("--max-bytes",)

    def decorate(func: F) -> F:
        return _apply(func,
                      click.option(*min_opts, type=SIZE, default=None, metavar="B",
                                   help="Smallest size in bytes (8, 1K, 4M; binary suffixes)." + note(min_default)),
                      click.option(*max_opts, type=SIZE, default=None, metavar="B",
                                   help="Largest size in bytes." + note(max_default)))
    return decorate


def sizes_option(*, instead_of: str, applies_to: str = "", minimum: int = 0) -> Callable[[F], F]:
    """``--sizes B,B,...`` (:class:`SizeListType`): explicit sizes ``instead_of`` a ladder's options, each at
    least ``minimum`` bytes (a smaller one is a usage error naming it)."""
    where = f"; {applies_to}" if applies_to else ""
    kind = SIZE_LIST if minimum == 0 else SizeListType(minimum)
    return click.option("--sizes", type=kind, default=None, metavar="B,B,...",
                        help=f"Explicit sizes instead of {instead_of} (8,1K,64K){where}.")


def engine_option(*, required: bool) -> Callable[[F], F]:
    """``--engine {mpi,torch,nccl-tests}``; optional where a spec already names one."""
    text = "mpi: mpi4py harness; torch: torch.distributed harness; nccl-tests: run the binary."
    return click.option("--engine", type=click.Choice(ENGINE_NAMES), required=required, default=None,
                        help=text if required else text + "  [default: the spec's]")


def nccl_tests_dir_option(func: F) -> F:
    """``--nccl-tests-dir DIR``: where the nccl-tests binaries are."""
    return click.option("--nccl-tests-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="nccl-tests build directory (else NCCL_TESTS_HOME or PATH).")(func)


def check_output_file(path: Path, option: str) -> Path:
    """Make sure the file ``path`` (the value of ``option``) can be written, before any work starts: its directory
    is created and probed (:func:`~collscope.files.check_output_dir`); a directory in its place is refused too."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory, expected a file name")
    check_output_dir(path.parent, f"{option} {path}: its directory")
    return path


GEOMETRY_HELP = {
    "nranks": "Ranks in the communicator, when the input does not say or says it wrong (the input's evidence is "
              "shown beside it; this value wins).",
    "nnodes": "Nodes the ranks span, when the input does not say or says it wrong (this value wins).",
    "nvl_domain": "GPUs one NVLink fabric joins (8 on an HGX node, 4 on a GB200 tray without MNNVL, 72 on an NVL72 "
                  "rack), when the input does not say (this value wins).",
    "op": "The collective, when the input does not name it or names it wrong.",
}
"""The help of the geometry overrides, one text per option for every command that has it."""


def geometry_options(*fields: str, op_choices: tuple[str, ...] | None = None) -> Callable[[F], F]:
    """``--nranks N``, ``--nnodes N``, ``--nvl-domain N`` and ``--op OP`` (the ``fields`` asked for, in that order):
    the overrides of :class:`collscope.geometry.Geometry`, with one name, type and help in every command.

    Each passes ``None`` when not given (the input's evidence decides, and unknown stays unknown).
    """
    decorators: list[Callable[[F], F]] = []
    for name in fields:
        if name == "op":
            kind: Any = click.Choice(op_choices) if op_choices else str
            decorators.append(click.option("--op", "op", type=kind, default=None, metavar=None if op_choices else "OP",
                                           help=GEOMETRY_HELP["op"]))
        elif name in ("nranks", "nnodes", "nvl_domain"):
            decorators.append(click.option(f"--{name.replace('_', '-')}", name, type=click.IntRange(min=1),
                                           default=None, metavar="N", help=GEOMETRY_HELP[name]))
        else:
            raise ValueError(f"no geometry option {name!r}")

    def apply(func: F) -> F:
        return _apply(func, *decorators)
    return apply


def nic_options(func: F) -> F:
    """``--nic-gbit R`` and ``--nics-per-node N``: the compute NICs of each node when no capture gives them."""
    return _apply(func,
                  click.option("--nic-gbit", default=None, type=click.FloatRange(min=0, min_open=True),
                               metavar="R",
                               help="Line rate of each compute NIC, Gb/s as ibstat prints it (400 for NDR); for "
                                    "jobs across nodes without a --topo capture of the NICs."),
                  click.option("--nics-per-node", default=None, type=click.IntRange(min=1), metavar="N",
                               help="Compute NICs per node, each at the NIC rate given (default: one per GPU of "
                                    "the node)."))


def link_options(func: F) -> F:
    """``--alpha-us A`` and ``--bw-gbps B``: link parameters given by hand (they override the topology's and the GPU
    table's), one name and help in every command that models a job."""
    return _apply(func,
                  click.option("--alpha-us", default=None, type=float, metavar="A",
                               help="Per-message latency, us (overrides the topology's and the GPU's; on CPUs, "
                                    "give the bandwidth too)."),
                  click.option("--bw-gbps", default=None, type=float, metavar="B",
                               help="Per-rank link bandwidth per direction, GB/s (overrides the topology's and "
                                    "the GPU's)."))


def setting_option(func: F) -> F:
    """``--setting NAME=VALUE`` (repeatable): an NCCL variable of the job the models read (:func:`parse_settings`)."""
    return _apply(func, click.option(
        "--setting", "settings", multiple=True, metavar="NAME=VALUE",
        help="An NCCL variable of the job (repeatable), read as analyze reads a configuration's: NCCL_ALGO, "
             "NCCL_PROTO and NCCL_NVLS_ENABLE=0 narrow NCCL's choice, NCCL_IB_HCA the NICs counted, "
             "NCCL_NET_GDR_LEVEL and NCCL_PXN_DISABLE the GPU-NIC paths across nodes; channel bounds and other "
             "variables are named in the notes."))


def parse_settings(items: tuple[str, ...]) -> dict[str, str]:
    """``NAME=VALUE`` items (split at the first ``=``: ``NCCL_IB_HCA==mlx5_0`` is NCCL_IB_HCA ``=mlx5_0``),
    validated as a sweep's fixed environment is (:func:`collscope.vocab.knobs.validate_env`)."""
    from collscope.vocab.knobs import validate_env

    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--setting {item!r}: NAME=VALUE expected (e.g. NCCL_NVLS_ENABLE=0)")
        pairs[name.strip()] = value.strip()
    return validate_env(pairs)
