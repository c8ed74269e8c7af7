"""The per-process memo: entries expire, and a full memo starts over."""

from __future__ import annotations

from core import memo
from core.memo import ProcessMemo


def test_entries_live_their_ttl_and_can_be_forgotten(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(memo.time, "monotonic", lambda: now[0])
    kept: ProcessMemo[int, str] = ProcessMemo(ttl=1.0)
    kept.put(1, "one")
    now[0] += 0.9
    assert kept.get(1) == "one"
    now[0] += 0.2
    assert kept.get(1) is None
    kept.put(2, "two")
    kept.forget(2)
    assert kept.get(2) is None


def test_a_full_memo_starts_over_rather_than_growing():
    kept: ProcessMemo[int, int] = ProcessMemo(ttl=60, max_size=3)
    for key in range(3):
        kept.put(key, key)
    kept.put(3, 3)
    assert [kept.get(key) for key in range(4)] == [None, None, None, 3]
