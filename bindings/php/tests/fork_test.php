<?php

declare(strict_types=1);

// PHP-FPM's model: a master that opened the SQLite journal and handled an event forks its
// workers with pcntl_fork (in two waves, as a master forks again to replace workers); each worker
// handles one event of its own, through a receiver it builds on the journal it inherited or
// through the master's receiver, while the master goes on handling events between forks and while
// the workers run. Then the same with two native threads of the master inside the journal at
// every fork (as a C extension or library loaded into the master may have): a C helper, compiled
// here and loaded through FFI, begins and finishes events on them through the master's receiver.
// Every worker must succeed within a bounded time. Needs the pcntl extension in php-cli, and for
// the second part a C compiler (cc, or $CC): says SKIPPED without them.

require __DIR__ . '/helper.php';

use SlotPartner\Journal;
use SlotPartner\Outcome;
use SlotPartner\Receiver;

const WORKERS = 12;       // per wave
const DEADLINE = 30.0;    // seconds for a wave's workers: far beyond one event, and the 5 s lock time-out

if (!function_exists('pcntl_fork') || !function_exists('pcntl_waitpid') || !function_exists('posix_kill')) {
    echo "fork_test.php: SKIPPED: the pcntl (or posix) extension is not loaded in php-cli (" . PHP_BINARY . "); nothing was tested\n";
    echo "0 passed, 0 failed\n";
    exit(0);
}

function refundBody(int $transactionId): string
{
    return '{"event":"gameSessionBuyRefund","index":' . $transactionId . ',"gameSessionIdentifier":"gs-1","playerIdentifier":"fork-player",'
        . '"transactionId":' . $transactionId . ',"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1",'
        . '"gameId":12,"isMobile":false}';
}

/** Begins the event, finishing it when it is new; the claim's outcome. */
function handleOne(Receiver $receiver, int $transactionId): Outcome
{
    $event = $receiver->handle(TOKEN, '127.0.0.1', refundBody($transactionId));
    $claim = $event->begin();
    if ($claim->outcome === Outcome::New) {
        $event->reply(true);
        $event->finish();
    }
    return $claim->outcome;
}

/**
 * Ends a forked worker at once with $code: no shutdown functions (the master's temporary
 * directory stays), no destructors, as a worker process of PHP-FPM ends its own way.
 */
function workerExit(int $code): never
{
    FFI::cdef('void _exit(int status);')->_exit($code);
    exit($code); // not reached
}

/** What a worker does: its event, new, then its repeat answered from the journal. */
function worker(Journal $journal, Receiver $masters, int $n, int $id): never
{
    $code = 1;
    try {
        $receiver = $n % 2 === 0 ? new Receiver(TOKEN, sources: 'any', journal: $journal) : $masters;
        $first = handleOne($receiver, $id);
        $again = handleOne($receiver, $id);
        if ($first !== Outcome::New || $again !== Outcome::Done) {
            fwrite(STDERR, "worker $n: event $id: {$first->name}, then {$again->name}; expected New, then Done\n");
        } else {
            $code = 0;
        }
    } catch (Throwable $e) {
        fwrite(STDERR, "worker $n: " . get_class($e) . ': ' . $e->getMessage() . "\n");
    }
    workerExit($code);
}

/**
 * The master: forks WORKERS workers (handling events $firstId...), using the journal itself
 * before each fork and while they run, and waits for them until DEADLINE, killing the rest.
 * Returns how many succeeded; adds the master's own events to $masterHandled.
 */
function wave(Journal $journal, Receiver $receiver, int $firstId, int &$nextOwn, int &$masterHandled, string $what): int
{
    $pids = [];
    for ($n = 0; $n < WORKERS; $n++) {
        if (handleOne($receiver, ++$nextOwn) === Outcome::New) {
            $masterHandled++;
        }
        $pid = pcntl_fork();
        if ($pid === 0) {
            worker($journal, $receiver, $n, $firstId + $n);
        }
        T::true($pid > 0, "$what: fork $n");
        if ($pid > 0) {
            $pids[$pid] = $n;
        }
        usleep(random_int(1_000, 5_000));
    }
    $done = [];
    $deadline = microtime(true) + DEADLINE;
    while (count($done) < count($pids) && microtime(true) < $deadline) {
        if (handleOne($receiver, ++$nextOwn) === Outcome::New) {
            $masterHandled++;
        }
        while (($pid = pcntl_waitpid(-1, $status, WNOHANG)) > 0) {
            if (isset($pids[$pid])) {
                $done[$pid] = pcntl_wifexited($status) && pcntl_wexitstatus($status) === 0;
            }
        }
        usleep(5_000);
    }
    foreach ($pids as $pid => $n) {
        if (!isset($done[$pid])) {
            posix_kill($pid, SIGKILL);
            pcntl_waitpid($pid, $status);
            $done[$pid] = false;
            T::fail("$what: worker $n still running after " . DEADLINE . ' s: killed');
        }
    }
    return count(array_filter($done));
}

T::test('pcntl_fork workers of a master that used the journal each handle their event', function (): void {
    $journal = new Journal('sqlite:' . tempDir() . '/journal.db');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    T::eq(Outcome::New, handleOne($receiver, 1), 'the master handles an event before it forks');
    $masterHandled = 1;
    $nextOwn = 1_000_000;
    $workersHandled = 0;
    foreach ([1, 2] as $wave) {
        $ok = wave($journal, $receiver, 100 * $wave, $nextOwn, $masterHandled, "wave $wave");
        T::eq(WORKERS . '/' . WORKERS, $ok . '/' . WORKERS, "wave $wave: workers that handled their event");
        $workersHandled += $ok;
    }
    T::eq($workersHandled + $masterHandled, $journal->status()->handled, 'the journal counts every event handled once');
});

