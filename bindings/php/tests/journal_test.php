<?php

declare(strict_types=1);

// The delivery journal through the binding, on SQLite in a temporary directory: repeats answered
// from the journal byte for byte without running the logic, conflicts, abandoned and dropped
// claims, busy claims, balance queries, refused deliveries, gaps, the operator's side (index
// jumps accepted or declared gaps, gaps resolved by hand, conflicts handed out and resolved,
// unfinished deliveries closed by hand, renumbering), claims written at finish (claimAtFinish), the export for reconciliation, the FFI calls per journaled callback, and examples/callback.php with
// SLOTPARTNER_JOURNAL under four php -S workers.

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
use SlotPartner\OtherEvent;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\SlotPartnerException;
use SlotPartner\ValidationException;

function refund(int $transactionId, int $index, int $gameId = 12, int $gameSessionId = 5): string
{
    return '{"event":"gameSessionBuyRefund","index":' . $index . ',"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
        . '"transactionId":' . $transactionId . ',"buyTransactionId":1,"gameSessionId":' . $gameSessionId . ',"partnerGameRequestIdentifier":"req-1",'
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
    // gameId does not decide who is paid what: a resend differing in it is the same delivery.
    T::eq($first, callback($receiver, refund(900004, 2, 13)), 'another gameId: the first reply');
    $event = $receiver->parse(refund(900004, 3, gameSessionId: 6));
    $e = T::throws(ConflictException::class, fn () => $event->begin(), 'same transactionId, other gameSessionId');
    T::true($e instanceof SlotPartnerException, 'under SlotPartnerException');
    T::eq([23, 'SP_ERR_CONFLICT', 409], [$e?->status, $e?->statusName, $e?->httpStatus], 'status and HTTP answer');
    T::true(str_contains((string) $e?->getMessage(), '900004') && str_contains((string) $e?->getMessage(), 'gameSessionId'), 'the message names the transaction and the field: ' . $e?->getMessage());
    T::true(str_contains((string) $e?->responseBody, '900004'), 'so does the answer: ' . $e?->responseBody);
    T::eq($first, callback($receiver, refund(900004, 1, 12)), 'the first stays');
    T::eq(1, $runs, 'the logic ran once');
    $status = $journal->status();
    T::eq([1, 1], [$status->conflicts, $status->openConflicts], 'counted, and open for the operator');
    T::eq([['refused', ['gameSessionId: first 5, now 6']]], array_map(static fn (array $c): array => [$c['outcome'], $c['differing']], $journal->conflicts()), 'listed as refused');
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
    $claim = $event->begin();
    T::eq([2, []], [$claim->attempt, $claim->differing], 'after abandon: attempt 2, the same content');
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

T::test('an abandoned refund delivered again with another decisive field names it', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $event = $receiver->parse(refund(900009, 1));
    $claim = $event->begin();
    T::eq([Outcome::New, 1, []], [$claim->outcome, $claim->attempt, $claim->differing], 'attempt 1: nothing differs');
    $event->reply(true);
    $event->abandon();  // the partner's database was down: nothing stored
    // Another gameSessionId, which decides who is paid what: handed out as new, not refused.
    $event = $receiver->parse(refund(900009, 1, gameSessionId: 6));
    $claim = $event->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'new, attempt 2');
    T::eq(['gameSessionId: first 5, now 6'], $claim->differing, 'the changed field named');
    $reply = $event->reply(true);
    $event->finish();
    $event = null;
    T::eq(['gameSessionId: first 5, now 6'], $claim->differing, 'a copy, kept after the event is gone');
    T::eq([['handed_out', $claim->differing]], array_map(static fn (array $c): array => [$c['outcome'], $c['differing']], $journal->conflicts()), 'listed for the operator');
    T::eq([200, $reply], callback($receiver, refund(900009, 1, gameSessionId: 6)), 'then answered from the journal');
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
    T::true(str_contains($e?->getMessage() ?? '', 'taken over by attempt 2'), 'why: ' . $e?->getMessage());
    // From now on finishing and abandoning it fail alike, every time.
    foreach (['finish', 'abandon', 'finish', 'abandon'] as $n => $step) {
        $again = T::throws(ClaimLostException::class, fn () => $slow->$step(), $step . '() of a lost claim, call ' . ($n + 1));
        T::eq([25, 503], [$again?->status, $again?->httpStatus], $step . '(): status and HTTP answer');
        T::true(str_contains($again?->getMessage() ?? '', 'taken over by attempt 2'), $step . '(): why: ' . $again?->getMessage());
    }
    $other->reply(false, 'second');
    $other->finish();
    T::eq('{"refund":{"success":false,"errorMessage":"second"}}', callback($receiver, refund(900007, 1))[1], 'the second worker\'s reply stored');
});

T::test('a claim found lost by abandon(): finish() and abandon() throw ClaimLostException every time', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl(), leaseMs: 30));
    $slow = $receiver->parse(refund(900010, 1));
    $slow->begin();
    $slow->reply(true);
    usleep(100_000);  // the lease ends: the next delivery takes the claim over
    $other = $receiver->parse(refund(900010, 1));
    T::eq(2, $other->begin()->attempt, 'taken over as attempt 2');
    foreach (['abandon', 'finish', 'abandon', 'finish'] as $n => $step) {
        $e = T::throws(ClaimLostException::class, fn () => $slow->$step(), $step . '() of a lost claim, call ' . ($n + 1));
        T::eq([25, 503], [$e?->status, $e?->httpStatus], $step . '(): status and HTTP answer');
        T::true(str_contains($e?->getMessage() ?? '', 'taken over by attempt 2'), $step . '(): why: ' . $e?->getMessage());
    }
    $other->reply(true);
    $other->finish();
    T::eq(Outcome::Done, $receiver->parse(refund(900010, 1))->begin()->outcome, 'the other delivery\'s claim untouched');
});

T::test('after abandon(), finish() throws ClaimLostException every time and abandon() does nothing', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any', journal: new Journal(journalUrl()));
    $event = $receiver->parse(refund(900011, 1));
    $event->begin();
    $event->reply(true);
    $event->abandon();  // the partner's database was down
    foreach ([1, 2] as $n) {
        $e = T::throws(ClaimLostException::class, fn () => $event->finish(), 'finish() after abandon(), call ' . $n);
        T::eq([25, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer, call ' . $n);
        T::true(str_contains($e?->getMessage() ?? '', 'the claim was abandoned'), 'why: ' . $e?->getMessage());
        $event->abandon();  // abandoning again does nothing
    }
    $claim = $receiver->parse(refund(900011, 1))->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'nothing stored: the next delivery runs again');
});

