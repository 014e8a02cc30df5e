// example_callback: one callback through slotpartner::Endpoint, as a web framework's handler
// would serve it: the body on stdin, the X-Service-Token header and the peer address as
// arguments; prints "STATUS BODY" (the headers to send too are in Exchange::headers()) and logs
// to stderr. Settings from SLOTPARTNER_TOKEN, SLOTPARTNER_JOURNAL and the rest of SLOTPARTNER_*.
// The demo ledger credits every valid event and knows no player called "unknown-player".
//
//   SLOTPARTNER_TOKEN=<uuid> [SLOTPARTNER_JOURNAL=sqlite:PATH] example_callback TOKEN_HEADER REMOTE_ADDR < body.json
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>

#include "slotpartner.hpp"

// The business logic: builds the event's reply; throwing would answer 503 (the service retries).
static void handle(slotpartner::Event &event) {
    switch (event.kind()) {
    case SP_EVENT_KIND_JACKPOT_PAYOUT: {
        auto payout = event.jackpot_payout();
        std::cerr << "credit " << payout.money_won << " " << payout.currency_iso4217 << "\n";
        event.reply(true);
        break;
    }
    case SP_EVENT_KIND_BALANCE_QUERY:
        if (event.balance_query().player_partner_identifier == std::optional<std::string_view>("unknown-player")) {
            event.reply(false, "player unknown-player is not known");
        } else {
            event.reply_balance(100000);
        }
        break;
    default:
        event.reply(true);
    }
    if (event.index_unreadable()) std::cerr << "index unreadable, handled without one\n";
}

int main(int argc, char **argv) {
    if (argc != 3) {
        std::cerr << "usage: SLOTPARTNER_TOKEN=<uuid> example_callback TOKEN_HEADER REMOTE_ADDR < body.json\n";
        return 2;
    }
    setenv("SLOTPARTNER_SOURCES", "any", 0);               // the demo answers any address
    setenv("SLOTPARTNER_REJECT_UNKNOWN_EVENTS", "1", 0);   // and knows no other event: 400
    std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    try {
        static const slotpartner::Endpoint endpoint = slotpartner::Endpoint::from_environment();
        slotpartner::Exchange answer = endpoint.serve("POST", argv[1], argv[2], std::nullopt, body, handle);
        if (!answer.log().empty()) std::cerr << answer.log() << "\n";
        std::cout << answer.status() << " " << answer.body() << "\n";
    } catch (const slotpartner::Error &e) {
        std::cerr << "configuration: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
