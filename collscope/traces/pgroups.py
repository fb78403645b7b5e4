"""Process groups a trace declares (``distributedInfo.pg_config``): names and sizes, for calls whose own
metadata does not say (gloo records none; old traces name the group by ``Process Group ID``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PgInfo", "pg_infos"]


@dataclass(frozen=True, slots=True)
class PgInfo:
    sizes: dict[str, int]
    """pg_name -> pg_size."""
    by_uid: dict[str, str]
    """``uid`` (older traces) -> pg_name."""

    def name_of(self, key: Any) -> str | None:
        """The group a call names (``Process Group Name`` or ``ID``); the only group when it names none."""
        if key is None:
            return next(iter(self.sizes)) if len(self.sizes) == 1 else None
        text = str(key)
        if text in self.sizes:
            return text
        return self.by_uid.get(text, text)

    def size_of(self, name: str | None) -> int | None:
        return None if name is None else self.sizes.get(name)


def pg_infos(info: dict[str, Any]) -> PgInfo:
    sizes: dict[str, int] = {}
    by_uid: dict[str, str] = {}
    config = info.get("pg_config")
    if isinstance(config, list):
        for pg in config:
            if not isinstance(pg, dict) or "pg_name" not in pg:
                continue
            name = str(pg["pg_name"])
            size = pg.get("pg_size")
            if not isinstance(size, int) and isinstance(pg.get("ranks"), list):
                size = len(pg["ranks"])
            if isinstance(size, int):
                sizes[name] = size
            if "uid" in pg:
                by_uid[str(pg["uid"])] = name
    return PgInfo(sizes=sizes, by_uid=by_uid)
