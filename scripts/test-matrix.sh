#!/usr/bin/env bash
# The whole test suite as a matrix: one pytest run per broker, each printing
# its own summary, then one line "N passed, N failed" for all of them. The
# "faults" step runs the fault judge's tests, the fault regression test and the
# short fault scenario on each backend (about 30 s each; make chaos is the
# full one). The "recipes" step runs examples/recipes (Flask, Django, gunicorn,
# FastAPI, a plain service) and the background scheduler against SQLite and
# Redis; the "failover" step fails each replicated referee over (about a
# minute each; make chaos-failover is the full one). Extra arguments go to
# every pytest run (e.g. -m "not slow").
# ANARCHON_STEPS=core,redis picks steps; an unknown name exits 2, listing them.
# Exits non-zero when any step fails.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
STEPS=(
  "core:packages/anarchon-core packages/conformance"
  "sqlite:packages/anarchon-sqlite"
  "redis:packages/anarchon-redis"
  "postgres:packages/anarchon-postgres"
  "rabbitmq:packages/anarchon-rabbitmq"
  "nats:packages/anarchon-nats"
  "observability:packages/anarchon-prometheus packages/anarchon-opentelemetry"
  "web:packages/anarchon-web"
  "faults:tests/chaos"
  "failover:tests/failover"
  "release:tests/release"
  "recipes:tests/recipes"
)
if [ -n "${ANARCHON_STEPS:-}" ]; then
  # A misspelt step would otherwise run nothing and end in "0 passed, 0 failed".
  names=$(printf '%s, ' "${STEPS[@]%%:*}"); names=${names%, }
  IFS=, read -ra wanted <<< "${ANARCHON_STEPS// /}"
  [ ${#wanted[@]} -gt 0 ] || { echo "test-matrix: ANARCHON_STEPS names no step; the steps are: $names" >&2; exit 2; }
  for want in "${wanted[@]}"; do
    case ", $names," in
      *", $want,"*) ;;
      *)
        echo "test-matrix: unknown step '$want' in ANARCHON_STEPS; the steps are: $names" >&2
        [ "$want" = chaos ] && echo "test-matrix: the fault suite's step is 'faults' ('make chaos' runs the full scenario)" >&2
        exit 2;;
    esac
  done
  selected=()
  for step in "${STEPS[@]}"; do
    case ",${ANARCHON_STEPS// /}," in *",${step%%:*},"*) selected+=("$step");; esac
  done
  STEPS=("${selected[@]}")
fi
logdir=$(mktemp -d)
passed=0 failed=0 skipped=0 bad_steps=()
count() {  # word file
  # pytest's closing line, with or without -q: "=== 3 passed, 1 skipped in 2.1s ===" or "3 passed in 2.1s"
  grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s' "$2" | tail -n 1 | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' || echo 0
}
for step in "${STEPS[@]}"; do
  name=${step%%:*}
  paths=${step#*:}
  log="$logdir/$name.log"
  echo "::: step $name: pytest $paths"
  start=$SECONDS
  # shellcheck disable=SC2086
  "$PY" -m pytest $paths "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  p=$(count passed "$log"); f=$(count failed "$log"); e=$(count error "$log"); s=$(count skipped "$log")
  passed=$((passed + p)); failed=$((failed + f + e)); skipped=$((skipped + s))
  echo "::: step $name: rc=$rc, $p passed, $((f + e)) failed, $s skipped in $((SECONDS - start)) s"
  if [ "$rc" -ne 0 ]; then
    bad_steps+=("$name")
    [ $((f + e)) -eq 0 ] && failed=$((failed + 1))  # a step that broke before counting still counts
  fi
done
echo
for step in "${STEPS[@]}"; do
  name=${step%%:*}
  case " ${bad_steps[*]:-} " in *" $name "*) echo "  $name: FAILED";; *) echo "  $name: ok";; esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ ${#bad_steps[@]} -eq 0 ]
