/* Eight threads sharing one receiver, one client and one journal, as a threaded C server shares
 * them, run under AddressSanitizer and UndefinedBehaviorSanitizer by `make test-threads`
 * (tests/c/threads.sh starts the sandbox and passes its address).
 *
 * Each thread, a fixed number of times:
 * - hands the shared receiver refunds, payouts, balance queries and refused bodies (not JSON, a
 *   wrong token, a forbidden source, a source behind a trusted proxy, an unknown event, a float
 *   amount naming the thread) and checks every event field and every reply byte for byte; the
 *   refused ones through the thread's own last error (its message names this thread's values);
 * - calls the sandbox through the shared client: getGames for one game (checked against the
 *   catalogue main() read first), getGames for all, `echo` (the answer checked byte for byte)
 *   and an unknown action (its error names this thread's action);
 * - begins and finishes, in one SQLite journal shared through a second receiver, keys of its own
 *   (NEW, then DONE with the stored reply on a second delivery) and keys every thread delivers
 *   (exactly one thread gets NEW per key; every other gets DONE with the reply that thread stored).
 * main() then checks the journal's counts. A watchdog alarm ends a hung run.
 *
 * Usage: threads BASE_URL CA_FILE JOURNAL_URL. Prints one line per failed check and
 * "threads: N passed, N failed"; exits non-zero on any failure. */
#define _POSIX_C_SOURCE 200809L /* alarm, strdup */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
#define OTHER_TOKEN "0b7e3c55-1a2b-4c3d-8e9f-000000000001"
#define STAGING "34.254.138.20"    /* in the staging source list */
#define PRODUCTION "18.203.30.17"  /* not in it */
#define PROXY "10.0.0.5"           /* a trusted proxy */
#define THREADS 8
#define ROUNDS 2000        /* receiver rounds per thread, each of the 8 cases in turn */
#define CALLS 100          /* client rounds per thread */
#define KEYS 100           /* journal rounds per thread: one own key and one shared key each */
#define GAMES 7            /* the sandbox's catalogue: ids 1001-1007 */
#define WATCHDOG_SECONDS 300

static atomic_int passed, failed;

static void check(int ok, int thread, const char *what) {
    if (ok) {
        atomic_fetch_add(&passed, 1);
    } else {
        atomic_fetch_add(&failed, 1);
        if (thread < 0) {
            printf("FAIL main: %s (last error: %s)\n", what, sp_last_error_message().ptr);
        } else {
            printf("FAIL thread %d: %s (last error: %s)\n", thread, what, sp_last_error_message().ptr);
        }
        fflush(stdout);
    }
}

/* Checks that a library string equals `want`, printing both when it does not. */
static void check_text(struct sp_str got, const char *want, int thread, const char *what) {
    int ok = got.ptr != NULL && got.len == strlen(want) && memcmp(got.ptr, want, got.len) == 0;
    if (!ok) {
        printf("FAIL thread %d: %s: got %s, want %s\n", thread, what, got.ptr ? got.ptr : "(null)", want);
        fflush(stdout);
        atomic_fetch_add(&failed, 1);
    } else {
        atomic_fetch_add(&passed, 1);
    }
}

static const char *base_url, *ca_file;
static sp_receiver *receiver;  /* no journal */
static sp_receiver *journaled; /* the shared SQLite journal */
static sp_client *client;

/* What main() read before the threads start: the answers every thread must get again. */
static char *refused_not_json, *refused_wrong_token, *refused_forbidden, *refused_unknown;
static char *description[2][GAMES]; /* [en-US, de-DE][game] */

/* The journal's shared keys: how many threads got NEW, and the reply each thread saw. */
static atomic_int shared_new[KEYS];
static char *shared_seen[THREADS][KEYS];

static char *copy_str(struct sp_str s) { return s.ptr ? strdup(s.ptr) : NULL; }

