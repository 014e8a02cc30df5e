#!/usr/bin/env bash
# Runs the C examples in DIR (the plain build, target/examples) under valgrind memcheck: every
# case of tests/c/run_examples.sh (every fixture through inspect_event, the CGI cases through
# callback_cgi, get_games against the sandbox), then callback_cgi with a SQLite journal
# (SLOTPARTNER_JOURNAL) and journal_status on that journal.
#
# Each program runs as `valgrind --error-exitcode=99 --leak-check=full
# --errors-for-leak-kinds=definite --track-origins=no` with its report in its own log file: a
# run passes when valgrind reported nothing (no error, nothing definitely lost), and each case's
# output and exit status is checked as run_examples.sh checks it (valgrind's 99 fails the case).
# Only definite leaks are shown: a journal's SQLite connections stay open in a process-wide pool
# until exit by design (src/journal/store/pool.rs), which memcheck counts as "possibly lost".
# tests/c/valgrind.supp holds suppressions, each with the reason it is not the library's fault.
#
# Prints "valgrind: N passed, N failed" and exits non-zero on any failure.
set -u
dir=${1:?usage: valgrind.sh DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(cd "$dir" && pwd)
fixtures=$root/tests/fixtures
# What it loads, checked before anything runs (tests/needs.sh): valgrind, and python3 for
# run_examples.sh.
# shellcheck source=../needs.sh
. "$root/tests/needs.sh"
needs_command valgrind valgrind
needs_command python3 python3
needs_check valgrind
valgrind=$(command -v valgrind)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS
passed=0 failed=0
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; }
pass() { passed=$((passed + 1)); }

# One wrapper per example, named like it, so that run_examples.sh runs every case under valgrind
# unchanged. Absolute paths: callback_cgi's cases run under `env -i`.
bin=$work/bin logs=$work/logs
mkdir -p "$bin" "$logs"
suppressions=()
[ -f "$root/tests/c/valgrind.supp" ] && suppressions=("--suppressions=$root/tests/c/valgrind.supp")
for prog in inspect_event callback_cgi get_games journal_status; do
  [ -x "$dir/$prog" ] || { fail "$prog" "$dir/$prog is missing (make examples)"; continue; }
  {
    echo '#!/bin/sh'
    printf 'exec %q -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite' "$valgrind"
    printf ' --show-leak-kinds=definite --track-origins=no --num-callers=30'
    for s in "${suppressions[@]}"; do printf ' %q' "$s"; done
    printf ' --log-file=%q %q "$@"\n' "$logs/$prog.%p.log" "$dir/$prog"
  } > "$bin/$prog"
  chmod +x "$bin/$prog"
done

