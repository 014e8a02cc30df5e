<?php

declare(strict_types=1);

// Every refusal surfaces as the right exception, with status, field, message and HTTP answer.

require __DIR__ . '/helper.php';

use SlotPartner\AuthenticationException;
use SlotPartner\ConfigurationException;
use SlotPartner\Receiver;
use SlotPartner\ServiceException;
use SlotPartner\SlotPartnerException;
use SlotPartner\Status;
use SlotPartner\TransportException;
use SlotPartner\ValidationException;

$receiver = new Receiver(TOKEN, sources: 'any');

/** Expects $body to be refused by $r with the given status, field and answer. */
function refused(Receiver $r, string $body, int $status, string $field, int $http, ?string $bodyStart = null, string $what = ''): ?SlotPartnerException
{
    $what = $what === '' ? 'status ' . $status : $what;
    $e = T::throws(ValidationException::class, fn () => $r->parse($body), $what);
    if ($e !== null) {
        T::eq($status, $e->status, $what . ': status');
        T::eq($status, $e->getCode(), $what . ': code');
        T::eq($field, $e->field, $what . ': field');
        T::eq($http, $e->httpStatus, $what . ': HTTP status');
        if ($bodyStart !== null) {
            T::true(str_starts_with((string) $e->responseBody, $bodyStart), $what . ': answer starts with ' . $bodyStart . ', got ' . $e->responseBody);
        }
    }
    return $e;
}

T::test('the fixtures are refused exactly as the C reference says', function () use ($receiver): void {
    // tests/c/expected/inspect_<fixture>.out holds the C example's error, field, message and answer.
    $checked = 0;
    foreach (glob(EXPECTED . '/inspect_*.out') ?: [] as $file) {
        $text = (string) file_get_contents($file);
        if (preg_match('/^error: (SP_ERR_\w+)\nfield: (.*)\nmessage: (.*)\nanswer: HTTP (\d+) (.*)\nexit: 1$/m', $text, $m) !== 1) {
            continue;
        }
        $fixture = substr(basename($file, '.out'), strlen('inspect_')) . '.json';
        $status = constant(Status::class . '::' . substr($m[1], strlen('SP_ERR_')));
        $e = T::throws(ValidationException::class, fn () => $receiver->parse(fixture($fixture)), $fixture);
        if ($e === null) {
            continue;
        }
        T::eq($status, $e->status, $fixture . ': status');
        T::eq($m[1], $e->statusName, $fixture . ': status name');
        T::eq($m[2] === '(none)' ? '' : $m[2], $e->field, $fixture . ': field');
        T::eq($m[3], $e->getMessage(), $fixture . ': message');
        T::eq((int) $m[4], $e->httpStatus, $fixture . ': HTTP status');
        T::eq($m[5], $e->responseBody, $fixture . ': answer');
        $checked++;
    }
    T::true($checked >= 13, 'at least 13 refused fixtures compared, got ' . $checked);
});

