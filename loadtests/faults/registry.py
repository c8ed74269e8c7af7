"""Every fault the runner knows, by name, in the order ``--faults all`` runs them."""

from __future__ import annotations

from .callbacks import LateCallback
from .expiry import CeleryKillExpiry, ExpiryLost, RedisRestartHeld
from .failover import FailoverNoWait, FailoverWait
from .kinds import CeleryKill, Fault, LockHolderStopped, MariaDBRestart, RedisRestart, RedlockServersStopped, WorkerKill

FAULTS: dict[str, type[Fault]] = {
    fault.name: fault
    for fault in (
        WorkerKill,
        RedisRestart,
        CeleryKill,
        MariaDBRestart,
        LockHolderStopped,
        RedlockServersStopped,
        CeleryKillExpiry,
        ExpiryLost,
        RedisRestartHeld,
        LateCallback,
        FailoverWait,
        FailoverNoWait,
    )
}
