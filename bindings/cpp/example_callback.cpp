// example_callback: handles one callback body from stdin with the C++ wrapper and prints the
// HTTP status and the JSON reply, as a web framework's handler would send them: replies with
// Event::reply_http_status() (200; 500 for a refused balance query, which states no balance),
// refusals with Error::http_status(). The demo knows no player called "unknown-player".
//
// With SLOTPARTNER_JOURNAL (sqlite:PATH or postgres://...) each delivery is claimed first: a
// repeat is answered 200 with the first reply, byte for byte, and runs nothing; a new one runs
// the logic, then Event::finish() stores its reply; a conflict is answered 409, a busy claim or a
// failing journal 503, with the library's answer. The journal is opened only once the source and
// token passed (Receiver::authenticate()): a caller without the token never makes it connect.
//
//   SLOTPARTNER_TOKEN=<uuid> [SLOTPARTNER_JOURNAL=sqlite:PATH] example_callback TOKEN_HEADER REMOTE_ADDR < body.json
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include "slotpartner.hpp"

int main(int argc, char **argv) {
    if (argc != 3 || std::getenv("SLOTPARTNER_TOKEN") == nullptr) {
        std::cerr << "usage: SLOTPARTNER_TOKEN=<uuid> example_callback TOKEN_HEADER REMOTE_ADDR < body.json\n";
        return 2;
    }
    std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    try {
        slotpartner::ReceiverConfig config;
        config.add_token(std::getenv("SLOTPARTNER_TOKEN")).sources("any").reject_unknown_events(true);
        const char *journal_url = std::getenv("SLOTPARTNER_JOURNAL");
        const bool journaled = journal_url != nullptr && *journal_url != '\0';
        std::optional<slotpartner::Receiver> receiver(std::in_place, config); // no journal yet
        try {
            // The source and token first: a request refused here (401, 403) never reaches the
            // journal, which is opened only now, for a request that passed.
            receiver->authenticate(argv[1], argv[2]);
            if (journaled) {
                try {
                    slotpartner::Journal journal(journal_url);
                    receiver.emplace(config.journal(journal)); // the receiver keeps it open
                } catch (const slotpartner::Error &down) { // 503, naming nothing of the journal
                    std::cerr << "journal: " << down.what() << "\n"; // its URL: for the log only
                    std::cout << down.http_status() << " " << down.response_body() << "\n";
                    return 0;
                }
            }
            slotpartner::Event event = receiver->handle(argv[1], argv[2], body);
            if (journaled) {
                // Throws Error for a conflict (409), a busy claim or a failing journal (503).
                slotpartner::Claim claim = event.begin();
                if (claim.outcome == SP_BEGIN_DONE) {
                    std::cerr << "repeated delivery answered from the journal\n";
                    std::cout << 200 << " " << claim.reply << "\n"; // run nothing
                    return 0;
                }
                if (claim.attempt > 1) {
                    std::cerr << "attempt " << claim.attempt << "\n";
                }
            }
            std::string_view reply;
            switch (event.kind()) {
            case SP_EVENT_KIND_JACKPOT_PAYOUT: {
                auto payout = event.jackpot_payout();
                std::cerr << "credit " << payout.money_won << " " << payout.currency_iso4217 << "\n";
                reply = event.reply(true);
                break;
            }
            case SP_EVENT_KIND_BALANCE_QUERY:
                if (event.balance_query().player_partner_identifier == std::optional<std::string_view>("unknown-player")) {
                    reply = event.reply(false, "player unknown-player is not known");
                } else {
                    reply = event.reply_balance(100000);
                }
                break;
            default:
                reply = event.reply(true);
            }
            if (journaled) {
                try {
                    event.finish(); // stores the reply once the work is committed
                } catch (const slotpartner::Error &lost) {
                    // SP_ERR_CLAIM_LOST: the work is done; the next delivery finds it in the ledger.
                    std::cerr << "journal finish: " << lost.what() << "\n";
                }
            }
            if (event.index_unreadable()) {
                std::cerr << "index unreadable, handled without one\n";
            }
            std::cout << event.reply_http_status() << " " << reply << "\n";
        } catch (const slotpartner::Error &refused) {
            std::cerr << refused.status_name() << ": " << refused.what() << "\n";
            std::cout << refused.http_status() << " " << refused.response_body() << "\n";
        }
    } catch (const slotpartner::Error &e) {
        std::cerr << "configuration: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
