#!/usr/bin/env bash
# Starts the local PostgreSQL and Redis the tests use when they are not running, and waits for
# both. Prints one line per service; exits non-zero when one cannot be had.
set -u

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
wait_for() { for _ in $(seq 1 30); do "$1" && return 0; sleep 1; done; return 1; }

if ! pg_up && command -v pg_ctlcluster >/dev/null 2>&1; then
  # Debian's clusters: /etc/postgresql/<version>/<name>; the first one found is started.
  cluster=$(find /etc/postgresql -mindepth 2 -maxdepth 2 -type d 2>/dev/null | sort | head -n1)
  if [ -n "$cluster" ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(basename "$(dirname "$cluster")")" "$(basename "$cluster")" start >/dev/null 2>&1
  fi
  wait_for pg_up
fi

if ! redis_up && command -v redis-server >/dev/null 2>&1; then
  dir=$(mktemp -d /tmp/agentrun-ci-redis.XXXXXX)
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" >/dev/null 2>&1
  wait_for redis_up
fi

status=0
if pg_up; then echo "postgresql: up on 127.0.0.1:5432"; else echo "postgresql: NOT reachable on 127.0.0.1:5432" >&2; status=1; fi
if redis_up; then echo "redis: up on 127.0.0.1:6379"; else echo "redis: NOT reachable on 127.0.0.1:6379" >&2; status=1; fi
exit $status
