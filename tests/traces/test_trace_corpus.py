"""The readers on the real public traces of the shared corpus (skipped, with the path, when it is absent)."""

from __future__ import annotations

from collections import Counter

import pytest

from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces
from tests.corpus import CORPUS, skip_reason

TRACES = CORPUS / "traces"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=skip_reason(TRACES))


def _one(name: str):
    [trace] = read_traces([TRACES / name])
    return trace


def test_a100_kernel_metadata():
    t = _one("hta-a100-2rank-nccl2.17-rank0-kernel-metadata.json.gz")
    assert (t.rank, t.world_size, t.backend, t.device) == (0, 2, "nccl", "gpu")
    ops = Counter(c.op for c in t.calls)
    assert ops == {"all_reduce": 15, "broadcast": 6}  # every NCCL kernel of the trace
    assert {c.size_source for c in t.calls} == {"kernel"}
    # In msg nelems x 4 bytes (Float): the largest bucket 7875584 floats, the smallest broadcast 106 floats
    assert max(c.size_bytes or 0 for c in t.calls) == 31502336 and min(c.size_bytes or 0 for c in t.calls) == 424
    assert {c.step for c in t.calls} == {4, 5, 6} and {c.process_group for c in t.calls} == {"0"}
    report = analyze_traces([t])
    assert len(report.steps) == 3
    for s in report.steps:
        assert 0 <= s.exposed_comm_us <= s.comm_us <= s.duration_us
    assert any("no transfer time" in w for w in report.warnings)  # one rank of two: durations only


def test_old_trace_without_kernel_metadata_links_through_the_cpu_side():
    t = _one("hta-trace-diff-control-old-flow-names-no-metadata.json.gz")
    assert (t.rank, t.world_size) == (3, 8)
    ops = Counter(c.op for c in t.calls)
    assert ops == {"all_reduce": 18, "alltoall": 42}  # 18 AllReduce + 42 SendRecv kernels
    assert all(c.size_bytes for c in t.calls) and {c.size_source for c in t.calls} == {"input_dims"}
    assert 45310188 * 4 in {c.size_bytes for c in t.calls}  # nccl:all_reduce Input Dims [[45310188]] float


def test_process_group_id_variant_uses_record_param_comms():
    t = _one("hta-ns-resolution-rank0-process-group-id-key.json.gz")
    assert t.device == "gpu" and {c.process_group for c in t.calls} == {"0"}  # compute kernels, no NCCL one
    assert {c.size_source for c in t.calls} == {"record_param_comms"}
    assert 2049000 * 4 in {c.size_bytes for c in t.calls}
    # world_size 1: every call is in a group of 1, for which NCCL launches no kernel (issue 25 defect 6)
    assert {c.group_size for c in t.calls} == {1}
    assert not any("CPU-side" in w or "no GPU kernels" in w for w in t.warnings)


def test_gloo_cpu_trace_worker_events_alone():
    t = _one("hta-cpu-only-gloo-rank34-no-collectives.json.gz")
    # The corpus calls it "no collectives"; its gloo worker threads do record 10 all-reduces with sizes.
    assert (t.rank, t.world_size, t.backend) == (34, 300, "gloo")
    assert Counter(c.size_bytes for c in t.calls) == {321271 * 4: 5, 2082411 * 4: 5}


def test_the_gpu_model_of_each_real_trace():
    """HTA's published traces carry deviceProperties: the GPU model the model figures take without --gpu."""
    from collscope.topo.gpus import gpu_generation
    from collscope.traces.geometry import traces_gpu

    a100 = _one("hta-a100-2rank-nccl2.17-rank0-kernel-metadata.json.gz")
    assert a100.gpu == "NVIDIA A100-PG509-200" and gpu_generation(a100.gpu).name == "A100"
    assert _one("hta-ns-resolution-rank0-process-group-id-key.json.gz").gpu == "Tesla V100-SXM2-32GB"
    cpu = _one("hta-cpu-only-gloo-rank34-no-collectives.json.gz")
    assert cpu.gpu is None and traces_gpu([cpu]) == (None, "the traces do not name their GPU")