static size_t refund_body(char *out, size_t cap, int64_t index, int64_t transaction, const char *player) {
    return (size_t)snprintf(out, cap,
                            "{\"event\":\"gameSessionBuyRefund\",\"index\":%" PRId64 ",\"gameSessionIdentifier\":\"gs-1\","
                            "\"playerIdentifier\":\"%s\",\"transactionId\":%" PRId64 ",\"buyTransactionId\":%" PRId64 ","
                            "\"gameSessionId\":5551,\"partnerGameRequestIdentifier\":\"req-1\",\"gameId\":12,"
                            "\"isMobile\":true}",
                            index, player, transaction, transaction - 1);
}

static size_t payout_body(char *out, size_t cap, int64_t transaction, const char *money) {
    return (size_t)snprintf(out, cap,
                            "{\"event\":\"jackpotPayout\",\"index\":7,\"jackpotIdentifier\":\"jp-major-eu\","
                            "\"playerIdentifier\":\"svc-player-1001\",\"currencyISO4217\":\"EUR\",\"moneyWon\":%s,"
                            "\"coinsWon\":0,\"isMoney\":true,\"epochReleasedMillis\":1795300123456,\"isPrimary\":true,"
                            "\"transactionId\":%" PRId64 ",\"buyTransactionId\":899991,"
                            "\"partnerGameRequestIdentifier\":\"req-2\",\"gameSessionId\":5552,\"gameId\":12}",
                            money, transaction);
}

/* Hands `body` to `r`; on refusal checks the status and that the thread's last error answers
 * exactly `want_status`/`want_body` (NULL: any body). */
static void expect_refusal(const sp_receiver *r, const char *token, const char *remote, const char *forwarded,
                           const char *body, sp_status want, uint16_t want_status, const char *want_body, int t,
                           const char *what) {
    sp_event *event = NULL;
    sp_status status = sp_receiver_handle(r, token, remote, forwarded, (const uint8_t *)body, strlen(body), &event);
    check(status == want && event == NULL, t, what);
    uint16_t http = 0;
    struct sp_str answer = {NULL, 0};
    check(sp_last_error_response(&http, &answer) == SP_OK && http == want_status, t, what);
    if (want_body != NULL) {
        check_text(answer, want_body, t, what);
    }
    sp_event_free(event);
}

