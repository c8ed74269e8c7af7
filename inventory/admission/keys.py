"""Where an item's waiting room lives: its keys in Redis, the client of that Redis
(``ADMISSION_REDIS_CLIENT``), and its scripts over each thread's own connection."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from core.named_redis import named_client
from core.namespace import key_prefix
from core.redis_script import script_on_own_connections


@dataclass(frozen=True)
class RoomKeys:
    """One item's room, under one hash tag (one Cluster slot) and the instance's namespace;
    ``hash_tag`` is that tag alone, which the room's rate-limit counters share
    (``core.ratelimit.RateCount.keys``)."""

    line: str
    admitted: str
    serials: str
    room: str
    hash_tag: str

    @classmethod
    @cache
    def of(cls, kind: str, item_id: int) -> RoomKeys:
        hash_tag = f"{{{kind}:{item_id}}}"
        tag = f"{key_prefix()}room:{hash_tag}"
        return cls(
            line=f"{tag}:line",
            admitted=f"{tag}:admitted",
            serials=f"{tag}:serials",
            room=f"{tag}:room",
            hash_tag=hash_tag,
        )

    @property
    def all(self) -> list[str]:
        return [self.line, self.admitted, self.serials, self.room]


def room_client():
    return named_client("ADMISSION_REDIS_CLIENT")


# (client, source) -> the script over each thread's own connection: a join, a poll and a take
# each make one call, and the pool's bookkeeping would cost them more than the call itself
# (``core.redis_script``).
_scripts: dict[tuple[int, str], Any] = {}


def room_script(source: str):
    client = room_client()
    script = _scripts.get((id(client), source))
    if script is None:
        script = _scripts[(id(client), source)] = script_on_own_connections(client, source)
    return script
