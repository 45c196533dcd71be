#!/usr/bin/env bash
# Runs a command with GROUPD_TEST_POSTGRES_URL pointing at a throw-away PostgreSQL cluster of its own
# (scripts/pg_cluster.py): started first, stopped and removed afterwards whatever the outcome.
# Exits with the command's status.   scripts/with_pg_cluster.sh COMMAND [ARG...]
set -euo pipefail
cd "$(dirname "$0")/.."
state_dir=$(mktemp -d)
state=$state_dir/postgres.json
trap '[ ! -f "$state" ] || python3 scripts/pg_cluster.py stop --state "$state"; rm -rf "$state_dir"' EXIT
url=$(python3 scripts/pg_cluster.py start --state "$state")
echo "GROUPD_TEST_POSTGRES_URL=$url $*"
status=0
GROUPD_TEST_POSTGRES_URL=$url "$@" || status=$?
exit "$status"
