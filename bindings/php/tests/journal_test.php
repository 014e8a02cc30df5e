<?php

declare(strict_types=1);

// The delivery journal through the binding, on SQLite in a temporary directory: repeats answered
// from the journal byte for byte without running the logic, conflicts, abandoned and dropped
// claims, busy claims, balance queries, refused deliveries, gaps, the FFI calls per journaled
// callback, and examples/callback.php with SLOTPARTNER_JOURNAL under four php -S workers.

require __DIR__ . '/helper.php';

use SlotPartner\BalanceQuery;
use SlotPartner\BusyException;
use SlotPartner\ClaimLostException;
use SlotPartner\ConfigurationException;
use SlotPartner\ConflictException;
use SlotPartner\Journal;
use SlotPartner\JournalException;
use SlotPartner\JournalStatus;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\SlotPartnerException;
use SlotPartner\ValidationException;

function refund(int $transactionId, int $index, int $gameId = 12): string
{
    return '{"event":"gameSessionBuyRefund","index":' . $index . ',"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
        . '"transactionId":' . $transactionId . ',"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1",'
        . '"gameId":' . $gameId . ',"isMobile":false}';
}

/** A fresh SQLite journal URL in a temporary directory. */
function journalUrl(string $name = 'journal.db'): string
{
    return 'sqlite:' . tempDir() . '/' . $name;
}

/** How often the partner's logic ran (see callback()). */
$runs = 0;

/**
 * The flow the README shows: begin, then the logic and finish only for a new delivery.
 *
 * @return array{0: int, 1: string} HTTP status and body
 */
function callback(Receiver $receiver, string $body, bool $success = true): array
{
    global $runs;
    try {
        $event = $receiver->handle(TOKEN, '127.0.0.1', $body);
        $claim = $event->begin();
    } catch (SlotPartnerException $e) {
        return [(int) $e->httpStatus, (string) $e->responseBody];
    }
    if ($claim->outcome === Outcome::Done) {
        return [200, (string) $claim->reply];
    }
    $runs++;
    $reply = $success ? $event->reply(true) : $event->reply(false, 'refused run ' . $runs);
    $event->finish();
    return [$event->replyHttpStatus(), $reply];
}

T::test('a repeat is answered from the journal byte for byte without running the logic', function () use (&$runs): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $runs = 0;
    $first = callback($receiver, refund(900001, 1), false);
    T::eq([200, '{"refund":{"success":false,"errorMessage":"refused run 1"}}'], $first, 'the first reply');
    T::eq($first, callback($receiver, str_replace(',', ' , ', refund(900001, 1))), 'a repeat formatted differently');
    T::eq($first, callback($receiver, refund(900001, 1)), 'the same bytes again');
    T::eq(1, $runs, 'the logic ran once');
    $event = $receiver->parse(refund(900001, 1));
    $claim = $event->begin();
    T::eq(Outcome::Done, $claim->outcome, 'done');
    T::eq(0, $claim->attempt, 'no attempt for done');
    T::eq($first[1], $claim->reply, 'the stored reply');
    T::eq(200, $event->replyHttpStatus(), 'sent with 200');
    $event->finish();   // nothing to do
    $event->abandon();  // nothing to do
    $status = $journal->status();
    T::eq([1, 3, 0, 0], [$status->handled, $status->replayed, $status->inProgress, $status->missing], 'handled, replayed, in progress, missing');
});

T::test('a new delivery: attempt 1, the last reply built is stored, finish twice does nothing', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl()));
    $event = $receiver->parse(refund(900002, 1));
    $claim = $event->begin();
    T::eq([Outcome::New, 1, null], [$claim->outcome, $claim->attempt, $claim->reply], 'new, attempt 1, no reply');
    $event->reply(false, 'first try');
    $reply = $event->reply(true);
    $event->finish();
    $event->finish();
    T::eq([200, $reply], callback($receiver, refund(900002, 1)), 'the last reply built was stored');
    $event = $receiver->parse(refund(900003, 1));
    $event->begin();
    $e = T::throws(ConfigurationException::class, fn () => $event->finish(), 'no reply built');
    T::eq('reply', $e?->field, 'the field named');
    $event->finish('{"refund":{"success":true,"errorMessage":"stored"}}');
    T::eq([200, '{"refund":{"success":true,"errorMessage":"stored"}}'], callback($receiver, refund(900003, 1)), 'an explicit reply stored');
});

