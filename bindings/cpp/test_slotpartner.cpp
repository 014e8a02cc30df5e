// Tests of slotpartner.hpp: every event kind, validation errors with their field, token and
// source refusal, reply bytes, getGames against the sandbox (SLOTPARTNER_BASE_URL,
// SLOTPARTNER_CA_FILE), and freeing (run under AddressSanitizer's leak check by run_tests.sh).
// Prints "N passed, N failed".
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "slotpartner.hpp"

namespace {

int passed = 0, failed = 0;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (cond) {                                                                                                    \
            passed++;                                                                                                  \
        } else {                                                                                                       \
            failed++;                                                                                                  \
            std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                       \
        }                                                                                                              \
    } while (0)

const char *const TOKEN = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const char *const STAGING = "34.254.138.20";

std::string fixture(const std::string &name) {
    std::ifstream in(std::string(SLOTPARTNER_FIXTURES) + "/" + name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

slotpartner::Receiver receiver() {
    slotpartner::ReceiverConfig config;
    config.add_token(TOKEN).sources("staging");
    return slotpartner::Receiver(config);
}

/// Runs `call`, expecting slotpartner::Error; returns it (status SP_OK when nothing was thrown).
template <class F> slotpartner::Error failure(F call) {
    try {
        call();
    } catch (const slotpartner::Error &e) {
        return e;
    }
    return slotpartner::Error(SP_OK, "", "no error", 0, "");
}

void refund_is_read_and_answered() {
    auto event = receiver().handle(TOKEN, STAGING, fixture("refund.json"));
    CHECK(event.kind() == SP_EVENT_KIND_BUY_REFUND);
    CHECK(event.name() == "gameSessionBuyRefund");
    CHECK(event.index() == 41);
    auto r = event.buy_refund();
    CHECK(r.game_session_identifier == "gs-7f3a9c");
    CHECK(r.player_identifier == std::optional<std::string_view>("svc-player-1001"));
    CHECK(r.player_partner_identifier == std::optional<std::string_view>("partner-42"));
    CHECK(r.transaction_id == 900001 && r.buy_transaction_id == 899990 && r.game_session_id == 5551);
    CHECK(r.partner_game_request_identifier == "req-2026-11-21-0001");
    CHECK(r.game_id == 12 && r.is_mobile && !r.bonus_code);
    CHECK(event.extra_field("serverTime") == std::optional<std::string_view>(R"({"zone": "UTC", "epochMillis": 1795300000000})"));
    CHECK(event.extra_fields().size() == 2);
    CHECK(event.reply(true) == R"({"refund":{"success":true,"errorMessage":""}})");
    CHECK(event.reply(false, "session \"gs-7f3a9c\" ended") ==
          R"({"refund":{"success":false,"errorMessage":"session \"gs-7f3a9c\" ended"}})");
    bool threw = false;
    try {
        event.jackpot_payout();
    } catch (const std::logic_error &) {
        threw = true;
    }
    CHECK(threw);
}

void payout_and_balance_are_read_and_answered() {
    auto payout = receiver().handle(TOKEN, STAGING, fixture("payout.json"));
    auto p = payout.jackpot_payout();
    CHECK(p.jackpot_identifier == "jp-major-eu" && p.currency_iso4217 == "EUR");
    CHECK(p.money_won == 150000 && p.coins_won == 0 && p.is_money && p.is_primary);
    CHECK(p.epoch_released_millis == 1795300123456);
    CHECK(p.bonus_code == std::optional<std::string_view>("WELCOME-\xC3\x84\"10\""));
    CHECK(p.is_mobile == std::optional<bool>(false));
    CHECK(payout.reply(true) == R"({"payout":{"success":true,"errorMessage":""}})");

    auto minimal = receiver().parse(fixture("payout_minimal.json"));
    CHECK(!minimal.index() && !minimal.jackpot_payout().is_mobile && !minimal.jackpot_payout().player_identifier);
    CHECK(minimal.jackpot_payout().money_won == 9007199254740991);

    auto balance = receiver().handle(TOKEN, STAGING, fixture("balance.json"));
    CHECK(balance.kind() == SP_EVENT_KIND_BALANCE_QUERY);
    CHECK(balance.balance_query().player_partner_identifier == std::optional<std::string_view>("partner-42"));
    CHECK(balance.reply_balance(12345) ==
          R"({"playerBalance":{"money":12345,"currencyISO4217":"EUR","coins":0,"errorMessage":""}})");
    CHECK(balance.reply_balance(1, "GBP", 7) ==
          R"({"playerBalance":{"money":1,"currencyISO4217":"GBP","coins":7,"errorMessage":""}})");
    CHECK(failure([&] { balance.reply_balance(-1); }).field() == "money");
}