T::test('every validation status', function () use ($receiver): void {
    $small = new Receiver(TOKEN, sources: 'any', maxBodyBytes: 100, maxDepth: 3, maxIdentifierBytes: 20, rejectUnknownEvents: true);
    $payout = json_decode(fixture('payout.json'), true);
    $with = static fn (array $changes): string => json_encode(array_merge($payout, $changes), JSON_UNESCAPED_SLASHES);
    refused($small, str_repeat(' ', 99) . '{}', Status::BODY_TOO_LARGE, '', 413, '{"error":{"code":"body_too_large"', 'body over the limit');
    refused($receiver, "{\"action\":\"getPlayerBalance\",\"playerIdentifier\":\"\xC3\x28\"}", Status::INVALID_UTF8, '', 400, '{"error":{"code":"invalid_utf8"', 'invalid UTF-8');
    refused($receiver, "\xEF\xBB\xBF{}", Status::INVALID_UTF8, '', 400, null, 'byte order mark');
    refused($receiver, '{"action":', Status::INVALID_JSON, '', 400, '{"error":{"code":"invalid_json"', 'truncated JSON');
    // A balance query refused for its fields: HTTP 500 (balanceFailureHttpStatus), no balance stated.
    refused($receiver, '{"action":"getPlayerBalance","playerIdentifier":"\ud800"}', Status::INVALID_JSON, 'getPlayerBalance.playerIdentifier', 500, '{"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: ', 'lone surrogate in a known event');
    refused($receiver, '{"event":"jackpotPayout","a":1,"a":2}', Status::DUPLICATE_KEY, 'a', 400, null, 'duplicate key at the top');
    refused($small, '{"action":"getPlayerBalance","playerIdentifier":"p","a":{"b":{"c":{}}}}', Status::TOO_DEEP, 'getPlayerBalance.a', 500, '{"playerBalance":{"errorMessage":"getPlayerBalance.a: nested deeper than 3 levels"}}', 'nesting over the limit in a known event');
    $deep = new Receiver(TOKEN, sources: 'any', maxDepth: 3);
    refused($deep, '{"event":"x","a":[[[1]]]}', Status::TOO_DEEP, 'x.a', 400, '{"error":{"code":"too_deep"', 'nesting over the limit in an unknown event');
    refused($receiver, '"text"', Status::NOT_AN_OBJECT, '', 400, '{"error":{"code":"not_an_object"', 'a string body');
    refused($receiver, '{}', Status::MISSING_FIELD, 'event', 400, '{"error":{"code":"missing_field"', 'neither event nor action');
    refused($receiver, $with(['jackpotIdentifier' => null]), Status::MISSING_FIELD, 'jackpotPayout.jackpotIdentifier', 200, '{"payout":{"success":false,', 'required field given as null');
    refused($receiver, $with(['moneyWon' => 1500.5]), Status::WRONG_TYPE, 'jackpotPayout.moneyWon', 200, '{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}', 'float amount');
    refused($receiver, $with(['isMoney' => 'yes']), Status::WRONG_TYPE, 'jackpotPayout.isMoney', 200, null, 'string for a boolean');
    refused($receiver, $with(['coinsWon' => 9007199254740992]), Status::OUT_OF_RANGE, 'jackpotPayout.coinsWon', 200, null, 'amount above 2^53-1');
    refused($receiver, $with(['epochReleasedMillis' => -1]), Status::OUT_OF_RANGE, 'jackpotPayout.epochReleasedMillis', 200, null, 'negative time');
    refused($receiver, $with(['currencyISO4217' => 'EURO']), Status::INVALID_VALUE, 'jackpotPayout.currencyISO4217', 200, null, 'four-letter currency');
    refused($receiver, $with(['jackpotIdentifier' => '']), Status::INVALID_VALUE, 'jackpotPayout.jackpotIdentifier', 200, null, 'empty identifier');
    refused($small, '{"action":"getPlayerBalance","playerIdentifier":"123456789012345678901"}', Status::INVALID_VALUE, 'getPlayerBalance.playerIdentifier', 500, '{"playerBalance":{"errorMessage":', 'identifier over the limit');
    refused($small, '{"event":"gameSessionStart"}', Status::UNKNOWN_EVENT, 'event', 400, '{"error":{"code":"unknown_event"', 'unknown event rejected');
});