/** Two native threads beginning and finishing events through a receiver, until stopped. */
const BUSY_C = <<<'C'
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include "slotpartner.h"

static atomic_int stop;
static atomic_long handled, failed;
static pthread_t threads[2];
static const sp_receiver *receiver;

static void *busy(void *arg) {
    long t = (long)(intptr_t)arg;
    char body[640];
    for (long n = 1; !atomic_load(&stop); n++) {
        /* 0.3 to 1 ms between events (a server's own work): back to back, two threads could keep
         * SQLite's write lock from the workers longer than the lock time-out. */
        struct timespec think = {0, (300 + (n * 7919 + t * 104729) % 700) * 1000L};
        nanosleep(&think, NULL);
        long id = 5000000 + t * 1000000 + n;
        int len = snprintf(body, sizeof body,
                           "{\"event\":\"gameSessionBuyRefund\",\"index\":%ld,\"gameSessionIdentifier\":\"gs-1\","
                           "\"playerIdentifier\":\"fork-player\",\"transactionId\":%ld,\"buyTransactionId\":1,"
                           "\"gameSessionId\":5,\"partnerGameRequestIdentifier\":\"req-1\",\"gameId\":12,"
                           "\"isMobile\":false}",
                           id, id);
        sp_event *event = NULL;
        sp_claim claim;
        struct sp_str reply;
        if (sp_receiver_handle(receiver, "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f", "127.0.0.1", NULL,
                               (const uint8_t *)body, (size_t)len, &event) == SP_OK &&
            sp_event_begin(event, &claim) == SP_OK && claim.outcome == SP_BEGIN_NEW &&
            sp_event_reply(event, true, NULL, &reply) == SP_OK && sp_event_finish(event, NULL, 0) == SP_OK) {
            atomic_fetch_add(&handled, 1);
        } else {
            atomic_fetch_add(&failed, 1);
        }
        sp_event_free(event);
    }
    return NULL;
}

int busy_start(void *r) {
    receiver = r;
    for (long t = 0; t < 2; t++) {
        if (pthread_create(&threads[t], NULL, busy, (void *)(intptr_t)t) != 0) {
            return -1;
        }
    }
    return 0;
}

long busy_stop(long *failures) {
    atomic_store(&stop, 1);
    for (int t = 0; t < 2; t++) {
        pthread_join(threads[t], NULL);
    }
    *failures = atomic_load(&failed);
    return atomic_load(&handled);
}
C;

/** The helper built against the library the binding loaded, loaded through FFI; null when no C compiler. */
function busyHelper(): ?FFI
{
    $cc = getenv('CC') ?: 'cc';
    exec('command -v ' . escapeshellarg($cc) . ' 2>/dev/null', $found, $rc);
    if ($rc !== 0) {
        return null;
    }
    $library = (string) realpath(getenv('SLOTPARTNER_LIB') ?: ROOT . '/target/release/libslotpartner.so');
    $dir = tempDir();
    file_put_contents("$dir/busy.c", BUSY_C);
    // The helper needs the library by its SONAME; the binding loaded that very file first (its
    // Journal exists), so the helper shares the binding's copy of the library and its journal.
    symlink($library, "$dir/libslotpartner.so");
    symlink($library, "$dir/libslotpartner.so.0");
    $command = implode(' ', array_map('escapeshellarg', [
        $cc, '-std=c11', '-Wall', '-Wextra', '-Werror', '-O2', '-shared', '-fPIC', '-pthread', '-I' . ROOT . '/include',
        "$dir/busy.c", '-o', "$dir/busy.so", "-L$dir", '-lslotpartner', "-Wl,-rpath,$dir",
    ]));
    exec($command . ' 2>&1', $output, $rc);
    if ($rc !== 0) {
        throw new RuntimeException("building the helper failed: $command\n" . implode("\n", $output));
    }
    return FFI::cdef('int busy_start(void *receiver); long busy_stop(long *failures);', "$dir/busy.so");
}

T::test('the same while native threads of the master are inside the journal at every fork', function (): void {
    $journal = new Journal('sqlite:' . tempDir() . '/journal.db');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $busy = busyHelper();
    if ($busy === null) {
        echo "fork_test.php: SKIPPED: native threads in the master: no C compiler (cc, or \$CC)\n";
        return;
    }
    T::eq(Outcome::New, handleOne($receiver, 1), 'the master handles an event before it forks');
    $masterHandled = 1;
    $nextOwn = 1_000_000;
    T::eq(0, $busy->busy_start($receiver->nativeHandle()), 'the native threads start');
    usleep(50_000); // they are well inside the journal
    $oks = [];
    foreach ([1, 2] as $wave) {
        $oks[] = wave($journal, $receiver, 100 * $wave, $nextOwn, $masterHandled, "wave $wave with native threads");
    }
    $failures = FFI::new('long');
    $threadsHandled = $busy->busy_stop(FFI::addr($failures));
    foreach ($oks as $i => $ok) {
        T::eq(WORKERS . '/' . WORKERS, $ok . '/' . WORKERS, 'wave ' . ($i + 1) . ' with native threads: workers that handled their event');
    }
    T::eq(0, $failures->cdata, 'the native threads never failed');
    T::true($threadsHandled > 0, 'the native threads were busy with the journal');
    T::eq(array_sum($oks) + $masterHandled + $threadsHandled, $journal->status()->handled, 'the journal counts every event handled once');
});

T::finish();