void validation_errors_name_the_field_and_the_answer() {
    auto e = failure([] { receiver().parse(fixture("invalid_money_float.json")); });
    CHECK(e.status() == SP_ERR_WRONG_TYPE);
    CHECK(e.field() == "jackpotPayout.moneyWon");
    CHECK(std::string(e.what()) == "jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5");
    CHECK(e.http_status() == 200);
    CHECK(e.response_body().find(R"({"payout":{"success":false,)") == 0);
    CHECK(std::string(e.status_name()) == "SP_ERR_WRONG_TYPE");

    const struct {
        const char *fixture;
        sp_status status;
        const char *field;
        uint16_t http;
    } cases[] = {
        {"invalid_missing_field.json", SP_ERR_MISSING_FIELD, "gameSessionBuyRefund.transactionId", 200},
        {"invalid_string_id.json", SP_ERR_WRONG_TYPE, "gameSessionBuyRefund.transactionId", 200},
        {"invalid_currency.json", SP_ERR_INVALID_VALUE, "jackpotPayout.currencyISO4217", 200},
        {"invalid_negative_amount.json", SP_ERR_OUT_OF_RANGE, "jackpotPayout.moneyWon", 200},
        // A balance query refused for its fields: 500, no balance stated (below).
        {"invalid_no_player.json", SP_ERR_MISSING_FIELD, "getPlayerBalance.playerIdentifier", 500},
        {"invalid_control_char.json", SP_ERR_INVALID_VALUE, "gameSessionBuyRefund.gameSessionIdentifier", 200},
        {"duplicate_key.json", SP_ERR_DUPLICATE_KEY, "event", 400},
        {"not_json.json", SP_ERR_INVALID_JSON, "", 400},
        {"not_object.json", SP_ERR_NOT_AN_OBJECT, "", 400},
        {"bom.json", SP_ERR_INVALID_UTF8, "", 400},
    };
    for (const auto &c : cases) {
        auto error = failure([&] { receiver().parse(fixture(c.fixture)); });
        CHECK(error.status() == c.status);
        CHECK(error.field() == c.field);
        CHECK(error.http_status() == c.http);
        CHECK(error.response_body().find("\"success\":true") == std::string::npos);
    }
    auto balance = failure([] { receiver().parse(fixture("invalid_no_player.json")); });
    CHECK(balance.response_body() ==
          R"json({"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)"}})json");
}

std::string with_index(std::string body, const std::string &raw) {
    const std::string old = "\"index\":42";
    body.replace(body.find(old), old.size(), "\"index\":" + raw);
    return body;
}

void unreadable_index_is_handled_without_one() {
    for (const char *raw : {"\"42\"", "-1", "1.5"}) {
        auto event = receiver().handle(TOKEN, STAGING, with_index(fixture("payout.json"), raw));
        CHECK(!event.index() && event.index_unreadable() && event.get()->index_unreadable);
        CHECK(event.extra_field("index") == std::optional<std::string_view>(raw));
        CHECK(event.reply(true) == R"({"payout":{"success":true,"errorMessage":""}})");
        CHECK(event.reply_http_status() == 200);
    }
    auto readable = receiver().parse(fixture("payout.json"));
    CHECK(readable.index() == 42 && !readable.index_unreadable());
    CHECK(readable.reply_http_status() == 0); // no reply built yet

    slotpartner::ReceiverConfig config;
    config.add_token(TOKEN).sources("any").strict_index(true);
    const slotpartner::Receiver strict(config);
    auto refused = failure([&] { strict.parse(with_index(fixture("payout.json"), "\"42\"")); });
    CHECK(refused.status() == SP_ERR_WRONG_TYPE && refused.field() == "jackpotPayout.index" && refused.http_status() == 200);
    CHECK(refused.response_body() ==
          R"({"payout":{"success":false,"errorMessage":"jackpotPayout.index: expected a non-negative integer, got \"42\""}})");
    CHECK(refused.event_name() == std::optional<std::string>("jackpotPayout") && !refused.index() &&
          refused.transaction_id() == 900002);
}

