"""nccl-log per size (what NCCL chose, with channels and its predicted time), rank -> NIC (rail) map,
channel-count checks, and NCCL's prediction next to collscope's model (issue 11, finding 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.log_model import choices_against_model
from collscope.cli import main
from collscope.collectives.nccl_log.parse import parse_nccl_log
from collscope.errors import ConfigError
from collscope.topo.load import load_one_node
from collscope.topo.samples import sample_path

FIXTURE = Path(__file__).parents[1] / "fixtures" / "nccl-debug" / "nccl2.24.3-2node-16rank-pxn-gdr-tuning-blocks.log"


def test_per_size_choices_keep_size_channels_and_nccl_prediction() -> None:
    log = parse_nccl_log(FIXTURE.read_text(), source=FIXTURE.name)
    got = {(c.op, c.size_bytes): c for c in log.size_choices}
    assert sorted(got) == [("AllGather", 4194304), ("AllReduce", 8), ("AllReduce", 1048576),
                           ("AllReduce", 268435456)]
    small, mid = got[("AllReduce", 8)], got[("AllReduce", 1048576)]
    assert (small.algorithm, small.protocol, small.channels, small.calls) == ("Ring", "LL", 1, 1)
    assert (mid.algorithm, mid.protocol, mid.channels, mid.calls) == ("Ring", "LL128", 2, 2)
    # NCCL's prediction from its own TUNING table: Ring/LL128 cell 21.4 us / 20.4 GB/s -> 21.4 + 1 MiB / 20.4e3
    assert mid.nccl_time_us == pytest.approx(21.4 + 1048576 / 20.4e3)
    assert small.nccl_time_us == pytest.approx(8.6 + 8 / 6.2e3)


def test_an_allgather_line_of_nccl_2_24_counts_one_ranks_share() -> None:
    """2.24's line prints the count argument in bytes (src/enqueue.cc ``task->count * ncclTypeSize``): for the
    fixture's AllGather of count 1048576 floats on 16 ranks, 4 MiB of one rank, 64 MiB in all. NCCL's time from
    its TUNING table is for the total (Ring/Simple 36.0 us / 46.0 GB/s); the records count the total too."""
    log = parse_nccl_log(FIXTURE.read_text(), source=FIXTURE.name)
    (gather,) = [c for c in log.size_choices if c.op == "AllGather"]
    assert (gather.size_bytes, gather.counts_one_rank, log.nranks) == (4 << 20, True, 16)
    assert gather.op_size_bytes(16) == 64 << 20 and gather.op_size_bytes(None) is None
    assert gather.nccl_time_us == pytest.approx(36.0 + (64 << 20) / 46.0e3)
    (mid,) = [c for c in log.size_choices if (c.op, c.size_bytes) == ("AllReduce", 1048576)]
    assert mid.op_size_bytes(16) == mid.op_size_bytes(None) == 1048576  # an all_reduce's size is its buffer


def test_an_allgather_line_of_nccl_2_23_is_already_the_total() -> None:
    """2.21-2.23 print ``nBytes``, count x nRanks for AllGather/ReduceScatter (2.21 src/include/info.h)."""
    text = ("h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
            "h:1:1 [0] NCCL INFO AllGather: 67108864 Bytes -> Algo 1 proto 2 time 251.5\n")
    (choice,) = parse_nccl_log(text).size_choices
    assert (choice.counts_one_rank, choice.op_size_bytes(8), choice.op_size_bytes(None)) == \
        (False, 64 << 20, 64 << 20)


def test_logged_time_of_older_nccl_is_kept() -> None:
    text = ("h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
            "h:1:1 [0] NCCL INFO AllReduce: 8589934592 Bytes -> Algo 1 proto 2 time 86069.968750\n"
            "h:1:1 [0] NCCL INFO AllReduce: 8589934592 Bytes -> Algo 1 proto 2 time 86069.968750\n")
    (choice,) = parse_nccl_log(text).size_choices
    assert (choice.algorithm, choice.protocol, choice.calls, choice.channels) == ("Ring", "Simple", 2, None)
    assert choice.nccl_time_us == pytest.approx(86069.96875)


def test_rank_nic_map_names_rails_and_pxn_proxies() -> None:
    log = parse_nccl_log(FIXTURE.read_text())
    by_rank = {r.rank: r for r in log.rank_nics}
    assert sorted(by_rank) == [0, 7, 8, 15]
    assert by_rank[7].host == "gpu-node-01" and by_rank[15].host == "gpu-node-02"
    assert by_rank[7].channels == ((0, "mlx5_0"), (1, "mlx5_3"))
    assert by_rank[7].via_proxy == (0,) and by_rank[15].via_proxy == (8,) and by_rank[0].via_proxy == ()


def _log(channels: int, used_nics: list[int]) -> str:
    lines = ["h1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB; OOB x",
             "h2:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB; OOB x",
             f"h1:1:1 [0] NCCL INFO {channels} coll channels, 0 collnet channels, 0 nvls channels, 8 p2p channels, "
             "2 p2p channels per peer"]
    for rank in range(16):
        host = "h1" if rank < 8 else "h2"
        lines.append(f"{host}:1:1 [{rank % 8}] NCCL INFO comm 0x1 rank {rank} nRanks 16 nNodes 2 localRanks 8 "
                     f"localRank {rank % 8} MNNVL 0")
    for channel, nic in enumerate(used_nics):
        lines.append(f"h1:1:1 [7] NCCL INFO Channel {channel:02d}/0 : 7[7] -> 8[0] [send] via NET/IB/{nic}/GDRDMA")
        lines.append(f"h2:1:1 [0] NCCL INFO Channel {channel:02d}/0 : 7[7] -> 8[0] [receive] via NET/IB/{nic}/GDRDMA")
    return "\n".join(lines) + "\n"


def test_too_few_channels_for_a_multinode_run_is_flagged() -> None:
    warned = parse_nccl_log(_log(2, [0, 1])).warnings
    assert any("2 collective channels for 8 GPUs per node on 2 nodes" in w for w in warned)
    assert any("h1: NCCL listed 4 NICs but no rank's network connection uses mlx5_2, mlx5_3" in w for w in warned)
    healthy = parse_nccl_log(_log(8, [0, 1, 2, 3, 0, 1, 2, 3])).warnings
    assert not any("collective channels" in w or "NICs but" in w for w in healthy)


def test_forced_channel_limit_is_named_as_the_cause() -> None:
    log = parse_nccl_log(FIXTURE.read_text())
    assert any("NCCL_MAX_NCHANNELS=2 is set and limits them" in w for w in log.warnings)


def test_cli_prints_choices_rails_and_model_comparison() -> None:
    runner = CliRunner()
    text = runner.invoke(main, ["nccl-log", str(FIXTURE)])
    assert text.exit_code == 0, text.output
    assert "per size" in text.output and "Ring/LL128" in text.output and "72.8 us" in text.output
    assert "gpu-node-01   mlx5_3     ranks 0 (ch 1), 7 (ch 1)" in text.output
    assert "(one rank's share of 64M)" in text.output  # the 2.24 AllGather line, 16 ranks
    doc = json.loads(runner.invoke(main, ["nccl-log", str(FIXTURE), "--json"]).output)
    assert {c["size_bytes"] for c in doc["choices"]} == {8, 1048576, 268435456, 4194304}
    assert doc["rank_nics"][1]["via_proxy"] == [0]
    compared = runner.invoke(main, ["nccl-log", str(FIXTURE), "--topo", str(sample_path())])
    assert compared.exit_code == 0, compared.output
    assert "against collscope's model" in compared.output
    assert "the model's pick is restricted like the run: NCCL_ALGO=Ring" in compared.output
    no_nics = runner.invoke(main, ["nccl-log", str(FIXTURE), "--gpu", "H100"])
    assert no_nics.exit_code == 2 and "needs the NIC rates" in no_nics.output and "--bw-gbps" not in no_nics.output


def test_model_pick_follows_the_forced_algorithm() -> None:
    log = parse_nccl_log(FIXTURE.read_text())
    result = choices_against_model(log, topology=load_one_node([sample_path()]))
    assert all(row.model_pick is not None and row.model_pick.startswith("Ring/") for row in result.rows)
    assert all(row.model_time_us is not None and row.model_time_us > 0 for row in result.rows)
    with pytest.raises(ConfigError, match="needs the NIC rates"):
        choices_against_model(log, gpu="H100")


def test_the_model_prices_an_allgather_line_at_the_total_size() -> None:
    """The model counts an all_gather by its total (nccl-tests' size); the 2.24 line logs one rank's share."""
    from collscope.analysis.model_settings import net_settings
    from collscope.analysis.nccl_model.constants import model_version_for
    from collscope.analysis.nccl_model.model import nccl_time_us
    from collscope.analysis.nccl_model.search import graph_inputs_from_topology
    from collscope.analysis.params import link_params

    log = parse_nccl_log(FIXTURE.read_text())
    topology = load_one_node([sample_path()])
    (row,) = [r for r in choices_against_model(log, topology=topology).rows if r.choice.op == "AllGather"]
    version = model_version_for(log.nccl_version)
    # the run's NCCL_IB_HCA (=mlx5_0:1,mlx5_3:1) leaves the model two NICs per node, as it left NCCL
    inputs = graph_inputs_from_topology(link_params(topology, nranks=16, nnodes=2, net=net_settings(log.env)),
                                        version=version)

    def model_us(size: int) -> float:
        return nccl_time_us(inputs, "all_gather", "Ring", "Simple", size, version=version)

    assert row.model_time_us == pytest.approx(model_us(64 << 20))
    assert ("NCCL_IB_HCA==mlx5_0:1,mlx5_3:1 set in the run: the model counts the 2 NIC(s) per node the setting "
            "leaves NCCL (2 x 50 GB/s)") in choices_against_model(log, topology=topology).notes
    assert row.model_time_us != pytest.approx(model_us(4 << 20))


def test_a_log_of_nccl_2_32_says_its_choices_follow_a_model_collscope_does_not_reproduce() -> None:
    text = FIXTURE.read_text()
    assert "NCCL version 2.24.3" in text
    topology = load_one_node([sample_path()])
    old = choices_against_model(parse_nccl_log(text), topology=topology)
    assert not any("pipeline-based" in n for n in old.notes)
    new = choices_against_model(parse_nccl_log(text.replace("NCCL version 2.24.3", "NCCL version 2.32.6")),
                                topology=topology)
    assert any(n.startswith("NCCL 2.32 chooses algorithms and protocols with a pipeline-based cost model")
               for n in new.notes)
    tables = "NCCL 2.32.6+cuda12.4: collscope's model uses the tables of NCCL 2.30.7"
    assert any(n.startswith(tables) for n in new.notes)


def test_the_model_pick_of_a_log_leaves_ll128_off_where_its_release_does() -> None:
    """The 2.24.3 log modelled with RTX A6000s (sm 86: LL128 off by default in 2.24.3) says so and never picks
    LL128; the same log as NCCL 2.27.3 (LL128 on every sm >= 70) picks Ring/LL128 at 1 MiB."""
    # without the run's NCCL_IB_HCA (two NICs per node), whose lower bandwidth makes LL the model's pick at 1 MiB
    text = "".join(line for line in FIXTURE.read_text().splitlines(keepends=True) if "NCCL_IB_HCA set" not in line)
    topology = load_one_node([sample_path()])
    on = choices_against_model(parse_nccl_log(text.replace("NCCL version 2.24.3", "NCCL version 2.27.3")),
                               topology=topology, gpu="RTX A6000")
    assert not any("enables LL128 by default only" in n for n in on.notes)
    assert any(r.model_pick == "Ring/LL128" for r in on.rows)
    off = choices_against_model(parse_nccl_log(text), topology=topology, gpu="RTX A6000")
    assert any("NCCL 2.24.3+cuda12.4 enables LL128 by default only on sm 70, 80, 90" in n and "sm 86" in n
               for n in off.notes)
    assert not any(r.model_pick and r.model_pick.endswith("/LL128") for r in off.rows)


def test_a_runs_nic_list_the_topology_does_not_hold_is_said_and_every_nic_counted() -> None:
    text = FIXTURE.read_text().replace("=mlx5_0:1,mlx5_3:1", "=ib9:1")
    result = choices_against_model(parse_nccl_log(text), topology=load_one_node([sample_path()]))
    assert all(row.model_time_us is not None for row in result.rows if row.choice.op == "AllReduce")
    assert any(n.startswith("NCCL_IB_HCA==ib9:1 set in the run, but the model cannot count the NICs it leaves "
                            "(NCCL_IB_HCA==ib9:1 leaves none of the node's compute NICs") for n in result.notes)
