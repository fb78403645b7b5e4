"""Infer a node graph from an ``nvidia-smi topo -m`` matrix.

The matrix gives one path class per device pair. PCIe structure is inferred by grouping devices:
PIX pairs share a PCIe switch, PIX/PXB pairs share a switch tree, PIX..PHB pairs share a host
bridge, PIX..NODE pairs share a NUMA node, SYS pairs are on different NUMA nodes. NVLink pairs hide
the PCIe relation, so GPUs that are only seen through NVLink are placed by their NUMA affinity.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import networkx as nx

from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.topo.naming import natural_key
from collscope.topo.nvidia_smi.queries import TopoMatrix
from collscope.topo.paths import nvlink_count
from collscope.topo.rates import nccl_nvlink_gbps_per_link, pcie_gbps
from collscope.topo.schema import add_device, add_link

__all__ = ["graph_from_matrix", "guess_generation_from_links"]


class _Groups:
    """Union-find over device names."""

    def __init__(self, names: Iterable[str]) -> None:
        self.parent = {n: n for n in names}

    def find(self, n: str) -> str:
        while self.parent[n] != n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            lo, hi = sorted((ra, rb), key=natural_key)
            self.parent[hi] = lo

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for n in self.parent:
            out.setdefault(self.find(n), []).append(n)
        return sorted((sorted(v, key=natural_key) for v in out.values()), key=lambda g: natural_key(g[0]))


def _group_by(names: list[str], paths: dict[str, dict[str, str]], within: Callable[[str], bool]) -> _Groups:
    groups = _Groups(names)
    for a, b in itertools.combinations(names, 2):
        cls = paths[a][b]
        if nvlink_count(cls) is None and within(cls):
            groups.union(a, b)
    return groups


def guess_generation_from_links(paths: dict[str, dict[str, str]], gpus: list[str]) -> GpuGeneration | None:
    """A GPU family consistent with the NVLink counts when no model name was captured.

    Total links per GPU: 18 -> NVLink4 (H100 class), 12 -> NVLink3 (A100), 5-6 -> NVLink2 (V100),
    4 to a single peer -> GA10x bridge (RTX 3090/A6000), 4 to several peers -> P100.
    """
    totals = []
    peers = []
    for g in gpus:
        counts = [nvlink_count(paths[g][o]) or 0 for o in gpus if o != g]
        totals.append(sum(counts))
        peers.append(sum(1 for c in counts if c))
    if not totals or max(totals) == 0:
        return None
    top = max(totals)
    if len(gpus) >= 3 and all(t == top for t in totals) and all(p == len(gpus) - 1 for p in peers):
        per_pair = top // (len(gpus) - 1)
        if per_pair in (18, 12):  # all-to-all with the full count: NVSwitch, count is per GPU
            top = per_pair
    name = {18: "H100", 12: "A100", 6: "V100", 5: "V100"}.get(top)
    if name is None and top == 4:
        name = "RTX A6000" if max(peers) == 1 else "P100"
    return gpu_generation(name) if name else None


def graph_from_matrix(
    matrix: TopoMatrix,
    *,
    source: str,
    models: dict[str, str] | None = None,
    generation: GpuGeneration | None = None,
) -> tuple[nx.Graph, dict[str, dict[str, str]]]:
    """The graph and the captured path classes (with NICs renamed to their device names)."""
    rename = {label: matrix.nic_name(label) for label in matrix.nics}
    rename.update({label: label for label in matrix.gpus})
    gpus = list(matrix.gpus)
    nics = [rename[n] for n in matrix.nics]
    devices = gpus + nics
    paths = {rename[a]: {rename[b]: c for b, c in row.items()} for a, row in matrix.paths.items()}

    models = models or {}
    gen = generation
    if gen is None:
        found = {gpu_generation(m) for m in models.values()} - {None}
        gen = found.pop() if len(found) == 1 else guess_generation_from_links(paths, gpus)
    gen_source = ("given with --gpu" if generation is not None else
                  "captured GPU model" if models else "inferred from NVLink counts")

    g = nx.Graph()
    for gpu in gpus:
        add_device(g, gpu, "gpu", index=int(gpu[3:]) if gpu[3:].isdigit() else None, model=models.get(gpu),
                   cpu_affinity=matrix.cpu_affinity.get(gpu), numa_affinity=matrix.numa_affinity.get(gpu),
                   gpu_numa_id=matrix.gpu_numa_id.get(gpu), generation=gen.name if gen else None)
    label_of = {matrix.nic_name(label): label for label in matrix.nics}
    for nic in nics:
        add_device(g, nic, "nic", label=label_of[nic] if label_of[nic] != nic else None)

    _add_nvlinks(g, paths, gpus, gen, source, gen_source)
    _add_pcie(g, paths, devices, matrix, gen, source)
    return g, paths


def _add_nvlinks(g: nx.Graph, paths: dict[str, dict[str, str]], gpus: list[str], gen: GpuGeneration | None,
                 source: str, gen_source: str) -> None:
    counts = {(a, b): nvlink_count(paths[a][b]) for a, b in itertools.combinations(gpus, 2)}
    nv_pairs = {k: v for k, v in counts.items() if v}
    if not nv_pairs:
        return

    def bw(n: int) -> tuple[float | None, str]:
        if gen is None or not gen.nvlink_link_gbps:
            return None, "unknown: GPU generation not captured (pass --gpu)"
        return (round(n * gen.nvlink_link_gbps, 3),
                f"assumed: table rate NVLink{gen.nvlink_gen} {gen.nvlink_link_gbps:g} GB/s per link per direction "
                f"x {n} ({gen.name}, {gen_source})")

    def nccl(n: int) -> dict[str, object]:
        per = nccl_nvlink_gbps_per_link(gen)
        if gen is None or per is None:
            return {}
        return {"nccl_bw_gbps": round(n * per, 3), "nccl_bw_source": f"NCCL topo.h SM{gen.sm}_NVLINK_BW {per:g} x {n}"}

    full = gen.nvlink_links if gen else None
    all_to_all = len(gpus) >= 3 and len(nv_pairs) == len(counts) and len(set(nv_pairs.values())) == 1
    per_pair = next(iter(nv_pairs.values()))
    if all_to_all and (full is None or per_pair >= full):
        # Every GPU has its full link count to every other GPU: only an NVSwitch fabric does that.
        add_device(g, "NVSwitch", "nvswitch")
        for gpu in gpus:
            value, why = bw(per_pair)
            add_link(g, gpu, "NVSwitch", "nvlink", bw_gbps=value, bw_source=f"{why}; {source}", nlinks=per_pair,
                     **nccl(per_pair))
        return
    for (a, b), n in nv_pairs.items():
        value, why = bw(n)
        add_link(g, a, b, "nvlink", bw_gbps=value, bw_source=f"{why}; {source}", nlinks=n, **nccl(n))


def _add_pcie(g: nx.Graph, paths: dict[str, dict[str, str]], devices: list[str], matrix: TopoMatrix,
              gen: GpuGeneration | None, source: str) -> None:
    switch_leaf = _group_by(devices, paths, lambda c: c == "PIX").groups()
    switch_tree = _group_by(devices, paths, lambda c: c in ("PIX", "PXB"))
    bridges = _group_by(devices, paths, lambda c: c in ("PIX", "PXB", "PHB"))
    numa = _group_by(devices, paths, lambda c: c in ("PIX", "PXB", "PHB", "NODE"))

    # GPUs seen only through NVLink: join NUMA groups by their printed NUMA affinity, unless the
    # matrix says SYS between the groups.
    by_affinity: dict[str, list[str]] = {}
    for gpu in matrix.gpus:
        key = matrix.numa_affinity.get(gpu) or matrix.cpu_affinity.get(gpu) or ""
        if key and key != "N/A":
            by_affinity.setdefault(key, []).append(gpu)
    for members in by_affinity.values():
        for a, b in itertools.pairwise(members):
            ga = [d for d in devices if numa.find(d) == numa.find(a)]
            gb = [d for d in devices if numa.find(d) == numa.find(b)]
            if all(paths[x][y] != "SYS" for x in ga for y in gb):
                numa.union(a, b)

    numa_groups = numa.groups()
    numa_name: dict[str, str] = {}
    used: set[str] = set()
    for i, members in enumerate(numa_groups):
        affinities = {matrix.numa_affinity.get(d, "") for d in members} - {"", "N/A"}
        base = f"NUMA{affinities.pop()}" if len(affinities) == 1 else f"NUMA?{i}"
        name, k = base, 0
        while name in used:  # one printed NUMA affinity, but SYS between the groups: keep them apart
            k += 1
            name = f"{base}#{k}"
        used.add(name)
        cpus = {matrix.cpu_affinity.get(d, "") for d in members} - {""}
        add_device(g, name, "numa", cpu_affinity=",".join(sorted(cpus)) if cpus else None)
        for d in members:
            numa_name[d] = name
            g.nodes[d]["numa"] = name
    for a, b in itertools.combinations(sorted(set(numa_name.values()), key=natural_key), 2):
        add_link(g, a, b, "smp", bw_gbps=None,
                 bw_source="unknown: CPU interconnect not captured (nvidia-smi shows SYS)")

    def device_bw(d: str) -> tuple[float | None, str]:
        if g.nodes[d]["kind"] == "gpu" and gen is not None:
            return pcie_gbps(gen.pcie_gen, 16), f"assumed: PCIe Gen{gen.pcie_gen} x16 ({gen.name})"
        return None, "unknown: PCIe link not captured"

    hb_index = itertools.count()
    sw_index = itertools.count()
    for members in bridges.groups():
        hb = f"HostBridge{next(hb_index)}"
        add_device(g, hb, "host_bridge")
        gpu_bws = [device_bw(d)[0] for d in members]
        known = [b for b in gpu_bws if b is not None]
        add_link(g, hb, numa_name[members[0]], "host", bw_gbps=max(known) if known else None,
                 bw_source="assumed: widest PCIe link below it" if known else "unknown")
        trees: dict[str, list[str]] = {}
        for d in members:
            trees.setdefault(switch_tree.find(d), []).append(d)
        for tree in trees.values():
            leaves = [leaf for leaf in switch_leaf if leaf[0] in tree and len(leaf) > 1]
            if len(tree) == 1:
                value, why = device_bw(tree[0])
                add_link(g, tree[0], hb, "pcie", bw_gbps=value, bw_source=f"{why}; {source}")
                continue
            top = f"PCIeSwitch{next(sw_index)}"
            add_device(g, top, "pcie_switch")
            add_link(g, top, hb, "pcie", bw_gbps=None, bw_source="unknown: switch uplink not captured")
            placed: set[str] = set()
            if len(leaves) == 1 and set(leaves[0]) == set(tree):
                leaves = []  # the whole tree is one switch
            for leaf in leaves:
                sw = f"PCIeSwitch{next(sw_index)}"
                add_device(g, sw, "pcie_switch")
                add_link(g, sw, top, "pcie", bw_gbps=None, bw_source="unknown: switch uplink not captured")
                for d in leaf:
                    value, why = device_bw(d)
                    add_link(g, d, sw, "pcie", bw_gbps=value, bw_source=f"{why}; {source}")
                    placed.add(d)
            for d in tree:
                if d not in placed:
                    value, why = device_bw(d)
                    add_link(g, d, top, "pcie", bw_gbps=value, bw_source=f"{why}; {source}")

