"""A run's fault, struck on time while the load runs, and what the runner asks the server
around it: ``/healthz`` and the lock events its ``/metrics`` counted."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request

from ..console import say
from .kinds import Fault
from .stage import Stage


class Strike:
    """The fault of one run, struck from the sampler's observer once the load has run
    ``fault_at`` seconds, in a thread of its own (the sampling goes on meanwhile)."""

    def __init__(self, fault: Fault, stage: Stage, fault_at: float, down: float) -> None:
        self.fault, self.stage, self.fault_at, self.down = fault, stage, fault_at, down
        self.target = None
        self.origin: float | None = None  # time.time() of the sampler's start
        self.injected_at: float | None = None
        self.healed_at: float | None = None
        self.health: str = ""
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def observe(self, target, elapsed: float, sample) -> None:
        if self._thread is None and elapsed >= self.fault_at:
            self.target, self.origin = target, time.time() - elapsed
            self._thread = threading.Thread(target=self._strike, daemon=True)
            self._thread.start()

    def _strike(self) -> None:
        try:
            say(f"  !! {self.fault.name} at {self.fault_at:.0f}s")
            self.injected_at = time.time()
            self.stage.target = self.target
            self.fault.inject(self.stage, self.target.group_id)
            if self.fault.health_names:
                time.sleep(min(0.5, self.down / 2))
                self.health = health(self.stage.server.host)
            self.healed_at = self.fault.heal(self.stage, self.down)
            say(f"  !! {self.fault.name} over after {self.healed_at - self.injected_at:.1f}s")
        except BaseException as exc:  # noqa: BLE001  (reported by the run)
            self.error = exc

    def wait(self) -> None:
        if self._thread is None:
            raise RuntimeError("the fault never struck: the load ended before --fault-at")
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"{self.fault.name} failed: {self.error!r}") from self.error


# The lock events of the stock groups' locks, from the server's /metrics.
LOCK_EVENTS = {"flashsale_lock_stale_fences": "stale_fences", "flashsale_lock_lost": "leases_lost"}


def lock_events(host: str) -> dict[str, float]:
    """{event: count} of the stock groups' locks since the server started, summed over its
    worker processes (``inventory.metrics``); empty when /metrics does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    request = urllib.request.Request(f"{host}/metrics")
    if os.environ.get("METRICS_TOKEN"):
        request.add_header("Authorization", f"Bearer {os.environ['METRICS_TOKEN']}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    counted = dict.fromkeys(LOCK_EVENTS.values(), 0.0)
    for family in text_string_to_metric_families(text):
        event = LOCK_EVENTS.get(family.name)
        if event is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels.get("lock") == "stock-group:N":
                counted[event] += sample.value
    return counted


def health(host: str) -> str:
    """What /healthz answers now: its status and body, in a few words."""
    try:
        with urllib.request.urlopen(f"{host}/healthz", timeout=5) as response:
            return f"{response.status} {response.read().decode()}"
    except urllib.error.HTTPError as answer:
        return f"{answer.code} {answer.read().decode()}"
    except OSError as exc:
        return f"no answer: {exc}"


def health_says_down(said: str, name: str) -> bool:
    """Whether a /healthz answer was a 503 naming ``name`` as failed."""
    status, _, body = said.partition(" ")
    try:
        return status == "503" and str(json.loads(body).get(name, "")).startswith("error")
    except ValueError:
        return False
