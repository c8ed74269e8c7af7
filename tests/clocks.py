"""A clock that moves only when a test moves it (``clock.now += 10``): injected where the code
reads the time, so that time passes without waiting for it."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
