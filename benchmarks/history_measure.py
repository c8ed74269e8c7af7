"""How ``benchmarks.history`` measures one case: its queries one by one (SQL, parameters,
seconds), its wall time, and the plans of its queries that read many rows."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# A first run longer than this is followed by one more only.
SLOW_SECONDS = 2.0


@dataclass
class Case:
    """One measured thing: ``run(given)`` timed, ``given = setup()`` made before each run and
    ``teardown(given)`` after it, neither timed."""

    name: str
    kind: str
    run: Callable[[Any], Any]
    setup: Callable[[], Any] = lambda: None
    teardown: Callable[[Any], None] = lambda given: None

    def __post_init__(self) -> None:
        # Named alike on both sites: an id in a path is the site's own.
        self.name = re.sub(r"/\d+(?=[/ ]|$)", "/<id>", self.name)


@dataclass
class Recorder:
    """Every query the connection runs: its SQL, parameters and seconds."""

    queries: list[tuple[str, Any, float]] = field(default_factory=list)

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append((sql, params, time.perf_counter() - started))


def _status(answer) -> object:
    """The HTTP status of a client's answer; a task's or a command's own answer (what a task
    did, a command's exit status) as it is."""
    return getattr(answer, "status_code", None) or repr(answer)[:40]


def measure(case: Case, repeat: int, explain_rows: int, explain: bool) -> dict:
    from django.db import connection

    walls, recorders, status = [], [], "-"
    runs = repeat + 1
    n = 0
    while n < runs:
        given = case.setup()
        recorder = Recorder()
        with connection.execute_wrapper(recorder):
            started = time.perf_counter()
            answer = case.run(given)
            wall = time.perf_counter() - started
        case.teardown(given)
        status = _status(answer)
        if n == 0 and wall > SLOW_SECONDS:
            runs = 2
        if n > 0:
            walls.append(wall)
            recorders.append(recorder)
        n += 1
    last = recorders[-1]
    result = {
        "kind": case.kind,
        "status": status,
        "queries": len(last.queries),
        "ms": statistics.median(walls) * 1000,
        "runs_ms": [round(w * 1000, 2) for w in walls],
        "db_ms": statistics.median(sum(q[2] for q in r.queries) for r in recorders) * 1000,
    }
    if explain:
        result["explains"] = _explains(last, explain_rows)
    return result


def _explains(recorder: Recorder, threshold: int) -> list[dict]:
    """The plans of the run's SELECTs that read more than ``threshold`` rows of one table."""
    from django.db import connection

    plans, seen = [], set()
    for sql, params, seconds in recorder.queries:
        if not sql.lstrip().upper().startswith("SELECT") or sql in seen or isinstance(params, list):
            continue
        seen.add(sql)
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            names = [column[0] for column in cursor.description]
            rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            # The statement as the server got it, the parameters in place.
            shown = connection.ops.last_executed_query(cursor.cursor, sql, params).removeprefix("EXPLAIN ")
        if max((_rows_read(row) for row in rows), default=0) > threshold:
            plans.append({"shape": sql, "sql": shown, "ms": seconds * 1000, "plan": rows})
    return plans


def _rows_read(row: dict) -> int:
    """The rows a line of MariaDB's plan reads ("1 (1%)" where a filter applies: 1)."""
    match = re.match(r"\d+", str(row.get("rows") or 0))
    return int(match.group()) if match else 0
