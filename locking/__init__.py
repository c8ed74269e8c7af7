"""Redis distributed locks, usable on their own with a plain redis-py client.

- :class:`Lock`: leases with watchdog renewal, FIFO hand-off without polling,
  fencing tokens, fork safety, optional reentrancy, metrics hooks
  (:class:`LockLog` turns them into log lines).
- :func:`lock_many`: all-or-nothing over many names (user and item, or 3,000 items).
- :mod:`locking.compat`: a drop-in for ``redis.lock.Lock``.
"""

from .errors import LockError, LockLost, LockNotOwned, LockTimeout, StaleFence
from .lease import Released
from .lock import Lock
from .log import LockLog
from .many import MultiLock, lock_many
from .metrics import CountingMetrics, Fanout, LockMetrics, observe

__all__ = [
    "CountingMetrics",
    "Fanout",
    "Lock",
    "LockError",
    "LockLog",
    "LockLost",
    "LockMetrics",
    "LockNotOwned",
    "LockTimeout",
    "MultiLock",
    "Released",
    "StaleFence",
    "lock_many",
    "observe",
]
