#!/usr/bin/env bash
# What CI runs for Pants: bootstrap it (./pants), then one Pants invocation
# without the daemon that proves what only Pants can prove, timed part by part:
#   - the build description is complete: every source folder has its BUILD
#     file (tailor --check) and every import resolves to a target;
#   - ruff, run by Pants over what Pants owns;
#   - every distribution packages from its BUILD targets (wheels and sdists
#     of all eleven into dist/);
#   - tests run against those built wheels, with real entry points: the
#     SQLite backend's tests with its conformance suite (no server needed)
#     and the conformance package's tests of its plugin, README, proxy and
#     ledger, so the wheels, the pytest11 plugin and the `anarchon` group are
#     exercised end to end. The conformance package's two long tests (the
#     mutants it must catch, the memory backend's suite: 3 of its 3.5
#     minutes under Pants) run in the pip matrix's `conformance` step only.
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
tests=(packages/anarchon-sqlite/tests:: "$c/test_conformance_third_party.py" "$c/test_conformance_readme.py"
  "$c/test_conformance_proxy.py" "$c/test_conformance_ledger.py" "$c/test_model_counterexamples.py")
if [ "${PANTS_CI_ALL:-0}" = 1 ] || [ "${PANTS_CI_SLOW:-0}" = 1 ]; then
  tests=(packages:: tools/pants::)
fi
rc=0
timed "tailor --check, lint, package" ./pants --no-pantsd tailor --check lint package packages:: tools/pants:: || rc=$?
timed "test ${tests[*]}" ./pants --no-pantsd "${env_args[@]}" "${pytest_args[@]}" test "${tests[@]}" || rc=$?
echo "::: pants-ci: total $((SECONDS - start)) s"
exit $rc
