#!/usr/bin/env bash
# Makes sure MariaDB and Redis answer on 127.0.0.1, starting them if they are down.
set -euo pipefail

mariadb_up() { mysqladmin --protocol=tcp -h127.0.0.1 -uroot ping >/dev/null 2>&1; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

wait_for() {
  local name=$1 probe=$2
  for _ in $(seq 1 60); do
    $probe && return 0
    sleep 0.5
  done
  echo "[setup] $name does not answer on 127.0.0.1" >&2
  exit 1
}

if ! mariadb_up; then
  echo "[setup] starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB mariadb_up
fi
if ! redis_up; then
  echo "[setup] starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for Redis redis_up
fi
echo "[setup] MariaDB and Redis answer on 127.0.0.1"
