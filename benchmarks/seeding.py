"""What a benchmark's runs buy and who buys it: bearer tokens for the buyers, kept between
runs, and fresh vouchers and pools on stock that runs out only when meant to."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

from harness.server import ROOT

from .report import say

VAR = ROOT / "var" / "bench"
AMPLE = 10_000_000  # units that no run sells out
PRIZES = 5


def buyer_tokens(args) -> list[str]:
    """``--tokens`` bearer tokens, those of an earlier run when the database still knows them."""
    from django.db import connections

    from accounts.selectors import user_for_token

    VAR.mkdir(parents=True, exist_ok=True)
    name = args.database_url.rsplit("/", 1)[-1]
    path = VAR / f"http-tokens-{name}.txt"
    tokens = [line.split()[1] for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if len(tokens) < args.tokens or user_for_token(raw=tokens[0]) is None or user_for_token(raw=tokens[-1]) is None:
        say(f"issuing {args.tokens:,} tokens (manage.py issue_tokens) ...")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [sys.executable, "manage.py", "issue_tokens", "--count", str(args.tokens), "--out", str(path),
             "--prefix", "bench-http"],
            cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        tokens = [line.split()[1] for line in path.read_text().splitlines() if line.strip()]
    connections.close_all()
    return tokens[: args.tokens]


class Items:
    """Fresh vouchers and pools, one per run, so that the same buyers buy once in each; the
    Redis state of the ``redis_lua`` ones (``groups``) is dropped at the end."""

    def __init__(self) -> None:
        self.groups: list[int] = []

    @staticmethod
    def _window() -> dict:
        from django.utils import timezone

        now = timezone.now()
        return {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=2)}

    def voucher(self, strategy: str, stock: int) -> tuple[int, int]:
        """(voucher id, stock group id)."""
        from orders.services import voucher_create

        voucher = voucher_create(
            title=f"bench http {strategy}", stock=stock, strategy=strategy, listed=False, **self._window()
        )
        if strategy == "redis_lua":
            self.groups.append(voucher.group_id)
        return voucher.pk, voucher.group_id

    def pool(self, strategy: str) -> int:
        from lottery.services import pool_create, prize_create

        pool = pool_create(
            name=f"bench http {strategy}", draws_per_user=1, no_prize_weight=0, strategy=strategy, listed=False,
            **self._window(),
        )  # fmt: skip
        for n in range(1, PRIZES + 1):
            prize_create(pool=pool, name=f"prize {n}", stock=AMPLE // PRIZES)
        if strategy == "redis_lua":
            self.groups.append(pool.group_id)
        return pool.pk

    def drop(self) -> None:
        from inventory.redis_lua.client import reservations_client

        reservations = reservations_client()
        for group_id in self.groups:
            reservations.drop(group_id=group_id)
        self.groups.clear()
