"""The Locust web UI's login throttle (``loadtests/web_login.py``), in the spirit of the
site's own (``accounts/throttle.py``), with its numbers: a guess refused is answered before
the password is compared, so that a flood of them finds nothing.

- per address, with backoff: after ``FREE`` failures the address is refused for
  ``BACKOFF`` seconds, doubled at each further failure up to ``WINDOW``; a success from the
  address forgets its failures;
- for the one account, a ceiling (``ACCOUNT_CEILING`` failures in ``WINDOW``): guesses spread
  over many addresses still end. An address the operator has logged in from is not held to
  it, so that guesses from elsewhere cannot lock the operator out where they log in.

Kept in the master's memory: the master is one process, and a restart also logs everyone
out (its session key is its own). No import of Locust here, so that a test can drive it
with a clock of its own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FREE = 5
BACKOFF = 30.0
WINDOW = 900.0
ACCOUNT_CEILING = 50
# The most addresses remembered at once: past it, the oldest go.
ADDRESSES = 10_000
# How long an address the operator logged in from stays theirs.
KNOWN_FOR = 30 * 86400.0


@dataclass
class Failures:
    count: int = 0
    first: float = 0.0
    until: float = 0.0


@dataclass
class LoginThrottle:
    clock: Callable[[], float] = time.monotonic
    by_address: dict[str, Failures] = field(default_factory=dict)
    account: list[float] = field(default_factory=list)
    known: dict[str, float] = field(default_factory=dict)

    def retry_after(self, address: str) -> int:
        """Whole seconds until ``address`` may try again; 0 when it may now."""
        now = self.clock()
        waits = [0.0]
        failures = self.by_address.get(address)
        if failures is not None and now - failures.first < WINDOW:
            waits.append(failures.until - now)
        self.account = [moment for moment in self.account if now - moment < WINDOW]
        if len(self.account) >= ACCOUNT_CEILING and not self._known(address, now):
            waits.append(self.account[0] + WINDOW - now)
        wait = max(waits)
        return max(1, math.ceil(wait)) if wait > 0 else 0

    def failure(self, address: str) -> None:
        now = self.clock()
        failures = self.by_address.get(address)
        if failures is None or now - failures.first >= WINDOW:
            # Put last, so that the addresses stay in the order of their first failure.
            self.by_address.pop(address, None)
            failures = self.by_address[address] = Failures(first=now)
            if len(self.by_address) > ADDRESSES:
                self.by_address.pop(next(iter(self.by_address)))
        failures.count += 1
        if failures.count >= FREE:
            failures.until = now + min(BACKOFF * 2 ** (failures.count - FREE), WINDOW)
        self.account.append(now)

    def success(self, address: str) -> None:
        self.by_address.pop(address, None)
        self.known.pop(address, None)
        self.known[address] = self.clock()
        if len(self.known) > ADDRESSES:
            self.known.pop(next(iter(self.known)))

    def _known(self, address: str, now: float) -> bool:
        since = self.known.get(address)
        return since is not None and now - since < KNOWN_FOR
