#!/bin/sh
# A fresh cluster on first start, trusting every client (the tests connect as
# postgres without a password, as POSTGRES_HOST_AUTH_METHOD=trust does in the
# public image), then the server in the foreground.
set -e
data=/var/lib/postgresql/data
bin=/usr/lib/postgresql/15/bin
if [ ! -s "$data/PG_VERSION" ]; then
  mkdir -p "$data" && chown postgres:postgres "$data"
  su postgres -c "$bin/initdb -D $data -A trust -U postgres --no-sync" >/dev/null
  echo "host all all 0.0.0.0/0 trust" >> "$data/pg_hba.conf"
  echo "host all all ::/0 trust" >> "$data/pg_hba.conf"
fi
mkdir -p /var/run/postgresql && chown postgres:postgres /var/run/postgresql
exec su postgres -c "exec $bin/postgres -D $data -c listen_addresses='*'"
