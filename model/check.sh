#!/usr/bin/env bash
# `make model`: spin's exhaustive verifier (pan) on every property and configuration
# of model/lease.pml, then the negative checks: deliberately broken variants that
# must be caught, so the model cannot silently become vacuous. See model/README.md.
#
# Each line of CHECKS: name | expect (pass or fail) | mode (safety or live) | -D flags.
# A configuration is a distinct model (the -D flags are the model's constants), so
# each check has its own pan; it is compiled with -O0: gcc -O2 takes about 35 s per
# pan.c on this machine and the search runs no faster with it (pan's time goes to
# hashing states in memory). MODEL_JOBS checks run at once (default 2).
set -uo pipefail
cd "$(dirname "$0")"
command -v spin >/dev/null || { echo "make model: spin is not installed: apt-get install -y spin" >&2; exit 1; }
command -v gcc >/dev/null || { echo "make model: gcc is not installed: apt-get install -y gcc" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/anarchon-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
MEMLIM=${MODEL_MEMLIM_MB:-1024}
JOBS=${MODEL_JOBS:-2}
only=${MODEL_ONLY:-}
started=$(date +%s)

# The longest searches first, so two jobs finish together.
CHECKS=$(cat <<'EOF'
hb-fence-long-job  | pass | safety | -DHB=1 -DJOBT=4 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
hb-delay           | pass | safety | -DHB=1 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0 -DJIT=0
cur-delay-skew     | pass | safety | -DHB=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=1
hb-cluster-stale   | pass | safety | -DHB=1 -DCLUSTER=1 -DOUTAGES=2 -DOUTLEN=6 -DJOBT=1 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
hb-revive          | pass | safety | -DHB=1 -DOUTAGES=1 -DJOBT=1 -DN=2 -DNS=1 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
hb-revive-handover | pass | safety | -DHB=1 -DHBHAND=1 -DCHECK_GAVEUP -DOUTAGES=1 -DJOBT=1 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
hb-cluster-crash   | pass | safety | -DHB=1 -DCLUSTER=1 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
cur-renew-delay    | pass | safety | -DHB=0 -DJOBT=3 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
hb-loss            | pass | safety | -DHB=1 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
cur-3instances     | pass | safety | -DHB=0 -DN=3 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
cur-loss-skew      | pass | safety | -DHB=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=1
cur-live-fixed     | pass | live   | -DHB=0 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=1
hb-live-revive     | pass | live   | -DHB=1 -DFIX_FIRST=1 -DOUTAGES=1 -DOUTLEN=4 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
hb-live-cluster    | pass | live   | -DHB=1 -DCLUSTER=1 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
hb-live-lapse-deg  | pass | live   | -DHB=1 -DHBDEG=1 -DFIX_FIRST=1 -DOUTAGES=1 -DOUTLEN=4 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
finding-hb-outage  | fail | live   | -DHB=1 -DFIX_FIRST=1 -DOUTAGES=1 -DOUTLEN=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
finding-first-slot | fail | live   | -DHB=0 -DFIX_FIRST=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
design-hb-no-fence | fail | safety | -DHB=1 -DHBSF=0 -DJOBT=4 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
design-hb-no-revived| fail | safety | -DHB=1 -DHBREV=0 -DOUTAGES=1 -DJOBT=1 -DN=2 -DNS=1 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
finding-hb-revive-window| fail | safety | -DHB=1 -DHBHAND=2 -DCHECK_GAVEUP -DOUTAGES=1 -DJOBT=1 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
finding-hb-revive-skip| fail | safety | -DHB=1 -DHBHAND=0 -DCHECK_GAVEUP -DOUTAGES=1 -DJOBT=1 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
design-cur-deadskip| fail | safety | -DHB=0 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
mut1-finish-nofence| fail | safety | -DMUT=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut2-no-mark-rule  | fail | safety | -DMUT=2 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=1 -DDELAYS=1 -DSKEW=0
mut3-takeover-same | fail | safety | -DMUT=3 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut4-renew-notoken | fail | safety | -DMUT=4 -DJOBT=3 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut5-no-overlap    | fail | safety | -DMUT=5 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
mut7-used-up-kept  | fail | live   | -DMUT=7 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
mut8-cluster-no-renewed| fail | safety | -DHB=1 -DCLUSTER=1 -DMUT=8 -DOUTAGES=2 -DOUTLEN=6 -DJOBT=1 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
EOF
)

# Checks that add little to the ones above (see model/README.md), run with MODEL_EXTRA=1.
EXTRA=$(cat <<'EOF'
cur-3slots         | pass | safety | -DHB=0 -DN=2 -DNS=3 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
hb-live-fixed      | pass | live   | -DHB=1 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
hb-live-revive-loss| pass | live   | -DHB=1 -DFIX_FIRST=1 -DOUTAGES=1 -DOUTLEN=4 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
EOF
)
[ -n "${MODEL_EXTRA:-}" ] && CHECKS="$EXTRA"$'\n'"$CHECKS"

# One check: writes its table row to $work/<name>/row; exit status 0 if its result is the expected one.
run_check() {
  local name=$1 expect=$2 mode=$3 flags=$4 dir="$work/$1"
  mkdir -p "$dir"; cp lease.pml "$dir/"; cd "$dir" || return 1
  local t0; t0=$(date +%s%N)
  # shellcheck disable=SC2086
  spin -a $flags lease.pml >spin.log 2>&1 || { echo "$name: spin -a failed: $(head -3 spin.log)" >row; return 1; }
  local cc_flags run_flags
  if [ "$mode" = safety ]; then
    cc_flags="-DSAFETY -DNOCLAIM"; run_flags="-m200000"
  else
    cc_flags="-DNFAIR=3"; run_flags="-m200000 -a -f -N live"
  fi
  # shellcheck disable=SC2086
  gcc -O0 $cc_flags -DMEMLIM="$MEMLIM" -w -o pan pan.c 2>gcc.log || { echo "$name: gcc failed: $(head -3 gcc.log)" >row; return 1; }
  # shellcheck disable=SC2086
  ./pan $run_flags >pan.log 2>&1
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
  local log=pan.log errors states trans depth mem result ok=0
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$log" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
  mem=$(sed -n 's/^ *\([0-9.]*\).total actual memory usage.*/\1/p' "$log" | tail -1)
  if grep -q "out of memory\|MEMLIM bound\|max search depth too small" "$log"; then
    result="INCOMPLETE (memory or depth bound hit)"; ok=1
  elif [ -z "$errors" ]; then
    result="NO RESULT"; ok=1
  elif [ "$expect" = pass ] && [ "$errors" = 0 ]; then
    result="ok: no error"
  elif [ "$expect" = fail ] && [ "$errors" != 0 ]; then
    local what steps tdepth
    what=$(grep -m1 -o "assertion violated.*\|acceptance cycle" "$log" | sed 's/ (at depth [0-9]*)//')
    tdepth=$(grep -m1 -o "at depth [0-9]*" "$log" || true)
    # shellcheck disable=SC2086
    steps=$(spin -t $flags lease.pml 2>/dev/null | grep -c "MSC:")
    result="ok: caught: ${what} (${tdepth:-trail}; ${steps} events)"
  else
    result="UNEXPECTED: errors=$errors, expected $expect: $(grep -m1 "violated\|acceptance cycle" "$log")"; ok=1
  fi
  [ "$ok" != 0 ] && [ -n "${MODEL_KEEP:-}" ] && cp -r "$dir" "$MODEL_KEEP/"
  printf '%-24s %-6s %-6s %10s %11s %6s %9s %7s  %s\n' "$name" "$expect" "$mode" "${states:-?}" "${trans:-?}" \
    "${depth:-?}" "${mem:-?}" "$secs" "$result" >row
  return "$ok"
}

names=()
running=0
status=0
while IFS='|' read -r name expect mode flags; do
  name=$(echo "$name" | xargs); expect=$(echo "$expect" | xargs); mode=$(echo "$mode" | xargs)
  # shellcheck disable=SC2053
  [ -n "$only" ] && [[ "$name" != $only ]] && continue
  names+=("$name")
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  (run_check "$name" "$expect" "$mode" "$flags") &
  running=$((running + 1))
done <<<"$CHECKS"
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done

printf '%-24s %-6s %-6s %10s %11s %6s %9s %7s  %s\n' check expect mode states transitions depth memory_MB time_s result
for name in "${names[@]}"; do
  cat "$work/$name/row" 2>/dev/null || { echo "$name: no result"; status=1; }
done
echo "make model: ${#names[@]} checks, $JOBS at a time, $(($(date +%s) - started)) s wall time"
[ "$status" = 0 ] && echo "make model: every property holds and every broken variant is caught" || echo "make model: FAILED" >&2
exit "$status"
