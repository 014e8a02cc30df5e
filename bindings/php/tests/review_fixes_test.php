<?php

declare(strict_types=1);

// The C ABI changes of the review, through the PHP binding: the lenient index
// ($indexUnreadable) and strictIndex, balance failures that state no balance and their HTTP
// status (replyHttpStatus(), balanceFailureHttpStatus), X-Forwarded-For as bytes, sources "any"
// without an address, IPv4-mapped ranges, case-insensitive tokens, the last error's message
// handed back, and the refused event's identity on the exception. Exact bodies and statuses:
// each test fails against the old behaviour.

require __DIR__ . '/helper.php';

use SlotPartner\AuthenticationException;
use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\ConfigurationException;
use SlotPartner\JackpotPayout;
use SlotPartner\OtherEvent;
use SlotPartner\Receiver;
use SlotPartner\Reply;
use SlotPartner\Status;
use SlotPartner\ValidationException;

/** $body with the value of its index field replaced by the raw JSON $raw. */
function withIndex(string $body, string $raw): string
{
    $replaced = preg_replace('/"index": *[0-9]+/', '"index":' . $raw, $body, 1, $count);
    if ($count !== 1) {
        throw new RuntimeException('no index in the body');
    }
    return (string) $replaced;
}

$receiver = new Receiver(TOKEN, sources: 'any');

T::test('an unreadable index: handled without one, raw value in extra', function () use ($receiver): void {
    $kinds = ['payout.json' => JackpotPayout::class, 'refund.json' => BuyRefund::class, 'balance.json' => BalanceQuery::class, 'other_event.json' => OtherEvent::class];
    foreach (['"42"', '-1', '1.5'] as $raw) {
        foreach ($kinds as $fixture => $class) {
            $what = $fixture . ' index ' . $raw;
            $e = $receiver->handle(TOKEN, '127.0.0.1', withIndex(fixture($fixture), $raw));
            T::eq($class, get_class($e), $what . ': class');
            T::eq(null, $e->index, $what . ': no index');
            T::eq(true, $e->indexUnreadable, $what . ': indexUnreadable');
            T::eq($raw, $e->extra['index'] ?? null, $what . ': the raw value in extra');
        }
    }
    $e = $receiver->parse(withIndex(fixture('payout.json'), '"42"'));
    T::eq('{"payout":{"success":true,"errorMessage":""}}', $e->reply(true), 'answered as usual');
    T::eq(200, $e->replyHttpStatus(), 'with 200');
    $plain = $receiver->parse(fixture('payout.json'));
    T::eq([42, false], [$plain->index, $plain->indexUnreadable], 'a readable index');
    $minimal = $receiver->parse(fixture('payout_minimal.json'));
    T::eq([null, false], [$minimal->index, $minimal->indexUnreadable], 'no index field');
    T::throws(Error::class, function () use ($plain): void {
        $plain->indexUnreadable = true; // @phpstan-ignore-line
    }, 'indexUnreadable is readonly');
});

T::test('strictIndex refuses an unreadable index, naming the field', function (): void {
    $strict = new Receiver(TOKEN, sources: 'any', strictIndex: true);
    $x = T::throws(ValidationException::class, fn () => $strict->handle(TOKEN, '127.0.0.1', withIndex(fixture('payout.json'), '"42"')), 'a string index');
    T::eq(Status::WRONG_TYPE, $x?->status, 'status');
    T::eq('jackpotPayout.index', $x?->field, 'field');
    T::eq(200, $x?->httpStatus, 'HTTP status');
    T::eq('{"payout":{"success":false,"errorMessage":"jackpotPayout.index: expected a non-negative integer, got \"42\""}}', $x?->responseBody, 'answer');
    $x = T::throws(ValidationException::class, fn () => $strict->parse(withIndex(fixture('refund.json'), '-1')), 'a negative index');
    T::eq('gameSessionBuyRefund.index', $x?->field, 'refund field');
    $x = T::throws(ValidationException::class, fn () => $strict->parse(withIndex(fixture('balance.json'), '1.5')), 'a fractional index in a balance query');
    T::eq(500, $x?->httpStatus, 'a balance query: 500');
    T::eq('{"playerBalance":{"errorMessage":"getPlayerBalance.index: expected a non-negative integer, got 1.5"}}', $x?->responseBody, 'no balance stated');
    T::eq(42, $strict->parse(fixture('payout.json'))->index, 'a readable index passes');
});

T::test('a refused balance query states no balance and is sent with 500', function () use ($receiver): void {
    $e = $receiver->parse(fixture('balance.json'));
    T::eq(0, $e->replyHttpStatus(), 'no reply built yet');
    $body = $e->reply(false, 'player unknown');
    T::eq('{"playerBalance":{"errorMessage":"player unknown"}}', $body, 'the body');
    T::true(!str_contains($body, 'money') && !str_contains($body, 'coins'), 'no money, no coins');
    T::eq(500, $e->replyHttpStatus(), 'the status');
    $e->free();
    T::eq(500, $e->replyHttpStatus(), 'kept after free()');
    $payout = $receiver->parse(fixture('payout.json'));
    $payout->reply(false, 'jackpot unknown');
    T::eq(200, $payout->replyHttpStatus(), 'a refused payout: 200');
    $x = T::throws(ValidationException::class, fn () => $receiver->parse(fixture('invalid_no_player.json')), 'a balance query refused by validation');
    T::eq(500, $x?->httpStatus, 'answered 500');
    T::eq('{"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)"}}', $x?->responseBody, 'no balance stated');
    T::eq('{"playerBalance":{"errorMessage":"blocked"}}', Reply::balance(100, 'GBP', 3, 'blocked'), 'standalone: money, currency, coins unused');
});

