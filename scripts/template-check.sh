#!/usr/bin/env bash
# The backend template as a third party has it: examples/backend-template copied
# out of the repository, installed in a fresh virtualenv beside anarchon-core and
# anarchon-conformance only (built from this checkout), and its conformance
# suite run there. Fails when the template, or the public kit it is written
# against, no longer passes; and when anything else of anarchon got installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/anarchon-template.XXXXXX")
trap 'rm -rf "$work"' EXIT

cp -r "$root/examples/backend-template" "$work/anarchon-folder"
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "$root/packages/anarchon-core" "$root/packages/conformance"
"${pip[@]}" "$work/anarchon-folder[test]"

installed=$("$work/venv/bin/python" -m pip list --format=freeze | grep -i '^anarchon' | cut -d= -f1 | sort | tr '\n' ' ')
if [ "$installed" != "anarchon-conformance anarchon-core anarchon-folder " ]; then
  echo "template-check: expected anarchon-core, anarchon-conformance and the template only; found: $installed" >&2
  exit 1
fi
listed=$("$work/venv/bin/anarchon" backends)  # whole, not piped: grep -q would close the pipe early
grep -q '^folder' <<< "$listed" || { echo "template-check: 'anarchon backends' does not list folder:" >&2; echo "$listed" >&2; exit 1; }
cd "$work/anarchon-folder"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$@" tests
