"""Slurm host lists: expansion, compression, round trips and clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collscope.errors import ConfigError
from collscope.locate.nodelist import format_nodelist, parse_nodelist


@pytest.mark.parametrize(("text", "names"), [
    ("node1", ["node1"]),
    ("node[1-4,7]", ["node1", "node2", "node3", "node4", "node7"]),
    ("gpu[01-03],login", ["gpu01", "gpu02", "gpu03", "login"]),
    ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
    ("a[9-11]", ["a9", "a10", "a11"]),
    ("node[098-101]", ["node098", "node099", "node100", "node101"]),
    ("n1,n3,m[2]", ["n1", "n3", "m2"]),
])
def test_parse(text, names):
    assert parse_nodelist(text) == names


@pytest.mark.parametrize(("names", "text"), [
    (["node1", "node2", "node3", "node7"], "node[1-3,7]"),
    (["node3"], "node3"),
    (["node1", "node3"], "node[1,3]"),
    (["gpu01", "gpu02", "gpu1"], "gpu[01-02],gpu1"),
    (["login", "node2", "node1"], "login,node[1-2]"),
])
def test_format(names, text):
    assert format_nodelist(names) == text


@pytest.mark.parametrize(("text", "why"), [
    ("", "empty"),
    ("node[1-", "without"),
    ("node1-3]", "without"),
    ("node[3-1]", "backwards"),
    ("node[a-b]", "not N or N-M"),
    ("node1,,node2", "empty entry"),
    ("node1,node1", "listed twice"),
    ("node[1-2],node2", "listed twice"),
    ("node 1", "white space"),
    ("no;de1", "characters"),
    ("n[[1]]", "nested"),
    ("node[1-99999999]", "more than"),
])
def test_bad_lists_are_clear_errors(text, why):
    with pytest.raises(ConfigError, match=why):
        parse_nodelist(text)


_names = st.lists(st.builds(lambda p, n, w: f"{p}{str(n).zfill(w)}", st.sampled_from(["node", "gpu-a", "x"]),
                            st.integers(0, 300), st.sampled_from([0, 2, 3])), unique=True, min_size=1, max_size=40)


@given(_names)
def test_round_trip(names):
    assert sorted(parse_nodelist(format_nodelist(names))) == sorted(names)
