<?php

declare(strict_types=1);

// Nothing grows: 100,000 parse/reply cycles after a warm-up, measured with memory_get_usage()
// (PHP's heap) and the resident set size (/proc/self/statm: the library's heap too).

require __DIR__ . '/helper.php';

use SlotPartner\BalanceQuery;
use SlotPartner\Receiver;
use SlotPartner\Reply;
use SlotPartner\ValidationException;

const CYCLES = 100_000;
const LIMIT_BYTES = 4 * 1024 * 1024;

function residentBytes(): int
{
    $statm = explode(' ', (string) file_get_contents('/proc/self/statm'));
    return (int) $statm[1] * 4096;
}

/** Runs $cycle CYCLES times after a warm-up; checks both measures grew by less than LIMIT_BYTES. */
function noGrowth(string $what, callable $cycle): void
{
    for ($i = 0; $i < 20_000; $i++) {
        $cycle($i);
    }
    gc_collect_cycles();
    $heap = memory_get_usage();
    $resident = residentBytes();
    for ($i = 0; $i < CYCLES; $i++) {
        $cycle($i);
    }
    gc_collect_cycles();
    $heapGrowth = memory_get_usage() - $heap;
    $residentGrowth = residentBytes() - $resident;
    T::true($heapGrowth < LIMIT_BYTES, sprintf('%s: memory_get_usage grew by %d bytes', $what, $heapGrowth));
    T::true($residentGrowth < LIMIT_BYTES, sprintf('%s: resident memory grew by %d bytes', $what, $residentGrowth));
    printf("%s: %d cycles, heap %+d bytes, resident %+d bytes\n", $what, CYCLES, $heapGrowth, $residentGrowth);
}

$receiver = new Receiver(TOKEN, sources: 'any');
$bodies = [fixture('refund.json'), fixture('payout.json'), fixture('balance.json')];
$invalid = fixture('invalid_money_float.json');

T::test('the check can fail', function (): void {
    // The same measure over a loop that keeps what it makes must exceed the limit.
    $kept = [];
    $resident = residentBytes();
    for ($i = 0; $i < 5000; $i++) {
        $kept[] = str_repeat('x', 1024);
    }
    T::true(residentBytes() - $resident >= LIMIT_BYTES, 'resident memory sees a 5 MiB leak');
});

T::test('handle, read, reply, free', function () use ($receiver, $bodies): void {
    noGrowth('handle+reply', function (int $i) use ($receiver, $bodies): void {
        $event = $receiver->handle(TOKEN, '127.0.0.1', $bodies[$i % 3]);
        $event instanceof BalanceQuery ? $event->replyBalance(100000) : $event->reply(false, 'declined ' . $i);
    });
});

T::test('refusals', function () use ($receiver, $invalid): void {
    noGrowth('refusals', function () use ($receiver, $invalid): void {
        try {
            $receiver->parse($invalid);
        } catch (ValidationException $e) {
            $e->responseBody;
        }
    });
});

T::test('standalone replies', function (): void {
    noGrowth('Reply::result', function (int $i): void {
        Reply::result('refund', false, 'no ' . $i);
    });
});

T::test('receivers built and dropped', function (): void {
    noGrowth('new Receiver', function (): void {
        new Receiver(TOKEN, sources: 'staging,10.0.0.0/8', maxBodyBytes: 65536, rejectUnknownEvents: true);
    });
});

T::test('client calls', function (): void {
    // Fewer cycles (each is an HTTPS round trip on loopback), so a tighter bound on the heap.
    $sandbox = new Sandbox();
    $client = new SlotPartner\Client($sandbox->url, TOKEN, caFile: $sandbox->caFile);
    $cycle = static function (int $i) use ($client): void {
        $i % 2 === 0 ? $client->getGames('en-US', 1001 + $i % 7) : $client->call('echo', ['i' => $i]);
    };
    for ($i = 0; $i < 300; $i++) {
        $cycle($i);
    }
    $heap = memory_get_usage();
    for ($i = 0; $i < 2000; $i++) {
        $cycle($i);
    }
    $growth = memory_get_usage() - $heap;
    T::true($growth < 32 * 1024, sprintf('getGames/call: memory_get_usage grew by %d bytes over 2000 calls', $growth));
    printf("getGames/call: 2000 calls, heap %+d bytes\n", $growth);
    unset($client);
    $sandbox->stop();
});

T::finish();