static void receiver_round(int t, int i) {
    char body[1024], player[64], want[512];
    sp_event *event = NULL;
    struct sp_str reply = {NULL, 0};
    int64_t transaction = 1000000 + (int64_t)t * 10000 + i;
    snprintf(player, sizeof player, "player-%d-%d", t, i);

    switch (i % 8) {
    case 0: /* a refund, answered with success, then with a failure naming the thread */
    case 5: /* the same from behind a trusted proxy that forwards an allowed source */
        refund_body(body, sizeof body, i, transaction, player);
        check(sp_receiver_handle(receiver, TOKEN, i % 8 == 0 ? STAGING : PROXY, i % 8 == 0 ? NULL : STAGING,
                                 (const uint8_t *)body, strlen(body), &event) == SP_OK &&
                  event != NULL,
              t, "a refund is accepted");
        if (event == NULL) {
            return;
        }
        check(event->kind == SP_EVENT_KIND_BUY_REFUND && event->buy_refund != NULL, t, "a refund is a refund");
        check(event->buy_refund->transaction_id == transaction && event->has_index && event->index == i, t,
              "the refund's transactionId and index are this thread's");
        check_text(event->buy_refund->player_identifier, player, t, "the refund's player");
        check(sp_event_reply(event, true, NULL, &reply) == SP_OK, t, "a refund reply");
        check_text(reply, "{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}", t, "the refund's reply");
        snprintf(want, sizeof want, "declined by thread %d round %d", t, i);
        check(sp_event_reply(event, false, want, &reply) == SP_OK && event->reply_http_status == 200, t,
              "a refund failure reply");
        snprintf(body, sizeof body, "{\"refund\":{\"success\":false,\"errorMessage\":\"%s\"}}", want);
        check_text(reply, body, t, "the refund's failure reply");
        break;
    case 1: { /* a payout of an amount naming the thread */
        char money[32];
        snprintf(money, sizeof money, "%" PRId64, transaction * 3);
        payout_body(body, sizeof body, transaction, money);
        check(sp_receiver_handle(receiver, TOKEN, STAGING, NULL, (const uint8_t *)body, strlen(body), &event) ==
                      SP_OK &&
                  event != NULL,
              t, "a payout is accepted");
        if (event == NULL) {
            return;
        }
        check(event->kind == SP_EVENT_KIND_JACKPOT_PAYOUT && event->jackpot_payout->money_won == transaction * 3 &&
                  event->jackpot_payout->transaction_id == transaction,
              t, "the payout's amount and transactionId are this thread's");
        check_text(event->jackpot_payout->currency_iso4217, "EUR", t, "the payout's currency");
        check(sp_event_reply(event, true, NULL, &reply) == SP_OK, t, "a payout reply");
        check_text(reply, "{\"payout\":{\"success\":true,\"errorMessage\":\"\"}}", t, "the payout's reply");
        break;
    }
    case 2: /* a balance query answered with a balance naming the thread */
        snprintf(body, sizeof body, "{\"action\":\"getPlayerBalance\",\"playerIdentifier\":\"%s\"}", player);
        check(sp_receiver_handle(receiver, TOKEN, STAGING, NULL, (const uint8_t *)body, strlen(body), &event) ==
                      SP_OK &&
                  event != NULL,
              t, "a balance query is accepted");
        if (event == NULL) {
            return;
        }
        check(event->kind == SP_EVENT_KIND_BALANCE_QUERY, t, "a balance query is one");
        check_text(event->balance_query->player_identifier, player, t, "the balance query's player");
        check(sp_event_reply_balance(event, transaction, NULL, t, &reply) == SP_OK, t, "a balance reply");
        snprintf(want, sizeof want,
                 "{\"playerBalance\":{\"money\":%" PRId64 ",\"currencyISO4217\":\"EUR\",\"coins\":%d,\"errorMessage\":\"\"}}",
                 transaction, t);
        check_text(reply, want, t, "the balance reply");
        break;
    case 3: { /* a float amount: the thread's own last error names its own value */
        char money[32];
        snprintf(money, sizeof money, "%d.5", t * 100 + i);
        payout_body(body, sizeof body, transaction, money);
        snprintf(want, sizeof want,
                 "{\"payout\":{\"success\":false,\"errorMessage\":\"jackpotPayout.moneyWon: expected a non-negative "
                 "integer, got %s\"}}",
                 money);
        expect_refusal(receiver, TOKEN, STAGING, NULL, body, SP_ERR_WRONG_TYPE, 200, want, t,
                       "a float amount is refused with the thread's own message");
        check_text(sp_last_error_field(), "jackpotPayout.moneyWon", t, "the refusal's field");
        break;
    }
    case 4:
        expect_refusal(receiver, TOKEN, STAGING, NULL, "{\"event\":\"jackpotPayout\",}", SP_ERR_INVALID_JSON, 400,
                       refused_not_json, t, "a body that is not JSON");
        break;
    case 6:
        refund_body(body, sizeof body, i, transaction, player);
        expect_refusal(receiver, OTHER_TOKEN, STAGING, NULL, body, SP_ERR_WRONG_TOKEN, 401, refused_wrong_token, t,
                       "a wrong token");
        expect_refusal(receiver, TOKEN, PRODUCTION, NULL, body, SP_ERR_FORBIDDEN_SOURCE, 403, refused_forbidden, t,
                       "a forbidden source");
        expect_refusal(receiver, TOKEN, PROXY, PRODUCTION, body, SP_ERR_FORBIDDEN_SOURCE, 403, refused_forbidden, t,
                       "a forbidden source behind a trusted proxy");
        break;
    case 7:
        expect_refusal(receiver, TOKEN, STAGING, NULL, "{\"event\":\"somethingNew\",\"index\":7}",
                       SP_ERR_UNKNOWN_EVENT, 400, refused_unknown, t, "an unknown event");
        break;
    }
    sp_event_free(event);
}

