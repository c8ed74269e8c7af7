"""Redis distributed locks, usable on their own with a plain redis-py client.

- :class:`Lock`: leases with watchdog renewal, FIFO hand-off without polling,
  fencing tokens, fork safety, optional reentrancy, metrics hooks
  (:class:`LockLog` turns them into log lines).
- :func:`lock_many`: all-or-nothing over many names (user and item, or 3,000 items).
- :class:`SharedLock` and :class:`ExclusiveLock`: a read-write lock, up to N shared holders
  or one exclusive, each with its lease; a waiting exclusive caller is not starved.
- :mod:`locking.compat`: a drop-in for ``redis.lock.Lock``.
"""

from .errors import LockError, LockLost, LockNotOwned, LockTimeout, StaleFence
from .exclusive import ExclusiveLock
from .lease import Released
from .lock import Lock
from .log import LockLog
from .many import MultiLock, lock_many
from .metrics import CountingMetrics, Fanout, LockMetrics, observe
from .shared import SharedLock

__all__ = [
    "CountingMetrics",
    "ExclusiveLock",
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
    "SharedLock",
    "StaleFence",
    "lock_many",
    "observe",
]
