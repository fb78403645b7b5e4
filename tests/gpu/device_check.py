"""The single-GPU device check of issue 21: what one GPU can show about collscope's GPU paths without a peer.

``bash tests/gpu/device_check.sh OUTDIR [--dry]`` sets up Python (wheels beside the checkout when a package is
missing) and runs ``python tests/gpu/device_check.py OUTDIR [--dry]``. Every step is a function taking the
:class:`Context` and returning a :class:`StepResult` (pass, fail, or skipped with a reason, its figures and the
captures it kept under ``OUTDIR/captures``); the run writes ``OUTDIR/summary.json`` and ``OUTDIR/summary.txt``
and exits 1 when a step that ran failed. ``--dry`` (any machine): the CUDA steps are skipped with the reason,
the others run for real (device selection on simulated environments, the log pipeline on a one-rank NCCL log
fixture, a live ``topo collect``, the summary).

Nothing here changes a GPU setting: GPU facts come from ``nvidia-smi --query-gpu`` (read-only) and torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from collscope import proc  # noqa: E402
from tests.collectives.launch import clean_env, free_port, tool  # noqa: E402
from tests.gpu import device_selection  # noqa: E402
from tests.gpu.judge import info_cost, judge_floor, judge_gather, judge_log  # noqa: E402

HERE = Path(__file__).resolve().parent
WORKER = HERE / "device_worker.py"
LOG_FIXTURE = HERE / "fixtures" / "nccl2.27.5-1rank-h100-init-env-tuning.log"
Status = Literal["pass", "fail", "skipped"]
GPU_QUERY = "name,uuid,pci.bus_id,driver_version,memory.total,mig.mode.current"


@dataclass(kw_only=True)
class StepResult:
    """One step's outcome."""

    step: str
    title: str
    status: Status
    reason: str
    """Why it failed or was skipped; what it showed when it passed."""
    figures: dict[str, Any] = field(default_factory=dict)
    captures: list[str] = field(default_factory=list)
    """Files under OUTDIR/captures this step kept (relative to OUTDIR)."""
    seconds: float = 0.0


@dataclass(kw_only=True)
class Context:
    out_dir: Path
    dry: bool
    python: str
    nccl_log: Path
    """The log the dry run parses (the fixture unless --nccl-log names another)."""
    cuda_missing: str | None = None
    """Why the CUDA steps cannot run (dry mode, or no CUDA torch); None when they can."""
    gpu: dict[str, str] = field(default_factory=dict)

    @property
    def captures(self) -> Path:
        return self.out_dir / "captures"

    def env(self, **extra: str) -> dict[str, str]:
        """A child's environment: no outer launcher's or NCCL variables, this checkout on PYTHONPATH."""
        env = device_selection.drop_launcher_vars(clean_env())
        env.update(extra)
        return env

    def run(self, argv: list[str], capture: str, *, timeout_s: float, env: Mapping[str, str] | None = None,
            kept: list[str]) -> proc.ProcResult:
        """Run ``argv`` with its whole output kept in ``captures/<capture>``."""
        path = self.captures / capture
        path.unlink(missing_ok=True)
        kept.append(str(path.relative_to(self.out_dir)))
        return proc.run(argv, timeout_s=timeout_s, env=dict(env or self.env()), cwd=REPO, output_path=path)

    def worker(self, mode: str, kept: list[str], *, tag: str = "", timeout_s: float = 90,
               **extra: str) -> dict[str, Any]:
        """Run ``device_worker.py MODE`` (its output in ``captures/worker-MODE[-tag].log``) and return its figures."""
        name = f"worker-{mode}{'-' + tag if tag else ''}"
        out = self.captures / f"{name}.json"
        env = self.env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), **extra)
        res = self.run([self.python, str(WORKER), mode, "--out", str(out)], f"{name}.log", timeout_s=timeout_s,
                       env=env, kept=kept)
        if not res.ok:
            raise StepFailed(f"worker {mode}: exit {res.returncode}{' (timed out)' if res.timed_out else ''}: "
                             f"{(res.stdout + res.stderr)[-600:]}")
        kept.append(str(out.relative_to(self.out_dir)))
        doc: dict[str, Any] = json.loads(out.read_text())
        return doc

    def bench(self, extra: dict[str, str], capture: str, kept: list[str]) -> proc.ProcResult:
        """One-rank ``collscope bench --engine torch --backend nccl`` (8 and 64 B all_reduce) under ``extra``."""
        env = self.env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NCCL_DEBUG="WARN", **extra)
        argv = [self.python, "-m", "collscope", "bench", "--engine", "torch", "--backend", "nccl", "--op",
                "all_reduce", "-b", "8", "-e", "64", "-f", "8", "--iters", "5", "--warmup", "2", "--timeout", "60"]
        return self.run(argv, capture, timeout_s=90, env=env, kept=kept)

    def torchrun2(self, extra: dict[str, str], capture: str, kept: list[str]) -> proc.ProcResult:
        """Two ranks of ``collscope bench --backend nccl`` on this machine (torchrun)."""
        torchrun = tool("torchrun")
        launcher = [torchrun] if torchrun else [self.python, "-m", "torch.distributed.run"]
        argv = [*launcher, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                "-m", "collscope", "bench", "--engine", "torch", "--backend", "nccl", "--op", "all_reduce", "-b", "8",
                "-e", "8", "--iters", "2", "--warmup", "1", "--timeout", "60"]
        return self.run(argv, capture, timeout_s=120, env=self.env(NCCL_DEBUG="WARN", **extra), kept=kept)


