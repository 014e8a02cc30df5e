/*
 * inspect_event: reads a callback body from a file (or stdin when no file or "-" is given) and
 * prints every parsed field, or the validation error. The tool to debug a delivery.
 *
 *   inspect_event [FILE]
 *
 * Exit status: 0 when the body is a valid event, 1 when it is refused, 2 on usage or I/O errors.
 * The index field name can be set with SLOTPARTNER_INDEX_FIELD (default "index").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slotpartner.h"

/* Any well-formed token: parsing does not authenticate. */
#define PLACEHOLDER_TOKEN "00000000-0000-0000-0000-000000000000"
#define MAX_INPUT (16u * 1024u * 1024u)

static unsigned char *read_all(FILE *in, size_t *len) {
    size_t capacity = 4096;
    unsigned char *data = malloc(capacity);
    *len = 0;
    while (data != NULL) {
        size_t n = fread(data + *len, 1, capacity - *len, in);
        *len += n;
        if (n == 0) {
            if (ferror(in)) {
                free(data);
                return NULL;
            }
            return data;
        }
        if (*len == capacity) {
            unsigned char *bigger = capacity >= MAX_INPUT ? NULL : realloc(data, capacity * 2);
            if (bigger == NULL) {
                free(data);
                return NULL;
            }
            data = bigger;
            capacity *= 2;
        }
    }
    return NULL;
}

static void print_str(const char *name, sp_str value) {
    if (value.ptr == NULL) {
        printf("  %s: (absent)\n", name);
    } else {
        printf("  %s: \"%s\"\n", name, value.ptr);
    }
}

static void print_int(const char *name, int64_t value) { printf("  %s: %" PRId64 "\n", name, value); }

static void print_bool(const char *name, bool value) { printf("  %s: %s\n", name, value ? "true" : "false"); }

static const char *kind_name(sp_event_kind kind) {
    switch (kind) {
    case SP_EVENT_KIND_BUY_REFUND: return "SP_EVENT_KIND_BUY_REFUND";
    case SP_EVENT_KIND_JACKPOT_PAYOUT: return "SP_EVENT_KIND_JACKPOT_PAYOUT";
    case SP_EVENT_KIND_BALANCE_QUERY: return "SP_EVENT_KIND_BALANCE_QUERY";
    default: return "SP_EVENT_KIND_OTHER";
    }
}

static void print_event(const sp_event *event) {
    size_t i;
    printf("event: %s (%s)\n", event->name.ptr, kind_name(event->kind));
    if (event->has_index) {
        printf("index: %" PRId64 "\n", event->index);
    } else {
        printf("index: (absent)\n");
    }
    if (event->buy_refund != NULL) {
        const sp_buy_refund *r = event->buy_refund;
        print_str("gameSessionIdentifier", r->game_session_identifier);
        print_str("playerIdentifier", r->player_identifier);
        print_str("playerPartnerIdentifier", r->player_partner_identifier);
        print_int("transactionId", r->transaction_id);
        print_int("buyTransactionId", r->buy_transaction_id);
        print_int("gameSessionId", r->game_session_id);
        print_str("partnerGameRequestIdentifier", r->partner_game_request_identifier);
        print_int("gameId", r->game_id);
        print_bool("isMobile", r->is_mobile);
        print_str("bonusCode", r->bonus_code);
    }
    if (event->jackpot_payout != NULL) {
        const sp_jackpot_payout *p = event->jackpot_payout;
        print_str("jackpotIdentifier", p->jackpot_identifier);
        print_str("playerIdentifier", p->player_identifier);
        print_str("playerPartnerIdentifier", p->player_partner_identifier);
        print_str("currencyISO4217", p->currency_iso4217);
        print_int("moneyWon", p->money_won);
        print_int("coinsWon", p->coins_won);
        print_bool("isMoney", p->is_money);
        print_int("epochReleasedMillis", p->epoch_released_millis);
        print_bool("isPrimary", p->is_primary);
        print_int("transactionId", p->transaction_id);
        print_int("buyTransactionId", p->buy_transaction_id);
        print_str("partnerGameRequestIdentifier", p->partner_game_request_identifier);
        print_int("gameSessionId", p->game_session_id);
        print_int("gameId", p->game_id);
        print_str("bonusCode", p->bonus_code);
        if (p->has_is_mobile) {
            print_bool("isMobile", p->is_mobile);
        } else {
            printf("  isMobile: (absent)\n");
        }
    }
    if (event->balance_query != NULL) {
        print_str("playerIdentifier", event->balance_query->player_identifier);
        print_str("playerPartnerIdentifier", event->balance_query->player_partner_identifier);
    }
    for (i = 0; i < event->extra_fields_len; i++) {
        printf("extra: %s = %s\n", event->extra_fields[i].name.ptr, event->extra_fields[i].json.ptr);
    }
}

static void print_error(sp_status status) {
    uint16_t http_status = 0;
    sp_str body = {NULL, 0};
    sp_str message = sp_last_error_message();
    sp_str field = sp_last_error_field();
    printf("error: %s\n", sp_status_name((int32_t)status));
    printf("field: %s\n", field.len > 0 ? field.ptr : "(none)");
    printf("message: %s\n", message.ptr);
    if (sp_last_error_response(&http_status, &body) == SP_OK) {
        printf("answer: HTTP %u %s\n", (unsigned)http_status, body.ptr);
    }
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "-";
    const char *index_field = getenv("SLOTPARTNER_INDEX_FIELD");
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    unsigned char *body = NULL;
    size_t len = 0;
    sp_receiver_config *config = NULL;
    sp_receiver *receiver = NULL;
    sp_event *event = NULL;
    sp_status status;

    if (argc > 2 || in == NULL) {
        fprintf(stderr, "usage: inspect_event [FILE]   (cannot open %s)\n", path);
        return 2;
    }
    body = read_all(in, &len);
    if (in != stdin) {
        fclose(in);
    }
    if (body == NULL) {
        fprintf(stderr, "inspect_event: cannot read %s\n", path);
        return 2;
    }
    if (sp_receiver_config_new(&config) != SP_OK || sp_receiver_config_add_token(config, PLACEHOLDER_TOKEN) != SP_OK ||
        (index_field != NULL && sp_receiver_config_set_index_field(config, index_field) != SP_OK) ||
        sp_receiver_new(config, &receiver) != SP_OK) {
        fprintf(stderr, "inspect_event: configuration: %s\n", sp_last_error_message().ptr);
        sp_receiver_config_free(config);
        free(body);
        return 2;
    }
    sp_receiver_config_free(config);

    status = sp_receiver_parse(receiver, body, len, &event);
    if (status == SP_OK) {
        print_event(event);
    } else {
        print_error(status);
    }
    sp_event_free(event);
    sp_receiver_free(receiver);
    free(body);
    return status == SP_OK ? 0 : 1;
}
