#!/usr/bin/env bash
# The C example's ledger cannot half-credit: callback_cgi (DIR, linked with the shared library)
# is killed in the middle of a payout's credit (tests/c/kill_at_fsync.c, LD_PRELOAD: fsync kills
# the process after the amount is written aside), with and without a journal. The wallet must then
# hold no credit file at all, and the delivery made again must credit the whole amount once. A
# credit file that exists and is empty (the old ledger's open(O_CREAT|O_EXCL) before the write)
# would be read as "already credited" and the payout never paid.
# Prints "half_credit: N passed, N failed"; exits non-zero on any failure.
set -u
dir=${1:?usage: half_credit.sh DIR}
dir=$(cd "$dir" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $1: $2"; }
TOKEN=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
body=$root/tests/fixtures/payout.json
amount=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["moneyWon"])' "$body")
transaction=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["transactionId"])' "$body")
deliver() { # JOURNAL_URL WALLET [PRELOAD]
  env -i PATH="$PATH" ${3:+LD_PRELOAD="$3" KILL_AT_FSYNC_OF=/wallet-} SLOTPARTNER_TOKEN=$TOKEN SLOTPARTNER_SOURCES=any SLOTPARTNER_LEASE_MS=300 \
    SLOTPARTNER_JOURNAL="$1" SLOTPARTNER_WALLET="$2" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST \
    CONTENT_LENGTH="$(wc -c < "$body")" HTTP_X_SERVICE_TOKEN=$TOKEN "$dir/callback_cgi" < "$body" 2> /dev/null
}
for journal in "" "sqlite:$work/journal.db"; do
  name=${journal:+journal}; name=${name:-no_journal}
  wallet=$work/wallet-$name
  mkdir -p "$wallet"
  { deliver "$journal" "$wallet" "$dir/kill_at_fsync.so" > "$work/$name.killed"; } 2> /dev/null; rc=$?
  [ "$rc" = 137 ] && pass || fail "${name}_killed" "exit $rc, expected 137 (SIGKILL at fsync): $(cat "$work/$name.killed")"
  # Killed in the credit itself: its amount is written aside, nothing is in place.
  [ -n "$(find "$wallet" -name "payout-$transaction.*" -size +0)" ] && pass || fail "${name}_killed_in_the_credit" "no aside file: $(ls "$wallet")"
  if [ ! -e "$wallet/payout-$transaction" ]; then pass; else fail "${name}_no_half_credit" "payout-$transaction exists after the kill ($(wc -c < "$wallet/payout-$transaction") bytes)"; fi
  sleep 0.5 # the killed worker's claim ends with its lease (SLOTPARTNER_LEASE_MS)
  deliver "$journal" "$wallet" > "$work/$name.again"
  if head -1 "$work/$name.again" | grep -q '^Status: 200' && grep -q '"success":true' "$work/$name.again"; then pass; else fail "${name}_delivered_again" "$(cat "$work/$name.again")"; fi
  if [ "$(cat "$wallet/payout-$transaction" 2> /dev/null)" = "$amount" ]; then pass; else fail "${name}_credited" "payout-$transaction holds '$(cat "$wallet/payout-$transaction" 2> /dev/null)', expected $amount"; fi
  # An aside file a killed worker left is no credit: it is ignored, and the next credit of the same
  # transaction by another process id proceeds.
  leftovers=$(find "$wallet" -name "payout-$transaction.*" | wc -l)
  [ "$leftovers" -le 1 ] && pass || fail "${name}_aside" "$leftovers aside files"
done
echo "half_credit: $passed passed, $failed failed"
[ "$failed" = 0 ]
