"""Step 5 of the device check: which GPU a rank drives under Slurm, Open MPI and torchrun environments.

``simulated`` (no CUDA needed, runs in ``--dry``): :func:`collscope.collectives.ranks.select_cuda_device` on
launcher environments written as each launcher sets them, including ``CUDA_VISIBLE_DEVICES`` variants;
``collscope bench --engine torch --backend nccl`` with ``CUDA_VISIBLE_DEVICES=""`` exiting 2 with its reason; and
:func:`collscope.sweeps.diagnose.launch_diagnosis` on NCCL's own warnings for two ranks on one GPU (the wording
of NCCL src/init.cc before 2.30, and the one of 2.30.x).

``live`` (CUDA): one-rank ``collscope bench`` runs under each launcher's variables and ``CUDA_VISIBLE_DEVICES``
forms (as the machine has it, an index, the GPU's UUID); two ranks on the one GPU with ``CUDA_VISIBLE_DEVICES``
naming it for both (NCCL refuses; collscope must explain it); two ranks with the machine's one GPU visible
(collscope refuses before NCCL: one GPU per rank).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collscope.collectives.ranks import rank_info, select_cuda_device
from collscope.errors import ConfigError
from collscope.sweeps.diagnose import launch_diagnosis

_SLURM_8 = {"SLURM_PROCID": "13", "SLURM_NTASKS": "16", "SLURM_LOCALID": "5", "SLURM_NNODES": "2",
            "SLURM_NODEID": "1", "SLURM_STEP_TASKS_PER_NODE": "8(x2)", "SLURM_STEP_NODELIST": "gpu[01-02]",
            "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}
_OMPI_8 = {"OMPI_COMM_WORLD_RANK": "11", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "MASTER_ADDR": "gpu01", "MASTER_PORT": "29500"}
_TORCHRUN_8 = {"RANK": "7", "WORLD_SIZE": "8", "LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
_TORCHRUN_2 = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@dataclass(frozen=True)
class Case:
    """A simulated rank: its environment, the GPUs its process would see, and what must come out."""

    name: str
    env: dict[str, str]
    visible_gpus: int
    device: int | None
    """The expected device index; ``None`` when a refusal is expected."""
    source: str
    error_words: tuple[str, ...] = field(default=())
    """Words the refusal must contain (its reason), when ``device`` is ``None``."""


CASES = (
    Case("slurm, 8 tasks per node, every GPU visible", _SLURM_8, 8, 5, "slurm"),
    Case("slurm, per-task binding (CUDA_VISIBLE_DEVICES=5)", {**_SLURM_8, "CUDA_VISIBLE_DEVICES": "5"}, 1, 0,
         "slurm"),
    Case("open mpi, 8 per node, CUDA_VISIBLE_DEVICES=0..7", {**_OMPI_8, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
         8, 3, "openmpi"),
    Case("torchrun inside srun (torchrun's variables win)", {**_SLURM_8, **_TORCHRUN_8}, 8, 7, "torchrun"),
    Case("one rank, one GPU, nothing set", {}, 1, 0, "single"),
    Case("CUDA_VISIBLE_DEVICES='' hides every GPU", {**_SLURM_8, "CUDA_VISIBLE_DEVICES": ""}, 0, None, "slurm",
         ("CUDA_VISIBLE_DEVICES", "empty")),
    Case("open mpi, 8 per node, 2 GPUs visible", {**_OMPI_8, "CUDA_VISIBLE_DEVICES": "0,1"}, 2, None, "openmpi",
         ("8 ranks", "2 visible GPU", "one GPU per rank")),
    Case("torchrun, 2 ranks on a 1-GPU machine", _TORCHRUN_2, 1, None, "torchrun",
         ("2 ranks", "1 visible GPU", "one GPU per rank")),
)

# NCCL's warnings for two ranks on one GPU, as NCCL prints them ("host:pid:tid [dev] file:line NCCL WARN ..."):
# src/init.cc initTransportsRank, NCCL 2.2x: WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device
# %lx"); NCCL 2.30.x: WARN("Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to
# enable this configuration.").
DUPLICATE_GPU_WARNINGS = {
    "nccl<2.30": "gpu-h100-07:51324:51388 [0] init.cc:1003 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 "
                 "both on CUDA device 18000\n",
    "nccl>=2.30": "gpu-h100-07:51324:51388 [0] init.cc:1057 NCCL WARN Multiple Ranks are using the same "
                  "GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.\n",
}


def judge_case(case: Case) -> tuple[bool, str]:
    """(passed, what happened) for one simulated rank."""
    try:
        info = rank_info(case.env)
        device = select_cuda_device(info, case.visible_gpus, case.env)
    except ConfigError as exc:
        text = str(exc)
        if case.device is None and all(w in text for w in case.error_words):
            return True, f"refused: {text}"
        return False, f"refused ({text}); expected " + (
            f"device {case.device}" if case.device is not None else f"a reason with {case.error_words}")
    if info.source != case.source:
        return False, f"read as a {info.source} environment, expected {case.source}"
    if case.device is None:
        return False, f"gave device {device}; expected a refusal naming {case.error_words}"
    return device == case.device, f"device {device} (expected {case.device}, {info.source})"


def duplicate_gpu_explained(text: str) -> tuple[bool, str]:
    """launch_diagnosis must turn a launch output holding NCCL's warning into a sentence about one GPU, two ranks."""
    said = launch_diagnosis(text)
    if said is None:
        return False, "launch_diagnosis found nothing to say"
    ok = "GPU" in said and "rank" in said
    return ok, said


