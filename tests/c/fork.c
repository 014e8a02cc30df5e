/* A pre-forking C server's use of the journal: a parent that opened a journal and keeps two
 * threads busy with it forks children while those threads run; every child handles one event of
 * its own in the journal it inherited. Run by `make test-fork` (tests/c/fork.sh) on SQLite and
 * PostgreSQL. Built plainly: under GCC's AddressSanitizer a child may hang in malloc on the
 * sanitizer allocator's lock, inherited held from a parent thread that was allocating.
 *
 * The parent opens the journal (JOURNAL_URL), handles one event itself, starts two threads that
 * begin and finish events in a loop, and forks CHILDREN (30) children a few milliseconds apart
 * while the threads run. Each child builds its own receiver, on the journal handle it inherited
 * (even children) or on the same URL opened again (odd children), begins one event no one else
 * delivers (NEW, attempt 1), finishes it, delivers it again (DONE with the stored reply) and
 * exits 0. The parent waits for the children until a deadline, kills the ones still running
 * (counted as hung), stops its threads and checks the journal's count of handled deliveries.
 *
 * Usage: fork JOURNAL_URL RUN. RUN (a small number) keeps the keys of several runs on one
 * journal apart. Prints "FAIL ..." lines, "fork: N/30 children handled their event (H hung,
 * F failed)" and "fork: N passed, N failed"; exits 0 only when all 30 children succeeded and
 * every check passed. */
#define _POSIX_C_SOURCE 200809L /* kill, nanosleep, strdup */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slotpartner.h"

#define TOKEN "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
#define SOURCE "127.0.0.1"
#define CHILDREN 30
#define THREADS 2
/* How long the parent waits for all children after the last fork before it kills the rest: far
 * beyond what one event takes (milliseconds) and beyond the journal's lock time-out (5 s), after
 * which a child stuck on a lock would have failed with "database is locked". */
#define DEADLINE_SECONDS 30
#define WATCHDOG_SECONDS 120

static int passed, failed;
static atomic_int stop;
static atomic_long thread_handled, thread_failed;
static const char *journal_url;
static int64_t base; /* keys of this run: RUN * 10,000,000 + ... */

static void check(int ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s\n", what);
        fflush(stdout);
    }
}

static size_t refund_body(char *out, size_t cap, int64_t index, int64_t transaction) {
    return (size_t)snprintf(out, cap,
                            "{\"event\":\"gameSessionBuyRefund\",\"index\":%" PRId64 ",\"gameSessionIdentifier\":\"gs-1\","
                            "\"playerIdentifier\":\"fork-player\",\"transactionId\":%" PRId64 ",\"buyTransactionId\":1,"
                            "\"gameSessionId\":5551,\"partnerGameRequestIdentifier\":\"req-1\",\"gameId\":12,"
                            "\"isMobile\":false}",
                            index, transaction);
}

static sp_receiver *new_receiver(const sp_journal *journal) {
    sp_receiver_config *config = NULL;
    sp_receiver *r = NULL;
    if (sp_receiver_config_new(&config) != SP_OK || sp_receiver_config_add_token(config, TOKEN) != SP_OK ||
        sp_receiver_config_set_sources(config, "any") != SP_OK ||
        sp_receiver_config_set_journal(config, journal) != SP_OK || sp_receiver_new(config, &r) != SP_OK) {
        r = NULL;
    }
    sp_receiver_config_free(config);
    return r;
}

static sp_journal *open_journal(void) {
    sp_journal_config *config = NULL;
    sp_journal *journal = NULL;
    if (sp_journal_config_new(journal_url, &config) != SP_OK || sp_journal_open(config, &journal) != SP_OK) {
        journal = NULL;
    }
    sp_journal_config_free(config);
    return journal;
}

/* Delivers the refund (index, transaction) to `r`: SP_BEGIN_NEW when this delivery claimed and
 * finished it, SP_BEGIN_DONE when it was answered from the journal, -1 on a failure (the
 * reason written to `why`). */
