#!/usr/bin/env bash
# The whole test suite as a matrix: one pytest run per step, each printing its
# own summary, then one line "N passed, N failed, N skipped" for all of them.
#
# Steps run side by side in ANARCHON_JOBS lanes (default 3; ANARCHON_JOBS=1
# runs them one after another). Almost every step spends its time waiting on
# brokers, subprocesses and the clock, not on the CPU, so three lanes fit two
# cores; CONTRIBUTING.md ("What CI runs") has the measurements. Each step
# writes its own log, printed whole when the step ends, so outputs never
# interleave. The longest steps start first (the seconds in STEPS are their
# measured length), which keeps the lanes even.
#
# ANARCHON_BROKERS=docker gives the steps of the backends whose manifest names
# a [service] their servers from containers that pytest-docker starts
# (scripts/docker_services.py; their ANARCHON_* variables are unset for those
# steps, and every test of the step runs once, ANARCHON_DOCKER_ALL=1 unless
# set); the other steps keep the loopback servers. At the end nothing the
# containers left may remain (scripts/docker-sweep.sh). CI runs this way, so
# each broker test runs once, against a server the tests started.
# ANARCHON_BROKERS=loopback (the default) uses the ANARCHON_* variables.
#
# ANARCHON_STEPS=core,redis picks steps; an unknown name exits 2, listing them.
# --list prints the step names and exits.
# Extra arguments go to every pytest run (e.g. -m "not slow"). Exits non-zero
# when any step fails.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
JOBS=${ANARCHON_JOBS:-3}
# name|seconds measured alone|pytest paths and arguments
STEPS=(
  "core|35|packages/anarchon-core"
  "scenarios|77|tests/scenarios"
  "conformance|56|packages/conformance"
  "oracles|101|tests/oracles"
  "observability|8|packages/anarchon-prometheus packages/anarchon-opentelemetry"
  "web|33|packages/anarchon-web"
  "faults|170|tests/chaos"
  "failover|268|tests/failover"
  "release|59|tests/release"
  "recipes|42|tests/recipes"
  "docs|5|tests/docs tests/repo"
  "template|60|tests/template"
  "docker|30|tests/docker"
  "bench|70|tests/bench"
)
# One step per backend, from its manifest (packages/*/backend.toml, [test]).
backend_steps=$(python3 scripts/backends.py steps) || { echo "test-matrix: scripts/backends.py could not read the backends' manifests" >&2; exit 2; }
mapfile -t -O "${#STEPS[@]}" STEPS <<< "$backend_steps"
names=$(for s in "${STEPS[@]}"; do printf '%s, ' "${s%%|*}"; done); names=${names%, }
if [ "${1:-}" = "--list" ]; then  # the step names, one per line (the GitHub workflow's matrix)
  printf '%s\n' "${STEPS[@]%%|*}"
  exit 0
fi
if [ -n "${ANARCHON_STEPS:-}" ]; then
  # A misspelt step would otherwise run nothing and end in "0 passed, 0 failed".
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
    case ",${ANARCHON_STEPS// /}," in *",${step%%|*},"*) selected+=("$step");; esac
  done
  STEPS=("${selected[@]}")
fi
BROKERS=${ANARCHON_BROKERS:-loopback}
served=""
case "$BROKERS" in
  loopback) ;;
  docker)
    served=",$(python3 scripts/backends.py services | cut -f1 | paste -sd, -),"
    mapfile -t unset_args < <(python3 scripts/backends.py env-names | sed 's/^/-u/')
    export ANARCHON_DOCKER_RUN=${ANARCHON_DOCKER_RUN:-$$} ANARCHON_DOCKER_ALL=${ANARCHON_DOCKER_ALL:-1};;
  *) echo "test-matrix: ANARCHON_BROKERS=$BROKERS is neither loopback (the ANARCHON_* servers) nor docker (containers the tests start)" >&2; exit 2;;
