"""The NCCL rails preset sweeps one point per compute NIC of the topology, never a down or front-end port."""

from __future__ import annotations

from collscope.sweeps.presets import nccl_pxn_rails
from collscope.topo.load import load_one_node
from collscope.topo.samples import sample_path


def test_rails_come_from_the_compute_nics_of_the_topology() -> None:
    node = load_one_node([sample_path()])  # 8 x 400G IB compute NICs, 3 x 100G Ethernet front-end, 1 down port
    spec = nccl_pxn_rails(rails=node)
    hcas = dict(spec.grid)["NCCL_IB_HCA"]
    assert hcas[1:] == tuple(f"=mlx5_{i}" for i in range(8))
    assert not any(h in ("=mlx5_8", "=mlx5_9", "=mlx5_10", "=mlx5_11") for h in hcas)
