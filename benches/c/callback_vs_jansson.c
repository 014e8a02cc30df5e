/*
 * One callback in C through libslotpartner, next to a careful partner writing it by hand with
 * jansson (the C JSON library most such integrations use), for the refund, payout and balance
 * fixtures.
 *
 * A callback on both sides: check the source address against the production list, compare the
 * token in constant time, check the size, parse the body (jansson: JSON_REJECT_DUPLICATES),
 * check every field the spec defines (types, integer ranges, amounts up to 2^53-1, identifiers
 * non-empty without control characters up to 256 bytes, one of the two player identifiers, the
 * currency), read every field, build the reply bytes, free everything.
 *
 * What the library checks and the hand-written side does not: nesting depth, lone surrogate
 * escapes, a byte order mark, the exact reply escaping; jansson also refuses integers beyond
 * int64 and reads 1.0 as a real, which the hand side refuses as a wrong type as the library does.
 *
 * Timing: the two sides run in alternating rounds of 5,000 callbacks, 41 rounds; the median
 * round is reported, the fastest beside it, and the ratio of the medians.
 *
 *   make bench        (builds it as target/bench/callback_vs_jansson and runs it)
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
#define REMOTE "18.203.30.17"
#define ROUNDS 41
#define CALLS 5000
#define MAX_AMOUNT 9007199254740991LL

static const char *const PRODUCTION[] = {"18.203.30.17", "18.202.194.158", "18.203.7.167", "34.248.216.129",
                                         "18.203.175.80"};

static volatile size_t sink;

/* ------------------------------------------------------------------------------------------ */
/* The library. */

static size_t through_library(const sp_receiver *receiver, const char *body, size_t len) {
    sp_event *event = NULL;
    if (sp_receiver_handle(receiver, TOKEN, REMOTE, NULL, (const uint8_t *)body, len, &event) != SP_OK) {
        fprintf(stderr, "bench: the library refused a fixture: %s\n", sp_last_error_message().ptr);
        exit(1);
    }
    size_t read = event->name.len + (size_t)event->index;
    sp_str reply = {NULL, 0};
    sp_status status;
    if (event->kind == SP_EVENT_KIND_BALANCE_QUERY) {
        const sp_balance_query *q = event->balance_query;
        read += q->player_identifier.len + q->player_partner_identifier.len;
        status = sp_event_reply_balance(event, 100000, NULL, 0, &reply);
    } else if (event->kind == SP_EVENT_KIND_JACKPOT_PAYOUT) {
        const sp_jackpot_payout *p = event->jackpot_payout;
        read += p->jackpot_identifier.len + p->player_identifier.len + p->player_partner_identifier.len +
                p->currency_iso4217.len + (size_t)p->money_won + (size_t)p->coins_won + p->is_money +
                (size_t)p->epoch_released_millis + p->is_primary + (size_t)p->transaction_id +
                (size_t)p->buy_transaction_id + p->partner_game_request_identifier.len + (size_t)p->game_session_id +
                (size_t)p->game_id + p->bonus_code.len + p->has_is_mobile + p->is_mobile;
        status = sp_event_reply(event, true, NULL, &reply);
    } else {
        const sp_buy_refund *r = event->buy_refund;
        read += r->game_session_identifier.len + r->player_identifier.len + r->player_partner_identifier.len +
                (size_t)r->transaction_id + (size_t)r->buy_transaction_id + (size_t)r->game_session_id +
                r->partner_game_request_identifier.len + (size_t)r->game_id + r->is_mobile + r->bonus_code.len;
        status = sp_event_reply(event, true, NULL, &reply);
    }
    if (status != SP_OK) {
        exit(1);
    }
    read += reply.len;
    sp_event_free(event);
    return read;
}

/* ------------------------------------------------------------------------------------------ */
/* By hand with jansson. */

static int source_allowed(const char *remote) {
    struct in_addr peer, allowed;
    if (inet_pton(AF_INET, remote, &peer) != 1) {
        return 0;
    }
    for (size_t i = 0; i < sizeof PRODUCTION / sizeof *PRODUCTION; i++) {
        if (inet_pton(AF_INET, PRODUCTION[i], &allowed) == 1 && allowed.s_addr == peer.s_addr) {
            return 1;
        }
    }
    return 0;
}

