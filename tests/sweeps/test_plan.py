"""plan_sweep: grid expansion, stable ids, the default point, every skip rule with its reason; YAML specs;
presets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.errors import ConfigError
from collscope.sweeps.constraints import PlanContext, skip_reason
from collscope.sweeps.plan import PRESETS, check_spec, load_spec, plan_sweep, preset, spec_from_dict
from collscope.sweeps.spec import DEFAULT, Plan, SweepSpec
from collscope.topo.detect import load_captures
from collscope.topo.model import NodeTopology
from collscope.topo.node import build_node
from collscope.topo.samples import sample_path
from collscope.topo.schema import add_device, add_link
from collscope.vocab.knobs import DYNAMIC_RULES

AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
AG = "OMPI_MCA_coll_tuned_allgather_algorithm"


def plan(spec: SweepSpec, **kw: object) -> Plan:
    kw.setdefault("env", {})
    return plan_sweep(spec, **kw)  # type: ignore[arg-type]


def nccl(**kw: object) -> SweepSpec:
    base: dict[str, object] = {"name": "t", "engine": "nccl-tests", "nranks": 8, "repeats": 1}
    return SweepSpec(**{**base, **kw})  # type: ignore[arg-type]


def reasons(p: Plan) -> dict[tuple[str, tuple[tuple[str, str], ...]], str]:
    return {(s.op, tuple(sorted(s.settings.items()))): s.reason for s in p.skipped}


def reason_for(p: Plan, op: str, **settings: str) -> str:
    return reasons(p)[(op, tuple(sorted(settings.items())))]


def forced(p: Plan, op: str = "all_reduce") -> list[dict[str, str]]:
    return [pt.settings for pt in p.points if pt.op == op and pt.repeat == 0]


def topology(*, nvswitch: bool, model: str, nvlink: bool = True, ngpus: int = 8) -> NodeTopology:
    g = nx.Graph()
    for i in range(ngpus):
        add_device(g, f"GPU{i}", "gpu", index=i, model=model)
    add_device(g, "mlx5_0", "nic")
    if nvswitch:
        add_device(g, "NVSwitch", "nvswitch")
        for i in range(ngpus):
            add_link(g, f"GPU{i}", "NVSwitch", "nvlink", bw_gbps=25.0, bw_source="assumed", nlinks=18)
    elif nvlink:
        for i in range(0, ngpus - 1, 2):
            add_link(g, f"GPU{i}", f"GPU{i + 1}", "nvlink", bw_gbps=25.0, bw_source="assumed", nlinks=4)
    return NodeTopology(host="n1", graph=g)


# ---- grid, ids, default --------------------------------------------------------------------------------------
def test_grid_expansion_default_first_and_ordering() -> None:
    spec = SweepSpec(name="g", engine="mpi", ops=("all_reduce",), grid={AR: ("3", "ring", DEFAULT)}, repeats=2)
    p = plan(spec)
    assert [pt.settings for pt in p.points if pt.repeat == 0] == [
        {}, {AR: "3", DYNAMIC_RULES: "1"}, {AR: "4", DYNAMIC_RULES: "1"}]
    assert [pt.repeat for pt in p.points] == [0, 0, 0, 1, 1, 1]
    assert p.points[0].is_default and p.points[3].is_default
    assert len({pt.point_id for pt in p.points}) == len(p.points)


def test_default_point_present_per_op_and_repeat_even_when_everything_is_skipped() -> None:
    spec = nccl(ops=("all_reduce", "alltoall"), grid={"NCCL_CROSS_NIC": ("0", "1")}, repeats=3)
    p = plan(spec)
    assert len(p.points) == 6
    assert all(pt.is_default for pt in p.points)
    assert [(pt.op, pt.repeat) for pt in p.points] == [(op, r) for r in range(3) for op in ("all_reduce", "alltoall")]
    assert len(p.skipped) == 4  # once per op and combination, not per repeat


def test_ids_are_stable_and_depend_on_what_is_measured() -> None:
    spec = preset("nccl-algo-proto")
    a, b = plan(spec), plan(preset("nccl-algo-proto"))
    assert [pt.point_id for pt in a.points] == [pt.point_id for pt in b.points]
    assert a.sweep_id == b.sweep_id
    c = plan(preset("nccl-algo-proto", max_bytes=1 << 20))
    assert not {pt.point_id for pt in a.points} & {pt.point_id for pt in c.points}
    assert a.sweep_id != c.sweep_id


def test_duplicates_removed_after_normalisation_and_implied_settings() -> None:
    spec = SweepSpec(name="d", engine="mpi", grid={AR: ("4", "ring", "RING"), DYNAMIC_RULES: (DEFAULT, "1", "true")})
    p = plan(spec)
    assert forced(p) == [{}, {AR: "4", DYNAMIC_RULES: "1"}]


def test_values_validated_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="NCCL_ALGO='Trees' is invalid"):
        plan(nccl(grid={"NCCL_ALGO": ("Ring", "Trees")}))
    with pytest.raises(ConfigError, match="did you mean NCCL_PROTO"):
        plan(nccl(grid={"NCCL_PROTOO": ("LL",)}))
    with pytest.raises(ConfigError, match="per_op_grid names op 'all_gather'"):
        plan(nccl(per_op_grid={"all_gather": {"NCCL_ALGO": ("Ring",)}}))
    with pytest.raises(ConfigError, match="unknown op 'allreduce'"):
        plan(nccl(ops=("allreduce",)))
    with pytest.raises(ConfigError, match="no values"):
        plan(nccl(grid={"NCCL_ALGO": ()}))
    with pytest.raises(ConfigError, match="in both grid and per_op_grid"):
        plan(nccl(grid={"NCCL_ALGO": ("Ring",)}, per_op_grid={"all_reduce": {"NCCL_ALGO": ("Tree",)}}))
    with pytest.raises(ConfigError, match="nranks=3 is not a multiple of nnodes=2"):
        plan(nccl(nranks=3, nnodes=2))
    with pytest.raises(ConfigError, match="did you mean NCCL_ALGO"):
        plan(nccl(fixed_env={"NCCL_ALGOO": "ring"}))


def test_per_op_grid_applies_to_its_op_only() -> None:
    p = plan(preset("mpi-algos"))
    assert [s.get(AR) for s in forced(p, "all_reduce")] == [None, "1", "3", "4", "6"]
    assert [s.get(AG) for s in forced(p, "all_gather")] == [None, "2", "3", "4"]
    assert not p.skipped


# ---- skip rules ----------------------------------------------------------------------------------------------
def test_open_mpi_knob_for_another_op_in_the_global_grid_is_skipped() -> None:
    p = plan(SweepSpec(name="x", engine="mpi", ops=("all_reduce", "all_gather"), grid={AG: ("2",)}))
    assert forced(p, "all_gather") == [{}, {AG: "2", DYNAMIC_RULES: "1"}]
    assert "tunes all_gather, not all_reduce" in reason_for(p, "all_reduce", **{AG: "2"})


def test_dynamic_rules_off_with_a_forced_algorithm_is_skipped() -> None:
    p = plan(SweepSpec(name="x", engine="mpi", grid={AR: ("4",), DYNAMIC_RULES: ("0",)}))
    assert "ignored unless" in reason_for(p, "all_reduce", **{AR: "4", DYNAMIC_RULES: "0"})


def test_two_proc_needs_two_ranks() -> None:
    p = plan(SweepSpec(name="x", engine="mpi", ops=("all_gather",), nranks=4, grid={AG: ("two_proc",)}))
    assert "only with 2 ranks" in reason_for(p, "all_gather", **{AG: "6"})
    assert len(plan(SweepSpec(name="x", engine="mpi", ops=("all_gather",), grid={AG: ("6",)}, repeats=1)).points) == 2


@pytest.mark.parametrize(("engine", "backend", "name", "value"), [
    ("mpi", None, "NCCL_ALGO", "Ring"),
    ("torch", "gloo", "NCCL_PROTO", "LL"),
    ("nccl-tests", None, AR, "4"),
    ("torch", "nccl", AR, "4"),
    ("mpi", None, "NCCL_TESTS_SPLIT_MASK", "0x1"),
])
def test_knob_without_effect_on_the_engine(engine: str, backend: str | None, name: str, value: str) -> None:
    p = plan(SweepSpec(name="x", engine=engine, backend=backend, grid={name: (value,)},  # type: ignore[arg-type]
                       repeats=1))
    assert "knob has no effect on this engine" in reason_for(p, "all_reduce", **{name: value})
    assert len(p.points) == 1


def test_nccl_knobs_apply_to_torch_with_nccl() -> None:
    p = plan(SweepSpec(name="x", engine="torch", backend="nccl", grid={"NCCL_PROTO": ("LL",)}))
    assert forced(p) == [{}, {"NCCL_PROTO": "LL"}]


@pytest.mark.parametrize(("name", "value"), [("NCCL_PXN_DISABLE", "1"), ("NCCL_CROSS_NIC", "0"),
                                             ("NCCL_IB_HCA", "=mlx5_0"), ("NCCL_TESTS_SPLIT_MASK", "0x7"),
                                             ("NCCL_P2P_PXN_LEVEL", "0"), ("NCCL_IB_QPS_PER_CONNECTION", "4")])
def test_inter_node_knobs_on_one_node(name: str, value: str) -> None:
    p = plan(nccl(grid={name: (value,)}))
    assert reason_for(p, "all_reduce", **{name: value}).endswith("single node: no inter-node traffic")
    p2 = plan(nccl(nnodes=2, nranks=16, grid={name: (value,)}))
    assert forced(p2) == [{}, {name: value}]


def test_nvls_needs_nvswitch_and_hopper_when_a_topology_is_given() -> None:
    spec = nccl(grid={"NCCL_ALGO": ("NVLS", "Ring,NVLS", "^NVLS")})
    a100 = topology(nvswitch=True, model="NVIDIA A100-SXM4-80GB")
    pcie = topology(nvswitch=False, model="NVIDIA H100 PCIe")
    h100 = topology(nvswitch=True, model="NVIDIA H100 80GB HBM3")
    for topo, why in ((a100, "older than Hopper"), (pcie, "no NVSwitch")):
        p = plan(spec, topology=topo)
        assert why in reason_for(p, "all_reduce", NCCL_ALGO="NVLS")
        assert "NVLS needs NVSwitch" in reason_for(p, "all_reduce", NCCL_ALGO="Ring,NVLS")
        assert forced(p) == [{}, {"NCCL_ALGO": "^NVLS"}]
    assert len(forced(plan(spec, topology=h100))) == 4
    # without a topology the point is kept: nothing is claimed either way
    assert len(forced(plan(spec))) == 4


def test_nvls_enable_1_without_nvls_hardware() -> None:
    spec = nccl(grid={"NCCL_NVLS_ENABLE": ("0", "1", "2")})
    p = plan(spec, topology=topology(nvswitch=False, model="NVIDIA H100 PCIe"))
    assert "NCCL_NVLS_ENABLE=1 fails without NVLS hardware" in reason_for(p, "all_reduce", NCCL_NVLS_ENABLE="1")
    assert forced(p) == [{}, {"NCCL_NVLS_ENABLE": "0"}, {"NCCL_NVLS_ENABLE": "2"}]


def test_nvls_topology_from_the_bundled_hgx_h100_sample() -> None:
    node = build_node(load_captures([sample_path()]), sample="hgx-h100-8gpu")
    p = plan(nccl(grid={"NCCL_ALGO": ("NVLS",)}), topology=node)
    assert forced(p) == [{}, {"NCCL_ALGO": "NVLS"}]


def test_nvlstree_on_one_node_and_disabled_nvls() -> None:
    p = plan(nccl(grid={"NCCL_ALGO": ("NVLSTree",)}))
    assert "NVLSTree on a single node" in reason_for(p, "all_reduce", NCCL_ALGO="NVLSTree")
    p = plan(nccl(grid={"NCCL_ALGO": ("NVLS",), "NCCL_NVLS_ENABLE": ("0",)}))
    assert "disabled by NCCL_NVLS_ENABLE=0" in reason_for(p, "all_reduce", NCCL_ALGO="NVLS", NCCL_NVLS_ENABLE="0")


def test_collnet_needs_a_plugin() -> None:
    spec = nccl(nnodes=2, nranks=16, grid={"NCCL_ALGO": ("CollNetDirect", "CollNetChain")},
                per_op_grid={}, ops=("all_reduce",))
    p = plan(spec)
    assert "needs a CollNet (SHARP) plugin" in reason_for(p, "all_reduce", NCCL_ALGO="CollNetChain")
    with_plugin = plan(spec, env={"NCCL_COLLNET_PLUGIN": "libnccl-net-sharp.so"})
    assert forced(with_plugin) == [{}, {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"},
                                   {"NCCL_ALGO": "CollNetChain", "NCCL_COLLNET_ENABLE": "1"}]
    assert len(plan(spec, env={"NCCL_NET_PLUGIN": "none"}).points) == 1
    assert len(plan(dataclasses.replace(spec, collnet_plugin=True)).points) == 3
    enable = plan(nccl(grid={"NCCL_COLLNET_ENABLE": ("1",)}))
    assert "NCCL_COLLNET_ENABLE=1 needs a CollNet" in reason_for(enable, "all_reduce", NCCL_COLLNET_ENABLE="1")
    off = plan(nccl(collnet_plugin=True, grid={"NCCL_ALGO": ("CollNetChain",), "NCCL_COLLNET_ENABLE": ("0",)}))
    assert "disabled by NCCL_COLLNET_ENABLE=0" in reason_for(off, "all_reduce", NCCL_ALGO="CollNetChain",
                                                              NCCL_COLLNET_ENABLE="0")


def test_collnet_plugin_spec_field_and_collnetdirect_without_nvswitch() -> None:
    spec = nccl(collnet_plugin=True, grid={"NCCL_ALGO": ("CollNetDirect", "CollNetChain")})
    assert len(plan(spec).points) == 3
    p = plan(spec, topology=topology(nvswitch=False, model="NVIDIA A100-PCIE-40GB"))
    assert "CollNetDirect needs NVSwitch" in reason_for(p, "all_reduce", NCCL_ALGO="CollNetDirect")
    assert forced(p) == [{}, {"NCCL_ALGO": "CollNetChain", "NCCL_COLLNET_ENABLE": "1"}]


@pytest.mark.parametrize(("algo", "proto", "ok"), [
    ("NVLS", "LL", False), ("NVLS", "LL128", False), ("NVLS", "Simple", True),
    ("NVLSTree", "LL", False), ("CollNetDirect", "LL128", False), ("CollNetChain", "Simple", True),
    ("Tree", "LL", True), ("Tree", "LL128", True), ("Tree", "Simple", True),
    ("Ring", "LL", True), ("Ring", "LL128", True), ("NVLS", "LL,Simple", True),
])
def test_algorithm_protocol_pairs(algo: str, proto: str, ok: bool) -> None:
    # two nodes with CollNet on: NVLS across nodes needs it (test_nvls_across_nodes_needs_collnet)
    spec = nccl(nnodes=2, nranks=16, collnet_plugin=True, fixed_env={"NCCL_COLLNET_ENABLE": "1"},
                grid={"NCCL_ALGO": (algo,), "NCCL_PROTO": (proto,)})
    p = plan(spec)
    if ok:
        assert not p.skipped
    else:
        assert "run only with Simple" in p.skipped[0].reason


def test_nvls_across_nodes_needs_collnet() -> None:
    """NCCL >= 2.18 disables NVLS across NVLink domains unless CollNet is on (src/graph/tuning.cc); 2.24+ fails a
    forced NVLS there. nnodes stands in for the domain count unless one is given (an NVL72 rack is one domain)."""
    grid = {"NCCL_ALGO": ("NVLS", "Ring")}
    two = plan(nccl(nnodes=2, nranks=16, grid=grid))
    why = reason_for(two, "all_reduce", NCCL_ALGO="NVLS")
    assert "disables NVLS across 2 NVLink domains" in why and "NCCL_COLLNET_ENABLE=1" in why
    assert forced(two) == [{}, {"NCCL_ALGO": "Ring"}]
    plugin_only = plan(nccl(nnodes=2, nranks=16, collnet_plugin=True, grid=grid))  # CollNet installed, not on
    assert "across 2 NVLink domains" in reason_for(plugin_only, "all_reduce", NCCL_ALGO="NVLS")
    enabled = nccl(nnodes=2, nranks=16, collnet_plugin=True, grid={**grid, "NCCL_COLLNET_ENABLE": ("1",)})
    assert {"NCCL_ALGO": "NVLS", "NCCL_COLLNET_ENABLE": "1"} in forced(plan(enabled))
    assert {"NCCL_ALGO": "NVLS"} in forced(plan(nccl(nnodes=1, nranks=8, grid=grid)))
    assert {"NCCL_ALGO": "NVLS"} in forced(plan(nccl(nnodes=2, nranks=16, grid=grid), nccl_version="2.17.1"))
    spec = nccl(nnodes=4, nranks=16, grid=grid)
    one_rack = PlanContext(spec=spec, nvl_domains=1)  # four trays of one multi-node NVLink domain
    assert skip_reason("all_reduce", {"NCCL_ALGO": "NVLS"}, one_rack) is None
    assert "across 2 NVLink domains" in str(skip_reason("all_reduce", {"NCCL_ALGO": "NVLS"},
                                                        PlanContext(spec=spec, nvl_domains=2)))


def test_pat_needs_one_gpu_per_node_and_is_not_an_all_reduce_algorithm() -> None:
    p = plan(nccl(ops=("all_gather", "all_reduce"), nnodes=2, nranks=2, grid={"NCCL_ALGO": ("PAT",)}))
    assert forced(p, "all_gather") == [{}, {"NCCL_ALGO": "PAT"}]
    assert "leaves no algorithm for AllReduce" in reason_for(p, "all_reduce", NCCL_ALGO="PAT")
    p = plan(nccl(ops=("all_gather",), grid={"NCCL_ALGO": ("PAT",)}))
    assert "PAT runs only with 1 GPU per node, here 8" in reason_for(p, "all_gather", NCCL_ALGO="PAT")


def test_functions_without_an_algorithm() -> None:
    p = plan(nccl(ops=("broadcast", "all_gather", "alltoall"), grid={"NCCL_ALGO": ("Tree", "Ring")}))
    assert "leaves no algorithm for Broadcast (Broadcast runs Ring)" in reason_for(p, "broadcast", NCCL_ALGO="Tree")
    assert reason_for(p, "all_gather", NCCL_ALGO="Tree") == \
        "NCCL_ALGO=Tree leaves no algorithm for AllGather (AllGather runs Ring, CollNetDirect, NVLS, PAT)"
    assert forced(p, "broadcast") == [{}, {"NCCL_ALGO": "Ring"}]
    assert "point-to-point" in reason_for(p, "alltoall", NCCL_ALGO="Ring")


def test_per_function_selection_is_resolved_per_op() -> None:
    p = plan(nccl(ops=("all_reduce", "all_gather"), grid={"NCCL_ALGO": ("allreduce:tree", "allgather:tree")}))
    assert forced(p, "all_reduce") == [{}, {"NCCL_ALGO": "AllReduce:Tree"}, {"NCCL_ALGO": "AllGather:Tree"}]
    assert forced(p, "all_gather") == [{}, {"NCCL_ALGO": "AllReduce:Tree"}]
    assert "AllGather" in reason_for(p, "all_gather", NCCL_ALGO="AllGather:Tree")


def test_ll128_not_forced_where_nccl_would_not_enable_it() -> None:
    spec = nccl(grid={"NCCL_PROTO": ("LL128", "^LL128")})
    p = plan(spec, topology=topology(nvswitch=False, nvlink=False, model="NVIDIA L40S"))
    assert "can corrupt data" in reason_for(p, "all_reduce", NCCL_PROTO="LL128")
    assert forced(p) == [{}, {"NCCL_PROTO": "^LL128"}]
    assert len(plan(spec, topology=topology(nvswitch=True, model="NVIDIA H100 80GB HBM3")).points) == 3


def test_min_above_max_is_skipped() -> None:
    p = plan(nccl(grid={"NCCL_MIN_CTAS": ("4", "16"), "NCCL_MAX_CTAS": ("8",)}))
    assert "NCCL_MIN_CTAS=16 is above NCCL_MAX_CTAS=8" in reason_for(p, "all_reduce", NCCL_MIN_CTAS="16",
                                                                     NCCL_MAX_CTAS="8")


@pytest.mark.parametrize(("grid", "version", "why"), [
    ({"NCCL_ALGO": ("allreduce:tree",)}, "2.23.4", "per-function syntax needs NCCL 2.24.0+"),
    ({"NCCL_ALGO": ("PAT",)}, "2.22.3", "PAT needs NCCL 2.23.0+"),
    ({"NCCL_ALGO": ("NVLS",), "NCCL_COLLNET_ENABLE": ("1",)}, "2.16.2", "NVLS needs NCCL 2.17.0+"),
    ({"NCCL_MIN_CTAS": ("8",)}, "2.16.5", "NCCL_MIN_CTAS needs NCCL 2.17.0+"),
    ({"NCCL_MAX_CTAS": ("64",)}, "2.24.3", "above 32 needs NCCL 2.25.0+"),
    ({"NCCL_PROTO": ("^LL128;allreduce:LL128",)}, "2.21.5+cuda12.4", "per-function syntax"),
])
def test_nccl_version_rules(grid: dict[str, tuple[str, ...]], version: str, why: str) -> None:
    spec = nccl(ops=("all_gather",), nnodes=8, nranks=8, grid=grid, collnet_plugin=True)  # NVLS on 8 nodes: CollNet
    p = plan(spec, nccl_version=version)
    assert len(p.skipped) == 1 and why in p.skipped[0].reason
    assert not plan(spec, nccl_version="2.30.7").skipped
    assert not plan(spec).skipped


def test_bad_nccl_version() -> None:
    with pytest.raises(ConfigError, match="not a version"):
        plan(nccl(), nccl_version="latest")


# ---- presets -------------------------------------------------------------------------------------------------
def test_presets_build_and_plan() -> None:
    for name in PRESETS:
        spec = preset(name)
        assert check_spec(spec) == spec
        p = plan(spec)
        assert p.points[0].is_default
        if spec.engine == "nccl-tests":
            assert spec.fixed_env == {"NCCL_DEBUG": "WARN"}  # timed at WARN; verified in a separate INFO run


def test_demo_preset_is_small() -> None:
    spec = preset("demo")
    assert (spec.engine, spec.nranks, spec.min_bytes, spec.max_bytes) == ("mpi", 2, 8, 64 * 1024)
    assert forced(plan(spec)) == [{}, {AR: "3", DYNAMIC_RULES: "1"}, {AR: "4", DYNAMIC_RULES: "1"}]


def test_nccl_algo_proto_preset_skips_impossible_pairs() -> None:
    p = plan(preset("nccl-algo-proto"), topology=topology(nvswitch=True, model="NVIDIA H100 80GB HBM3"))
    ran = {(pt.op, pt.settings.get("NCCL_ALGO"), pt.settings.get("NCCL_PROTO")) for pt in p.points}
    assert ("all_reduce", "NVLS", "Simple") in ran and ("all_reduce", "NVLS", "LL") not in ran
    assert ("all_reduce", "Tree", "LL128") in ran and ("all_gather", "Tree", None) not in ran


def test_pxn_rails_preset_from_rails_and_topology() -> None:
    spec = preset("nccl-pxn-rails", rails=["mlx5_0", "mlx5_3"])
    assert spec.grid["NCCL_IB_HCA"] == (DEFAULT, "=mlx5_0", "=mlx5_3")
    assert spec.grid["NCCL_TESTS_SPLIT_MASK"] == (DEFAULT, "0x7")
    assert spec.nnodes == 2
    from_topo = preset("nccl-pxn-rails", rails=topology(nvswitch=True, model="H100"))
    assert from_topo.grid["NCCL_IB_HCA"] == (DEFAULT, "=mlx5_0")
    assert "NCCL_IB_HCA" not in preset("nccl-pxn-rails").grid
    one_node = plan(preset("nccl-pxn-rails", nnodes=1, nranks=8, repeats=1))
    assert len(one_node.points) == 2 and all("single node" in s.reason for s in one_node.skipped)


def test_channels_preset_ties_min_and_max() -> None:
    p = plan(preset("nccl-channels"))
    tied = forced(p)[1:]
    assert {"NCCL_MIN_CTAS": "8", "NCCL_MAX_CTAS": "8"} in tied
    assert {"NCCL_MIN_NCHANNELS": "32", "NCCL_MAX_NCHANNELS": "32"} in tied
    assert all(len(set(s.values())) == 1 for s in tied)


def test_preset_errors_and_overrides() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'nope'; presets: mpi-algos"):
        preset("nope")
    with pytest.raises(ConfigError, match="unknown spec field 'sizes'"):
        preset("demo", sizes="1M")
    spec = preset("nccl-algo-proto", nranks=16, fixed_env={"NCCL_SOCKET_IFNAME": "eth0"})
    assert spec.nranks == 16 and spec.fixed_env["NCCL_DEBUG"] == "WARN"
    assert spec.fixed_env["NCCL_SOCKET_IFNAME"] == "eth0"


# ---- YAML ----------------------------------------------------------------------------------------------------
def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_spec(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, """
name: ar
engine: nccl-tests
ops: all_reduce
min_bytes: 1K
max_bytes: "1M"
nranks: 8
grid:
  NCCL_ALGO: [default, ring, tree]
  NCCL_PROTO: simple
  NCCL_NTHREADS: [256, "", null]
