#!/usr/bin/env bash
# After `make test-docker`: nothing the tests started may outlive them. Lists
# what is left of the compose projects of run RUN (anarchon-test-RUN-<pid>),
# removes it, and fails if there was anything (a leak is a bug in
# scripts/docker_services.py). Usage: docker-sweep.sh RUN
set -uo pipefail
run=${1:?usage: docker-sweep.sh RUN (the ANARCHON_DOCKER_RUN of the test run)}
left=$(docker ps -a --filter "label=com.docker.compose.project" --format '{{.ID}} {{.Label "com.docker.compose.project"}} {{.Names}}' | awk -v p="anarchon-test-$run-" 'index($2, p) == 1')
nets=$(docker network ls --format '{{.Name}}' | grep "^anarchon-test-$run-" || true)
if [ -z "$left" ] && [ -z "$nets" ]; then
  echo "docker-sweep: no container or network of the test run is left"
  exit 0
fi
echo "docker-sweep: left behind by the test run (now removed):" >&2
echo "$left" "$nets" >&2
[ -n "$left" ] && echo "$left" | awk '{print $1}' | xargs docker rm -f -v >/dev/null
[ -n "$nets" ] && echo "$nets" | xargs docker network rm >/dev/null
exit 1
