// example_callback: handles one callback body from stdin with the C++ wrapper and prints the
// HTTP status and the JSON reply, as a web framework's handler would send them: replies with
// Event::reply_http_status() (200; 500 for a refused balance query, which states no balance),
// refusals with Error::http_status(). The demo knows no player called "unknown-player".
//
//   SLOTPARTNER_TOKEN=<uuid> example_callback TOKEN_HEADER REMOTE_ADDR < body.json
#include <cstdlib>
#include <iostream>
#include <iterator>
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
        const slotpartner::Receiver receiver(config);
        try {
            slotpartner::Event event = receiver.handle(argv[1], argv[2], body);
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
