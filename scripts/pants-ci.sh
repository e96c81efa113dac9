#!/usr/bin/env bash
# What CI runs for Pants: bootstrap it (./pants), then one Pants invocation
# without the daemon that proves what only Pants can prove, timed part by part:
#   - the build description is complete: every source folder has its BUILD
#     file (tailor --check) and every import resolves to a target;
#   - ruff, run by Pants over what Pants owns;
#   - every distribution packages from its BUILD targets (wheels and sdists
#     of all eleven into dist/);
#   - tests run against those built wheels, with real entry points: the
#     SQLite backend's own tests (no server needed; URLs resolved through
#     the `anarchon` group) and the conformance package's tests of its
#     plugin (a third party's suite run through pytest11), README, proxy and
#     ledger, so the wheels and both entry points are exercised end to end.
#     The long suites (the mutants the suite must catch, the memory and
#     SQLite backends' conformance suites: 4 of 4.5 minutes of CPU under
#     Pants) run in the pip matrix only, as the release test runs the
#     conformance suite from its wheel.
# Every other test runs once, in the pip matrix (scripts/test-matrix.sh); a
# second run under Pants proved nothing more and cost 4-6 minutes of CI.
# PANTS_CI_ALL=1 tests every target as before (PANTS_CI_SLOW=1 adds the
# tests marked slow).
#
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

# Each backend's server URL (ANARCHON_REDIS_URL…), named by its manifest, reaches the tests.
urls=$(python3 scripts/backends.py env | sed -E "s/^export ([A-Z_]+)=.*/'\1'/" | paste -sd, -)
env_args=(--test-extra-env-vars="+[$urls]")
pytest_args=()
if [ "${PANTS_CI_SLOW:-0}" = 1 ]; then
  pytest_args=(--pytest-args="['-p pants_pytest_plugin']")  # drops pants.toml's -m 'not slow'
fi

timed "bootstrap (Pants venv, tools/pex)" ./pants --bootstrap-only
c=packages/conformance/tests
mapfile -t sqlite_tests < <(ls packages/anarchon-sqlite/tests/test_sqlite_*.py | grep -v -e _conformance -e _differential)
tests=("${sqlite_tests[@]}" "$c/test_conformance_third_party.py" "$c/test_conformance_readme.py"
  "$c/test_conformance_proxy.py" "$c/test_conformance_ledger.py" "$c/test_model_counterexamples.py")
if [ "${PANTS_CI_ALL:-0}" = 1 ] || [ "${PANTS_CI_SLOW:-0}" = 1 ]; then
  tests=(packages:: tools/pants::)
fi
rc=0
timed "tailor --check, lint, package" ./pants --no-pantsd tailor --check lint package packages:: tools/pants:: || rc=$?
timed "test ${tests[*]}" ./pants --no-pantsd "${env_args[@]}" "${pytest_args[@]}" test "${tests[@]}" || rc=$?
echo "::: pants-ci: total $((SECONDS - start)) s"
exit $rc
