"""The measuring engines, one capability row each: what an engine runs, what it reads, how it starts (pure).

  row          ops          knob families     a rail r is pinned by                         GPUs program    persistent
  nccl-tests   every op     nccl, nccl-tests  NCCL_IB_HCA==<nic>                              yes  nccl-tests no
  torch/nccl   harness ops  nccl              NCCL_IB_HCA==<nic>                              yes  bench      no
  mpi          harness ops  ompi              OMPI_MCA_btl_tcp_if_include, ..._oob_...=<if>   no   bench      yes
  torch/gloo   harness ops  gloo              GLOO_SOCKET_IFNAME=<if>                         no   bench      no

Every layer asks this table: the sweep launchers (which program a point runs, where its records appear, which
PMI srun gives it, how it starts on one host), the sweep's constraints (a knob of a family the engine does not
read is skipped), the inherited-environment audit and the timed runs (which library reads ``NCCL_*`` /
``OMPI_MCA_coll*``), persistent workers, locate (GPU or host engine, rail variables) and the CLI's ``--engine``
choices. Adding an engine is one row here (and its per-rank program).

torch is two rows, one per process-group backend; ``torch`` without a backend is its :attr:`EngineRow.default_backend`
row (gloo: what ``collscope bench --engine torch`` runs when ``--backend`` is not given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from collscope.errors import ConfigError
from collscope.vocab.ops import DTYPE_TABLE, HARNESS_OPS, OPS

__all__ = ["EngineName", "ENGINE_NAMES", "BackendName", "BACKEND_NAMES", "HARNESS_DTYPES", "EngineRow",
           "ENGINE_ROWS", "engine_row", "rows_of", "reads_variable"]

EngineName = Literal["nccl-tests", "torch", "mpi"]
"""The engines a record, a sweep, ``collscope bench`` and ``collscope locate`` may name."""
ENGINE_NAMES: tuple[str, ...] = ("mpi", "torch", "nccl-tests")
"""The engine names in the order the command line lists them."""
BackendName = Literal["gloo", "nccl"]
"""torch's process-group backends."""
BACKEND_NAMES: tuple[str, ...] = get_args(BackendName)

HARNESS_DTYPES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
"""The element types the mpi4py and torch harnesses allocate (:data:`collscope.collectives.measure.DTYPES`, the
``--dtype`` choices of ``collscope bench``; tests/test_engines_table.py checks the two agree)."""
_NCCL_TESTS_DTYPES: tuple[str, ...] = tuple(d.name for d in DTYPE_TABLE if d.nccl_tests is not None)


def _nccl_ib_unread(environ: Mapping[str, str]) -> str | None:
    """Why NCCL would not read NCCL_IB_HCA here (its IB transport off, or another network chosen), else None."""
    if environ.get("NCCL_IB_DISABLE", "").strip() not in ("", "0"):
        return f"NCCL_IB_DISABLE={environ['NCCL_IB_DISABLE']} turns NCCL's IB transport off"
    net = environ.get("NCCL_NET", "").strip()
    if net and net.lower() != "ib":
        return f"NCCL_NET={net} selects a network other than NCCL's IB transport"
    return None


def _ompi_tcp_unread(environ: Mapping[str, str]) -> str | None:
    """Why Open MPI would not read btl_tcp_if_include here (a PML without BTLs, such as UCX), else None."""
    pml = environ.get("OMPI_MCA_pml", "").strip()
    if pml and pml != "ob1":
        return f"OMPI_MCA_pml={pml} sends through a PML that uses no BTL (only ob1 uses btl_tcp)"
    return None


