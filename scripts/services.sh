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

# One server per backend manifest with a [service] table (packages/*/backend.toml).
services=$(python3 "$(dirname "$0")/backends.py" services)
# The list is read on fd 3: a start or ready command (rabbitmqctl) would swallow it on stdin.
while IFS=$'\t' read -r -u 3 name port start _; do
  ensure "$name" 127.0.0.1 "$port" "$start"
done 3<<< "$services"
while IFS=$'\t' read -r -u 3 name port _ ready; do
  # shellcheck disable=SC2086  # the manifest's ready command splits into its words on purpose
  wait_for "$name" 127.0.0.1 "$port" $ready
done 3<<< "$services"

python3 "$(dirname "$0")/backends.py" env
