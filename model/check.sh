#!/usr/bin/env bash
# `make model`: spin's exhaustive verifier (pan) on every property and configuration
# of model/lease.pml, then the negative checks: deliberately broken variants that
# must be caught, so the model cannot silently become vacuous. See model/README.md.
#
# Each line of CHECKS: name | expect (pass or fail) | mode (safety or live) | -D flags.
set -uo pipefail
cd "$(dirname "$0")"
command -v spin >/dev/null || { echo "make model: spin is not installed: apt-get install -y spin" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/anarchon-model.XXXXXX")
trap 'rm -rf "$work"' EXIT
MEMLIM=${MODEL_MEMLIM_MB:-1024}
only=${MODEL_ONLY:-}

CHECKS=$(cat <<'EOF'
cur-loss-skew      | pass | safety | -DHB=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=1
cur-delay-skew     | pass | safety | -DHB=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=1
cur-3slots         | pass | safety | -DHB=0 -DN=2 -DNS=3 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
cur-3instances     | pass | safety | -DHB=0 -DN=3 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
hb-loss            | pass | safety | -DHB=1 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
hb-delay           | pass | safety | -DHB=1 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0 -DJIT=0
hb-fence-long-job  | pass | safety | -DHB=1 -DJOBT=4 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
cur-live-fixed     | pass | live   | -DHB=0 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=1
hb-live-fixed      | pass | live   | -DHB=1 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
finding-first-slot | fail | live   | -DHB=0 -DFIX_FIRST=0 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
design-hb-no-fence | fail | safety | -DHB=1 -DHBSF=0 -DJOBT=4 -DN=2 -DNS=2 -DCRASHES=0 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
design-cur-deadskip| fail | safety | -DHB=0 -DCHECK_DEADSKIP -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
mut1-finish-nofence| fail | safety | -DMUT=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut2-no-mark-rule  | fail | safety | -DMUT=2 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut3-takeover-same | fail | safety | -DMUT=3 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut4-renew-notoken | fail | safety | -DMUT=4 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=1 -DSKEW=0
mut5-no-overlap    | fail | safety | -DMUT=5 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=0 -DDELAYS=0 -DSKEW=0
mut7-used-up-kept  | fail | live   | -DMUT=7 -DFIX_FIRST=1 -DN=2 -DNS=2 -DCRASHES=1 -DLOSSES=1 -DDELAYS=0 -DSKEW=0
EOF
)

status=0
printf '%-20s %-6s %-6s %10s %10s %6s %9s %7s  %s\n' check expect mode states transitions depth memory_MB time_s result
while IFS='|' read -r name expect mode flags; do
  name=$(echo "$name" | xargs); expect=$(echo "$expect" | xargs); mode=$(echo "$mode" | xargs)
  [ -n "$only" ] && [[ "$name" != $only ]] && continue
  dir="$work/$name"; mkdir -p "$dir"; cp lease.pml "$dir/"
  # shellcheck disable=SC2086
  (cd "$dir" && spin -a $flags lease.pml >spin.log 2>&1) || { echo "$name: spin -a failed"; cat "$dir/spin.log"; status=1; continue; }
  if [ "$mode" = safety ]; then
    cc_flags="-DSAFETY -DNOCLAIM"; run_flags="-m200000"
  else
    cc_flags="-DNFAIR=3"; run_flags="-m200000 -a -f -N live"
  fi
  # shellcheck disable=SC2086
  (cd "$dir" && gcc -O2 $cc_flags -DMEMLIM="$MEMLIM" -w -o pan pan.c) || { echo "$name: gcc failed"; status=1; continue; }
  start=$(date +%s%N)
  # shellcheck disable=SC2086
  (cd "$dir" && ./pan $run_flags >pan.log 2>&1)
  ms=$(( ($(date +%s%N) - start) / 1000000 )); secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
  log="$dir/pan.log"
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$log" | tail -1)
  trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' "$log" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
  mem=$(sed -n 's/^ *\([0-9.]*\).total actual memory usage.*/\1/p' "$log" | tail -1)
  if grep -q "out of memory\|MEMLIM bound\|max search depth too small" "$log"; then
    result="INCOMPLETE (memory or depth bound hit)"; status=1
  elif [ -z "$errors" ]; then
    result="NO RESULT"; status=1
  elif [ "$expect" = pass ] && [ "$errors" = 0 ]; then
    result="ok: no error"
  elif [ "$expect" = fail ] && [ "$errors" != 0 ]; then
    what=$(grep -m1 -o "assertion violated.*\|acceptance cycle.*" "$log")
    steps=$(cd "$dir" && spin -t $flags lease.pml 2>/dev/null | grep -c "MSC:")
    tdepth=$(grep -m1 -o "at depth [0-9]*" "$log" || true)
    result="ok: caught: ${what} (${tdepth:-trail}; ${steps} events on the trail)"
  else
    result="UNEXPECTED: errors=$errors, expected $expect"; status=1
    grep -m3 "violated\|acceptance cycle" "$log"
    [ -n "${MODEL_KEEP:-}" ] && cp -r "$dir" "$MODEL_KEEP/"
  fi
  printf '%-20s %-6s %-6s %10s %10s %6s %9s %7s  %s\n' "$name" "$expect" "$mode" "${states:-?}" "${trans:-?}" "${depth:-?}" "${mem:-?}" "$secs" "$result"
done <<<"$CHECKS"
[ "$status" = 0 ] && echo "make model: every property holds and every broken variant is caught" || echo "make model: FAILED" >&2
exit "$status"
