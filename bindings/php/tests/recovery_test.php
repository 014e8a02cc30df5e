<?php

declare(strict_types=1);

// Lost events fetched again with Recovery, against the sandbox serving getEvent for its seeded
// events (indexes 1 to 20), on a SQLite journal in a temporary directory: delivered and recovered
// events each handled once (every recovered event comes claimed), a late delivery during the
// recovery handled once, a second delivery of a recovered event answered from the journal,
// failures by reason (HTTP 500, malformed answers, an index the service does not know) and a
// later healthy run closing the gaps, indexes the service never knows becoming unrecoverable, the
// fetch settings, and misuse.

require __DIR__ . '/helper.php';

use SlotPartner\Client;
use SlotPartner\ConfigurationException;
use SlotPartner\Event;
use SlotPartner\Journal;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\Recovery;
use SlotPartner\RecoveryFailure;
use SlotPartner\RecoveryReason;
use SlotPartner\RecoveryReport;
use SlotPartner\ServiceException;
use SlotPartner\ValidationException;

const SEED = 11;

$sandbox = new Sandbox(20, SEED);

function client(string $path = '', ?string $fetchAction = null, ?string $fetchIndexParam = null, ?string $fetchEventKey = null): Client
{
    global $sandbox;
    return new Client($sandbox->url . $path, TOKEN, caFile: $sandbox->caFile, retries: 0, fetchAction: $fetchAction, fetchIndexParam: $fetchIndexParam, fetchEventKey: $fetchEventKey);
}

// The bodies the service would have delivered, as getEvent answers them.
$bodies = [];
$fetcher = client();
for ($i = 1; $i <= 20; $i++) {
    $bodies[$i] = json_encode($fetcher->call('getEvent', ['index' => $i])['event'], JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
}
unset($fetcher);

/** A journal (gap detection from index 1) and a receiver on it; $handled lists the handler's runs. */
final class Partner
{
    public readonly Journal $journal;
    public readonly Receiver $receiver;
    /** @var list<int> */
    public array $handled = [];

    public function __construct(?int $notFoundLimit = null)
    {
        $this->journal = new Journal('sqlite:' . tempDir() . '/journal.db', firstIndex: 1, notFoundLimit: $notFoundLimit);
        $this->receiver = new Receiver(TOKEN, sources: 'any', journal: $this->journal);
    }

    /** The partner's handler: records the run, builds the reply. */
    public function handler(Event $event): string
    {
        $this->handled[] = (int) $event->index;
        return $event->reply(true);
    }

    /**
     * A callback: handle, begin, then the handler and finish for a new delivery.
     *
     * @return array{0: Outcome, 1: string}
     */
    public function deliver(string $body): array
    {
        $event = $this->receiver->handle(TOKEN, '127.0.0.1', $body);
        $claim = $event->begin();
        if ($claim->outcome === Outcome::Done) {
            return [$claim->outcome, (string) $claim->reply];
        }
        $reply = $this->handler($event);
        $event->finish();
        return [$claim->outcome, $reply];
    }

    /**
     * The README's loop; $between($count) runs after each recovered event.
     *
     * @return array{0: list<int>, 1: RecoveryReport}
     */
    public function recover(Client $client, ?callable $between = null): array
    {
        $recovery = new Recovery($this->receiver, $client);
        $recovered = [];
        foreach ($recovery as $index => $event) {
            T::eq($index, $event->index, 'keyed by its index');
            $recovered[] = $index;
            $this->handler($event);
            $event->finish();
            if ($between !== null) {
                $between(count($recovered));
            }
        }
        return [$recovered, $recovery->report()];
    }
}

T::test('lost events are recovered claimed, a late delivery is handled once', function () use ($bodies): void {
    $p = new Partner();
    foreach ([1, 2, 4, 5, 9, 10] as $index) {
        T::eq(Outcome::New, $p->deliver($bodies[$index])[0], 'delivered ' . $index);
    }
    T::eq([[3, 3], [6, 8]], $p->journal->missing(), 'the gaps');
    $late = function (int $count) use ($p, $bodies): void {
        if ($count === 1) { // index 8 arrives late, after the first recovered event
            T::eq(Outcome::New, $p->deliver($bodies[8])[0], 'the late delivery runs the handler');
        }
    };
    [$recovered, $report] = $p->recover(client(), $late);
    T::eq([3, 6, 7], $recovered, 'recovered');
    T::eq([4, 3, 1, []], [$report->missing, $report->recovered, $report->handledMeanwhile, $report->failures], 'the report');
    T::true($report->complete(), 'complete');
    T::eq([], $p->journal->missing(), 'no gap left');
    $handled = $p->handled;
    sort($handled);
    T::eq(range(1, 10), $handled, 'the handler ran once per index');
    foreach (range(1, 10) as $index) {
        [$outcome, $reply] = $p->deliver($bodies[$index]);
        T::eq(Outcome::Done, $outcome, 'a second delivery of ' . $index . ' is answered from the journal');
        T::true(preg_match('/^\{"(refund|payout)":\{"success":true,"errorMessage":""\}\}$/', $reply) === 1, 'the stored reply: ' . $reply);
    }
    T::eq(10, count($p->handled), 'nothing ran again');
    $status = $p->journal->status();
    T::eq([10, 0, 0], [$status->handled, $status->inProgress, $status->missing], 'handled, in progress, missing');
    T::eq(0, Event::liveCount(), 'every native event freed');
});

T::test('a recovered event is claimed: next(), no begin(), its reply stored by finish()', function () use ($bodies): void {
    $p = new Partner();
    $p->deliver($bodies[2]);
    $recovery = new Recovery($p->receiver, client(), 1);
    $event = $recovery->next();
    T::true($event !== null, 'one event');
    assert($event !== null);
    T::eq(1, $event->index, 'index 1');
    T::eq(get_class($p->receiver->parse($bodies[1])), get_class($event), 'typed like the delivered body');
    T::eq(900_000_001, $event->transactionId ?? null, 'its transactionId');
    T::throws(ConfigurationException::class, static fn () => $event->begin(), 'begun already');
    T::eq(null, $recovery->next(), 'then none');
    $reply = $event->reply(false, 'player blocked');
    $event->finish();
    T::eq([Outcome::Done, $reply], $p->deliver($bodies[1]), 'the success:false reply is the stored one');
    $recovery->close();
    $recovery->close();
    T::eq(1, $recovery->report()->recovered, 'the last report after close()');
    T::throws(ConfigurationException::class, static fn () => $recovery->next(), 'closed');
});

T::test('an unfinished recovered event releases its claim', function () use ($bodies): void {
    $p = new Partner();
    $p->deliver($bodies[3]);
    $recovery = new Recovery($p->receiver, client());
    $first = $recovery->next();
    $second = $recovery->next();
    T::eq([1, 2], [$first?->index, $second?->index], 'two recovered');
    unset($recovery); // events stay valid after their recovery is gone
    $first?->abandon(); // the ledger was down
    $second = null; // dropped unfinished: released the same way
    T::eq(0, $p->journal->status()->inProgress, 'no claim left');
    foreach ([1, 2] as $index) {
        $event = $p->receiver->handle(TOKEN, '127.0.0.1', $bodies[$index]);
        $claim = $event->begin();
        T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'the next delivery runs it as attempt 2');
        $event->reply(true);
        $event->finish();
    }
});

