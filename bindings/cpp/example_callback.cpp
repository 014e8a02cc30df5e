// example_callback: handles one callback body from stdin with the C++ wrapper and prints the
// HTTP status and the JSON reply, as a web framework's handler would send them.
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
            switch (event.kind()) {
            case SP_EVENT_KIND_JACKPOT_PAYOUT: {
                auto payout = event.jackpot_payout();
                std::cerr << "credit " << payout.money_won << " " << payout.currency_iso4217 << "\n";
                std::cout << "200 " << event.reply(true) << "\n";
                break;
            }
            case SP_EVENT_KIND_BALANCE_QUERY:
                std::cout << "200 " << event.reply_balance(100000) << "\n";
                break;
            default:
                std::cout << "200 " << event.reply(true) << "\n";
            }
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
