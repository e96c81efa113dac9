#!/usr/bin/env bash
# What CI runs for Pants: bootstrap it (./pants), then one Pants invocation
# without the daemon, over what Pants owns (packages/, tools/pants), that
# checks every BUILD file is in place (tailor --check),
# lints with ruff, runs the tests against the built wheels, and builds the
# wheels and sdists of all seven distributions into dist/. Prints the time of
# each part and the total.
#
# Tests marked slow (multi-process fleets, fault injection) are left to the
# pip matrix (scripts/test-matrix.sh): under Pants they run concurrently with
# other test files on two cores, where their timing assertions are not fair.
# PANTS_CI_SLOW=1 runs them too (pants.toml [pytest] args holds the default).
# The brokers must be reachable (scripts/services.sh or docker compose); with
# CI=true an unreachable one fails its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI=${CI:-true}

start=$SECONDS
timed() {  # label command...
  local t=$SECONDS rc=0
  echo "::: pants-ci: $1"
  shift
  "$@" || rc=$?
  echo "::: pants-ci: took $((SECONDS - t)) s (exit $rc)"
  return $rc
}

pytest_args=()
if [ "${PANTS_CI_SLOW:-0}" = 1 ]; then
  pytest_args=(--pytest-args="['-p pants_pytest_plugin']")  # drops pants.toml's -m 'not slow'
fi

timed "bootstrap (Pants venv, tools/pex)" ./pants --bootstrap-only
rc=0
timed "tailor --check, lint, test, package" \
  ./pants --no-pantsd "${pytest_args[@]}" tailor --check lint test package packages:: tools/pants:: || rc=$?
echo "::: pants-ci: total $((SECONDS - start)) s"
exit $rc
