/* The C ABI used as a careless host would use it, run under AddressSanitizer and
 * UndefinedBehaviorSanitizer by `make test`: the library's own pointers handed back in (the last
 * error's message as an argument), fields of returned structs overwritten, SIZE_MAX lengths,
 * one event read from two threads at once, records written into buffers too small, misaligned
 * or holding the body, balance replies written into buffers a host hands over, and calls from
 * a thread that is exiting (a pthread_key destructor runs after the thread's other thread-locals
 * are gone), and the journal's operator functions given NULL, empty notes, the last error's
 * message as a note, report kinds that are none and SIZE_MAX limits (on a SQLite journal in a
 * temporary directory), journal claims finished or abandoned after they were abandoned or
 * taken over, and retention and vital signs given NULL, values out of range and prune options
 * sharing their memory with the report.
 *
 * Prints one line per failed check and "N passed, N failed"; exits non-zero on any failure. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, rmdir */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"

static int passed, failed;

static void check(int ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s (last error: %s)\n", what, sp_last_error_message().ptr);
    }
}

static const char REFUND[] =
    "{\"event\":\"gameSessionBuyRefund\",\"index\":41,\"gameSessionIdentifier\":\"gs-1\","
    "\"playerIdentifier\":\"p-1\",\"transactionId\":900001,\"buyTransactionId\":899990,"
    "\"gameSessionId\":5551,\"partnerGameRequestIdentifier\":\"req-1\",\"gameId\":12,"
    "\"isMobile\":true,\"note\":\"kept\"}";
static const char BALANCE[] = "{\"action\":\"getPlayerBalance\",\"playerIdentifier\":\"p-1\"}";
static const char OTHER[] = "{\"event\":\"somethingNew\",\"index\":7}";

static struct sp_receiver *new_receiver(void) {
    struct sp_receiver_config *config = NULL;
    struct sp_receiver *receiver = NULL;
    if (sp_receiver_config_new(&config) != SP_OK || sp_receiver_config_add_token(config, TOKEN) != SP_OK ||
        sp_receiver_config_set_sources(config, "any") != SP_OK || sp_receiver_new(config, &receiver) != SP_OK) {
        printf("FAIL setting up a receiver: %s\n", sp_last_error_message().ptr);
        failed++;
    }
    sp_receiver_config_free(config);
    return receiver;
}

static struct sp_event *parse(const struct sp_receiver *receiver, const char *body) {
    struct sp_event *event = NULL;
    if (sp_receiver_parse(receiver, (const uint8_t *)body, strlen(body), &event) != SP_OK) {
        printf("FAIL parsing %s: %s\n", body, sp_last_error_message().ptr);
        failed++;
    }
    return event;
}

/* Makes the thread's last error hold `text`-like content, by failing a call on purpose. */
static struct sp_str fail_on_purpose(const struct sp_receiver *receiver) {
    struct sp_event *event = NULL;
    static const char bad[] = "{\"event\":\"jackpotPayout\"}";
    check(sp_receiver_parse(receiver, (const uint8_t *)bad, strlen(bad), &event) != SP_OK && event == NULL,
          "a bad payout is refused");
    struct sp_str message = sp_last_error_message();
    check(message.len > 0, "the refusal has a message");
    return message;
}

/* 1. The last error's own message handed back to every call that takes a string. */
static void last_error_as_argument(const struct sp_receiver *receiver) {
    char copy[512];
    struct sp_event *event = parse(receiver, REFUND);
    struct sp_str reply = {0};

    struct sp_str message = fail_on_purpose(receiver);
    snprintf(copy, sizeof copy, "%s", message.ptr);
    check(sp_event_reply(event, false, message.ptr, &reply) == SP_OK, "sp_event_reply with the last error");
    check(strstr(reply.ptr, "required field is missing") != NULL, "the reply carries the last error's text");
    check(sp_last_error_message().len == 0, "a successful call leaves no last error");

    struct sp_buffer *buffer = NULL;
    message = fail_on_purpose(receiver);
    check(sp_reply_result_new("refund", false, message.ptr, false, &buffer) == SP_OK,
          "sp_reply_result_new with the last error as message");
    check(buffer != NULL && strstr(buffer->text.ptr, "required field is missing") != NULL, "its reply carries the text");
    sp_buffer_free(buffer);
    buffer = NULL;
    message = fail_on_purpose(receiver);
    check(sp_reply_result_new(message.ptr, true, NULL, false, &buffer) == SP_OK,
          "sp_reply_result_new with the last error as wrapper");
    sp_buffer_free(buffer);
    buffer = NULL;
    message = fail_on_purpose(receiver);
    check(sp_reply_balance_new("playerBalance", 0, "EUR", 0, message.ptr, &buffer) == SP_OK,
          "sp_reply_balance_new with the last error as error message");
    sp_buffer_free(buffer);

    /* Setters refuse the text (it is no token, address or currency), reading it whole. */
    struct sp_receiver_config *config = NULL;
    check(sp_receiver_config_new(&config) == SP_OK, "a receiver config");
    message = fail_on_purpose(receiver);
    check(sp_receiver_config_add_token(config, message.ptr) == SP_ERR_INVALID_ARGUMENT, "add_token reads it");
    message = sp_last_error_message();
    check(sp_receiver_config_set_sources(config, message.ptr) == SP_ERR_INVALID_ARGUMENT,
          "set_sources reads its own last error");
    message = sp_last_error_message();
    check(sp_receiver_config_set_trusted_proxies(config, message.ptr) == SP_ERR_INVALID_ARGUMENT,
          "set_trusted_proxies reads its own last error");
    message = sp_last_error_message();
    check(sp_receiver_config_set_balance_currency(config, message.ptr) == SP_ERR_INVALID_ARGUMENT,
          "set_balance_currency reads its own last error");
    message = fail_on_purpose(receiver);
    check(sp_receiver_config_set_balance_wrapper(config, message.ptr) == SP_OK, "set_balance_wrapper reads it");
    message = fail_on_purpose(receiver);
    check(sp_receiver_config_set_index_field(config, message.ptr) == SP_OK, "set_index_field reads it");
    sp_receiver_config_free(config);

    struct sp_client_config *client_config = NULL;
    message = fail_on_purpose(receiver);
    check(sp_client_config_new(message.ptr, TOKEN, &client_config) == SP_ERR_INVALID_ARGUMENT,
          "sp_client_config_new reads it as base URL");
    message = sp_last_error_message();
    check(sp_client_config_new("https://127.0.0.1:1", message.ptr, &client_config) == SP_ERR_INVALID_ARGUMENT,
          "sp_client_config_new reads its own last error as token");
    check(sp_client_config_new("https://127.0.0.1:1", TOKEN, &client_config) == SP_OK, "a client config");
    message = fail_on_purpose(receiver);
    check(sp_client_config_set_proxy(client_config, message.ptr) == SP_ERR_INVALID_ARGUMENT, "set_proxy reads it");
    message = sp_last_error_message();
    check(sp_client_config_add_ca_file(client_config, message.ptr) != SP_OK, "add_ca_file reads it");
    message = sp_last_error_message();
    check(sp_client_config_add_ca_pem(client_config, (const uint8_t *)message.ptr, message.len) != SP_OK,
          "add_ca_pem reads it");
    sp_client_config_free(client_config);

    /* Every string argument of the callback entry point, and the body itself. */
    struct sp_event *other = NULL;
    message = fail_on_purpose(receiver);
    check(sp_receiver_handle(receiver, message.ptr, message.ptr, message.ptr, (const uint8_t *)message.ptr,
                             message.len, &other) == SP_ERR_WRONG_TOKEN && other == NULL,
          "sp_receiver_handle reads it as token, address, header and body");
    message = fail_on_purpose(receiver);
    check(sp_receiver_parse(receiver, (const uint8_t *)message.ptr, message.len, &other) == SP_ERR_INVALID_JSON,
          "sp_receiver_parse reads it as body");
    message = fail_on_purpose(receiver);
    struct sp_str field = {0};
    check(sp_event_field(event, message.ptr, &field) == SP_ERR_MISSING_FIELD, "sp_event_field reads it as name");
    check(strncmp(copy, "jackpotPayout.playerIdentifier: required field is missing", 57) == 0,
          "the message names the field");
    sp_event_free(event);
}

