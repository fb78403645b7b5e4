"""The point-to-point variables a job sets (NCCL_P2P_LL_THRESHOLD, NCCL_P2P_{NVL,PCI,NET}_CHUNKSIZE,
NCCL_BUFFSIZE's cap on them) as NCCL reads them and as the p2p model takes them: the LL boundary and the channels
of src/enqueue.cc addP2pToPlan, the chunk of src/init.cc computeBuffSizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_settings import model_settings
from collscope.analysis.nccl_model.p2p_rules import (
    DEFAULT_P2P_TUNING,
    p2p_channels,
    p2p_chunk_bytes,
    p2p_protocol,
    p2p_tuning,
    p2p_tuning_notes,
)
from collscope.analysis.params import link_params
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.vocab.nccl import nccl_param_int

KIB, MIB = 1 << 10, 1 << 20
H100_8 = link_params(None, gpu="H100", nranks=8, nnodes=1)
H100_2X8 = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=400)


@pytest.mark.parametrize(("text", "value", "ignored"), [
    ("131072", 131072, ""), ("0x20000", 131072, ""), ("010", 8, ""), ("128K", 128, "K"), ("abc", 0, "abc"),
    ("-4", -4, ""), ("0", 0, "")])
def test_nccl_reads_integer_variables_with_strtoll(text: str, value: int, ignored: str) -> None:
    """src/misc/param.cc ncclLoadParam: strtoll(value, NULL, 0)."""
    assert nccl_param_int(text) == (value, ignored)


def test_the_variables_are_read_as_nccl_reads_them_and_said_where_it_ignores_part() -> None:
    tuning, notes = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "0", "NCCL_P2P_NVL_CHUNKSIZE": "128K",
                                "NCCL_P2P_NET_CHUNKSIZE": "-1", "NCCL_BUFFSIZE": "0x100000"})
    assert (tuning.ll_threshold_bytes, tuning.nvl_chunk_bytes, tuning.simple_buffer_bytes) == (0, 128, 1 << 20)
    assert tuning.net_chunk_bytes == DEFAULT_P2P_TUNING.net_chunk_bytes  # -1 cannot run: NCCL's default kept, said
    assert tuning.set_text == ("NCCL_P2P_LL_THRESHOLD=0", "NCCL_P2P_NVL_CHUNKSIZE=128", "NCCL_BUFFSIZE=1048576")
    assert any("NCCL_P2P_NVL_CHUNKSIZE=128K" in n and "as 128" in n and "'K'" in n for n in notes)
    assert any("NCCL_P2P_NET_CHUNKSIZE=-1" in n and "default" in n for n in notes)


def test_the_point_to_point_model_takes_them_and_a_collectives_model_does_not() -> None:
    settings = {"NCCL_P2P_LL_THRESHOLD": "0", "NCCL_BUFFSIZE": "1048576"}
    p2p = model_settings(settings, "alltoall")
    assert p2p.p2p.ll_threshold_bytes == 0 and p2p.unmodelled == ()
    coll = model_settings(settings, "all_reduce")
    assert coll.p2p == DEFAULT_P2P_TUNING
    assert coll.unmodelled == ("NCCL_BUFFSIZE=1048576", "NCCL_P2P_LL_THRESHOLD=0")


def test_a_threshold_of_zero_turns_ll_off_and_a_raised_one_reaches_nchannelsmin_parts() -> None:
    """8 H100 of one node: nChannelsMin 4 (32 per peer halved while x 8 ranks > 32 p2p channels), parts of
    512K / 8 = 64 KiB. With NCCL_P2P_LL_THRESHOLD=65536 a transfer of b bytes per peer is LL while b <=
    min(4, b / 64K) x 64K: up to 256 KiB per peer (2 MiB of alltoall), not 512 KiB (4 MiB)."""
    sizes = [128 * KIB, 512 * KIB, 2 * MIB, 4 * MIB]
    assert [p2p_protocol(H100_8, "alltoall", s) for s in sizes] == ["LL", "Simple", "Simple", "Simple"]
    off, _ = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "0"})
    assert [p2p_protocol(H100_8, "alltoall", s, off) for s in sizes] == ["Simple"] * 4
    raised, _ = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "65536"})
    assert [p2p_protocol(H100_8, "alltoall", s, raised) for s in sizes] == ["LL", "LL", "LL", "Simple"]


def test_across_nvlink_domains_nchannelsmin_comes_from_the_nics() -> None:
    """src/graph/paths.cc ncclTopoGetNchannels: a peer in another domain gets max(NICs, divUp(netBw, 14)) channels
    (one 400G NIC on PCIe Gen5: 48 GB/s, 4), the fewest of all peers rounded up to a power of two and halved while x
    divUp(ranks, 8) exceeds the p2p channels; src/enqueue.cc halves it again while x ranks does. 2 x 8 H100, 16 p2p
    channels: 4 per peer, nChannelsMin 1, so a raised threshold reaches 64 KiB per peer (1 MiB of alltoall) and no
    further, settled. 4 x 100G EFA NICs per GPU (AWS p5, 64 p2p channels): 4 per peer and nChannelsMin 4."""
    raised, _ = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "65536"})
    sizes = [1 * MIB, 2 * MIB, 4 * MIB, 8 * MIB]  # 64 KiB to 512 KiB per peer on 16 ranks
    assert [p2p_protocol(H100_2X8, "alltoall", s, raised) for s in sizes] == ["LL", "Simple", "Simple", "Simple"]
    assert p2p_tuning_notes(H100_2X8, "alltoall", sizes, raised) == [
        p2p_tuning_notes(H100_2X8, "alltoall", [], raised)[0]]  # what is taken, and no size left open
    p5 = link_params(None, gpu="H100", nranks=16, nnodes=2, nic_gbit=100, nics_per_node=32)
    assert [p2p_protocol(p5, "alltoall", s, raised) for s in sizes] == ["LL", "LL", "LL", "Simple"]
    # at NCCL's defaults every size is settled: nothing set, nothing said
    assert p2p_tuning_notes(H100_2X8, "alltoall", [s << 10 for s in range(1, 4096, 7)], DEFAULT_P2P_TUNING) == []


def test_nccl_p2p_per_channel_net_bw_sets_the_channels_of_a_peer_across_domains() -> None:
    """2 H100 in 2 domains (4 p2p channels): 48 GB/s / 14 gives 4 channels per peer, nChannelsMin 2, so with a 64 KiB
    threshold 128 KiB per peer (256 KiB of alltoall) is LL; NCCL_P2P_PER_CHANNEL_NET_BW=48 gives 1, and it is not."""
    pair = link_params(None, gpu="H100", nranks=2, nnodes=2, nic_gbit=400)
    raised, _ = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "65536"})
    wide, notes = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "65536", "NCCL_P2P_PER_CHANNEL_NET_BW": "48"})
    assert notes == [] and wide.per_channel_net_gbps == 48
    assert p2p_protocol(pair, "alltoall", 256 * KIB, raised) == "LL"
    assert p2p_protocol(pair, "alltoall", 256 * KIB, wide) == "Simple"
    _, zero = p2p_tuning({"NCCL_P2P_PER_CHANNEL_NET_BW": "0"})
    assert any("NCCL_P2P_PER_CHANNEL_NET_BW=0" in n and "default" in n for n in zero)


def test_without_the_nics_a_raised_threshold_leaves_sizes_open_and_says_so() -> None:
    """A job described by its ring bandwidth alone (--bw-gbps) has no NICs to give nChannelsMin across domains: a
    transfer above the threshold that enough channels could still carry as LL is taken as Simple, and named."""
    bare = link_params(None, gpu="H100", nranks=16, nnodes=2, bw_gbps=40)
    raised, _ = p2p_tuning({"NCCL_P2P_LL_THRESHOLD": "65536"})
    sizes = [1 * MIB, 2 * MIB, 4 * MIB]
    assert [p2p_protocol(bare, "alltoall", s, raised) for s in sizes] == ["LL", "Simple", "Simple"]
    notes = p2p_tuning_notes(bare, "alltoall", sizes, raised)
    assert any(n.startswith("alltoall at 2M, 4M across NVLink domains") and "--nic-gbit" in n for n in notes)


def test_a_smaller_chunk_or_buffer_gives_a_sendrecv_more_channels() -> None:
    """NCCL doubles a transfer's channels while a part exceeds 32 chunks: at 32 MiB 4 channels with the 512 KiB
    NVLink chunk (parts up to 16 MiB), 8 with a 128 KiB one (4 MiB), which NCCL_BUFFSIZE=1048576 also gives
    (the chunk is at most the buffer / NCCL_STEPS)."""
    assert p2p_channels(H100_8, "sendrecv", 32 * MIB) == 4
    small, _ = p2p_tuning({"NCCL_P2P_NVL_CHUNKSIZE": "131072"})
    buffer, _ = p2p_tuning({"NCCL_BUFFSIZE": "1048576"})
    assert p2p_chunk_bytes(H100_8, small) == p2p_chunk_bytes(H100_8, buffer) == 128 * KIB
    assert p2p_channels(H100_8, "sendrecv", 32 * MIB, small) == p2p_channels(H100_8, "sendrecv", 32 * MIB,
                                                                           buffer) == 8


def test_predict_takes_the_setting_and_says_so() -> None:
    args = ["predict", "--gpu", "H100", "--op", "alltoall", "--nranks", "8", "--nnodes", "1", "--sizes", "128K"]
    default = CliRunner().invoke(main, args)
    off = CliRunner().invoke(main, [*args, "--setting", "NCCL_P2P_LL_THRESHOLD=0"])
    assert default.exit_code == off.exit_code == 0, default.output + off.output
    assert "P2P/LL " in default.output and "P2P/LL " not in off.output and "P2P/Simple" in off.output
    assert "NCCL_P2P_LL_THRESHOLD=0: taken by the point-to-point model of alltoall" in off.output
    assert "which the model does not take" not in off.output


def _alltoall(tmp_path: Path, settings: dict[str, str]) -> str:
    size = 128 * KIB
    records = [Measurement.from_timing(op="alltoall", size_bytes=size, nranks=8, time_us=40.0, engine="nccl-tests",
                                       backend="nccl", count=size // 4 // 8, dtype="float", redop=None, root=None,
                                       in_place=False, nnodes=1, wrong=0, ok=True, iters=20, warmup=5, repeat=r,
                                       settings=settings, point_id="p", sweep_id="s", hosts=("n1",))
               for r in range(3)]
    path = tmp_path / "a2a.jsonl"
    write_jsonl(path, records)
    return str(analyze(load_results(path), params=H100_8).sizes.iloc[0]["model"])


def test_analyze_judges_a_configuration_under_its_own_threshold(tmp_path: Path) -> None:
    assert _alltoall(tmp_path, {}) == "P2P/LL"
    assert _alltoall(tmp_path, {"NCCL_P2P_LL_THRESHOLD": "0"}) == "P2P/Simple"