static void client_round(int t, int j) {
    int game = (t + j) % GAMES;
    int german = j % 2;
    sp_games *games = NULL;
    check(sp_client_get_games(client, german ? "de_DE" : "en-US", 1001 + game, &games) == SP_OK && games != NULL &&
              games->len == 1,
          t, "getGames for one game");
    if (games != NULL && games->len == 1) {
        check(games->games[0].game_id == 1001 + game, t, "getGames answers the game asked for");
        check_text(games->games[0].game_type, "SlotMachine", t, "the game's type");
        check_text(games->games[0].description_short, description[german][game], t,
                   "the game's description in the locale asked for");
    }
    sp_games_free(games);
    games = NULL;
    if (j == 0) {
        check(sp_client_get_games(client, "en-US", -1, &games) == SP_OK && games != NULL && games->len == GAMES, t,
              "getGames for all games");
        sp_games_free(games);
    }

    char params[128], want[256];
    snprintf(params, sizeof params, "{\"call\":%d,\"thread\":%d}", j, t);
    snprintf(want, sizeof want, "{\"echo\":{\"action\":\"echo\",\"call\":%d,\"thread\":%d}}", j, t);
    sp_buffer *answer = NULL;
    check(sp_client_call(client, "echo", (const uint8_t *)params, strlen(params), &answer) == SP_OK && answer != NULL,
          t, "echo");
    if (answer != NULL) {
        check_text(answer->text, want, t, "echo's answer");
    }
    sp_buffer_free(answer);
    answer = NULL;

    char action[64];
    snprintf(action, sizeof action, "noSuchAction%d_%d", t, j);
    check(sp_client_call(client, action, NULL, 0, &answer) == SP_ERR_HTTP_STATUS && answer == NULL, t,
          "an unknown action is refused");
    struct sp_str message = sp_last_error_message();
    check(strstr(message.ptr, "HTTP 400") != NULL && strstr(message.ptr, action) != NULL, t,
          "its error names this thread's action and the status");
}

/* Delivers a refund for `key` to the journaled receiver; returns the claim's outcome (0 on a
 * failure) and the reply the delivery answers with in `*reply` (malloc'd). */
static int deliver(int t, int64_t index, int64_t transaction, const char *message, char **reply) {
    char body[1024];
    sp_event *event = NULL;
    sp_claim claim;
    int outcome = 0;
    *reply = NULL;
    refund_body(body, sizeof body, index, transaction, "journal-player");
    if (sp_receiver_handle(journaled, TOKEN, STAGING, NULL, (const uint8_t *)body, strlen(body), &event) != SP_OK) {
        check(0, t, "a journaled refund is accepted");
        return 0;
    }
    if (sp_event_begin(event, &claim) != SP_OK) {
        check(0, t, "sp_event_begin");
    } else if (claim.outcome == SP_BEGIN_NEW) {
        struct sp_str text = {NULL, 0};
        check(claim.attempt == 1, t, "a first claim is attempt 1");
        check(sp_event_reply(event, message == NULL, message, &text) == SP_OK, t, "the claimed event's reply");
        *reply = copy_str(text);
        check(sp_event_finish(event, NULL, 0) == SP_OK, t, "sp_event_finish");
        outcome = SP_BEGIN_NEW;
    } else if (claim.outcome == SP_BEGIN_DONE) {
        check(claim.reply.ptr != NULL && event->reply_http_status == 200, t, "a repeat carries the stored reply");
        *reply = copy_str(claim.reply);
        outcome = SP_BEGIN_DONE;
    } else {
        check(0, t, "a journaled event is journaled");
    }
    sp_event_free(event);
    return outcome;
}