/* 2. Fields of the returned event overwritten by the host: the library never reads them back. */
static void written_fields(const struct sp_receiver *receiver) {
    struct sp_event *event = parse(receiver, REFUND);
    struct sp_str reply = {0};
    memset(&event->kind, 0x5a, sizeof event->kind); /* no sp_event_kind value */
    event->name.ptr = "bogus";
    event->name.len = 5;
    event->has_index = false;
    check(sp_event_reply(event, true, NULL, &reply) == SP_OK, "a reply to an event whose kind was overwritten");
    check(strcmp(reply.ptr, "{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}") == 0,
          "the reply uses the event's real kind");
    check(sp_event_reply_balance(event, 1, NULL, 0, &reply) == SP_ERR_INVALID_ARGUMENT,
          "a refund stays no balance query");
    sp_event_free(event);

    event = parse(receiver, OTHER);
    event->kind = SP_EVENT_KIND_BUY_REFUND;
    event->name.ptr = NULL;
    check(sp_event_reply(event, true, NULL, &reply) == SP_ERR_UNKNOWN_EVENT,
          "an unknown event stays unknown when its kind is overwritten");
    check(strstr(sp_last_error_message().ptr, "somethingNew") != NULL, "the error names the real event");
    sp_event_free(event);

    event = parse(receiver, BALANCE);
    event->kind = SP_EVENT_KIND_OTHER;
    check(sp_event_reply_balance(event, 100, NULL, 0, &reply) == SP_OK, "a balance query stays one");
    check(event->reply_http_status == 200, "a balance is sent with 200");
    check(sp_event_reply(event, false, "player blocked", &reply) == SP_OK, "a refused balance query");
    check(strcmp(reply.ptr, "{\"playerBalance\":{\"errorMessage\":\"player blocked\"}}") == 0,
          "a refused balance query states no balance");
    check(event->reply_http_status == 500, "and is sent with an error status");
    sp_event_free(event);
}

/* 3. One event read from two threads at once (shared reads only). */
struct reader {
    const struct sp_event *event;
    int ok;
};

static void *read_fields(void *arg) {
    struct reader *r = arg;
    r->ok = 1;
    for (int i = 0; i < 2000; i++) {
        struct sp_str out = {0};
        if (sp_event_field(r->event, "note", &out) != SP_OK || strcmp(out.ptr, "\"kept\"") != 0) r->ok = 0;
        if (sp_event_field(r->event, "absent", &out) != SP_ERR_MISSING_FIELD) r->ok = 0;
    }
    return NULL;
}

static void shared_reads(const struct sp_receiver *receiver) {
    struct sp_event *event = parse(receiver, REFUND);
    struct reader a = {event, 0}, b = {event, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, read_fields, &a);
    pthread_create(&tb, NULL, read_fields, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    check(a.ok && b.ok, "two threads read one event's fields at once");
    sp_event_free(event);
}

/* 4. SIZE_MAX lengths are refused before any byte is read. */
static void huge_lengths(const struct sp_receiver *receiver) {
    struct sp_event *event = NULL;
    check(sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)REFUND, SIZE_MAX, &event) ==
                  SP_ERR_INVALID_ARGUMENT &&
              event == NULL,
          "sp_receiver_handle refuses SIZE_MAX");
    check(strcmp(sp_last_error_field().ptr, "body") == 0, "naming the body");
    check(sp_receiver_parse(receiver, (const uint8_t *)REFUND, (size_t)-1, &event) == SP_ERR_INVALID_ARGUMENT,
          "sp_receiver_parse refuses (size_t)-1");
    check(sp_receiver_parse(receiver, (const uint8_t *)REFUND, (size_t)INTPTR_MAX + 1, &event) ==
              SP_ERR_INVALID_ARGUMENT,
          "sp_receiver_parse refuses PTRDIFF_MAX + 1");
    struct sp_client_config *config = NULL;
    check(sp_client_config_new("https://127.0.0.1:1", TOKEN, &config) == SP_OK, "a client config");
    check(sp_client_config_add_ca_pem(config, (const uint8_t *)"x", SIZE_MAX) == SP_ERR_INVALID_ARGUMENT,
          "add_ca_pem refuses SIZE_MAX");
    struct sp_client *client = NULL;
    check(sp_client_new(config, &client) == SP_OK, "a client");
    struct sp_buffer *answer = NULL;
    check(sp_client_call(client, "echo", (const uint8_t *)"{}", SIZE_MAX, &answer) == SP_ERR_INVALID_ARGUMENT &&
              answer == NULL,
          "sp_client_call refuses SIZE_MAX");
    sp_client_free(client);
    sp_client_config_free(config);
}

/* 5. A record (sp_receiver_handle_record) into buffers a careless host hands over: too small,
 * a lying SIZE_MAX capacity, over its own body, misaligned, the last error's message as the
 * token, and from a thread that is exiting (in 6). */