static int deliver(const sp_receiver *r, int64_t index, int64_t transaction, char *why, size_t cap) {
    char body[1024];
    sp_event *event = NULL;
    sp_claim claim;
    struct sp_str reply = {NULL, 0};
    int outcome = -1;
    refund_body(body, sizeof body, index, transaction);
    if (sp_receiver_handle(r, TOKEN, SOURCE, NULL, (const uint8_t *)body, strlen(body), &event) != SP_OK) {
        snprintf(why, cap, "sp_receiver_handle: %s", sp_last_error_message().ptr);
    } else if (sp_event_begin(event, &claim) != SP_OK) {
        snprintf(why, cap, "sp_event_begin: %s", sp_last_error_message().ptr);
    } else if (claim.outcome == SP_BEGIN_DONE) {
        outcome = SP_BEGIN_DONE;
    } else if (claim.outcome != SP_BEGIN_NEW) {
        snprintf(why, cap, "sp_event_begin answered %d", (int)claim.outcome);
    } else if (sp_event_reply(event, true, NULL, &reply) != SP_OK) {
        snprintf(why, cap, "sp_event_reply: %s", sp_last_error_message().ptr);
    } else if (sp_event_finish(event, NULL, 0) != SP_OK) {
        snprintf(why, cap, "sp_event_finish: %s", sp_last_error_message().ptr);
    } else {
        outcome = SP_BEGIN_NEW;
    }
    sp_event_free(event);
    return outcome;
}

struct worker {
    int t;
    const sp_receiver *receiver;
};

static void pause_us(long us);

/* A parent thread: new events, one after another, until told to stop, with 0.3 to 1 ms between
 * them (a server's own work and network): back to back, two threads of one process can keep
 * SQLite's write lock from other processes longer than the lock time-out, which is not what this
 * test is about. */
static void *busy(void *arg) {
    const struct worker *w = arg;
    char why[512];
    for (int64_t n = 0; !atomic_load(&stop); n++) {
        pause_us(300 + (long)((n * 7919 + w->t * 104729) % 700));
        int64_t index = base + 1000000 + (int64_t)w->t * 1000000 + n;
        if (deliver(w->receiver, index, index, why, sizeof why) == SP_BEGIN_NEW) {
            atomic_fetch_add(&thread_handled, 1);
        } else if (atomic_fetch_add(&thread_failed, 1) < 5) {
            printf("FAIL parent thread %d, event %" PRId64 ": %s\n", w->t, n, why);
            fflush(stdout);
        }
    }
    return NULL;
}

