// Tests of slotpartner.hpp: every event kind, validation errors with their field, token and
// source refusal, reply bytes, the delivery journal on SQLite in a temporary directory (with
// statements of the partner's own staged and run as the reply is stored, and claims written at
// finish), getGames
// against the sandbox (SLOTPARTNER_BASE_URL, SLOTPARTNER_CA_FILE), the recovery of lost events
// against the same sandbox serving getEvent for events 1 to 20 (seed 11), and freeing (run under
// AddressSanitizer's leak check by run_tests.sh).
// Prints "N passed, N failed".
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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

void authenticate_alone_answers_as_handle_would() {
    const auto r = receiver();
    r.authenticate(TOKEN, STAGING); // passes: nothing thrown
    const std::string body = fixture("refund.json");
    struct Case {
        std::optional<std::string_view> token, remote, forwarded;
    };
    const std::string nul_token = std::string(TOKEN) + std::string(1, '\0') + "junk";
    const Case cases[] = {
        {std::nullopt, STAGING, std::nullopt},
        {"0b7e3c55-1a2b-4c3d-8e9f-000000000001", STAGING, std::nullopt},
        {nul_token, STAGING, std::nullopt},
        {TOKEN, "18.203.30.17", std::nullopt},
        {TOKEN, std::nullopt, std::nullopt},
        {TOKEN, "18.203.30.17", std::string_view(STAGING)}, // X-Forwarded-For from an untrusted peer
    };
    for (const Case &c : cases) {
        auto handled = failure([&] { r.handle(c.token, c.remote, body, c.forwarded); });
        auto alone = failure([&] { r.authenticate(c.token, c.remote, c.forwarded); });
        CHECK(alone.status() != SP_OK && alone.status() == handled.status() && alone.field() == handled.field());
        CHECK(std::string(alone.what()) == handled.what() && alone.http_status() == handled.http_status());
        CHECK(alone.response_body() == handled.response_body() && !alone.response_body().empty());
    }
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

/// A temporary directory removed when destroyed; url() names a SQLite journal in it.
class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "sp-cpp-journal-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            std::perror("mkdtemp");
            std::abort();
        }
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    std::string url(const std::string &name = "journal.db") const { return "sqlite:" + (path_ / name).string(); }
    const std::filesystem::path &path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

std::string refund_body(int64_t transaction_id, int64_t index, int64_t game_id = 12) {
    return R"({"event":"gameSessionBuyRefund","index":)" + std::to_string(index) +
           R"(,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1","transactionId":)" + std::to_string(transaction_id) +
           R"(,"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":)" +
           std::to_string(game_id) + R"(,"isMobile":false})";
}

/// The refund `body` of another game session: its decisive content differs.
std::string other_session(std::string body) {
    const std::string from = R"("gameSessionId":5,)";
    size_t at = body.find(from);
    if (at != std::string::npos) {
        body.replace(at, from.size(), R"("gameSessionId":6,)");
    }
    return body;
}

/// The first `"id":N` of a JSON report; -1 when there is none.
int64_t first_id(const std::string &report) {
    size_t at = report.find(R"("id":)");
    return at == std::string::npos ? -1 : std::stoll(report.substr(at + 5));
}

slotpartner::Receiver journaled(const slotpartner::Journal &journal) {
    slotpartner::ReceiverConfig config;
    config.add_token(TOKEN).sources("any").journal(journal);
    return slotpartner::Receiver(config);
}

/// The flow of the README: (HTTP status, body) to answer with; `runs` counts the logic's runs.
std::pair<uint16_t, std::string> journaled_callback(const slotpartner::Receiver &r, const std::string &body, int &runs,
                                                    bool success = true) {
    try {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", body);
        slotpartner::Claim claim = event.begin();
        if (claim.outcome == SP_BEGIN_DONE) {
            return {200, std::string(claim.reply)};
        }
        runs++;
        std::string reply(success ? event.reply(true) : event.reply(false, "refused run " + std::to_string(runs)));
        event.finish();
        return {event.reply_http_status(), reply};
    } catch (const slotpartner::Error &e) {
        return {e.http_status(), e.response_body()};
    }
}

void journal_answers_a_repeat_with_the_first_reply() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    auto first = journaled_callback(r, refund_body(900001, 1), runs, false);
    CHECK(first.first == 200 && first.second == R"({"refund":{"success":false,"errorMessage":"refused run 1"}})");
    std::string reformatted = refund_body(900001, 1);
    for (size_t at = reformatted.find(','); at != std::string::npos; at = reformatted.find(',', at + 3)) {
        reformatted.replace(at, 1, " , ");
    }
    CHECK(journaled_callback(r, reformatted, runs) == first);
    CHECK(journaled_callback(r, refund_body(900001, 1), runs) == first);
    CHECK(runs == 1);
    auto event = r.parse(refund_body(900001, 1));
    auto claim = event.begin();
    CHECK(claim.outcome == SP_BEGIN_DONE && claim.attempt == 0 && claim.reply == first.second);
    CHECK(event.reply_http_status() == 200);
    event.finish(); // nothing to do
    auto status = journal.status();
    CHECK(status.handled == 1 && status.replayed == 3 && status.in_progress == 0 && status.missing == 0);
    // A new one: attempt 1, the last reply built is stored; an explicit reply too.
    auto fresh = r.parse(refund_body(900002, 1));
    auto new_claim = fresh.begin();
    CHECK(new_claim.outcome == SP_BEGIN_NEW && new_claim.attempt == 1 && new_claim.reply.empty());
    auto none = failure([&] { fresh.finish(); });
    CHECK(none.status() == SP_ERR_INVALID_ARGUMENT && none.field() == "reply");
    fresh.finish(std::string_view(R"({"refund":{"success":true,"errorMessage":"stored"}})"));
    CHECK(journaled_callback(r, refund_body(900002, 1), runs).second == R"({"refund":{"success":true,"errorMessage":"stored"}})");
}

void journal_conflict_names_the_transaction() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    auto first = journaled_callback(r, refund_body(900003, 1, 12), runs);
    // The index and gameId may differ in a resend (they decide nothing); gameSessionId may not.
    CHECK(journaled_callback(r, refund_body(900003, 2, 13), runs) == first);
    auto conflict = failure([&] { r.parse(other_session(refund_body(900003, 1, 12))).begin(); });
    CHECK(conflict.status() == SP_ERR_CONFLICT && std::string(conflict.status_name()) == "SP_ERR_CONFLICT");
    CHECK(conflict.http_status() == 409);
    CHECK(std::string(conflict.what()).find("900003") != std::string::npos);
    CHECK(std::string(conflict.what()).find("gameSessionId: first 5, now 6") != std::string::npos);
    CHECK(conflict.response_body().find("900003") != std::string::npos);
    CHECK(journaled_callback(r, refund_body(900003, 1, 12), runs) == first);
    CHECK(runs == 1 && journal.status().conflicts == 1);
}

