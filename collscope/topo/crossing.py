"""Where NCCL's graphs leave a node: the path type of their network hops (a graph's ``typeInter``) and the NICs
they reach, from each GPU's nearest NIC in a capture, by NCCL's own rules.

NCCL (NVIDIA/nccl, read at v2.30.7):

- src/graph/paths.cc ``ncclTopoComputePaths``: a GPU whose NIC path is beyond PXN sends through an NVLink peer that
  reaches that NIC within ``pxnType`` (P2C with ``NCCL_PXN_C2C=1``, the default since 2.28) with GPUDirect RDMA on:
  its path becomes PXN (``NCCL_PXN_DISABLE=1`` turns this off); a GPU at PIX or PXB without GPUDirect RDMA goes
  through its local CPU (``addInterStep``), a PHB path;
- src/graph/search.cc ``ncclTopoCompute``: the search starts at the smallest path type any GPU has to a NIC
  (``ncclTopoGetGpuMinPath``) and relaxes it until a graph fits; a ring enters a node at one GPU and leaves it at
  another (``ncclTopoSearchParams``: back to the NIC at the last GPU), and a balanced tree uses its first two GPUs,
  so with two or more GPUs per node two need a NIC at the graph's type: the second-closest GPU sets it (the simpler
  tree NCCL tries on Hopper leaves from its first GPU; where that GPU alone is closer, LL128 is decided alike:
  the others reach its NIC as PXN over NVLink, and without NVLink LL128 is off inside the node anyway);
- src/graph/tuning.cc ``ncclTopoTuneModel``: LL128 only where the graphs' ``typeInter`` is at most PXN on Hopper and
  newer (``NCCL_LL128_C2C=1``, the default), PXB before (:mod:`collscope.analysis.nccl_model.model`).

What this cannot see: whether the NIC supports GPUDirect RDMA at all (nvidia_peermem or DMA-BUF, stated as a
condition by :mod:`.gdr`), and the CPUs' interconnect bandwidth on a SYS path (NCCL's ``QPI_BW``-family constants of
src/graph/topo.h, which depend on the CPU model no ``nvidia-smi topo -m`` capture gives; an NCCL topology XML names
the CPU, and :func:`inter_socket_link` gives the link, said in the notes but not bounding the hop to the NIC).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collscope.topo.gdr import gpu_nics
from collscope.topo.naming import natural_key
from collscope.topo.paths import is_nvlink
from collscope.vocab.nccl import PATH_TYPES, ll128_network_limit

__all__ = ["GpuCrossing", "NodeCrossing", "inter_socket_link", "ll128_crossing_note", "node_crossing"]

_PXN = "PXN"
_PXN_RELAY_MAX = "P2C"
"""paths.cc: ``pxnType = ncclParamPxnC2c() ? PATH_P2C : PATH_PXB`` (NCCL_PXN_C2C defaults to 1)."""


def _index(path: str) -> int:
    return PATH_TYPES.index(path)


@dataclass(frozen=True, slots=True)
class GpuCrossing:
    """One GPU's way out of its node in NCCL's paths."""

    gpu: str
    path: str
    """NCCL's path type of it (PIX, PXB, P2C, PXN, PHB, SYS)."""
    nics: tuple[str, ...]
    """The NICs it reaches at that type (its nearest compute NICs; a PXN relay's NIC)."""
    how: str
    """``mlx5_1 at PHB``, ``PXN through GPU3 (mlx5_0)``."""
    gdr: bool
    """GPUDirect RDMA on for this path (NCCL's rule at its default level); off means staged through host memory."""
    relays: tuple[str, ...] = ()
    """PXN: the NVLink peers whose NICs it sends through (each NIC's own GPU, paths.cc ncclTopoGetLocalGpu)."""