T::test('failures by reason, and a later healthy run closes the gaps', function () use ($bodies): void {
    $p = new Partner();
    $p->deliver($bodies[1]);
    $p->deliver($bodies[3]);
    // Beyond the sandbox's events: 21 is unknown to it.
    $p->deliver('{"event":"gameSessionBuyRefund","index":22,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
        . '"transactionId":900000022,"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":12,"isMobile":false}');
    T::eq([[2, 2], [4, 21]], $p->journal->missing(), 'the gaps');
    [$recovered, $report] = $p->recover(client('/fault/status/500'));
    T::eq([[], 19, 0, 19], [$recovered, $report->missing, $report->recovered, count($report->failures)], 'HTTP 500: nothing recovered, every index failed');
    T::true(!$report->complete(), 'not complete');
    $first = $report->failures[0];
    T::true($first instanceof RecoveryFailure, 'a RecoveryFailure');
    T::eq([2, RecoveryReason::Service, 'SP_ERR_HTTP_STATUS'], [$first->index, $first->reason, $first->statusName], 'the first failure');
    T::true(str_contains($first->message, '500'), 'names the status: ' . $first->message);
    T::true($first->exception() instanceof ServiceException, 'a ServiceException');
    T::eq(array_merge([2], range(4, 21)), array_map(static fn (RecoveryFailure $f): int => $f->index, $report->failures), 'each index');
    [$recovered, $report] = $p->recover(client('/fault/malformed'));
    T::eq([], $recovered, 'malformed: nothing recovered');
    T::eq(array_fill(0, 19, RecoveryReason::InvalidEvent), array_map(static fn (RecoveryFailure $f): RecoveryReason => $f->reason, $report->failures), 'every answer invalid');
    T::true(str_contains($report->failures[0]->message, 'transactionId'), 'names the field: ' . $report->failures[0]->message);
    T::true($report->failures[0]->exception() instanceof ValidationException, 'a ValidationException');
    T::eq(0, $p->journal->status()->inProgress, 'nothing claimed');
    [$recovered, $report] = $p->recover(client());
    T::eq(array_merge([2], range(4, 20)), $recovered, 'healthy: what the service knows is recovered');
    T::eq([19, 18, 0], [$report->missing, $report->recovered, $report->handledMeanwhile], 'the counts');
    T::eq([[21, RecoveryReason::NotFound]], array_map(static fn (RecoveryFailure $f): array => [$f->index, $f->reason], $report->failures), '21 is not found');
    T::eq([[21, 21]], $p->journal->missing(), 'only 21 left');
    $handled = $p->handled;
    sort($handled);
    T::eq(array_merge(range(1, 20), [22]), $handled, 'nothing handled twice');
});