T::test('claimAtFinish: begin() writes nothing, finish() stores the claim with the reply, a second delivery meanwhile loses', function () use (&$runs): void {
    $journal = new Journal(journalUrl(), busyWaitMs: 0, claimAtFinish: true);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $event = $receiver->handle(TOKEN, '127.0.0.1', refund(900201, 1));
    $claim = $event->begin();
    T::eq([Outcome::New, 1], [$claim->outcome, $claim->attempt], 'new, attempt 1');
    $status = $journal->status();
    T::eq([0, 0, null], [$status->inProgress, $status->handled, $status->highestIndex], 'nothing written by begin()');
    // A second delivery of the key meanwhile is not told busy: it runs too, and loses at finish.
    $other = $receiver->parse(refund(900201, 1));
    T::eq([Outcome::New, 0], [$other->begin()->outcome, $journal->status()->inProgress], 'the second delivery runs too');
    $reply = $event->reply(true);
    $event->finish();  // the claim, the reply and the index, in one transaction
    $status = $journal->status();
    T::eq([1, 0, 1], [$status->handled, $status->inProgress, $status->highestIndex], 'stored by finish()');
    $other->reply(false, 'second');
    $e = T::throws(ClaimLostException::class, fn () => $other->finish(), 'the second finish()');
    T::eq([25, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer');
    T::true(str_contains($e?->getMessage() ?? '', 'claimed at finish'), 'why: ' . $e?->getMessage());
    $runs = 0;
    T::eq([200, $reply], callback($receiver, refund(900201, 1)), 'the first finish()\'s reply is stored');
    T::eq(0, $runs, 'answered from the journal');
    // abandon() stores the delivery abandoned: counted unfinished, the next delivery is attempt 2.
    $event = $receiver->parse(refund(900202, 2));
    $event->begin();
    $event->abandon();
    $status = $journal->status();
    T::eq([0, 1, 2], [$status->inProgress, $status->unfinished, $status->highestIndex], 'abandoned: unfinished');
    T::eq(2, $receiver->parse(refund(900202, 2))->begin()->attempt, 'the next delivery: attempt 2');
});

T::test('without claimAtFinish (the default, or false) begin() writes the claim', function (): void {
    foreach ([null, false] as $setting) {
        $what = 'claimAtFinish ' . var_export($setting, true) . ': ';
        $journal = new Journal(journalUrl(), busyWaitMs: 0, claimAtFinish: $setting);
        $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
        $event = $receiver->handle(TOKEN, '127.0.0.1', refund(900203, 1));
        T::eq(Outcome::New, $event->begin()->outcome, $what . 'new');
        $status = $journal->status();
        T::eq([1, 1], [$status->inProgress, $status->highestIndex], $what . 'the claim is in the journal');
        T::throws(BusyException::class, fn () => $receiver->parse(refund(900203, 1))->begin(), $what . 'a second delivery meanwhile');
        $reply = $event->reply(true);
        $event->finish();
        $status = $journal->status();
        T::eq([1, 0], [$status->handled, $status->inProgress], $what . 'finished');
        T::eq($reply, $receiver->parse(refund(900203, 1))->begin()->reply, $what . 'the stored reply');
    }
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

T::test('a PostgreSQL server that never answers fails the open within its deadline, as the journal\'s transient error', function (): void {
    // The kernel completes the TCP handshake for the listener's backlog: a server that accepts and
    // never answers.
    $silent = stream_socket_server('tcp://127.0.0.1:0');
    $port = (int) substr(strrchr(stream_socket_get_name($silent, false), ':'), 1);
    try {
        // Without connect_timeout the open waits the lock time-out; with it, that.
        foreach ([['', 'lockTimeoutMs'], ['?connect_timeout=1', 'commandTimeoutMs']] as [$query, $name]) {
            $started = microtime(true);
            $e = T::throws(JournalException::class, fn () => new Journal("postgres://me@127.0.0.1:{$port}/x{$query}", ...[$name => 1000]), 'a silent server');
            $took = microtime(true) - $started;
            T::true($took < 6, sprintf('answered in %.1f s, within the 1 s deadline and a loaded machine\'s slack', $took));
            T::eq(503, $e?->httpStatus, 'transient: the service delivers again');
        }
        $e = T::throws(ConfigurationException::class, fn () => new Journal("postgres://me@127.0.0.1:{$port}/x", commandTimeoutMs: 0), 'no wait without a bound');
        T::eq('command_timeout', $e?->field, 'the setting named');
    } finally {
        fclose($silent);
    }
});

// The operator's side: what an operator sees and decides, each decision with a note.

/** An event the binding does not type (an OtherEvent), keyed in the journal by its index. */
function bonus(int $index): string
{
    return '{"event":"bonusGranted","index":' . $index . '}';
}

/** An unknown event: begun, and finished with a reply of the partner's own. */
function deliverOther(Receiver $receiver, string $body): Outcome
{
    $event = $receiver->handle(TOKEN, '127.0.0.1', $body);
    T::true($event instanceof OtherEvent, 'an unknown event');
    $outcome = $event->begin()->outcome;
    if ($outcome === Outcome::New) {
        $event->finish('{"ok":true}');
    }
    return $outcome;
}

/** Refunds at $indexes, each handled. */
function deliverRefunds(Receiver $receiver, array $indexes): void
{
    foreach ($indexes as $index) {
        T::eq(200, callback($receiver, refund(900500 + $index, $index))[0], 'refund at ' . $index);
    }
}

/**
 * The entries of $row named by $keys.
 *
 * @param array<string, mixed> $row
 * @param list<string> $keys
 * @return array<string, mixed>
 */
function pick(array $row, array $keys): array
{
    return array_intersect_key($row, array_flip($keys));
}

T::test('an index jump is listed, and accepting it closes it', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    deliverRefunds($receiver, [1, 2, 3, 4, 5]);
    T::eq(Outcome::New, deliverOther($receiver, bonus(1000000000000)), 'the jumping event is handled');
    $status = $journal->status();
    T::eq([1, 0, 1000000000000], [$status->indexJumps, $status->missing, $status->highestIndex], 'one open jump, its stretch not missing');
    T::eq([], $journal->missing(), 'no gap listed');
    $jumps = $journal->indexJumps();
    T::eq(1, count($jumps), 'listed');
    $jump = $jumps[0];
    $keys = ['kind', 'index', 'previous_highest', 'name', 'count', 'numbering', 'decision', 'note'];
    T::eq(['kind' => 'jump', 'index' => 1000000000000, 'previous_highest' => 5, 'name' => 'bonusGranted', 'count' => 1, 'numbering' => 1, 'decision' => null, 'note' => null], pick($jump, $keys), 'the entry');
    T::true(is_int($jump['id']) && is_int($jump['at_ms']), 'an id and a time');
    foreach (['', '   '] as $blank) {
        $e = T::throws(ConfigurationException::class, fn () => $journal->acceptJump($jump['id'], $blank), 'a blank note');
        T::eq('note', $e?->field, 'the note named');
    }
    T::eq(1, $journal->status()->indexJumps, 'a refused decision changes nothing');
    $journal->acceptJump($jump['id'], 'the service moved its numbering on purpose');
    $status = $journal->status();
    T::eq([0, 0], [$status->indexJumps, $status->missing], 'accepted: nothing open, nothing missing');
    T::eq([], $journal->indexJumps(), 'no longer listed as open');
    $all = $journal->indexJumps(all: true);
    T::eq([[$jump['id'], 'accepted', 'the service moved its numbering on purpose']], array_map(static fn (array $j): array => [$j['id'], $j['decision'], $j['note']], $all), 'listed with all, decided');
    T::true(is_int($all[0]['decided_ms']), 'when');
    T::eq('id', T::throws(ConfigurationException::class, fn () => $journal->acceptJump($jump['id'], 'again'), 'accepted twice')?->field, 'no open jump has that id any more');
});

T::test('a refused body without an event name changes nothing', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    deliverRefunds($receiver, [1, 2, 3, 4, 5]);
    $before = $journal->status();
    $e = T::throws(ValidationException::class, fn () => $receiver->handle(TOKEN, '127.0.0.1', '{"index":1000000000000}'), 'no event name');
    T::eq(null, $e?->eventName, 'no name read');
    T::true($before == $journal->status(), 'not seen, not refused, no index jump');
    T::eq([], $journal->indexJumps(all: true), 'nothing listed');
});

T::test('a jump declared a gap counts its stretch missing', function (): void {
    $journal = new Journal(journalUrl(), maxIndexJump: 10);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    deliverRefunds($receiver, [1, 2, 3, 4, 5, 12]);  // 7 beyond 5: an ordinary gap
    T::eq([6, 0], [$journal->status()->missing, $journal->status()->indexJumps], 'an ordinary gap');
    deliverRefunds($receiver, [40]);  // 28 beyond 12: more than maxIndexJump
    $status = $journal->status();
    T::eq([6, 1, 40], [$status->missing, $status->indexJumps, $status->highestIndex], 'a jump');
    $jump = $journal->indexJumps()[0] ?? [];
    T::eq(['kind' => 'jump', 'index' => 40, 'previous_highest' => 12], pick($jump, ['kind', 'index', 'previous_highest']), 'listed');
    $journal->jumpIsGap($jump['id'], 'an outage: fetch the events in between');
    $status = $journal->status();
    T::eq([6 + 27, 0], [$status->missing, $status->indexJumps], 'the stretch is missing now');
    T::eq([[6, 11], [13, 39]], $journal->missing(), 'the gaps');
    T::eq('gap', $journal->indexJumps(true)[0]['decision'] ?? null, 'decided a gap');
    T::eq('id', T::throws(ConfigurationException::class, fn () => $journal->jumpIsGap($jump['id'], 'twice'), 'decided twice')?->field, 'the id named');
});

T::test('a real gap resolved by hand', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    deliverRefunds($receiver, [1, 2, 3, 4, 5, 8]);
    T::eq([2, [[6, 7]]], [$journal->status()->missing, $journal->missing()], 'the gap');
    foreach (['', " \n "] as $blank) {
        T::eq('note', T::throws(ConfigurationException::class, fn () => $journal->resolve(6, 7, $blank), 'a blank note')?->field, 'the note named');
    }
    T::eq('note', T::throws(ConfigurationException::class, fn () => $journal->resolve(6, 7, "a\0b"), 'a NUL in the note')?->field, 'the note named');
    foreach ([[7, 6], [6, 9], [-1, 7]] as [$first, $last]) {
        T::eq('range', T::throws(ConfigurationException::class, fn () => $journal->resolve($first, $last, 'no such range'), "range $first-$last")?->field, 'the range named');
    }
    T::eq(2, $journal->status()->missing, 'nothing refused was resolved');
    T::eq([], $journal->resolutions(), 'no resolution yet');
    T::eq(2, $journal->resolve(6, 7, 'the service confirms 6 and 7 were never sent'), 'two were missing');
    $status = $journal->status();
    T::eq([0, 2, 8], [$status->missing, $status->resolved, $status->watermark], 'missing 0, resolved 2');
    T::eq([], $journal->missing(), 'no gap left');
    $resolutions = $journal->resolutions();
    T::eq(1, count($resolutions), 'one resolution');
    T::eq(['first' => 6, 'last' => 7, 'closed' => 2, 'numbering' => 1, 'note' => 'the service confirms 6 and 7 were never sent'], pick($resolutions[0], ['first', 'last', 'closed', 'numbering', 'note']), 'with its note');
    T::true(is_int($resolutions[0]['id']) && is_int($resolutions[0]['at_ms']), 'an id and a time');
    T::eq(0, $journal->resolve(1, 8, 'checked again'), 'a range of seen indexes closes none');
    T::eq(2, $journal->status()->resolved, 'still 2');
    T::eq(['checked again', 'the service confirms 6 and 7 were never sent'], array_column($journal->resolutions(), 'note'), 'newest first');
    T::eq(1, count($journal->resolutions(1)), 'at most limit');
    T::eq([], $journal->resolutions(0), 'limit 0');
    T::eq('limit', T::throws(ConfigurationException::class, fn () => $journal->resolutions(-1), 'a negative limit')?->field, 'the limit named');
});

T::test('an abandoned payout delivered again is handed out as new, and its conflict listed', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $payout = fixture('payout.json');
    $event = $receiver->parse($payout);
    T::eq(1, $event->begin()->attempt, 'attempt 1');
    $event->abandon();  // the ledger was down: nothing stored
    // Without isMobile, which does not decide who is paid what: the same delivery, attempt 2.
    $withoutMobile = str_replace(',"isMobile":false', '', $payout);
    T::true($withoutMobile !== $payout, 'isMobile removed');
    $event = $receiver->parse($withoutMobile);
    $claim = $event->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'handed out as attempt 2');
    $reply = $event->reply(true);
    $event->finish();
    T::eq([], $journal->conflicts(true), 'no conflict');
    T::eq([200, $reply], callback($receiver, $payout), 'the full body gets the stored reply');
    // Abandoned, then delivered again without isMobile and with another amount: handed out as
    // new all the same (the first was never answered), and listed for the operator.
    $second = str_replace(['900002', '"index":42'], ['900012', '"index":43'], $payout);
    $event = $receiver->parse($second);
    $event->begin();
    $event->abandon();
    $changed = str_replace([',"isMobile":false', '"moneyWon":150000'], ['', '"moneyWon":150001'], $second);
    $event = $receiver->parse($changed);
    $claim = $event->begin();  // no ConflictException
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'handed out as new, attempt 2');
    $event->reply(true);
    $event->finish();
    $conflicts = $journal->conflicts();
    T::eq(1, count($conflicts), 'listed');
    $c = $conflicts[0];
    T::eq(
        ['key' => 'jackpotPayout:900012', 'name' => 'jackpotPayout', 'transaction_id' => 900012, 'index' => 43, 'differing' => ['moneyWon: first 150000, now 150001'], 'outcome' => 'handed_out', 'count' => 1, 'resolved_ms' => null, 'note' => null],
        pick($c, ['key', 'name', 'transaction_id', 'index', 'differing', 'outcome', 'count', 'resolved_ms', 'note']),
        'the conflict',
    );
    T::true(str_contains($c['first_content'], '"moneyWon":150000') && str_contains($c['now_content'], '"moneyWon":150001'), 'both contents');
    $status = $journal->status();
    T::eq([1, 1], [$status->conflicts, $status->openConflicts], 'counted, open');
    T::eq('note', T::throws(ConfigurationException::class, fn () => $journal->resolveConflict($c['id'], ''), 'a blank note')?->field, 'the note named');
    $journal->resolveConflict($c['id'], 'the service corrected the amount; credited 150001');
    $status = $journal->status();
    T::eq([1, 0], [$status->conflicts, $status->openConflicts], 'resolved');
    T::eq([], $journal->conflicts(), 'no open conflict');
    $resolved = $journal->conflicts(all: true)[0] ?? [];
    T::eq('the service corrected the amount; credited 150001', $resolved['note'] ?? null, 'with its note');
    T::true(is_int($resolved['resolved_ms'] ?? null), 'when');
    T::eq('id', T::throws(ConfigurationException::class, fn () => $journal->resolveConflict($c['id'], 'again'), 'resolved twice')?->field, 'the id named');
});

