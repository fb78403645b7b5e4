"""The inherited-environment audit: NCCL's conf files read as NCCL reads them, and what a sweep does with every
inherited variable or conf-file entry that could shape its default baseline (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.errors import ConfigError
from collscope.sweeps.inherited_env import (
    SYSTEM_CONF,
    ConfEntry,
    audit_inherited_env,
    check_refused,
    conf_paths,
    parse_nccl_conf,
    read_conf_texts,
)

AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
DYN = "OMPI_MCA_coll_tuned_use_dynamic_rules"


def actions(audit) -> dict[tuple[str, str], str]:
    return {(s.name, s.source): s.action for s in audit.settings}


def test_conf_file_read_as_nccl_reads_it():
    text = ("# site settings\nNCCL_SOCKET_IFNAME=ib0\r\nNCCL_ALGO=Tree\n\nno equals sign\n NCCL_PROTO=LL\n"
            "NCCL_ALGO = Ring\nNCCL_ALGO=Ring\nNCCL_IB_HCA==mlx5_0\nNCCL_BUFFSIZE=\n#NCCL_PROTO=Simple\n")
    assert parse_nccl_conf(text) == [
        ConfEntry("NCCL_SOCKET_IFNAME", "ib0", 2), ConfEntry("NCCL_ALGO", "Tree", 3),
        ConfEntry("NCCL_ALGO", "Ring", 8), ConfEntry("NCCL_IB_HCA", "=mlx5_0", 9), ConfEntry("NCCL_BUFFSIZE", "", 10)]
    # ' NCCL_PROTO' and 'NCCL_ALGO ' are names NCCL sets but never reads (no trimming in setEnvFile)
    assert parse_nccl_conf("NCCL_ALGO=" + "x" * 2000)[0].value == "x" * 1023


@given(st.text())
def test_conf_parser_takes_any_text(text):
    for entry in parse_nccl_conf(text):
        assert "=" not in entry.name and entry.line >= 1


def test_conf_file_order_follows_nccl():
    assert conf_paths({"HOME": "/home/u"}) == [("~/.nccl.conf", "/home/u/.nccl.conf"), (SYSTEM_CONF, SYSTEM_CONF)]
    assert conf_paths({"HOME": "/home/u", "NCCL_CONF_FILE": "/etc/site.conf"}) == [
        ("NCCL_CONF_FILE", "/etc/site.conf"), (SYSTEM_CONF, SYSTEM_CONF)]  # replaces ~/.nccl.conf, not /etc
    assert conf_paths({"NCCL_CONF_FILE": ""}) == [(SYSTEM_CONF, SYSTEM_CONF)]


def test_environment_selection_and_swept_knobs_are_unset_tuning_kept_plumbing_untouched():
    env = {"NCCL_ALGO": "Ring", "NCCL_TUNER_PLUGIN": "/opt/libnccl-tuner-x.so", "NCCL_MAX_CTAS": "8",
           "NCCL_BUFFSIZE": "8388608", "NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_HCA": "mlx5_0", "NCCL_DEBUG": "INFO",
           "HOME": "/nonexistent", AR: "3"}
    audit = audit_inherited_env(env, {}, engine="nccl-tests", swept={"NCCL_MAX_CTAS", "NCCL_ALGO"})
    assert actions(audit) == {("NCCL_ALGO", "environment"): "unset", ("NCCL_TUNER_PLUGIN", "environment"): "unset",
                              ("NCCL_MAX_CTAS", "environment"): "unset", ("NCCL_BUFFSIZE", "environment"): "kept"}
    assert set(audit.unset) == {"NCCL_ALGO", "NCCL_TUNER_PLUGIN", "NCCL_MAX_CTAS"} and not audit.shaped
    doc = audit.to_dict()
    assert doc["keep_env"] is False and doc["shaped"] is False and set(doc["unset"]) == set(audit.unset)
    ctas = next(s for s in doc["settings"] if s["name"] == "NCCL_MAX_CTAS")
    assert ctas == {"name": "NCCL_MAX_CTAS", "value": "8", "source": "environment", "line": None, "role": "tuning",
                    "swept": True, "action": "unset",
                    "why": "a knob this sweep sweeps: the default point must be the library's own choice"}


def test_keep_env_keeps_everything_and_says_the_baseline_is_shaped():
    env = {"NCCL_ALGO": "Ring", "HOME": "/h"}
    audit = audit_inherited_env(env, {"/h/.nccl.conf": "NCCL_PROTO=LL\nNCCL_ALGO=Tree\n"}, engine="nccl-tests",
                                keep_env=True)
    assert actions(audit) == {("NCCL_ALGO", "environment"): "kept", ("NCCL_PROTO", "/h/.nccl.conf"): "kept",
                              ("NCCL_ALGO", "/h/.nccl.conf"): "shadowed"}
    assert audit.unset == () and audit.refused == () and audit.shaped
    check_refused(audit)


def test_conf_file_selection_entries_refuse_the_sweep_with_where_and_the_ways_out():
    env = {"NCCL_ALGO": "Ring", "NCCL_CONF_FILE": "/site/nccl.conf"}
    texts = {"/site/nccl.conf": "NCCL_IB_HCA=mlx5_0\nNCCL_ALGO=Tree\nNCCL_NTHREADS=256\n",
             SYSTEM_CONF: "NCCL_PROTO=Simple\nNCCL_ALGO=CollNetDirect\n"}
    audit = audit_inherited_env(env, texts, engine="torch", backend="nccl")
    # the environment's NCCL_ALGO is unset, so the site file's would apply: refused; /etc's is then shadowed
    assert actions(audit) == {("NCCL_ALGO", "environment"): "unset", ("NCCL_ALGO", "/site/nccl.conf"): "refused",
                              ("NCCL_NTHREADS", "/site/nccl.conf"): "kept", ("NCCL_PROTO", SYSTEM_CONF): "refused",
                              ("NCCL_ALGO", SYSTEM_CONF): "shadowed"}
    assert [(s.where, s.name) for s in audit.refused] == [("/site/nccl.conf:2", "NCCL_ALGO"),
                                                          (f"{SYSTEM_CONF}:1", "NCCL_PROTO")]
    with pytest.raises(ConfigError) as err:
        check_refused(audit)
    message = str(err.value)
    assert "/site/nccl.conf:2: NCCL_ALGO=Tree" in message and f"{SYSTEM_CONF}:1: NCCL_PROTO=Simple" in message
    assert "--keep-env" in message and "Remove those lines" in message
    assert audit.to_dict()["conf_files"] == [{"label": "NCCL_CONF_FILE", "path": "/site/nccl.conf", "read": True},
                                             {"label": SYSTEM_CONF, "path": SYSTEM_CONF, "read": True}]


def test_the_spec_fixed_env_wins_over_environment_and_files():
    audit = audit_inherited_env({"NCCL_PROTO": "LL", "HOME": "/h"}, {"/h/.nccl.conf": "NCCL_PROTO=LL128\n"},
                                engine="nccl-tests", fixed_env={"NCCL_PROTO": "Simple"})
    assert set(actions(audit).values()) == {"spec"} and audit.unset == () and audit.refused == ()


def test_engine_decides_which_library_reads_what():
    env = {"NCCL_ALGO": "Ring", AR: "3", DYN: "1", "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize": "4096",
           "OMPI_MCA_btl_tcp_if_include": "eth0"}
    mpi = audit_inherited_env(env, {SYSTEM_CONF: "NCCL_ALGO=Tree\n"}, engine="mpi")
    assert actions(mpi) == {(AR, "environment"): "unset", (DYN, "environment"): "unset",
                            ("OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize", "environment"): "kept"}
    assert mpi.conf_files == ()  # NCCL's files are not read for the mpi engine
    gloo = audit_inherited_env(env, {SYSTEM_CONF: "NCCL_ALGO=Tree\n"}, engine="torch", backend="gloo")
    assert gloo.settings == () and gloo.refused == ()
    nccl = audit_inherited_env(env, {}, engine="nccl-tests")
    assert actions(nccl) == {("NCCL_ALGO", "environment"): "unset"}


def test_conf_files_are_read_at_the_edge(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_ALGO=Tree\n")
    texts = read_conf_texts({"HOME": str(home)})
    assert texts[f"{home}/.nccl.conf"] == "NCCL_ALGO=Tree\n" and SYSTEM_CONF in texts
    assert read_conf_texts({"NCCL_CONF_FILE": str(tmp_path)})[str(tmp_path)] is None  # a directory: skipped
