#!/usr/bin/env bash
# The main job on the built-in sandbox, all on loopback: start slotpartner-sandbox, list its
# games through the get_games example, put the callback_cgi example behind an HTTP server, have
# the sandbox send it a refund, a payout, a balance query and one invalid event, and check every
# reply. Then the same endpoint with a delivery journal and a demo wallet: a payout delivered
# twice is answered from the journal and credited once, and a burst with lost, repeated and
# reordered events ends with the journal naming exactly the lost indexes; `slotpartner recover`
# then fetches the lost events from the sandbox and delivers them to the same endpoint, after
# which the journal has no gap and every event of the run was credited exactly once. Exits 0
# only if every check passed. Installs nothing; stops what it starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  wait 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

token=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
sandbox=target/release/slotpartner-sandbox
operator=target/release/slotpartner
# The burst of step 5b: its events are the ones the sandbox's getEvent serves (same seed, same
# first index, same count), so that `slotpartner recover` can fetch the lost ones in step 6.
burst_seed=5 burst_index=2 burst_count=40

wait_for() { # FILE: wait up to 20 s for a ready file
  for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "demo: $1 did not appear" >&2; return 1
}

echo "== 1. The service stand-in: slotpartner-sandbox serve"
"$sandbox" serve --listen 127.0.0.1:0 --token "$token" --ca-out "$work/ca.pem" --ready-file "$work/service" \
  --events-count "$burst_count" --events-seed "$burst_seed" --events-index "$burst_index" --events-kind mixed \
  > /dev/null 2> "$work/sandbox.log" &
pids+=($!)
wait_for "$work/service"
base_url=$(cat "$work/service")
echo "service at $base_url (CA certificate in $work/ca.pem)"
echo "(its getEvent action serves the events of step 5b's burst, indexes $burst_index-$((burst_index + burst_count - 1)), for step 6)"

echo
echo "== 2. getGames through examples/c/get_games"
export SLOTPARTNER_BASE_URL=$base_url SLOTPARTNER_TOKEN=$token SLOTPARTNER_CA_FILE=$work/ca.pem
target/examples/get_games en-US
echo
target/examples/get_games de-DE 1003

echo
echo "== 3. The partner's callback endpoint: examples/c/callback_cgi behind an HTTP server"
SLOTPARTNER_SOURCES="127.0.0.1,::1" python3 scripts/cgi_gateway.py 127.0.0.1:0 target/examples/callback_cgi \
  --ready-file "$work/endpoint" > /dev/null &
pids+=($!)
wait_for "$work/endpoint"
endpoint="$(cat "$work/endpoint")/callback"
echo "callback endpoint at $endpoint"

echo
echo "== 4. The service sends callbacks (slotpartner-sandbox send); each reply is checked"
failed=0
send() { "$sandbox" send --url "$endpoint" --token "$token" "$@" || failed=$((failed + 1)); }
send --index 1 --expect-success true refund
send --index 2 --expect-success true payout
send --index 3 --expect-success true balance
send --index 4 --set moneyWon=1500.5 --expect-success false payout


echo
echo "== 5. Exactly once: the same endpoint with a delivery journal (SLOTPARTNER_JOURNAL) and a wallet"
mkdir "$work/wallet"
journal="sqlite:$work/journal.db"
SLOTPARTNER_SOURCES="127.0.0.1,::1" SLOTPARTNER_JOURNAL="$journal" SLOTPARTNER_WALLET="$work/wallet" \
  python3 scripts/cgi_gateway.py 127.0.0.1:0 target/examples/callback_cgi --ready-file "$work/journaled" \
  > /dev/null 2> "$work/journaled.log" &
pids+=($!)
wait_for "$work/journaled"
endpoint="$(cat "$work/journaled")/callback"
echo "callback endpoint at $endpoint, journal $journal, wallet $work/wallet (one file per credit)"
check() { # DESCRIPTION COMMAND...: runs the check, prints its verdict
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what" >&2; failed=$((failed + 1)); fi
}

echo
echo "-- 5a. The service delivers jackpot payout 730046001 (index 1), then delivers it again"
for _ in 1 2; do send --index 1 --set epochReleasedMillis=1795300123456 --expect-success true payout; done
echo "endpoint log: $(grep -c 'answered from the journal' "$work/journaled.log") delivery answered from the journal"
check "the repeat was answered from the journal" grep -q 'answered from the journal' "$work/journaled.log"
check "the wallet holds one credit: $(ls "$work/wallet")" test "$(ls "$work/wallet")" = payout-730046001

echo
echo "-- 5b. A burst of 40 events (indexes 2-41): 10% lost, 10% repeated, some reordered"
echo "   (send checks that every repeat gets the byte-identical reply of the first delivery)"
"$sandbox" send --url "$endpoint" --token "$token" --burst "$burst_count" --index "$burst_index" --seed "$burst_seed" \
  --lose 0.1 --repeat 0.1 \
  --reorder 0.1 --concurrency 2 --quiet mixed > "$work/burst.txt" || failed=$((failed + 1))
sed 's/^summary /   /' "$work/burst.txt"
lost=$(sed -n 's/^summary lost=[0-9]* lost_indexes=//p' "$work/burst.txt")
delivered=$(sed -n 's/^summary .* delivered=\([0-9]*\) .*/\1/p' "$work/burst.txt")
repeated=$(sed -n 's/^summary repeated=\([0-9]*\) .*/\1/p' "$work/burst.txt")
deliveries=$(sed -n 's/^summary .* deliveries=\([0-9]*\)$/\1/p' "$work/burst.txt")
sent_money=$(sed -n 's/^summary sent_payouts=.* sent_money_total=\([0-9]*\) .*/\1/p' "$work/burst.txt")

