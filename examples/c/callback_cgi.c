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
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slotpartner.h"

#define MAX_BODY_BYTES 65536u

static const char *reason_phrase(unsigned status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
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

/* The demo business logic: accept every valid event, log it, and build its reply. */
static sp_status handle_event(sp_event *event, sp_str *reply) {
    const char *player = "";
    switch (event->kind) {
    case SP_EVENT_KIND_BUY_REFUND:
        player = event->buy_refund->player_partner_identifier.ptr ? event->buy_refund->player_partner_identifier.ptr
                                                                  : event->buy_refund->player_identifier.ptr;
        fprintf(stderr, "callback_cgi: refund transaction %" PRId64 " of purchase %" PRId64 " for player %s\n",
                event->buy_refund->transaction_id, event->buy_refund->buy_transaction_id, player);
        return sp_event_reply(event, true, NULL, reply);
    case SP_EVENT_KIND_JACKPOT_PAYOUT:
        player = event->jackpot_payout->player_partner_identifier.ptr ? event->jackpot_payout->player_partner_identifier.ptr
                                                                      : event->jackpot_payout->player_identifier.ptr;
        fprintf(stderr, "callback_cgi: payout %" PRId64 " %s (minor units) of %s jackpot %s for player %s\n",
                event->jackpot_payout->money_won, event->jackpot_payout->currency_iso4217.ptr,
                event->jackpot_payout->is_primary ? "major" : "minor", event->jackpot_payout->jackpot_identifier.ptr, player);
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

static sp_receiver *make_receiver(void) {
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

int main(void) {
    static unsigned char body[MAX_BODY_BYTES + 1];
    const char *method = getenv("REQUEST_METHOD");
    sp_receiver *receiver = NULL;
    sp_event *event = NULL;
    sp_str reply = {NULL, 0};
    long len = 0;
    int rc = 0;

    if (method == NULL || strcmp(method, "POST") != 0) {
        return respond_text(405, "Allow: POST",
                            "{\"error\":{\"code\":\"method_not_allowed\",\"field\":\"\",\"message\":\"only POST is accepted\"}}");
    }
    receiver = make_receiver();
    if (receiver == NULL) {
        return respond_last_error();
    }
    len = read_body(body, sizeof body);
    if (len < 0) {
        sp_receiver_free(receiver);
        return respond_text(400, NULL,
                            "{\"error\":{\"code\":\"bad_request\",\"field\":\"CONTENT_LENGTH\",\"message\":\"CONTENT_LENGTH is invalid or the body is shorter\"}}");
    }
    if (sp_receiver_handle(receiver, getenv("HTTP_X_SERVICE_TOKEN"), getenv("REMOTE_ADDR"),
                           getenv("HTTP_X_FORWARDED_FOR"), body, (size_t)len, &event) != SP_OK) {
        log_failure("refused");
        rc = respond_last_error();
    } else if (handle_event(event, &reply) != SP_OK) {
        log_failure("reply");
        rc = respond_last_error();
    } else {
        log_index(event);
        rc = respond(event->reply_http_status, NULL, reply.ptr, reply.len);
    }
    sp_event_free(event);
    sp_receiver_free(receiver);
    return rc;
}
