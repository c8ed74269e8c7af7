"""A Redis Cluster master killed mid-sale and replaced by its replica: ``redis_lua``'s
reservations on the runner's own cluster (three masters, a replica each, a node timeout of
``NODE_TIMEOUT_MS``), with ``WAIT`` on (``failover-wait``) and off (``failover-no-wait``).

The fault finds the master that serves the run's item (its hash tag's slot) and its
replica, and makes the replica fall behind first, as a replica over a slow or broken link
does: it stops the replica (SIGSTOP), cuts its link on the master (``CLIENT KILL TYPE
replica``) and lets ``--replica-lag`` seconds of writes land on the master alone; then it
SIGKILLs the master and lets the replica go on (SIGCONT). What reached the replica before
the cut, it has; nothing after. The cluster's failure detection then fails the master and
elects the replica in its place (a kill, not ``CLUSTER FAILOVER``, which would hand over in
step). The fault ends when the cluster serves every slot again; the killed node is then
started again, empty, and rejoins as the new master's replica, for the next run.

Judged as Jepsen counts a database's acknowledged writes: every 202 the crowd was answered
must be a record once the run has drained. With ``WAIT`` a reservation is answered 202 only
once the replica has it, and written only then, so none may be lost: the lag shows as 503
``unconfirmed`` answers (counted, neither confirmed nor refused). Without it, the 202s of the
lag are lost with the master, and so is Redis' count of any the worker wrote meanwhile
(their promoted replica numbers the next reservations as those again, and sells their units
again until reconciliation repairs it): the run reports how many of the 202s were lost and
how far Redis fell behind the database, as the known cost of answering before a replica
has the write, and holds if nothing else broke.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from typing import ClassVar

import redis
from redis.crc import key_slot

from ..verdict import REDIS_DRIFT, Result
from .kinds import Fault
from .stage import Stage

# How soon an unreachable node is failed: the replica takes over about a second after that.
NODE_TIMEOUT_MS = 1000
# The fault gives up on the cluster serving every slot again after this many seconds.
PROMOTED_WITHIN = 20.0


class Failover(Fault):
    """The master of the run's item killed and replaced by its replica (see the module)."""

    strategies = ("redis_lua",)
    reservations_cluster = True
    # Answers are normal again once the replica serves the slot (the client follows it).
    recover_within = 5.0
    # RESERVATIONS_WAIT_REPLICAS of the server's processes.
    wait_replicas: ClassVar[int]

    def __init__(self) -> None:
        self.lag = float(os.environ.get("FAILOVER_REPLICA_LAG", "0.3"))

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        return deferred  # the one whose reservations live in Redis

    def lasts(self, down: float) -> float:
        # The lag, the node timeout and the election, which waits up to a second.
        return self.lag + NODE_TIMEOUT_MS / 1000 + 1.5

    def server_settings(self, down: float) -> dict[str, str]:
        return {"RESERVATIONS_WAIT_REPLICAS": str(self.wait_replicas), "RESERVATIONS_WAIT_MS": "100"}

    def inject(self, stage: Stage, group_id: int) -> None:
        from inventory.redis_lua.values import GroupKeys, numbered_of
        from locking.testing import slot_servers

        if not stage.cluster:
            raise RuntimeError("the server does not keep its reservations on the runner's cluster")
        self.master, replicas = slot_servers(stage.cluster, key_slot(GroupKeys.of(group_id).state.encode()))
        if len(replicas) != 1:
            raise RuntimeError(f"the item's master has {len(replicas)} replicas, not one")
        self.replica = replicas[0]
        with redis.Redis(port=self.master.port, socket_timeout=5) as master:
            # Struck while reservations land on it (the crowd may still be arriving).
            state = GroupKeys.of(group_id).state

            def numbered() -> int:
                return numbered_of(master.hget(state, "live"))

            first, give_up = numbered(), time.monotonic() + 10
            while numbered() < first + 10 and time.monotonic() < give_up:
                time.sleep(0.01)
            os.kill(self.replica.pid, signal.SIGSTOP)
            try:
                master.execute_command("CLIENT", "KILL", "TYPE", "replica")
                time.sleep(self.lag)
                self.master.stop()  # SIGKILL
            finally:
                os.kill(self.replica.pid, signal.SIGCONT)

    def heal(self, stage: Stage, down: float) -> float:
        from locking.testing import cluster_nodes

        give_up = time.monotonic() + PROMOTED_WITHIN
        with redis.Redis(port=self.replica.port, socket_timeout=5) as replica:
            while not (
                "master" in next(n["flags"] for n in cluster_nodes(replica) if "myself" in n["flags"])
                and b"cluster_state:ok" in replica.execute_command("CLUSTER", "INFO")
            ):
                if time.monotonic() > give_up:
                    raise RuntimeError(f"the replica was not promoted within {PROMOTED_WITHIN:.0f} s")
                time.sleep(0.05)
            healed = time.time()
            # The killed node back, empty: it learns it was failed over and follows its replica.
            self.master.start()
            with redis.Redis(port=self.master.port, socket_timeout=5) as rejoined:
                while rejoined.info("replication").get("master_link_status") != "up":
                    if time.monotonic() > give_up:
                        raise RuntimeError("the killed master did not rejoin as a replica")
                    time.sleep(0.05)
        return healed

    def reported(self, result: Result, outcomes: list[list[str]]) -> tuple[Result, int, list[str]]:
        unconfirmed = sum(1 for outcome in outcomes if outcome[0] == "unconfirmed")
        said = f"{result.lost_confirmations or 0} of {result.accepted or 0} 202s lost; {unconfirmed} unconfirmed"
        return result, 0, [f"WAIT {self.wait_replicas}: {said}"]


class FailoverWait(Failover):
    name = "failover-wait"
    summary = "a Redis Cluster master SIGKILLed, its lagging replica promoted; WAIT on: no 202 lost"
    wait_replicas = 1


class FailoverNoWait(Failover):
    name = "failover-no-wait"
    summary = "a Redis Cluster master SIGKILLed, its lagging replica promoted; WAIT off: the 202s lost counted"
    wait_replicas = 0

    def reported(self, result: Result, outcomes: list[list[str]]) -> tuple[Result, int, list[str]]:
        lost = result.lost_confirmations or 0
        drift = {name: n for name, n in (result.redis_drift or {}).items() if n}
        notes = [f"WAIT off: {lost} of {result.accepted or 0} 202s lost with the master, as documented"]
        if drift:
            behind = ", ".join(f"{REDIS_DRIFT[name]} ({n})" for name, n in drift.items())
            notes.append(f"Redis behind the database after the failover: {behind}; reconciliation repairs it")
        return replace(result, lost_confirmations=0, redis_drift=None), lost, notes
