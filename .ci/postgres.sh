# Sourced by .ci/run: starts a private PostgreSQL cluster on 127.0.0.1 and exports AGENTRUNNER_TEST_PG_URL.
# Never touches a system cluster. Installs the server from Debian packages when it is missing.
pg_bin=""
for d in /usr/lib/postgresql/*/bin; do
  if [ -x "$d/initdb" ]; then pg_bin="$d"; fi
done
if [ -z "$pg_bin" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then pg_bin="$d"; fi
  done
fi
pg_dir="${AGENTRUNNER_PG_DIR:-$(pwd)/.ci/.pg}"   # override to run a second cluster next to a running one
pg_port="${AGENTRUNNER_PG_PORT:-54329}"
rm -rf "$pg_dir"
mkdir -p "$pg_dir"
chown -R postgres:postgres "$pg_dir" 2>/dev/null || true
run_pg() { if [ "$(id -u)" = "0" ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
run_pg "$pg_bin/initdb -D '$pg_dir/data' -U postgres --auth=trust -E UTF8 >/dev/null"
run_pg "$pg_bin/pg_ctl -D '$pg_dir/data' -o \"-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories='$pg_dir' -c fsync=off\" -l '$pg_dir/log' -w start >/dev/null"
trap 'run_pg "$pg_bin/pg_ctl -D \"$pg_dir/data\" -m immediate stop" >/dev/null 2>&1 || true' EXIT
run_pg "$pg_bin/createdb -h 127.0.0.1 -p $pg_port -U postgres agentrunner_test"
export AGENTRUNNER_TEST_PG_URL="postgresql+asyncpg://postgres@127.0.0.1:$pg_port/agentrunner_test"
echo "PostgreSQL ready at $AGENTRUNNER_TEST_PG_URL"