# 1. Every case of run_examples.sh, its output kept in a file.
"$root/tests/c/run_examples.sh" "$bin" > "$work/examples.out" 2>&1
sed -n '/^FAIL/,$p' "$work/examples.out" | grep -v '^examples (' | head -100
summary=$(grep -E '^examples \(.*\): [0-9]+ passed, [0-9]+ failed$' "$work/examples.out" | tail -1)
if [ -n "$summary" ]; then
  counts=${summary##*: }
  passed=$((passed + ${counts%% passed*}))
  failed=$((failed + $(echo "$counts" | sed 's/.*, \([0-9]*\) failed/\1/')))
else
  fail run_examples "no summary line: $(tail -5 "$work/examples.out")"
fi

# 2. callback_cgi with a SQLite journal: a refund, its repeat answered from the journal, a
# payout, a balance query (its index is seen; a query is not journaled), a conflicting refund, a
# refused payout, and a refund after a gap.
TOKEN=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
journal=sqlite:$work/journal.db
journal_cgi() { # NAME SOURCES REMOTE_ADDR BODY_FILE EXPECTED_STATUS_LINE EXPECTED_BODY
  local name=journal_$1 sources=$2 remote=$3 body=$4 status=$5 want=$6
  env -i PATH="$PATH" SLOTPARTNER_TOKEN=$TOKEN SLOTPARTNER_SOURCES="$sources" SLOTPARTNER_JOURNAL="$journal" \
    GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST CONTENT_LENGTH="$(wc -c < "$body")" REMOTE_ADDR="$remote" \
    HTTP_X_SERVICE_TOKEN=$TOKEN CONTENT_TYPE=application/json \
    "$bin/callback_cgi" < "$body" > "$work/$name.out" 2> "$work/$name.err"; local rc=$?
  local got_status got_body
  got_status=$(head -1 "$work/$name.out" | tr -d '\r')
  got_body=$(sed '1,/^\r\{0,1\}$/d' "$work/$name.out")
  if [ "$rc" = 0 ] && [ "$got_status" = "$status" ] && [ "$got_body" = "$want" ]; then
    pass
  else
    fail "$name" "exit $rc, '$got_status' '$got_body', expected '$status' '$want'; stderr: $(cat "$work/$name.err")"
  fi
}
REFUND_OK='{"refund":{"success":true,"errorMessage":""}}'
journal_cgi refund staging 34.254.138.20 "$fixtures/refund.json" "Status: 200 OK" "$REFUND_OK"
journal_cgi refund_again staging 34.254.138.20 "$fixtures/refund.json" "Status: 200 OK" "$REFUND_OK"
grep -q 'repeated delivery answered from the journal' "$work/journal_refund_again.err" && pass ||
  fail journal_refund_again_log "$(cat "$work/journal_refund_again.err")"
journal_cgi payout production 18.203.30.17 "$fixtures/payout.json" "Status: 200 OK" \
  '{"payout":{"success":true,"errorMessage":""}}'
journal_cgi balance any ::1 "$fixtures/balance.json" "Status: 200 OK" \
  '{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}'
sed 's/"gameSessionId": *[0-9]*/"gameSessionId":5552/' "$fixtures/refund.json" > "$work/refund_conflict.json"
CONFLICT='{"error":{"code":"conflict","field":"gameSessionBuyRefund.transactionId","message":"gameSessionBuyRefund.transactionId: transactionId 900001 was delivered before with different content (gameSessionId: first 5551, now 5552); the first delivery stays and this one is refused"}}'
journal_cgi conflict staging 34.254.138.20 "$work/refund_conflict.json" "Status: 409 Conflict" "$CONFLICT"
sed 's/^{/{"index":44,/' "$fixtures/invalid_money_float.json" > "$work/payout_refused.json"
journal_cgi refused production 18.203.30.17 "$work/payout_refused.json" "Status: 200 OK" \
  '{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}'
sed -e 's/"index": *[0-9]*/"index":47/' -e 's/"transactionId": *[0-9]*/"transactionId":900007/' \
  "$fixtures/refund.json" > "$work/refund_after_gap.json"
journal_cgi after_gap staging 34.254.138.20 "$work/refund_after_gap.json" "Status: 200 OK" "$REFUND_OK"

# 3. journal_status on that journal (missing 45-46: exit 1), on a new one (exit 0), on one whose
# only trouble is an open conflict (exit 1), and on a URL it cannot open (exit 2).
status() { # NAME EXPECTED_EXIT URL EXPECTED_OUTPUT
  local name=journal_status_$1 want_rc=$2 url=$3 want=$4
  "$bin/journal_status" "$url" > "$work/$name.out" 2> "$work/$name.err"; local rc=$?
  if [ "$rc" = "$want_rc" ] && [ "$(cat "$work/$name.out")" = "$want" ]; then
    pass
  else
    fail "$name" "exit $rc (expected $want_rc); got:"$'\n'"$(cat "$work/$name.out" "$work/$name.err")"$'\n'"expected:"$'\n'"$want"
  fi
}
status seen 1 "$journal" "handled: 3
replayed: 1
conflicts: 1
refused: 1
in progress: 0
missing: 2
unfinished: 0
open conflicts: 1
index jumps: 0
resolved: 0
unrecoverable: 0
numbering: 1
first index: 41
highest index: 47
watermark: 44
missing indexes 45-46"
status empty 0 "sqlite:$work/empty.db" "handled: 0
replayed: 0
conflicts: 0
refused: 0
in progress: 0
missing: 0
unfinished: 0
open conflicts: 0
index jumps: 0
resolved: 0
unrecoverable: 0
numbering: 1
first index: none
highest index: none
watermark: none"
journal=sqlite:$work/conflict_only.db
journal_cgi conflict_only_first staging 34.254.138.20 "$fixtures/refund.json" "Status: 200 OK" "$REFUND_OK"
journal_cgi conflict_only staging 34.254.138.20 "$work/refund_conflict.json" "Status: 409 Conflict" "$CONFLICT"
status conflict_only 1 "$journal" "handled: 1
replayed: 0
conflicts: 1
refused: 0
in progress: 0
missing: 0
unfinished: 0
open conflicts: 1
index jumps: 0
resolved: 0
unrecoverable: 0
numbering: 1
first index: 41
highest index: 41
watermark: 41"
status unusable 2 "mysql://nowhere/db" ""
grep -q 'journal_status: SP_ERR_INVALID_ARGUMENT: ' "$work/journal_status_unusable.err" && pass ||
  fail journal_status_unusable_message "$(cat "$work/journal_status_unusable.err")"

# 4. Every run's valgrind report: empty when valgrind found nothing.
runs=0
for log in "$logs"/*.log; do
  [ -e "$log" ] || continue
  runs=$((runs + 1))
  if [ -s "$log" ]; then
    fail "valgrind $(basename "$log" .log)" "report:"$'\n'"$(head -60 "$log")"
  else
    pass
  fi
done
[ "$runs" -ge 60 ] || fail valgrind_runs "only $runs programs ran under valgrind"

echo "valgrind: $runs runs under memcheck in $((SECONDS - started)) s"
echo "valgrind: $passed passed, $failed failed"
[ "$failed" = 0 ]
