"""The runner's progress lines, one prefix for all of them."""

from __future__ import annotations


def say(message: str) -> None:
    print(f"[loadtest] {message}", flush=True)