per_op_grid: {}
fixed_env:
  NCCL_DEBUG: info
variants:
  - {NCCL_MIN_CTAS: 8, NCCL_MAX_CTAS: 8}
"""))
    assert spec.ops == ("all_reduce",)
    assert (spec.min_bytes, spec.max_bytes) == (1024, 1 << 20)
    assert spec.grid == {"NCCL_ALGO": (DEFAULT, "Ring", "Tree"), "NCCL_PROTO": ("Simple",),
                         "NCCL_NTHREADS": ("256", DEFAULT)}
    assert spec.fixed_env == {"NCCL_DEBUG": "INFO"}
    assert spec.variants == ({"NCCL_MIN_CTAS": "8", "NCCL_MAX_CTAS": "8"},)
    assert plan(spec).points[0].is_default


def test_load_spec_defaults_its_name_to_the_file(tmp_path: Path) -> None:
    assert load_spec(write(tmp_path, "engine: mpi\n", "my sweep.yaml")).name == "my sweep"
    assert load_spec(write(tmp_path, "", "empty.yaml")).name == "empty"


@pytest.mark.parametrize(("text", "match"), [
    ("nme: x\n", r"unknown key 'nme'; valid keys: name, engine"),
    ("grid:\n  NCCL_ALGOO: ring\n", "did you mean NCCL_ALGO"),
    ("grid:\n  NCCL_ALGO: [ring, trees]\n", "NCCL_ALGO='trees' is invalid"),
    ("grid:\n  NCCL_ALGO: [[ring]]\n", "expected a scalar"),
    ("grid: [NCCL_ALGO]\n", "expected a mapping"),
    ("min_bytes: 1X\n", "min_bytes: not a size"),
    ("nranks: two\n", "nranks: expected an integer"),
    ("check: 1\n", "check: expected true or false"),
    ("engine: slurm\n", "engine 'slurm' is unknown; valid: mpi, torch, nccl-tests"),
    ("ops: [all_reduce, allgather]\n", "unknown op 'allgather'"),
    ("- a\n- b\n", "expected a mapping of spec keys"),
    ("grid: {NCCL_ALGO: ring\n", "not valid YAML"),
    ("fixed_env:\n  NCCL_DEBUG: \"INFO\\nrm -rf /\"\n", "control characters"),
    ("max_bytes: 4\nmin_bytes: 8\n", "min_bytes <= max_bytes"),
    ("per_op_grid:\n  broadcast:\n    NCCL_ALGO: ring\n", "per_op_grid names op 'broadcast'"),
])
def test_load_spec_errors_name_the_file(tmp_path: Path, text: str, match: str) -> None:
    path = write(tmp_path, text, "bad spec.yaml")
    with pytest.raises(ConfigError, match=match) as exc:
        load_spec(path)
    assert str(exc.value).startswith(str(path))


def test_load_spec_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the spec"):
        load_spec(tmp_path / "nope.yaml")


def test_hostile_yaml_values_are_data(tmp_path: Path) -> None:
    path = write(tmp_path, "fixed_env:\n  NCCL_SOCKET_IFNAME: \"eth0; $(reboot) 'x'\"\n")
    assert load_spec(path).fixed_env == {"NCCL_SOCKET_IFNAME": "eth0; $(reboot) 'x'"}
    with pytest.raises(ConfigError):
        load_spec(write(tmp_path, "grid:\n  NCCL_ALGO: \"ring; $(reboot)\"\n", "b.yaml"))


def test_spec_from_dict_is_the_yaml_path() -> None:
    assert spec_from_dict({"name": "x", "grid": {AR: "ring"}}).grid == {AR: ("4",)}


YAML_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 100), st.text(max_size=12),
                         st.sampled_from(["ring", "tree", "1M", "default", "0x7", "LL128", "^nvls"]))


@settings(max_examples=150, deadline=None)
@given(data=st.dictionaries(st.sampled_from(["name", "engine", "ops", "min_bytes", "grid", "nranks", "bogus"]),
                            st.one_of(YAML_SCALARS, st.lists(YAML_SCALARS, max_size=3),
                                      st.dictionaries(st.sampled_from(["NCCL_ALGO", AR, "NCCL_X"]), YAML_SCALARS,
                                                      max_size=2)),
                            max_size=5))
def test_spec_loading_raises_only_config_error(data: dict[str, object]) -> None:
    try:
        spec = spec_from_dict(data)
    except ConfigError:
        return
    plan(spec)
