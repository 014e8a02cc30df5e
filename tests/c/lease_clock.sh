#!/usr/bin/env bash
# Leases across processes whose wall clocks disagree (an NTP step, a virtual machine resumed with
# a stale clock), on one SQLite journal. DIR holds tests/c/lease_clock.c's program, linked with
# the shared libslotpartner, and tests/c/clock_shim.c built as clock_shim.so (LD_PRELOAD only
# reaches a library loaded through the dynamic linker, never a static build).
#
# Process A claims a refund with a lease of LEASE_MS (default 4000) and holds it. Process B, the
# same program under the shim, delivers it again with its wall clock 45 s ahead, then 45 s
# behind: both times B must be told busy (the claim is alive), not take it over. Once the lease
# has really ended, B (still 45 s behind, where a wall-clock lease would run on for 45 s) takes
# it over as attempt 2 and stores its reply; the row's updated_ms shows the shim reached the
# library; a delivery 45 s ahead then gets the stored reply; A's finish fails with
# SP_ERR_CLAIM_LOST. Prints "lease_clock: N passed, N failed"; exits non-zero on any failure.
set -u
dir=${1:?usage: lease_clock.sh DIR}
dir=$(cd "$dir" && pwd)
prog=$dir/lease_clock
shim=$dir/clock_shim.so
lease_ms=${LEASE_MS:-4000}
root=$(cd "$(dirname "$0")/../.." && pwd)
# What it loads, checked before anything runs (tests/needs.sh): sqlite3 reads the journal's row.
# shellcheck source=../needs.sh
. "$root/tests/needs.sh"
needs_command sqlite3 sqlite3
needs_check lease_clock
work=$(mktemp -d)
journal="sqlite:$work/journal.db"
hold_pid=
cleanup() {
  exec 3>&- 2> /dev/null
  [ -n "$hold_pid" ] && kill "$hold_pid" 2> /dev/null && wait "$hold_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# Interrupted or terminated, the script exits, and so cleans up, at once.
trap 'exit 130' INT
trap 'exit 143' TERM HUP

passed=0
failed=0
# check WHAT GOT WANT
check() {
  if [ "$2" = "$3" ]; then
    passed=$((passed + 1))
    echo "ok   $1: $2"
  else
    failed=$((failed + 1))
    echo "FAIL $1: got '$2', want '$3'"
  fi
}
summary() {
  echo "lease_clock: $passed passed, $failed failed"
  exit $((failed > 0))
}
# The real time in ms (this script is never shimmed).
now_ms() { date +%s%3N; }
# deliver SHIFT_MS: process B, its wall clock SHIFT_MS off; its output on one line.
deliver() {
  SLOTPARTNER_CLOCK_SHIFT_MS=$1 LD_PRELOAD=$shim "$prog" deliver "$journal" 2>&1 | tr '\n' ' ' | sed 's/ $//'
}

# The shim moves the wall clock and nothing else.
real=$(date +%s)
ahead=$(SLOTPARTNER_CLOCK_SHIFT_MS=45000 LD_PRELOAD=$shim date +%s)
check "the shim puts the wall clock 45 s ahead" "$(((ahead - real) / 5 * 5))" 45

# Process A claims and holds; its standard input (a fifo held open here) closing lets it finish.
mkfifo "$work/hold_in"
started=$(now_ms)
"$prog" hold "$journal" "$lease_ms" < "$work/hold_in" > "$work/hold_out" 2>&1 &
hold_pid=$!
exec 3> "$work/hold_in"
for _ in $(seq 100); do grep -q . "$work/hold_out" && break; sleep 0.1; done
claimed=$(now_ms)
check "process A claims the refund" "$(head -1 "$work/hold_out")" "claimed attempt 1"

for shift in 45000 -45000; do
  got=$(deliver "$shift")
  if [ $(($(now_ms) - started)) -ge "$lease_ms" ]; then
    check "B ${shift} ms off within the lease (the run was slower than LEASE_MS=$lease_ms: raise it)" slow fast
  else
    check "B with its wall clock ${shift} ms off, A's claim alive" "$got" "busy"
  fi
done

# The lease really ends (A is alive but stuck).
sleep "$(awk -v ms=$((claimed + lease_ms + 300 - $(now_ms))) 'BEGIN { print (ms > 0 ? ms / 1000 : 0) }')"
check "B 45 s behind, A's lease over" "$(deliver -45000)" "new attempt 2 finished"
updated=$(sqlite3 "$work/journal.db" "SELECT updated_ms FROM sp_journal_delivery WHERE transaction_id = 450045")
off=$((updated - $(now_ms)))
check "the take-over's updated_ms (wall clock, for people) is B's, 45 s behind" \
  "$([ "$off" -gt -55000 ] && [ "$off" -lt -35000 ] && echo "about -45 s" || echo "$off ms")" "about -45 s"
check "B 45 s ahead after the take-over" "$(deliver 45000)" "done"

exec 3>&-
wait "$hold_pid"
hold_pid=
check "A finishes after its lease was taken over" "$(sed -n 2p "$work/hold_out")" "finish: SP_ERR_CLAIM_LOST"
summary