static void journal_round(int t, int k) {
    char *reply = NULL;
    char message[64];
    /* A key every thread delivers: the one that gets NEW stores a reply naming it. */
    snprintf(message, sizeof message, "stored by thread %d", t);
    int outcome = deliver(t, 1 + k, 3000000 + k, message, &reply);
    if (outcome == SP_BEGIN_NEW) {
        atomic_fetch_add(&shared_new[k], 1);
    }
    shared_seen[t][k] = reply;

    /* A key of this thread only: NEW, then DONE with the same reply. */
    int64_t index = KEYS + 1 + (int64_t)t * KEYS + k;
    int64_t transaction = 2000000 + (int64_t)t * 1000 + k;
    char *again = NULL;
    check(deliver(t, index, transaction, NULL, &reply) == SP_BEGIN_NEW, t, "the thread's own key is new");
    check(deliver(t, index, transaction, NULL, &again) == SP_BEGIN_DONE, t, "its second delivery is done");
    check(reply != NULL && again != NULL && strcmp(reply, again) == 0 &&
              strcmp(reply, "{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}") == 0,
          t, "the second delivery gets the stored reply");
    free(reply);
    free(again);
}

static void *run(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        receiver_round(t, i);
        if (i < CALLS) {
            client_round(t, i);
        }
        if (i < KEYS) {
            journal_round(t, i);
        }
    }
    return NULL;
}

static sp_receiver *new_receiver(const sp_journal *journal) {
    sp_receiver_config *config = NULL;
    sp_receiver *r = NULL;
    if (sp_receiver_config_new(&config) != SP_OK || sp_receiver_config_add_token(config, TOKEN) != SP_OK ||
        sp_receiver_config_set_sources(config, "staging") != SP_OK ||
        sp_receiver_config_set_trusted_proxies(config, "10.0.0.0/8") != SP_OK ||
        sp_receiver_config_set_reject_unknown_events(config, true) != SP_OK ||
        (journal != NULL && sp_receiver_config_set_journal(config, journal) != SP_OK) ||
        sp_receiver_new(config, &r) != SP_OK) {
        printf("FAIL setting up a receiver: %s\n", sp_last_error_message().ptr);
        atomic_fetch_add(&failed, 1);
    }
    sp_receiver_config_free(config);
    return r;
}

/* What a refusal answers, read once on the main thread. */
static char *refusal(const char *token, const char *remote, const char *body) {
    sp_event *event = NULL;
    uint16_t http = 0;
    struct sp_str answer = {NULL, 0};
    if (sp_receiver_handle(receiver, token, remote, NULL, (const uint8_t *)body, strlen(body), &event) == SP_OK ||
        sp_last_error_response(&http, &answer) != SP_OK) {
        sp_event_free(event);
        return strdup("(not refused)");
    }
    return copy_str(answer);
}

