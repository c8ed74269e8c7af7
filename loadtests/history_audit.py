"""A run's history read against its records (``loadtests.history``): the records' moments,
the supply of each unit, and the ``redis_lua`` reservations undone, read from the database
and Redis once the run has drained.

Imported once Django is set up.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from inventory.models import Stock
from inventory.records import internal_of, public_of
from inventory.redis_lua.client import reservations_client
from lottery.models import Prize

from .history import VOUCHER_UNIT, Call, Record, check_history, counted, parse_history
from .history_log import TAKE, history_lines
from .products import Product, Target
from .verdict import POOL

# The violations written beside the outcomes, for a reader to start from.
VIOLATIONS_KEPT = 200


def history_figures(product: Product, target: Target, outcomes_dir: Path) -> dict:
    """``history_violations`` and ``history_rules`` of ``verdict.Result``; the first
    violations, if any, go to ``history-violations.jsonl`` in the run's folder (not beside
    the histories, where the next read would take them for one)."""
    calls = [
        call
        for call in parse_history(history_lines(outcomes_dir))
        if call.kind == product.name and call.item == target.pk
    ]
    records = records_of(product, target)
    violations = check_history(
        calls, records, supply_of(product, target), failed=undone(calls, {record.id for record in records})
    )
    if violations:
        kept = [{"rule": v.rule, "why": v.why, **asdict(v.call)} for v in violations[:VIOLATIONS_KEPT]]
        (outcomes_dir.parent / "history-violations.jsonl").write_text("".join(json.dumps(v) + "\n" for v in kept))
    return {"history_violations": len(violations), "history_rules": counted(violations)}


def records_of(product: Product, target: Target) -> list[Record]:
    unit = "prize_id" if product.name == POOL else "pk"
    rows = product.records(target).values_list(
        "pk", "reservation", "user_id", "status", "created_at", "released_at", unit
    )
    return [
        Record(
            id=public_of(reservation or pk),
            user=user,
            status=status,
            created=created.timestamp(),
            released=released.timestamp() if released else None,
            unit=taken if product.name == POOL else VOUCHER_UNIT,
        )  # fmt: skip
        for pk, reservation, user, status, created, released, taken in rows
    ]


def supply_of(product: Product, target: Target) -> dict[int, int]:
    """Units supplied by the end (initial stock and restocks), by unit key: a voucher's all
    under one, a pool's by prize (each prize's rows name its bucket-0 row as their head)."""
    rows = Stock.objects.filter(group_id=target.group_id).values_list("head_id", "initial_quantity")
    if product.name != POOL:
        return {VOUCHER_UNIT: sum(units for _, units in rows)}
    prize_of = {stock: prize for prize, stock in Prize.objects.filter(pool_id=target.pk).values_list("pk", "stock_id")}
    supply: dict[int, int] = {}
    for head, units in rows:
        if head in prize_of:
            supply[prize_of[head]] = supply.get(prize_of[head], 0) + units
    return supply


def undone(calls: list[Call], recorded: set[int]) -> set[int]:
    """The reservations answered 202 with no record that ``redis_lua`` undid with a reason."""
    missing = {c.record for c in calls if c.action == TAKE and c.status == 202 and c.record is not None} - recorded
    if not missing:
        return set()
    client = reservations_client()
    return {one for one in missing if client.failed(reservation=internal_of(one)) is not None}