static void records(const struct sp_receiver *receiver) {
    _Alignas(8) unsigned char buffer[1024];
    size_t size = 0;
    memset(buffer, 0xAA, sizeof buffer);
    check(sp_receiver_handle_record(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)REFUND, strlen(REFUND),
                                    buffer, 16, &size) == SP_ERR_INVALID_ARGUMENT &&
              strcmp(sp_last_error_field().ptr, "capacity") == 0 && size > sizeof(struct sp_record),
          "a too small record buffer gets the size it needs");
    check(buffer[0] == 0xAA && buffer[15] == 0xAA, "and is not written");
    size_t needed = size;
    check(sp_receiver_handle_record(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)REFUND, strlen(REFUND),
                                    buffer, SIZE_MAX, &size) == SP_OK &&
              size == needed,
          "a capacity of SIZE_MAX writes the record alone");
    check(buffer[needed] == 0xAA, "nothing past the record");
    const struct sp_record *record = (const struct sp_record *)buffer;
    const char *strings = (const char *)buffer + sizeof(struct sp_record);
    check(record->kind == SP_EVENT_KIND_BUY_REFUND && record->transaction_id == 900001 && record->has_index &&
              record->index == 41 && strcmp(strings, "gs-1") == 0,
          "the record reads as the event");
    /* The body inside the record buffer, where the strings would go. */
    memcpy(buffer + sizeof(struct sp_record), REFUND, strlen(REFUND));
    check(sp_receiver_handle_record(receiver, TOKEN, "127.0.0.1", NULL, buffer + sizeof(struct sp_record),
                                    strlen(REFUND), buffer, sizeof buffer, NULL) == SP_ERR_INVALID_ARGUMENT &&
              strcmp(sp_last_error_field().ptr, "record") == 0,
          "a record over its own body is refused");
    check(memcmp(buffer + sizeof(struct sp_record), REFUND, strlen(REFUND)) == 0, "and the body is untouched");
    check(sp_receiver_handle_record(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)REFUND, strlen(REFUND),
                                    buffer + 1, sizeof buffer - 1, NULL) == SP_ERR_INVALID_ARGUMENT,
          "a misaligned record is refused");
    (void)sp_receiver_handle_record(receiver, "wrong", "127.0.0.1", NULL, (const uint8_t *)REFUND, strlen(REFUND),
                                    buffer, sizeof buffer, NULL);
    check(sp_receiver_handle_record(receiver, sp_last_error_message().ptr, "127.0.0.1", NULL, (const uint8_t *)REFUND,
                                    strlen(REFUND), buffer, sizeof buffer, NULL) == SP_ERR_WRONG_TOKEN,
          "the last error's message as the token");
    check(sp_receiver_handle_record(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)REFUND, SIZE_MAX, buffer,
                                    sizeof buffer, NULL) == SP_ERR_INVALID_ARGUMENT,
          "a SIZE_MAX body length is refused");
}

/* 5b. A balance reply (sp_receiver_reply_balance) into buffers a careless host hands over: too
 * small, a lying SIZE_MAX capacity, NULL, its own currency inside it, the last error's message as
 * the currency. */
static void balance_replies(const struct sp_receiver *receiver) {
    char out[256];
    size_t len = 0;
    memset(out, 0xAA, sizeof out);
    check(sp_receiver_reply_balance(receiver, 100, NULL, 0, out, 8, &len) == SP_ERR_INVALID_ARGUMENT &&
              strcmp(sp_last_error_field().ptr, "capacity") == 0 && len > 8,
          "a too small reply buffer gets the length it needs");
    check((unsigned char)out[0] == 0xAA && (unsigned char)out[7] == 0xAA, "and is not written");
    size_t needed = len;
    check(sp_receiver_reply_balance(receiver, 100, NULL, 0, out, SIZE_MAX, &len) == SP_OK && len == needed &&
              out[len] == '\0' && (unsigned char)out[len + 1] == 0xAA,
          "a capacity of SIZE_MAX writes the reply and its NUL alone");
    check(strstr(out, "\"money\":100,") != NULL, "the reply states the balance");
    check(sp_receiver_reply_balance(receiver, 100, NULL, 0, NULL, sizeof out, &len) == SP_ERR_INVALID_ARGUMENT &&
              strcmp(sp_last_error_field().ptr, "out") == 0,
          "a NULL reply buffer is refused");
    strcpy(out, "USD");
    check(sp_receiver_reply_balance(receiver, 7, out, 0, out, sizeof out, &len) == SP_OK &&
              strstr(out, "\"currencyISO4217\":\"USD\"") != NULL,
          "the currency may be read from the reply buffer itself");
    (void)sp_receiver_reply_balance(receiver, -1, NULL, 0, out, sizeof out, &len);
    check(sp_receiver_reply_balance(receiver, 1, sp_last_error_message().ptr, 0, out, sizeof out, NULL) ==
                  SP_ERR_INVALID_ARGUMENT &&
              strcmp(sp_last_error_field().ptr, "currency") == 0,
          "the last error's message as the currency is refused, naming it");
}

/* 6. Calls from a thread that is exiting: pthread_key destructors run after Rust's own
 * thread-locals are destroyed. Nothing may abort; calls work, without a last error to read. */
static pthread_key_t exiting_key;
static int exiting_ok = -1;

static void on_thread_exit(void *arg) {
    const struct sp_receiver *receiver = arg;
    struct sp_event *event = NULL;
    int ok = 1;
    ok &= sp_receiver_parse(receiver, (const uint8_t *)REFUND, strlen(REFUND), &event) == SP_OK;
    struct sp_str reply = {0};
    ok &= sp_event_reply(event, true, NULL, &reply) == SP_OK && reply.len > 0;
    sp_event_free(event);
    ok &= sp_receiver_parse(receiver, (const uint8_t *)"{", 1, &event) == SP_ERR_INVALID_JSON;
    struct sp_str message = sp_last_error_message();
    ok &= message.ptr != NULL; /* empty or the message: never a crash */
    uint16_t http = 0;
    struct sp_str body = {0};
    (void)sp_last_error_response(&http, &body);
    ok &= sp_receiver_config_new(NULL) == SP_ERR_INVALID_ARGUMENT;
    _Alignas(8) unsigned char buffer[1024];
    ok &= sp_receiver_handle_record(receiver, TOKEN, NULL, NULL, (const uint8_t *)REFUND, strlen(REFUND), buffer,
                                    sizeof buffer, NULL) == SP_OK;
    char reply_buffer[256];
    ok &= sp_receiver_reply_balance(receiver, 1, NULL, 0, reply_buffer, sizeof reply_buffer, NULL) == SP_OK;
    exiting_ok = ok;
}

static void *exiting_thread(void *arg) {
    struct sp_event *event = NULL;
    /* Succeed once and fail once first, so that the library's thread-locals (the last error, the
     * spare vector of fields) exist and are torn down before the key. */
    if (sp_receiver_parse(arg, (const uint8_t *)REFUND, strlen(REFUND), &event) == SP_OK) {
        sp_event_free(event);
        event = NULL;
    }
    (void)sp_receiver_parse(arg, (const uint8_t *)"[", 1, &event);
    pthread_setspecific(exiting_key, arg);
    return NULL;
}

static void exiting_threads(struct sp_receiver *receiver) {
    pthread_key_create(&exiting_key, on_thread_exit);
    pthread_t t;
    pthread_create(&t, NULL, exiting_thread, receiver);
    pthread_join(t, NULL);
    check(exiting_ok == 1, "calls from a thread-exit destructor work and do not abort");
    pthread_key_delete(exiting_key);
}

/* 7. The journal's operator functions, carelessly called: NULL journal and notes, empty notes, the
 * last error's message as a note, report kinds that are none, SIZE_MAX and 0 limits. */
static int last_field_is(const char *name) {
    struct sp_str field = sp_last_error_field();
    return field.ptr != NULL && strcmp(field.ptr, name) == 0;
}