T::test('renumbering starts gap detection afresh and keeps the old events apart', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    foreach ([1, 2, 3] as $index) {
        T::eq(Outcome::New, deliverOther($receiver, bonus($index)), 'bonus ' . $index);
    }
    T::eq(Outcome::Done, deliverOther($receiver, bonus(2)), 'a repeat in the first numbering');
    T::eq('note', T::throws(ConfigurationException::class, fn () => $journal->renumber(1, ''), 'a blank note')?->field, 'the note named');
    T::eq('first_index', T::throws(ConfigurationException::class, fn () => $journal->renumber(-1, 'restarted'), 'a negative first index')?->field, 'the first index named');
    T::eq(1, $journal->status()->numbering, 'still numbering 1');
    T::eq(2, $journal->renumber(1, 'the service restarted its indexes at 1'), 'numbering 2');
    $status = $journal->status();
    T::eq([2, 0, null, 0], [$status->numbering, $status->missing, $status->highestIndex, $status->indexJumps], 'afresh');
    T::eq(Outcome::New, deliverOther($receiver, bonus(2)), 'index 2 of the new numbering is a new event');
    T::eq([[1, 1]], $journal->missing(), 'counted from 1 again');
    $renumbered = array_values(array_filter($journal->indexJumps(true), static fn (array $j): bool => $j['kind'] === 'renumbered'));
    T::eq([[1, 2, 'accepted']], array_map(static fn (array $j): array => [$j['index'], $j['numbering'], $j['decision']], $renumbered), 'kept for audit');
    // Index 1 of numbering 2 is missing: not given up silently.
    T::eq('first_index', T::throws(ConfigurationException::class, fn () => $journal->renumber(5, 'once more'), 'a missing index')?->field, 'the first index named');
    T::eq(3, $journal->renumber(5, 'once more', giveUpGaps: true), 'numbering 3');
    T::eq([[1, 1, 'given up by renumbering from 5: once more']], array_map(static fn (array $r): array => [$r['first'], $r['last'], $r['note']], $journal->resolutions()), 'kept for audit');
});

