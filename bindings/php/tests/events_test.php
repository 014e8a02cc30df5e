<?php

declare(strict_types=1);

// Every event kind with every field, and the exact bytes of every reply.

require __DIR__ . '/helper.php';

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\ConfigurationException;
use SlotPartner\JackpotPayout;
use SlotPartner\OtherEvent;
use SlotPartner\Receiver;
use SlotPartner\Reply;
use SlotPartner\Status;
use SlotPartner\ValidationException;

$receiver = new Receiver(TOKEN, sources: 'any');

T::test('refund: every field', function () use ($receiver): void {
    $e = $receiver->handle(TOKEN, '127.0.0.1', fixture('refund.json'));
    T::true($e instanceof BuyRefund, 'a BuyRefund');
    T::eq('gameSessionBuyRefund', $e->name, 'name');
    T::eq(41, $e->index, 'index');
    T::eq('gs-7f3a9c', $e->gameSessionIdentifier, 'gameSessionIdentifier');
    T::eq('svc-player-1001', $e->playerIdentifier, 'playerIdentifier');
    T::eq('partner-42', $e->playerPartnerIdentifier, 'playerPartnerIdentifier');
    T::eq(900001, $e->transactionId, 'transactionId');
    T::eq(899990, $e->buyTransactionId, 'buyTransactionId');
    T::eq(5551, $e->gameSessionId, 'gameSessionId');
    T::eq('req-2026-11-21-0001', $e->partnerGameRequestIdentifier, 'partnerGameRequestIdentifier');
    T::eq(12, $e->gameId, 'gameId');
    T::eq(true, $e->isMobile, 'isMobile');
    T::eq(null, $e->bonusCode, 'bonusCode absent');
    T::eq(['index' => '41', 'serverTime' => '{"zone": "UTC", "epochMillis": 1795300000000}'], $e->extra, 'extra as raw JSON, in body order');
    T::eq('{"refund":{"success":true,"errorMessage":""}}', $e->reply(true), 'success reply');
    T::eq('{"refund":{"success":false,"errorMessage":"player \"42\" is closed"}}', $e->reply(false, 'player "42" is closed'), 'failure reply, message JSON-escaped, last call wins');
});

T::test('refund: properties are readonly', function () use ($receiver): void {
    $e = $receiver->parse(fixture('refund.json'));
    T::throws(Error::class, function () use ($e): void {
        $e->transactionId = 1; // @phpstan-ignore-line
    }, 'writing a property');
    T::throws(Error::class, fn () => clone $e, 'cloning an event');
});

T::test('payout: every field', function () use ($receiver): void {
    $e = $receiver->handle(TOKEN, '::1', fixture('payout.json'));
    T::true($e instanceof JackpotPayout, 'a JackpotPayout');
    T::eq('jackpotPayout', $e->name, 'name');
    T::eq(42, $e->index, 'index');
    T::eq('jp-major-eu', $e->jackpotIdentifier, 'jackpotIdentifier');
    T::eq('svc-player-1001', $e->playerIdentifier, 'playerIdentifier');
    T::eq('partner-42', $e->playerPartnerIdentifier, 'playerPartnerIdentifier');
    T::eq('EUR', $e->currencyISO4217, 'currencyISO4217');
    T::eq(150000, $e->moneyWon, 'moneyWon');
    T::eq(0, $e->coinsWon, 'coinsWon');
    T::eq(true, $e->isMoney, 'isMoney');
    T::eq(1795300123456, $e->epochReleasedMillis, 'epochReleasedMillis');
    T::eq(true, $e->isPrimary, 'isPrimary');
    T::eq(900002, $e->transactionId, 'transactionId');
    T::eq(899991, $e->buyTransactionId, 'buyTransactionId');
    T::eq('req-2026-11-21-0002', $e->partnerGameRequestIdentifier, 'partnerGameRequestIdentifier');
    T::eq(5552, $e->gameSessionId, 'gameSessionId');
    T::eq(12, $e->gameId, 'gameId');
    T::eq("WELCOME-\u{00C4}\"10\"", $e->bonusCode, 'bonusCode, escapes decoded');
    T::eq(false, $e->isMobile, 'isMobile present and false');
    T::eq(['index' => '42'], $e->extra, 'extra');
    T::eq('{"payout":{"success":true,"errorMessage":""}}', $e->reply(true), 'success reply');
    T::eq('{"payout":{"success":false,"errorMessage":"limit"}}', $e->reply(false, 'limit'), 'failure reply');
});

