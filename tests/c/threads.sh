#!/usr/bin/env bash
# Runs tests/c/threads.c's program (PROGRAM, built under the sanitizers) against a sandbox it
# starts on loopback, with a SQLite journal in a temporary directory. The program prints
# "threads: N passed, N failed"; this script adds that line itself when the program died
# without printing it, and exits non-zero on any failure.
set -u
prog=${1:?usage: threads.sh PROGRAM}
root=$(cd "$(dirname "$0")/../.." && pwd)
sandbox=$root/target/release/slotpartner-sandbox
work=$(mktemp -d)
sandbox_pid=
cleanup() {
  [ -n "$sandbox_pid" ] && kill "$sandbox_pid" 2> /dev/null && wait "$sandbox_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# Interrupted or terminated, the script exits, and so cleans up, at once.
trap 'exit 130' INT
trap 'exit 143' TERM HUP
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The sandbox exits when its standard input (held open here by a fifo writer) closes.
mkfifo "$work/stdin"
"$sandbox" serve --listen 127.0.0.1:0 --ca-out "$work/ca.pem" --ready-file "$work/service" --exit-on-stdin-eof \
  < "$work/stdin" > /dev/null 2> "$work/sandbox.log" &
sandbox_pid=$!
exec 3> "$work/stdin"
for _ in $(seq 200); do [ -s "$work/service" ] && break; sleep 0.1; done
if [ ! -s "$work/service" ]; then
  echo "FAIL the sandbox did not start: $(cat "$work/sandbox.log")"
  echo "threads: 0 passed, 1 failed"
  exit 1
fi

"$prog" "$(cat "$work/service")" "$work/ca.pem" "sqlite:$work/journal.db" > "$work/out" 2>&1
rc=$?
echo "threads: the sandbox answered $(grep -c 'rest/action' "$work/sandbox.log") requests"
cat "$work/out"
exec 3>&-
if ! grep -qE '^threads: [0-9]+ passed, [0-9]+ failed$' "$work/out"; then
  echo "FAIL $prog ended with status $rc before its summary"
  echo "threads: 0 passed, 1 failed"
  exit 1
fi
exit "$rc"