T::test('a conflict names the transactionId, is answered 409, and the first stays', function () use (&$runs): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $runs = 0;
    $first = callback($receiver, refund(900004, 1, 12));
    $event = $receiver->parse(refund(900004, 2, 13));
    $e = T::throws(ConflictException::class, fn () => $event->begin(), 'same transactionId, other gameId');
    T::true($e instanceof SlotPartnerException, 'under SlotPartnerException');
    T::eq([23, 'SP_ERR_CONFLICT', 409], [$e?->status, $e?->statusName, $e?->httpStatus], 'status and HTTP answer');
    T::true(str_contains((string) $e?->getMessage(), '900004') && str_contains((string) $e?->getMessage(), 'gameId'), 'the message names the transaction and the field: ' . $e?->getMessage());
    T::true(str_contains((string) $e?->responseBody, '900004'), 'so does the answer: ' . $e?->responseBody);
    T::eq($first, callback($receiver, refund(900004, 1, 12)), 'the first stays');
    T::eq(1, $runs, 'the logic ran once');
    T::eq(1, $journal->status()->conflicts, 'counted');
});

T::test('abandon, free() and a dropped claimed event run the next delivery as the next attempt', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $body = refund(900005, 1);
    $event = $receiver->parse($body);
    T::eq(1, $event->begin()->attempt, 'attempt 1');
    $event->reply(true);
    $event->abandon();  // the partner's database was down
    $event->abandon();  // twice does nothing
    $event = $receiver->parse($body);
    T::eq(2, $event->begin()->attempt, 'after abandon: attempt 2');
    T::eq(1, $journal->status()->inProgress, 'in progress');
    $event = null;      // destroyed while claimed: released
    $event = $receiver->parse($body);
    T::eq(3, $event->begin()->attempt, 'after a dropped event: attempt 3');
    $event->free();     // freed while claimed: released
    T::eq(0, $journal->status()->inProgress, 'released');
    $e = T::throws(ConfigurationException::class, fn () => $event->finish(), 'finish after free()');
    T::eq('event', $e?->field, 'the library refuses the freed event');
    $event = $receiver->parse($body);
    $claim = $event->begin();
    T::eq([Outcome::New, 4], [$claim->outcome, $claim->attempt], 'attempt 4');
    $event->reply(true);
    $event->finish();
    T::eq(0, $journal->status()->inProgress, 'finished');
});