void journal_abandoned_and_dropped_claims_run_again() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    const std::string body = refund_body(900004, 1);
    {
        auto event = r.parse(body);
        CHECK(event.begin().attempt == 1);
        event.reply(true);
        event.abandon(); // the partner's database was down
        event.abandon(); // twice does nothing
        for (int call = 0; call < 2; call++) { // finishing it fails, every time: nothing stored
            auto finish = failure([&] { event.finish(); });
            CHECK(finish.status() == SP_ERR_CLAIM_LOST && finish.http_status() == 503);
            CHECK(std::string(finish.what()).find("the claim was abandoned") != std::string::npos);
            event.abandon(); // still nothing to do
        }
    }
    {
        auto event = r.parse(body);
        CHECK(event.begin().attempt == 2);
        CHECK(event.differing().empty()); // the same content
        CHECK(journal.status().in_progress == 1);
    } // destroyed while claimed: released
    CHECK(journal.status().in_progress == 0);
    auto event = r.parse(body);
    auto claim = event.begin();
    CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 3);
    event.reply(true);
    event.finish();
    auto not_begun = failure([&] { r.parse(body).finish(); });
    CHECK(not_begun.status() == SP_ERR_INVALID_ARGUMENT);
    auto twice = r.parse(refund_body(900005, 1));
    twice.begin();
    CHECK(failure([&] { twice.begin(); }).status() == SP_ERR_INVALID_ARGUMENT);
}

void journal_abandoned_refund_with_another_decisive_field_names_it() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    {
        auto event = r.parse(refund_body(900006, 1));
        CHECK(event.differing().empty()); // not begun
        auto claim = event.begin();
        CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 1);
        CHECK(event.differing().empty());
        event.reply(true);
        event.abandon(); // the partner's database was down: nothing stored
    }
    // Another gameSessionId, which decides who is paid what: handed out as new, not refused.
    auto event = r.parse(other_session(refund_body(900006, 1)));
    auto claim = event.begin();
    CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 2);
    const std::vector<std::string_view> expected{"gameSessionId: first 5, now 6"};
    CHECK(event.differing() == expected);
    std::string reply(event.reply(true));
    event.finish();
    CHECK(event.differing() == expected); // kept after the claim settles
    CHECK(journal.status().conflicts == 1 && journal.status().open_conflicts == 1);
    CHECK(journal.report(SP_JOURNAL_REPORT_CONFLICTS).find("handed_out") != std::string::npos);
    int runs = 0;
    CHECK(journaled_callback(r, other_session(refund_body(900006, 1)), runs) == std::make_pair(uint16_t{200}, reply));
    CHECK(runs == 0);
    slotpartner::Event moved = std::move(event);
    CHECK(failure([&] { (void)event.differing(); }).status() == SP_ERR_INVALID_ARGUMENT); // moved from
}

void journal_busy_and_lost_claims() {
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).busy_wait_ms(50).lease_ms(200));
    const auto r = journaled(journal);
    auto holder = r.parse(refund_body(900006, 1));
    holder.begin();
    auto started = std::chrono::steady_clock::now();
    auto busy = failure([&] { r.parse(refund_body(900006, 1)).begin(); });
    CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(40));
    CHECK(busy.status() == SP_ERR_BUSY && busy.http_status() == 503);
    holder.reply(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // the lease ends
    auto other = r.parse(refund_body(900006, 1));
    CHECK(other.begin().attempt == 2);
    auto lost = failure([&] { holder.finish(); });
    CHECK(lost.status() == SP_ERR_CLAIM_LOST && lost.http_status() == 503);
    CHECK(std::string(lost.what()).find("taken over by attempt 2") != std::string::npos);
    // From now on finishing and abandoning it fail alike, every time.
    for (int call = 0; call < 2; call++) {
        auto finish_again = failure([&] { holder.finish(); });
        auto abandon = failure([&] { holder.abandon(); });
        CHECK(finish_again.status() == SP_ERR_CLAIM_LOST && finish_again.http_status() == 503);
        CHECK(abandon.status() == SP_ERR_CLAIM_LOST && abandon.http_status() == 503);
        CHECK(std::string(abandon.what()).find("taken over by attempt 2") != std::string::npos);
    }
    other.reply(true);
    other.finish();
    CHECK(r.parse(refund_body(900006, 1)).begin().outcome == SP_BEGIN_DONE);
}

void journal_claim_at_finish_is_written_by_finish_only() {
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).claim_at_finish(true).busy_wait_ms(0));
    const auto r = journaled(journal);
    slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(900201, 1));
    auto claim = event.begin();
    CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 1);
    auto status = journal.status();
    CHECK(status.in_progress == 0 && status.handled == 0 && !status.highest_index); // nothing written
    // A second delivery of the key meanwhile is not told busy: it runs too, and loses at finish.
    auto other = r.parse(refund_body(900201, 1));
    CHECK(other.begin().outcome == SP_BEGIN_NEW && journal.status().in_progress == 0);
    std::string reply(event.reply(true));
    event.finish(); // the claim, the reply and the index, in one transaction
    status = journal.status();
    CHECK(status.handled == 1 && status.in_progress == 0 && status.highest_index == 1);
    other.reply(false, "second");
    auto lost = failure([&] { other.finish(); });
    CHECK(lost.status() == SP_ERR_CLAIM_LOST && lost.http_status() == 503);
    CHECK(std::string(lost.what()).find("claimed at finish") != std::string::npos);
    int runs = 0;
    CHECK(journaled_callback(r, refund_body(900201, 1), runs) == std::make_pair(uint16_t{200}, reply));
    CHECK(runs == 0);
    // abandon() stores the delivery abandoned: counted unfinished, the next delivery is attempt 2.
    auto abandoned = r.parse(refund_body(900202, 2));
    abandoned.begin();
    abandoned.abandon();
    status = journal.status();
    CHECK(status.in_progress == 0 && status.unfinished == 1 && status.highest_index == 2);
    CHECK(r.parse(refund_body(900202, 2)).begin().attempt == 2);
    // Without it (the default, or set false), begin() writes the claim: a second delivery is busy.
    for (const bool set_false : {false, true}) {
        TempDir off_dir;
        slotpartner::JournalConfig config(off_dir.url());
        config.busy_wait_ms(0);
        if (set_false) {
            config.claim_at_finish(false);
        }
        slotpartner::Journal off(config);
        const auto off_r = journaled(off);
        slotpartner::Event first = off_r.handle(TOKEN, "127.0.0.1", refund_body(900203, 1));
        CHECK(first.begin().outcome == SP_BEGIN_NEW);
        auto claimed = off.status();
        CHECK(claimed.in_progress == 1 && claimed.highest_index == 1); // the claim is in the journal
        CHECK(failure([&] { off_r.parse(refund_body(900203, 1)).begin(); }).status() == SP_ERR_BUSY);
        std::string stored(first.reply(true));
        first.finish();
        auto finished = off.status();
        CHECK(finished.handled == 1 && finished.in_progress == 0);
        CHECK(off_r.parse(refund_body(900203, 1)).begin().reply == stored);
    }
}

