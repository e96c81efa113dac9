#!/usr/bin/env bash
# Build tools/pex, the pex CLI Pants runs, from PyPI's pex wheel.
#
# Pants normally downloads this file from GitHub, which is out of reach here.
# The build is reproducible, so the result must match the sha256 and size
# pinned in pants.toml ([pex-cli] known_versions); a mismatch stops here
# rather than letting Pants run a tool nobody checked.
#
# PEX_BIN: the pex to build with (./pants passes the one in its venv, which
# pins the same pex release). --disable-cache keeps it out of ~/.pex.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
line=$(grep -oE '"v[0-9.]+\|linux_x86_64\|[0-9a-f]{64}\|[0-9]+"' "$root/pants.toml" | head -n 1 | tr -d '"')
IFS='|' read -r tag _ want_sha want_size <<<"$line"
version=${tag#v}
pex_bin=${PEX_BIN:-pex}
out="$root/tools/pex"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cert_args=()
ca=${PEX_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$ca" ] && cert_args=(--cert "$ca")

echo "build-pex: building pex $version from PyPI" >&2
# The machine's pip config is left out (PIP_CONFIG_FILE=/dev/null) so that the
# same wheel from the same index goes in on every machine.
PIP_CONFIG_FILE=/dev/null "$pex_bin" \
  --disable-cache --no-build --no-compile --no-use-system-time \
  --python-shebang '/usr/bin/env python' --no-strip-pex-env --include-tools \
  "${cert_args[@]}" -o "$work/pex" -c pex "pex==$version"

got_sha=$(sha256sum "$work/pex" | cut -d' ' -f1)
got_size=$(stat -c %s "$work/pex")
if [ "$got_sha" != "$want_sha" ] || [ "$got_size" != "$want_size" ]; then
  echo "build-pex: built pex is $got_sha ($got_size bytes); pants.toml pins $want_sha ($want_size bytes)." >&2
  echo "build-pex: PyPI's pex $version or the builder changed: check why before updating [pex-cli] known_versions." >&2
  exit 1
fi
mv "$work/pex" "$out"
chmod +x "$out"
echo "build-pex: tools/pex matches the pinned digest $want_sha" >&2
