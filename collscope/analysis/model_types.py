"""What every collective model takes and gives: :class:`LinkParams`, the links of one job's geometry (build it with
:func:`collscope.analysis.params.link_params`), and :class:`Prediction`, one predicted size of one algorithm.

The alpha-beta models (:mod:`.models`), NCCL's cost model (:mod:`.nccl_model`) and the bounds (:mod:`.bounds`) all
read the one and return the other.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from collscope.collectives.record import busbw_factor
from collscope.errors import ConfigError
from collscope.units import algbw_gbps

__all__ = ["LinkParams", "NetSettings", "Prediction", "make_prediction"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NetSettings:
    """The NCCL variables of a job that change how its graphs cross nodes, as set (None/False: NCCL's default);
    :func:`collscope.analysis.params.link_params` builds the parameters with them."""

    ib_hca: str | None = None
    """``NCCL_IB_HCA``: only the NICs it names count."""
    gdr_level: str | None = None
    """``NCCL_NET_GDR_LEVEL``: the farthest GPU-NIC path with GPUDirect RDMA (:func:`collscope.topo.gdr.gdr_level`)."""
    pxn_disable: bool = False
    """``NCCL_PXN_DISABLE=1``: no GPU sends through an NVLink peer's NIC (src/graph/paths.cc keeps PXN for any
    other value: ``ncclPxnDisable(comm) != 1``)."""

    @property
    def is_set(self) -> bool:
        return bool(self.ib_hca) or self.gdr_level is not None or self.pxn_disable

    @property
    def moves_crossing(self) -> bool:
        """Whether a variable that changes the GPU-NIC paths NCCL's graphs take is set (not NCCL_IB_HCA)."""
        return self.gdr_level is not None or self.pxn_disable

    def text(self) -> str:
        """``NCCL_IB_HCA=mlx5_0, NCCL_NET_GDR_LEVEL=PHB, NCCL_PXN_DISABLE=1`` (the ones set)."""
        return ", ".join(t for t in (f"NCCL_IB_HCA={self.ib_hca}" if self.ib_hca else "", self.crossing_text()) if t)

    def crossing_text(self) -> str:
        """The variables set that move the crossing, as ``NCCL_NET_GDR_LEVEL=PHB, NCCL_PXN_DISABLE=1``."""
        return ", ".join(t for t in (f"NCCL_NET_GDR_LEVEL={self.gdr_level}" if self.gdr_level is not None else "",
                                     "NCCL_PXN_DISABLE=1" if self.pxn_disable else "") if t)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkParams:
    """What the models need to know about the links; build it with :func:`collscope.analysis.params.link_params`."""

    nranks: int
    """Ranks in the collective (>= 2)."""
    nnodes: int
    """Nodes the ranks are spread over, ``nranks / nnodes`` per node, placed in blocks (no default: a model of a
    job states its nodes, :mod:`collscope.geometry`)."""
    nvl_domain: int | None = None
    """GPUs one NVLink fabric joins (72 on an NVL72 rack); None = the node. When it holds more than one node's
    ranks, the steps inside one domain run at the NVLink rate and only those between domains cross the NICs
    (:attr:`domain_ranks`, :attr:`ndomains`)."""
    alpha_us: float
    """Latency of one message between two ranks of a node, microseconds."""
    alpha_inter_us: float | None = None
    """Latency of one message between nodes; None = ``alpha_us``."""
    bw_gbps: float
    """Per-rank, per-direction bandwidth of a pipelined ring or tree, decimal GB/s: the intra-node bandwidth on
    one node, else the multi-node ring bound min(intra, NICs per node x NIC bandwidth)."""
    gamma_gbps: float | None = None
    """Local reduction throughput, GB/s of input reduced; None = reductions cost nothing."""
    intra_bw_gbps: float | None = None
    """Per-GPU (per-rank) bandwidth inside a node, per direction; None = ``bw_gbps``."""
    inter_bw_gbps: float | None = None
    """A node's total NIC bandwidth per direction (NICs x NIC rate); None = steps across nodes use ``bw_gbps``."""
    nics_per_node: int = 0
    nic_gbps: float | None = None
    """One NIC's data rate, GB/s per direction (400 Gb/s -> 50)."""
    gpu: str | None = None
    """GPU generation name (``"H100"``), None when unknown (CPU ranks, explicit parameters)."""
    sm: int | None = None
    intra_link: str = "unknown"
    """``"nvlink"``, ``"pcie"`` or ``"unknown"``."""
    nvlinks_per_gpu: int = 0
    nvswitch: bool = False
    pcie_gen: int | None = None
    nic_path: str | None = None
    """NCCL's path type where its graphs leave a node (their ``typeInter``: PIX, PXB, P2C, PXN, PHB, SYS), from the
    capture's GPU-NIC paths (:func:`collscope.topo.crossing.node_crossing`); None when no capture gives them (NCCL's
    model then takes PIX, an HGX node's)."""
    source: str = ""
    """Where each number came from, ``" | "``-separated."""
    caveats: tuple[str, ...] = ()
    """What a user should check in these parameters, printed among the models' notes: what they assume that the
    input did not say, and where a value came from when no option gave it."""

    def __post_init__(self) -> None:
        if self.nranks < 2:
            raise ConfigError(f"a collective model needs at least 2 ranks, got nranks={self.nranks}")
        if self.nnodes < 1 or self.nranks % self.nnodes:
            raise ConfigError(f"nranks ({self.nranks}) must be a multiple of nnodes ({self.nnodes}), nnodes >= 1")
        if self.nvl_domain is not None and (self.nvl_domain < 1 or (self.nvl_domain > self.ppn and (
                self.nranks % self.domain_ranks or self.domain_ranks % self.ppn))):
            raise ConfigError(f"nvl_domain ({self.nvl_domain}) must be >= 1 and, when larger than a node's "
                              f"{self.ppn} ranks, split the {self.nranks} ranks into domains of whole nodes")
        for name in ("alpha_us", "bw_gbps", "gamma_gbps", "intra_bw_gbps", "inter_bw_gbps", "alpha_inter_us"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0 or (name.endswith("gbps") and
                                                                                  value == 0)):
                raise ConfigError(f"{name} must be a positive number, got {value!r}")

    @property
    def ppn(self) -> int:
        return self.nranks // self.nnodes

    @property
    def domain_ranks(self) -> int:
        """Ranks that share one NVLink fabric: ``ppn``, or with a multi-node NVLink domain larger than a node
        (``nvl_domain`` > ppn) as many of the job's ranks as the domain holds, in blocks."""
        if self.nvl_domain is None or self.nvl_domain <= self.ppn:
            return self.ppn
        return min(self.nranks, self.nvl_domain)

    @property
    def ndomains(self) -> int:
        """NVLink domains the ranks span: ``nnodes``, or fewer when one domain joins several nodes."""
        return self.nranks // self.domain_ranks

    @property
    def alpha_net_us(self) -> float:
        return self.alpha_us if self.alpha_inter_us is None else self.alpha_inter_us

    @property
    def intra_gbps(self) -> float:
        return self.bw_gbps if self.intra_bw_gbps is None else self.intra_bw_gbps

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "caveats": list(self.caveats), "ppn": self.ppn, "domain_ranks": self.domain_ranks,
                "ndomains": self.ndomains}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """One predicted size of one algorithm (and protocol, for NCCL's model)."""

    model: str
    """``"alpha-beta"`` or ``"nccl"``."""
    algo: str
    proto: str | None
    op: str
    size_bytes: int
    time_us: float
    busbw_gbps: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_prediction(model: str, algo: str, proto: str | None, op: str, size_bytes: int, time_us: float,
                    nranks: int) -> Prediction:
    """A Prediction with busbw = size / time x busbw_factor (nccl-tests' factors)."""
    busbw = algbw_gbps(size_bytes, time_us) * busbw_factor(op, nranks) if time_us > 0 else 0.0
    return Prediction(model=model, algo=algo, proto=proto, op=op, size_bytes=int(size_bytes), time_us=time_us,
                      busbw_gbps=busbw)