T::test('payout: minimal, extreme values', function () use ($receiver): void {
    $e = $receiver->parse(fixture('payout_minimal.json'));
    T::true($e instanceof JackpotPayout, 'a JackpotPayout');
    T::eq(null, $e->index, 'index absent');
    T::eq(null, $e->playerIdentifier, 'playerIdentifier absent');
    T::eq('partner-42', $e->playerPartnerIdentifier, 'playerPartnerIdentifier');
    T::eq('GBP', $e->currencyISO4217, 'currency');
    T::eq(9007199254740991, $e->moneyWon, 'moneyWon 2^53-1');
    T::eq(25, $e->coinsWon, 'coinsWon');
    T::eq(false, $e->isMoney, 'isMoney');
    T::eq(0, $e->epochReleasedMillis, 'epochReleasedMillis');
    T::eq(false, $e->isPrimary, 'isPrimary');
    T::eq(PHP_INT_MAX, $e->transactionId, 'transactionId 2^63-1');
    T::eq(0, $e->gameSessionId, 'gameSessionId');
    T::eq(null, $e->bonusCode, 'bonusCode absent');
    T::eq(null, $e->isMobile, 'isMobile absent');
    T::eq([], $e->extra, 'no extra fields');
});

T::test('balance query: fields and replies', function () use ($receiver): void {
    $e = $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
    T::true($e instanceof BalanceQuery, 'a BalanceQuery');
    T::eq('getPlayerBalance', $e->name, 'name');
    T::eq(43, $e->index, 'index');
    T::eq('svc-player-1001', $e->playerIdentifier, 'playerIdentifier');
    T::eq('partner-42', $e->playerPartnerIdentifier, 'playerPartnerIdentifier');
    T::eq(['index' => '43'], $e->extra, 'extra');
    T::eq('{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}', $e->replyBalance(100000), 'balance reply');
    T::eq('{"playerBalance":{"money":1,"currencyISO4217":"GBP","coins":7,"errorMessage":""}}', $e->replyBalance(1, 'GBP', 7), 'currency and coins');
    T::eq(200, $e->replyHttpStatus(), 'a balance is sent with 200');
    T::eq('{"playerBalance":{"errorMessage":"wallet offline"}}', $e->reply(false, 'wallet offline'), 'failure reply: no balance stated');
    T::eq(500, $e->replyHttpStatus(), 'a refused balance query is sent with 500');
    $x = T::throws(ConfigurationException::class, fn () => $e->replyBalance(-1), 'negative money');
    T::eq(Status::INVALID_ARGUMENT, $x?->status, 'negative money status');
    T::throws(ConfigurationException::class, fn () => $e->replyBalance(9007199254740992), 'money above 2^53-1');
    T::throws(ConfigurationException::class, fn () => $e->replyBalance(1, 'eur'), 'lowercase currency');
    T::throws(ConfigurationException::class, fn () => $e->reply(true), 'a balance success without the balance');
    T::eq('{"playerBalance":{"money":5,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}', $e->replyBalance(5), 'still usable after refused replies');
});

T::test('other event: passed through, no reply', function () use ($receiver): void {
    $e = $receiver->parse(fixture('other_event.json'));
    T::true($e instanceof OtherEvent, 'an OtherEvent');
    T::eq('gameSessionStart', $e->name, 'name');
    T::eq(44, $e->index, 'index');
    T::eq(['index' => '44', 'gameSessionIdentifier' => '"gs-1"', 'playerIdentifier' => '"svc-player-1001"'], $e->extra, 'extra');
    $x = T::throws(ValidationException::class, fn () => $e->reply(true), 'reply to an unknown event');
    T::eq(Status::UNKNOWN_EVENT, $x?->status, 'status');
    T::eq('SP_ERR_UNKNOWN_EVENT', $x?->statusName, 'status name');
    T::eq(400, $x?->httpStatus, 'HTTP status');
    T::eq('{"error":{"code":"unknown_event","field":"event","message":"event: no reply is defined for the unknown event \"gameSessionStart\""}}', $x?->responseBody, 'response body');
});

T::test('reply arguments', function () use ($receiver): void {
    $e = $receiver->parse(fixture('refund.json'));
    $x = T::throws(ConfigurationException::class, fn () => $e->reply(true, 'why'), 'a message with success');
    T::eq(Status::INVALID_ARGUMENT, $x?->status, 'status');
    T::throws(ConfigurationException::class, fn () => $e->reply(false), 'a failure without message');
    T::throws(ConfigurationException::class, fn () => $e->reply(false, ''), 'a failure with an empty message');
    $x = T::throws(ConfigurationException::class, fn () => $e->reply(false, "cut\0here"), 'a NUL byte in the message');
    T::eq('message', $x?->field, 'field of the NUL refusal');
    T::eq("{\"refund\":{\"success\":false,\"errorMessage\":\"tab\\tline\\nquote\\\" \u{20AC}\"}}", json_encode(json_decode($e->reply(false, "tab\tline\nquote\" \u{20AC}")), JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), 'control characters escaped, valid JSON');
    T::eq('{"refund":{"success":true,"errorMessage":""}}', $e->reply(true, ''), 'an empty message with success');
});