@dataclass(frozen=True, slots=True)
class NodeCrossing:
    """The path type NCCL's graphs cross nodes at, and the NICs they use, for one node's capture."""

    path: str
    """The graphs' ``typeInter``: the second-closest GPU's path (the closest one's with one GPU per node)."""
    gpus: tuple[GpuCrossing, ...]
    nics: tuple[str, ...]
    """The NICs the GPUs reach at the graphs' type or closer, directly or as a PXN relay (a graph crossing at
    ``path`` leaves from none other)."""
    level: str | None = None
    """``NCCL_NET_GDR_LEVEL`` as set (None: NCCL's default), which the notes name."""

    def text(self) -> str:
        """``NCCL's graphs cross nodes at PHB (GPU1, GPU3 at PHB to mlx5_0, mlx5_1; GPU0, GPU2 at SYS to ...)``."""
        by_path: dict[str, list[GpuCrossing]] = {}
        for g in self.gpus:
            by_path.setdefault(g.path, []).append(g)
        parts = []
        for path, items in sorted(by_path.items(), key=lambda kv: _index(kv[0])):
            nics = sorted({n for g in items for n in g.nics}, key=natural_key)
            via = (f"through {', '.join(sorted({r for g in items for r in g.relays}, key=natural_key))}"
                   if path == _PXN else f"to {', '.join(nics)}")
            parts.append(f"{', '.join(g.gpu for g in items)} at {path} {via}")
        return f"NCCL's graphs cross nodes at {self.path} ({'; '.join(parts)})"

    def notes(self, gpu: str | None, sm: int | None, sys_link: tuple[float, str] | None = None) -> list[str]:
        """What the crossing changes in NCCL's model of ``gpu`` (sm ``sm``; None: unknown) and what that model does
        not price; ``sys_link``: the inter-socket link's GB/s and where it came from, when the capture names the
        CPU (:func:`inter_socket_link`)."""
        out = []
        ll128 = ll128_crossing_note(self.path, gpu, sm, "the capture's GPU-NIC paths, with the sources")
        if ll128:
            out.append(ll128)
        staged = self.staged()
        if staged:
            level = (f"NCCL_NET_GDR_LEVEL={self.level}" if self.level is not None
                     else "NCCL's default NCCL_NET_GDR_LEVEL")
            out.append(f"GPUDirect RDMA is off for {', '.join(staged)} at {level} (their NIC paths are beyond it, "
                       "src/graph/paths.cc ncclTopoCheckGdr): the network's data goes through host memory, a cost "
                       "NCCL's model does not price; collscope topo show names the level that turns it on, and its "
                       "cost")
        if self.path == "SYS" and sys_link is not None:
            out.append(f"the crossing's SYS path also runs over the CPUs' interconnect, {sys_link[0]:g} GB/s "
                       f"({sys_link[1]}, NCCL's ncclTopoGetInterCpuBw for the captured CPU): the ring bound the "
                       "expected measurement is held to includes it only where the GPUs' paths to each other cross "
                       "it; its bound on the hop to the NIC is not modelled")
        elif self.path == "SYS":
            out.append("the crossing's SYS path also runs over the CPUs' interconnect, whose bandwidth NCCL's search "
                       "takes from the CPU model (src/graph/topo.h); the capture does not name the CPU, so the model "
                       "does not bound the NICs by it")
        return out

    def staged(self) -> tuple[str, ...]:
        """The GPUs at the crossing's type or closer whose path has no GPUDirect RDMA (through host memory)."""
        return tuple(g.gpu for g in self.gpus if not g.gdr and _index(g.path) <= _index(self.path))


def inter_socket_link(node: Any) -> tuple[float, str] | None:
    """(GB/s, source) of ``node``'s slowest link between CPUs (``smp``) whose bandwidth the capture gives (an NCCL
    topology XML names the CPU: src/graph/topo.h ``*_QPI_BW``/``AMD_BW`` by ``ncclTopoGetInterCpuBw``); None
    without one (``nvidia-smi topo -m`` does not name the CPU)."""
    links = [(float(d["bw_gbps"]), str(d.get("bw_source") or "")) for _, _, d in node.graph.edges(data=True)
             if d.get("kind") == "smp" and d.get("bw_gbps")]
    return min(links) if links else None


def ll128_crossing_note(path: str, gpu: str | None, sm: int | None, why: str) -> str | None:
    """What a crossing at ``path`` (``why``: where that path came from) does to LL128 across nodes on ``gpu``; None
    when it leaves LL128 on, or the GPU is unknown."""
    if gpu is None or sm is None:
        return None
    limit = ll128_network_limit(sm)
    if _index(path) <= _index(limit):
        return None
    return (f"NCCL's graphs cross nodes at {path} ({why}): NCCL enables LL128 across nodes only up to {limit} on "
            f"{gpu} (src/graph/tuning.cc ncclTopoTuneModel), so its choice across nodes has no LL128 here")


def node_crossing(node: Any, *, gpus_per_node: int | None = None, level: str | None = None,
                  pxn: bool = True) -> NodeCrossing | None:
    """Where NCCL's graphs leave ``node`` (a ``NodeTopology``) by the module's rules; None when no GPU has a NIC
    with a path class in the capture. ``gpus_per_node``: the job's GPUs on a node (1: the closest GPU sets the
    type); ``level``: ``NCCL_NET_GDR_LEVEL`` as set (None: NCCL's default; ConfigError for a value NCCL does not
    read); ``pxn``: False for ``NCCL_PXN_DISABLE=1``."""
    items = gpu_nics(node, level=level)
    direct: dict[str, GpuCrossing] = {}
    for gpu in sorted(items, key=natural_key):
        decision = items[gpu].decision
        if decision is None:
            continue
        path = decision.nccl_path
        if not decision.gdr and path in ("PIX", "PXB"):
            path = "PHB"  # paths.cc addInterStep(CPU, localCpu, ...): through the GPU's local CPU
        direct[gpu] = GpuCrossing(gpu, path, items[gpu].nics, f"{'/'.join(items[gpu].nics)} at {path}",
                                  decision.gdr)
    if not direct:
        return None
    crossings: list[GpuCrossing] = []
    for gpu, own in direct.items():
        if pxn and _index(own.path) > _index(_PXN):
            relays = [peer for name, peer in direct.items() if name != gpu and peer.gdr
                      and _index(peer.path) <= _index(_PXN_RELAY_MAX) and is_nvlink(node.path_class(gpu, name))]
            if relays:
                nics = tuple(sorted({n for r in relays for n in r.nics}, key=natural_key))
                names = tuple(r.gpu for r in relays)
                crossings.append(GpuCrossing(gpu, _PXN, nics, f"PXN through {', '.join(names)}", True, names))
                continue
        crossings.append(own)
    ranked = sorted(_index(c.path) for c in crossings)
    second = ranked[1] if len(ranked) > 1 and gpus_per_node != 1 else ranked[0]
    used = sorted({nic for c in crossings if c.path != _PXN and _index(c.path) <= second for nic in c.nics},
                  key=natural_key)
    return NodeCrossing(PATH_TYPES[second], tuple(crossings), tuple(used), level)