class StepFailed(Exception):
    """A step's own finding that it failed (the message is the reason)."""


Outcome = tuple[bool, dict[str, Any], str]
StepFn = Callable[[Context, list[str]], Outcome]


# --- the steps -----------------------------------------------------------------------------------------------

def step_environment(ctx: Context, kept: list[str]) -> Outcome:
    """Python, torch (CUDA build, GPUs, NCCL) and the GPU as nvidia-smi reads it (read-only query)."""
    doc = ctx.worker("probe", kept, timeout_s=120)
    figures: dict[str, Any] = {"python": ctx.python, "torch": doc}
    smi = proc.which("nvidia-smi")
    if smi:
        res = ctx.run([smi, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader"], "nvidia-smi-query-gpu.csv",
                      timeout_s=30, kept=kept)
        rows = [dict(zip(GPU_QUERY.split(","), (c.strip() for c in line.split(",")), strict=False))
                for line in res.stdout.splitlines() if line.strip()]
        figures["nvidia_smi"] = rows
        if len(rows) == 1:  # several: not the one-GPU machine this check is for; no GPU is singled out
            ctx.gpu = rows[0]
    if ctx.dry:
        return True, figures, "dry mode: recorded what this machine has; CUDA steps skipped"
    if not (doc.get("cuda_available") and doc.get("nccl_available")):
        ctx.cuda_missing = "no CUDA-enabled torch with NCCL (see step environment)"
        return False, figures, (f"torch with CUDA is missing: torch {doc.get('torch')}, CUDA build "
                                f"{doc.get('cuda_build')}, cuda available {doc.get('cuda_available')}, NCCL "
                                f"{doc.get('nccl_available')} {doc.get('error', '')}; use the machine's preinstalled "
                                "CUDA torch (PYTHON=/path/to/python bash tests/gpu/device_check.sh ...)")
    return True, figures, f"{doc['device_count']} GPU(s): {', '.join(doc['devices'])}; NCCL {doc['nccl']}"


def step_pytest_gpu(ctx: Context, kept: list[str]) -> Outcome:
    """``pytest tests/gpu``: every op eager and with CUDA graphs on this GPU (passes only with tests passed)."""
    xml = ctx.captures / "pytest-gpu.xml"
    res = ctx.run([ctx.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/gpu", f"--junitxml={xml}"],
                  "pytest-gpu.log", timeout_s=240, env=ctx.env(), kept=kept)
    kept.append(str(xml.relative_to(ctx.out_dir)))
    counts = _junit_counts(xml)
    passed = counts.get("tests", 0) - sum(counts.get(k, 0) for k in ("failures", "errors", "skipped"))
    ok = res.ok and passed > 0 and counts.get("failures", 0) == counts.get("errors", 0) == 0
    skips = [ln for ln in res.stdout.splitlines() if ln.startswith("SKIPPED")]
    return ok, {**counts, "passed": passed, "skip_reasons": skips, "exit": res.returncode,
                "seconds": round(res.duration_s, 1)}, (
        f"{passed} passed, {counts.get('failures', 0)} failed, {counts.get('errors', 0)} errors, "
        f"{counts.get('skipped', 0)} skipped (not counted as passes; reasons in the figures), exit {res.returncode}")


def _junit_counts(xml: Path) -> dict[str, int]:
    import xml.etree.ElementTree as ET

    if not xml.is_file():
        return {}
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {}
    return {k: int(suite.get(k, "0")) for k in ("tests", "failures", "errors", "skipped")}


def step_dispatch_floor(ctx: Context, kept: list[str]) -> Outcome:
    """CUDA events against the host clock, in-place 8 B all_reduce, batches of 20/200/2000 calls: within 15%."""
    return judge_floor(ctx.worker("floor", kept, NCCL_DEBUG="WARN"))


def step_gather_vs_copy(ctx: Context, kept: list[str]) -> Outcome:
    """Out-of-place one-rank all_gather against ``tensor.copy_`` at 16 MiB .. 1 GiB: within 10%."""
    return judge_gather(ctx.worker("gather", kept, timeout_s=120, NCCL_DEBUG="WARN"))


def step_info_cost(ctx: Context, kept: list[str]) -> Outcome:
    """Per-call cost of NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL against WARN (8 B all_reduce, 2000 calls)."""
    warn = ctx.worker("cost", kept, tag="warn", NCCL_DEBUG="WARN")
    info = ctx.worker("cost", kept, tag="info-coll", NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="COLL")
    lines = _count_lines(ctx.captures / "worker-cost-info-coll.log", " NCCL INFO ")
    return info_cost(warn, info, lines)


def _count_lines(path: Path, needle: str) -> int:
    with open(path, errors="replace") as fh:
        return sum(needle in line for line in fh)


def step_device_selection(ctx: Context, kept: list[str]) -> Outcome:
    """Simulated Slurm / Open MPI / torchrun environments; CUDA_VISIBLE_DEVICES=''; NCCL's duplicate-GPU words."""
    return device_selection.simulated(lambda env, name: ctx.bench(env, name, kept), ctx.captures)


def step_device_selection_live(ctx: Context, kept: list[str]) -> Outcome:
    """The same on the GPU: one-rank runs under each launcher's variables, two ranks on one GPU."""
    mig = ctx.gpu.get("mig.mode.current", "").strip().lower() == "enabled"
    return device_selection.live(lambda env, name: ctx.bench(env, name, kept),
                                 lambda env, name: ctx.torchrun2(env, name, kept),
                                 machine_cvd=os.environ.get("CUDA_VISIBLE_DEVICES"),
                                 gpu_uuid=None if mig else ctx.gpu.get("uuid"), gpu_name=ctx.gpu.get("name"))


def step_nccl_log(ctx: Context, kept: list[str]) -> Outcome:
    """A one-rank INFO/ENV/TUNING log (live on a GPU, the fixture in --dry) through ``collscope nccl-log --json``."""
    if ctx.dry:
        log = ctx.nccl_log
        figures: dict[str, Any] = {"log": str(log), "live": False}
    else:
        log = ctx.captures / "nccl-info-init-env-tuning.log"
        kept.append(str(log.relative_to(ctx.out_dir)))
        env = ctx.env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), NCCL_DEBUG="INFO",
                      NCCL_DEBUG_SUBSYS="INIT,ENV,TUNING", NCCL_DEBUG_FILE=str(log), NCCL_MAX_NCHANNELS="4")
        argv = [ctx.python, "-m", "collscope", "bench", "--engine", "torch", "--backend", "nccl", "--op", "all_reduce",
                "-b", "8", "-e", "64K", "-f", "8", "--iters", "5", "--warmup", "2", "--timeout", "60"]
        res = ctx.run(argv, "nccl-info-bench.log", timeout_s=120, env=env, kept=kept)
        figures = {"log": str(log), "live": True, "bench_exit": res.returncode}
        if not res.ok or not log.is_file():
            return False, figures, f"the INFO run failed (exit {res.returncode}): {res.stdout[-400:]}"
    res = ctx.run([ctx.python, "-m", "collscope", "nccl-log", str(log), "--json"], "nccl-log.json", timeout_s=60,
                  kept=kept)
    ctx.run([ctx.python, "-m", "collscope", "nccl-log", str(log)], "nccl-log.txt", timeout_s=60, kept=kept)
    if not res.ok:
        return False, figures, f"collscope nccl-log exit {res.returncode}: {res.stdout[-400:]}"
    from collscope.collectives.nccl_log.effects import forced_setting_effects
    from collscope.collectives.nccl_log.parse import read_nccl_log

    doc = json.loads(_json_part((ctx.captures / "nccl-log.json").read_text()))
    return judge_log(doc, forced_setting_effects(read_nccl_log(str(log))), figures)


