<?php

declare(strict_types=1);

/*
 * php_loop.php: the PHP-FPM worker's path of benches/e2e/library.php, many requests in one
 * php-cli process, no web server: for counting the instructions a request costs on the PHP side
 * (perf stat, callgrind), which a shared machine's wall time cannot show.
 *
 * Each request is what library.php does under PHP-FPM, from Endpoint::fromEnvironment() on:
 * the endpoint found by its key (the worker's first request makes it), Endpoint::handle() with
 * the method, token, peer and body serve() would read from $_SERVER and php://input, the same
 * logic (the credit staged, the reply built), the answer sent (into an output buffer, dropped),
 * the objects let go. Between requests the binding's static state is reset as PHP-FPM resets it
 * at a request's end (Native's and Library's statics; the preloaded classes and the FFI scope
 * stay, the library keeps its shared endpoint). The bodies (refunds and payouts alternating, new
 * indices and transaction ids) are all written before the first request.
 *
 *   php -d opcache.enable_cli=1 -d opcache.preload=bindings/php/preload.php -d ffi.enable=preload \
 *       benches/e2e/php_loop.php MEASURED [WARMUP=200] [JOURNAL_URL]
 *
 * Without JOURNAL_URL a new SQLite journal (with the ledger's `credits` table, as
 * benches/e2e/db.php makes it) in a new folder under /tmp, removed at the end; a PostgreSQL URL
 * must name a database whose journal and `credits` table exist already. The library is the
 * checkout's target/release/libslotpartner.so (or SLOTPARTNER_LIB). Prints the answers' status
 * counts and the CPU time of a measured request (getrusage, the library's included: noisy on a
 * shared machine) to stderr; exits non-zero when an answer is not 200.
 *
 * A request's instructions: run it twice with two values of MEASURED (the same WARMUP, and
 * `--bodies=N` with the larger, so that both runs write the same bodies) under
 * `perf stat -e instructions:u`, or under callgrind where the machine has no counters, and
 * divide the difference by the difference of MEASURED. With callgrind, the same difference of
 * ffi_call's inclusive count (callgrind_annotate --inclusive=yes) is what a request spends
 * inside the library; the rest is PHP's (the FFI extension's marshalling included). Run it in
 * a small environment (`env -i PATH=/usr/bin:/bin`): getenv() walks the whole environment,
 * which a PHP-FPM worker's (clear_env) is not. Under root, preloading needs
 * opcache.preload_user and the FFI scope from ffi.preload, as benches/e2e/run.py sets them:
 *
 *   php bindings/php/bin/slotpartner-preload-header /tmp/sp-preload.h
 *   env -i PATH=/usr/bin:/bin valgrind --tool=callgrind --trace-children=yes \
 *       php -d opcache.enable_cli=1 -d opcache.preload=bindings/php/preload.php \
 *       -d opcache.preload_user=nobody -d ffi.preload=/tmp/sp-preload.h -d ffi.enable=preload \
 *       benches/e2e/php_loop.php 1400 100 --bodies=1400      (then 400 100 --bodies=1400)
 *
 * (the largest callgrind.out.* is this process's; the other, the preloading child's).
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Endpoint;
use SlotPartner\Event;
use SlotPartner\Library;
use SlotPartner\Native;

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

const TOKEN = '6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f';
const PEER = '127.0.0.1';

$args = array_values(array_filter(array_slice($argv, 1), static fn (string $a): bool => !str_starts_with($a, '--')));
$bodiesOption = array_values(array_filter($argv, static fn (string $a): bool => str_starts_with($a, '--bodies=')));
$measured = (int) ($args[0] ?? 1000);
$warmup = (int) ($args[1] ?? 200);
$journal = $args[2] ?? null;
$bodies = max($measured, $bodiesOption === [] ? 0 : (int) substr($bodiesOption[0], 9));

$folder = null;
if ($journal === null) {
    $folder = sys_get_temp_dir() . '/php-loop-' . getmypid();
    mkdir($folder);
    $journal = 'sqlite:' . $folder . '/journal.db';
    new SlotPartner\Journal($journal);   // created with its schema, then closed
    $pdo = new PDO($journal, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    $pdo->exec('PRAGMA journal_mode = WAL');
    $pdo->exec('CREATE TABLE IF NOT EXISTS credits (kind TEXT NOT NULL, transaction_id BIGINT NOT NULL, '
        . 'player TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (kind, transaction_id))');
    $pdo = null;
}
putenv('SLOTPARTNER_TOKEN=' . TOKEN);
putenv('SLOTPARTNER_SOURCES=' . PEER);
putenv('SLOTPARTNER_JOURNAL=' . $journal);

/** The body of request $n (from 0): refunds and payouts alternating, index and transaction id new. */
function body(int $n, int $base): string
{
    $index = $base + $n;
    $tx = 500_000_000 + $base * 2 + $n;
    return $n % 2 === 0
        ? '{"event":"gameSessionBuyRefund","index":' . $index . ',"gameSessionIdentifier":"9b7c1d2e-aaaa-4bbb-8ccc-123456789abc",'
            . '"playerIdentifier":"svc-player-1","playerPartnerIdentifier":"partner-user-1","transactionId":' . $tx
            . ',"buyTransactionId":124000001,"gameSessionId":5500001,"partnerGameRequestIdentifier":"pgr-1","gameId":1001,"isMobile":false}'
        : '{"event":"jackpotPayout","index":' . $index . ',"jackpotIdentifier":"jp-minor","playerIdentifier":"svc-player-2",'
            . '"currencyISO4217":"EUR","moneyWon":1500,"coinsWon":0,"isMoney":true,"epochReleasedMillis":1718064000000,'
            . '"isPrimary":false,"transactionId":' . $tx . ',"buyTransactionId":124000002,"partnerGameRequestIdentifier":"pgr-2",'
            . '"gameSessionId":5500002,"gameId":1002}';
}