/* Delivers `body` on the journaled receiver: claimed, a reply stored. */
static void deliver(const struct sp_receiver *receiver, const char *body) {
    struct sp_event *event = NULL;
    struct sp_claim claim;
    struct sp_str reply = {0};
    int ok = sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)body, strlen(body), &event) ==
                 SP_OK &&
             sp_event_begin(event, &claim) == SP_OK && claim.outcome == SP_BEGIN_NEW;
    if (ok && event->kind == SP_EVENT_KIND_BUY_REFUND) {
        ok = sp_event_reply(event, true, NULL, &reply) == SP_OK && sp_event_finish(event, NULL, 0) == SP_OK;
    } else if (ok) {
        ok = sp_event_finish(event, (const uint8_t *)"{}", 2) == SP_OK;
    }
    check(ok, body);
    sp_event_free(event);
}

/* A report's JSON text, copied into `out` (empty on failure). */
static sp_status report(const struct sp_journal *journal, int32_t kind, bool all, size_t limit, char *out, size_t cap) {
    static struct sp_buffer untouched;
    struct sp_buffer *buffer = &untouched;
    sp_status status = sp_journal_report(journal, kind, all, limit, &buffer);
    out[0] = '\0';
    if (status == SP_OK) {
        check(buffer != &untouched && buffer->text.ptr[buffer->text.len] == '\0' &&
                  strlen(buffer->text.ptr) == buffer->text.len,
              "a report is NUL-terminated text");
        snprintf(out, cap, "%s", buffer->text.ptr);
        sp_buffer_free(buffer);
    } else {
        check(buffer == &untouched, "a refused report writes no buffer");
    }
    return status;
}

static struct sp_journal_stats stats_of(const struct sp_journal *journal) {
    struct sp_journal_stats stats;
    memset(&stats, 0xAB, sizeof stats);
    check(sp_journal_status(journal, &stats) == SP_OK, "sp_journal_status");
    return stats;
}

/* A folder of its own for one SQLite journal: temp_journal_make creates it (a check fails when
   it cannot), temp_journal_remove removes the journal, every file SQLite keeps beside it and the
   folder, checking that nothing else was left. */
struct temp_journal {
    char dir[sizeof "/tmp/sp-careless-XXXXXX"];
    char path[64];
    char url[sizeof "sqlite:" + 64];
};

static int temp_journal_make(struct temp_journal *t) {
    memcpy(t->dir, "/tmp/sp-careless-XXXXXX", sizeof t->dir);
    if (mkdtemp(t->dir) == NULL) {
        check(0, "a temporary directory");
        return 0;
    }
    snprintf(t->path, sizeof t->path, "%s/journal.db", t->dir);
    snprintf(t->url, sizeof t->url, "sqlite:%s", t->path);
    return 1;
}

static void temp_journal_remove(const struct temp_journal *t) {
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char name[sizeof t->path + sizeof "-journal"];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(name, sizeof name, "%s%s", t->path, suffixes[i]);
        remove(name);
    }
    check(rmdir(t->dir) == 0, "the temporary directory is left empty");
}

/* A receiver of TOKEN from any source, recording into `journal`; NULL (and a failed check) when
   it cannot be made. */
static struct sp_receiver *journaled_receiver(struct sp_journal *journal) {
    struct sp_receiver_config *receiver_config = NULL;
    struct sp_receiver *receiver = NULL;
    check(sp_receiver_config_new(&receiver_config) == SP_OK &&
              sp_receiver_config_add_token(receiver_config, TOKEN) == SP_OK &&
              sp_receiver_config_set_sources(receiver_config, "any") == SP_OK &&
              sp_receiver_config_set_journal(receiver_config, journal) == SP_OK &&
              sp_receiver_new(receiver_config, &receiver) == SP_OK,
          "a journaled receiver");
    sp_receiver_config_free(receiver_config);
    return receiver;
}

/* A journal at `t` with a receiver recording into it: the default lease when `short_lease_ms` is
   0, else that lease and no busy wait (claims left to expire). 0, both NULL, a failed check and
   the directory removed when either cannot be made. */
static int journaled_at(const struct temp_journal *t, uint64_t short_lease_ms, struct sp_journal **journal,
                        struct sp_receiver **receiver) {
    struct sp_journal_config *config = NULL;
    *journal = NULL;
    *receiver = NULL;
    check(sp_journal_config_new(t->url, &config) == SP_OK &&
              (short_lease_ms == 0 || (sp_journal_config_set_lease_ms(config, short_lease_ms) == SP_OK &&
                                       sp_journal_config_set_busy_wait_ms(config, 0) == SP_OK)) &&
              sp_journal_open(config, journal) == SP_OK,
          "a journal");
    sp_journal_config_free(config);
    *receiver = *journal == NULL ? NULL : journaled_receiver(*journal);
    if (*journal != NULL && *receiver != NULL) return 1;
    sp_receiver_free(*receiver);
    sp_journal_free(*journal);
    *journal = NULL;
    *receiver = NULL;
    temp_journal_remove(t);
    return 0;
}