void refused_balance_states_no_balance() {
    auto event = receiver().handle(TOKEN, STAGING, fixture("balance.json"));
    CHECK(event.reply(false, "player unknown") == R"({"playerBalance":{"errorMessage":"player unknown"}})");
    CHECK(event.reply_http_status() == 500 && event.get()->reply_http_status == 500);
    CHECK(event.reply_balance(5) == R"({"playerBalance":{"money":5,"currencyISO4217":"EUR","coins":0,"errorMessage":""}})");
    CHECK(event.reply_http_status() == 200);

    slotpartner::ReceiverConfig config;
    config.add_token(TOKEN).sources("any").balance_failure_http_status(503);
    const slotpartner::Receiver configured(config);
    auto query = configured.parse(fixture("balance.json"));
    CHECK(query.reply(false, "down") == R"({"playerBalance":{"errorMessage":"down"}})");
    CHECK(query.reply_http_status() == 503);
    CHECK(failure([&] { configured.parse(fixture("invalid_no_player.json")); }).http_status() == 503);
    for (uint16_t status : {0, 199, 300, 600}) {
        auto bad = failure([&] { slotpartner::ReceiverConfig().balance_failure_http_status(status); });
        CHECK(bad.status() == SP_ERR_INVALID_ARGUMENT && bad.field() == "balance_failure_http_status");
    }
}

void forwarded_for_sources_and_tokens() {
    slotpartner::ReceiverConfig config;
    config.add_token(TOKEN).sources("staging").trusted_proxies("10.0.0.0/8");
    const slotpartner::Receiver r(config);
    const std::string refund = fixture("refund.json");
    CHECK(r.handle(TOKEN, STAGING, refund, std::string_view("\xff\xfe")).kind() == SP_EVENT_KIND_BUY_REFUND);
    auto trusted = failure([&] { r.handle(TOKEN, "10.0.0.5", refund, std::string_view("\xff\xfe")); });
    CHECK(trusted.status() == SP_ERR_FORBIDDEN_SOURCE && trusted.http_status() == 403);
    CHECK(trusted.response_body() ==
          R"json({"error":{"code":"forbidden_source","field":"remote_addr","message":"remote_addr: X-Forwarded-For from trusted proxy 10.0.0.5 is not UTF-8 (byte 0)"}})json");
    CHECK(r.handle(TOKEN, "10.0.0.5", refund, std::string_view(STAGING)).kind() == SP_EVENT_KIND_BUY_REFUND);

    slotpartner::ReceiverConfig any_config;
    any_config.add_token(TOKEN).sources("any");
    const slotpartner::Receiver any(any_config);
    CHECK(any.handle(TOKEN, std::nullopt, refund).kind() == SP_EVENT_KIND_BUY_REFUND);
    CHECK(any.handle(TOKEN, "not-an-address", refund).kind() == SP_EVENT_KIND_BUY_REFUND);
    CHECK(failure([&] { r.handle(TOKEN, std::nullopt, refund); }).http_status() == 403);

    slotpartner::ReceiverConfig mapped_config;
    mapped_config.add_token(TOKEN).sources("::ffff:10.0.0.0/104");
    const slotpartner::Receiver mapped(mapped_config);
    CHECK(mapped.handle(TOKEN, "10.1.2.3", refund).kind() == SP_EVENT_KIND_BUY_REFUND);
    CHECK(failure([&] { mapped.handle(TOKEN, "11.0.0.1", refund); }).status() == SP_ERR_FORBIDDEN_SOURCE);

    std::string upper(TOKEN);
    for (char &c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    CHECK(any.handle(upper, std::nullopt, refund).kind() == SP_EVENT_KIND_BUY_REFUND);
    // A NUL cannot cut a header short: `<token>\0junk` is not the token.
    const std::string nul_token = std::string(TOKEN) + std::string("\0junk", 5);
    CHECK(failure([&] { any.handle(nul_token, std::nullopt, refund); }).status() == SP_ERR_WRONG_TOKEN);
}

void last_error_message_passed_back() {
    auto event = receiver().parse(fixture("payout.json"));
    auto error = failure([] { receiver().parse(fixture("invalid_money_float.json")); });
    CHECK(event.reply(false, error.what()) ==
          R"({"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}})");
    CHECK(error.event_name() == std::optional<std::string>("jackpotPayout") && !error.index() && error.transaction_id() == 900002);
}