void journal_balance_refusals_and_gaps() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    auto balance = r.parse(R"({"action":"getPlayerBalance","playerIdentifier":"p-1","index":2})");
    auto claim = balance.begin();
    CHECK(claim.outcome == SP_BEGIN_NOT_JOURNALED && claim.attempt == 0 && claim.reply.empty());
    CHECK(balance.reply_balance(5).find("\"money\":5") != std::string_view::npos);
    balance.finish(); // not needed, does nothing
    journaled_callback(r, refund_body(900101, 1), runs);
    journaled_callback(r, refund_body(900107, 7), runs);
    std::string refused = refund_body(900104, 4);
    refused.replace(refused.find("\"gameId\":12"), 11, "\"gameId\":1.5");
    auto e = failure([&] { r.handle(TOKEN, "127.0.0.1", refused); });
    CHECK(e.status() == SP_ERR_WRONG_TYPE && e.index() == 4 && e.transaction_id() == 900104);
    CHECK((journal.missing() == std::vector<slotpartner::IndexRange>{{3, 3}, {5, 6}}));
    CHECK((journal.missing(1) == std::vector<slotpartner::IndexRange>{{3, 3}}));
    auto status = journal.status();
    CHECK(status.handled == 2 && status.refused == 1 && status.missing == 3);
    CHECK(status.first_index == 1 && status.highest_index == 7 && status.watermark == 2);
    CHECK(failure([&] { journal.missing(0); }).field() == "limit");

    slotpartner::Journal counted(slotpartner::JournalConfig(dir.url("first.db")).first_index(10).durable(false)
                                     .max_reply_bytes(100).lock_timeout_ms(1000));
    auto fresh = counted.status();
    CHECK(fresh.first_index == 10 && !fresh.highest_index && !fresh.watermark && fresh.handled == 0);
    const auto r10 = journaled(counted);
    journaled_callback(r10, refund_body(1, 13), runs);
    CHECK((counted.missing() == std::vector<slotpartner::IndexRange>{{10, 12}}));
    auto big = r10.parse(refund_body(2, 14));
    big.begin();
    CHECK(failure([&] { big.finish(std::string(101, 'x')); }).field() == "reply");
    big.abandon();
}

void journal_threads_one_new() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    const std::string body = refund_body(900200, 1);
    std::atomic<int> ready{0}, news{0}, dones{0}, busies{0}, others{0};
    std::string replies[8];
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([&, t] {
            auto event = r.parse(body);
            ready++;
            while (ready < 8) {
                std::this_thread::yield();
            }
            try {
                auto claim = event.begin();
                if (claim.outcome == SP_BEGIN_NEW) {
                    news++;
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    replies[t] = std::string(event.reply(true));
                    event.finish();
                } else if (claim.outcome == SP_BEGIN_DONE) {
                    dones++;
                    replies[t] = std::string(claim.reply);
                } else {
                    others++;
                }
            } catch (const slotpartner::Error &e) {
                (e.status() == SP_ERR_BUSY ? busies : others)++;
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    CHECK(news == 1 && others == 0 && news + dones + busies == 8);
    for (const std::string &reply : replies) {
        CHECK(reply.empty() || reply == R"({"refund":{"success":true,"errorMessage":""}})");
    }
    CHECK(journal.status().handled == 1);
}

void journal_misuse_and_unusable_journals() {
    auto no_journal = failure([] { receiver().parse(fixture("refund.json")).begin(); });
    CHECK(no_journal.status() == SP_ERR_INVALID_ARGUMENT && std::string(no_journal.what()).find("no journal") != std::string::npos);
    auto bad_url = failure([] { slotpartner::Journal("mysql://x"); });
    CHECK(bad_url.status() == SP_ERR_INVALID_ARGUMENT && bad_url.field() == "journal_url");
    TempDir dir;
    auto not_a_file = failure([&] { slotpartner::Journal("sqlite:" + dir.path().string()); });
    CHECK(not_a_file.status() == SP_ERR_JOURNAL && not_a_file.http_status() == 503);
    CHECK(failure([&] { slotpartner::Journal(slotpartner::JournalConfig(dir.url()).lease_ms(0)); }).status() ==
          SP_ERR_INVALID_ARGUMENT); // checked when opened
    // The receiver keeps the journal open after the Journal object is gone.
    std::optional<slotpartner::Receiver> r;
    {
        slotpartner::Journal journal(dir.url());
        r.emplace(journaled(journal));
    }
    auto event = r->parse(refund_body(1, 1));
    CHECK(event.begin().outcome == SP_BEGIN_NEW);
    event.reply(true);
    event.finish();
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

/// A client of the sandbox (SLOTPARTNER_BASE_URL + `path`, SLOTPARTNER_CA_FILE), not retrying.
slotpartner::ClientConfig sandbox_config(const std::string &path = "") {
    const char *base_url = std::getenv("SLOTPARTNER_BASE_URL");
    const char *ca_file = std::getenv("SLOTPARTNER_CA_FILE");
    slotpartner::ClientConfig config(std::string(base_url ? base_url : "https://127.0.0.1:1") + path, TOKEN);
    if (ca_file != nullptr) {
        config.add_ca_file(ca_file);
    }
    config.retries(0, 0);
    return config;
}

/// The body the service would have delivered for `index`, as getEvent answers it
/// (`{"event":{...}}`, the event byte for byte).
std::string sandbox_event(const slotpartner::Client &client, int64_t index) {
    std::string answer = client.call("getEvent", R"({"index":)" + std::to_string(index) + "}");
    size_t start = answer.find('{', 1), end = answer.rfind('}');
    return answer.substr(start, end - start);
}

/// The README's loop: each recovered event handled (`runs`) and finished; their indexes.
std::vector<int64_t> recover(slotpartner::Recovery &recovery, int &runs, const std::function<void(size_t)> &between = {}) {
    std::vector<int64_t> recovered;
    while (std::optional<slotpartner::Event> event = recovery.next()) {
        recovered.push_back(event->index().value_or(-1));
        runs++;
        event->reply(true);
        event->finish();
        if (between) {
            between(recovered.size());
        }
    }
    return recovered;
}

std::vector<int64_t> range(int64_t first, int64_t last) {
    std::vector<int64_t> out;
    for (int64_t i = first; i <= last; i++) {
        out.push_back(i);
    }
    return out;
}

void recovery_recovers_claimed_events_and_a_late_delivery_once() {
    slotpartner::Client client(sandbox_config());
    std::vector<std::string> bodies(11);
    for (int64_t i = 1; i <= 10; i++) {
        bodies[i] = sandbox_event(client, i);
    }
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).first_index(1));
    const auto r = journaled(journal);
    int runs = 0;
    for (int64_t index : {1, 2, 4, 5, 9, 10}) {
        journaled_callback(r, bodies[index], runs);
    }
    CHECK((journal.missing() == std::vector<slotpartner::IndexRange>{{3, 3}, {6, 8}}));
    slotpartner::Recovery recovery(r, client);
    auto recovered = recover(recovery, runs, [&](size_t count) {
        if (count == 1) { // index 8 arrives late, after the first recovered event
            journaled_callback(r, bodies[8], runs);
        }
    });
    CHECK((recovered == std::vector<int64_t>{3, 6, 7}));
    auto report = recovery.report();
    CHECK(report.missing == 4 && report.recovered == 3 && report.handled_meanwhile == 1 && report.failures.empty());
    CHECK(report.complete());
    CHECK(journal.missing().empty());
    CHECK(runs == 10);
    for (int64_t index = 1; index <= 10; index++) { // a second delivery is answered from the journal
        auto answer = journaled_callback(r, bodies[index], runs);
        CHECK(answer.first == 200 && answer.second.find(R"("success":true)") != std::string::npos);
    }
    CHECK(runs == 10);
    auto status = journal.status();
    CHECK(status.handled == 10 && status.in_progress == 0 && status.missing == 0);
    CHECK(!recovery.next()); // exhausted
}

void recovery_events_are_claimed() {
    slotpartner::Client client(sandbox_config());
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).first_index(1));
    const auto r = journaled(journal);
    int runs = 0;
    journaled_callback(r, sandbox_event(client, 3), runs);
    std::optional<slotpartner::Event> first, second;
    {
        slotpartner::Recovery recovery(r, client);
        first = recovery.next();
        second = recovery.next();
    } // events stay valid after their recovery is gone
    CHECK(first && second && first->index() == 1 && second->index() == 2);
    int64_t transaction_id = first->kind() == SP_EVENT_KIND_JACKPOT_PAYOUT ? first->jackpot_payout().transaction_id
                                                                            : first->buy_refund().transaction_id;
    CHECK(transaction_id == 900000001);
    CHECK(first->differing().empty() && second->differing().empty()); // nothing was delivered before
    auto begun = failure([&] { first->begin(); });
    CHECK(begun.status() == SP_ERR_INVALID_ARGUMENT); // claimed already
    first->reply(false, "player blocked");
    first->abandon(); // the ledger was down
    second.reset();   // destroyed unfinished: released the same way
    CHECK(journal.status().in_progress == 0);
    for (int64_t index : {1, 2}) { // the next delivery runs it as attempt 2
        auto event = r.handle(TOKEN, "127.0.0.1", sandbox_event(client, index));
        auto claim = event.begin();
        CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 2);
        event.reply(true);
        event.finish();
    }
}