T::test('the new settings and arguments name their field', function (): void {
    foreach (['maxIndexJump' => 'max_index_jump', 'notFoundLimit' => 'not_found_limit'] as $name => $field) {
        foreach ([0, -1] as $value) {
            $e = T::throws(ConfigurationException::class, fn () => new Journal(journalUrl(), ...[$name => $value]), "$name $value");
            T::eq($field, $e?->field, 'the setting named');
        }
    }
    T::eq('not_found_limit', T::throws(ConfigurationException::class, fn () => new Journal(journalUrl(), notFoundLimit: 1 << 32), 'beyond uint32')?->field, 'refused before the library');
    $journal = new Journal(journalUrl(), maxIndexJump: 1, notFoundLimit: 1);
    T::true(new JournalStatus(0, 0, 0, 0, 0, 0, null, null, null, 0, 0, 0, 0, 0, 1) == $journal->status(), 'a fresh journal');
    T::eq([[], [], [], []], [$journal->indexJumps(), $journal->conflicts(), $journal->resolutions(), $journal->unrecoverable()], 'nothing listed');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    callback($receiver, refund(1, 1));
    callback($receiver, refund(2, 3));  // 2 beyond 1: more than maxIndexJump 1
    T::eq([1, []], [$journal->status()->indexJumps, $journal->missing()], 'a jump of 2');
    T::eq('limit', T::throws(ConfigurationException::class, fn () => $journal->indexJumps(limit: -1), 'a negative limit')?->field, 'the limit named');
    T::eq('limit', T::throws(ConfigurationException::class, fn () => $journal->unrecoverable(-5), 'a negative limit')?->field, 'the limit named');
});