def _always_read(environ: Mapping[str, str]) -> str | None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineRow:
    """One engine (for torch: one engine and backend) and what it can do."""

    name: str
    """How output names it: ``nccl-tests``, ``torch/nccl``, ``mpi``, ``torch/gloo``."""
    engine: EngineName
    backend: BackendName | None
    """torch's process-group backend; None for the other engines."""
    default_backend: bool = False
    """This row is what its engine runs when no backend is given (torch: gloo)."""
    option: str
    """The command-line options that ask for it."""
    ops: tuple[str, ...]
    """The collectives it measures (collscope's names)."""
    dtypes: tuple[str, ...]
    """The element types it measures (collscope's names)."""
    knob_families: frozenset[str]
    """The knob families (:data:`collscope.vocab.knobs.KnobFamily`) whose variables it reads; a knob of any other
    family has no effect on it."""
    tuning_prefixes: tuple[str, ...]
    """The inherited variables its collective library reads (``NCCL_`` for NCCL; ``OMPI_MCA_`` for Open MPI: its
    collective components and the point-to-point layer they run over, ``pml``, ``btl``): what the
    inherited-environment audit of a sweep looks at (which of them are plumbing: :mod:`collscope.vocab.env_roles`)."""
    device: Literal["gpu", "host"]
    """``gpu``: it runs on GPUs and needs them; ``host``: CPUs and the host network only."""
    measures: str
    """What its tests measure, in a phrase."""
    rail_variables: tuple[str, ...]
    """The variables that pin a launch to one rail (each set to the rail's NIC or interface)."""
    rail_by: Literal["nic", "iface"]
    """Rail r is a NIC (``=``-prefixed: NCCL's exact match), or interface ``<iface_prefix><r>``."""
    rail_unread: Callable[[Mapping[str, str]], str | None]
    """Why, in this environment, it would not read its rail variables (None: it reads them)."""
    program: Literal["bench", "nccl-tests"]
    """Its per-rank program: ``python -m collscope bench`` (records appended to ``--out``, explicit ``--sizes``
    possible) or an nccl-tests binary (its table on stdout, a ladder only)."""
    local_start: Literal["mpirun", "torchrun", "one-process"]
    """How ``--launcher local`` starts N ranks on this host: under mpirun, under torchrun, or as one process
    driving N GPUs (nccl-tests ``-g N``)."""
    srun_mpi: Literal["pmix"] | None
    """The PMI its program needs under srun (Open MPI 5 speaks only PMIx; nccl-tests under srun is the MPI build,
    one process per rank); None: none (torch rendezvous through its TCP store)."""
    master_addr: bool
    """It rendezvouses through ``MASTER_ADDR``/``MASTER_PORT`` (torch's TCP store)."""
    persistent: bool
    """A persistent worker can measure several configurations in one launch."""
    persistent_note: str
    """Why (or how) a persistent worker can or cannot serve it."""

    @property
    def needs_gpus(self) -> bool:
        return self.device == "gpu"

    @property
    def records_from(self) -> Literal["out_file", "stdout"]:
        """Where its records appear: the ``--out`` file of ``collscope bench``, or nccl-tests' table on stdout."""
        return "out_file" if self.program == "bench" else "stdout"

    def honours(self, family: str) -> bool:
        """Whether a knob of ``family`` has an effect on this engine."""
        return family in self.knob_families


_NO_TORCH_WORKER = ("engine torch: no persistent torch worker yet (NCCL_ALGO/NCCL_PROTO are per communicator, "
                    "but the other NCCL variables are read once per process)")