void recovery_failures_by_reason_and_a_later_healthy_run() {
    slotpartner::Client client(sandbox_config());
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).first_index(1));
    const auto r = journaled(journal);
    int runs = 0;
    journaled_callback(r, sandbox_event(client, 1), runs);
    journaled_callback(r, sandbox_event(client, 3), runs);
    journaled_callback(r, refund_body(900000022, 22), runs); // beyond the sandbox's 20 events
    CHECK((journal.missing() == std::vector<slotpartner::IndexRange>{{2, 2}, {4, 21}}));
    {
        slotpartner::Recovery failing(r, slotpartner::Client(sandbox_config("/fault/status/500")));
        CHECK(recover(failing, runs).empty());
        auto report = failing.report();
        CHECK(report.missing == 19 && report.recovered == 0 && report.failures.size() == 19 && !report.complete());
        bool all_service = true;
        for (const auto &f : report.failures) {
            all_service = all_service && f.reason == SP_RECOVERY_SERVICE && f.status == SP_ERR_HTTP_STATUS;
        }
        CHECK(all_service);
        CHECK(report.failures[0].index == 2 && report.failures[18].index == 21);
        CHECK(report.failures[0].message.find("500") != std::string::npos);
        CHECK(std::string(report.failures[0].status_name()) == "SP_ERR_HTTP_STATUS");
    }
    {
        slotpartner::Recovery malformed(r, slotpartner::Client(sandbox_config("/fault/malformed")));
        CHECK(recover(malformed, runs).empty());
        auto report = malformed.report();
        bool all_invalid = report.failures.size() == 19;
        for (const auto &f : report.failures) {
            all_invalid = all_invalid && f.reason == SP_RECOVERY_INVALID_EVENT;
        }
        CHECK(all_invalid);
        CHECK(report.failures[0].message.find("transactionId") != std::string::npos);
        CHECK(journal.status().in_progress == 0);
    }
    slotpartner::Recovery healthy(r, client);
    auto recovered = recover(healthy, runs);
    std::vector<int64_t> expected = range(4, 20);
    expected.insert(expected.begin(), 2);
    CHECK(recovered == expected);
    auto report = healthy.report();
    CHECK(report.missing == 19 && report.recovered == 18 && report.handled_meanwhile == 0);
    CHECK(report.failures.size() == 1 && report.failures[0].index == 21 && report.failures[0].reason == SP_RECOVERY_NOT_FOUND);
    CHECK((journal.missing() == std::vector<slotpartner::IndexRange>{{21, 21}}));
    CHECK(runs == 21); // 3 delivered, 18 recovered: nothing twice
}

void recovery_fetch_settings_and_misuse() {
    slotpartner::Client client(sandbox_config());
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).first_index(1));
    const auto r = journaled(journal);
    int runs = 0;
    journaled_callback(r, sandbox_event(client, 2), runs);
    auto one_failure = [&](slotpartner::ClientConfig &config) {
        slotpartner::Recovery recovery(r, slotpartner::Client(config));
        recover(recovery, runs);
        auto report = recovery.report();
        return report.failures.size() == 1 ? report.failures[0] : slotpartner::RecoveryFailure{-1, SP_RECOVERY_JOURNAL, SP_OK, ""};
    };
    auto whole = sandbox_config();
    whole.fetch_event_key(""); // the whole answer taken as the event
    CHECK(one_failure(whole).reason == SP_RECOVERY_INVALID_EVENT);
    auto unknown = sandbox_config();
    unknown.fetch_action("fetchLostEvent");
    auto failure_400 = one_failure(unknown);
    CHECK(failure_400.reason == SP_RECOVERY_SERVICE && failure_400.message.find("400") != std::string::npos);
    auto param = sandbox_config();
    param.fetch_index_param("eventIndex");
    CHECK(one_failure(param).reason == SP_RECOVERY_SERVICE);
    auto spelled = sandbox_config();
    spelled.fetch_action("getEvent").fetch_index_param("index").fetch_event_key("event");
    slotpartner::Recovery recovery(r, slotpartner::Client(spelled));
    CHECK((recover(recovery, runs) == std::vector<int64_t>{1}) && recovery.report().complete());
    CHECK(failure([] { sandbox_config().fetch_action(""); }).field() == "fetch_action");
    CHECK(failure([] { sandbox_config().fetch_index_param(""); }).field() == "fetch_index_param");
    auto no_journal = failure([&] { slotpartner::Recovery{receiver(), client}; });
    CHECK(no_journal.status() == SP_ERR_INVALID_ARGUMENT && std::string(no_journal.what()).find("no journal") != std::string::npos);
    auto zero = failure([&] { slotpartner::Recovery{r, client, 0}; });
    CHECK(zero.status() == SP_ERR_INVALID_ARGUMENT && zero.field() == "limit");
    slotpartner::Recovery moved_from(r, client);
    slotpartner::Recovery moved(std::move(moved_from));
    CHECK(moved.report().missing == 0 && !moved.next());
}