T::test('authentication and source refusals', function (): void {
    $receiver = new Receiver([TOKEN, OTHER_TOKEN], sources: 'staging,10.1.2.0/24', trustedProxies: '127.0.0.1');
    $body = fixture('refund.json');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle(null, '10.1.2.3', $body), 'no token');
    T::eq(Status::MISSING_TOKEN, $e?->status, 'missing token status');
    T::eq(401, $e?->httpStatus, 'missing token HTTP');
    T::eq('X-Service-Token', $e?->field, 'missing token field');
    T::eq('{"error":{"code":"missing_token","field":"X-Service-Token","message":"X-Service-Token: header is missing"}}', $e?->responseBody, 'missing token answer');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle('0b7e3c55-1a2b-4c3d-8e9f-000000000002', '10.1.2.3', $body), 'wrong token');
    T::eq(Status::WRONG_TOKEN, $e?->status, 'wrong token status');
    T::eq('SP_ERR_WRONG_TOKEN', $e?->statusName, 'wrong token name');
    T::eq(401, $e?->httpStatus, 'wrong token HTTP');
    T::eq('{"error":{"code":"wrong_token","field":"X-Service-Token","message":"X-Service-Token: does not match the partner token"}}', $e?->responseBody, 'wrong token answer');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN . "\0junk", '10.1.2.3', $body), 'a valid token followed by a NUL byte');
    T::eq(Status::WRONG_TOKEN, $e?->status, 'NUL token refused as wrong');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN, '18.203.30.17', $body), 'production address, staging allowed');
    T::eq(Status::FORBIDDEN_SOURCE, $e?->status, 'forbidden source status');
    T::eq(403, $e?->httpStatus, 'forbidden source HTTP');
    T::eq('remote_addr', $e?->field, 'forbidden source field');
    T::eq('{"error":{"code":"forbidden_source","field":"remote_addr","message":"remote_addr: 18.203.30.17 is not an allowed source"}}', $e?->responseBody, 'forbidden source answer');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN, "10.1.2.3\0", $body), 'an address with a NUL byte');
    T::eq(Status::FORBIDDEN_SOURCE, $e?->status, 'NUL address refused');
    $e = T::throws(AuthenticationException::class, fn () => $receiver->handle(OTHER_TOKEN, '10.9.9.9', $body, '10.1.2.3'), 'X-Forwarded-For from an untrusted peer');
    T::eq(Status::FORBIDDEN_SOURCE, $e?->status, 'forwarded header ignored from an untrusted peer');
    T::true($receiver->handle(OTHER_TOKEN, '127.0.0.1', $body, '10.1.2.3')->transactionId === 900001, 'X-Forwarded-For believed from the trusted proxy, second token accepted');
    T::true($receiver->handle(TOKEN, '34.254.138.20', $body)->transactionId === 900001, 'a staging address');
    // The source is checked before the token, the token before the body.
    T::eq(Status::FORBIDDEN_SOURCE, T::throws(AuthenticationException::class, fn () => $receiver->handle(null, '1.1.1.1', 'not json'), 'source first')?->status, 'source before token');
    T::eq(Status::MISSING_TOKEN, T::throws(AuthenticationException::class, fn () => $receiver->handle(null, '10.1.2.3', 'not json'), 'token before body')?->status, 'token before body');
});