def step_topo(ctx: Context, kept: list[str]) -> Outcome:
    """A live ``collscope topo collect --out OUTDIR/topo`` and ``topo show --from`` of it."""
    topo_dir = ctx.out_dir / "topo"
    res = ctx.run([ctx.python, "-m", "collscope", "topo", "collect", "--out", str(topo_dir)], "topo-collect.log",
                  timeout_s=120, kept=kept)
    kept.append("topo")
    if not res.ok:
        return False, {"exit": res.returncode}, f"topo collect exit {res.returncode}: {res.stdout[-400:]}"
    shown = ctx.run([ctx.python, "-m", "collscope", "topo", "show", "--from", str(topo_dir), "--json"],
                    "topo-show.json", timeout_s=60, kept=kept)
    ctx.run([ctx.python, "-m", "collscope", "topo", "show", "--from", str(topo_dir)], "topo-show.txt", timeout_s=60,
            kept=kept)
    if not shown.ok:
        return False, {"exit": shown.returncode}, f"topo show --from exit {shown.returncode}"
    doc = json.loads(_json_part((ctx.captures / "topo-show.json").read_text()))
    files = sorted(p.name for p in topo_dir.iterdir())
    figures = {"files": files, "gpus": len(doc["gpus"]), "nics": len(doc["nics"]), "warnings": doc["warnings"]}
    smi = proc.which("nvidia-smi")
    if smi is None and not ctx.dry:
        return False, figures, "nvidia-smi is not on PATH on a GPU machine"
    if smi is not None and not doc["gpus"]:
        return False, figures, f"nvidia-smi ({smi}) is there but the capture shows no GPU"
    what = f"{len(doc['gpus'])} GPU(s), {len(doc['nics'])} NIC(s) from {len(files)} files"
    return True, figures, what + ("" if smi else " (no nvidia-smi here: GPU count not checked)")