void journal_operator_functions() {
    TempDir dir;
    auto bad_jump = failure([&] { slotpartner::JournalConfig(dir.url()).max_index_jump(0); });
    CHECK(bad_jump.status() == SP_ERR_INVALID_ARGUMENT && bad_jump.field() == "max_index_jump");
    CHECK(failure([&] { slotpartner::JournalConfig(dir.url()).not_found_limit(0); }).field() == "not_found_limit");
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).max_index_jump(10));
    const auto r = journaled(journal);
    int runs = 0;
    for (int64_t index : {1, 3, 50}) { // 50 is 47 beyond 3: an index jump, not a gap of 46
        journaled_callback(r, refund_body(910000 + index, index), runs);
    }
    auto status = journal.status();
    CHECK(status.missing == 1 && status.index_jumps == 1 && status.unfinished == 0 && status.open_conflicts == 0);
    CHECK(status.resolved == 0 && status.unrecoverable == 0 && status.numbering == 1 && status.needs_attention());

    std::string jumps = journal.report(SP_JOURNAL_REPORT_INDEX_JUMPS);
    CHECK(jumps.front() == '[' && jumps.find(R"("kind":"jump")") != std::string::npos);
    CHECK(jumps.find(R"("index":50,)") != std::string::npos && jumps.find(R"("previous_highest":3,)") != std::string::npos);
    int64_t id = first_id(jumps);
    for (auto kind : {SP_JOURNAL_REPORT_INDEX_JUMPS, SP_JOURNAL_REPORT_CONFLICTS, SP_JOURNAL_REPORT_RESOLUTIONS,
                      SP_JOURNAL_REPORT_UNRECOVERABLE}) {
        CHECK(journal.report(kind, true, 0) == "[]");
    }
    auto bad_kind = failure([&] { journal.report(static_cast<sp_journal_report_kind>(99)); });
    CHECK(bad_kind.status() == SP_ERR_INVALID_ARGUMENT && bad_kind.field() == "kind");
    CHECK(failure([&] { journal.accept_jump(id, ""); }).field() == "note");
    CHECK(failure([&] { journal.accept_jump(id, std::string_view("ok\0hidden", 9)); }).field() == "note");
    journal.accept_jump(id, "the service moved its numbering");
    CHECK(journal.status().index_jumps == 0 && journal.report(SP_JOURNAL_REPORT_INDEX_JUMPS) == "[]");
    CHECK(journal.report(SP_JOURNAL_REPORT_INDEX_JUMPS, true).find(R"("decision":"accepted")") != std::string::npos);
    CHECK(failure([&] { journal.accept_jump(id, "again"); }).field() == "id");
    CHECK(failure([&] { journal.jump_is_gap(id, "too late"); }).field() == "id");

    CHECK(failure([&] { journal.resolve(2, 51, "beyond"); }).field() == "range");
    CHECK(journal.resolve(2, 2, "the service confirms no event 2") == 1);
    status = journal.status();
    CHECK(status.missing == 0 && status.resolved == 1 && !status.needs_attention());
    CHECK(journal.report(SP_JOURNAL_REPORT_RESOLUTIONS).find(R"("note":"the service confirms no event 2")") !=
          std::string::npos);

    auto refused = journaled_callback(r, other_session(refund_body(910001, 1)), runs);
    CHECK(refused.first == 409 && journal.status().open_conflicts == 1);
    std::string conflicts = journal.report(SP_JOURNAL_REPORT_CONFLICTS);
    CHECK(conflicts.find(R"("differing":["gameSessionId: first 5, now 6"])") != std::string::npos);
    CHECK(failure([&] { journal.resolve_conflict(first_id(conflicts) + 1, "no such"); }).field() == "id");
    journal.resolve_conflict(first_id(conflicts), "session 6 was a test by the service");
    CHECK(journal.status().open_conflicts == 0 && journal.report(SP_JOURNAL_REPORT_CONFLICTS) == "[]");

    CHECK(failure([&] { journal.renumber(-1, "negative"); }).field() == "first_index");
    CHECK(journal.renumber(1, "the service restarted its numbering") == 2);
    status = journal.status();
    CHECK(status.numbering == 2 && status.missing == 0 && !status.highest_index);
}

void journal_unfinished_delivery_closed_by_hand() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    const std::string body = refund_body(900705, 5);
    {
        auto event = r.parse(body);
        CHECK(event.begin().attempt == 1);
        event.abandon();
    }
    CHECK(journal.status().unfinished == 1 && journal.status().needs_attention());
    CHECK(failure([&] { journal.close_unfinished(5, ""); }).field() == "note");
    CHECK(failure([&] { journal.close_unfinished(5, std::string_view("ok\0hidden", 9)); }).field() == "note");
    for (int64_t index : {int64_t{4}, int64_t{6}, int64_t{-1}, INT64_MAX, INT64_MIN}) {
        auto none = failure([&] { journal.close_unfinished(index, "nothing there"); });
        CHECK(none.status() == SP_ERR_INVALID_ARGUMENT && none.field() == "index");
    }
    CHECK(journal.status().unfinished == 1); // nothing refused changed anything
    CHECK(journal.close_unfinished(5, "refunded by hand, ticket 4411") == 1);
    auto status = journal.status();
    CHECK(status.unfinished == 0 && !status.needs_attention());
    std::string resolutions = journal.report(SP_JOURNAL_REPORT_RESOLUTIONS);
    CHECK(resolutions.find(R"("first":5,"last":5,"closed":0,)") != std::string::npos);
    CHECK(resolutions.find("refunded by hand, ticket 4411") != std::string::npos);
    CHECK(failure([&] { journal.close_unfinished(5, "again"); }).field() == "index");
    auto event = r.parse(body);
    auto claim = event.begin();
    CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 2);
    event.reply(true);
    event.finish();
    status = journal.status();
    CHECK(status.unfinished == 0 && status.handled == 1);
}

void journal_backup_answers_a_repeat_and_never_replaces_a_file() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    auto first = journaled_callback(r, refund_body(900900, 1), runs, false);
    const std::string dest = (dir.path() / "backup.db").string();
    journal.backup(dest);
    CHECK((std::filesystem::status(dest).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    {
        slotpartner::Journal copy(dir.url("backup.db"));
        const auto from_copy = journaled(copy);
        CHECK(journaled_callback(from_copy, refund_body(900900, 1), runs) == first);
        CHECK(runs == 1); // answered from the copy, nothing ran
        CHECK(copy.status().handled == 1 && copy.status().replayed == 1);
    }
    const auto size = std::filesystem::file_size(dest);
    journaled_callback(r, refund_body(900901, 2), runs);
    auto exists = failure([&] { journal.backup(dest); });
    CHECK(exists.status() == SP_ERR_INVALID_ARGUMENT && exists.field() == "dest");
    CHECK(std::string(exists.what()).find("exists") != std::string::npos);
    CHECK(std::filesystem::file_size(dest) == size);
    for (std::string_view bad : {std::string_view("ok\0hidden.db", 12), std::string_view(""),
                                 std::string_view("/nonexistent-folder/backup.db")}) {
        CHECK(failure([&] { journal.backup(bad); }).field() == "dest");
    }
}

/// The lines of a text file, each without its line end (CRLF or LF).
std::vector<std::string> lines_of(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') {
            line.pop_back();
        }
        lines.push_back(line);
    }
    return lines;
}

