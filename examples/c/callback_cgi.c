/*
 * callback_cgi: a complete CGI (RFC 3875) endpoint for the service's callbacks.
 *
 * Configuration (environment):
 *   SLOTPARTNER_TOKEN    the partner token the service sends in X-Service-Token (a UUID)
 *   SLOTPARTNER_SOURCES  staging, production, any, or a comma-separated list of addresses
 *                        and CIDR ranges (default: production)
 *   SLOTPARTNER_TRUSTED_PROXIES  proxies whose X-Forwarded-For is believed (default: none)
 *   SLOTPARTNER_STRICT_INDEX     1 to refuse an event whose index is not a non-negative integer
 *                                (default: handle it with no index)
 *   SLOTPARTNER_JOURNAL  a delivery journal (sqlite:PATH, or postgres://... across hosts): each
 *                        refund and payout is handled once, a repeated delivery is answered with
 *                        the first reply byte for byte, and a refused one is recorded as seen.
 *                        It is opened only for a request that passed the source and token
 *                        checks (sp_receiver_authenticate), so that a caller without the token
 *                        never makes it connect; a journal that cannot be opened is answered 503
 *                        with a body naming nothing of it (its URL is in the log line only)
 *   SLOTPARTNER_WALLET   a directory standing in for the partner's ledger: one file per credited
 *                        transaction, created only if absent, so a transactionId is never
 *                        credited twice (the unique key exactly-once needs across a crash)
 * Request (set by the web server): REQUEST_METHOD, CONTENT_LENGTH, HTTP_X_SERVICE_TOKEN,
 * REMOTE_ADDR, HTTP_X_FORWARDED_FOR, and the body on stdin.
 *
 * Answers: 405 for a method other than POST; 401 for a missing or wrong token; 403 for a source
 * not allowed; 413 for a body over the limit; 400 with a JSON error body for a body that is not
 * JSON, not an object, or names an unknown event; 200 with the event's wrapper, success false and
 * the field-naming errorMessage for a known event with invalid fields; 200 with success true for
 * a valid event; a refused balance query is answered 500 with a body that states no balance. The
 * demo business logic accepts every valid event (but knows no player called "unknown-player")
 * and logs one line per event to stderr; replace handle_event() with yours.
 */
#define _POSIX_C_SOURCE 200809L /* open, write, fsync, unlink */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slotpartner.h"

#define MAX_BODY_BYTES 65536u