void token_and_source_are_checked() {
    auto missing = failure([] { receiver().handle(std::nullopt, STAGING, fixture("refund.json")); });
    CHECK(missing.status() == SP_ERR_MISSING_TOKEN && missing.http_status() == 401);
    auto wrong = failure([] { receiver().handle("0b7e3c55-1a2b-4c3d-8e9f-000000000001", STAGING, fixture("refund.json")); });
    CHECK(wrong.status() == SP_ERR_WRONG_TOKEN && wrong.http_status() == 401);
    auto forbidden = failure([] { receiver().handle(TOKEN, "18.203.30.17", fixture("refund.json")); });
    CHECK(forbidden.status() == SP_ERR_FORBIDDEN_SOURCE && forbidden.http_status() == 403);
    auto bad_config = failure([] { slotpartner::ReceiverConfig().add_token("secret"); });
    CHECK(bad_config.status() == SP_ERR_INVALID_ARGUMENT && bad_config.field() == "token");
}

void standalone_replies() {
    CHECK(slotpartner::reply_result("bonusGrant", true) == R"({"bonusGrant":{"success":true,"errorMessage":""}})");
    CHECK(failure([] { slotpartner::reply_result("refund", false); }).field() == "message");
}

void receiver_is_shared_by_threads() {
    auto shared = receiver();
    std::string body = fixture("payout.json");
    int ok[4] = {0, 0, 0, 0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 500; i++) {
                auto event = shared.handle(TOKEN, STAGING, body);
                ok[t] += event.jackpot_payout().money_won == 150000;
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    CHECK(ok[0] + ok[1] + ok[2] + ok[3] == 2000);
}

void get_games_against_the_sandbox() {
    const char *base_url = std::getenv("SLOTPARTNER_BASE_URL");
    const char *ca_file = std::getenv("SLOTPARTNER_CA_FILE");
    if (base_url == nullptr || ca_file == nullptr) {
        std::fprintf(stderr, "SLOTPARTNER_BASE_URL or SLOTPARTNER_CA_FILE unset: getGames not tested\n");
        failed++;
        return;
    }
    slotpartner::ClientConfig config(base_url, TOKEN);
    config.add_ca_file(ca_file).retries(0, 0);
    slotpartner::Client client(config);
    auto english = client.get_games("en-US");
    auto german = client.get_games("de_DE");
    CHECK(english.size() >= 6 && english.size() == german.size());
    CHECK(english[0].game_type == "SlotMachine");
    CHECK(english[0].description_short != german[0].description_short);
    auto one = client.get_games("en-US", english[1].game_id);
    CHECK(one.size() == 1 && one[0].name == english[1].name);
    CHECK(client.call("echo", R"({"n":1})").find(R"("n":1)") != std::string::npos);
    auto bad_locale = failure([&] { client.get_games("english"); });
    CHECK(bad_locale.status() == SP_ERR_INVALID_ARGUMENT && bad_locale.field() == "locale");
    slotpartner::ClientConfig wrong(base_url, "0b7e3c55-1a2b-4c3d-8e9f-000000000001");
    wrong.add_ca_file(ca_file).retries(0, 0);
    auto refused = failure([&] { slotpartner::Client(wrong).get_games("en-US"); });
    CHECK(refused.status() == SP_ERR_HTTP_STATUS && std::string(refused.what()).find("HTTP 401") != std::string::npos);
    auto insecure = failure([] { slotpartner::ClientConfig("http://127.0.0.1:1", TOKEN); });
    CHECK(insecure.status() == SP_ERR_INVALID_ARGUMENT && insecure.field() == "base_url");
}

} // namespace

int main() {
    refund_is_read_and_answered();
    payout_and_balance_are_read_and_answered();
    validation_errors_name_the_field_and_the_answer();
    token_and_source_are_checked();
    unreadable_index_is_handled_without_one();
    refused_balance_states_no_balance();
    forwarded_for_sources_and_tokens();
    last_error_message_passed_back();
    standalone_replies();
    receiver_is_shared_by_threads();
    get_games_against_the_sandbox();
    std::printf("cpp: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