T::test('unfinished deliveries are counted', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $event = $receiver->parse(refund(900700, 1));
    $event->begin();
    T::eq([1, 0], [$journal->status()->inProgress, $journal->status()->unfinished], 'claimed: in progress');
    $event->abandon();
    T::eq([0, 1], [$journal->status()->inProgress, $journal->status()->unfinished], 'abandoned: unfinished');
    callback($receiver, refund(900700, 1));
    T::eq(0, $journal->status()->unfinished, 'delivered again and finished');
});

T::test('an unfinished delivery closed by hand runs again as attempt 2', function (): void {
    $journal = new Journal(journalUrl());
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $event = $receiver->parse(refund(900705, 5));
    T::eq(1, $event->begin()->attempt, 'attempt 1');
    $event->abandon();
    T::eq(1, $journal->status()->unfinished, 'abandoned: unfinished');
    foreach (['', " \t "] as $blank) {
        T::eq('note', T::throws(ConfigurationException::class, fn () => $journal->closeUnfinished(5, $blank), 'a blank note')?->field, 'the note named');
    }
    foreach ([4, 6, -1, PHP_INT_MAX, PHP_INT_MIN] as $index) {
        T::eq('index', T::throws(ConfigurationException::class, fn () => $journal->closeUnfinished($index, 'nothing there'), "index $index")?->field, 'the index named');
    }
    T::eq(1, $journal->status()->unfinished, 'nothing refused changed anything');
    T::eq(1, $journal->closeUnfinished(5, 'refunded by hand, ticket 4411'), 'one closed');
    T::eq(0, $journal->status()->unfinished, 'no longer unfinished');
    $closing = $journal->resolutions()[0] ?? [];
    T::eq([5, 5, 0], [$closing['first'] ?? null, $closing['last'] ?? null, $closing['closed'] ?? null], 'listed with the resolutions');
    T::true(str_contains($closing['note'] ?? '', 'refunded by hand, ticket 4411'), 'with its note');
    T::eq('index', T::throws(ConfigurationException::class, fn () => $journal->closeUnfinished(5, 'again'), 'closed twice')?->field, 'the index named');
    $event = $receiver->parse(refund(900705, 5));
    $claim = $event->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'delivered again: attempt 2');
    $event->reply(true);
    $event->finish();
    $status = $journal->status();
    T::eq([0, 1], [$status->unfinished, $status->handled], 'finished as usual');
});