T::test('a second worker waits, then is told busy (503)', function (): void {
    $url = journalUrl();
    $journal = new Journal($url, busyWaitMs: 50);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $journal = null;  // the receiver keeps it open
    $holder = $receiver->parse(refund(900006, 1));
    $holder->begin();
    $started = microtime(true);
    $e = T::throws(BusyException::class, fn () => $receiver->parse(refund(900006, 1))->begin(), 'the same delivery while claimed');
    T::true(microtime(true) - $started >= 0.04, 'it waited the busy wait first');
    T::eq([26, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer');
    $holder->reply(true);
    $holder->finish();
    T::eq(Outcome::Done, $receiver->parse(refund(900006, 1))->begin()->outcome, 'done once finished');
});

T::test('a lost claim stores nothing', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl(), leaseMs: 30));
    $slow = $receiver->parse(refund(900007, 1));
    $slow->begin();
    $slow->reply(true);
    usleep(100_000);  // the lease ends: the next delivery takes the claim over
    $other = $receiver->parse(refund(900007, 1));
    T::eq(2, $other->begin()->attempt, 'taken over as attempt 2');
    $e = T::throws(ClaimLostException::class, fn () => $slow->finish(), 'finishing a lost claim');
    T::eq([25, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer');
    $other->reply(false, 'second');
    $other->finish();
    T::eq('{"refund":{"success":false,"errorMessage":"second"}}', callback($receiver, refund(900007, 1))[1], 'the second worker\'s reply stored');
});

T::test('balance queries are not journaled, their index is recorded', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    foreach ([5, 6] as $money) {
        $event = $receiver->parse('{"action":"getPlayerBalance","playerIdentifier":"p-1","index":2}');
        T::true($event instanceof BalanceQuery, 'a balance query');
        $claim = $event->begin();
        T::eq([Outcome::NotJournaled, 0, null], [$claim->outcome, $claim->attempt, $claim->reply], 'not journaled');
        T::true(str_contains($event->replyBalance($money), '"money":' . $money), 'current, never replayed');
        $event->finish();  // not needed, does nothing
    }
    T::eq(2, $journal->status()->highestIndex, 'its index is recorded');
});

T::test('refused deliveries with a readable index are seen, gaps are found', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    foreach ([1, 2, 7] as $index) {
        callback($receiver, refund(900100 + $index, $index));
    }
    $refused = str_replace('"gameId":12', '"gameId":1.5', refund(900104, 4));
    $e = T::throws(ValidationException::class, fn () => $receiver->handle(TOKEN, '127.0.0.1', $refused), 'a float gameId');
    T::eq([4, 900104, 'gameSessionBuyRefund'], [$e?->index, $e?->transactionId, $e?->eventName], 'the refusal names index, transactionId, event');
    T::eq([[3, 3], [5, 6]], $journal->missing(), 'missing ranges');
    T::eq([[3, 3]], $journal->missing(1), 'at most limit ranges');
    $status = $journal->status();
    T::eq([3, 1, 3], [$status->handled, $status->refused, $status->missing], 'handled, refused (not missing), missing');
    T::eq([1, 7, 2], [$status->firstIndex, $status->highestIndex, $status->watermark], 'first, highest, watermark');
    T::eq('limit', T::throws(ConfigurationException::class, fn () => $journal->missing(0), 'limit 0')?->field, 'limit named');
    T::eq('limit', T::throws(ConfigurationException::class, fn () => $journal->missing(-1), 'limit -1')?->field, 'refused before the library');
});

T::test('journal settings', function (): void {
    $journal = new Journal(journalUrl(), firstIndex: 10, durable: false, maxReplyBytes: 100, lockTimeoutMs: 1000, leaseMs: 60000, busyWaitMs: 10);
    T::true(new JournalStatus(0, 0, 0, 0, 0, 0, 10, null, null) == $journal->status(), 'the configured first index, nothing else yet');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    callback($receiver, refund(1, 13));
    T::eq([[10, 12]], $journal->missing(), 'counted from the first index');
    $event = $receiver->parse(refund(2, 14));
    $event->begin();
    T::eq('reply', T::throws(ConfigurationException::class, fn () => $event->finish(str_repeat('x', 101)), 'a reply over maxReplyBytes')?->field, 'the field named');
    $event->abandon();
    T::throws(ConfigurationException::class, fn () => new Journal(journalUrl(), leaseMs: 0), 'lease 0: the library\'s range');
    T::eq('first_index', T::throws(ConfigurationException::class, fn () => new Journal(journalUrl(), firstIndex: -1), 'negative first index')?->field, 'refused');
});

