"""How the pages word each strategy: one line on how it guards (``explanation``), for
the lists, the item pages, the staff form and the lab's lanes, and why it holds or breaks
and what holding costs (``why``), for the proof page.

Page wording, kept with the pages rather than on the strategy classes
(``inventory.strategies``), which hold behaviour only. Every registered strategy has its
texts here, or a test fails (tests/inventory/test_texts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .strategies import STRATEGIES


@dataclass(frozen=True)
class StrategyTexts:
    explanation: str
    why: str


TEXTS: dict[str, StrategyTexts] = {
    "none": StrategyTexts(
        explanation="reads the stock, checks it, then writes stock - 1 from Python: buyers in between all win",
        why=(
            "Every buyer who reads the stock before the first write lands sees the same number, and each "
            "writes that number minus one: the writes overwrite each other, and more orders are confirmed "
            "than there was stock. It costs nothing and guarantees nothing."
        ),
    ),
    "local": StrategyTexts(
        explanation="the naive code inside a lock of this server process: other processes do not see it",
        why=(
            "The lock lives in one server process. gunicorn serves with several, each with a lock of its "
            "own, so buyers in different processes race exactly as with none; it holds only when a single "
            "process serves."
        ),
    ),
    "db_pessimistic": StrategyTexts(
        explanation="SELECT ... FOR UPDATE on the stock rows: buyers queue on the rows inside the database",
        why=(
            "It holds because the second buyer's read waits for the first one's commit. The cost: the "
            "buyers of one item pass one transaction at a time, pause included, so its throughput is the "
            "lowest under a crowd; nobody is refused busy."
        ),
    ),
    "db_optimistic": StrategyTexts(
        explanation="reads a version, writes only if it has not changed, retries a few times, then answers busy",
        why=(
            "It holds because a write based on a stale read changes nothing. The cost: under a crowd most "
            "writers lose and retry, and after a few losses the buyer hears busy while stock may be left; "
            "it suits low contention."
        ),
    ),
    "db_atomic": StrategyTexts(
        explanation="one conditional UPDATE ... WHERE stock >= 1: the database refuses the write that would oversell",
        why=(
            "It holds because the database checks and decrements in one statement. The cost is one row "
            "lock for the length of that statement's transaction and nothing held between requests: "
            "usually the fastest database strategy."
        ),
    ),
    "redis_lock": StrategyTexts(
        explanation="a Redis lock per buyer and per item, held from before the write until after the commit",
        why=(
            "It holds because buyers of one item queue in Redis and every write carries a fencing token, "
            "so a holder whose lease ran out cannot write. The cost: lock and unlock round trips to Redis, "
            "and one Redis server to depend on."
        ),
    ),
    "redlock": StrategyTexts(
        explanation="the same Redis locks, each held on a majority of independent Redis servers",
        why=(
            "It holds as redis_lock does, and keeps holding when a minority of its Redis servers is lost. "
            "The cost: every lock and unlock is a round trip to each server."
        ),
    ),
    "redis_lua": StrategyTexts(
        explanation="one Lua script checks and reserves in Redis; a Celery worker writes the order afterwards (202)",
        why=(
            "It holds because Redis runs one script at a time: no buyer's check and decrement can "
            "interleave with another's. The cost moves out of the request: the buyer hears 202 (pending) "
            "and a worker writes the records in batches, so Redis holds the sale until then. Redis must "
            "not evict its keys, and a missing state is rebuilt from the database; until then buyers hear "
            "503, never a sale from nothing."
        ),
    ),
}


@dataclass(frozen=True)
class Described:
    """A registered strategy as the pages show it: its name, how it is expected to break
    (``breaks``, None when it holds), whether it only reserves (``deferred``), and its texts."""

    name: str
    breaks: str | None
    deferred: bool
    explanation: str
    why: str


def described(name: str) -> Described | None:
    """The registry's strategy ``name`` with its texts; None for a name the registry lacks
    (a strategy since removed). A strategy without texts reads with empty ones."""
    strategy = STRATEGIES.get(name)
    if strategy is None:
        return None
    texts = TEXTS.get(name, StrategyTexts(explanation="", why=""))
    return Described(
        name=name, breaks=strategy.breaks, deferred=strategy.deferred, explanation=texts.explanation, why=texts.why
    )