/* A child's whole life: one event of its own, then its repeat. Returns the exit status. */
static int child(int i, const sp_journal *inherited) {
    char why[512] = "";
    sp_journal *reopened = NULL;
    const sp_journal *journal = inherited;
    if (i % 2 == 1) {
        reopened = open_journal();
        if (reopened == NULL) {
            fprintf(stderr, "child %d: sp_journal_open: %s\n", i, sp_last_error_message().ptr);
            return 1;
        }
        journal = reopened;
    }
    sp_receiver *r = new_receiver(journal);
    int status = 1;
    int64_t index = base + 100 + i;
    if (r == NULL) {
        snprintf(why, sizeof why, "setting up a receiver: %s", sp_last_error_message().ptr);
    } else if (deliver(r, index, index, why, sizeof why) != SP_BEGIN_NEW) {
        /* why says it */
    } else if (deliver(r, index, index, why, sizeof why) != SP_BEGIN_DONE) {
        if (why[0] == '\0') {
            snprintf(why, sizeof why, "the repeat was not answered from the journal");
        }
    } else {
        status = 0;
    }
    if (status != 0) {
        fprintf(stderr, "child %d (%s journal): %s\n", i, i % 2 == 1 ? "reopened" : "inherited", why);
    }
    sp_receiver_free(r);
    sp_journal_free(reopened);
    return status;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void pause_ms(long ms) { pause_us(ms * 1000); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fork JOURNAL_URL RUN\n");
        return 2;
    }
    journal_url = argv[1];
    base = (int64_t)atoi(argv[2]) * 10000000;
    alarm(WATCHDOG_SECONDS); /* the whole run, stragglers or not */
    setvbuf(stdout, NULL, _IOLBF, 0);

    sp_journal *journal = open_journal();
    sp_receiver *receiver = journal != NULL ? new_receiver(journal) : NULL;
    if (receiver == NULL) {
        printf("FAIL setting up: %s\nfork: 0 passed, 1 failed\n", sp_last_error_message().ptr);
        return 1;
    }
    sp_journal_stats before, after;
    check(sp_journal_status(journal, &before) == SP_OK, "sp_journal_status before");
    char why[512] = "";
    int first = deliver(receiver, base + 1, base + 1, why, sizeof why);
    check(first == SP_BEGIN_NEW, "the parent handles an event before it forks");
    if (first != SP_BEGIN_NEW) {
        printf("  %s\n", why);
    }

    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){t, receiver};
        if (pthread_create(&threads[t], NULL, busy, &workers[t]) != 0) {
            printf("FAIL starting thread %d\nfork: %d passed, %d failed\n", t, passed, failed + 1);
            return 1;
        }
    }
    pause_ms(20); /* the threads are well inside the journal */

    pid_t pids[CHILDREN];
    int state[CHILDREN]; /* 0 running, 1 succeeded, 2 failed, 3 hung (killed) */
    srand((unsigned)getpid());
    for (int i = 0; i < CHILDREN; i++) {
        state[i] = 0;
        pids[i] = fork();
        if (pids[i] == 0) {
            int status = child(i, journal);
            fflush(NULL);
            _exit(status);
        }
        if (pids[i] < 0) {
            printf("FAIL fork %d: %s\n", i, strerror(errno));
            state[i] = 2;
        }
        pause_ms(1 + rand() % 5);
    }

    double deadline = now() + DEADLINE_SECONDS;
    int running = CHILDREN;
    for (int i = 0; i < CHILDREN; i++) {
        running -= state[i] != 0;
    }
    while (running > 0 && now() < deadline) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            pause_ms(10);
            continue;
        }
        for (int i = 0; i < CHILDREN; i++) {
            if (pids[i] == pid && state[i] == 0) {
                state[i] = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 1 : 2;
                if (state[i] == 2 && WIFSIGNALED(status)) {
                    printf("FAIL child %d died of signal %d\n", i, WTERMSIG(status));
                }
                running--;
            }
        }
    }
    for (int i = 0; i < CHILDREN; i++) {
        if (state[i] == 0) {
            printf("FAIL child %d (pid %d) still running after %d s: killed\n", i, (int)pids[i], DEADLINE_SECONDS);
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
            state[i] = 3;
        }
    }

    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }

    int ok = 0, hung = 0, bad = 0;
    for (int i = 0; i < CHILDREN; i++) {
        ok += state[i] == 1;
        bad += state[i] == 2;
        hung += state[i] == 3;
    }
    printf("fork: %d/%d children handled their event (%d hung, %d failed); the parent's %d threads handled %ld "
           "events meanwhile\n",
           ok, CHILDREN, hung, bad, THREADS, atomic_load(&thread_handled));
    check(ok == CHILDREN, "every child handled its event");
    check(atomic_load(&thread_failed) == 0, "the parent's threads never failed");
    check(atomic_load(&thread_handled) > 0, "the parent's threads were busy with the journal");
    check(sp_journal_status(journal, &after) == SP_OK, "sp_journal_status after");
    char what[160];
    uint64_t want = 1 + (uint64_t)atomic_load(&thread_handled) + (uint64_t)ok;
    snprintf(what, sizeof what, "the journal counts every event handled once (%" PRIu64 " more, want %" PRIu64 ")",
             after.handled - before.handled, want);
    check(after.handled - before.handled == want, what);

    sp_receiver_free(receiver);
    sp_journal_free(journal);
    printf("fork: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