def simulated(bench: Callable[[dict[str, str], str], Any], out_dir: Path) -> tuple[bool, dict[str, Any], str]:
    """Every simulated case, the empty-CUDA_VISIBLE_DEVICES bench, and NCCL's duplicate-GPU warnings.
    ``bench(extra_env, capture_name)`` runs one-rank ``collscope bench --backend nccl`` and returns its ProcResult.
    Returns (passed, figures, reason)."""
    figures: dict[str, Any] = {"cases": {}, "duplicate_gpu": {}}
    failed: list[str] = []
    for case in CASES:
        ok, what = judge_case(case)
        figures["cases"][case.name] = {"ok": ok, "result": what}
        if not ok:
            failed.append(f"{case.name}: {what}")
    for version, warning in DUPLICATE_GPU_WARNINGS.items():
        ok, said = duplicate_gpu_explained(warning)
        figures["duplicate_gpu"][version] = {"ok": ok, "diagnosis": said}
        if not ok:
            failed.append(f"two ranks on one GPU ({version} wording): {said}")
    res = bench({"CUDA_VISIBLE_DEVICES": ""}, "bench-cuda-visible-devices-empty.log")
    output = _output(res)
    reason_line = _error_line(output)
    figures["empty_cuda_visible_devices"] = {"exit": res.returncode, "reason": reason_line}
    if res.returncode != 2 or reason_line is None or "Traceback" in output:
        failed.append(f"CUDA_VISIBLE_DEVICES='': exit {res.returncode}, expected 2 with a one-line reason "
                      f"(output tail: {output[-300:]!r})")
    passed = f"{len(CASES)} environments, both NCCL wordings, exit 2 with reason"
    return not failed, figures, "; ".join(failed) or passed


def _output(res: Any) -> str:
    """What a run printed (with its output kept in a capture file, stdout holds the tail of both streams)."""
    return str(res.stdout) + str(res.stderr)


def _error_line(output: str) -> str | None:
    lines = [ln for ln in output.splitlines() if ln.lower().startswith("error:")]
    return lines[-1] if lines else None


