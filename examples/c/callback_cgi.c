/* callback_cgi: the service's callbacks as a CGI program, set up by SLOTPARTNER_TOKEN, _SOURCES,
 * _JOURNAL, ... (sp_endpoint_from_environment), its ledger the directory SLOTPARTNER_WALLET. */
#define _POSIX_C_SOURCE 200809L /* setenv, fsync, link, dprintf */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "slotpartner.h"

/* The ledger: a file per credit, whole or absent (written and synced aside, then linked into
 * place); a second credit of the same transaction finds it (EEXIST) and changes nothing. */
static const char *credit(const char *kind, long long transaction, long long amount) {
    const char *wallet = getenv("SLOTPARTNER_WALLET");
    char path[4096], aside[4128];
    if (wallet == NULL || *wallet == '\0') return NULL;
    snprintf(path, sizeof path, "%s/%s-%lld", wallet, kind, transaction);
    snprintf(aside, sizeof aside, "%s.%ld", path, (long)getpid());
    int fd = open(aside, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int ok = fd >= 0 && dprintf(fd, "%lld\n", amount) > 0 && fsync(fd) == 0;
    ok = (fd < 0 || close(fd) == 0) && ok && (link(aside, path) == 0 || errno == EEXIST);
    unlink(aside);
    return ok ? NULL : "the ledger is down";
}

/* The business logic: NULL when the event's reply is built, else why it failed (answered 503). */
static const char *handle(sp_event *e) {
    sp_str reply, player = e->balance_query != NULL ? e->balance_query->player_partner_identifier : (sp_str){"", 0};
    const char *failed = NULL;
    fprintf(stderr, "callback_cgi: %s%s\n", e->name.ptr, e->index_unreadable ? ", index unreadable" : "");
    if (e->kind == SP_EVENT_KIND_BUY_REFUND) failed = credit("refund", e->buy_refund->transaction_id, 0);
    if (e->kind == SP_EVENT_KIND_JACKPOT_PAYOUT)
        failed = credit("payout", e->jackpot_payout->transaction_id, e->jackpot_payout->money_won);
    if (e->kind == SP_EVENT_KIND_BALANCE_QUERY && (player.ptr == NULL || strcmp(player.ptr, "unknown-player") != 0))
        return sp_event_reply_balance(e, 100000, NULL, 0, &reply) == SP_OK ? NULL : sp_last_error_message().ptr;
    if (failed == NULL && sp_event_reply(e, e->balance_query == NULL, e->balance_query ? "player unknown-player is not known" : NULL, &reply) != SP_OK)
        failed = sp_last_error_message().ptr;
    return failed;
}

int main(void) {
    sp_endpoint *endpoint = NULL;
    sp_exchange *x = NULL;
    setenv("SLOTPARTNER_REJECT_UNKNOWN_EVENTS", "1", 0); /* this logic knows no other event: 400 */
    if (sp_endpoint_from_environment(&endpoint) != SP_OK || sp_endpoint_receive_cgi(endpoint, &x) != SP_OK) {
        uint16_t status = 500;
        sp_str body = {"", 0}; /* what the library says a refused configuration deserves */
        fprintf(stderr, "callback_cgi: configuration: %s\n", sp_last_error_message().ptr);
        sp_last_error_response(&status, &body);
        printf("Status: 500 Internal Server Error\r\nContent-Type: application/json; charset=utf-8\r\n\r\n%s", body.ptr);
    } else {
        if (x->event != NULL) sp_exchange_complete(x, handle(x->event), NULL, 0);
        if (x->response.log.len > 0) fprintf(stderr, "callback_cgi: %s\n", x->response.log.ptr);
        sp_exchange_write_cgi(x, STDOUT_FILENO);
    }
    sp_exchange_free(x);
    sp_endpoint_free(endpoint);
    return 0;
}