esac
case "$JOBS" in ''|*[!0-9]*|0) echo "test-matrix: ANARCHON_JOBS=$JOBS is not a positive whole number of lanes (1 runs the steps one by one)" >&2; exit 2;; esac
# Longest first: sort by the measured seconds, descending.
mapfile -t ORDER < <(printf '%s\n' "${STEPS[@]}" | sort -t'|' -k2,2nr)

logdir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$logdir"' EXIT
count() {  # word file
  # pytest's closing line, with or without -q: "=== 3 passed, 1 skipped in 2.1s ===" or "3 passed in 2.1s"
  grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s' "$2" | tail -n 1 | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' || echo 0
}
run_step() {  # name paths...; the step's exit code and seconds go to $logdir/name.rc
  local name=$1 start=$SECONDS rc
  shift
  local how=("$PY" -m pytest)
  case "$served" in *",$name,"*) how=(env "${unset_args[@]}" "$PY" -m pytest -p scripts.docker_services);; esac
  # shellcheck disable=SC2068  # the step's paths and arguments split on purpose
  "${how[@]}" $@ "${EXTRA[@]}" > "$logdir/$name.log" 2>&1 < /dev/null
  rc=$?
  # The CPU the step's processes used (user + system, from `times`: this lane's children), beside its seconds:
  # on two cores the steps share the CPU with the servers, so a step's CPU is what it costs the others.
  # (`times` itself, not in a $(…) subshell, whose children would be none.)
  local cpu
  times > "$logdir/$name.times"
  cpu=$(tail -n 1 "$logdir/$name.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%d", t }')
  echo "$rc $((SECONDS - start)) $cpu" > "$logdir/$name.rc"
}
EXTRA=("$@")
passed=0 failed=0 skipped=0 bad_steps=()
report() {  # name: print the step's whole log and its line, add up its counts
  local name=$1 log="$logdir/$1.log" rc secs cpu p f e s
  read -r rc secs cpu < "$logdir/$name.rc"
  echo "::: step $name: pytest ${paths_of[$name]}"
  cat "$log"
  p=$(count passed "$log"); f=$(count failed "$log"); e=$(count error "$log"); s=$(count skipped "$log")
  passed=$((passed + p)); failed=$((failed + f + e)); skipped=$((skipped + s))
  echo "::: step $name: rc=$rc, $p passed, $((f + e)) failed, $s skipped in $secs s (CPU $cpu s)"
  if [ "$rc" -ne 0 ]; then
    bad_steps+=("$name")
    [ $((f + e)) -eq 0 ] && failed=$((failed + 1))  # a step that broke before counting still counts
  fi
}
declare -A paths_of=() pid_of=()
running=0
for step in "${ORDER[@]}"; do
  name=${step%%|*}
  paths=${step##*|}
  paths_of[$name]=$paths
  if [ "$running" -ge "$JOBS" ]; then
    wait -n -p done_pid
    for n in "${!pid_of[@]}"; do [ "${pid_of[$n]}" = "$done_pid" ] && { unset "pid_of[$n]"; report "$n"; }; done
    running=$((running - 1))
  fi
  echo "::: step $name: started ($((running + 1)) of $JOBS lanes busy)"
  run_step "$name" "$paths" &
  pid_of[$name]=$!
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n -p done_pid
  for n in "${!pid_of[@]}"; do [ "${pid_of[$n]}" = "$done_pid" ] && { unset "pid_of[$n]"; report "$n"; }; done
  running=$((running - 1))
done
if [ -n "$served" ] && ! bash scripts/docker-sweep.sh "$ANARCHON_DOCKER_RUN"; then
  bad_steps+=(docker-sweep)
  failed=$((failed + 1))
fi
echo
for step in "${STEPS[@]}"; do
  name=${step%%|*}
  case " ${bad_steps[*]:-} " in *" $name "*) echo "  $name: FAILED";; *) echo "  $name: ok";; esac
done
echo "$passed passed, $failed failed, $skipped skipped"
[ ${#bad_steps[@]} -eq 0 ]