ENGINE_ROWS: tuple[EngineRow, ...] = (  # the first row of each device is locate's default there
    EngineRow(name="nccl-tests", engine="nccl-tests", backend=None, option="--engine nccl-tests",
              ops=OPS, dtypes=_NCCL_TESTS_DTYPES, knob_families=frozenset({"nccl", "nccl-tests"}),
              tuning_prefixes=("NCCL_",), device="gpu",
              measures="NCCL on every GPU of each node (the GPUs, NVLink, the NICs with GPUDirect RDMA)",
              # NCCL src/transport/net_ib.cc reads NCCL_IB_HCA when its IB transport starts.
              rail_variables=("NCCL_IB_HCA",), rail_by="nic", rail_unread=_nccl_ib_unread,
              program="nccl-tests", local_start="one-process", srun_mpi="pmix", master_addr=False,
              persistent=False, persistent_note="nccl-tests runs one configuration per launch"),
    EngineRow(name="torch/nccl", engine="torch", backend="nccl", option="--engine torch --backend nccl",
              ops=HARNESS_OPS, dtypes=HARNESS_DTYPES, knob_families=frozenset({"nccl"}), tuning_prefixes=("NCCL_",),
              device="gpu", measures="torch.distributed with NCCL on every GPU of each node (the GPUs, NVLink, the "
                                     "NICs with GPUDirect RDMA)",
              # NCCL src/transport/net_ib.cc reads NCCL_IB_HCA when its IB transport starts.
              rail_variables=("NCCL_IB_HCA",), rail_by="nic", rail_unread=_nccl_ib_unread,
              program="bench", local_start="torchrun", srun_mpi=None, master_addr=True,
              persistent=False, persistent_note=_NO_TORCH_WORKER),
    EngineRow(name="mpi", engine="mpi", backend=None, option="--engine mpi",
              ops=HARNESS_OPS, dtypes=HARNESS_DTYPES, knob_families=frozenset({"ompi"}),
              tuning_prefixes=("OMPI_MCA_",), device="host",
              measures="host MPI between the CPUs (the host network, no GPU)",
              rail_variables=("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"), rail_by="iface",
              rail_unread=_ompi_tcp_unread,
              program="bench", local_start="mpirun", srun_mpi="pmix", master_addr=False,
              persistent=True, persistent_note="Open MPI algorithms switched through MPI_T"),
    EngineRow(name="torch/gloo", engine="torch", backend="gloo", default_backend=True,
              option="--engine torch --backend gloo",
              ops=HARNESS_OPS, dtypes=HARNESS_DTYPES, knob_families=frozenset({"gloo"}), tuning_prefixes=(),
              device="host", measures="torch.distributed with gloo between the CPUs (the host network, no GPU)",
              rail_variables=("GLOO_SOCKET_IFNAME",), rail_by="iface", rail_unread=_always_read,
              program="bench", local_start="torchrun", srun_mpi=None, master_addr=True,
              persistent=False, persistent_note=_NO_TORCH_WORKER),
)
"""Every engine, once. The command line's ``--engine`` choices are :data:`ENGINE_NAMES`."""


def rows_of(engine: str) -> tuple[EngineRow, ...]:
    """The rows of ``engine`` (torch: one per backend); ConfigError naming the engines for an unknown one."""
    rows = tuple(r for r in ENGINE_ROWS if r.engine == engine)
    if not rows:
        raise ConfigError(f"engine {engine!r} is unknown; valid: {', '.join(ENGINE_NAMES)}")
    return rows


def engine_row(engine: str, backend: str | None = None) -> EngineRow:
    """The row of ``engine`` with ``backend`` (None: the engine's default backend, for torch gloo). A backend for
    an engine without backends, or an unknown engine or backend, is a ConfigError naming the valid ones."""
    rows = rows_of(engine)
    for row in rows:
        if row.backend == backend or (backend is None and (row.default_backend or len(rows) == 1)):
            return row
    if all(r.backend is None for r in rows):
        raise ConfigError(f"backend {backend!r} applies to engine torch only, not engine {engine!r}")
    raise ConfigError(f"backend {backend!r} is invalid for engine {engine!r}; valid: "
                      f"{', '.join(str(r.backend) for r in rows)}")


def reads_variable(row: EngineRow, name: str) -> bool:
    """Whether the collective library of ``row`` reads the inherited variable ``name`` (its tuning prefixes)."""
    return bool(row.tuning_prefixes) and name.startswith(row.tuning_prefixes)


for _row in ENGINE_ROWS:  # checked once, when the vocabulary is imported
    if _row.engine not in get_args(EngineName) or (_row.backend is not None and _row.backend not in BACKEND_NAMES):
        raise AssertionError(f"engine row {_row.name}: unknown engine or backend")
if set(ENGINE_NAMES) != set(get_args(EngineName)):
    raise AssertionError(f"ENGINE_NAMES {ENGINE_NAMES} differ from EngineName")
