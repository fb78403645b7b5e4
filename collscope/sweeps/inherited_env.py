"""What the user's environment and NCCL's conf files would change in a sweep's timed runs, and what to do about it.

A sweep's "default" point is the baseline every recommendation is priced against, so it must be NCCL's (or Open
MPI's) own choice, not whatever the shell that started the sweep holds. At sweep start :func:`audit_inherited_env`
(pure: the environment and the conf files' texts in, records out) lists every inherited variable and conf-file
entry that can change what the engine selects, with what the sweep does with it:

- ``unset``: a selection variable (``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_TUNER_PLUGIN``, Open MPI's coll tuned
  forcing; :func:`collscope.vocab.env_roles.env_role`) or a knob the sweep itself sweeps, found in the
  environment: removed from every launch's environment (and from mpirun's ``-x`` list).
- ``refused``: the same kind of entry in a conf file NCCL reads. NCCL fills only variables the environment does
  not set (src/misc/param.cc ``setEnvFile`` calls ``setenv(name, value, 0)``), so unsetting the variable would let
  the file's value in; a conf file cannot be unset for one variable, and pointing ``NCCL_CONF_FILE`` at an empty
  file would also drop the site's plumbing (NICs, interfaces) that file holds, and would not touch
  ``/etc/nccl.conf``, which NCCL always reads. So the sweep refuses to start, naming the file, line and entry;
  the user removes the line or passes ``--keep-env``.
- ``kept``: other tuning variables (``NCCL_BUFFSIZE``, ``NCCL_NTHREADS``, ...) shape every point alike and stay;
  with ``--keep-env`` everything stays and the audit says the baseline was shaped (``shaped``).
- ``shadowed``: a conf-file entry NCCL never applies (the environment or an earlier file set the variable).
- ``spec``: set for every point by the spec's ``fixed_env``, which wins over both.

Plumbing (``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``, ``NCCL_TOPO_FILE``, logging, ...) is the site's configuration
and is neither listed nor touched, even when a rail preset sweeps it. The audit goes into ``sweep.json``
(``inherited_env``, :mod:`collscope.sweeps.meta`).

NCCL's order (NCCL 2.30, src/misc/param.cc ``initEnvFunc``): the environment first, then ``NCCL_CONF_FILE`` when
set and not empty, else ``$HOME/.nccl.conf``, then ``/etc/nccl.conf``; within a file the first line of a name
wins. Only this host's files are read: ranks on other nodes read their own ``/etc/nccl.conf``. Open MPI's MCA
parameter files (``~/.openmpi/mca-params.conf``) are not audited; engine mpi's audit covers ``OMPI_MCA_*``
variables (the coll components and the point-to-point layer they run over: ``OMPI_MCA_pml``, ``OMPI_MCA_btl``).

Secrets' values (:mod:`collscope.vocab.secrets`) are ``REDACTED`` in the audit. The kept entries are what the
sweep's points were measured with: a resume whose kept entries differ is refused with the difference
(:func:`check_resume`), ``--keep-env`` or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from collscope.errors import ConfigError
from collscope.vocab.engines import engine_row, reads_variable
from collscope.vocab.env_roles import EnvRole, env_role
from collscope.vocab.secrets import redacted

__all__ = ["ConfEntry", "InheritedSetting", "EnvAudit", "Action", "SYSTEM_CONF", "parse_nccl_conf", "conf_paths",
           "audit_inherited_env", "read_conf_texts", "refusal_message", "check_refused", "shaping", "resume_difference",
           "check_resume"]

SYSTEM_CONF = "/etc/nccl.conf"
Action = Literal["unset", "refused", "kept", "shadowed", "spec"]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VALUE_MAX = 1023  # NCCL copies at most 1023 characters of a name or a value (char envVar[1024], envValue[1024])


@dataclass(frozen=True, slots=True)
class ConfEntry:
    """One ``NAME=value`` line of an NCCL conf file, as NCCL reads it."""

    name: str
    value: str
    line: int
    """1-based line number."""


def parse_nccl_conf(text: str) -> list[ConfEntry]:
    """The entries of an NCCL conf file, read as NCCL reads it (src/misc/param.cc ``setEnvFile``).

    A line starting with ``#`` is a comment; a line without ``=`` is skipped; the name is everything before the
    first ``=`` and the value everything after it, neither trimmed (``NCCL_ALGO = Ring`` names a variable
    ``"NCCL_ALGO "`` that NCCL never reads, so it is left out here); a trailing ``\\r`` is dropped; names and values
    are cut at 1023 characters. Every entry is returned, repeated names included (NCCL keeps the first).
    """
    out: list[ConfEntry] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name = name[:_VALUE_MAX]
        if _NAME.fullmatch(name):
            out.append(ConfEntry(name=name, value=value[:_VALUE_MAX], line=number))
    return out


def conf_paths(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The conf files NCCL reads, in its order, as ``(label, path)``: ``NCCL_CONF_FILE`` (when set and not empty)
    or ``$HOME/.nccl.conf`` (when ``HOME`` is set), then ``/etc/nccl.conf``."""
    out: list[tuple[str, str]] = []
    if env.get("NCCL_CONF_FILE"):
        out.append(("NCCL_CONF_FILE", env["NCCL_CONF_FILE"]))
    elif env.get("HOME"):
        out.append(("~/.nccl.conf", f"{env['HOME']}/.nccl.conf"))
    out.append((SYSTEM_CONF, SYSTEM_CONF))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class InheritedSetting:
    """One inherited variable or conf-file entry that can change what the engine selects."""

    name: str
    value: str
    """As found; a secret's (:func:`collscope.vocab.secrets.is_secret_name`) ``REDACTED``: the audit is written to
    sweep.json and printed."""
    source: str
    """``environment``, or the conf file's path."""
    line: int | None
    """The conf file's line (None for the environment)."""
    role: EnvRole
    """``selection`` or ``tuning`` (:func:`~collscope.vocab.env_roles.env_role`)."""
    swept: bool
    """The sweep sets this variable itself in some of its points."""
    action: Action
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source, "line": self.line,
                "role": self.role, "swept": self.swept, "action": self.action, "why": self.why}

    @property
    def where(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvAudit:
    """The inherited-environment audit of one sweep (``sweep.json``'s ``inherited_env``)."""

    keep_env: bool
    settings: tuple[InheritedSetting, ...] = ()
    conf_files: tuple[tuple[str, str, bool], ...] = ()
    """``(label, path, read)`` of every conf file NCCL would read (``read``: it exists and could be read)."""

    @property
    def unset(self) -> tuple[str, ...]:
        """Variables to remove from every launch's environment."""
        return tuple(s.name for s in self.settings if s.action == "unset")

    @property
    def refused(self) -> tuple[InheritedSetting, ...]:
        """Conf-file entries that stop the sweep (the environment cannot undo them)."""
        return tuple(s for s in self.settings if s.action == "refused")

    @property
    def shaped(self) -> bool:
        """The timed runs keep a selection variable or a swept knob the user's environment or files set: the
        default baseline is not NCCL's (or Open MPI's) own choice."""
        return any(s.action == "kept" and (s.role == "selection" or s.swept) for s in self.settings)

    def to_dict(self) -> dict[str, Any]:
        return {"keep_env": self.keep_env, "shaped": self.shaped, "unset": list(self.unset),
                "conf_files": [{"label": label, "path": path, "read": read} for label, path, read in self.conf_files],
                "settings": [s.to_dict() for s in self.settings]}


_SPEC = "the spec's fixed_env sets it for every point"
_KEEP = "--keep-env: every point, the default baseline included, runs with it"
_ALIKE = "shapes every point alike (not a selection variable, not swept)"


def _what(name: str, swept: frozenset[str] | set[str]) -> str:
    return "a knob this sweep sweeps" if name in swept else "it selects the algorithm"


def audit_inherited_env(env: Mapping[str, str], conf_texts: Mapping[str, str | None], *, engine: str,
                        backend: str | None = None, swept: frozenset[str] | set[str] = frozenset(),
                        fixed_env: Mapping[str, str] | None = None, keep_env: bool = False) -> EnvAudit:
    """The audit (see the module docstring) of ``env`` and of the conf files NCCL would read (:func:`conf_paths`
    of ``env``), whose texts ``conf_texts`` gives by path (None or missing: absent or unreadable). ``swept``: the
    variables the sweep's points set; ``fixed_env``: the spec's, set for every point."""
    fixed = dict(fixed_env or {})
    out: list[InheritedSetting] = []

    def role_of(name: str) -> EnvRole | None:
        role = env_role(name)
        return role if role in ("selection", "tuning") and reads_variable(engine_row(engine, backend), name) else None

    def must_go(name: str, role: EnvRole) -> bool:
        return role == "selection" or name in swept

    present: dict[str, str] = {}  # name -> where NCCL's value comes from in a timed run
    for name in sorted(env):
        role = role_of(name)
        if role is None:
            continue
        action: Action
        if name in fixed:
            action, why = "spec", _SPEC
        elif keep_env:
            action, why = "kept", _KEEP
        elif must_go(name, role):
            action, why = "unset", f"{_what(name, swept)}: the default point must be the library's own choice"
        else:
            action, why = "kept", _ALIKE
        if action == "kept":
            present[name] = "the environment"
        out.append(InheritedSetting(name=name, value=redacted(name, env[name]), source="environment", line=None,
                                    role=role, swept=name in swept, action=action, why=why))
    # NCCL's conf files matter to an engine whose library is NCCL (it reads NCCL_CONF_FILE and the files)
    files = conf_paths(env) if reads_variable(engine_row(engine, backend), "NCCL_CONF_FILE") else []
    for label, path in files:
        text = conf_texts.get(path)
        if text is None:
            continue
        for entry in parse_nccl_conf(text):
            role = role_of(entry.name)
            if role is None:
                continue
            if entry.name in fixed:
                action, why = "spec", _SPEC
            elif entry.name in present:
                action, why = "shadowed", f"{present[entry.name]} sets it first (NCCL never overwrites)"
            elif keep_env:
                action, why = "kept", _KEEP
            elif must_go(entry.name, role):
                action, why = "refused", (f"{_what(entry.name, swept)}: NCCL applies {label}'s value to every point "
                                          "left without it, the default baseline included")
            else:
                action, why = "kept", _ALIKE
            out.append(InheritedSetting(name=entry.name, value=redacted(entry.name, entry.value), source=path,
                                        line=entry.line, role=role,
                                        swept=entry.name in swept, action=action, why=why))
            present.setdefault(entry.name, f"{path}:{entry.line}")
    read = tuple((label, path, conf_texts.get(path) is not None) for label, path in files)
    return EnvAudit(keep_env=keep_env, settings=tuple(out), conf_files=read)


def read_conf_texts(env: Mapping[str, str]) -> dict[str, str | None]:
    """The texts of the conf files NCCL would read (:func:`conf_paths`), None for one that is absent, not a
    regular file or unreadable (NCCL skips those too)."""
    out: dict[str, str | None] = {}
    for _, path in conf_paths(env):
        try:
            p = Path(path)
            out[path] = p.read_bytes().decode("utf-8", "replace") if p.is_file() else None
        except OSError:
            out[path] = None
    return out


def refusal_message(audit: EnvAudit) -> str:
    """The ConfigError text for an audit with refused entries: each entry, why, and the ways out."""
    lines = [f"{s.where}: {s.name}={s.value} ({s.why})" for s in audit.refused]
    return ("NCCL conf file entries would shape this sweep's default baseline, and a sweep cannot unset a conf "
            "file's entry: " + "; ".join(lines) + ". Remove those lines (for NCCL_CONF_FILE or ~/.nccl.conf you "
            "may instead point NCCL_CONF_FILE at a copy without them), or pass --keep-env to measure with them "
            "(the audit is kept in sweep.json and the baseline is marked as shaped)")


def check_refused(audit: EnvAudit) -> None:
    """ConfigError (:func:`refusal_message`) when the audit refuses the sweep."""
    if audit.refused:
        raise ConfigError(refusal_message(audit))


_NOT_SET = "(not set)"


def shaping(audit: EnvAudit | Mapping[str, Any] | None) -> dict[str, str]:
    """What the audit kept in every timed run, name -> value (``kept`` entries of the environment and of the conf
    files, the first one of a name): the inherited tuning a sweep's points were measured with. ``audit`` is an
    :class:`EnvAudit` or its ``to_dict()`` (sweep.json's ``inherited_env``); None gives ``{}``."""
    if audit is None:
        return {}
    entries = ([s.to_dict() for s in audit.settings] if isinstance(audit, EnvAudit)
               else [e for e in audit.get("settings", []) if isinstance(e, Mapping)])
    out: dict[str, str] = {}
    for entry in entries:
        if entry.get("action") == "kept":
            out.setdefault(str(entry.get("name")), str(entry.get("value")))
    return out


def resume_difference(recorded: Mapping[str, Any] | None, now: EnvAudit) -> list[str]:
    """``OMPI_MCA_pml: ob1 -> (not set)``: each inherited tuning variable (:func:`shaping`) whose value differs
    between the audit recorded in sweep.json (``recorded``; None: a sweep.json from before the audit, nothing to
    compare) and this run's; empty when they agree."""
    if recorded is None:
        return []
    before, after = shaping(recorded), shaping(now)
    return [f"{name}: {before.get(name, _NOT_SET)} -> {after.get(name, _NOT_SET)}"
            for name in sorted(before.keys() | after.keys()) if before.get(name) != after.get(name)]


def check_resume(recorded: Mapping[str, Any] | None, now: EnvAudit, where: str) -> None:
    """ConfigError when a resume of the sweep in ``where`` would time its remaining points with other inherited
    tuning than its first points (:func:`resume_difference`): one sweep, two environments, mixed silently.

    ``--keep-env`` does not waive it: it decides what the timed runs keep (a selection variable kept by it is one
    more difference), not whether two environments may share a sweep."""
    difference = resume_difference(recorded, now)
    if difference:
        raise ConfigError(
            f"{where} was measured with other inherited tuning variables than this shell's (sweep.json "
            f"inherited_env, recorded -> now): {'; '.join(difference)}. Resuming would mix points measured in both "
            "environments in one sweep; restore the recorded values (and the same --keep-env) to resume, or use "
            "another --out")