void journal_export_for_reconciliation() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    const int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count() -
                           1000;
    journaled_callback(r, refund_body(900001, 1), runs);
    journaled_callback(r, fixture("payout.json"), runs, false);
    const auto csv = dir.path() / "october.csv";
    CHECK(journal.export_file(csv.string(), before, INT64_MAX) == 2);
    auto lines = lines_of(csv);
    CHECK(lines.size() == 3);
    CHECK(lines[0] == "index,key,event,transactionId,playerIdentifier,playerPartnerIdentifier,moneyWon,coinsWon,isMoney,"
                      "currencyISO4217,gameSessionId,outcome,errorMessage,state,attempts,first_delivery,last_update,finished");
    // The refund: no amount, no currency. The payout: its amount, failure and message.
    CHECK(lines[1].rfind("1,gameSessionBuyRefund:900001,gameSessionBuyRefund,900001,p-1,,,,,,5,success,,done,1,", 0) == 0);
    CHECK(lines[2].rfind("42,jackpotPayout:900002,jackpotPayout,900002,svc-player-1001,partner-42,150000,0,true,EUR,5552,"
                         "failure,refused run 2,done,1,",
                         0) == 0);
    const auto jsonl = dir.path() / "october.jsonl";
    CHECK(journal.export_file(jsonl.string(), before, INT64_MAX, SP_EXPORT_JSONL) == 2);
    auto objects = lines_of(jsonl);
    CHECK(objects.size() == 2 && objects[0].find(R"("moneyWon":null)") != std::string::npos);
    CHECK(objects[1].find(R"("moneyWon":150000,"coinsWon":0,"isMoney":true,"currencyISO4217":"EUR")") != std::string::npos);
    CHECK(journal.export_file((dir.path() / "before.csv").string(), 0, before) == 0);
    CHECK(failure([&] { journal.export_file(csv.string(), 0, INT64_MAX); }).field() == "path");
    CHECK(failure([&] { journal.export_file((dir.path() / "no/such.csv").string(), 0, INT64_MAX); }).field() == "path");
    CHECK(failure([&] { journal.export_file((dir.path() / "x.csv").string(), 0, INT64_MAX, static_cast<sp_export_format>(3)); })
              .field() == "format");
    CHECK(failure([&] { journal.export_file((dir.path() / "x.csv").string(), 5, 5); }).field() == "until_ms");
    CHECK(!std::filesystem::exists(dir.path() / "x.csv"));
}

/// Runs `sql` on the SQLite file at `path` from another process (python3): a second copy of
/// SQLite in this one would release the library's locks on the file when it closed it.
bool sql_on(const std::filesystem::path &path, const std::string &sql) {
    const std::string command =
        "python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1], isolation_level=None).execute(sys.argv[2])' '" +
        path.string() + "' '" + sql + "'";
    return std::system(command.c_str()) == 0;
}

/// The rows of the query `sql` on the SQLite file at `path`, read from another process (python3,
/// as sql_on): one line a row, its columns joined by '|', NULL as "None". `sql` holds no quote.
std::string sql_rows(const std::filesystem::path &path, const std::string &sql) {
    const std::string command = "python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); "
                                "print(\"\\n\".join(\"|\".join(map(str, row)) for row in db.execute(sys.argv[2])))' '" +
                                path.string() + "' '" + sql + "'";
    std::string out;
    if (FILE *pipe = popen(command.c_str(), "r")) {
        char buffer[4096];
        for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
            out.append(buffer, n);
        }
        if (pclose(pipe) != 0) {
            return "(sqlite3 failed)";
        }
    }
    while (!out.empty() && out.back() == '\n') {
        out.pop_back();
    }
    return out;
}

const char *const CREDIT = "INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?)";

void journal_staged_statements_commit_with_the_reply() {
    TempDir dir;
    slotpartner::Journal journal(dir.url()); // the journal first: it wants a file of its own
    const auto db = dir.path() / "journal.db";
    CHECK(sql_on(db, "CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, player TEXT NOT NULL, "
                     "amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))"));
    CHECK(sql_on(db, "CREATE TABLE vals (n INTEGER PRIMARY KEY, v)"));
    const auto r = journaled(journal);
    const auto credits = [&] { return sql_rows(db, "SELECT kind, transaction_id, player, amount FROM credits ORDER BY 2"); };

    // Staged, then run by finish() with the reply.
    std::string reply;
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(970001, 1));
        CHECK(event.begin().outcome == SP_BEGIN_NEW);
        const std::string player = "p-1";
        event.stage(CREDIT, {"refund", 970001, player, 0});
        reply = std::string(event.reply(true));
        CHECK(credits().empty()); // staged, not run
        event.finish();
    }
    CHECK(credits() == "refund|970001|p-1|0");
    CHECK(journal.status().handled == 1);
    {
        // A repeat is answered from the journal and cannot stage: the credit does not run again.
        slotpartner::Event repeat = r.handle(TOKEN, "127.0.0.1", refund_body(970001, 1));
        auto claim = repeat.begin();
        CHECK(claim.outcome == SP_BEGIN_DONE && claim.reply == reply);
        auto refused = failure([&] { repeat.stage(CREDIT, {"refund", 970001, "p-1", 0}); });
        CHECK(refused.status() == SP_ERR_INVALID_ARGUMENT && refused.field() == "event" && refused.http_status() == 500);
        repeat.finish();
    }
    CHECK(sql_rows(db, "SELECT COUNT(*) FROM credits") == "1");

    // Stage before begin(): refused naming the event, nothing staged.
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(970002, 2));
        auto early = failure([&] { event.stage(CREDIT, {"refund", 970002, "p-2", 0}); });
        CHECK(early.status() == SP_ERR_INVALID_ARGUMENT && early.field() == "event");
        CHECK(std::string(early.what()).find("not begun") != std::string::npos);
        CHECK(event.begin().outcome == SP_BEGIN_NEW);
        // Transaction control is the journal's; text must be UTF-8.
        CHECK(failure([&] { event.stage("COMMIT"); }).field() == "sql");
        CHECK(failure([&] { event.stage(" /* x */ rollback"); }).field() == "sql");
        CHECK(failure([&] { event.stage(""); }).field() == "sql");
        CHECK(failure([&] { event.stage("INSERT INTO vals (v) VALUES (?)", {std::string_view("\xff", 1)}); }).field() ==
              "params[0].bytes");
        event.reply(true);
        event.finish();
    }
    CHECK(sql_rows(db, "SELECT COUNT(*) FROM credits") == "1");

    // A failing statement: finish() throws naming it, nothing is stored, the claim stays held.
    const std::string body = refund_body(970003, 3);
    for (int attempt = 1; attempt <= 2; attempt++) {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", body);
        auto claim = event.begin();
        CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == attempt);
        if (attempt == 1) {
            event.stage("INSERT INTO no_such_table (x) VALUES (?)", {1});
        }
        event.stage(CREDIT, {"refund", 970003, "p-3", 0});
        if (attempt == 2) {
            event.stage(CREDIT, {"refund", 970003, "p-3", 0}); // the same row again
        }
        event.reply(true);
        auto e = failure([&] { event.finish(); });
        CHECK(e.status() == SP_ERR_JOURNAL && e.http_status() == 503);
        CHECK(e.field() == (attempt == 1 ? "statements[0]" : "statements[1]"));
        CHECK(std::string(e.what()).find(attempt == 1 ? "no such table" : "UNIQUE constraint failed") != std::string::npos);
        CHECK(credits() == "refund|970001|p-1|0"); // the staged credit rolled back with the rest
        auto status = journal.status();
        CHECK(status.handled == 2 && status.in_progress == 1); // nothing stored, the claim held
        CHECK(failure([&] { event.finish(); }).field() == e.field()); // still staged
        event.abandon(); // drops them
    }
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", body);
        CHECK(event.begin().attempt == 3);
        const std::string player = "p-3"; // outlives stage(), as the views must
        std::vector<slotpartner::SqlValue> params{"refund", int64_t{970003}, player, 30};
        event.stage(CREDIT, params);
        event.reply(true);
        event.finish();
    }
    CHECK(credits() == "refund|970001|p-1|0\nrefund|970003|p-3|30");

    // Every kind of value, stored exactly; the views live until stage() copies them.
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(970004, 4));
        CHECK(event.begin().outcome == SP_BEGIN_NEW);
        const char *absent = nullptr;
        const std::vector<uint8_t> bytes{0x00, 0x01, 0xfe, 0xff};
        const char *const insert = "INSERT INTO vals (n, v) VALUES (?, ?)";
        event.stage(insert, {1, nullptr});
        event.stage(insert, {2, std::nullopt});
        event.stage(insert, {3, absent});
        event.stage(insert, {4, INT64_MIN});
        event.stage(insert, {5, INT64_MAX});
        event.stage(insert, {6, uint32_t{4294967295U}});
        event.stage(insert, {7, ""});
        event.stage(insert, {8, "Zo\xC3\xAB pays 10 \xE2\x82\xAC"});
        event.stage(insert, {9, slotpartner::SqlValue::blob(bytes)});
        event.stage(insert, {10, slotpartner::SqlValue::blob(std::string_view("a\0b", 3))});
        event.stage(insert, {11, slotpartner::SqlValue::blob(nullptr, 0)});
        event.stage(insert, {12, slotpartner::SqlValue()});
        event.reply(true);
        event.finish();
    }
    CHECK(sql_rows(db, "SELECT n, typeof(v), hex(v) FROM vals ORDER BY n") ==
          "1|null|\n2|null|\n3|null|\n4|integer|2D39323233333732303336383534373735383038\n"
          "5|integer|39323233333732303336383534373735383037\n6|integer|34323934393637323935\n7|text|\n"
          "8|text|5A6FC3AB207061797320313020E282AC\n9|blob|0001FEFF\n10|blob|610062\n11|blob|\n12|null|");

    // Moved from: refused naming the event.
    slotpartner::Event moved = r.handle(TOKEN, "127.0.0.1", refund_body(970005, 5));
    slotpartner::Event taken = std::move(moved);
    CHECK(failure([&] { moved.stage("DELETE FROM credits"); }).field() == "event");
    CHECK(sql_rows(db, "SELECT COUNT(*) FROM credits") == "2");
}