def live(bench: Callable[[dict[str, str], str], Any], torchrun2: Callable[[dict[str, str], str], Any], *,
         machine_cvd: str | None, gpu_uuid: str | None, gpu_name: str | None) -> tuple[bool, dict[str, Any], str]:
    """One-rank runs under each launcher's variables on the real GPU, and two ranks on it (see the module doc).
    ``machine_cvd``: the machine's own ``CUDA_VISIBLE_DEVICES`` (None when unset); ``gpu_uuid``: the GPU's UUID
    from nvidia-smi (None under MIG, where the parent's UUID runs nothing, or when nvidia-smi lists several);
    ``gpu_name``: the model nvidia-smi names, which every record's ``gpu`` must be."""
    one_gpu = machine_cvd.strip() if machine_cvd and machine_cvd.strip() else "0"
    one_rank = {
        f"slurm, CUDA_VISIBLE_DEVICES={one_gpu}": {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
                                                   "SLURM_NNODES": "1", "CUDA_VISIBLE_DEVICES": one_gpu},
        "open mpi, CUDA_VISIBLE_DEVICES as the machine has it": {
            "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "1"},
    }
    if gpu_uuid:
        one_rank["torchrun variables, CUDA_VISIBLE_DEVICES=<uuid>"] = {
            "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "CUDA_VISIBLE_DEVICES": gpu_uuid}
    figures: dict[str, Any] = {}
    failed: list[str] = []
    for i, (name, env) in enumerate(one_rank.items()):
        res = bench(env, f"bench-live-{i}.log")
        gpus = sorted({str(r.get("gpu")) for r in _records(_output(res))})
        figures[name] = {"exit": res.returncode, "gpu": gpus, "seconds": round(res.duration_s, 1)}
        if res.returncode != 0:
            failed.append(f"{name}: exit {res.returncode}: {_output(res)[-300:]!r}")
        elif not gpus or (gpu_name and not all(g.startswith(gpu_name) for g in gpus)):  # MIG adds a suffix
            failed.append(f"{name}: records name GPU {gpus}, nvidia-smi {gpu_name!r}")
    res = torchrun2({"CUDA_VISIBLE_DEVICES": one_gpu}, "two-ranks-one-gpu-same-cuda-visible-devices.log")
    ok, said = duplicate_gpu_explained(_output(res))
    figures[f"two ranks, CUDA_VISIBLE_DEVICES={one_gpu} for both"] = {"exit": res.returncode, "diagnosis": said}
    if res.returncode == 0 or not ok:
        failed.append(f"two ranks on one GPU: exit {res.returncode}, diagnosis {said!r}")
    if machine_cvd is None:
        res = torchrun2({}, "two-ranks-one-gpu-all-visible.log")
        refused = "one GPU per rank" in _output(res)  # each rank exits 2 with it; torchrun itself then exits 1
        figures["two ranks, every GPU visible"] = {"exit": res.returncode, "refused_by_collscope": refused}
        if res.returncode == 0 or not refused:
            failed.append(f"two ranks, one visible GPU: exit {res.returncode}, expected a failure with collscope's "
                          "reason (one GPU per rank)")
    else:
        figures["two ranks, every GPU visible"] = (f"not run: this machine sets CUDA_VISIBLE_DEVICES={machine_cvd!r}, "
                                                   "so both ranks see the one GPU named for them (the case above)")
    return not failed, figures, "; ".join(failed) or "one-rank runs under each launcher; two ranks refused, explained"


def _records(output: str) -> list[dict[str, Any]]:
    """The JSON records ``collscope bench`` prints on stdout without ``--out``."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def drop_launcher_vars(env: dict[str, str]) -> dict[str, str]:
    """``env`` without an outer launcher's rank variables or the user's NCCL settings. The machine's own
    ``CUDA_VISIBLE_DEVICES`` (the GPU it lends, perhaps a MIG instance) is kept."""
    drop = ("OMPI_", "PMIX_", "PMI_", "SLURM_", "NCCL_", "PRTE_", "TORCHELASTIC_")
    names = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
    return {k: v for k, v in env.items() if k not in names and not k.startswith(drop)}

