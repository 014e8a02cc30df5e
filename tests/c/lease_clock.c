/* lease_clock: one worker's side of tests/c/lease_clock.sh, which runs it as two processes on
 * one SQLite journal, the second under tests/c/clock_shim.c with its wall clock stepped.
 *
 * Usage:
 *   lease_clock hold JOURNAL_URL LEASE_MS
 *       claims the test refund with a lease of LEASE_MS and prints "claimed attempt N"; then holds
 *       the claim until its standard input closes, and finishes it: prints "finish: STATUS"
 *       (SP_OK, or SP_ERR_CLAIM_LOST when another delivery took the claim over meanwhile).
 *   lease_clock deliver JOURNAL_URL
 *       delivers the same refund again, without waiting for a claim another worker holds, and
 *       prints what the journal answered: "busy", "new attempt N" (the claim was taken over; the
 *       reply is stored: "finished"), "done" (the stored reply), or "error: STATUS: MESSAGE".
 * Exits 0 when the library answered as printed, 1 on a failure of the program itself. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
#define BODY                                                                                           \
    "{\"event\":\"gameSessionBuyRefund\",\"index\":1,\"gameSessionIdentifier\":\"gs-45\","            \
    "\"playerIdentifier\":\"player-45\",\"transactionId\":450045,\"buyTransactionId\":450044,"        \
    "\"gameSessionId\":45,\"partnerGameRequestIdentifier\":\"req-45\",\"gameId\":12,\"isMobile\":false}"

static int fail(const char *what) {
    fprintf(stderr, "lease_clock: %s: %s\n", what, sp_last_error_message().ptr);
    return 1;
}

/* A receiver journaling into `url` with a lease of `lease_ms` and no busy wait. */
static sp_receiver *open_receiver(const char *url, uint64_t lease_ms) {
    sp_journal_config *journal_config = NULL;
    sp_journal *journal = NULL;
    sp_receiver_config *config = NULL;
    sp_receiver *receiver = NULL;
    if (sp_journal_config_new(url, &journal_config) != SP_OK ||
        sp_journal_config_set_lease_ms(journal_config, lease_ms) != SP_OK ||
        sp_journal_config_set_busy_wait_ms(journal_config, 0) != SP_OK ||
        sp_journal_open(journal_config, &journal) != SP_OK || sp_receiver_config_new(&config) != SP_OK ||
        sp_receiver_config_add_token(config, TOKEN) != SP_OK || sp_receiver_config_set_sources(config, "any") != SP_OK ||
        sp_receiver_config_set_journal(config, journal) != SP_OK || sp_receiver_new(config, &receiver) != SP_OK) {
        receiver = NULL;
    }
    sp_journal_config_free(journal_config);
    sp_journal_free(journal); /* the receiver keeps it open */
    sp_receiver_config_free(config);
    return receiver;
}

static sp_event *deliver(const sp_receiver *receiver) {
    sp_event *event = NULL;
    if (sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)BODY, strlen(BODY), &event) != SP_OK) {
        return NULL;
    }
    return event;
}

static int hold(const char *url, uint64_t lease_ms) {
    sp_receiver *receiver = open_receiver(url, lease_ms);
    sp_event *event = NULL;
    sp_claim claim;
    sp_str reply = {NULL, 0};
    sp_status status;
    if (receiver == NULL) {
        return fail("open the journal");
    }
    if ((event = deliver(receiver)) == NULL || sp_event_begin(event, &claim) != SP_OK ||
        sp_event_reply(event, true, NULL, &reply) != SP_OK) {
        sp_event_free(event);
        sp_receiver_free(receiver);
        return fail("claim the refund");
    }
    printf("claimed attempt %" PRId64 "\n", claim.attempt);
    fflush(stdout);
    while (getchar() != EOF) {
    }
    status = sp_event_finish(event, NULL, 0);
    printf("finish: %s\n", sp_status_name(status));
    sp_event_free(event);
    sp_receiver_free(receiver);
    return 0;
}

static int deliver_again(const char *url) {
    sp_receiver *receiver = open_receiver(url, 30000);
    sp_event *event = NULL;
    sp_claim claim;
    sp_str reply = {NULL, 0};
    sp_status status;
    if (receiver == NULL) {
        return fail("open the journal");
    }
    if ((event = deliver(receiver)) == NULL) {
        sp_receiver_free(receiver);
        return fail("handle the refund");
    }
    status = sp_event_begin(event, &claim);
    if (status == SP_ERR_BUSY) {
        printf("busy\n");
    } else if (status != SP_OK) {
        printf("error: %s: %s\n", sp_status_name(status), sp_last_error_message().ptr);
    } else if (claim.outcome == SP_BEGIN_DONE) {
        printf("done\n");
    } else if (claim.outcome == SP_BEGIN_NEW) {
        printf("new attempt %" PRId64 "\n", claim.attempt);
        if (sp_event_reply(event, true, NULL, &reply) != SP_OK || sp_event_finish(event, NULL, 0) != SP_OK) {
            sp_event_free(event);
            sp_receiver_free(receiver);
            return fail("finish the refund");
        }
        printf("finished\n");
    } else {
        printf("not journaled\n");
    }
    sp_event_free(event);
    sp_receiver_free(receiver);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "hold") == 0) {
        return hold(argv[2], strtoull(argv[3], NULL, 10));
    }
    if (argc == 3 && strcmp(argv[1], "deliver") == 0) {
        return deliver_again(argv[2]);
    }
    fprintf(stderr, "usage: lease_clock hold JOURNAL_URL LEASE_MS | lease_clock deliver JOURNAL_URL\n");
    return 2;
}