T::test('misuse and unusable journals get clear errors', function (): void {
    $plain = new Receiver(TOKEN, sources: 'any');
    $e = T::throws(ConfigurationException::class, fn () => $plain->parse(refund(1, 1))->begin(), 'no journal');
    T::true(str_contains((string) $e?->getMessage(), 'no journal'), 'says so: ' . $e?->getMessage());
    $e = T::throws(ConfigurationException::class, fn () => $plain->parse(refund(1, 1))->finish(), 'finish before begin');
    T::true(str_contains((string) $e?->getMessage(), 'not begun'), 'says so: ' . $e?->getMessage());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl()));
    $event = $receiver->parse(refund(1, 1));
    $event->begin();
    T::throws(ConfigurationException::class, fn () => $event->begin(), 'begun twice');
    $event->abandon();
    T::eq('journal_url', T::throws(ConfigurationException::class, fn () => new Journal('mysql://x'), 'not a journal URL')?->field, 'the URL named');
    $e = T::throws(JournalException::class, fn () => new Journal('sqlite:' . tempDir()), 'a directory cannot hold a journal');
    T::eq([24, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer');
});

T::test('FFI calls per journaled callback: the journal calls on top of the usual three', function (): void {
    $counter = new CountingFfi(Library::ffi());
    Native::useFfi($counter);
    try {
        $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl()));
        $body = refund(900300, 1);
        $counter->reset();
        callback($receiver, $body);
        T::eq(['sp_receiver_handle' => 1, 'sp_event_begin' => 1, 'sp_event_reply' => 1, 'sp_event_finish' => 1, 'sp_event_free' => 1], $counter->calls, 'a new delivery: five');
        $counter->reset();
        callback($receiver, $body);
        T::eq(['sp_receiver_handle' => 1, 'sp_event_begin' => 1, 'sp_event_free' => 1], $counter->calls, 'a repeat: three');
        $counter->reset();
        $event = $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
        $event->begin();
        $event->replyBalance(1);
        $event = null;
        T::eq(['sp_receiver_handle' => 1, 'sp_event_begin' => 1, 'sp_event_reply_balance' => 1, 'sp_event_free' => 1], $counter->calls, 'a balance query: four');
    } finally {
        Native::useFfi(null);
    }
});

// examples/callback.php with SLOTPARTNER_JOURNAL and SLOTPARTNER_WALLET.
const EXAMPLE = PACKAGE . '/examples/callback.php';

T::test('the example answers a repeated delivery with the first reply, a conflict 409', function (): void {
    $dir = tempDir();
    mkdir($dir . '/wallet');
    $env = ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => 'sqlite:' . $dir . '/journal.db', 'SLOTPARTNER_WALLET' => $dir . '/wallet'];
    $server = new PhpServer(EXAMPLE, $env, ['-d', 'ffi.enable=1']);
    try {
        $payout = fixture('payout.json');
        $first = httpRequest($server->port, 'POST', $payout, ['X-Service-Token' => TOKEN]);
        $repeat = httpRequest($server->port, 'POST', $payout, ['X-Service-Token' => TOKEN]);
        T::eq([200, '{"payout":{"success":true,"errorMessage":""}}'], [$first[0] ?? null, $first[2] ?? null], 'the first delivery');
        T::eq([$first[0] ?? null, $first[2] ?? null], [$repeat[0] ?? null, $repeat[2] ?? null], 'the repeat: the first reply');
        $conflict = httpRequest($server->port, 'POST', str_replace('"moneyWon":150000', '"moneyWon":150001', $payout), ['X-Service-Token' => TOKEN]);
        T::eq(409, $conflict[0] ?? null, 'a conflict: 409');
        T::true(str_contains($conflict[2] ?? '', '900002'), 'naming the transactionId: ' . ($conflict[2] ?? ''));
        $log = $server->scriptLog();
        T::eq(1, count(array_filter($log, static fn (string $l): bool => str_contains($l, 'payout 150000 EUR'))), 'the logic ran once: ' . json_encode($log));
        T::true(in_array('callback.php: repeated delivery answered from the journal', $log, true), 'the repeat logged');
        T::eq(['payout-900002'], array_map('basename', glob($dir . '/wallet/*') ?: []), 'credited once');
        // The ledger fails: the claim is abandoned, 503, and the next delivery is attempt 2.
        rename($dir . '/wallet', $dir . '/wallet.gone');
        $down = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
        rename($dir . '/wallet.gone', $dir . '/wallet');
        T::eq([503, '5'], [$down[0] ?? null, $down[1]['retry-after'] ?? null], 'ledger down: 503 with Retry-After');
        $retried = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
        T::eq(200, $retried[0] ?? null, 'delivered again: handled');
        T::true(in_array('callback.php: attempt 2', $server->scriptLog(), true), 'as attempt 2');
    } finally {
        $server->stop();
    }
    // An unusable journal: 503 with the library's answer.
    $broken = new PhpServer(EXAMPLE, ['SLOTPARTNER_JOURNAL' => 'sqlite:' . $dir] + $env, ['-d', 'ffi.enable=1']);
    $answer = httpRequest($broken->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
    $log = $broken->scriptLog();
    $broken->stop();
    T::eq(503, $answer[0] ?? null, 'an unusable journal: 503');
    T::true(str_starts_with($log[0] ?? '', 'callback.php: journal: '), 'logged: ' . json_encode($log));
});

