#!/bin/bash
# Runs a command against a private PostgreSQL 15 server, for the tests of
# the PostgreSQL engine (tests/test_engine.c):
#
#   tests/pg/pgserver.sh COMMAND [ARGS...]
#
# It makes a fresh directory under /tmp, initializes a cluster there
# (initdb refuses to run as root, so as the user postgres when run by
# root), starts the server listening only on a unix socket in that
# directory (no TCP port, trust authentication), creates the database
# "ostore" and runs COMMAND with:
#
#   OST_TEST_PG          the address: postgresql:///ostore?host=DIR
#   OST_TEST_PG_ADMIN    an address of the server's "postgres" database
#   OST_TEST_PG_RESTART  a command that restarts the server (pg_ctl restart)
#   OST_TEST_PG_STOP     a command that stops it (START starts it again)
#   OST_TEST_PG_START
#
# Environment: PGSERVER_FSYNC=on (default off) turns fsync,
# synchronous_commit and full_page_writes on; PGSERVER_SHARED_BUFFERS
# (default 32MB, e.g. 2GB for benchmarks) sets shared_buffers;
# PGSERVER_HUGE_PAGES=on puts them in huge pages (huge_pages = on), as
# PostgreSQL's documentation advises for large shared_buffers: a new
# server process then maps them in 2 MB pages instead of faulting in each
# 4 kB page it touches. Run by root, it reserves the pages it lacks
# (vm.nr_hugepages) and gives them back at the end.
#
# The server is stopped and the directory removed whatever happens. The
# exit status is COMMAND's.
set -u
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$BIN/initdb" ]; then
  echo "pgserver.sh: $BIN/initdb not found (apt-get install postgresql)" >&2
  exit 77
fi
# shared_buffers: 32MB for the tests, PGSERVER_SHARED_BUFFERS (see below)
bufs=${PGSERVER_SHARED_BUFFERS:-32MB}
if ! [[ "$bufs" =~ ^[0-9]+(kB|MB|GB)$ ]]; then
  echo "pgserver.sh: PGSERVER_SHARED_BUFFERS: '$bufs' is not a size such as 512MB or 2GB" >&2
  exit 2
fi
huge=${PGSERVER_HUGE_PAGES:-off}
case "$huge" in on|off) ;; *)
  echo "pgserver.sh: PGSERVER_HUGE_PAGES: '$huge' is not on or off" >&2
  exit 2 ;;
esac
hp_file=/proc/sys/vm/nr_hugepages
hp_old=
if [ "$huge" = on ]; then
  # shared_buffers in 2 MB pages, and a tenth more for the rest of the
  # server's shared memory
  mb=${bufs%[kMG]B}
  case "$bufs" in *kB) mb=$((mb / 1024)) ;; *GB) mb=$((mb * 1024)) ;; esac
  need=$((mb / 2 + mb / 20 + 32))
  have=$(cat "$hp_file")
  if [ "$have" -lt "$need" ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "pgserver.sh: PGSERVER_HUGE_PAGES=on: $need huge pages needed, $have reserved;" \
        "run as root or reserve them (sysctl vm.nr_hugepages=$need)" >&2
      exit 2
    fi
    hp_old=$have
    echo "$need" >"$hp_file"
    if [ "$(cat "$hp_file")" -lt "$need" ]; then
      echo "pgserver.sh: PGSERVER_HUGE_PAGES=on: the kernel gave $(cat "$hp_file") of" \
        "$need huge pages (memory too fragmented?)" >&2
      echo "$hp_old" >"$hp_file"
      exit 1
    fi
  fi
fi
dir=$(mktemp -d /tmp/ostore-pg.XXXXXX) || exit 1
chmod 755 "$dir"
as=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  as=(runuser -u postgres --)
fi
data="$dir/data"
cleanup() {
  "${as[@]}" "$BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1
  rm -rf "$dir"
  if [ -n "$hp_old" ]; then echo "$hp_old" >"$hp_file"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${as[@]}" "$BIN/initdb" -D "$data" -A trust -U postgres --no-sync -E UTF8 --locale=C \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
# Only a unix socket in $dir (listen_addresses empty); fsync off keeps the
# tests quick (a crash of the test machine loses nothing of value), and
# PGSERVER_FSYNC=on (benchmarks) flushes as a production server does.
# shared_buffers is 32MB for the tests; PGSERVER_SHARED_BUFFERS (e.g. 2GB,
# benchmarks) sizes it as a production server on this machine would be,
# so that a benchmark's tables are read from the server's own buffers.
sync=${PGSERVER_FSYNC:-off}
cat >>"$data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
unix_socket_permissions = 0777
fsync = $sync
synchronous_commit = $sync
full_page_writes = $sync
max_connections = 60
shared_buffers = $bufs
huge_pages = $([ "$huge" = on ] && echo on || echo try)
CONF
opts="-w -t 20 -l $dir/server.log"
"${as[@]}" "$BIN/pg_ctl" -D "$data" $opts start >/dev/null ||
  { cat "$dir/server.log" >&2; exit 1; }
"${as[@]}" "$BIN/createdb" -h "$dir" -U postgres ostore ||
  { cat "$dir/server.log" >&2; exit 1; }

ctl="${as[*]} $BIN/pg_ctl -D $data $opts"
export OST_TEST_PG="postgresql:///ostore?host=$dir&user=postgres"
export OST_TEST_PG_ADMIN="postgresql:///postgres?host=$dir&user=postgres"
export OST_TEST_PG_RESTART="$ctl -m fast restart >/dev/null"
export OST_TEST_PG_STOP="$ctl -m fast stop >/dev/null"
export OST_TEST_PG_START="$ctl start >/dev/null"
export OST_TEST_PG_DIR="$dir"
"$@"
