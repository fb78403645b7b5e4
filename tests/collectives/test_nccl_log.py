"""NCCL_DEBUG=INFO log parsing: own fixtures per NCCL generation, the shared corpus, hypothesis, the CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.cli import main
from collscope.collectives.nccl_log.build import LogBuilder
from collscope.collectives.nccl_log.effects import allowed_names
from collscope.collectives.nccl_log.lines import iter_log_lines, split_line
from collscope.collectives.nccl_log.messages import parse_connection, parse_ring_order, parse_trees
from collscope.collectives.nccl_log.parse import (
    NcclLog,
    algorithms_used,
    forced_setting_effects,
    ib_devices_used,
    parse_nccl_log,
    protocols_used,
    read_nccl_log,
)
from collscope.collectives.nccl_log.records import NetInfo
from collscope.collectives.nccl_log.tuning import normalize_algorithm, parse_algo_choice
from collscope.errors import ParseError
from tests.corpus import CORPUS, corpus_params, skip_reason, strip_corpus_header

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-debug"
MODERN = FIXTURES / "nccl2.24.3-2node-16rank-pxn-gdr-tuning-blocks.log"
OLD = FIXTURES / "nccl2.6.4-2node-4rank-old-trees-old-tuning.log"
STRIPPED = FIXTURES / "nccl2.19.3-1node-4gpu-prefix-stripped.log"
CLOUDWATCH = FIXTURES / "nccl2.21.5-8gpu-cloudwatch-timestamp-lines.log"
OLDEST = FIXTURES / "nccl2.3.7-4gpu-ring-order-old-transports.log"

DESIGN_KEYS = {"nccl_version", "hosts", "nranks", "nnodes", "local_ranks", "channels", "rings", "trees",
               "transports", "gdr", "pxn", "nvls", "collnet", "env", "tuning", "warnings"}
EXTRA_KEYS = {"source", "channel_counts", "ring_neighbours", "net_connections", "algo_proto_calls", "calls_logged",
              "net", "inferred", "choices", "rank_nics"}


def parse(path: Path) -> NcclLog:
    return read_nccl_log(path)


def tree(log: NcclLog, rank: int, channel: int) -> tuple[int | None, tuple[int, ...]]:
    [link] = [t for t in log.trees if t.rank == rank and t.channel == channel]
    return link.parent, link.children


# --- own fixtures ---------------------------------------------------------------------------------


def test_modern_two_node_log():
    log = parse(MODERN)
    assert log.nccl_version == "2.24.3+cuda12.4"
    assert log.hosts == ("gpu-node-01", "gpu-node-02")
    assert (log.nranks, log.nnodes, log.local_ranks, log.channels) == (16, 2, 8, 2)
    assert log.inferred == ()
    assert log.channel_counts == {"coll": 2, "collnet": 2, "nvls": 0, "p2p": 2, "p2p_per_peer": 2}
    assert [(r.channel, r.ranks) for r in log.rings] == [(0, tuple(range(16))), (1, tuple(range(16)))]
    assert len(log.trees) == 12
    assert tree(log, 0, 1) == (8, (1,))
    assert tree(log, 8, 1) == (None, (9, 0))
    assert tree(log, 15, 0) == (14, ())
    assert log.transports == {"NET/IB": 9, "P2P/IPC": 6}
    assert {c.proxy_rank for c in log.connections} == {None, 0, 8}
    assert sum(c.gdr for c in log.connections) == 9
    assert (log.gdr, log.pxn, log.nvls, log.collnet) == (True, 1, False, None)
    assert log.env == {"NCCL_SOCKET_IFNAME": "bond0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1", "NCCL_IB_GID_INDEX": "3",
                       "NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "2"}
    assert log.net.network == "IB" and log.net.ib_devices == ("mlx5_0:1", "mlx5_3:1")
    assert log.net.ib_hca_env == "=mlx5_0:1,mlx5_3:1" and log.net.relaxed_ordering is True
    assert log.algo_proto_calls == {("AllReduce", "Ring", "LL"): 1, ("AllReduce", "Ring", "LL128"): 2,
                                    ("AllReduce", "Ring", "Simple"): 1, ("AllGather", "Ring", "Simple"): 1}
    assert log.calls_logged == {"AllReduce": 8, "AllGather": 1}
    assert len(log.warnings) == 1 and "NCCL_MAX_NCHANNELS=2 is set and limits them" in log.warnings[0]


def test_modern_tuning_blocks():
    table = parse(MODERN).tuning
    assert table is not None and table.layout == "blocks"
    doc = table.to_json()
    assert doc["algorithms"] == ["Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"]
    assert doc["protocols"] == ["LL", "LL128", "Simple"]
    assert len(table.columns) == 21
    assert doc["max_nthreads"]["CollNetDirect"] == {"LL": 0, "LL128": 0, "Simple": 640}
    assert doc["max_nthreads"]["PAT"]["Simple"] == 512
    assert list(doc["cells"]) == ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"]
    assert doc["cells"]["AllReduce"]["Ring"]["Simple"] == {"latency_us": 36.0, "algbw_gbps": 23.0}
    assert doc["cells"]["AllReduce"]["Tree"]["LL"] == {"latency_us": 18.3, "algbw_gbps": 0.0}
    assert doc["cells"]["Broadcast"]["PAT"]["Simple"] == {"latency_us": 0.0, "algbw_gbps": 0.0}


def test_modern_forced_settings_took_effect():
    log = parse(MODERN)
    assert algorithms_used(log) == {"Ring"}
    assert protocols_used(log) == {"LL", "LL128", "Simple"}
    assert ib_devices_used(log) == ["mlx5_0:1", "mlx5_3:1"]
    effects = forced_setting_effects(log)
    assert set(effects) == {"NCCL_ALGO", "NCCL_IB_HCA", "NCCL_MAX_NCHANNELS"}
    assert effects["NCCL_ALGO"] == {"forced": "Ring", "used": ["Ring"], "applied": True, "outside": []}
    assert effects["NCCL_IB_HCA"]["applied"] is True
    assert effects["NCCL_MAX_NCHANNELS"] == {"forced": "2", "used": 2, "applied": True, "outside": []}


@pytest.mark.parametrize(("line", "applied"), [
    ("NCCL_MAX_CTAS set by environment to 2.", True), ("NCCL_MAX_CTAS set by environment to 1.", False),
    ("NCCL_MIN_CTAS set by environment to 2.", True), ("NCCL_MIN_CTAS set by environment to 4.", False),
])
def test_ctas_judged_by_the_coll_channel_count(line, applied):
    """NCCL caps the channels by NCCL_MAX_CTAS and copies them up to NCCL_MIN_CTAS before it prints
    'N coll channels' (src/graph/connect.cc ncclTopoPostset): that count, and only it, is the evidence."""
    text = MODERN.read_text().replace("NCCL_MAX_NCHANNELS set by environment to 2.", line)
    effects = forced_setting_effects(parse_nccl_log(text, "ctas"))
    name = line.split()[0]
    assert effects[name] == {"forced": line.split()[-1].rstrip("."), "used": 2, "applied": applied, "outside": []}


@pytest.mark.parametrize(("line", "strip_pxn_gdr", "effect"), [
    # the log's rings use PXN (use ring PXN 1, via NET/IB/0(0)) and GPUDirect RDMA (GDR 1, /GDRDMA)
    ("NCCL_PXN_DISABLE set by environment to 1.", False, {"used": "PXN", "applied": False}),
    ("NCCL_PXN_DISABLE set by environment to 1.", True, {"used": "no PXN", "applied": True}),
    ("NCCL_PXN_DISABLE set by environment to 0.", False, {"used": "PXN", "applied": None}),  # the default
    ("NCCL_NET_GDR_LEVEL set by environment to LOC", False, {"used": "GDRDMA", "applied": False}),
    ("NCCL_NET_GDR_LEVEL set by environment to 0", True, {"used": "no GDRDMA", "applied": True}),
    ("NCCL_NET_GDR_LEVEL set by environment to PHB", False, {"used": "GDRDMA", "applied": None}),  # per distance
], ids=["pxn-off-but-used", "pxn-off", "pxn-default", "gdr-loc-but-used", "gdr-0", "gdr-phb-unchecked"])
def test_pxn_and_gdr_settings_judged_by_the_network_connections(line, strip_pxn_gdr, effect):
    text = MODERN.read_text().replace("NCCL_MAX_NCHANNELS set by environment to 2.", line)
    if strip_pxn_gdr:  # as NCCL prints them with PXN / GPUDirect RDMA off
        text = text.replace("use ring PXN 1 GDR 1", "use ring PXN 0 GDR 0").replace("/GDRDMA", "")
        text = text.replace("NET/IB/0(0)", "NET/IB/0")
    name, value = line.split()[0], line.split()[-1].rstrip(".")
    assert forced_setting_effects(parse_nccl_log(text, "net"))[name] == {"forced": value, **effect, "outside": []}


def test_ctas_without_the_coll_channel_line_are_unchecked():
    """Channel/ring lines are not the count NCCL applied the CTA bounds to: no 'coll channels' line, no verdict."""
    text = MODERN.read_text().replace("NCCL_MAX_NCHANNELS set by environment to 2.", "NCCL_MAX_CTAS set by "
                                      "environment to 2.")
    text = "\n".join(line for line in text.splitlines() if " coll channels, " not in line) + "\n"
    log = parse_nccl_log(text, "no count")
    assert log.channels == 2 and log.channel_counts is None  # the channels are known from other lines
    assert forced_setting_effects(log)["NCCL_MAX_CTAS"]["applied"] is None


def test_old_26_log_split_trees_busid_brackets_and_wide_tuning_table():
    log = parse(OLD)
    assert log.nccl_version == "2.6.4+cuda10.1"
    assert log.hosts == ("ib-a", "ib-b")
    assert (log.nranks, log.nnodes, log.local_ranks, log.channels) == (4, 2, 2, 2)
    assert log.inferred == ("nnodes", "local_ranks")
    assert len(log.trees) == 8
    assert tree(log, 2, 1) == (None, (3, 0))
    assert tree(log, 0, 1) == (2, (1,))
    assert log.transports == {"NET/IB": 6, "P2P/IPC": 3}
    assert (log.gdr, log.pxn, log.nvls, log.collnet) == (True, None, None, None)
    assert log.env == {"NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING", "NCCL_PROTO": "Simple"}
    assert log.net.ib_devices == ("mlx5_0:1",) and log.net.relaxed_ordering is False
    table = log.tuning
    assert table is not None and table.layout == "one-line" and len(table.columns) == 9
    assert table.columns[3] == ("Ring", "LL")
    assert table.max_nthreads[("Ring", "Simple")] == 256
    assert table.cells["AllReduce"][("Tree", "Simple")] == (28.2, 9.9)
    assert table.cells["ReduceScatter"][("Ring", "LL128")] == (14.6, 15.7)
    assert forced_setting_effects(log)["NCCL_PROTO"]["applied"] is None


def test_prefix_stripped_log():
    log = parse(STRIPPED)
    assert log.hosts == ()
    assert log.nccl_version == "2.19.3+cuda12.2"
    assert (log.nranks, log.nnodes, log.local_ranks, log.channels) == (4, 1, 4, 4)
    assert log.channel_counts == {"coll": 4, "nvls": 0, "p2p": 4, "p2p_per_peer": 2}
    assert [r.ranks for r in log.rings] == [(0, 1, 2, 3), (0, 1, 2, 3), (0, 3, 2, 1), (0, 3, 2, 1)]
    assert tree(log, 2, 2) == (3, (1,))
    assert log.transports == {"P2P/CUMEM": 4, "SHM": 2}
    assert (log.gdr, log.pxn, log.nvls) == (None, None, False)
    assert log.net.network == "Socket" and log.net.socket_devices == ("ens3",)
    assert log.env == {"NCCL_SOCKET_IFNAME": "ens3"}


def test_timestamp_lines_between_messages():
    log = parse(CLOUDWATCH)
    assert log.hosts == ("trainer-0",)
    assert log.nccl_version == "2.21.5+cuda12.4"
    assert (log.nranks, log.nnodes, log.local_ranks, log.channels) == (8, 1, 8, 24)
    assert log.net.network == "Libfabric" and log.net.ofi_provider == "efa"
    assert log.algo_proto_calls == {(None, "Ring", "LL"): 1, (None, "Ring", "Simple"): 1}
    assert log.calls_logged == {"AllReduce": 2}
    assert log.warnings == ("NCCL WARN NET/OFI Request 0x7f2e10 completed with error. RC: 12. "
                            "Error: Connection timed out",)
    effect = forced_setting_effects(log)["NCCL_PROTO"]
    assert effect == {"forced": "^LL128", "used": ["LL", "Simple"], "applied": True, "outside": []}


def test_nccl_23_ring_order_and_transports():
    log = parse(OLDEST)
    assert log.nccl_version == "2.3.7+cuda9.2"
    assert (log.nranks, log.channels) == (4, 2)
    assert [r.ranks for r in log.rings] == [(0, 1, 2, 3), (0, 3, 2, 1)]
    assert log.transports == {"P2P/IPC": 4, "SHM": 1}


# --- line prefixes --------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "host", "pid", "tid", "dev", "level", "message"), [
    ("node1:123:456 [3] NCCL INFO Using network IB", "node1", 123, 456, 3, "INFO", "Using network IB"),
    ("n1:1:2 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3", "n1", 1, 2, 0, "WARN",
     "socketFinalizeAccept: wrong type 4 != 3"),
    ("n1:1:2 [0] 1.234567 ncclGroupEnd:123 NCCL TRACE done", "n1", 1, 2, 0, "TRACE", "done"),
    ("[2025-01-02 03:04:05] n1:1:2 [0] NCCL INFO Connected all rings", "n1", 1, 2, 0, "INFO", "Connected all rings"),
    ("2024-12-04T05:27:44.078Z algo-1:9:9 [5] NCCL INFO x", "algo-1", 9, 9, 5, "INFO", "x"),
    ("[1,0]<stdout>:gpu-01:77:88 [1] NCCL INFO x", "gpu-01", 77, 88, 1, "INFO", "x"),
    ("0: gpu-01:77:88 [1] NCCL INFO x", "gpu-01", 77, 88, 1, "INFO", "x"),
    ("[0] h100clust-worker-1:497888:497888 [0] NCCL INFO 8 Bytes -> Algo 1 proto 0 time 5.0", "h100clust-worker-1",
     497888, 497888, 0, "INFO", "8 Bytes -> Algo 1 proto 0 time 5.0"),
    ("<cluster_name>:919:1150 [0] NCCL INFO  Max NThreads |  512 |", "<cluster_name>", 919, 1150, 0, "INFO",
     " Max NThreads |  512 |"),
    ("NCCL version 2.24.3+cuda12.2", None, None, None, None, None, "NCCL version 2.24.3+cuda12.2"),
])
def test_split_line(raw, host, pid, tid, dev, level, message):
    line = split_line(raw, 7)
    assert line is not None and line.lineno == 7
    assert (line.host, line.pid, line.tid, line.dev, line.level, line.message) == (host, pid, tid, dev, level, message)


@pytest.mark.parametrize("raw", ["", "   ", "2024-12-04T05:27:44.078Z", "[2025-01-02 03:04:05]"])
def test_split_line_skips_blank_and_timestamp_lines(raw):
    assert split_line(raw, 1) is None


# --- single messages ------------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "transport", "src", "dst", "direction", "dev", "proxy", "gdr"), [
    ("Channel 00/0 : 2[2] -> 3[3] via P2P/direct pointer/read", "P2P/direct pointer", 2, 3, None, None, None, False),
    ("Channel 07/0 : 38[6] -> 32[0] via P2P/CUMEM", "P2P/CUMEM", 38, 32, None, None, None, False),
    ("Channel 03/1 : 0[0] -> 5[5] via P2P/indirect/4[4]", "P2P/indirect", 0, 5, None, None, None, False),
    ("Channel 00/1 : 0[0] -> 1[1] via P2P/MNNVL/read/CE", "P2P/MNNVL", 0, 1, None, None, None, False),
    ("Channel 00 : 3[3] -> 4[4] via SHM/direct/direct", "SHM", 3, 4, None, None, None, False),
    ("Channel 00 : 3[4a000] -> 6[44000] [send] via NET/IB/0/GDRDMA", "NET/IB", 3, 6, "send", 0, None, True),
    ("Channel 02/0 : 7[7] -> 8[0] [send] via NET/IB/1(5)/GDRDMA", "NET/IB", 7, 8, "send", 1, 5, True),
    ("Channel 02/0 : 7[7] -> 8[0] [send] via NET/IB/3/GDRDMA(PCI)/Shared", "NET/IB", 7, 8, "send", 3, None, True),
    ("Channel 06/0 : 54[6] -> 38[6] [receive] via NET/IBext_v8/1", "NET/IBext_v8", 54, 38, "receive", 1, None, False),
    ("Ring 00 : 1[160] -> 0[160] [receive] via NET/AWS Libfabric/0", "NET/AWS Libfabric", 1, 0, "receive", 0, None,
     False),
    ("Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3", "NET/Socket", 15, 6, "send", 3, None, False),
    ("Ring 00 : 0 -> 1 via NET/IB/0", "NET/IB", 0, 1, None, 0, None, False),
    ("Ring 00 : 2[2] -> 3[3] via direct shared memory", "SHM", 2, 3, None, None, None, False),
    ("CollNet 01/0 : 3 [send] via COLLNET/SHARP/0/GDRDMA", "COLLNET/SHARP", 3, None, "send", 0, None, True),
])
def test_parse_connection(message, transport, src, dst, direction, dev, proxy, gdr):
    conn = parse_connection(message)
    assert conn is not None
    assert (conn.transport, conn.src_rank, conn.dst_rank, conn.direction, conn.net_device, conn.proxy_rank,
            conn.gdr) == (transport, src, dst, direction, dev, proxy, gdr)


def test_ring_order_is_not_a_connection():
    assert parse_connection("Channel 00/02 :    0   1   2   3") is None
    order = parse_ring_order("Channel 01/02 :    0   1   2   3")
    assert order is not None and order[0].ranks == (0, 1, 2, 3) and order[1] == 2
    assert parse_ring_order("Ring 02 : 2 -> 0 -> 1") is None


@pytest.mark.parametrize(("message", "expected"), [
    ("Trees [0] 26->25->-1/-1/-1 [1] 24->25->27/-1/-1", [(25, 0, 26, ()), (25, 1, 24, (27,))]),
    ("Trees [0] -1/-1/-1->1->0|0->1->-1/-1/-1", [(1, 0, 0, ())]),
    ("Trees [0] 5/-1/-1->6->4 [1] 5/7/-1->6->-1", [(6, 0, 4, (5,)), (6, 1, None, (5, 7))]),
])
def test_parse_trees_all_generations(message, expected):
    links = parse_trees(message)
    assert links is not None
    assert [(t.rank, t.channel, t.parent, t.children) for t in links] == expected


@pytest.mark.parametrize(("message", "expected"), [
    ("AllReduce: 33554432 Bytes -> Algo NVLS_TREE proto SIMPLE channel{Lo..Hi}={0..15}",
     ("AllReduce", "NVLSTree", "Simple", 33554432)),
    ("AllGather: 1024 Bytes -> Algo 1 proto 0 time 10.5", ("AllGather", "Ring", "LL", 1024)),
    ("8589934592 Bytes -> Algo 1 proto 2 time 86069.968750", (None, "Ring", "Simple", 8589934592)),
    ("Collective AllReduce(Sum, float32, RING, LL128) count=1 devFuncId=3", ("AllReduce", "Ring", "LL128", None)),
    ("Broadcast: chose algorithm Tree protocol LL", ("Broadcast", "Tree", "LL", None)),
])
def test_parse_algo_choice(message, expected):
    choice = parse_algo_choice(message)
    assert choice is not None
    assert (choice.op, choice.algorithm, choice.protocol, choice.size_bytes) == expected


def test_algorithm_names_normalise():
    assert [normalize_algorithm(n) for n in ("TREE", "COLLNET_DIRECT", "nvlstree", "6", "9", "CollNet")] == [
        "Tree", "CollNetDirect", "NVLSTree", "PAT", "algo9", "CollNetDirect"]


def test_tuning_table_lines_interleaved_with_another_thread():
    text = "\n".join([
        "h:1:10 [0] NCCL INFO Latency/AlgBw |    Tree/    LL |    Ring/Simple |",
        "h:1:11 [1] NCCL INFO Trees [0] -1/-1/-1->1->0",
        "h:1:10 [0] NCCL INFO  Max NThreads |            512 |            256 |",
        "h:1:11 [1] NCCL INFO     Broadcast |     9.9/   9.9 |     9.9/   9.9 |",
        "h:1:10 [0] NCCL INFO     AllReduce |     4.4/   1.5 |     8.0/  12.0 |",
    ])
    table = parse_nccl_log(text).tuning
    assert table is not None
    assert table.max_nthreads == {("Tree", "LL"): 512, ("Ring", "Simple"): 256}
    assert table.cells == {"AllReduce": {("Tree", "LL"): (4.4, 1.5), ("Ring", "Simple"): (8.0, 12.0)}}


# --- forced settings ------------------------------------------------------------------------------


def _log_with(env: str, choices: list[str], extra: str = "") -> NcclLog:
    lines = [f"h:1:1 [0] NCCL INFO {env}"] + [f"h:1:1 [0] NCCL INFO {c}" for c in choices]
    return parse_nccl_log("\n".join(lines) + "\n" + extra)


def test_forced_algorithm_that_did_not_apply():
    log = _log_with("NCCL_ALGO set by environment to Tree",
                    ["AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}",
                     "AllGather: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"])
    effect = forced_setting_effects(log)["NCCL_ALGO"]
    assert effect["applied"] is False and effect["used"] == ["Ring", "Tree"]
    assert effect["outside"] == [{"op": "AllGather", "algo": "Ring", "proto": "LL", "calls": 1}]


def test_forced_algorithm_per_function_form():
    log = _log_with("NCCL_ALGO set by environment to allreduce:tree;broadcast:ring",
                    ["AllReduce: 1024 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}",
                     "AllGather: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"])
    assert forced_setting_effects(log)["NCCL_ALGO"]["applied"] is True


def test_forced_setting_without_evidence():
    log = _log_with("NCCL_ALGO set by environment to Tree", [])
    assert forced_setting_effects(log)["NCCL_ALGO"] == {"forced": "Tree", "used": [], "applied": None, "outside": []}


@pytest.mark.parametrize(("hca", "applied"), [
    ("mlx5_0:1,mlx5_2:1", True), ("mlx5", True), ("^mlx5_2", False), ("=mlx5_0", False), ("mlx5_0:2,mlx5_2", False),
])
def test_forced_ib_hca(hca, applied):
    using = "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO]; OOB ib0:1.2.3.4<0>"
    log = _log_with(f"NCCL_IB_HCA set to {hca}", [using])
    assert forced_setting_effects(log)["NCCL_IB_HCA"]["applied"] is applied


def test_builder_returns_a_typed_record_and_the_first_network_facts_win():
    lines = ["h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO]; OOB ib0:1.2.3.4<0>",
             "h2:2:2 [0] NCCL INFO NET/IB : Using [0]mlx5_4:1/IB",
             "h1:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0",
             "h2:2:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5_4",
             "h1:1:1 [0] NCCL INFO Using network IB",
             "h2:2:2 [0] NCCL INFO Using network Socket",
             "h1:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8",
             "h1:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
             "h2:2:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"]
    builder = LogBuilder()
    for line in iter_log_lines("\n".join(lines)):
        builder.feed(line)
    log = builder.finish("two ranks.log")
    assert isinstance(log, NcclLog) and isinstance(log.net, NetInfo) and log.source == "two ranks.log"
    assert log.net.ib_devices == ("mlx5_0:1", "mlx5_2:1") and log.net.relaxed_ordering is True
    assert log.net.oob is not None and log.net.oob.startswith("ib0")
    assert (log.net.ib_hca_env, log.net.network, log.net.net_plugin) == ("mlx5_0", "IB", "NCCL RDMA Plugin v8")
    assert log.net.collnet_plugin is None and log.net.socket_devices == () and log.net.gdr_hcas == {"mlx5_0": True}
    assert log == parse_nccl_log("\n".join(lines), source="two ranks.log")


def test_allowed_names_forms():
    assert allowed_names("Ring,Tree", normalize_algorithm) == {None: {"Ring", "Tree"}}
    assert allowed_names("^NVLS", normalize_algorithm) == {None: {"^NVLS"}}
    assert allowed_names("allreduce:nvlstree,ring;allgather:ring", normalize_algorithm) == {
        "allreduce": {"NVLSTree", "Ring"}, "allgather": {"Ring"}}


# --- errors and damage ----------------------------------------------------------------------------


def test_text_without_nccl_lines_is_a_parse_error():
    with pytest.raises(ParseError) as err:
        parse_nccl_log("hello\nworld\n", source="run.log")
    assert err.value.source == "run.log" and "NCCL_DEBUG=INFO" in str(err.value)
    with pytest.raises(ParseError):
        parse_nccl_log("")


def test_conflicting_values_become_warnings():
    log = parse_nccl_log("\n".join([
        "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree",
        "h:2:2 [1] NCCL INFO NCCL_ALGO set by environment to Ring",
        "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
        "h:1:1 [0] NCCL INFO comm 0x2 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0",
    ]))
    assert log.env == {"NCCL_ALGO": "Tree"} and log.nranks == 8
    assert any("NCCL_ALGO differs" in w for w in log.warnings)
    assert any("nranks 4, 8" in w for w in log.warnings)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_arbitrary_text_raises_only_parse_error(text):
    try:
        log = parse_nccl_log(text)
    except ParseError:
        return
    json.dumps(log.to_json())


@settings(max_examples=100, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from([MODERN, OLD, STRIPPED, CLOUDWATCH, OLDEST]))
def test_damaged_fixtures_parse_best_effort(rnd: random.Random, path: Path):
    lines = path.read_text().splitlines()
    rnd.shuffle(lines)
    damaged = [ln[: rnd.randrange(len(ln) + 1)] if rnd.random() < 0.3 else ln for ln in lines[: rnd.randrange(1, 60)]]
    try:
        log = parse_nccl_log("\n".join(damaged))
    except ParseError:
        return
    assert set(log.to_json()) == DESIGN_KEYS | EXTRA_KEYS


# --- shared corpus --------------------------------------------------------------------------------

CORPUS_FILES = sorted((CORPUS / "nccl-debug").glob("*.txt")) + [
    CORPUS / "from-nccl-research" / name for name in (
        "nccl-1412_init_comm_channels_trees.txt", "nccl-transport-lines_various_issues.txt",
        "nccl-tuning-table_old_and_new_formats.txt")
    if (CORPUS / "from-nccl-research" / name).exists()
] + [p for p in sorted((CORPUS / "nccl-tests").glob("*.txt")) if "NCCL INFO" in p.read_text(errors="replace")]

# file -> expected facts (a subset of the JSON document); every file of the folders above must be listed
EXPECTED: dict[str, dict] = {
    "16rank-2node-no-nvls-ring-order-trees-p2p-chunksize-nccl-tests-188.txt": {
        "hosts": ["user"], "nranks": 16, "nnodes": None, "channels": 2, "nvls": False, "transports": {},
        "rings": [{"channel": 0, "ranks": [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 14, 13, 12, 11, 10, 9]},
                  {"channel": 1, "ranks": [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 14, 13, 12, 11, 10, 9]}],
        "n_trees": 6, "tuning": None, "inferred": ["nranks"]},
    "2node-4gpu-dmabuf-initrank-start-commid-nccl-tests-252.txt": {
        "hosts": ["kolyoz1", "kolyoz2"], "nranks": 8, "nnodes": 2, "local_ranks": 4, "channels": None,
        "inferred": ["nnodes", "local_ranks"], "n_trees": 0},
    "2node-net-ib-using-ro-oob-ib-hca-env-nccl-tests-228.txt": {
        "hosts": ["user"], "nranks": None, "env": {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5_2:1,mlx5_0:1"},
        "net.network": "IB", "net.ib_devices": ["mlx5_0:1", "mlx5_2:1"], "net.ib_hca_env": "mlx5_2:1,mlx5_0:1"},
    "h100-2node-16rank-nvls-available-nvls-heads-nccl-1357.txt": {
        "hosts": ["qh100-gpu19", "qh100-gpu20"], "nranks": 16, "nnodes": 2, "local_ranks": 8, "nvls": True,
        "inferred": []},
    "h800-8gpu-trees-16ch-ring-order-nvls-unsupported-nccl-892.txt": {
        "hosts": ["036260b61d3a"], "nranks": 8, "channels": 16, "n_trees": 48, "nvls": None,
        "rings": [{"channel": 0, "ranks": [0, 3, 1, 2, 4, 7, 5, 6]}]},
    "nccl2.24.3-h100-8gpu-sharp-plugin-prefixless-lines-nccl-1584.txt": {
        "nccl_version": "2.24.3+cuda12.2", "hosts": [], "nranks": 8, "nvls": True, "collnet": None,
        "env": {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_PCI_RELAXED_ORDERING": "1"}, "net.network": "IBext_v8",
        "net.ib_devices": [f"ibp{i}:1" for i in range(8)], "net.collnet_plugin": "SHARP (v8)"},
    "nccl2.6.4-2gpu-graph-search-patterns-tuning-interleaved-nccl-340.txt": {
        "hosts": ["wangying-system"], "nranks": 2, "channels": 1, "n_trees": 1,
        "env": {"NCCL_MAX_NCHANNELS": "1", "NCCL_NTHREADS": "256"},
        "tuning.layout": "one-line", "tuning.algorithms": ["Tree", "Ring", "CollNet"], "tuning.cells": {},
        "tuning.max_nthreads.Ring": {"LL": 256, "LL128": 640, "Simple": 256}},
    "sagemaker-cloudwatch-timestamp-lines-interleaved-aws-ofi-nccl-715.txt": {
        "hosts": ["algo-1"], "nranks": None, "nvls": False, "tuning": None},
    "tuning-table-old-format-t4-2node-roce-nccl-tests-89.txt": {
        "hosts": ["n129-118-012"], "tuning.layout": "one-line",
        "tuning.cells.Broadcast.Ring.Simple": {"latency_us": 18.0, "algbw_gbps": 9.0},
        "tuning.cells.Broadcast.Tree.LL": {"latency_us": 0.0, "algbw_gbps": 0.0},
        "tuning.max_nthreads.Ring": {"LL": 512, "LL128": 640, "Simple": 256}},
    "nccl-1412_init_comm_channels_trees.txt": {
        "hosts": ["swat1-04"], "nranks": 16, "nnodes": 2, "local_ranks": 8, "channels": 8, "n_trees": 8,
        "rings.2": {"channel": 2, "ranks": [0, 5, 4, 7, 14, 11, 10, 9, 8, 13, 12, 15, 6, 3, 2, 1]}},
    "nccl-transport-lines_various_issues.txt": {
        "transports": {"P2P/IPC": 2, "NET/IB": 1, "NET/IBext_v8": 1, "NET/Socket": 1, "P2P/CUMEM": 1,
                       "P2P/direct pointer": 1, "SHM": 1},
        "gdr": True, "nvls": True, "nranks": 4, "nnodes": 2, "local_ranks": 2,
        "ring_neighbours": [{"channel": 2, "prev": 2, "rank": 0, "next": 1}]},
    "nccl-tuning-table_old_and_new_formats.txt": {
        "env": {"NCCL_ALGO": "Tree"},
        "tuning.algorithms": ["Tree", "Ring", "CollNet", "CollNetDirect"],
        "tuning.max_nthreads.CollNetDirect": {"LL": 0, "LL128": 0, "Simple": 640},
        "algo_proto_calls": [{"op": None, "algo": "Ring", "proto": "Simple", "calls": 1},
                             {"op": "AllReduce", "algo": "Tree", "proto": "LL128", "calls": 1},
                             {"op": "AllReduce", "algo": "NVLSTree", "proto": "Simple", "calls": 1}]},
    "all_reduce_perf-gtx1050ti-gtx950-g2-debug-info-PARTIAL.txt": {
        "nccl_version": "2.16.5+cuda11.8", "hosts": ["Meowth"], "nranks": 2, "nnodes": 1, "local_ranks": 2,
        "net.network": "Socket", "net.socket_devices": ["eth0", "virbr0"],
        "inferred": ["nranks", "nnodes", "local_ranks"]},
    "all_reduce_perf-k80-4gpu-azureml-old-error-column-info-launch-mode.txt": {
        "hosts": ["2e3f9af7241040529530e810ce60fe5d000002"], "nranks": 4, "nnodes": 1, "local_ranks": 4},
    "all_reduce_perf-p3dn-v100-2node-efa-nccl2.6.4-debug-info-interleaved.txt": {
        "nccl_version": "2.6.4+cuda10.2", "hosts": ["ip-192-168-16-52", "ip-192-168-2-54"], "nranks": 2,
        "nnodes": 2, "local_ranks": 1, "channels": 4, "n_trees": 8, "transports": {"NET/AWS Libfabric": 16},
        "gdr": False, "net.network": "AWS Libfabric", "net.ofi_provider": "efa"},
}


def _lookup(doc: dict, dotted: str):
    value = doc
    for part in dotted.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.mark.skipif(not CORPUS.exists(), reason=skip_reason())
@pytest.mark.parametrize("path", corpus_params(CORPUS_FILES))
def test_corpus_file(path: Path):
    log = parse_nccl_log(strip_corpus_header(path.read_text(errors="replace")), source=path.name)
    doc = json.loads(json.dumps(log.to_json()))
    assert set(doc) == DESIGN_KEYS | EXTRA_KEYS
    assert path.name in EXPECTED, f"add expected values for {path.name}"
    for key, want in EXPECTED[path.name].items():
        if key == "n_trees":
            assert len(doc["trees"]) == want
        else:
            assert _lookup(doc, key) == want, key


# --- command line ---------------------------------------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_cli_json_document():
    code, out, _ = run("nccl-log", str(MODERN), "--json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == DESIGN_KEYS | EXTRA_KEYS
    assert doc["transports"] == {"NET/IB": 9, "P2P/IPC": 6}
    assert (doc["gdr"], doc["pxn"], doc["nvls"], doc["collnet"]) == (True, 1, False, None)
    assert doc["rings"][0] == {"channel": 0, "ranks": list(range(16))}
    assert doc["trees"][0] == {"rank": 0, "channel": 0, "parent": None, "children": [1]}
    assert doc["net_connections"] == {"total": 9, "gdr": 9, "via_proxy": 4}
    assert {"op": "AllReduce", "algo": "Ring", "proto": "LL128", "calls": 2} in doc["algo_proto_calls"]
    assert set(doc["tuning"]) == {"layout", "algorithms", "protocols", "max_nthreads", "cells"}


def test_cli_summary():
    code, out, _ = run("nccl-log", str(MODERN))
    assert code == 0
    assert "2.24.3+cuda12.4" in out and "16 ranks on 2 nodes, 8 per node" in out
    assert "NET/IB 9, P2P/IPC 6 (9 GDRDMA, 4 via a PXN proxy rank)" in out
    assert "NCCL_ALGO=Ring: took effect" in out


def test_cli_bad_input_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "not a log; really.txt"
    bad.write_text("# nThread 1 nGpus 1\n#  size  count\n")
    code, out, err = run("nccl-log", str(bad))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and str(bad) in err and "NCCL_DEBUG=INFO" in err
    missing = tmp_path / "missing.log"
    code, _, err = run("nccl-log", str(missing), "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(missing) in err
    code, _, err = run("nccl-log", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(tmp_path) in err


def test_cli_help_has_example():
    code, out, _ = run("nccl-log", "--help")
    assert code == 0 and "Example" in out and "collscope nccl-log run.log" in out
    code, out, _ = run("--help")
    assert code == 0 and "nccl-log" in out


# An NCCL line glued to an nccl-tests row head: nccl-tests prints size..root, runs the test, then the times, and with
# NCCL >= 2.22 the connections made at first use print in between (an HPC centre's 2-node H100 log, NCCL 2.22.3).
CUT_ROW = FIXTURES.parent / "nccl-tests" / "published" / "all_reduce_perf-v2.22-2x2-row-cut-by-lazy-connect-info.txt"


def test_a_line_glued_to_an_nccl_tests_row_takes_its_threads_host():
    log = read_nccl_log(CUT_ROW)
    assert log.hosts == ("node-b1", "node-b2")  # not "-1node-b1" from the glued token
    assert (log.nranks, log.nnodes) == (4, 2)


def test_a_glued_line_of_a_thread_no_whole_line_names_leaves_its_host_out_and_says_so():
    text = CUT_ROW.read_text().replace("-1node-b1:52011:52090", "-1node-b1:52011:99999")
    notes: list[str] = []
    glued = [line for line in iter_log_lines(text, notes) if line.tid == 99999]
    assert len(glued) == 1 and glued[0].host is None and glued[0].level == "INFO"
    assert notes == [f"line {glued[0].lineno}: an NCCL line glued to an nccl-tests row, whose thread (52011:99999) "
                     "no whole line names: its host is left out"]
    assert "-1node-b1" not in parse_nccl_log(text).hosts


def test_nodes_the_log_does_not_give_are_shown_unknown(tmp_path):
    """A log excerpt with rings but no ``nNodes`` line, its ranks all under one (anonymised) host name: the node
    count stays unknown and the summary says so, rather than leaving it out (a reader would take 16 ranks of one
    host for one node)."""
    lines = [f"user:{100 + r}:{200 + r} [{r % 8}] NCCL INFO Trees [0] -1/-1/-1->{r}->-1" for r in range(2)]
    ring = " ".join(str(r) for r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 14, 13, 12, 11, 10, 9])
    lines.append(f"user:100:200 [0] NCCL INFO Channel 00/02 :    {ring}")
    path = tmp_path / "excerpt.log"
    path.write_text("\n".join(lines) + "\n")
    log = parse(path)
    assert (log.nranks, log.nnodes) == (16, None)
    code, out, _ = run("nccl-log", str(path))
    assert code == 0, out
    assert "16 ranks on ? nodes (no nNodes line, and its host names do not tell)" in out
