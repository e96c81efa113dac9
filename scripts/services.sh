#!/usr/bin/env bash
# Start the loopback servers the tests need when they are not running, wait
# until each answers, and print the environment variables that point the
# tests at them. Used by .ci/run; safe to run by hand (it never restarts a
# server that answers).
set -euo pipefail

answers() {  # host port
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

wait_for() {  # name host port check-command...
  local name=$1 host=$2 port=$3; shift 3
  for _ in $(seq 1 120); do
    if answers "$host" "$port" && "$@" >/dev/null 2>&1; then
      echo "services: $name answers on $host:$port" >&2
      return 0
    fi
    sleep 1
  done
  echo "services: $name did not answer on $host:$port within 120 s" >&2
  return 1
}

ensure() {  # name host port start-command
  local name=$1 host=$2 port=$3 start=$4
  if ! answers "$host" "$port"; then
    echo "services: starting $name" >&2
    bash -c "$start" >&2 || echo "services: could not start $name with: $start" >&2
  fi
}

ensure postgres 127.0.0.1 5432 'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start'
ensure redis 127.0.0.1 6379 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log'
ensure rabbitmq 127.0.0.1 5672 'rabbitmq-server -detached'
ensure nats 127.0.0.1 4222 'start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log'

wait_for postgres 127.0.0.1 5432 pg_isready -h 127.0.0.1 -p 5432
wait_for redis 127.0.0.1 6379 redis-cli -h 127.0.0.1 -p 6379 ping
wait_for rabbitmq 127.0.0.1 5672 rabbitmqctl -q await_startup
wait_for nats 127.0.0.1 4222 true

cat <<'VARS'
export ANARCHON_POSTGRES_DSN=postgresql://root@127.0.0.1:5432/postgres
export ANARCHON_REDIS_URL=redis://127.0.0.1:6379/0
export ANARCHON_RABBITMQ_URL=amqp://guest:guest@127.0.0.1:5672/
export ANARCHON_NATS_URL=nats://127.0.0.1:4222
VARS