static int token_matches(const char *presented) {
    size_t len = strlen(presented);
    if (len != sizeof TOKEN - 1) {
        return 0;
    }
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)presented[i];
        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char)(c + 32);
        }
        diff |= (unsigned char)(c ^ (unsigned char)TOKEN[i]);
    }
    return diff == 0;
}

/* A non-empty string without C0, DEL or C1 control characters, at most 256 bytes. */
static const char *identifier(json_t *object, const char *key, int required, int *ok) {
    json_t *value = json_object_get(object, key);
    if (value == NULL || json_is_null(value)) {
        if (required) {
            *ok = 0;
        }
        return NULL;
    }
    if (!json_is_string(value)) {
        *ok = 0;
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)json_string_value(value);
    size_t len = json_string_length(value);
    if (len == 0 || len > 256) {
        *ok = 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < 0x20 || s[i] == 0x7F || (s[i] == 0xC2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F)) {
            *ok = 0;
        }
    }
    return (const char *)s;
}

static json_int_t integer(json_t *object, const char *key, json_int_t max, int *ok) {
    json_t *value = json_object_get(object, key);
    if (!json_is_integer(value) || json_integer_value(value) < 0 || json_integer_value(value) > max) {
        *ok = 0;
        return 0;
    }
    return json_integer_value(value);
}

static int boolean(json_t *object, const char *key, int required, int *ok) {
    json_t *value = json_object_get(object, key);
    if (value == NULL || json_is_null(value)) {
        if (required) {
            *ok = 0;
        }
        return 0;
    }
    if (!json_is_boolean(value)) {
        *ok = 0;
    }
    return json_is_true(value);
}

static size_t by_hand(const char *body, size_t len) {
    if (!source_allowed(REMOTE) || !token_matches(TOKEN) || len > 65536) {
        exit(1);
    }
    json_error_t error;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(root)) {
        exit(1);
    }
    int ok = 1;
    size_t read = 0;
    const char *event = json_string_value(json_object_get(root, "event"));
    const char *action = json_string_value(json_object_get(root, "action"));
    const char *player = identifier(root, "playerIdentifier", 0, &ok);
    const char *partner = identifier(root, "playerPartnerIdentifier", 0, &ok);
    if (player == NULL && partner == NULL) {
        ok = 0;
    }
    json_t *index = json_object_get(root, "index");
    read += (player ? strlen(player) : 0) + (partner ? strlen(partner) : 0) + (size_t)json_integer_value(index);
    json_t *reply;
    if (event != NULL && strcmp(event, "jackpotPayout") == 0) {
        const char *currency = json_string_value(json_object_get(root, "currencyISO4217"));
        if (currency == NULL || strlen(currency) != 3 || currency[0] < 'A' || currency[0] > 'Z' || currency[1] < 'A' ||
            currency[1] > 'Z' || currency[2] < 'A' || currency[2] > 'Z') {
            ok = 0;
        }
        const char *jackpot = identifier(root, "jackpotIdentifier", 1, &ok);
        const char *request = identifier(root, "partnerGameRequestIdentifier", 1, &ok);
        const char *bonus = identifier(root, "bonusCode", 0, &ok);
        read += (size_t)integer(root, "moneyWon", MAX_AMOUNT, &ok) + (size_t)integer(root, "coinsWon", MAX_AMOUNT, &ok) +
                (size_t)boolean(root, "isMoney", 1, &ok) + (size_t)integer(root, "epochReleasedMillis", INT64_MAX, &ok) +
                (size_t)boolean(root, "isPrimary", 1, &ok) + (size_t)integer(root, "transactionId", INT64_MAX, &ok) +
                (size_t)integer(root, "buyTransactionId", INT64_MAX, &ok) +
                (size_t)integer(root, "gameSessionId", INT64_MAX, &ok) + (size_t)integer(root, "gameId", INT64_MAX, &ok) +
                (size_t)boolean(root, "isMobile", 0, &ok) + (jackpot ? strlen(jackpot) : 0) +
                (request ? strlen(request) : 0) + (bonus ? strlen(bonus) : 0);
        reply = json_pack("{s:{s:b,s:s}}", "payout", "success", ok, "errorMessage", ok ? "" : "invalid");
    } else if (event != NULL && strcmp(event, "gameSessionBuyRefund") == 0) {
        const char *session = identifier(root, "gameSessionIdentifier", 1, &ok);
        const char *request = identifier(root, "partnerGameRequestIdentifier", 1, &ok);
        const char *bonus = identifier(root, "bonusCode", 0, &ok);
        read += (size_t)integer(root, "transactionId", INT64_MAX, &ok) +
                (size_t)integer(root, "buyTransactionId", INT64_MAX, &ok) +
                (size_t)integer(root, "gameSessionId", INT64_MAX, &ok) + (size_t)integer(root, "gameId", INT64_MAX, &ok) +
                (size_t)boolean(root, "isMobile", 1, &ok) + (session ? strlen(session) : 0) +
                (request ? strlen(request) : 0) + (bonus ? strlen(bonus) : 0);
        reply = json_pack("{s:{s:b,s:s}}", "refund", "success", ok, "errorMessage", ok ? "" : "invalid");
    } else if (event == NULL && action != NULL && strcmp(action, "getPlayerBalance") == 0) {
        reply = json_pack("{s:{s:I,s:s,s:I,s:s}}", "playerBalance", "money", (json_int_t)100000, "currencyISO4217", "EUR",
                          "coins", (json_int_t)0, "errorMessage", "");
    } else {
        exit(1);
    }
    if (!ok) {
        fprintf(stderr, "bench: the hand-written checks refused a fixture\n");
        exit(1);
    }
    char *text = json_dumps(reply, JSON_COMPACT);
    read += strlen(text);
    free(text);
    json_decref(reply);
    json_decref(root);
    return read;
}

