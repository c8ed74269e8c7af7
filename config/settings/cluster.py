"""The settings of ``redis_lua``'s reservations on a Redis Cluster with replicas, read from the
environment (docs/operations.md, "A Redis Cluster with replicas")."""

from __future__ import annotations

from .environment import env_bool, env_int

# On: RESERVATIONS_REDIS_URL names some nodes of a Redis Cluster (comma-separated
# redis://host:port URLs, any of its nodes, masters or replicas), and the items' states are
# spread over its masters by their hash tags.
RESERVATIONS_REDIS_CLUSTER = env_bool("RESERVATIONS_REDIS_CLUSTER", False)
# Above 0: a reservation is answered 202 only once this many replicas of its master have it
# (WAIT, right after the script on its connection), waited for up to RESERVATIONS_WAIT_MS;
# else 503 `unconfirmed` (it was made, and stands unless that master fails before a replica
# has it). A worker then writes only the reservations the replicas have.
RESERVATIONS_WAIT_REPLICAS = env_int("RESERVATIONS_WAIT_REPLICAS", 0)
RESERVATIONS_WAIT_MS = env_int("RESERVATIONS_WAIT_MS", 100)