static int read_catalogue(void) {
    for (int german = 0; german < 2; german++) {
        sp_games *games = NULL;
        if (sp_client_get_games(client, german ? "de-DE" : "en-US", -1, &games) != SP_OK || games->len != GAMES) {
            printf("FAIL reading the catalogue: %s\n", sp_last_error_message().ptr);
            sp_games_free(games);
            return -1;
        }
        for (size_t g = 0; g < games->len; g++) {
            int64_t id = games->games[g].game_id;
            if (id >= 1001 && id < 1001 + GAMES) {
                description[german][id - 1001] = copy_str(games->games[g].description_short);
            }
        }
        sp_games_free(games);
    }
    for (int g = 0; g < GAMES; g++) {
        if (description[0][g] == NULL || description[1][g] == NULL || strcmp(description[0][g], description[1][g]) == 0) {
            printf("FAIL the catalogue: game %d lacks a description in both locales\n", 1001 + g);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: threads BASE_URL CA_FILE JOURNAL_URL\n");
        return 2;
    }
    base_url = argv[1];
    ca_file = argv[2];
    alarm(WATCHDOG_SECONDS);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);

    sp_journal_config *journal_config = NULL;
    sp_journal *journal = NULL;
    sp_client_config *client_config = NULL;
    if (sp_journal_config_new(argv[3], &journal_config) != SP_OK ||
        sp_journal_config_set_busy_wait_ms(journal_config, 60000) != SP_OK ||
        sp_journal_open(journal_config, &journal) != SP_OK || sp_client_config_new(base_url, TOKEN, &client_config) != SP_OK ||
        sp_client_config_add_ca_file(client_config, ca_file) != SP_OK ||
        sp_client_config_set_trust_roots(client_config, SP_TRUST_ROOTS_EXTRA_ONLY) != SP_OK ||
        sp_client_config_set_retries(client_config, 0, 0) != SP_OK || sp_client_new(client_config, &client) != SP_OK) {
        printf("FAIL setting up: %s\nthreads: 0 passed, 1 failed\n", sp_last_error_message().ptr);
        return 1;
    }
    sp_journal_config_free(journal_config);
    sp_client_config_free(client_config);
    receiver = new_receiver(NULL);
    journaled = new_receiver(journal);
    if (receiver == NULL || journaled == NULL || read_catalogue() != 0) {
        printf("threads: %d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed) + 1);
        return 1;
    }
    refused_not_json = refusal(TOKEN, STAGING, "{\"event\":\"jackpotPayout\",}");
    refused_wrong_token = refusal(OTHER_TOKEN, STAGING, "{}");
    refused_forbidden = refusal(TOKEN, PRODUCTION, "{}");
    refused_unknown = refusal(TOKEN, STAGING, "{\"event\":\"somethingNew\",\"index\":7}");

    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, run, (void *)(intptr_t)t) != 0) {
            printf("FAIL starting thread %d\n", t);
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }

    /* Exactly one NEW per shared key, and every thread got the reply that thread stored. */
    for (int k = 0; k < KEYS; k++) {
        char what[96];
        snprintf(what, sizeof what, "shared key %d: exactly one thread got NEW (got %d)", k, atomic_load(&shared_new[k]));
        check(atomic_load(&shared_new[k]) == 1, -1, what);
        const char *first = shared_seen[0][k];
        int same = first != NULL && strstr(first, "stored by thread ") != NULL;
        for (int t = 1; t < THREADS; t++) {
            same = same && shared_seen[t][k] != NULL && strcmp(shared_seen[t][k], first) == 0;
        }
        snprintf(what, sizeof what, "shared key %d: every thread answered with the stored reply", k);
        check(same, -1, what);
        for (int t = 0; t < THREADS; t++) {
            free(shared_seen[t][k]);
        }
    }
    sp_journal_stats stats;
    check(sp_journal_status(journal, &stats) == SP_OK, -1, "sp_journal_status");
    check(stats.handled == THREADS * KEYS + KEYS, -1, "the journal handled each key once");
    check(stats.replayed == THREADS * KEYS + (THREADS - 1) * KEYS, -1,
          "the journal answered every other delivery from its store");
    check(stats.conflicts == 0 && stats.in_progress == 0 && stats.missing == 0, -1,
          "no conflict, no claim left, no index missing");
    check(stats.has_watermark && stats.watermark == KEYS + THREADS * KEYS, -1,
          "every index up to the last was seen");

    sp_receiver_free(receiver);
    sp_receiver_free(journaled);
    sp_journal_free(journal);
    sp_client_free(client);
    free(refused_not_json);
    free(refused_wrong_token);
    free(refused_forbidden);
    free(refused_unknown);
    for (int g = 0; g < GAMES; g++) {
        free(description[0][g]);
        free(description[1][g]);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    printf("threads: %d threads x (%d receiver rounds, %d client rounds, %d own and %d shared journal keys) in "
           "%.1f s\n",
           THREADS, ROUNDS, CALLS, KEYS, KEYS, seconds);
    printf("threads: %d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
    return atomic_load(&failed) == 0 ? 0 : 1;
}