// Indices go on from where an earlier run on the same journal stopped (a PostgreSQL one).
$base = $folder === null ? (int) (microtime(true) * 1000) % 1_000_000_000 * 10 : 1;
$warmBodies = [];
for ($n = 0; $n < $warmup; $n++) {
    $warmBodies[] = body($n, $base);
}
$measuredBodies = [];
for ($n = 0; $n < $bodies; $n++) {
    $measuredBodies[] = body($warmup + $n, $base);
}
$measuredBodies = array_slice($measuredBodies, 0, $measured);

$credit = 'INSERT INTO credits (kind, transaction_id, player, amount) VALUES '
    . (str_starts_with($journal, 'postgres') ? '($1, $2, $3, $4)' : '(?, ?, ?, ?)')
    . ' ON CONFLICT (kind, transaction_id) DO NOTHING';

/** What PHP-FPM forgets at a request's end: the binding's static properties. */
$reset = Closure::bind(static function (): void {
    Native::$instance = null;
    Native::$statusNames = [];
}, null, Native::class);
$resetLibrary = Closure::bind(static function (): void {
    Library::$ffi = null;
    Library::$source = '';
}, null, Library::class);

$statuses = [];
/** One request, as library.php serves it. */
$request = static function (string $body) use ($credit, $reset, $resetLibrary, &$statuses): void {
    $endpoint = Endpoint::fromEnvironment(['reject_unknown_events' => true, 'claim_at_finish' => true, 'optimistic' => true]);
    $response = $endpoint->handle('POST', TOKEN, PEER, null, $body, static function (Event $e) use ($credit): string {
        $player = $e->playerPartnerIdentifier ?? $e->playerIdentifier;
        if ($e instanceof BalanceQuery) {
            return $player === 'unknown-player' ? $e->reply(false, 'player unknown-player is not known') : $e->replyBalance(100000, null, 0);
        }
        $refund = $e instanceof BuyRefund;   // else a JackpotPayout: the others are refused
        $e->stage($credit, [$refund ? 'refund' : 'payout', $e->transactionId, $player, $refund ? 0 : $e->moneyWon]);
        return $e->reply(true);
    });
    ob_start();
    $response->send();
    ob_end_clean();
    if ($response->log !== '') {
        error_log($response->log);
    }
    $statuses[$response->status] = ($statuses[$response->status] ?? 0) + 1;
    $endpoint = null;
    $response = null;
    $reset();
    $resetLibrary();
};

foreach ($warmBodies as $body) {
    $request($body);
}
$cpu = static function (): int {
    $usage = getrusage();
    return ($usage['ru_utime.tv_sec'] + $usage['ru_stime.tv_sec']) * 1000000 + $usage['ru_utime.tv_usec'] + $usage['ru_stime.tv_usec'];
};
$start = $cpu();
foreach ($measuredBodies as $body) {
    $request($body);
}
$spent = $cpu() - $start;

ksort($statuses);
fwrite(STDERR, 'statuses: ' . json_encode($statuses) . ' (' . ($warmup + $measured) . ' requests; the library by ' . Library::source() . ")\n");
fwrite(STDERR, sprintf("cpu: %.1f µs a measured request (user and system, getrusage; the library's included)\n", $measured > 0 ? $spent / $measured : 0));
if ($folder !== null) {
    foreach (glob($folder . '/*') ?: [] as $file) {
        unlink($file);
    }
    rmdir($folder);
}
exit(array_keys($statuses) === [200] || $statuses === [] ? 0 : 1);