static const char *reason_phrase(unsigned status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

static int respond(unsigned status, const char *extra_header, const char *body, size_t len) {
    printf("Status: %u %s\r\n", status, reason_phrase(status));
    if (extra_header != NULL) {
        printf("%s\r\n", extra_header);
    }
    printf("Content-Type: application/json; charset=utf-8\r\n\r\n");
    fwrite(body, 1, len, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int respond_text(unsigned status, const char *extra_header, const char *body) {
    return respond(status, extra_header, body, strlen(body));
}

/* Answers with what the library says the last failure deserves (status and JSON body). */
static int respond_last_error(void) {
    uint16_t status = 500;
    sp_str body = {NULL, 0};
    if (sp_last_error_response(&status, &body) != SP_OK) {
        return respond_text(500, NULL, "{\"error\":{\"code\":\"internal_error\",\"field\":\"\",\"message\":\"no error recorded\"}}");
    }
    return respond(status, NULL, body.ptr, body.len);
}

static void log_failure(const char *what) {
    sp_str message = sp_last_error_message();
    fprintf(stderr, "callback_cgi: %s: %s\n", what, message.ptr);
}

/* The demo ledger: credits `amount` for `kind`/`transaction_id` once. The file is created only if
 * absent (O_EXCL), the ledger's unique key: a second credit of the same transaction, such as a
 * delivery run again after its worker died between the credit and sp_event_finish, finds it and
 * changes nothing. Returns 0 when credited now or before, -1 when the ledger failed. */
static int credit(const char *kind, int64_t transaction_id, int64_t amount) {
    const char *wallet = getenv("SLOTPARTNER_WALLET");
    char path[4096];
    char text[32];
    int fd = -1;
    int n = 0;
    if (wallet == NULL || *wallet == '\0') {
        return 0;
    }
    snprintf(path, sizeof path, "%s/%s-%" PRId64, wallet, kind, transaction_id);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
        return errno == EEXIST ? 0 : -1;
    }
    n = snprintf(text, sizeof text, "%" PRId64 "\n", amount);
    if (write(fd, text, (size_t)n) != n || fsync(fd) != 0) {
        close(fd);
        unlink(path);
        return -1;
    }
    return close(fd);
}

/* The demo business logic: accept every valid event, credit it, log it, and build its reply.
 * Returns SP_ERR_JOURNAL-like failure as -1 when the ledger is down (a transient failure). */
static sp_status handle_event(sp_event *event, sp_str *reply, int *ledger_down) {
    const char *player = "";
    switch (event->kind) {
    case SP_EVENT_KIND_BUY_REFUND:
        player = event->buy_refund->player_partner_identifier.ptr ? event->buy_refund->player_partner_identifier.ptr
                                                                  : event->buy_refund->player_identifier.ptr;
        fprintf(stderr, "callback_cgi: refund transaction %" PRId64 " of purchase %" PRId64 " for player %s\n",
                event->buy_refund->transaction_id, event->buy_refund->buy_transaction_id, player);
        if (credit("refund", event->buy_refund->transaction_id, 0) != 0) {
            *ledger_down = 1;
            return SP_OK;
        }
        return sp_event_reply(event, true, NULL, reply);
    case SP_EVENT_KIND_JACKPOT_PAYOUT:
        player = event->jackpot_payout->player_partner_identifier.ptr ? event->jackpot_payout->player_partner_identifier.ptr
                                                                      : event->jackpot_payout->player_identifier.ptr;
        fprintf(stderr, "callback_cgi: payout %" PRId64 " %s (minor units) of %s jackpot %s for player %s\n",
                event->jackpot_payout->money_won, event->jackpot_payout->currency_iso4217.ptr,
                event->jackpot_payout->is_primary ? "major" : "minor", event->jackpot_payout->jackpot_identifier.ptr, player);
        if (credit("payout", event->jackpot_payout->transaction_id, event->jackpot_payout->money_won) != 0) {
            *ledger_down = 1;
            return SP_OK;
        }
        return sp_event_reply(event, true, NULL, reply);
    case SP_EVENT_KIND_BALANCE_QUERY:
        player = event->balance_query->player_partner_identifier.ptr ? event->balance_query->player_partner_identifier.ptr
                                                                     : event->balance_query->player_identifier.ptr;
        fprintf(stderr, "callback_cgi: balance query for player %s\n", player);
        if (strcmp(player, "unknown-player") == 0) {
            /* No balance is stated; send it with event->reply_http_status (500 by default). */
            return sp_event_reply(event, false, "player unknown-player is not known", reply);
        }
        return sp_event_reply_balance(event, 100000, NULL, 0, reply);
    case SP_EVENT_KIND_OTHER:
    default:
        /* Not reached: the receiver refuses unknown events. */
        return sp_event_reply(event, false, "unsupported event", reply);
    }
}

/* The index, as the log shows it: the number, or why there is none. */
static void log_index(const sp_event *event) {
    if (event->has_index) {
        fprintf(stderr, "callback_cgi: index %" PRId64 "\n", event->index);
    } else if (event->index_unreadable) {
        sp_str raw = {NULL, 0};
        sp_event_field(event, "index", &raw);
        fprintf(stderr, "callback_cgi: index unreadable (%s), handled without one\n", raw.ptr ? raw.ptr : "?");
    }
}

/* Opens the journal SLOTPARTNER_JOURNAL names; NULL with the last error set when it fails. */
static sp_journal *open_journal(const char *url) {
    sp_journal_config *config = NULL;
    sp_journal *journal = NULL;
    if (sp_journal_config_new(url, &config) == SP_OK) {
        sp_journal_open(config, &journal);
    }
    sp_journal_config_free(config);
    return journal;
}

static sp_receiver *make_receiver(sp_journal *journal) {
    const char *token = getenv("SLOTPARTNER_TOKEN");
    const char *sources = getenv("SLOTPARTNER_SOURCES");
    const char *proxies = getenv("SLOTPARTNER_TRUSTED_PROXIES");
    const char *strict_index = getenv("SLOTPARTNER_STRICT_INDEX");
    sp_receiver_config *config = NULL;
    sp_receiver *receiver = NULL;
    if (sp_receiver_config_new(&config) != SP_OK) {
        return NULL;
    }
    if (sp_receiver_config_add_token(config, token) == SP_OK &&
        (sources == NULL || sp_receiver_config_set_sources(config, sources) == SP_OK) &&
        (proxies == NULL || sp_receiver_config_set_trusted_proxies(config, proxies) == SP_OK) &&
        sp_receiver_config_set_strict_index(config, strict_index != NULL && strcmp(strict_index, "1") == 0) == SP_OK &&
        (journal == NULL || sp_receiver_config_set_journal(config, journal) == SP_OK) &&
        sp_receiver_config_set_max_body_bytes(config, MAX_BODY_BYTES) == SP_OK &&
        sp_receiver_config_set_reject_unknown_events(config, true) == SP_OK) {
        sp_receiver_new(config, &receiver);
    }
    if (receiver == NULL) {
        log_failure("configuration");
    }
    sp_receiver_config_free(config);
    return receiver;
}

/* Reads the body: at most MAX_BODY_BYTES + 1 bytes, so that an oversized body is refused
 * without being read whole. Returns the number of bytes read, or -1 when the request is bad. */
static long read_body(unsigned char *buffer, size_t capacity) {
    const char *length_text = getenv("CONTENT_LENGTH");
    char *end = NULL;
    unsigned long long length = 0;
    size_t wanted = 0;
    size_t got = 0;
    if (length_text != NULL && *length_text != '\0') {
        errno = 0;
        length = strtoull(length_text, &end, 10);
        if (errno != 0 || *end != '\0' || *length_text == '-') {
            return -1;
        }
    }
    wanted = length < capacity ? (size_t)length : capacity;
    while (got < wanted) {
        size_t n = fread(buffer + got, 1, wanted - got, stdin);
        if (n == 0) {
            return -1; /* shorter than CONTENT_LENGTH */
        }
        got += n;
    }
    return (long)got;
}

static const char BUSY_BODY[] =
    "{\"error\":{\"code\":\"ledger_unavailable\",\"field\":\"\",\"message\":\"the ledger is unavailable; deliver again later\"}}";

/* Handles a valid event: with a journal, claims it first (a repeat is answered with the stored
 * reply, running nothing), and stores the reply once the ledger has the credit. */
static int answer_event(sp_event *event) {
    sp_str reply = {NULL, 0};
    sp_claim claim;
    int ledger_down = 0;
    int journaled = getenv("SLOTPARTNER_JOURNAL") != NULL && *getenv("SLOTPARTNER_JOURNAL") != '\0';
    if (journaled) {
        if (sp_event_begin(event, &claim) != SP_OK) {
            log_failure("journal");
            return respond_last_error(); /* 409 conflict, 503 busy or journal down */
        }
        if (claim.outcome == SP_BEGIN_DONE) {
            fprintf(stderr, "callback_cgi: repeated delivery answered from the journal\n");
            return respond(200, NULL, claim.reply.ptr, claim.reply.len);
        }
        if (claim.attempt > 1) {
            fprintf(stderr, "callback_cgi: attempt %" PRId64 "\n", claim.attempt);
        }
    }
    if (handle_event(event, &reply, &ledger_down) != SP_OK) {
        log_failure("reply");
        return respond_last_error();
    }
    if (ledger_down) {
        /* A transient failure: release the claim so that the next delivery runs again. */
        if (journaled) {
            sp_event_abandon(event);
        }
        return respond_text(503, "Retry-After: 5", BUSY_BODY);
    }
    if (journaled && sp_event_finish(event, NULL, 0) != SP_OK) {
        /* SP_ERR_CLAIM_LOST: the credit is made; the next delivery finds it in the ledger. */
        log_failure("journal finish");
    }
    log_index(event);
    return respond(event->reply_http_status, NULL, reply.ptr, reply.len);
}

int main(void) {
    static unsigned char body[MAX_BODY_BYTES + 1];
    const char *method = getenv("REQUEST_METHOD");
    const char *journal_url = getenv("SLOTPARTNER_JOURNAL");
    const char *token = getenv("HTTP_X_SERVICE_TOKEN");
    const char *remote_addr = getenv("REMOTE_ADDR");
    const char *forwarded_for = getenv("HTTP_X_FORWARDED_FOR");
    sp_journal *journal = NULL;
    sp_receiver *receiver = NULL;
    sp_event *event = NULL;
    long len = 0;
    int rc = 0;

    if (method == NULL || strcmp(method, "POST") != 0) {
        return respond_text(405, "Allow: POST",
                            "{\"error\":{\"code\":\"method_not_allowed\",\"field\":\"\",\"message\":\"only POST is accepted\"}}");
    }
    receiver = make_receiver(NULL); /* no journal yet: it checks the source and token first */
    if (receiver == NULL) {
        return respond_last_error();
    }
    len = read_body(body, sizeof body);
    if (len < 0) {
        sp_receiver_free(receiver);
        return respond_text(400, NULL,
                            "{\"error\":{\"code\":\"bad_request\",\"field\":\"CONTENT_LENGTH\",\"message\":\"CONTENT_LENGTH is invalid or the body is shorter\"}}");
    }
    /* The source and token first: a request refused here (401, 403) never reaches the journal. */
    if (sp_receiver_authenticate(receiver, token, remote_addr, forwarded_for) != SP_OK) {
        log_failure("refused");
        sp_receiver_free(receiver);
        return respond_last_error();
    }
    if (journal_url != NULL && *journal_url != '\0') {
        /* Opened only now, for a request that passed: its URL goes to the log, never to the
         * caller (the library's answer says only that the partner is temporarily unavailable). */
        sp_receiver_free(receiver);
        journal = open_journal(journal_url);
        if (journal == NULL) {
            log_failure("journal");
            return respond_last_error(); /* 503: the service delivers again later */
        }
        receiver = make_receiver(journal);
        sp_journal_free(journal); /* the receiver keeps it open */
        if (receiver == NULL) {
            return respond_last_error();
        }
    }
    if (sp_receiver_handle(receiver, token, remote_addr, forwarded_for, body, (size_t)len, &event) != SP_OK) {
        log_failure("refused");
        rc = respond_last_error();
    } else {
        rc = answer_event(event);
    }
    sp_event_free(event);
    sp_receiver_free(receiver);
    return rc;
}