T::test('authenticate() alone refuses and accepts as handle() does, answering alike', function (): void {
    $receiver = new Receiver([TOKEN, OTHER_TOKEN], sources: 'staging,10.1.2.0/24', trustedProxies: '127.0.0.1');
    $body = fixture('refund.json');
    $refusals = [
        'no token' => [null, '10.1.2.3', null],
        'wrong token' => ['0b7e3c55-1a2b-4c3d-8e9f-000000000002', '10.1.2.3', null],
        'a valid token followed by a NUL byte' => [TOKEN . "\0junk", '10.1.2.3', null],
        'a forbidden source' => [TOKEN, '18.203.30.17', null],
        'no address' => [TOKEN, null, null],
        'an address with a NUL byte' => [TOKEN, "10.1.2.3\0", null],
        'X-Forwarded-For from an untrusted peer' => [OTHER_TOKEN, '10.9.9.9', '10.1.2.3'],
        'X-Forwarded-For not UTF-8 from the trusted proxy' => [TOKEN, '127.0.0.1', "\xFF\xFE"],
    ];
    foreach ($refusals as $what => [$token, $remote, $forwarded]) {
        $handled = T::throws(AuthenticationException::class, fn () => $receiver->handle($token, $remote, $body, $forwarded), 'handle(): ' . $what);
        $alone = T::throws(AuthenticationException::class, fn () => $receiver->authenticate($token, $remote, $forwarded), 'authenticate(): ' . $what);
        $answer = static fn (?AuthenticationException $e): array => [$e?->status, $e?->field, $e?->getMessage(), $e?->httpStatus, $e?->responseBody];
        T::eq($answer($handled), $answer($alone), $what . ': the same answer');
    }
    $receiver->authenticate(OTHER_TOKEN, '127.0.0.1', '10.1.2.3');  // believed from the trusted proxy
    $receiver->authenticate(strtoupper(TOKEN), '34.254.138.20');
    $receiver->authenticate(TOKEN, '34.254.138.20', "\xFF\xFE");  // an untrusted peer's header is ignored
    $anyone = new Receiver(TOKEN, sources: 'any');
    $anyone->authenticate(TOKEN, null);
    $anyone->authenticate(TOKEN, 'not-an-address');
    T::eq(Status::MISSING_TOKEN, T::throws(AuthenticationException::class, fn () => $anyone->authenticate(null, null), 'sources any: the token still')?->status, 'token checked under sources any');
});

T::test('configuration refusals', function (): void {
    $e = T::throws(ConfigurationException::class, fn () => new Receiver(null), 'no token (null)');
    T::eq('token', $e?->field, 'field');
    T::eq('token: must be a string, not null', $e?->getMessage(), 'message');
    T::eq('{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}', $e?->responseBody, 'the answer the library gives a NULL token in C: nothing of the setting');
    T::eq(500, $e?->httpStatus, 'HTTP 500');
    T::eq(Status::INVALID_ARGUMENT, T::throws(ConfigurationException::class, fn () => new Receiver([]), 'no token (empty list)')?->status, 'empty list');
    T::eq('token', T::throws(ConfigurationException::class, fn () => new Receiver('not-a-uuid'), 'malformed token')?->field, 'malformed token field');
    T::throws(ConfigurationException::class, fn () => new Receiver([TOKEN, OTHER_TOKEN, TOKEN]), 'three tokens');
    T::eq('sources', T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, sources: 'bogus'), 'bad sources')?->field, 'sources field');
    T::eq('sources', T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, sources: "any\0"), 'NUL in sources')?->field, 'NUL refused before the library');
    T::eq('max_body_bytes', T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, maxBodyBytes: -1), 'negative limit')?->field, 'negative refused before the library');
    T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, maxDepth: 0), 'depth 0');
    T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, maxDepth: 101), 'depth 101');
    T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, balanceCurrency: 'eu'), 'bad balance currency');
    T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, trustedProxies: 'nope'), 'bad proxies');
});

T::test('one class per status range', function (): void {
    $expected = [
        0 => SlotPartnerException::class, 1 => ConfigurationException::class, 2 => SlotPartnerException::class,
        3 => ValidationException::class, 13 => ValidationException::class, 14 => AuthenticationException::class,
        16 => AuthenticationException::class, 17 => TransportException::class, 18 => TransportException::class,
        19 => TransportException::class, 20 => ServiceException::class, 21 => ServiceException::class,
        22 => TransportException::class, 23 => SlotPartner\ConflictException::class,
        24 => SlotPartner\JournalException::class, 25 => SlotPartner\ClaimLostException::class,
        26 => SlotPartner\BusyException::class, 99 => SlotPartnerException::class,
    ];
    foreach (range(4, 12) as $status) {
        $expected[$status] = ValidationException::class;
    }
    $expected[15] = AuthenticationException::class;
    foreach ($expected as $status => $class) {
        T::eq($class, get_class(SlotPartnerException::create('m', $status, 'N')), 'class for status ' . $status);
    }
});

T::finish();