/* ------------------------------------------------------------------------------------------ */

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *load(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        exit(1);
    }
    static char buffer[65536];
    *len = fread(buffer, 1, sizeof buffer, file);
    fclose(file);
    char *copy = malloc(*len);
    memcpy(copy, buffer, *len);
    return copy;
}

int main(int argc, char **argv) {
    const char *fixtures = argc > 1 ? argv[1] : "tests/fixtures";
    sp_receiver_config *config = NULL;
    sp_receiver *receiver = NULL;
    if (sp_receiver_config_new(&config) != SP_OK || sp_receiver_config_add_token(config, TOKEN) != SP_OK ||
        sp_receiver_new(config, &receiver) != SP_OK) {
        return 1;
    }
    sp_receiver_config_free(config);
    printf("One callback in C, handle + every field read + reply + free: libslotpartner next to\n");
    printf("jansson %s with the same checks by hand; ns per callback, median of %d alternating\n", JANSSON_VERSION,
           ROUNDS);
    printf("rounds of %d (fastest round in brackets)\n", CALLS);
    printf("%-9s %6s %20s %20s %8s\n", "event", "bytes", "slotpartner", "jansson by hand", "ratio");
    const char *names[] = {"refund", "payout", "balance"};
    for (size_t n = 0; n < 3; n++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.json", fixtures, names[n]);
        size_t len;
        char *body = load(path, &len);
        double ours[ROUNDS], theirs[ROUNDS];
        for (int round = -1; round < ROUNDS; round++) {
            double start = now_ns();
            for (int i = 0; i < CALLS; i++) {
                sink += through_library(receiver, body, len);
            }
            double middle = now_ns();
            for (int i = 0; i < CALLS; i++) {
                sink += by_hand(body, len);
            }
            double end = now_ns();
            if (round >= 0) {
                ours[round] = (middle - start) / CALLS;
                theirs[round] = (end - middle) / CALLS;
            }
        }
        qsort(ours, ROUNDS, sizeof *ours, by_value);
        qsort(theirs, ROUNDS, sizeof *theirs, by_value);
        printf("%-9s %6zu %8.0f (%8.0f) ns %8.0f (%8.0f) ns %7.2fx\n", names[n], len, ours[ROUNDS / 2], ours[0],
               theirs[ROUNDS / 2], theirs[0], ours[ROUNDS / 2] / theirs[ROUNDS / 2]);
        free(body);
    }
    sp_receiver_free(receiver);
    return 0;
}