T::test('receiver settings shape the replies', function (): void {
    $receiver = new Receiver(
        TOKEN,
        sources: 'any',
        indexField: 'seq',
        balanceWrapper: 'balance',
        balanceCurrency: 'USD',
        omitEmptyErrorMessage: true,
    );
    $e = $receiver->parse('{"action":"getPlayerBalance","playerIdentifier":"p","seq":7,"index":"x"}');
    T::eq(7, $e->index, 'custom index field');
    T::eq(['seq' => '7', 'index' => '"x"'], $e->extra, 'index fields kept as extra');
    T::true($e instanceof BalanceQuery, 'a BalanceQuery');
    if ($e instanceof BalanceQuery) {
        T::eq('{"balance":{"money":3,"currencyISO4217":"USD","coins":0,"errorMessage":""}}', $e->replyBalance(3), 'wrapper and currency');
    }
    $r = $receiver->parse(fixture('refund.json'));
    T::eq(null, $r->index, 'index field "index" is not the index any more');
    T::eq('{"refund":{"success":true}}', $r->reply(true), 'errorMessage omitted on success');
    T::eq('{"refund":{"success":false,"errorMessage":"no"}}', $r->reply(false, 'no'), 'kept on failure');
});

T::test('standalone reply builders', function (): void {
    T::eq('{"refund":{"success":true,"errorMessage":""}}', Reply::result('refund', true), 'result success');
    T::eq('{"bonus":{"success":true}}', Reply::result('bonus', true, null, true), 'result, message omitted');
    T::eq('{"payout":{"success":false,"errorMessage":"a \"b\""}}', Reply::result('payout', false, 'a "b"'), 'result failure escaped');
    T::eq('{"playerBalance":{"money":12,"currencyISO4217":"EUR","coins":3,"errorMessage":""}}', Reply::balance(12, 'EUR', 3), 'balance');
    T::eq('{"wallet":{"errorMessage":"down"}}', Reply::balance(0, 'CHF', 0, 'down', 'wallet'), 'balance failure, wrapper: no balance stated');
    T::eq('{"playerBalance":{"errorMessage":"down"}}', Reply::balance(12, 'EUR', 3, 'down'), 'balance failure: money, currency, coins unused');
    T::throws(ConfigurationException::class, fn () => Reply::result('refund', false), 'failure without message');
    T::throws(ConfigurationException::class, fn () => Reply::balance(1, 'euro'), 'bad currency');
    T::throws(ConfigurationException::class, fn () => Reply::balance(-5), 'negative money');
});

T::test('events outlive their receiver', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any');
    $e = $receiver->parse(fixture('refund.json'));
    unset($receiver);
    T::eq('{"refund":{"success":true,"errorMessage":""}}', $e->reply(true), 'reply after the receiver is gone');
});

T::test('events read from a record outlive their receiver, failure replies too', function (): void {
    $receiver = new Receiver(TOKEN, sources: 'any', balanceFailureHttpStatus: 503);
    $refund = $receiver->handle(TOKEN, '127.0.0.1', fixture('refund.json'));
    $balance = $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
    $other = $receiver->handle(TOKEN, '127.0.0.1', fixture('other_event.json'));
    unset($receiver);
    T::eq('{"refund":{"success":false,"errorMessage":"closed"}}', $refund->reply(false, 'closed'), 'a failure built after the receiver is gone');
    T::eq('{"playerBalance":{"errorMessage":"unknown"}}', $balance->reply(false, 'unknown'), 'a refused balance query');
    T::eq(503, $balance->replyHttpStatus(), 'with the receiver\'s status');
    $e = T::throws(ValidationException::class, fn () => $other->reply(true), 'an unknown event has no reply');
    T::eq(400, $e?->httpStatus, 'the library\'s answer: 400');
});

T::test('a record gives the event a native event gives', function (): void {
    $plain = new Receiver(TOKEN, sources: 'any');
    $file = sys_get_temp_dir() . '/slotpartner-events-' . getmypid() . '.db';
    $journaled = new Receiver(TOKEN, sources: 'any', journal: new SlotPartner\Journal('sqlite:' . $file));
    foreach (['refund', 'payout', 'payout_minimal', 'balance', 'other_event'] as $name) {
        $fromRecord = $plain->handle(TOKEN, '127.0.0.1', fixture($name . '.json'));
        $fromEvent = $journaled->handle(TOKEN, '127.0.0.1', fixture($name . '.json'));
        T::eq(get_class($fromEvent), get_class($fromRecord), "$name: the class");
        T::eq(get_object_vars($fromEvent), get_object_vars($fromRecord), "$name: every property");
    }
    // Bodies beyond the record buffer (4 KiB to start with) grow it; the callback is handled again.
    foreach ([60000, 100, 20000, 60000] as $size) {
        $body = json_decode(fixture('payout.json'), true);
        $body['trace'] = str_repeat('x', $size);
        $e = $plain->handle(TOKEN, '127.0.0.1', json_encode($body));
        T::true($e instanceof JackpotPayout, "a $size-byte field: a payout");
        T::eq('"' . str_repeat('x', $size) . '"', $e->extra['trace'], "a $size-byte field: read whole");
        T::eq($body['bonusCode'], $e->bonusCode, "a $size-byte field: its strings in place");
    }
    $journaled = null;
    array_map('unlink', glob($file . '*') ?: []);
});

T::finish();
