"""Redis distributed locks, usable on their own with a plain redis-py client.

- :class:`Lock`: leases with watchdog renewal, FIFO hand-off without polling,
  fencing tokens, fork safety, optional reentrancy, metrics hooks.
- :mod:`locking.compat`: a drop-in for ``redis.lock.Lock``.
"""

from .errors import LockError, LockLost, LockNotOwned, LockTimeout, StaleFence
from .lock import Lock, Released
from .metrics import CountingMetrics, LockMetrics

__all__ = [
    "CountingMetrics",
    "Lock",
    "LockError",
    "LockLost",
    "LockMetrics",
    "LockNotOwned",
    "LockTimeout",
    "Released",
    "StaleFence",
]