static void journal_operators(void) {
    char text[4096], copy[512];
    struct temp_journal t;
    if (!temp_journal_make(&t)) return;
    struct sp_journal_config *config = NULL;
    struct sp_journal *journal = NULL;
    check(sp_journal_config_new(t.url, &config) == SP_OK, "a journal config");
    check(sp_journal_config_set_max_index_jump(config, 0) == SP_ERR_INVALID_ARGUMENT && last_field_is("max_index_jump"),
          "max_index_jump 0 refused");
    check(sp_journal_config_set_max_index_jump(config, INT64_MIN) == SP_ERR_INVALID_ARGUMENT,
          "max_index_jump INT64_MIN refused");
    check(sp_journal_config_set_not_found_limit(config, 0) == SP_ERR_INVALID_ARGUMENT &&
              last_field_is("not_found_limit"),
          "not_found_limit 0 refused");
    check(sp_journal_config_set_max_index_jump(NULL, 10) == SP_ERR_INVALID_ARGUMENT && last_field_is("config"),
          "max_index_jump on NULL");
    check(sp_journal_config_set_not_found_limit(NULL, 1) == SP_ERR_INVALID_ARGUMENT && last_field_is("config"),
          "not_found_limit on NULL");
    check(sp_journal_config_set_max_index_jump(config, 10) == SP_OK, "max_index_jump 10");
    check(sp_journal_config_set_not_found_limit(config, UINT32_MAX) == SP_OK, "not_found_limit UINT32_MAX");
    check(sp_journal_open(config, &journal) == SP_OK, "the journal opens");
    sp_journal_config_free(config);
    if (journal == NULL) return;

    struct sp_receiver *receiver = journaled_receiver(journal);
    if (receiver == NULL) {
        sp_journal_free(journal);
        return;
    }
    static const char one[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":1,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":700001,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    deliver(receiver, one);
    deliver(receiver, "{\"event\":\"bonusGranted\",\"index\":3}");
    deliver(receiver, "{\"event\":\"bonusGranted\",\"index\":100}"); /* 97 beyond 3: a jump */
    struct sp_journal_stats s = stats_of(journal);
    check(s.missing == 1 && s.index_jumps == 1 && s.unfinished == 0 && s.open_conflicts == 0 && s.resolved == 0 &&
              s.unrecoverable == 0 && s.numbering == 1,
          "the stats count one missing index and one index jump");

    /* Reports: any int32_t as kind, SIZE_MAX and 0 as limits. */
    const int32_t bad_kinds[] = {0, 5, 99, -1, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof bad_kinds[0]; i++) {
        check(report(journal, bad_kinds[i], true, SIZE_MAX, text, sizeof text) == SP_ERR_INVALID_ARGUMENT &&
                  last_field_is("kind"),
              "a kind that is none is refused, naming kind");
    }
    check(report(journal, SP_JOURNAL_REPORT_INDEX_JUMPS, false, SIZE_MAX, text, sizeof text) == SP_OK &&
              strstr(text, "\"kind\":\"jump\"") != NULL && strstr(text, "\"index\":100,") != NULL,
          "the index jump is reported");
    const char *at = strstr(text, "\"id\":");
    long long id = at ? strtoll(at + 5, NULL, 10) : -1;
    for (int32_t kind = SP_JOURNAL_REPORT_INDEX_JUMPS; kind <= SP_JOURNAL_REPORT_UNRECOVERABLE; kind++) {
        check(report(journal, kind, true, 0, text, sizeof text) == SP_OK && strcmp(text, "[]") == 0,
              "limit 0 gives an empty array");
    }
    static struct sp_buffer untouched;
    struct sp_buffer *buffer = &untouched;
    check(sp_journal_report(NULL, SP_JOURNAL_REPORT_CONFLICTS, false, 1, &buffer) == SP_ERR_INVALID_ARGUMENT &&
              last_field_is("journal") && buffer == &untouched,
          "a report of a NULL journal");
    check(sp_journal_report(journal, SP_JOURNAL_REPORT_CONFLICTS, false, 1, NULL) == SP_ERR_INVALID_ARGUMENT &&
              last_field_is("out"),
          "a report into NULL");

    /* NULL journal and note, empty notes. */
    uint64_t closed = 99;
    int64_t numbering = 99;
    check(sp_journal_resolve(NULL, 2, 2, "n", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "resolve on NULL");
    check(sp_journal_resolve(journal, 2, 2, NULL, &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "resolve with a NULL note");
    check(sp_journal_resolve(journal, 2, 2, "", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "resolve with an empty note");
    check(sp_journal_resolve(journal, 2, INT64_MAX, "n", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("range"),
          "resolve beyond the highest");
    check(sp_journal_accept_jump(NULL, id, "n") == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "accept_jump on NULL");
    check(sp_journal_accept_jump(journal, id, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "accept_jump with a NULL note");
    check(sp_journal_jump_is_gap(NULL, id, "n") == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "jump_is_gap on NULL");
    check(sp_journal_jump_is_gap(journal, id, " ") == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "jump_is_gap with a blank note");
    check(sp_journal_resolve_conflict(NULL, 1, "n") == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "resolve_conflict on NULL");
    check(sp_journal_resolve_conflict(journal, 1, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "resolve_conflict with a NULL note");
    check(sp_journal_renumber(NULL, 1, "n", &numbering) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "renumber on NULL");
    check(sp_journal_renumber(journal, 1, NULL, &numbering) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "renumber with a NULL note");
    check(sp_journal_close_unfinished(NULL, 1, "n", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "close_unfinished on NULL");
    check(sp_journal_close_unfinished(journal, 1, NULL, &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "close_unfinished with a NULL note");
    check(sp_journal_close_unfinished(journal, 1, "", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("note"),
          "close_unfinished with an empty note");
    check(sp_journal_close_unfinished(journal, 1, "n", &closed) == SP_ERR_INVALID_ARGUMENT && last_field_is("index"),
          "close_unfinished of a finished delivery");
    check(sp_journal_backup(NULL, "backup.db") == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "backup of NULL");
    check(sp_journal_backup(journal, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("dest"),
          "backup to a NULL path");
    check(closed == 99 && numbering == 99, "out-parameters untouched on failure");

    /* The last error's message as the note: read whole before it is replaced, and kept. */
    check(sp_journal_resolve(journal, 2, 500, "n", &closed) == SP_ERR_INVALID_ARGUMENT, "a failure to reuse");
    struct sp_str message = sp_last_error_message();
    snprintf(copy, sizeof copy, "%s", message.ptr);
    check(sp_journal_accept_jump(journal, id, message.ptr) == SP_OK, "accept_jump with the last error as note");
    check(report(journal, SP_JOURNAL_REPORT_INDEX_JUMPS, true, SIZE_MAX, text, sizeof text) == SP_OK &&
              strstr(text, copy) != NULL && strstr(text, "\"decision\":\"accepted\"") != NULL,
          "the jump is accepted with the message as its note");
    check(sp_journal_accept_jump(journal, id, "again") == SP_ERR_INVALID_ARGUMENT && last_field_is("id"),
          "a decided jump cannot be decided again");
    message = sp_last_error_message();
    check(sp_journal_jump_is_gap(journal, id, message.ptr) == SP_ERR_INVALID_ARGUMENT && last_field_is("id"),
          "jump_is_gap reads its own last error");
    message = sp_last_error_message();
    check(sp_journal_resolve_conflict(journal, INT64_MAX, message.ptr) == SP_ERR_INVALID_ARGUMENT &&
              last_field_is("id"),
          "resolve_conflict reads its own last error");
    message = sp_last_error_message();
    snprintf(copy, sizeof copy, "%s", message.ptr);
    check(sp_journal_resolve(journal, 2, 2, message.ptr, &closed) == SP_OK && closed == 1,
          "resolve with the last error as note closes one index");
    check(report(journal, SP_JOURNAL_REPORT_RESOLUTIONS, false, SIZE_MAX, text, sizeof text) == SP_OK &&
              strstr(text, copy) != NULL,
          "the resolution keeps the message as its note");
    check(sp_journal_resolve(journal, 1, 3, "again", NULL) == SP_OK, "resolve with NULL closed");
    s = stats_of(journal);
    check(s.missing == 0 && s.resolved == 1 && s.index_jumps == 0, "nothing missing, one resolved, no open jump");
    check(sp_journal_resolve(journal, 1, 1, "", NULL) == SP_ERR_INVALID_ARGUMENT, "a failure to reuse");
    message = sp_last_error_message();
    check(sp_journal_renumber(journal, 1, message.ptr, NULL) == SP_OK, "renumber with the last error, NULL out");
    check(sp_journal_renumber(journal, 0, "once more", &numbering) == SP_OK && numbering == 3, "renumber again");
    s = stats_of(journal);
    check(s.numbering == 3 && s.missing == 0 && !s.has_highest_index, "a new numbering starts afresh");

    /* An unfinished delivery closed by hand, with the last error's message as the note; a later
     * delivery of it runs as attempt 2. */
    static const char five[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":5,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":700005,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    for (int attempt = 1; attempt <= 2; attempt++) {
        struct sp_event *event = NULL;
        struct sp_claim claim;
        memset(&claim, 0, sizeof claim);
        check(sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)five, strlen(five), &event) ==
                      SP_OK &&
                  sp_event_begin(event, &claim) == SP_OK && claim.outcome == SP_BEGIN_NEW && claim.attempt == attempt,
              attempt == 1 ? "the refund at index 5 begins" : "delivered again after closing, it runs as attempt 2");
        check(sp_event_abandon(event) == SP_OK, "and is abandoned");
        sp_event_free(event);
        if (attempt == 2) break;
        check(stats_of(journal).unfinished == 1, "one unfinished delivery");
        check(sp_journal_close_unfinished(journal, 4, "n", NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("index"),
              "close_unfinished of an index nothing carries");
        message = sp_last_error_message();
        check(sp_journal_close_unfinished(journal, 6, message.ptr, &closed) == SP_ERR_INVALID_ARGUMENT &&
                  last_field_is("index"),
              "close_unfinished reads its own last error");
        message = sp_last_error_message();
        snprintf(copy, sizeof copy, "%s", message.ptr);
        closed = 99;
        check(sp_journal_close_unfinished(journal, 5, message.ptr, &closed) == SP_OK && closed == 1,
              "close_unfinished with the last error as note closes one delivery");
        check(report(journal, SP_JOURNAL_REPORT_RESOLUTIONS, false, 1, text, sizeof text) == SP_OK &&
                  strstr(text, copy) != NULL,
              "the closing keeps the message in its note");
        check(stats_of(journal).unfinished == 0, "no unfinished delivery once closed");
        check(sp_journal_close_unfinished(journal, 5, "again", NULL) == SP_ERR_INVALID_ARGUMENT &&
                  last_field_is("index"),
              "closed once, not again");
    }
    check(stats_of(journal).unfinished == 1, "abandoned again: unfinished again");

    sp_receiver_free(receiver);
    sp_journal_free(journal);
    temp_journal_remove(&t);
}

/* 8. Finishing what is no longer the event's: after sp_event_abandon, and after the claim's lease
 * ran out and another delivery took it over. Every such finish (and abandon of a lost claim)
 * fails with SP_ERR_CLAIM_LOST saying why, each time it is tried, and stores nothing; events
 * answered from the journal or not journaled still finish and abandon as no-ops. */
static int lost_because(sp_status got, const char *why) {
    struct sp_str message = sp_last_error_message();
    return got == SP_ERR_CLAIM_LOST && message.ptr != NULL && strstr(message.ptr, why) != NULL &&
           strstr(message.ptr, "nothing was stored") != NULL;
}

static struct sp_event *handled(const struct sp_receiver *receiver, const char *body) {
    struct sp_event *event = NULL;
    check(sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)body, strlen(body), &event) == SP_OK,
          "a journaled delivery is handled");
    return event;
}

static int64_t begun(struct sp_event *event, enum sp_begin outcome) {
    struct sp_claim claim;
    memset(&claim, 0, sizeof claim);
    if (event == NULL || sp_event_begin(event, &claim) != SP_OK || claim.outcome != outcome) return -1;
    return claim.attempt;
}

static void no_longer_yours(void) {
    struct temp_journal t;
    if (!temp_journal_make(&t)) return;
    struct sp_journal *journal;
    struct sp_receiver *receiver;
    if (!journaled_at(&t, 100, &journal, &receiver)) return;
    static const char abandoned[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":1,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":800001,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    static const char taken[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":2,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":800002,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    struct sp_str reply = {0};

    /* Abandoned, then finished: refused every time, with the last error's message as the reply. */
    struct sp_event *event = handled(receiver, abandoned);
    check(begun(event, SP_BEGIN_NEW) == 1, "attempt 1");
    check(sp_event_reply(event, true, NULL, &reply) == SP_OK, "a reply");
    check(sp_event_abandon(event) == SP_OK, "abandoned");
    for (int i = 0; i < 3; i++) {
        check(lost_because(sp_event_finish(event, NULL, 0), "the claim was abandoned"), "finish after abandon");
        struct sp_str message = sp_last_error_message();
        check(lost_because(sp_event_finish(event, (const uint8_t *)message.ptr, message.len), "the claim was abandoned"),
              "finish after abandon with the last error's message as the reply");
    }
    check(sp_event_abandon(event) == SP_OK, "abandoning again does nothing");
    check(lost_because(sp_event_finish(event, NULL, 0), "the claim was abandoned"), "finish after abandoning twice");
    sp_event_free(event);
    struct sp_journal_stats s;
    check(sp_journal_status(journal, &s) == SP_OK && s.handled == 0 && s.unfinished == 1, "nothing was stored");
    event = handled(receiver, abandoned);
    check(begun(event, SP_BEGIN_NEW) == 2, "the next delivery runs as attempt 2");
    sp_event_free(event); /* freed while claimed: released */

    /* Taken over after the lease ran out: finish and abandon refused, every time. */
    struct sp_event *late = handled(receiver, taken);
    check(begun(late, SP_BEGIN_NEW) == 1, "attempt 1 of the late worker");
    check(sp_event_reply(late, true, NULL, &reply) == SP_OK, "the late worker's reply");
    struct timespec pause = {0, 150 * 1000 * 1000};
    nanosleep(&pause, NULL);
    struct sp_event *taker = handled(receiver, taken);
    check(begun(taker, SP_BEGIN_NEW) == 2, "attempt 2 takes the claim over");
    for (int i = 0; i < 3; i++) {
        check(lost_because(sp_event_finish(late, NULL, 0), "taken over by attempt 2"), "finish after a take-over");
        check(lost_because(sp_event_abandon(late), "taken over by attempt 2"), "abandon after a take-over");
    }
    sp_event_free(late);
    check(sp_event_finish(taker, (const uint8_t *)"{\"taker\":true}", 14) == SP_OK, "attempt 2 finishes");
    sp_event_free(taker);
    event = handled(receiver, taken);
    struct sp_claim claim;
    check(event != NULL && sp_event_begin(event, &claim) == SP_OK && claim.outcome == SP_BEGIN_DONE &&
              claim.reply.len == 14 && memcmp(claim.reply.ptr, "{\"taker\":true}", 14) == 0,
          "the stored reply is attempt 2's");
    /* Answered from the journal: finish and abandon do nothing, twice. */
    for (int i = 0; i < 2; i++) {
        check(sp_event_finish(event, NULL, 0) == SP_OK && sp_event_abandon(event) == SP_OK,
              "an event answered from the journal finishes and abandons as a no-op");
    }
    sp_event_free(event);
    event = handled(receiver, BALANCE);
    check(begun(event, SP_BEGIN_NOT_JOURNALED) == 0, "a balance query is not journaled");
    check(sp_event_abandon(event) == SP_OK && sp_event_finish(event, (const uint8_t *)"{}", 2) == SP_OK,
          "a not journaled event finishes and abandons as a no-op");
    sp_event_free(event);

    sp_receiver_free(receiver);
    sp_journal_free(journal);
    temp_journal_remove(&t);
}

/* 9. Retention and vital signs, carelessly called (on a SQLite journal in a temporary directory):
 * NULL everywhere, settings and options out of range (each refused naming its field, nothing
 * written), UINT64_MAX ages and SIZE_MAX limits, and prune options sharing their memory with the
 * report. None of these functions takes a string, so there is no last error to hand back. */
static void retention_carelessly(void) {
    char name[96];
    struct temp_journal t;
    if (!temp_journal_make(&t)) return;
    const uint64_t day = 86400000;
    struct sp_journal_config *config = NULL;
    struct sp_journal *journal = NULL;
    check(sp_journal_config_new(t.url, &config) == SP_OK, "a journal config");
    const uint64_t short_or_huge[] = {1, day - 1, (uint64_t)INT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof short_or_huge / sizeof short_or_huge[0]; i++) {
        check(sp_journal_config_set_retention_ms(config, short_or_huge[i]) == SP_ERR_INVALID_ARGUMENT &&
                  last_field_is("retention"),
              "a retention below a day or from INT64_MAX on is refused, naming retention");
    }
    check(sp_journal_config_set_retention_ms(NULL, day) == SP_ERR_INVALID_ARGUMENT && last_field_is("config"),
          "retention on NULL");
    check(sp_journal_config_set_retention_ms(config, day) == SP_OK &&
              sp_journal_config_set_retention_ms(config, 0) == SP_OK,
          "a day, then off");
    check(sp_journal_open(config, &journal) == SP_OK, "the journal opens");
    sp_journal_config_free(config);
    if (journal == NULL) return;

    /* Options: the defaults, then each out of range; the report is never written on a refusal. */
    struct sp_prune_options options, defaults;
    check(sp_prune_options_default(NULL, day) == SP_ERR_INVALID_ARGUMENT && last_field_is("out"),
          "default options into NULL");
    memset(&defaults, 0xAB, sizeof defaults);
    check(sp_prune_options_default(&defaults, day) == SP_OK && defaults.older_than_ms == day &&
              defaults.forget_older_than_ms == 0 && defaults.batch == 200 && defaults.pause_ms == 10 &&
              defaults.max_time_ms == 0,
          "the default options");
    struct sp_prune_report report, untouched;
    memset(&untouched, 0xAB, sizeof untouched);
    report = untouched;
    check(sp_journal_prune(NULL, &defaults, &report) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "prune on NULL");
    check(sp_journal_prune(journal, NULL, &report) == SP_ERR_INVALID_ARGUMENT && last_field_is("options"),
          "prune with NULL options");
    check(sp_journal_prune(journal, &defaults, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("out"),
          "prune into NULL");
    struct {
        const char *field;
        uint64_t older_than_ms, forget_older_than_ms;
        uint32_t batch, pause_ms;
    } bad[] = {
        {"older_than", 0, 0, 0, 0},
        {"older_than", day - 1, 0, 0, 0},
        {"older_than", UINT64_MAX, 0, 0, 0},
        {"forget_older_than", day, day, 0, 0},
        {"forget_older_than", day, UINT64_MAX, 0, 0},
        {"batch", day, 0, UINT32_MAX, 0},
        {"pause", day, 0, 0, UINT32_MAX},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        options = defaults;
        options.older_than_ms = bad[i].older_than_ms;
        options.forget_older_than_ms = bad[i].forget_older_than_ms;
        options.batch = bad[i].batch;
        options.pause_ms = bad[i].pause_ms;
        snprintf(name, sizeof name, "prune options out of range, naming %s", bad[i].field);
        check(sp_journal_prune(journal, &options, &report) == SP_ERR_INVALID_ARGUMENT && last_field_is(bad[i].field),
              name);
    }
    check(memcmp(&report, &untouched, sizeof report) == 0, "a refused prune writes no report");
    /* The options in the very memory the report is written into: read before anything is written. */
    union {
        struct sp_prune_options options;
        struct sp_prune_report report;
    } shared;
    memset(&shared, 0, sizeof shared);
    shared.options = defaults;
    shared.options.batch = 0; /* the default */
    shared.options.max_time_ms = UINT64_MAX;
    check(sp_journal_prune(journal, &shared.options, &shared.report) == SP_OK && shared.report.complete &&
              shared.report.compacted == 0 && shared.report.batches == 1,
          "options sharing the report's memory");

    /* Vital signs and the ages of gaps, on a journal with index 2 missing. */
    struct sp_receiver *receiver = journaled_receiver(journal);
    struct sp_journal_vital_signs vitals;
    memset(&vitals, 0xAB, sizeof vitals);
    check(sp_journal_vitals(journal, &vitals) == SP_OK && vitals.pruned == 0 && vitals.forgotten == 0 &&
              vitals.has_size_bytes && vitals.size_bytes > 0 && !vitals.has_oldest_record_ms &&
              !vitals.has_last_delivery_ms && !vitals.has_oldest_gap_ms,
          "the vitals of an empty journal");
    check(sp_journal_vitals(NULL, &vitals) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"), "vitals of NULL");
    check(sp_journal_vitals(journal, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("out"), "vitals into NULL");
    if (receiver != NULL) {
        deliver(receiver, "{\"event\":\"bonusGranted\",\"index\":1}");
        deliver(receiver, "{\"event\":\"bonusGranted\",\"index\":3}");
        struct sp_event *event = NULL;
        struct sp_claim claim;
        static const char four[] = "{\"event\":\"bonusGranted\",\"index\":4}";
        check(sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)four, strlen(four), &event) ==
                      SP_OK &&
                  !sp_event_reply_pruned(event),
              "an event not begun holds no pruned reply");
        check(sp_event_begin(event, &claim) == SP_OK && claim.attempt == 1 && !sp_event_reply_pruned(event),
              "a first delivery's reply was never pruned");
        sp_event_free(event);
        sp_receiver_free(receiver);
    }
    check(!sp_event_reply_pruned(NULL), "a NULL event holds no claim");
    memset(&vitals, 0xAB, sizeof vitals);
    check(sp_journal_vitals(journal, &vitals) == SP_OK && vitals.has_oldest_record_ms &&
              vitals.has_last_delivery_ms && vitals.has_oldest_gap_ms &&
              vitals.oldest_gap_ms <= vitals.last_delivery_ms,
          "the vitals date the stored replies, the last delivery and the gap");
    static struct sp_index_ranges untouched_ranges;
    struct sp_index_ranges *ranges = &untouched_ranges;
    const size_t bad_limits[] = {0, 1000001, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        check(sp_journal_missing_older_than(journal, 0, bad_limits[i], &ranges) == SP_ERR_INVALID_ARGUMENT &&
                  last_field_is("limit") && ranges == &untouched_ranges,
              "a limit out of range is refused, naming limit");
    }
    check(sp_journal_missing_older_than(NULL, 0, 1, &ranges) == SP_ERR_INVALID_ARGUMENT && last_field_is("journal"),
          "missing_older_than of NULL");
    check(sp_journal_missing_older_than(journal, 0, 1, NULL) == SP_ERR_INVALID_ARGUMENT && last_field_is("out"),
          "missing_older_than into NULL");
    check(sp_journal_missing_older_than(journal, 0, 1000000, &ranges) == SP_OK && ranges->len == 1 &&
              ranges->ranges[0].first == 2 && ranges->ranges[0].last == 2,
          "every gap is older than 0 ms");
    sp_index_ranges_free(ranges);
    ranges = &untouched_ranges;
    check(sp_journal_missing_older_than(journal, UINT64_MAX, 1, &ranges) == SP_OK && ranges->len == 0 &&
              ranges->ranges == NULL,
          "no gap is older than UINT64_MAX ms");
    sp_index_ranges_free(ranges);
    sp_index_ranges_free(NULL);

    sp_journal_free(journal);
    temp_journal_remove(&t);
}

/* Runs `sql` (no single quote in it) on the SQLite file at `path` from another process
   (python3): a second copy of SQLite in this one would release the library's locks on the file
   when it closed it. */
static int sql_on(const char *path, const char *sql) {
    char command[512];
    int n = snprintf(command, sizeof command,
                     "python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1], isolation_level=None)"
                     ".execute(sys.argv[2])' '%s' '%s'",
                     path, sql);
    return n > 0 && (size_t)n < sizeof command && system(command) == 0;
}

/* Staged statements handed in carelessly: parameters on the stack of a function that returned
   and text in a buffer freed before the finish (the library copies both: the sanitizers see any
   read of them later), a kind of garbage, the last error's message as the SQL, a SIZE_MAX
   length, and an event freed with its statements staged (nothing leaks, nothing runs). */
static int stage_credit(struct sp_event *event, int64_t id) {
    char *player = malloc(16);
    if (player == NULL) return 0;
    memcpy(player, "player-\xc3\xa9", 9);
    struct sp_sql_value params[] = {
        {SP_SQL_INT, id, NULL, 0},
        {SP_SQL_TEXT, 0, (const uint8_t *)player, 9},
    };
    static const char sql[] = "INSERT INTO credits (id, player) VALUES (?1, ?2)";
    sp_status got = sp_event_stage(event, sql, sizeof sql - 1, params, 2);
    memset(player, 'X', 16);
    free(player);
    memset(params, 0xAB, sizeof params);
    return got == SP_OK;
}

static void staged_carelessly(void) {
    struct temp_journal t;
    if (!temp_journal_make(&t)) return;
    struct sp_journal *journal;
    struct sp_receiver *receiver;
    if (!journaled_at(&t, 0, &journal, &receiver)) return;
    static const char first[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":1,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":900001,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    static const char second[] =
        "{\"event\":\"gameSessionBuyRefund\",\"index\":2,\"gameSessionIdentifier\":\"gs-1\","
        "\"playerIdentifier\":\"p-1\",\"transactionId\":900002,\"buyTransactionId\":1,\"gameSessionId\":5,"
        "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}";
    struct sp_str reply = {0};
    check(sql_on(t.path, "CREATE TABLE credits (id INTEGER PRIMARY KEY, player TEXT NOT NULL)"), "the ledger's table");
    static const char tidy[] = "DELETE FROM credits WHERE id = 0";
    static const char missing[] = "INSERT INTO no_such_table (id) VALUES (1)";

    struct sp_event *event = handled(receiver, first);
    check(sp_event_stage(event, tidy, sizeof tidy - 1, NULL, 0) == SP_ERR_INVALID_ARGUMENT && last_field_is("event"),
          "staging before begin is refused, naming the event");
    check(begun(event, SP_BEGIN_NEW) == 1, "attempt 1");
    check(sp_event_reply(event, true, NULL, &reply) == SP_OK, "a reply");
    check(sp_event_stage(event, tidy, sizeof tidy - 1, NULL, 0) == SP_OK, "a statement staged with the reply");
    check(stage_credit(event, 900001), "a credit staged from memory freed right after");
    struct sp_sql_value garbage;
    memset(&garbage, 0xA5, sizeof garbage);
    garbage.bytes = NULL;
    check(sp_event_stage(event, tidy, sizeof tidy - 1, &garbage, 1) == SP_ERR_INVALID_ARGUMENT &&
              last_field_is("params[0].kind"),
          "a kind of garbage is refused, naming it");
    check(sp_event_stage(event, tidy, SIZE_MAX, NULL, 0) == SP_ERR_INVALID_ARGUMENT && last_field_is("sql"),
          "a SIZE_MAX length is refused, naming sql");
    struct sp_str message = sp_last_error_message();
    check(sp_event_stage(event, message.ptr, message.len, NULL, 0) == SP_ERR_INVALID_ARGUMENT && last_field_is("sql"),
          "the last error's message as the SQL is copied, and refused: no statement a credit needs");
    check(sp_event_stage(event, missing, sizeof missing - 1, NULL, 0) == SP_OK, "a statement on a missing table");
    check(sp_event_finish(event, NULL, 0) == SP_ERR_JOURNAL && last_field_is("statements[2]"),
          "finish refuses the missing table, naming the third statement");
    sp_event_free(event); /* abandons: nothing ran, nothing leaks */

    event = handled(receiver, first);
    check(begun(event, SP_BEGIN_NEW) == 2, "attempt 2");
    check(sp_event_reply(event, true, NULL, &reply) == SP_OK, "a reply");
    check(sp_event_stage(event, tidy, sizeof tidy - 1, NULL, 0) == SP_OK && stage_credit(event, 900001),
          "the statement and the credit staged again");
    check(sp_event_finish(event, NULL, 0) == SP_OK, "finish runs them with the reply");
    sp_event_free(event);

    /* The credit is there once, byte for byte: staging it again on a repeat is refused. */
    event = handled(receiver, first);
    check(begun(event, SP_BEGIN_DONE) == 0 && !stage_credit(event, 900001) && last_field_is("event"),
          "a repeat stages nothing");
    sp_event_free(event);
    event = handled(receiver, second);
    check(begun(event, SP_BEGIN_NEW) == 1 && sp_event_reply(event, true, NULL, &reply) == SP_OK, "another refund");
    static const char count[] =
        "INSERT INTO credits (id, player) VALUES (1, CASE WHEN (SELECT count(*) FROM credits WHERE id = 900001 AND "
        "player = 'player-\xc3\xa9') = 1 THEN 'once' END)"; /* NULL, refused, unless the first credit is there once */
    check(sp_event_stage(event, count, sizeof count - 1, NULL, 0) == SP_OK && sp_event_finish(event, NULL, 0) == SP_OK,
          "the first credit is there once, with the text as staged");
    sp_event_free(event);
    struct sp_journal_stats s;
    check(sp_journal_status(journal, &s) == SP_OK && s.handled == 2, "two handled");
    sp_receiver_free(receiver);
    sp_journal_free(journal);
    temp_journal_remove(&t);
}

int main(void) {
    struct sp_receiver *receiver = new_receiver();
    if (receiver == NULL) return 1;
    last_error_as_argument(receiver);
    written_fields(receiver);
    shared_reads(receiver);
    huge_lengths(receiver);
    records(receiver);
    balance_replies(receiver);
    exiting_threads(receiver);
    journal_operators();
    no_longer_yours();
    retention_carelessly();
    staged_carelessly();
    sp_receiver_free(receiver);
    printf("careless_host: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
