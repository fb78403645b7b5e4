"""The single-GPU device check (tests/gpu/device_check.sh) on this CPU machine: ``--dry`` end to end, a planted
failure, the run without a CUDA torch, and the judges of its measured steps on planted figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collscope import proc
from collscope.topo.samples import sample_path
from tests.fakes import NVIDIA_SMI_FIXTURES, Answer, FakeTools
from tests.gpu import device_selection
from tests.gpu.device_check import LOG_FIXTURE, STEPS
from tests.gpu.judge import info_cost, judge_floor, judge_gather, judge_log

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "gpu" / "device_check.sh"
CUDA_STEPS = {name for name, _, cuda in STEPS if cuda}
# One H100 as `nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,memory.total,mig.mode.current
# --format=csv,noheader` prints it.
H100_QUERY = "NVIDIA H100 80GB HBM3, GPU-5c8a3f2e-9b1d-4e7a-8c2f-1a3b5d7e9f01, 00000000:18:00.0, 550.54.15, " \
             "81559 MiB, Disabled\n"


def _check(out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHON", sys.executable)
    return subprocess.run(["bash", str(SCRIPT), str(out), *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=REPO)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_dry_run_end_to_end(tmp_path: Path, fake_tools: FakeTools) -> None:
    captures = sample_path()
    fake_tools.add("nvidia-smi", {
        "--query-gpu=name,uuid*": Answer(stdout=H100_QUERY),
        "topo*": Answer(stdout=captures / "nvidia-smi-topo.txt"),
        "--query-gpu*": Answer(stdout=captures / "nvidia-smi-query-gpu.csv"),
        "nvlink*": Answer(stdout=captures / "nvidia-smi-nvlink.txt"),
        "-q": Answer(stdout=NVIDIA_SMI_FIXTURES / "q-h100-hgx-8gpu-zero-cluster.txt"),
    })
    out = tmp_path / "dc"
    res = _check(out, "--dry", env=fake_tools.env())
    assert res.returncode == 0, res.stdout + res.stderr
    doc = _summary(out)
    assert [s["step"] for s in doc["steps"]] == [name for name, _, _ in STEPS]
    for step in doc["steps"]:
        if step["step"] in CUDA_STEPS:
            assert step["status"] == "skipped" and "dry mode" in step["reason"], step
        else:
            assert step["status"] == "pass" and step["reason"], step
        for capture in step["captures"]:
            assert (out / capture).exists(), capture
    text = (out / "summary.txt").read_text()
    assert text == res.stdout
    for name, _, cuda in STEPS:
        assert re.search(rf"^  {'SKIPPED' if cuda else 'PASS'}\s+{name}\s+\S", text, re.M), name
    assert text.rstrip().endswith(f"PASS; {len(STEPS) - len(CUDA_STEPS)} passed, 0 failed, {len(CUDA_STEPS)} skipped")
    steps = {s["step"]: s for s in doc["steps"]}
    assert doc["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and doc["gpu"]["uuid"].startswith("GPU-")
    # the topology came from the (fake) nvidia-smi: the sample's 8 H100s, and the capture is kept
    assert steps["topo"]["figures"]["gpus"] == 8 and (out / "topo" / "meta.json").is_file()
    log = steps["nccl-log"]["figures"]
    assert (log["nranks"], log["channels"], log["effects"]["NCCL_MAX_NCHANNELS"]["applied"]) == (1, 4, True)
    selection = steps["device-selection"]["figures"]
    assert selection["empty_cuda_visible_devices"]["exit"] == 2
    assert all(c["ok"] for c in selection["cases"].values()) and len(selection["cases"]) >= 8
    assert set(selection["duplicate_gpu"]) == {"nccl<2.30", "nccl>=2.30"}


def test_planted_failure_exits_nonzero(tmp_path: Path) -> None:
    """A log whose NCCL_MAX_NCHANNELS=2 did not take (4 channels): the verification step fails, the run exits 1."""
    bad = tmp_path / "not-applied.log"
    bad.write_text(LOG_FIXTURE.read_text().replace("NCCL_MAX_NCHANNELS set by environment to 4.",
                                                   "NCCL_MAX_NCHANNELS set by environment to 2."))
    out = tmp_path / "dc"
    res = _check(out, "--dry", "--nccl-log", str(bad), "--only", "nccl-log", "--only", "dispatch-floor")
    assert res.returncode == 1, res.stdout + res.stderr
    doc = _summary(out)
    assert doc["failed"] == ["nccl-log"]
    steps = {s["step"]: s for s in doc["steps"]}
    assert "NCCL_MAX_NCHANNELS=2 not applied (channels 4)" in steps["nccl-log"]["reason"]
    assert steps["dispatch-floor"]["status"] == "skipped"
    assert "FAIL (nccl-log)" in res.stdout


def test_refuses_a_used_output_directory(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    res = _check(tmp_path, "--dry")
    assert res.returncode == 2 and "is not empty" in res.stderr


def test_without_cuda_torch_it_says_so(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="the environment step needs torch importable to look at it")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the no-CUDA path is not what it would show")
    out = tmp_path / "dc"
    res = _check(out, "--only", "environment", "--only", "dispatch-floor")
    assert res.returncode == 1
    assert "torch with CUDA is missing" in res.stderr
    steps = {s["step"]: s for s in _summary(out)["steps"]}
    assert steps["environment"]["status"] == "fail"
    assert steps["environment"]["reason"].startswith("torch with CUDA is missing: torch ")
    assert steps["dispatch-floor"] == {**steps["dispatch-floor"], "status": "skipped",
                                       "reason": "no CUDA-enabled torch with NCCL (see step environment)"}


def test_gpu_modules_are_not_collected_and_skip_here() -> None:
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/gpu"], capture_output=True, text=True, timeout=120, cwd=REPO)
    collected = [ln for ln in res.stdout.splitlines() if "::" in ln]
    assert all(ln.startswith("tests/gpu/test_") for ln in collected), collected
    assert "device_check" not in res.stdout + res.stderr and "error" not in res.stdout.lower()


def test_requirements_are_pyprojects_dependencies_and_pytest() -> None:
    block = re.search(r"^dependencies = \[(.*?)^\]", (REPO / "pyproject.toml").read_text(), re.M | re.S)
    assert block  # (no tomllib: Python 3.10 is supported)
    deps = re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)
    lines = [ln.strip() for ln in (REPO / "tests/gpu/requirements-device.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert sorted(lines) == sorted([*(d.replace(" ", "") for d in deps), "pytest>=7"])


# --- the judges of the CUDA steps, on planted figures -------------------------------------------------------

def _floor(event: float, host: float) -> dict:
    return {"per_call": {"20": {"event_us": 6.0, "host_us": 6.3}, "2000": {"event_us": event, "host_us": host}}}


def test_floor_clocks_within_15_percent() -> None:
    ok, figures, _ = judge_floor(_floor(4.0, 4.5))
    assert ok and figures["per_call"]["2000"]["gap"] == pytest.approx(0.5 / 4.5, abs=1e-4)
    ok, _, reason = judge_floor(_floor(4.0, 5.0))
    assert not ok and "2000 calls: event 4.00 us, host 5.00 us (20% apart)" in reason


def _gather(nccl: float, right: bool = True) -> dict:
    return {"sizes": [{"size_bytes": 16 << 20, "nccl_us": 20.0, "copy_us": 20.5, "copied_right": True},
                      {"size_bytes": 1 << 30, "nccl_us": nccl, "copy_us": 1000.0, "copied_right": right}]}


def test_gather_against_copy_within_10_percent() -> None:
    ok, figures, _ = judge_gather(_gather(1080.0))
    assert ok and figures["sizes"][1]["copy_gbps"] == pytest.approx(2 * (1 << 30) / 1000.0 / 1e3, abs=0.1)
    ok, _, reason = judge_gather(_gather(1120.0))
    assert not ok and "1024 MiB: all_gather 1120.0 us, copy 1000.0 us (x1.120)" in reason
    ok, _, reason = judge_gather(_gather(1000.0, right=False))
    assert not ok and "output differs from its input" in reason


def test_log_judge_names_each_missing_fact() -> None:
    doc = {"nccl_version": None, "nranks": 2, "tuning": None, "channels": 8}
    ok, _, reason = judge_log(doc, {}, {})
    assert not ok
    assert reason == "no NCCL version; nranks 2 (expected 1); no TUNING table; NCCL_MAX_NCHANNELS not echoed (ENV)"


# --- the GPU worker's own arithmetic, on CPU tensors (gloo), CUDA events faked by the host clock ----------------

class _HostEvent:
    """Stands in for torch.cuda.Event here (no GPU): record() reads the host clock, elapsed_time() is in ms."""

    def __init__(self, enable_timing: bool = False) -> None:
        self.t_ns = 0

    def record(self) -> None:
        self.t_ns = time.perf_counter_ns()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _HostEvent) -> float:
        return (end.t_ns - self.t_ns) / 1e6


def test_worker_figures_feed_the_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch", reason="the worker needs torch")
    import torch.distributed as dist

    from tests.collectives.launch import free_port
    from tests.gpu import device_worker as worker

    def gloo_init() -> tuple[object, object]:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        return torch, dist

    monkeypatch.setattr(worker, "_init", gloo_init)
    monkeypatch.setattr(worker, "DEVICE", "cpu")
    monkeypatch.setattr(worker, "GATHER_SIZES", (1 << 16, 1 << 20))
    monkeypatch.setattr(worker, "COST_ITERS", 50)
    monkeypatch.setattr(torch.cuda, "Event", _HostEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    floor = worker.floor()
    assert sorted(floor["per_call"], key=int) == ["20", "200", "2000"]
    assert all(len(row["samples"]) == worker.FLOOR_REPEATS for row in floor["per_call"].values())
    _, figures, _ = judge_floor(floor)
    assert all(row["event_us"] > 0 and row["host_us"] >= row["event_us"] for row in figures["per_call"].values())
    gather = worker.gather()
    assert [r["size_bytes"] for r in gather["sizes"]] == [1 << 16, 1 << 20]
    assert all(r["copied_right"] for r in gather["sizes"])
    assert len(judge_gather(gather)[1]["sizes"]) == 2
    warn, info = worker.cost(), worker.cost()
    ok, figures, _ = info_cost(warn, info, 0)
    assert ok and figures["iters"] == 50 and figures["warn_us"] > 0
    assert json.loads(json.dumps(worker.probe()))["cuda_available"] is torch.cuda.is_available()


# --- the live device-selection step's judgement, on outputs as the GPU machine's runs print them --------------

def _ran(code: int, output: str) -> proc.ProcResult:
    return proc.ProcResult(argv=("collscope",), returncode=code, stdout=output, stderr="", duration_s=4.0,
                           timed_out=False)


def _record_line(gpu: str) -> str:
    return json.dumps({"engine": "torch", "backend": "nccl", "op": "all_reduce", "size_bytes": 8, "gpu": gpu}) + "\n"


def _refusal() -> str:
    from collscope.collectives.ranks import rank_info, select_cuda_device
    from collscope.errors import ConfigError

    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "29500"}
    with pytest.raises(ConfigError) as err:
        select_cuda_device(rank_info(env), 1, env)
    return f"error: {err.value}\n"


def test_live_selection_passes_and_fails_on_what_the_runs_print() -> None:
    duplicate = device_selection.DUPLICATE_GPU_WARNINGS["nccl<2.30"]
    torchruns = iter([_ran(1, duplicate), _ran(1, _refusal() + _refusal())])
    ok, figures, reason = device_selection.live(
        lambda env, name: _ran(0, _record_line("NVIDIA H200")), lambda env, name: next(torchruns),
        machine_cvd=None, gpu_uuid="GPU-5c8a3f2e-9b1d-4e7a-8c2f-1a3b5d7e9f01", gpu_name="NVIDIA H200")
    assert ok, reason
    assert figures["torchrun variables, CUDA_VISIBLE_DEVICES=<uuid>"]["gpu"] == ["NVIDIA H200"]
    assert figures["two ranks, every GPU visible"] == {"exit": 1, "refused_by_collscope": True}
    # a record on another GPU, two ranks that started, and no refusal: each named
    torchruns = iter([_ran(0, _record_line("NVIDIA H200"))])
    ok, figures, reason = device_selection.live(
        lambda env, name: _ran(0, _record_line("NVIDIA A100-SXM4-80GB")), lambda env, name: next(torchruns),
        machine_cvd="0", gpu_uuid=None, gpu_name="NVIDIA H200")
    assert not ok
    assert "slurm, CUDA_VISIBLE_DEVICES=0: records name GPU ['NVIDIA A100-SXM4-80GB'], nvidia-smi 'NVIDIA H200'" \
        in reason
    assert "two ranks on one GPU: exit 0, diagnosis 'launch_diagnosis found nothing to say'" in reason
    assert figures["two ranks, every GPU visible"].startswith("not run: this machine sets CUDA_VISIBLE_DEVICES='0'")


def test_a_dependency_below_its_floor_without_wheels_fails_setup(tmp_path: Path) -> None:
    """click 8.0 first on the path (a dist-info as pip writes it) and no wheels folder: setup fails, saying both."""
    if (REPO / "wheels").exists() or (REPO.parent / "wheels").exists():
        pytest.skip("a wheels folder beside this checkout would be used")
    site = tmp_path / "site"
    (site / "click-8.0.0.dist-info").mkdir(parents=True)
    (site / "click-8.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: click\nVersion: 8.0.0\n")
    env = {**os.environ, "PYTHONPATH": str(site), "WHEELS": str(tmp_path / "none")}
    out = tmp_path / "dc"
    res = _check(out, "--dry", env=env)
    assert res.returncode == 1
    text = (out / "summary.txt").read_text()
    assert text == res.stdout and "FAIL     setup" in text and "missing: click>=8.4; no wheels folder" in text
    assert "bash tests/gpu/prepare_wheels.sh" in text and "result: FAIL (setup)" in text
