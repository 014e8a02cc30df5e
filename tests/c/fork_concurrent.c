/* Several threads of a journal-using process fork at the same time (a threaded server spawning
 * helpers from several threads) while four threads keep the journal busy, so that every fork's
 * handler has idle SQLite connections to close. Each child uses the journal it inherited once
 * (sp_journal_status) under alarm(10): a child forked while another fork's handler was inside
 * SQLite closing connections would hang there. Usage: fork_concurrent URL FORKERS FORKS_EACH.
 * Prints the counts; exits 0 only when every child succeeded. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
#define BUSY 4
#define MAX_FORKERS 16

static sp_journal *journal;
static sp_receiver *receiver;
static atomic_int stop;
static atomic_long ok, failed, hung, other, next_tx = 1;
static int forks_each;

static void *busy(void *unused) {
    (void)unused;
    char body[512];
    while (!atomic_load(&stop)) {
        long t = atomic_fetch_add(&next_tx, 1);
        snprintf(body, sizeof body,
                 "{\"event\":\"gameSessionBuyRefund\",\"index\":%ld,\"gameSessionIdentifier\":\"g\","
                 "\"playerIdentifier\":\"p\",\"transactionId\":%ld,\"buyTransactionId\":1,\"gameSessionId\":5,"
                 "\"partnerGameRequestIdentifier\":\"r\",\"gameId\":1,\"isMobile\":false}",
                 t, t);
        sp_event *ev = NULL;
        sp_claim claim;
        sp_str reply;
        if (sp_receiver_handle(receiver, TOKEN, "127.0.0.1", NULL, (const uint8_t *)body, strlen(body), &ev) == SP_OK &&
            sp_event_begin(ev, &claim) == SP_OK && claim.outcome == SP_BEGIN_NEW &&
            sp_event_reply(ev, true, NULL, &reply) == SP_OK) {
            sp_event_finish(ev, NULL, 0);
        }
        sp_event_free(ev);
        struct sp_journal_stats stats;
        sp_journal_status(journal, &stats);
    }
    return NULL;
}

static void *forker(void *unused) {
    (void)unused;
    for (int i = 0; i < forks_each; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            struct sp_journal_stats stats;
            if (sp_journal_status(journal, &stats) == SP_OK) {
                _exit(0);
            }
            fprintf(stderr, "child: %s\n", sp_last_error_message().ptr);
            _exit(1);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            atomic_fetch_add(&ok, 1);
        } else if (WIFEXITED(status)) {
            atomic_fetch_add(&failed, 1);
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
            atomic_fetch_add(&hung, 1);
        } else {
            atomic_fetch_add(&other, 1);
            fprintf(stderr, "child ended by signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: fork_concurrent URL FORKERS FORKS_EACH\n");
        return 2;
    }
    int forkers = atoi(argv[2]);
    forks_each = atoi(argv[3]);
    if (forkers < 1 || forkers > MAX_FORKERS || forks_each < 1) {
        fprintf(stderr, "fork_concurrent: 1 to %d forkers, at least 1 fork each\n", MAX_FORKERS);
        return 2;
    }
    sp_journal_config *jc = NULL;
    sp_receiver_config *rc = NULL;
    if (sp_journal_config_new(argv[1], &jc) != SP_OK || sp_journal_open(jc, &journal) != SP_OK) {
        fprintf(stderr, "fork_concurrent: journal: %s\n", sp_last_error_message().ptr);
        return 2;
    }
    sp_journal_config_free(jc);
    if (sp_receiver_config_new(&rc) != SP_OK || sp_receiver_config_add_token(rc, TOKEN) != SP_OK ||
        sp_receiver_config_set_sources(rc, "any") != SP_OK || sp_receiver_config_set_journal(rc, journal) != SP_OK ||
        sp_receiver_new(rc, &receiver) != SP_OK) {
        fprintf(stderr, "fork_concurrent: receiver: %s\n", sp_last_error_message().ptr);
        return 2;
    }
    sp_receiver_config_free(rc);
    pthread_t busy_threads[BUSY], forkers_threads[MAX_FORKERS];
    for (int i = 0; i < BUSY; i++) {
        pthread_create(&busy_threads[i], NULL, busy, NULL);
    }
    for (int i = 0; i < forkers; i++) {
        pthread_create(&forkers_threads[i], NULL, forker, NULL);
    }
    for (int i = 0; i < forkers; i++) {
        pthread_join(forkers_threads[i], NULL);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < BUSY; i++) {
        pthread_join(busy_threads[i], NULL);
    }
    long children = (long)forkers * forks_each;
    printf("fork_concurrent: %d forking threads, %ld children: ok=%ld failed=%ld hung=%ld other=%ld\n", forkers,
           children, atomic_load(&ok), atomic_load(&failed), atomic_load(&hung), atomic_load(&other));
    sp_receiver_free(receiver);
    sp_journal_free(journal);
    return atomic_load(&ok) == children ? 0 : 1;
}