T::test('an index the service does not know becomes unrecoverable until resolved by hand', function () use ($bodies): void {
    $p = new Partner(notFoundLimit: 2);
    $p->deliver($bodies[1]);
    // Beyond the sandbox's events: 21 and 22 are unknown to it.
    $p->deliver('{"event":"gameSessionBuyRefund","index":23,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
        . '"transactionId":900000023,"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":12,"isMobile":false}');
    [$recovered, $report] = $p->recover(client());
    T::eq(range(2, 20), $recovered, 'what the service knows is recovered');
    T::eq([[21, RecoveryReason::NotFound], [22, RecoveryReason::NotFound]], array_map(static fn (RecoveryFailure $f): array => [$f->index, $f->reason], $report->failures), '21 and 22 not found');
    T::eq(0, $report->unrecoverable, 'one 404 is below notFoundLimit 2');
    T::eq([], $p->journal->unrecoverable(), 'none unrecoverable yet');
    [, $report] = $p->recover(client());
    T::eq([2, 2, 0], [$report->missing, count($report->failures), $report->unrecoverable], 'the second 404 for each');
    T::eq([[21, 22], 2], [$p->journal->unrecoverable(), $p->journal->status()->unrecoverable], 'unrecoverable now');
    T::eq([21], $p->journal->unrecoverable(1), 'at most limit');
    [$recovered, $report] = $p->recover(client());
    T::eq([[], 0, 0, 0, [], 2], [$recovered, $report->missing, $report->recovered, $report->handledMeanwhile, $report->failures, $report->unrecoverable], 'no longer fetched, reported');
    T::true($report->complete(), 'nothing left that a recovery could fetch');
    T::eq([[21, 22]], $p->journal->missing(), 'still missing until resolved by hand');
    T::eq(2, $p->journal->resolve(21, 22, 'the service confirms 21 and 22 do not exist'), 'resolved');
    T::eq([[], 0, 0], [$p->journal->unrecoverable(), $p->journal->status()->unrecoverable, $p->journal->status()->missing], 'settled');
    [, $report] = $p->recover(client());
    T::eq([0, 0], [$report->missing, $report->unrecoverable], 'nothing more to report');
});

T::test('the fetch settings', function () use ($bodies): void {
    $p = new Partner();
    $p->deliver($bodies[2]);
    $reasons = static fn (RecoveryReport $r): array => array_map(static fn (RecoveryFailure $f): array => [$f->index, $f->reason], $r->failures);
    T::eq([[1, RecoveryReason::InvalidEvent]], $reasons($p->recover(client(fetchEventKey: ''))[1]), 'the whole answer taken as the event');
    $report = $p->recover(client(fetchAction: 'fetchLostEvent'))[1];
    T::eq([[1, RecoveryReason::Service]], $reasons($report), 'an operation the service does not know');
    T::true(str_contains($report->failures[0]->message, '400'), 'HTTP 400: ' . $report->failures[0]->message);
    T::eq([[1, RecoveryReason::Service]], $reasons($p->recover(client(fetchIndexParam: 'eventIndex'))[1]), 'another parameter name');
    [$recovered, $report] = $p->recover(client(fetchAction: 'getEvent', fetchIndexParam: 'index', fetchEventKey: 'event'));
    T::eq([[1], []], [$recovered, $report->failures], 'the defaults, spelled out');
    foreach (['fetchAction' => 'fetch_action', 'fetchIndexParam' => 'fetch_index_param'] as $param => $field) {
        $e = T::throws(ConfigurationException::class, static fn () => client(...[$param => '']), $param . ' empty');
        T::eq($field, $e?->field, 'names ' . $field);
    }
    T::throws(ConfigurationException::class, static fn () => client(fetchEventKey: "a\0b"), 'a NUL');
});

T::test('misuse', function (): void {
    $p = new Partner();
    $recovery = new Recovery($p->receiver, client(), 5);
    T::eq([0, 0, 0, []], [$recovery->report()->missing, $recovery->report()->recovered, $recovery->report()->handledMeanwhile, $recovery->report()->failures], 'nothing seen: nothing missing');
    T::eq([], iterator_to_array($recovery), 'nothing to iterate');
    $e = T::throws(ConfigurationException::class, static fn () => new Recovery(new Receiver(TOKEN, sources: 'any'), client()), 'a receiver without a journal');
    T::true(str_contains((string) $e?->getMessage(), 'no journal'), 'says so: ' . $e?->getMessage());
    foreach ([0, -1, 1_000_001] as $limit) {
        $e = T::throws(ConfigurationException::class, static fn () => new Recovery($p->receiver, client(), $limit), 'limit ' . $limit);
        T::eq('limit', $e?->field, 'names the limit');
    }
});

$sandbox->stop();
T::finish();
