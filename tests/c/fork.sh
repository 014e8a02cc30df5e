#!/usr/bin/env bash
# Runs tests/c/fork.c's program (PROGRAM) three times in a row on one SQLite journal and three
# times on one PostgreSQL journal (a throw-away cluster started here from
# /usr/lib/postgresql/*/bin, as `nobody` when run as root, since PostgreSQL refuses root; skipped
# with a message when PostgreSQL is not installed). Each run forks 30 children from a parent
# whose two threads are busy with the journal; a run passes only when all 30 handled their event.
# Prints each run's lines and "fork: N of M runs passed"; exits non-zero on any failure.
set -u
prog=${1:?usage: fork.sh PROGRAM}
runs=3
root=$(cd "$(dirname "$0")/../.." && pwd)
# What it loads, checked before anything runs (tests/needs.sh): python3 (a free port) and
# timeout; PostgreSQL is optional (skipped, said so, without it).
# shellcheck source=../needs.sh
. "$root/tests/needs.sh"
needs_command python3 python3
needs_command timeout coreutils
needs_check fork
work=$(mktemp -d)
pg_bin= pg_dir= pg_prefix=() pg_started=
cleanup() {
  if [ -n "$pg_started" ]; then
    "${pg_prefix[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop > /dev/null 2>&1
  fi
  rm -rf "$work" ${pg_dir:+"$pg_dir"}
}
trap cleanup EXIT
# Interrupted or terminated, the script exits, and so cleans up, at once.
trap 'exit 130' INT
trap 'exit 143' TERM HUP
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

passed=0 total=0
# run BACKEND URL N: one run of the program, its output indented, counted.
run() {
  local backend=$1 url=$2 n=$3 rc
  total=$((total + 1))
  # The program kills its own stragglers after 30 s and ends itself (alarm) after 120 s; this
  # bound is for a program that ignores both.
  timeout -s KILL 180 "$prog" "$url" "$n" > "$work/out" 2>&1
  rc=$?
  sed 's/^/  /' "$work/out"
  if [ "$rc" = 0 ] && grep -q '^fork: 30/30 children' "$work/out"; then
    passed=$((passed + 1))
    echo "PASS $backend run $n"
  else
    echo "FAIL $backend run $n (status $rc)"
  fi
}

for n in $(seq "$runs"); do
  run sqlite "sqlite:$work/journal.db" "$n"
done

# A throw-away PostgreSQL cluster.
for dir in /usr/lib/postgresql/*/bin; do
  if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then pg_bin=$dir; fi # the glob sorts; the last is newest
done
if [ -z "$pg_bin" ]; then
  echo "SKIP postgres: no initdb and pg_ctl under /usr/lib/postgresql/*/bin (Debian package \`postgresql\`)"
else
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser > /dev/null; then
      pg_prefix=(runuser -u nobody --)
    elif command -v setpriv > /dev/null; then
      pg_prefix=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
    else
      echo "SKIP postgres: running as root and neither runuser nor setpriv can run PostgreSQL as nobody"
      pg_bin=
    fi
  fi
fi
if [ -n "$pg_bin" ]; then
  pg_dir=$(mktemp -d)
  [ "$(id -u)" = 0 ] && chown nobody: "$pg_dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if ! (cd "$pg_dir" && "${pg_prefix[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres -E UTF8 --no-sync \
          > "$pg_dir/initdb.log" 2>&1); then
    total=$((total + 1))
    echo "FAIL postgres: initdb failed: $(tail -n 5 "$pg_dir/initdb.log")"
  else
    pg_started=1
    if ! (cd "$pg_dir" && "${pg_prefix[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -t 30 \
            -o "-p $port -k $pg_dir -c listen_addresses=127.0.0.1 -c max_connections=100" start > /dev/null 2>&1); then
      total=$((total + 1))
      echo "FAIL postgres: the cluster did not start: $(tail -n 5 "$pg_dir/log")"
    else
      for n in $(seq "$runs"); do
        run postgres "postgres://postgres@127.0.0.1:$port/postgres" "$n"
      done
    fi
  fi
fi

echo "fork: $passed of $total runs passed"
[ "$total" -gt 0 ] && [ "$passed" = "$total" ]