constexpr uint64_t DAY_MS = 86400000;

/// Moves the finishing time of the delivery of `transaction_id` back by `days`.
bool age(const TempDir &dir, int64_t transaction_id, int64_t days) {
    return sql_on(dir.path() / "journal.db", "UPDATE sp_journal_delivery SET finished_ms = finished_ms - " +
                                                 std::to_string(days * static_cast<int64_t>(DAY_MS)) +
                                                 " WHERE transaction_id = " + std::to_string(transaction_id));
}

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void journal_retention_and_vitals() {
    TempDir dir;
    slotpartner::Journal journal(dir.url());
    const auto r = journaled(journal);
    int runs = 0;
    auto first = journaled_callback(r, refund_body(960001, 1), runs);
    journaled_callback(r, refund_body(960002, 2), runs);
    auto before = journal.vitals();
    CHECK(before.pruned == 0 && before.forgotten == 0 && !before.oldest_gap_ms);
    CHECK(before.size_bytes.value_or(0) > 0 && before.oldest_record_ms.has_value());
    CHECK(before.last_delivery_ms && std::llabs(now_ms() - *before.last_delivery_ms) < 60000);
    CHECK(age(dir, 960001, 100));
    auto report = journal.prune(slotpartner::PruneOptions(90 * DAY_MS));
    CHECK(report.compacted == 1 && report.forgotten == 0 && report.refused_removed == 0 &&
          report.conflicts_removed == 0 && report.batches == 2 && report.complete);
    CHECK(journal.vitals().pruned == 1);
    auto again = journal.prune(slotpartner::PruneOptions(90 * DAY_MS).pause_ms(0).max_time_ms(60000));
    CHECK(again.compacted == 0 && again.batches == 1 && again.complete);
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(960001, 1));
        CHECK(!event.reply_pruned()); // not begun
        auto claim = event.begin();
        CHECK(claim.outcome == SP_BEGIN_NEW && claim.attempt == 2 && event.reply_pruned() && event.differing().empty());
        event.reply(true);
        event.finish();
        CHECK(event.reply_pruned()); // kept after the claim settles
    }
    CHECK(journaled_callback(r, refund_body(960001, 1), runs) == first);
    {
        slotpartner::Event young = r.handle(TOKEN, "127.0.0.1", refund_body(960002, 2));
        CHECK(young.begin().outcome == SP_BEGIN_DONE && !young.reply_pruned());
    }
    // Compact records forgotten: a repeat is a new delivery. (The cutoffs count from the newest
    // stored reply at the latest: a young one is there.)
    journaled_callback(r, refund_body(960004, 3), runs);
    CHECK(age(dir, 960001, 400) && age(dir, 960002, 400));
    report = journal.prune(slotpartner::PruneOptions(90 * DAY_MS).forget_older_than_ms(365 * DAY_MS).batch(1));
    CHECK(report.compacted == 2 && report.forgotten == 2 && report.batches == 3);
    auto vitals = journal.vitals();
    CHECK(vitals.pruned == 3 && vitals.forgotten == 2);
    {
        slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(960002, 2));
        CHECK(event.begin().attempt == 1 && !event.reply_pruned());
    }
    // Careless options, each named; the gaps' ages.
    CHECK(failure([&] { journal.prune(slotpartner::PruneOptions(DAY_MS - 1)); }).field() == "older_than");
    CHECK(failure([&] { journal.prune(slotpartner::PruneOptions(DAY_MS).forget_older_than_ms(DAY_MS)); }).field() ==
          "forget_older_than");
    CHECK(failure([&] { journal.prune(slotpartner::PruneOptions(DAY_MS).batch(100001)); }).field() == "batch");
    CHECK(failure([&] { journal.prune(slotpartner::PruneOptions(DAY_MS).pause_ms(60001)); }).field() == "pause");
    journaled_callback(r, refund_body(960005, 5), runs);
    CHECK((journal.missing_older_than(0) == std::vector<slotpartner::IndexRange>{{4, 4}}));
    CHECK(journal.missing_older_than(3600000).empty());
    CHECK(sql_on(dir.path() / "journal.db", "UPDATE sp_journal_runs SET since_ms = since_ms - 7200000 WHERE lo = 5"));
    CHECK((journal.missing_older_than(3600000, 1) == std::vector<slotpartner::IndexRange>{{4, 4}}));
    auto gap = journal.vitals().oldest_gap_ms;
    CHECK(gap && std::llabs(now_ms() - *gap - 7200000) < 120000);
    CHECK(failure([&] { journal.missing_older_than(0, 0); }).field() == "limit");
    CHECK(!slotpartner::Event(nullptr).reply_pruned());
}

