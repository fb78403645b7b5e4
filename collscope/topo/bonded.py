"""Bonded RDMA ports (``mlx5_bond_0``): a RoCE LAG compute NIC or a front-end/storage bond, said with its evidence.

With RoCE LAG the mlx5 driver joins the two ports of one adapter into one RDMA device named ``mlx5_bond_<n>``
over the Linux bond (``bond0``). The name alone does not say what the bond is for: GPU nodes bond their compute
NICs (each beside a GPU pair, at the node's RDMA rate) as well as their front-end or storage NIC (far from the
GPUs, slower). The rule, stated in the output with the facts it used, never applied silently:

- **RoCE LAG compute NIC**: PIX or PXB to at least one GPU (on the GPUs' PCIe switch) and a rate equal to the
  node's fastest;
- **front-end/storage bond**: PHB, NODE or SYS to every GPU and a rate below the node's fastest;
- anything else (near a GPU but slow, far but the fastest, rate or GPU distance not captured): **role unclear**,
  with the facts, and the NIC keeps the role its rate gives (:mod:`collscope.topo.nic_choice`).

ibstat, ibv_devinfo and ``rdma link`` report one member port's rate for a bond, and NCCL counts that rate too:
one queue pair uses one member port, so the bond's second port only carries traffic with several QPs per
connection (NCCL_IB_QPS_PER_CONNECTION; NVIDIA/nccl issue 1015).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from collscope.topo.paths import path_rank

__all__ = ["BOND_NAME", "is_bonded", "bond_statement", "NEAR_GPU"]

BOND_NAME = re.compile(r"^mlx5_bond_\d+$", re.ASCII)
NEAR_GPU: tuple[str, ...] = ("PIX", "PXB")
_RULE = ("rule: PIX/PXB to a GPU and the node's fastest rate = RoCE LAG compute NIC; "
         "PHB/NODE/SYS to every GPU and slower = front-end/storage bond")
_ONE_PORT = "the rate is one member port's, as ibstat and NCCL count it"


def is_bonded(name: str) -> bool:
    """Whether ``name`` is the RDMA device of bonded ports (RoCE LAG): ``mlx5_bond_0``."""
    return BOND_NAME.match(name) is not None


def _gpus_at(distances: Mapping[str, str], cls: str) -> str:
    gpus = [g for g, c in distances.items() if c == cls]
    return ", ".join(gpus[:4]) + (f" (+{len(gpus) - 4})" if len(gpus) > 4 else "")


def bond_statement(name: str, *, rate_gbps: float | None, fastest_gbps: float | None, down: bool,
                   distances: Mapping[str, str]) -> str:
    """What the bonded device ``name`` is, with the evidence: ``distances`` maps each GPU to its path class to the
    NIC (empty when no ``nvidia-smi topo -m`` was captured), ``rate_gbps`` is its port rate (Gb/s),
    ``fastest_gbps`` the node's fastest usable NIC rate."""
    if down:
        return f"{name}: bonded ports (RoCE LAG), every port down"
    if distances:
        nearest = min(distances.values(), key=path_rank)
        where = f"{nearest} to {_gpus_at(distances, nearest)}"
    else:
        nearest, where = None, "GPU distance not captured (no nvidia-smi topo -m)"
    if rate_gbps is None or fastest_gbps is None:
        rate = "rate not captured (ibstat, ibstatus or ibv_devinfo -v give it)"
        fast = slow = False
    else:
        fast, slow = rate_gbps >= fastest_gbps, rate_gbps < fastest_gbps
        rate = (f"{rate_gbps:g} Gb/s, the node's fastest" if fast
                else f"{rate_gbps:g} Gb/s, below the node's fastest {fastest_gbps:g} Gb/s")
    near = nearest in NEAR_GPU
    if near and fast:
        return f"{name}: RoCE LAG compute NIC (bonded ports): {where}; {rate}; {_ONE_PORT}"
    if nearest is not None and not near and slow:
        return (f"{name}: front-end/storage bond (bonded ports): no GPU nearer than {nearest} "
                f"({_gpus_at(distances, nearest)}); {rate}")
    return f"{name}: bonded ports (RoCE LAG), role unclear: {where}; {rate} ({_RULE})"