T::test('balanceFailureHttpStatus', function (): void {
    foreach ([200, 400, 503, 599] as $status) {
        $r = new Receiver(TOKEN, sources: 'any', balanceFailureHttpStatus: $status);
        $e = $r->parse(fixture('balance.json'));
        T::eq('{"playerBalance":{"errorMessage":"down"}}', $e->reply(false, 'down'), $status . ': body');
        T::eq($status, $e->replyHttpStatus(), $status . ': reply status');
        $x = T::throws(ValidationException::class, fn () => $r->parse(fixture('invalid_no_player.json')), $status . ': refused by validation');
        T::eq($status, $x?->httpStatus, $status . ': validation answer status');
    }
    foreach ([0, 199, 300, 600, -1, 65536 + 200] as $status) {
        $x = T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, balanceFailureHttpStatus: $status), 'status ' . $status . ' refused');
        T::eq('balance_failure_http_status', $x?->field, 'status ' . $status . ': field');
    }
});

T::test('X-Forwarded-For as bytes: ignored from an untrusted peer, 403 from a trusted proxy', function (): void {
    $r = new Receiver(TOKEN, sources: 'staging', trustedProxies: '10.0.0.0/8');
    $body = fixture('refund.json');
    foreach (["\xFF\xFE", "\xFF\0"] as $header) {
        $e = $r->handle(TOKEN, '34.254.138.20', $body, $header);
        T::eq('{"refund":{"success":true,"errorMessage":""}}', $e->reply(true), 'untrusted peer, header ignored: ' . bin2hex($header));
    }
    $x = T::throws(AuthenticationException::class, fn () => $r->handle(TOKEN, '10.0.0.5', $body, "\xFF\xFE"), 'trusted proxy, not UTF-8');
    T::eq(Status::FORBIDDEN_SOURCE, $x?->status, 'status');
    T::eq(403, $x?->httpStatus, 'HTTP 403, not 500');
    T::eq('{"error":{"code":"forbidden_source","field":"remote_addr","message":"remote_addr: X-Forwarded-For from trusted proxy 10.0.0.5 is not UTF-8 (byte 0)"}}', $x?->responseBody, 'answer');
    T::eq(900001, $r->handle(TOKEN, '10.0.0.5', $body, '34.254.138.20')->transactionId, 'a UTF-8 header from the trusted proxy is read');
});

T::test('sources any without an address, mapped ranges, upper-case tokens', function (): void {
    $any = new Receiver(TOKEN, sources: 'any');
    $body = fixture('refund.json');
    foreach ([null, '', 'not-an-address'] as $remote) {
        T::eq(900001, $any->handle(TOKEN, $remote, $body)->transactionId, 'sources any, remote ' . var_export($remote, true));
    }
    T::eq(403, T::throws(AuthenticationException::class, fn () => (new Receiver(TOKEN, sources: 'staging'))->handle(TOKEN, null, $body), 'other sources need an address')?->httpStatus, '403');
    $mapped = new Receiver(TOKEN, sources: '::ffff:10.0.0.0/104');
    T::eq(900001, $mapped->handle(TOKEN, '10.1.2.3', $body)->transactionId, 'an IPv4 peer in a mapped range');
    T::eq(Status::FORBIDDEN_SOURCE, T::throws(AuthenticationException::class, fn () => $mapped->handle(TOKEN, '11.0.0.1', $body), 'outside the mapped range')?->status, 'outside: 403');
    T::eq(900001, $any->handle(strtoupper(TOKEN), null, $body)->transactionId, 'a token sent in upper case');
    $upper = new Receiver(strtoupper(TOKEN), sources: 'any');
    T::eq(900001, $upper->handle(TOKEN, null, $body)->transactionId, 'a token configured in upper case');
});

T::test('the last error: passed back, and what the refused body let be read', function () use ($receiver): void {
    $event = $receiver->parse(fixture('balance.json'));
    try {
        $receiver->parse('[]');
        T::fail('[] was accepted');
    } catch (ValidationException $x) {
        T::eq('{"playerBalance":{"errorMessage":"body: the top level is not a JSON object"}}', $event->reply(false, $x->getMessage()), 'the message handed to the next call');
        T::eq(500, $event->replyHttpStatus(), 'status');
    }
    $bad = str_replace('"moneyWon":150000', '"moneyWon":1.5', withIndex(fixture('payout.json'), '77'));
    $x = T::throws(ValidationException::class, fn () => $receiver->parse($bad), 'a refused payout');
    T::eq(['jackpotPayout', 77, 900002], [$x?->eventName, $x?->index, $x?->transactionId], 'event name, index, transactionId');
    $x = T::throws(ValidationException::class, fn () => $receiver->parse('{"event":'), 'not JSON');
    T::eq([null, null, null], [$x?->eventName, $x?->index, $x?->transactionId], 'nothing to read');
    $x = T::throws(AuthenticationException::class, fn () => $receiver->handle(OTHER_TOKEN, null, $bad), 'a wrong token');
    T::eq([null, null], [$x?->eventName, $x?->index], 'nothing read of an unauthenticated body');
});

T::finish();