def _json_part(text: str) -> str:
    """The JSON document of a capture that also holds the command's notes (stdout and stderr share the file)."""
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1]


STEPS: tuple[tuple[str, StepFn, bool], ...] = (
    ("environment", step_environment, False),
    ("pytest-gpu", step_pytest_gpu, True),
    ("dispatch-floor", step_dispatch_floor, True),
    ("gather-vs-copy", step_gather_vs_copy, True),
    ("info-coll-cost", step_info_cost, True),
    ("device-selection", step_device_selection, False),
    ("device-selection-live", step_device_selection_live, True),
    ("nccl-log", step_nccl_log, False),
    ("topo", step_topo, False),
)
"""(name, function, needs CUDA), in the order they run."""


def run_step(ctx: Context, name: str, fn: StepFn, needs_cuda: bool) -> StepResult:
    title = (fn.__doc__ or name).strip().splitlines()[0]
    if needs_cuda and ctx.cuda_missing:
        return StepResult(step=name, title=title, status="skipped", reason=ctx.cuda_missing)
    kept: list[str] = []
    t0 = time.monotonic()
    try:
        ok, figures, reason = fn(ctx, kept)
        status: Status = "pass" if ok else "fail"
    except StepFailed as exc:
        status, figures, reason = "fail", {}, str(exc)
    except Exception as exc:  # a crash of the check itself is a failure of the step, with its trace kept
        crash = ctx.captures / f"{name}-traceback.txt"
        crash.write_text(traceback.format_exc())
        kept.append(str(crash.relative_to(ctx.out_dir)))
        status, figures, reason = "fail", {}, f"{type(exc).__name__}: {exc}"
    return StepResult(step=name, title=title, status=status, reason=reason, figures=figures,
                      captures=list(dict.fromkeys(kept)), seconds=round(time.monotonic() - t0, 2))