T::test('a refund and a payout exported for reconciliation and read back in both formats', function () use (&$runs): void {
    $dir = tempDir();
    $journal = new Journal('sqlite:' . $dir . '/journal.db');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $runs = 0;
    $before = (new DateTimeImmutable('now', new DateTimeZone('UTC')))->modify('-1 second');
    callback($receiver, refund(900001, 1));
    callback($receiver, fixture('payout.json'), false);
    T::eq(2, $journal->export($dir . '/october.csv', $before), 'two rows');
    $file = fopen($dir . '/october.csv', 'r');
    $header = fgetcsv($file, escape: '');
    $rows = [];
    while (($record = fgetcsv($file, escape: '')) !== false) {
        $rows[] = array_combine($header, $record);
    }
    fclose($file);
    T::eq(['gameSessionBuyRefund', 'jackpotPayout'], array_column($rows, 'event'), 'in the journal order');
    [$refundRow, $payoutRow] = $rows;
    T::eq(['900001', 'p-1', '5', 'success', '', ''], [$refundRow['transactionId'], $refundRow['playerIdentifier'], $refundRow['gameSessionId'], $refundRow['outcome'], $refundRow['moneyWon'], $refundRow['currencyISO4217']], 'the refund, no amount');
    T::eq(['42', '150000', '0', 'true', 'EUR', 'partner-42'], [$payoutRow['index'], $payoutRow['moneyWon'], $payoutRow['coinsWon'], $payoutRow['isMoney'], $payoutRow['currencyISO4217'], $payoutRow['playerPartnerIdentifier']], 'the payout and its amount');
    T::eq(['failure', 'refused run 2', 'done', '1'], [$payoutRow['outcome'], $payoutRow['errorMessage'], $payoutRow['state'], $payoutRow['attempts']], 'its outcome');
    T::true(str_ends_with($payoutRow['first_delivery'], 'Z'), 'times in UTC: ' . $payoutRow['first_delivery']);

    $until = (new DateTimeImmutable('now', new DateTimeZone('UTC')))->modify('+1 day');
    T::eq(2, $journal->export($dir . '/october.jsonl', $before->getTimestamp() * 1000, $until, 'jsonl'), 'two lines');
    $objects = array_map(static fn (string $line): array => json_decode($line, true, flags: JSON_THROW_ON_ERROR), file($dir . '/october.jsonl', FILE_IGNORE_NEW_LINES));
    T::eq([null, 150000, true, 900002], [$objects[0]['moneyWon'], $objects[1]['moneyWon'], $objects[1]['isMoney'], $objects[1]['transactionId']], 'typed values, null for none');
    T::eq(0, $journal->export($dir . '/before.csv', 0, $before), 'a period before both: the header only');

    T::eq('path', T::throws(ConfigurationException::class, fn () => $journal->export($dir . '/october.csv', 0), 'an existing file')?->field, 'path named');
    T::eq('path', T::throws(ConfigurationException::class, fn () => $journal->export($dir . '/no/such.csv', 0), 'no such folder')?->field, 'path named');
    T::eq('format', T::throws(ConfigurationException::class, fn () => $journal->export($dir . '/x.csv', 0, null, 'xlsx'), 'an unknown format')?->field, 'format named');
    T::eq('until_ms', T::throws(ConfigurationException::class, fn () => $journal->export($dir . '/x.csv', 5, 5), 'an empty period')?->field, 'until named');
    T::true(!file_exists($dir . '/x.csv'), 'nothing written when refused');
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
        $abandoned = refund(900301, 2);
        $event = $receiver->parse($abandoned);
        $event->begin();
        $event = null;  // destroyed while claimed: released
        $counter->reset();
        callback($receiver, $abandoned);
        T::eq(['sp_receiver_handle' => 1, 'sp_event_begin' => 1, 'sp_event_differing' => 1, 'sp_event_reply_pruned' => 1, 'sp_event_reply' => 1, 'sp_event_finish' => 1, 'sp_event_free' => 1], $counter->calls, 'attempt 2: two more');
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

// examples/callback.php with SLOTPARTNER_JOURNAL and SLOTPARTNER_LEDGER (a SQLite file in a
// folder of its own: renamed away, the ledger fails).
const EXAMPLE = PACKAGE . '/examples/callback.php';

/** @return list<array{0: string, 1: int, 2: int}> the example ledger's credits */
function ledgerCredits(string $dir): array
{
    $rows = (new PDO('sqlite:' . $dir . '/ledger/ledger.db'))->query('SELECT kind, transaction_id, amount FROM credits ORDER BY kind, transaction_id')->fetchAll(PDO::FETCH_NUM);
    return array_map(static fn (array $r): array => [(string) $r[0], (int) $r[1], (int) $r[2]], $rows);
}

T::test('the example answers a repeated delivery with the first reply, a conflict 409', function (): void {
    $dir = tempDir();
    mkdir($dir . '/ledger');
    $env = ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => 'sqlite:' . $dir . '/journal.db', 'SLOTPARTNER_LEDGER' => 'sqlite:' . $dir . '/ledger/ledger.db'];
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
        T::eq(1, count(array_filter($log, static fn (string $l): bool => str_contains($l, 'jackpotPayout for player'))), 'the logic ran once: ' . json_encode($log));
        T::eq(['repeated delivery answered from the journal'], $server->scriptLog('repeated '), 'the repeat logged');
        T::eq([['payout', 900002, 150000]], ledgerCredits($dir), 'credited once');
        // The ledger fails: the claim is abandoned, 503, and the next delivery is attempt 2.
        rename($dir . '/ledger', $dir . '/ledger.gone');
        $down = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
        rename($dir . '/ledger.gone', $dir . '/ledger');
        T::eq([503, '5'], [$down[0] ?? null, $down[1]['retry-after'] ?? null], 'ledger down: 503 with Retry-After');
        T::true(str_contains(implode("\n", $server->scriptLog('logic: ')), 'PDOException'), 'the ledger\'s failure logged');
        $retried = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
        T::eq(200, $retried[0] ?? null, 'delivered again: handled');
        T::eq(['attempt 2'], $server->scriptLog('attempt '), 'as attempt 2');
        T::eq([['payout', 900002, 150000], ['refund', 900001, 0]], ledgerCredits($dir), 'the refund credited once, after its redelivery');
    } finally {
        $server->stop();
    }
    // An unusable journal: 503 with the library's answer.
    $broken = new PhpServer(EXAMPLE, ['SLOTPARTNER_JOURNAL' => 'sqlite:' . $dir] + $env, ['-d', 'ffi.enable=1']);
    $answer = httpRequest($broken->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
    $log = $broken->scriptLog('journal: ');
    $broken->stop();
    T::eq(503, $answer[0] ?? null, 'an unusable journal: 503');
    T::true(str_starts_with($log[0] ?? '', 'journal: '), 'logged: ' . json_encode($log));
});

T::test('the example under four php -S workers: each event credited once, repeats answered alike, gaps found', function (): void {
    $dir = tempDir();
    mkdir($dir . '/ledger');
    $url = 'sqlite:' . $dir . '/journal.db';
    $server = new PhpServer(EXAMPLE, [
        'SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => $url,
        'SLOTPARTNER_LEDGER' => 'sqlite:' . $dir . '/ledger/ledger.db', 'PHP_CLI_SERVER_WORKERS' => '4',
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
    // stop() ended the server and its four workers, which all listened on the port.
    $socket = @stream_socket_client('tcp://127.0.0.1:' . $server->port, $errno, $error, 1);
    T::true($socket === false, 'php -S and its workers stopped: the port refuses connections');
    $facts = json_decode((string) file_get_contents($report), true);
    T::eq([0, 0], [$facts['repeat_mismatches'] ?? null, $facts['verdict_failures'] ?? null], 'no mismatch, no wrong verdict');
    $credited = ledgerCredits($dir);
    T::eq($facts['delivered'], count($credited), 'each delivered event credited once');
    $payouts = array_sum(array_map(static fn (array $row): int => $row[0] === 'payout' ? $row[2] : 0, $credited));
    T::eq($facts['delivered_money_total'], $payouts, 'the ledger holds what was delivered');
    $ran = array_filter($log, static fn (string $l): bool => preg_match('/^callback\.php: (gameSessionBuyRefund|jackpotPayout) for player /', $l) === 1);
    T::eq($facts['delivered'], count($ran), 'the logic ran once per event');
    $replayed = count($server->scriptLog('repeated delivery answered from the journal'));
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

// The README's "Exactly once" snippet as it stands, run with the functions it leaves to the
// partner: respond() records the answer, runPartnerLogic() runs $snippetLogic.

/** The ledger failed (the snippet's transient failure). */
final class LedgerUnavailable extends RuntimeException
{
}

/** @var array{0: int, 1: string}|null what the snippet answered */
$snippetAnswer = null;
/** @var callable(\SlotPartner\Event): string */
$snippetLogic = static fn (SlotPartner\Event $event): string => $event->reply(true);

function respond(int $status, string $json): void
{
    $GLOBALS['snippetAnswer'] = [$status, $json];
}

function runPartnerLogic(SlotPartner\Event $event): string
{
    return ($GLOBALS['snippetLogic'])($event);
}

/**
 * Runs the README's snippet for one refund delivery with the journal at $url (lock time-out
 * 50 ms), the X-Service-Token $token; returns its answer (an uncaught exception fails the test).
 *
 * @return array{0: int, 1: string}|null
 */
function runSnippet(string $url, ?string $token, string $body): ?array
{
    $readme = (string) file_get_contents(PACKAGE . '/README.md');
    if (preg_match('/\n## Exactly once\n.*?```php\n(.*?)```/s', $readme, $m) !== 1) {
        throw new RuntimeException('no PHP snippet under "Exactly once" in README.md');
    }
    $literal = "new Journal('sqlite:/var/lib/partner/journal.db')";
    if (!str_contains($m[1], $literal)) {
        throw new RuntimeException('the snippet opens no journal at ' . $literal);
    }
    $code = str_replace($literal, 'new Journal(' . var_export($url, true) . ', lockTimeoutMs: 50)', $m[1]);
    $_SERVER['HTTP_X_SERVICE_TOKEN'] = $token;
    $_SERVER['REMOTE_ADDR'] = '18.203.30.17';   // a production address
    $partnerToken = TOKEN;
    $GLOBALS['snippetAnswer'] = null;
    $log = ini_set('error_log', '/dev/null');
    try {
        eval($code);
    } finally {
        ini_set('error_log', (string) $log);
        unset($_SERVER['HTTP_X_SERVICE_TOKEN'], $_SERVER['REMOTE_ADDR']);
    }
    return $GLOBALS['snippetAnswer'];
}

/** Holds the write lock of the SQLite file at $url from another process until released. */
function holdWriteLock(string $url): Closure
{
    $script = 'import sqlite3, sys' . "\n" . 'db = sqlite3.connect(sys.argv[1], isolation_level=None)' . "\n"
        . 'db.execute("BEGIN EXCLUSIVE")' . "\n" . 'print("locked", flush=True)' . "\n" . 'sys.stdin.read()' . "\n";
    $process = proc_open(['python3', '-c', $script, substr($url, strlen('sqlite:'))], [0 => ['pipe', 'r'], 1 => ['pipe', 'w']], $pipes);
    if ($process === false || trim((string) fgets($pipes[1])) !== 'locked') {
        throw new RuntimeException('cannot hold the journal\'s lock (python3 with sqlite3 is needed)');
    }
    return static function () use ($process, $pipes): void {
        fclose($pipes[0]);
        fclose($pipes[1]);
        proc_close($process);
    };
}

T::test('the README snippet: 401 and 503 naming nothing of an unreachable journal', function (): void {
    $url = 'postgres://sp_owner@127.0.0.1:1/sp_ledger';
    $refused = runSnippet($url, null, fixture('refund.json'));
    T::eq(401, $refused[0] ?? null, 'no token: 401, the journal untouched');
    $down = runSnippet($url, TOKEN, fixture('refund.json'));
    T::eq(503, $down[0] ?? null, 'the journal unreachable: 503');
    T::true(is_array(json_decode($down[1] ?? '', true)['error'] ?? null), 'a JSON body: ' . ($down[1] ?? ''));
    foreach (['postgres://', '127.0.0.1', 'sp_owner', 'sp_ledger'] as $secret) {
        T::true(!str_contains($down[1] ?? '', $secret), 'the body names ' . $secret);
    }
});

T::test('the README snippet answers with a JSON body when the journal fails at finish() or abandon()', function () use (&$snippetLogic): void {
    $url = journalUrl();
    $snippetLogic = static fn (SlotPartner\Event $event): string => $event->reply(true);
    $first = runSnippet($url, TOKEN, refund(900020, 1));
    T::eq([200, '{"refund":{"success":true,"errorMessage":""}}'], $first, 'handled');
    T::eq($first, runSnippet($url, TOKEN, refund(900020, 1)), 'a repeat: the first reply');
    // The journal fails once the logic ran: the work is done, the reply is sent all the same.
    $release = null;
    $snippetLogic = static function (SlotPartner\Event $event) use ($url, &$release): string {
        $release = holdWriteLock($url);
        return $event->reply(true);
    };
    try {
        T::eq([200, '{"refund":{"success":true,"errorMessage":""}}'], runSnippet($url, TOKEN, refund(900021, 2)), 'finish() failed: the reply sent');
    } finally {
        $release !== null && $release();
    }
    // The ledger and then the journal fail: 503 with the snippet's JSON body.
    $release = null;
    $snippetLogic = static function (SlotPartner\Event $event) use ($url, &$release): string {
        $release = holdWriteLock($url);
        throw new LedgerUnavailable('the ledger is down');
    };
    try {
        $down = runSnippet($url, TOKEN, refund(900022, 3));
    } finally {
        $release !== null && $release();
    }
    T::eq(503, $down[0] ?? null, 'abandon() failed: 503');
    T::true(is_array(json_decode($down[1] ?? '', true)['error'] ?? null), 'a JSON body: ' . ($down[1] ?? ''));
    $snippetLogic = static fn (SlotPartner\Event $event): string => $event->reply(true);
});

T::test('a backup answers a repeat with the stored reply and never replaces a file', function () use (&$runs): void {
    $dir = tempDir();
    $journal = new Journal('sqlite:' . $dir . '/journal.db');
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $runs = 0;
    $first = callback($receiver, refund(900900, 1), false);
    $dest = $dir . '/backup.db';
    $journal->backup($dest);
    T::eq(0600, fileperms($dest) & 0777, 'the copy is 0600');
    $copy = new Journal('sqlite:' . $dest);
    T::eq($first, callback(new Receiver(TOKEN, sources: 'any', journal: $copy), refund(900900, 1)), 'the repeat answered from the copy');
    T::eq(1, $runs, 'the repeat ran nothing');
    T::eq([1, 1], [$copy->status()->handled, $copy->status()->replayed], 'the copy counts it');
    $before = (string) file_get_contents($dest);
    callback($receiver, refund(900901, 2));
    $refused = T::throws(ConfigurationException::class, fn () => $journal->backup($dest), 'an existing file');
    T::eq('dest', $refused?->field, 'the field named');
    T::true(str_contains((string) $refused?->getMessage(), 'exists'), 'says it exists: ' . $refused?->getMessage());
    T::eq($before, (string) file_get_contents($dest), 'the existing file untouched');
    foreach (["$dir/a\0b.db", "$dir/missing/backup.db", ''] as $bad) {
        T::eq('dest', T::throws(ConfigurationException::class, fn () => $journal->backup($bad), "dest $bad")?->field, 'the field named');
    }
    T::eq([], glob($dir . '/*.partial-*') ?: [], 'nothing temporary left');
});

const DAY_MS = 86400000;

/** Runs $statement on the SQLite journal at $url from another process (a second copy of SQLite in this one would release the library's locks); the rows changed. */
function sqlOn(string $url, string $statement): int
{
    $script = 'import sqlite3, sys' . "\n" . 'print(sqlite3.connect(sys.argv[1], isolation_level=None).execute(sys.argv[2]).rowcount)';
    $process = proc_open(['python3', '-c', $script, substr($url, strlen('sqlite:')), $statement], [1 => ['pipe', 'w']], $pipes);
    if ($process === false) {
        throw new RuntimeException('cannot run python3 with sqlite3');
    }
    $out = stream_get_contents($pipes[1]);
    fclose($pipes[1]);
    if (proc_close($process) !== 0) {
        throw new RuntimeException('the SQL failed: ' . $statement);
    }
    return (int) trim((string) $out);
}

/** Moves the finishing time of the delivery of $transactionId back by $days. */
function age(string $url, int $transactionId, int $days): void
{
    $changed = sqlOn($url, 'UPDATE sp_journal_delivery SET finished_ms = finished_ms - ' . ($days * DAY_MS) . ' WHERE transaction_id = ' . $transactionId);
    T::eq(1, $changed, 'one delivery aged');
}

T::test('prune compacts an aged delivery, and its repeat says the reply was pruned', function () use (&$runs): void {
    $url = journalUrl();
    $journal = new Journal($url);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $runs = 0;
    $first = callback($receiver, refund(960001, 1));
    callback($receiver, refund(960002, 2));
    $before = $journal->vitals();
    T::true($before instanceof \SlotPartner\JournalVitals, 'JournalVitals');
    T::eq([0, 0, null], [$before->pruned, $before->forgotten, $before->oldestGapMs], 'nothing pruned, no gap');
    T::true(($before->sizeBytes ?? 0) > 0 && $before->oldestRecordMs !== null, 'a size and a stored reply');
    T::true(abs((int) (microtime(true) * 1000) - (int) $before->lastDeliveryMs) < 60000, 'a delivery just now');
    age($url, 960001, 100);
    $report = $journal->prune(90 * DAY_MS);
    T::true($report instanceof \SlotPartner\PruneReport, 'PruneReport');
    T::eq([1, 0, 0, 0, 2, true], [$report->compacted, $report->forgotten, $report->refusedRemoved, $report->conflictsRemoved, $report->batches, $report->complete], 'one compacted');
    T::true($report->longestBatchUs >= 0 && $report->bytesReturned >= 0, 'the batch timed');
    T::eq([1, 0], [$journal->vitals()->pruned, $journal->vitals()->forgotten], 'counted');
    $again = $journal->prune(90 * DAY_MS, pauseMs: 0, maxTimeMs: 60000);
    T::eq([0, 1, true], [$again->compacted, $again->batches, $again->complete], 'nothing left');

    $event = $receiver->parse(refund(960001, 1));
    $claim = $event->begin();
    T::eq([Outcome::New, 2, [], true], [$claim->outcome, $claim->attempt, $claim->differing, $claim->replyPruned], 'the repeat: attempt 2, the reply pruned');
    $event->reply(true);
    $event->finish();
    T::eq($first, callback($receiver, refund(960001, 1)), 'stored again, answered again');
    T::eq(Outcome::Done, $receiver->parse(refund(960002, 2))->begin()->outcome, 'the young one kept its reply');
    $fresh = $receiver->parse(refund(960003, 3));
    T::true(!$fresh->begin()->replyPruned, 'a first delivery');
    $fresh->free();

    // Compact records forgotten: a repeat is a new delivery. (The cutoffs count from the newest
    // stored reply at the latest: a young one is there.)
    callback($receiver, refund(960004, 4));
    age($url, 960001, 400);
    age($url, 960002, 400);
    $report = $journal->prune(90 * DAY_MS, forgetOlderThanMs: 365 * DAY_MS, batch: 1);
    T::eq([2, 2, 3], [$report->compacted, $report->forgotten, $report->batches], 'compacted and forgotten, a row a batch');
    T::eq([3, 2], [$journal->vitals()->pruned, $journal->vitals()->forgotten], 'counted');
    $claim = $receiver->parse(refund(960002, 2))->begin();
    T::eq([Outcome::New, 1, false], [$claim->outcome, $claim->attempt, $claim->replyPruned], 'forgotten: a new delivery');
});

T::test('prune, missingOlderThan and the retention name their field', function (): void {
    $journal = new Journal(journalUrl());
    $cases = [
        ['older_than', fn () => $journal->prune(3600 * 1000)],
        ['older_than', fn () => $journal->prune(DAY_MS - 1)],
        ['older_than', fn () => $journal->prune(-1)],
        ['older_than', fn () => $journal->prune(PHP_INT_MAX)],
        ['forget_older_than', fn () => $journal->prune(DAY_MS, forgetOlderThanMs: 0)],
        ['forget_older_than', fn () => $journal->prune(DAY_MS, forgetOlderThanMs: DAY_MS)],
        ['batch', fn () => $journal->prune(DAY_MS, batch: 0)],
        ['batch', fn () => $journal->prune(DAY_MS, batch: 100001)],
        ['pause', fn () => $journal->prune(DAY_MS, pauseMs: 60001)],
        ['pause', fn () => $journal->prune(DAY_MS, pauseMs: -1)],
        ['max_time', fn () => $journal->prune(DAY_MS, maxTimeMs: 0)],
        ['min_age', fn () => $journal->missingOlderThan(-1)],
        ['limit', fn () => $journal->missingOlderThan(0, 0)],
        ['limit', fn () => $journal->missingOlderThan(0, 1000001)],
    ];
    foreach ($cases as [$field, $call]) {
        T::eq($field, T::throws(ConfigurationException::class, $call, 'refused: ' . $field)?->field, $field . ' named');
    }
    T::eq(0, $journal->vitals()->pruned, 'nothing refused removed anything');
    foreach ([1, DAY_MS - 1, -1, PHP_INT_MAX] as $ms) {
        T::eq('retention', T::throws(ConfigurationException::class, fn () => new Journal(journalUrl(), retentionMs: $ms), 'retention ' . $ms)?->field, 'retention named');
    }
});

T::test('missingOlderThan leaves out young gaps, and the vitals date them', function (): void {
    $url = journalUrl();
    $journal = new Journal($url);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    callback($receiver, refund(961001, 1));
    callback($receiver, refund(961003, 3));
    T::eq([[2, 2]], $journal->missingOlderThan(0), 'every gap is older than 0 ms');
    T::eq([], $journal->missingOlderThan(3600000), 'the gap opened just now');
    sqlOn($url, 'UPDATE sp_journal_runs SET since_ms = since_ms - 7200000 WHERE lo = 3');
    T::eq([[2, 2]], $journal->missingOlderThan(3600000, 1), 'two hours old');
    $age = (int) (microtime(true) * 1000) - (int) $journal->vitals()->oldestGapMs;
    T::true(abs($age - 7200000) < 120000, 'the oldest gap is two hours old: ' . $age);
});

T::test('the journal\'s own retention compacts on finish', function (): void {
    $url = journalUrl();
    $journal = new Journal($url, retentionMs: 90 * DAY_MS);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    callback($receiver, refund(962001, 1));
    age($url, 962001, 100);
    usleep(1100000); // a batch at most once a second
    callback($receiver, refund(962002, 2));
    T::eq(1, $journal->vitals()->pruned, 'compacted by the finish');
    $claim = $receiver->parse(refund(962001, 1))->begin();
    T::eq([2, true], [$claim->attempt, $claim->replyPruned], 'its repeat: attempt 2, the reply pruned');
    T::eq(0, (new Journal(journalUrl(), retentionMs: 0))->vitals()->pruned, 'retention 0: none');
});

T::finish();
