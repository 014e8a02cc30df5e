#!/usr/bin/env bash
# Builds the C++ test and example under ASan/UBSan (static library), starts the sandbox for
# getGames and getEvent, runs the test and checks the example's answers. Prints "N passed, N failed".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$root/target/cpp
# What the test loads, checked before anything runs (tests/needs.sh): a C++ compiler with
# AddressSanitizer and UndefinedBehaviorSanitizer (g++ brings both).
# shellcheck source=../../tests/needs.sh
. "$root/tests/needs.sh"
needs_command "${CXX:-c++}" g++
needs_check cpp_tests
work=$(mktemp -d)
# The sandbox started below is stopped however this ends; interrupted or terminated, the script
# exits, and so cleans up, at once.
sandbox_pid=
cleanup() {
  [ -n "$sandbox_pid" ] && kill "$sandbox_pid" 2> /dev/null && wait "$sandbox_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
mkdir -p "$out"
flags=(-std=c++17 -Wall -Wextra -Werror -pedantic -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer -I"$root/include" -I"$root/bindings/cpp")
libs=("$root/target/release/libslotpartner.a" -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
${CXX:-c++} "${flags[@]}" -DSLOTPARTNER_FIXTURES="\"$root/tests/fixtures\"" "$root/bindings/cpp/test_slotpartner.cpp" \
  -o "$out/test_slotpartner" "${libs[@]}" || exit 1
${CXX:-c++} "${flags[@]}" "$root/bindings/cpp/example_callback.cpp" -o "$out/example_callback" "${libs[@]}" || exit 1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# getEvent serves events 1 to 20 of seed 11 for the recovery tests.
"$root/target/release/slotpartner-sandbox" serve --listen 127.0.0.1:0 --ca-out "$work/ca.pem" \
  --ready-file "$work/url" --events-count 20 --events-seed 11 > /dev/null 2>&1 &
sandbox_pid=$!
for _ in $(seq 200); do [ -s "$work/url" ] && break; sleep 0.1; done
SLOTPARTNER_BASE_URL=$(cat "$work/url") SLOTPARTNER_CA_FILE=$work/ca.pem "$out/test_slotpartner" | tee "$work/result"
rc=${PIPESTATUS[0]}
read -r _ passed _ failed _ < <(tail -n 1 "$work/result")

token=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f
example() { # EXPECTED TOKEN FIXTURE (a name in tests/fixtures, or a path)
  local got body=$3
  [[ "$body" = /* ]] || body=$root/tests/fixtures/$body
  got=$(SLOTPARTNER_TOKEN=$token "$out/example_callback" "$2" 127.0.0.1 < "$body" 2> /dev/null)
  if [ "$got" = "$1" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL example $3: $got"; fi
}
example '200 {"payout":{"success":true,"errorMessage":""}}' "$token" payout.json
example '200 {"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}' "$token" balance.json
example '401 {"error":{"code":"wrong_token","field":"X-Service-Token","message":"X-Service-Token: does not match the partner token"}}' \
  0b7e3c55-1a2b-4c3d-8e9f-000000000001 refund.json
example '200 {"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}' \
  "$token" invalid_money_float.json
# A refused balance query states no balance and is sent with 500, by the example or by validation.
sed 's/"playerPartnerIdentifier":"[^"]*"/"playerPartnerIdentifier":"unknown-player"/' "$root/tests/fixtures/balance.json" > "$work/balance_unknown.json"
example '500 {"playerBalance":{"errorMessage":"player unknown-player is not known"}}' "$token" "$work/balance_unknown.json"
example '500 {"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)"}}' \
  "$token" invalid_no_player.json
# An unreadable index never refuses money; an upper-case token is the token.
sed 's/"index": *[0-9]*/"index":"42"/' "$root/tests/fixtures/payout.json" > "$work/payout_index_string.json"
example '200 {"payout":{"success":true,"errorMessage":""}}' "$token" "$work/payout_index_string.json"
example '200 {"refund":{"success":true,"errorMessage":""}}' "${token^^}" refund.json
# With a journal: a repeated delivery gets the first reply and runs nothing; a conflict gets 409.
journal=sqlite:$work/journal.db
journaled() { # FIXTURE (a path) -> "STATUS BODY" on stdout, the log in $work/log
  SLOTPARTNER_TOKEN=$token SLOTPARTNER_JOURNAL=$journal "$out/example_callback" "$token" 127.0.0.1 < "$1" 2> "$work/log"
}
check() { # WHAT CONDITION...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL example with a journal: $what"; fi
}
first=$(journaled "$root/tests/fixtures/payout.json")
check "first delivery: $first" [ "$first" = '200 {"payout":{"success":true,"errorMessage":""}}' ]
check "credited on the first delivery" grep -q '^credit 150000 EUR$' "$work/log"
again=$(journaled "$root/tests/fixtures/payout.json")
check "repeat: $again" [ "$again" = "$first" ]
check "the repeat runs nothing" grep -qx 'repeated delivery answered from the journal' "$work/log"
check "the repeat credits nothing" bash -c "! grep -q '^credit' '$work/log'"
sed 's/"moneyWon": *150000/"moneyWon":150001/' "$root/tests/fixtures/payout.json" > "$work/payout_other.json"
conflict=$(journaled "$work/payout_other.json")
check "conflict: $conflict" bash -c '[[ "$1" == "409 "*900002* ]]' _ "$conflict"
balance=$(journaled "$root/tests/fixtures/balance.json")
check "a balance query is not journaled: $balance" [ "$balance" = '200 {"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}' ]
journal=sqlite:$work
unusable=$(journaled "$root/tests/fixtures/payout.json")
check "an unusable journal: $unusable" bash -c '[[ "$1" == "503 "* ]]' _ "$unusable"
# A journal whose PostgreSQL server cannot be reached (a closed port on loopback): a wrong token is
# answered 401 as without a journal, which is never opened; the token gets 503 with a JSON body
# that names nothing of the journal (its URL is in the log only).
journal=postgres://sp_owner@127.0.0.1:1/sp_ledger
wrong=$(SLOTPARTNER_TOKEN=$token SLOTPARTNER_JOURNAL=$journal "$out/example_callback" 0b7e3c55-1a2b-4c3d-8e9f-000000000001 127.0.0.1 \
  < "$root/tests/fixtures/refund.json" 2> "$work/log")
check "an unreachable journal, a wrong token: $wrong" [ "$wrong" = '401 {"error":{"code":"wrong_token","field":"X-Service-Token","message":"X-Service-Token: does not match the partner token"}}' ]
check "the journal untouched: $(cat "$work/log")" bash -c '! grep -qE "journal|sp_owner" "$1"' _ "$work/log"
down=$(journaled "$root/tests/fixtures/payout.json")
check "an unreachable journal: $down" bash -c '[[ "$1" == "503 {\"error\":"* ]]' _ "$down"
check "the 503 body names nothing of the journal: $down" bash -c '! grep -qE "postgres|127\.0\.0\.1|sp_owner|sp_ledger" <<< "$1"' _ "$down"
check "the log names the journal" grep -q 'journal: postgres://sp_owner@127.0.0.1:1/sp_ledger' "$work/log"
balance=$(journaled "$root/tests/fixtures/balance.json")
check "a balance query with the journal down: $balance" [ "$balance" = '200 {"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}' ]
echo "cpp binding: $passed passed, $failed failed"
[ "$rc" = 0 ] && [ "$failed" = 0 ]