T::test('the example under four php -S workers: each event credited once, repeats answered alike, gaps found', function (): void {
    $dir = tempDir();
    mkdir($dir . '/wallet');
    $url = 'sqlite:' . $dir . '/journal.db';
    $server = new PhpServer(EXAMPLE, [
        'SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => $url,
        'SLOTPARTNER_WALLET' => $dir . '/wallet', 'PHP_CLI_SERVER_WORKERS' => '4',
    ], ['-d', 'ffi.enable=1']);
    try {
        $report = $dir . '/report.json';
        $process = proc_open(
            [SANDBOX, 'send', '--url', $server->url, '--burst', '60', '--index', '100', '--seed', '8', '--lose', '0.1', '--repeat', '0.2',
                '--reorder', '0.1', '--concurrency', '4', '--report-json', $report, '--quiet', 'mixed'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
            $pipes,
        );
        $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        T::eq(0, proc_close($process), 'send --burst: every reply judged, repeats byte-identical (' . trim((string) $out) . ')');
        $log = $server->scriptLog();
    } finally {
        $server->stop();
    }
    $facts = json_decode((string) file_get_contents($report), true);
    T::eq([0, 0], [$facts['repeat_mismatches'] ?? null, $facts['verdict_failures'] ?? null], 'no mismatch, no wrong verdict');
    $credited = glob($dir . '/wallet/*') ?: [];
    T::eq($facts['delivered'], count($credited), 'each delivered event credited once');
    $payouts = 0;
    foreach ($credited as $file) {
        if (str_starts_with(basename($file), 'payout-')) {
            $payouts += (int) file_get_contents($file);
        }
    }
    T::eq($facts['delivered_money_total'], $payouts, 'the wallet holds what was delivered');
    $ran = array_filter($log, static fn (string $l): bool => preg_match('/^callback\.php: (refund transaction|payout) /', $l) === 1);
    T::eq($facts['delivered'], count($ran), 'the logic ran once per event');
    $replayed = count(array_keys($log, 'callback.php: repeated delivery answered from the journal', true));
    T::eq($facts['deliveries'] - $facts['delivered'], $replayed, 'every repeat answered from the journal');
    $journal = new Journal($url);
    $status = $journal->status();
    $missing = [];
    foreach ($journal->missing() as [$first, $last]) {
        $missing = array_merge($missing, range($first, $last));
    }
    $lost = array_values(array_filter($facts['lost_indexes'], static fn (int $i): bool => $i < $status->highestIndex));
    T::eq($lost, $missing, 'the journal reports exactly the lost indexes as missing');
    T::eq([$facts['delivered'], $replayed, 0], [$status->handled, $status->replayed, $status->inProgress], 'handled, replayed, in progress');
});

T::finish();