echo
echo "-- What the journal saw: examples/c/journal_status $journal"
rc=0
target/examples/journal_status "$journal" > "$work/status.txt" || rc=$?
sed 's/^/   /' "$work/status.txt"
echo "   (exit status $rc: 1 means indexes are missing)"
missing=$(sed -n -e 's/^missing index \([0-9]*\)$/\1/p' -e 's/^missing indexes \([0-9]*\)-\([0-9]*\)$/\1 \2/p' \
  "$work/status.txt" | while read -r a b; do seq "$a" "${b:-$a}"; done | paste -sd, -)
check "the journal reports exactly the lost indexes ($lost) as missing" test "$rc" = 1 -a "$missing" = "$lost"
check "the wallet holds one credit per delivered event ($((delivered + 1)))" \
  test "$(ls "$work/wallet" | wc -l)" = "$((delivered + 1))"
# What the two figures that look odd mean (src/journal/mod.rs, sandbox/src/burst.rs):
replayed=$(sed -n 's/^replayed: //p' "$work/status.txt")
watermark=$(sed -n 's/^watermark: //p' "$work/status.txt")
echo "   replayed: $replayed counts deliveries answered from the journal with the stored reply, not events:"
echo "   the repeat of 5a, plus the burst's $((deliveries - delivered)) extra POSTs (deliveries=$deliveries minus"
echo "   delivered=$delivered); repeated=$repeated counts the events sent more than once, and the sandbox sends"
echo "   each of them again once or, one time in four (by the seed), twice. watermark: $watermark is the"
echo "   index up to which every index was seen: index $((watermark + 1)) is the first one missing."
check "replayed ($replayed) is the repeat of 5a plus the burst's extra deliveries ($((1 + deliveries - delivered)))" \
  test "$replayed" = "$((1 + deliveries - delivered))"

echo
echo "== 6. The lost events recovered: slotpartner recover"
echo "   It asks the service for each missing index (getEvent, the action address of"
echo "   SLOTPARTNER_BASE_URL) and delivers the event to the endpoint of step 5, as the service"
echo "   would have, so the same journal and wallet handle it. --min-age 0s: by default recover"
echo "   leaves gaps younger than a minute for its next run (a late or reordered delivery usually"
echo "   fills them on its own); these gaps are known lost, so the demo takes them at once."
logic_runs() { grep -c -e '^callback_cgi: gameSessionBuyRefund' -e '^callback_cgi: jackpotPayout' "$work/journaled.log" || true; }
runs_before=$(logic_runs)
rc=0
"$operator" recover --journal "$journal" --callback-url "$endpoint" --min-age 0s > "$work/recover.txt" || rc=$?
sed 's/^/   /' "$work/recover.txt"
check "recover exits 0 (nothing left that needs attention)" test "$rc" = 0
recovered=$(sed -n 's/^summary .* recovered=\([0-9]*\) .*/\1/p' "$work/recover.txt")
check "recover recovered the $(echo "$lost" | tr , '\n' | wc -l) lost events ($recovered)" \
  test "$recovered" = "$(echo "$lost" | tr , '\n' | wc -l)"

echo
echo "-- No gap remains: slotpartner journal gaps (prints the missing ranges, exits 1 if any)"
rc=0
"$operator" journal gaps --journal "$journal" > "$work/gaps.txt" || rc=$?
sed 's/^/   /' "$work/gaps.txt"
echo "   (exit status $rc, $(wc -l < "$work/gaps.txt") lines)"
check "slotpartner journal gaps prints nothing and exits 0" test "$rc" = 0 -a ! -s "$work/gaps.txt"
rc=0
target/examples/journal_status "$journal" > "$work/status.txt" || rc=$?
highest=$((burst_index + burst_count - 1))
echo "   journal_status now: $(grep -e '^handled' -e '^replayed' -e '^missing:' -e '^watermark' "$work/status.txt" | paste -sd, - | sed 's/,/, /g') (exit status $rc)"
check "the watermark reached the highest index ($highest)" grep -qx "watermark: $highest" "$work/status.txt"

echo
echo "-- Each event credited once: the endpoint's business logic ran once per event, the wallet"
echo "   holds one credit per transaction of the run, the lost ones included"
runs=$(logic_runs)
credits=$(ls "$work/wallet" | wc -l)
echo "   business logic ran $runs times ($((runs - runs_before)) of them for recover), wallet: $credits credits"
# The burst's transactionIds are 900000000 + index (sandbox/src/burst.rs); 5a's payout is its own.
expected=$( (echo payout-730046001; for i in $(seq "$burst_index" "$highest"); do echo $((900000000 + i)); done) | sort)
got=$(ls "$work/wallet" | sed 's/^\(payout\|refund\)-\(9[0-9]*\)$/\2/' | sort)
check "the wallet holds exactly one credit per event: 5a's payout and indexes $burst_index-$highest ($((burst_count + 1)))" \
  test "$got" = "$expected"
check "the business logic ran once per event ($((burst_count + 1)))" test "$runs" = "$((burst_count + 1))"
paid=$(cat "$work/wallet"/payout-9* | awk '{ total += $1 } END { print total + 0 }')
check "the burst's payouts in the wallet add up to what the sandbox sent, lost ones included ($sent_money)" \
  test "$paid" = "$sent_money"

echo
if [ "$failed" -eq 0 ]; then
  echo "demo: every reply is the expected one, and every check passed"
else
  echo "demo: $failed replies or checks were not the expected ones" >&2
  exit 1
fi