def summary_text(results: list[StepResult], dry: bool, seconds: float) -> str:
    lines = [f"collscope device check ({'dry' if dry else 'GPU'}), {seconds:.0f} s (target: under 300 s on one GPU)"]
    for r in results:
        lines.append(f"  {r.status.upper():<8} {r.step:<22} {r.seconds:>4.0f} s  {r.reason}")
    failed = [r.step for r in results if r.status == "fail"]
    skipped = sum(r.status == "skipped" for r in results)
    lines.append(f"result: {'FAIL (' + ', '.join(failed) + ')' if failed else 'PASS'}; "
                 f"{sum(r.status == 'pass' for r in results)} passed, {len(failed)} failed, {skipped} skipped")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="device_check.py", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="where the summary and the captures go (created)")
    parser.add_argument("--dry", action="store_true", help="skip the CUDA steps (with the reason), run the rest")
    parser.add_argument("--nccl-log", type=Path, default=LOG_FIXTURE, help="the log the dry run parses")
    parser.add_argument("--only", action="append", choices=[s[0] for s in STEPS], help="run only these steps")
    args = parser.parse_args(argv)
    if args.out_dir.exists() and any(args.out_dir.iterdir()):
        parser.error(f"{args.out_dir} is not empty; give a new directory")
    (args.out_dir / "captures").mkdir(parents=True, exist_ok=True)
    ctx = Context(out_dir=args.out_dir.resolve(), dry=args.dry, python=sys.executable, nccl_log=args.nccl_log.resolve(),
                  cuda_missing="dry mode (--dry): CUDA steps are not run" if args.dry else None)
    t0 = time.monotonic()
    results = [run_step(ctx, name, fn, cuda) for name, fn, cuda in STEPS if not args.only or name in args.only]
    seconds = time.monotonic() - t0
    text = summary_text(results, args.dry, seconds)
    doc = {"dry": args.dry, "seconds": round(seconds, 1), "gpu": ctx.gpu, "steps": [asdict(r) for r in results],
           "failed": [r.step for r in results if r.status == "fail"]}
    (ctx.out_dir / "summary.json").write_text(json.dumps(doc, indent=2) + "\n")
    (ctx.out_dir / "summary.txt").write_text(text)
    sys.stdout.write(text)
    return 1 if doc["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
