"""The channels an alltoall keeps busy inside one NVLink domain (nccl_model.p2p_rules.p2p_active_channels, NCCL's
rule) and what they carry (nccl_model.p2p.P2P_CHANNEL_GBPS), held against OCI's published GB300 alltoall curves
(oracle-quickstart/oci-gpu-quickstarts nvidia/GB300/README-GB300.md, NCCL 2.28.7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collscope.analysis.nccl_model.p2p import P2P_CHANNEL_GBPS, p2p_channel_gbps, p2p_channel_notes, p2p_time_us
from collscope.analysis.nccl_model.p2p_rules import p2p_active_channels
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict

MIB = 1 << 20
TRAY = link_params(None, gpu="GB300", nranks=4, nnodes=1, nvl_domain=4)
TWO_TRAYS = link_params(None, gpu="GB300", nranks=8, nnodes=2, nvl_domain=72)
RACK_64 = link_params(None, gpu="GB300", nranks=64, nnodes=16, nvl_domain=72)
H100_NODE = link_params(None, gpu="H100", nranks=8, nnodes=1)


def test_the_channels_follow_nccls_rule() -> None:
    """32 p2p channels; a transfer starts on 32 / ranks (8 on a tray, 4 on 8 ranks, 1 on 64) and doubles while its
    parts exceed 32 x 512 KiB: 3 transfers x 8 = 24 busy on a tray up to 512 MiB, all 32 from 1 GiB."""
    sizes = [2 * MIB, 512 * MIB, 1024 * MIB]
    assert [p2p_active_channels(TRAY, "alltoall", s) for s in sizes] == [24, 24, 32]
    assert [p2p_active_channels(TWO_TRAYS, "alltoall", s) for s in sizes] == [28, 28, 32]
    assert [p2p_active_channels(RACK_64, "alltoall", s) for s in sizes] == [32, 32, 32]
    assert p2p_active_channels(TRAY, "sendrecv", 32 * MIB) == 8  # one transfer
    across = link_params(None, gpu="GB300", nranks=128, nnodes=32, nvl_domain=64, nic_gbit=400, nics_per_node=8)
    assert p2p_active_channels(across, "alltoall", 1 << 30) is None  # the NIC bounds it; no rule here


def test_a_tray_runs_below_its_rate_until_every_channel_is_busy() -> None:
    """Published busbw of a GB300 tray: 491-512 GB/s at 256-512 MiB (24 channels), 614-628 from 2 GiB; 2 trays
    562-590 at 256-512 MiB (28 channels). The model: 24 x 20 and 28 x 20 GB/s there, the p2p rate beyond."""
    published = {(4, 256 * MIB): 490.93, (4, 512 * MIB): 511.57, (4, 4096 * MIB): 621.39,
                 (8, 256 * MIB): 561.64, (8, 512 * MIB): 589.91, (8, 4096 * MIB): 669.63}
    for (nranks, size), busbw in published.items():
        params = TRAY if nranks == 4 else TWO_TRAYS
        result = predict("alltoall", gpu="GB300", nranks=nranks, nnodes=params.nnodes, nvl_domain=params.nvl_domain,
                         sizes=[size])
        expected = result.nccl_choice[0].expected_busbw_gbps
        assert abs(expected / busbw - 1) <= 0.15, (nranks, size, expected, busbw)
    rate = p2p_channel_gbps("GB300")
    assert rate == next(r for sm, r in P2P_CHANNEL_GBPS if sm == 90)
    # at 512 MiB on a tray the channels, not NVLink, set the time: 24 x 20 GB/s, the ramp at 128 MiB per peer 0.1%
    time = p2p_time_us(TRAY, "alltoall", 512 * MIB)
    assert time is not None
    sent = 512 * MIB * 3 / 4
    assert time - 18.0 == pytest.approx(sent / (24 * rate * 1e3), rel=0.01)


def test_hopper_nodes_keep_enough_channels_busy() -> None:
    """8 H100: 7 transfers x 4 channels = 28 x 20 GB/s, above the 315 GB/s p2p rate: no channel note."""
    assert p2p_active_channels(H100_NODE, "alltoall", 256 * MIB) == 28
    assert p2p_channel_notes(H100_NODE, "alltoall", [32 * MIB, 256 * MIB]) == []
    notes = p2p_channel_notes(TRAY, "alltoall", [256 * MIB, 4096 * MIB])
    assert len(notes) == 1 and "256M on 24" in notes[0] and "4G" not in notes[0]


def test_64_gpus_of_a_rack_at_1_and_2_mib() -> None:
    """OCI's 64 GB300 of one rack take 31-33 us at 1-2 MiB (33.3 and 63.1 GB/s busbw); the 128 KiB ramp's floor is
    31 us (the 256 KiB one, before the channel term, read 0.65 x the published busbw)."""
    for size, busbw in ((1 * MIB, 33.33), (2 * MIB, 63.06)):
        result = predict("alltoall", gpu="GB300", nranks=64, nnodes=16, nvl_domain=72, sizes=[size])
        assert abs(result.nccl_choice[0].expected_busbw_gbps / busbw - 1) <= 0.15


FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests"
           / "alltoall_perf-gb300-tray-4gpu-channel-bound.txt")
"""Our own alltoall_perf output in the shape OCI publishes for one GB300 tray (4 rank lines on one host, NCCL
2.28.7, 1 MiB-4 GiB; its busbw levels off near 500 GB/s up to 512 MiB and reaches 620 from 2 GiB)."""


def test_analyze_judges_a_tray_against_its_busy_channels_and_says_so() -> None:
    """The plateau at 256-512 MiB (494-516 GB/s) is the 24 busy channels' rate: normal, within 10% of the model,
    where the model without the channel term expected 590-609 (the run 0.84-0.85 x that); the note
    names the sizes and the channels, grouped."""
    from click.testing import CliRunner

    from collscope.cli import main

    out = CliRunner().invoke(main, ["analyze", str(FIXTURE), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    rows = {r["size_bytes"]: r for r in doc["sizes"] if not r["in_place"]}
    for size in (256 * MIB, 512 * MIB):
        assert rows[size]["model"] == "P2P/Simple" and rows[size]["verdict"] == "normal"
        assert 0.95 < rows[size]["efficiency"] < 1.12
    assert rows[4096 * MIB]["verdict"] == "normal" and 0.95 < rows[4096 * MIB]["efficiency"] < 1.05
    noted = [n for n in doc["notes"] if "keeps the channels NCCL's p2p rule gives its transfers busy" in n]
    assert len(noted) == 1 and "2M-512M on 24" in noted[0] and "4G" not in noted[0]