void journal_retention_setting() {
    for (uint64_t ms : {uint64_t{1}, DAY_MS - 1, UINT64_MAX}) {
        CHECK(failure([&] { slotpartner::JournalConfig("sqlite:/nonexistent/journal.db").retention_ms(ms); }).field() ==
              "retention");
    }
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).retention_ms(90 * DAY_MS));
    const auto r = journaled(journal);
    int runs = 0;
    journaled_callback(r, refund_body(962001, 1), runs);
    CHECK(age(dir, 962001, 100));
    std::this_thread::sleep_for(std::chrono::milliseconds(1100)); // a batch at most once a second
    journaled_callback(r, refund_body(962002, 2), runs);
    CHECK(journal.vitals().pruned == 1);
    slotpartner::Event event = r.handle(TOKEN, "127.0.0.1", refund_body(962001, 1));
    CHECK(event.begin().attempt == 2 && event.reply_pruned());
}

void recovery_reports_unrecoverable_indexes() {
    slotpartner::Client client(sandbox_config());
    TempDir dir;
    slotpartner::Journal journal(slotpartner::JournalConfig(dir.url()).not_found_limit(1));
    const auto r = journaled(journal);
    int runs = 0;
    journaled_callback(r, sandbox_event(client, 19), runs);
    journaled_callback(r, refund_body(900000023, 23), runs); // beyond the sandbox's 20 events
    {
        slotpartner::Recovery first(r, client);
        CHECK(recover(first, runs) == std::vector<int64_t>{20});
        auto report = first.report();
        CHECK(report.failures.size() == 2 && report.failures[0].reason == SP_RECOVERY_NOT_FOUND);
        CHECK(report.unrecoverable == 0); // counted when the recovery started
    }
    auto status = journal.status();
    CHECK(status.unrecoverable == 2 && status.missing == 2); // one 404 each is the limit here
    CHECK(journal.report(SP_JOURNAL_REPORT_UNRECOVERABLE) == "[21,22]");
    {
        slotpartner::Recovery second(r, client);
        CHECK(recover(second, runs).empty());
        auto report = second.report();
        CHECK(report.missing == 0 && report.failures.empty() && report.unrecoverable == 2);
    }
    CHECK(journal.resolve(21, 22, "the service lost events 21 and 22") == 2);
    status = journal.status();
    CHECK(status.unrecoverable == 0 && status.missing == 0 && status.resolved == 2);
    CHECK(journal.report(SP_JOURNAL_REPORT_UNRECOVERABLE) == "[]");
}

void endpoint_serves_the_whole_request() {
    TempDir dir;
    std::string settings = std::string(R"({"token":")") + TOKEN + R"(","sources":"any","journal":")" + dir.url() + R"("})";
    const slotpartner::Endpoint endpoint = slotpartner::Endpoint::from_settings(settings);
    int runs = 0;
    auto accept = [&](slotpartner::Event &event) { runs++; event.reply(true); };
    std::string payout = fixture("payout.json");
    auto first = endpoint.serve("POST", TOKEN, STAGING, std::nullopt, payout, accept);
    CHECK(first.status() == 200 && first.body() == R"({"payout":{"success":true,"errorMessage":""}})");
    auto again = endpoint.serve("POST", TOKEN, STAGING, std::nullopt, payout, accept);
    CHECK(again.status() == 200 && again.body() == first.body() && runs == 1);
    CHECK(again.log() == "repeated delivery answered from the journal");
    // A throwing logic: the claim is released, 503 with Retry-After, what() in the log.
    std::string refund = fixture("refund.json");
    auto down = endpoint.serve("POST", TOKEN, STAGING, std::nullopt, refund,
                               [](slotpartner::Event &) { throw std::runtime_error("ledger down"); });
    auto headers = down.headers();
    CHECK(down.status() == 503 && std::string(down.reason()) == "Service Unavailable");
    CHECK(!headers.empty() && headers.front().first == "Retry-After" && headers.front().second == "5");
    CHECK(down.log().find("ledger down") != std::string_view::npos);
    CHECK(down.body().find("ledger") == std::string_view::npos);
    auto redelivered = endpoint.serve("POST", TOKEN, STAGING, std::nullopt, refund, accept);
    CHECK(redelivered.status() == 200 && redelivered.log() == "attempt 2");
    // A passed-through event answered with the logic's own reply; a GET refused 405 with Allow.
    auto other = endpoint.serve("POST", TOKEN, STAGING, std::nullopt, fixture("other_event.json"),
                                [](slotpartner::Event &) { return std::string(R"({"ok":true})"); });
    CHECK(other.status() == 200 && other.body() == R"({"ok":true})");
    auto get = endpoint.serve("GET", TOKEN, STAGING, std::nullopt, "", accept);
    CHECK(get.status() == 405 && get.headers().front().first == "Allow");
    bool refused = false;
    try {
        slotpartner::Endpoint::from_settings(R"({"tokn":"x"})");
    } catch (const slotpartner::Error &e) {
        refused = std::string(e.what()).find("tokn") != std::string::npos;
    }
    CHECK(refused);
}

} // namespace

int main() {
    refund_is_read_and_answered();
    endpoint_serves_the_whole_request();
    payout_and_balance_are_read_and_answered();
    validation_errors_name_the_field_and_the_answer();
    token_and_source_are_checked();
    authenticate_alone_answers_as_handle_would();
    unreadable_index_is_handled_without_one();
    refused_balance_states_no_balance();
    forwarded_for_sources_and_tokens();
    last_error_message_passed_back();
    standalone_replies();
    receiver_is_shared_by_threads();
    journal_answers_a_repeat_with_the_first_reply();
    journal_conflict_names_the_transaction();
    journal_abandoned_and_dropped_claims_run_again();
    journal_abandoned_refund_with_another_decisive_field_names_it();
    journal_busy_and_lost_claims();
    journal_claim_at_finish_is_written_by_finish_only();
    journal_balance_refusals_and_gaps();
    journal_threads_one_new();
    journal_misuse_and_unusable_journals();
    journal_operator_functions();
    journal_unfinished_delivery_closed_by_hand();
    journal_backup_answers_a_repeat_and_never_replaces_a_file();
    journal_export_for_reconciliation();
    journal_staged_statements_commit_with_the_reply();
    journal_retention_and_vitals();
    journal_retention_setting();
    get_games_against_the_sandbox();
    recovery_recovers_claimed_events_and_a_late_delivery_once();
    recovery_events_are_claimed();
    recovery_failures_by_reason_and_a_later_healthy_run();
    recovery_fetch_settings_and_misuse();
    recovery_reports_unrecoverable_indexes();
    std::printf("cpp: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
