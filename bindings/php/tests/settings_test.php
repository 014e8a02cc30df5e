<?php

declare(strict_types=1);

// Optional settings and list-valued settings, the same in every binding (issue 10, item 5).
//
// Every optional setting of Receiver, Client, Journal and Recovery takes null for the library's
// default: the binding then calls no setter at all (checked by recording the calls into the
// library), and behaves as with the default spelled out. $tokens, $sources and $trustedProxies
// take an array of strings or one comma-separated string, items trimmed; an empty item, an item
// that is not a string and an array item holding a comma are refused naming the setting; an
// empty value is refused for tokens and sources (by the library, as in C) and means none for
// trusted proxies. bindings/python/tests/test_settings.py checks the same in Python.

require __DIR__ . '/helper.php';

use SlotPartner\AuthenticationException;
use SlotPartner\BalanceQuery;
use SlotPartner\Client;
use SlotPartner\ConfigurationException;
use SlotPartner\Journal;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\OtherEvent;
use SlotPartner\Receiver;
use SlotPartner\Recovery;
use SlotPartner\ValidationException;

const STAGING = '34.254.138.20';
const PRODUCTION = '18.203.30.17';
const UNKNOWN_EVENT = '{"event":"somethingNew","index":"7"}';

/** Forwards every call into the library and records the sp_ function's name and arguments. */
final class RecordingFfi
{
    /** @var list<string> */
    public array $calls = [];

    /** @var array<string, list<list<mixed>>> */
    public array $arguments = [];

    public function __construct(private readonly FFI $ffi)
    {
    }

    /** @param list<mixed> $args */
    public function __call(string $name, array $args): mixed
    {
        if (str_starts_with($name, 'sp_')) {
            $this->calls[] = $name;
            $this->arguments[$name][] = $args;
        }
        return $this->ffi->$name(...$args);
    }

    /** @return list<string> the setters called, in order */
    public function setters(): array
    {
        return array_values(array_filter($this->calls, static fn (string $name): bool => str_contains($name, '_set_') || str_contains($name, '_add_')));
    }
}

/**
 * Runs $body with the library's calls recorded.
 *
 * @template R
 * @param callable(): R $body
 * @return array{0: R, 1: RecordingFfi}
 */
function recording(callable $body): array
{
    $recorder = new RecordingFfi(Library::ffi());
    Native::useFfi($recorder);
    try {
        return [$body(), $recorder];
    } finally {
        Native::useFfi(null);
    }
}

/**
 * What a receiver's settings show from outside, one observation per setting.
 *
 * @return array<string, mixed>
 */
function probe(Receiver $receiver): array
{
    $seen = [];
    $balance = fixture('balance.json');
    $seen['production allowed'] = $receiver->handle(TOKEN, PRODUCTION, $balance) instanceof BalanceQuery;
    try {
        $receiver->handle(TOKEN, STAGING, $balance);
        $seen['staging allowed'] = true;
    } catch (AuthenticationException) {
        $seen['staging allowed'] = false;
    }
    try {
        $receiver->handle(TOKEN, '127.0.0.1', $balance, PRODUCTION);
        $seen['forwarded believed'] = true;
    } catch (AuthenticationException) {
        $seen['forwarded believed'] = false;
    }
    foreach (['body 65536' => 65536, 'body 65537' => 65537] as $name => $size) {
        try {
            $receiver->parse(str_repeat(' ', $size));
        } catch (ValidationException $e) {
            $seen[$name] = $e->httpStatus;
        }
    }
    $nested = '{"action":"getPlayerBalance","playerIdentifier":"p","a":'; // the object is level 1
    $seen['depth 32'] = $receiver->parse($nested . str_repeat('[', 31) . str_repeat(']', 31) . '}') instanceof BalanceQuery;
    try {
        $receiver->parse($nested . str_repeat('[', 32) . str_repeat(']', 32) . '}');
        $seen['depth 33'] = true;
    } catch (ValidationException) {
        $seen['depth 33'] = false;
    }
    foreach ([256, 257] as $size) {
        try {
            $receiver->parse('{"action":"getPlayerBalance","playerIdentifier":"' . str_repeat('p', $size) . '"}');
            $seen['identifier ' . $size] = true;
        } catch (ValidationException) {
            $seen['identifier ' . $size] = false;
        }
    }
    try {
        $event = $receiver->parse(UNKNOWN_EVENT);
        $seen['unknown event'] = [get_class($event), $event->index, $event->indexUnreadable];
    } catch (ValidationException $e) {
        $seen['unknown event'] = $e->statusName;
    }
    $query = $receiver->parse($balance);
    $seen['balance reply'] = $query->replyBalance(100);
    $query = $receiver->parse($balance);
    $seen['refused balance'] = [$query->reply(false, 'no'), $query->replyHttpStatus()];
    $seen['refund reply'] = $receiver->parse(fixture('refund.json'))->reply(true);
    return $seen;
}

const DEFAULTS = [
    'production allowed' => true,
    'staging allowed' => false,
    'forwarded believed' => false,
    'body 65536' => 400,
    'body 65537' => 413,
    'depth 32' => true,
    'depth 33' => false,
    'identifier 256' => true,
    'identifier 257' => false,
    'unknown event' => [OtherEvent::class, null, true],
    'balance reply' => '{"playerBalance":{"money":100,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}',
    'refused balance' => ['{"playerBalance":{"errorMessage":"no"}}', 500],
    'refund reply' => '{"refund":{"success":true,"errorMessage":""}}',
];

const RECEIVER_OPTIONAL = [
    'sources', 'trustedProxies', 'maxBodyBytes', 'maxDepth', 'maxIdentifierBytes', 'indexField',
    'rejectUnknownEvents', 'balanceWrapper', 'balanceCurrency', 'omitEmptyErrorMessage',
    'strictIndex', 'balanceFailureHttpStatus', 'journal',
];

/** $value for a test name. */
function show(mixed $value): string
{
    return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE) ?: var_export($value, true);
}

T::test('Receiver: null is the library default and calls no setter', function (): void {
    [$receiver, $lib] = recording(fn () => new Receiver(TOKEN, ...array_fill_keys(RECEIVER_OPTIONAL, null)));
    T::eq(['sp_receiver_config_add_token'], $lib->setters(), 'only the token is set');
    T::eq(DEFAULTS, probe($receiver), 'every setting null');
    T::eq(DEFAULTS, probe(new Receiver(TOKEN)), 'every setting left out');
});

T::test('Receiver: the defaults spelled out behave the same', function (): void {
    $spelled = new Receiver(
        TOKEN,
        sources: 'production',
        trustedProxies: '',
        maxBodyBytes: 65536,
        maxDepth: 32,
        maxIdentifierBytes: 256,
        indexField: 'index',
        rejectUnknownEvents: false,
        balanceWrapper: 'playerBalance',
        balanceCurrency: 'EUR',
        omitEmptyErrorMessage: false,
        strictIndex: false,
        balanceFailureHttpStatus: 500,
    );
    T::eq(DEFAULTS, probe($spelled), 'spelled out');
});

T::test('Receiver: each setting given alone changes only itself', function (): void {
    T::eq(array_replace(DEFAULTS, ['unknown event' => 'SP_ERR_UNKNOWN_EVENT']), probe(new Receiver(TOKEN, rejectUnknownEvents: true)), 'rejectUnknownEvents');
    T::eq(array_replace(DEFAULTS, ['refused balance' => ['{"playerBalance":{"errorMessage":"no"}}', 503]]), probe(new Receiver(TOKEN, balanceFailureHttpStatus: 503)), 'balanceFailureHttpStatus');
    $expected = array_replace(DEFAULTS, [
        'balance reply' => '{"wallet":{"money":100,"currencyISO4217":"GBP","coins":0,"errorMessage":""}}',
        'refused balance' => ['{"wallet":{"errorMessage":"no"}}', 500],
        'refund reply' => '{"refund":{"success":true}}',
    ]);
    T::eq($expected, probe(new Receiver(TOKEN, balanceWrapper: 'wallet', balanceCurrency: 'GBP', omitEmptyErrorMessage: true)), 'reply settings');
    [$receiver, $lib] = recording(fn () => new Receiver(TOKEN, indexField: 'idx', strictIndex: null));
    T::eq(['sp_receiver_config_add_token', 'sp_receiver_config_set_index_field'], $lib->setters(), 'only the settings given');
    T::eq(7, $receiver->parse('{"event":"x","idx":7}')->index, 'indexField applies');
});

T::test('tokens in every form', function (): void {
    $forms = [
        TOKEN . ',' . OTHER_TOKEN,
        ' ' . TOKEN . " ,\t" . OTHER_TOKEN . "\n",
        [TOKEN, OTHER_TOKEN],
        [' ' . TOKEN, OTHER_TOKEN . ' '],
    ];
    foreach ($forms as $tokens) {
        [$receiver, $lib] = recording(fn () => new Receiver($tokens, sources: 'any'));
        T::eq(2, count(array_keys($lib->calls, 'sp_receiver_config_add_token', true)), 'two tokens added: ' . show($tokens));
        foreach ([TOKEN, OTHER_TOKEN] as $token) {
            T::true($receiver->handle($token, null, fixture('balance.json')) instanceof BalanceQuery, 'accepted ' . $token . ' from ' . show($tokens));
        }
    }
    foreach ([TOKEN, '  ' . TOKEN . '  ', [TOKEN], strtoupper(TOKEN)] as $tokens) {
        $receiver = new Receiver($tokens, sources: 'any');
        T::true($receiver->handle(TOKEN, null, fixture('balance.json')) instanceof BalanceQuery, 'one token: ' . show($tokens));
        T::throws(AuthenticationException::class, fn () => $receiver->handle(OTHER_TOKEN, null, fixture('balance.json')), 'only that one: ' . show($tokens));
    }
});

T::test('sources in every form', function (): void {
    $forms = [
        '10.1.2.0/24,::1,staging',
        ' 10.1.2.0/24 , ::1 ,staging ',
        ['10.1.2.0/24', '::1', 'staging'],
        [' 10.1.2.0/24', '::1 ', "\tstaging"],
    ];
    foreach ($forms as $sources) {
        $receiver = new Receiver(TOKEN, sources: $sources);
        foreach (['10.1.2.3', '::1', STAGING] as $remote) {
            T::true($receiver->handle(TOKEN, $remote, fixture('balance.json')) instanceof BalanceQuery, $remote . ' allowed by ' . show($sources));
        }
        foreach (['10.1.3.1', PRODUCTION] as $remote) {
            T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN, $remote, fixture('balance.json')), $remote . ' refused by ' . show($sources));
        }
    }
    foreach (['any', ' any ', ['any']] as $sources) {
        $receiver = new Receiver(TOKEN, sources: $sources);
        T::true($receiver->handle(TOKEN, '192.0.2.1', fixture('balance.json')) instanceof BalanceQuery, 'any: ' . show($sources));
    }
});

T::test('trusted proxies in every form', function (): void {
    foreach (['127.0.0.1,10.0.0.0/8', ' 127.0.0.1 , 10.0.0.0/8 ', ['127.0.0.1', '10.0.0.0/8'], ['127.0.0.1', ' 10.0.0.0/8']] as $proxies) {
        $receiver = new Receiver(TOKEN, sources: 'staging', trustedProxies: $proxies);
        foreach (['127.0.0.1', '10.9.9.9'] as $proxy) {
            T::true($receiver->handle(TOKEN, $proxy, fixture('balance.json'), STAGING) instanceof BalanceQuery, $proxy . ' trusted by ' . show($proxies));
        }
        T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN, '192.0.2.1', fixture('balance.json'), STAGING), 'not trusted by ' . show($proxies));
    }
    // Empty: none, as the default.
    foreach (['', '  ', []] as $proxies) {
        $receiver = new Receiver(TOKEN, sources: 'staging', trustedProxies: $proxies);
        T::throws(AuthenticationException::class, fn () => $receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'), STAGING), 'no proxy from ' . show($proxies));
    }
});

T::test('malformed lists are refused naming the setting', function (): void {
    foreach ([['tokens', 'token', TOKEN], ['sources', 'sources', 'staging'], ['trustedProxies', 'trusted_proxies', '127.0.0.1']] as [$name, $field, $good]) {
        $cases = [
            [$good . ',,' . $good, 'item 2 between commas is empty'],
            [$good . ',', 'item 2 between commas is empty'],
            [' ,' . $good, 'item 1 between commas is empty'],
            [[$good, ''], 'item 2 of the list is empty'],
            [[' '], 'item 1 of the list is empty'],
            [[$good, 7], 'item 2 of the list is int, not a string'],
            [[$good . ',' . $good], 'item 1 of the list holds a comma: give one value per item'],
            [[$good . "\0"], 'must not contain a NUL byte'],
        ];
        foreach ($cases as [$value, $problem]) {
            $settings = ['tokens' => TOKEN, 'sources' => 'any', $name => $value];
            $e = T::throws(ConfigurationException::class, fn () => new Receiver(...$settings), $name . ' ' . show($value));
            T::eq([$field, 1, $field . ': ' . $problem], [$e?->field, $e?->status, $e?->getMessage()], $name . ' ' . show($value) . ' refused');
        }
    }
});

T::test('empty tokens and sources are refused by the library, as in C', function (): void {
    foreach ([['', 'token: expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f'], ['  ', 'token: expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f'], [[], 'token: no partner token is configured'], [null, 'token: must be a string, not null']] as [$tokens, $message]) {
        $e = T::throws(ConfigurationException::class, fn () => new Receiver($tokens), 'tokens ' . show($tokens));
        T::eq(['token', $message, 500], [$e?->field, $e?->getMessage(), $e?->httpStatus], 'tokens ' . show($tokens) . ': the library\'s answer');
    }
    foreach (['', ' ', []] as $sources) {
        $e = T::throws(ConfigurationException::class, fn () => new Receiver(TOKEN, sources: $sources), 'sources ' . show($sources));
        T::eq(['sources', 500], [$e?->field, $e?->httpStatus], 'sources ' . show($sources) . ': the library\'s answer');
    }
    foreach ([[TOKEN, 'not-a-uuid'], TOKEN . ', not-a-uuid', [TOKEN, OTHER_TOKEN, TOKEN]] as $tokens) {
        T::eq('token', T::throws(ConfigurationException::class, fn () => new Receiver($tokens), 'bad list ' . show($tokens))?->field, 'the token named: ' . show($tokens));
    }
});

T::test('Journal: null is the library default and calls no setter', function (): void {
    $url = 'sqlite:' . tempDir() . '/journal.db';
    $names = ['leaseMs', 'busyWaitMs', 'durable', 'firstIndex', 'maxReplyBytes', 'lockTimeoutMs', 'commandTimeoutMs', 'maxIndexJump', 'notFoundLimit'];
    [$journal, $lib] = recording(fn () => new Journal($url, ...array_fill_keys($names, null)));
    T::eq([], $lib->setters(), 'no setter');
    $status = $journal->status();
    T::eq([null, 0, 1], [$status->firstIndex, $status->handled, $status->numbering], 'no first index, nothing handled, numbering 1');
    // The default maxIndexJump, 100,000: an index that far beyond opens a gap, one further is a jump.
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    foreach ([1, 100001, 200002] as $index) {
        $receiver->parse('{"action":"getPlayerBalance","playerIdentifier":"p-1","index":' . $index . '}')->begin();
    }
    $status = $journal->status();
    T::eq([99999, 1], [$status->missing, $status->indexJumps], 'a gap of 99,999, then a jump');
    [, $lib] = recording(fn () => new Journal($url, durable: false, leaseMs: null, firstIndex: 3));
    T::eq(['sp_journal_config_set_durable', 'sp_journal_config_set_first_index'], $lib->setters(), 'only the settings given');
    [, $lib] = recording(fn () => new Journal($url, notFoundLimit: 2, maxIndexJump: null));
    T::eq(['sp_journal_config_set_not_found_limit'], $lib->setters(), 'only the settings given');
});

$sandbox = new Sandbox(3);

T::test('Client: null is the library default and calls no setter', function () use ($sandbox): void {
    $names = ['caPem', 'connectTimeoutMs', 'timeoutMs', 'retries', 'retryBackoffMs', 'trustRoots', 'proxy', 'maxResponseBytes', 'lenientGames', 'fetchAction', 'fetchIndexParam', 'fetchEventKey'];
    [$client, $lib] = recording(fn () => new Client($sandbox->url, TOKEN, ...['caFile' => $sandbox->caFile] + array_fill_keys($names, null)));
    T::eq(['sp_client_config_add_ca_file'], $lib->setters(), 'only the CA file');
    T::eq(7, count($client->getGames('en-US')), 'works');
    $slow = new Client($sandbox->url . '/fault/slow/500', TOKEN, caFile: $sandbox->caFile, timeoutMs: null);
    T::eq(7, count($slow->getGames('en-US')), 'a slow answer within the default 15 s time-out');
});

T::test('Client: retries and backoff each alone keep the other\'s default', function () use ($sandbox): void {
    // One C setter takes both: the one left null is sent as the library's default.
    foreach ([[['retries' => 0], [0, 200]], [['retryBackoffMs' => 50], [2, 50]], [['retries' => 1, 'retryBackoffMs' => 0], [1, 0]], [['retries' => null, 'retryBackoffMs' => null], null]] as [$settings, $expected]) {
        [, $lib] = recording(fn () => new Client($sandbox->url, TOKEN, ...['caFile' => $sandbox->caFile] + $settings));
        $calls = $lib->arguments['sp_client_config_set_retries'] ?? null;
        T::eq($expected === null ? null : [$expected], $calls === null ? null : array_map(static fn (array $args): array => array_slice($args, 1), $calls), 'set_retries for ' . show($settings));
    }
    // Before, a backoff given without retries was dropped silently.
});

T::test('Recovery: a null limit is the default', function () use ($sandbox): void {
    T::eq(10_000, Recovery::DEFAULT_LIMIT, 'the default limit');
    $journal = new Journal('sqlite:' . tempDir() . '/journal.db', firstIndex: 1);
    $receiver = new Receiver(TOKEN, sources: 'any', journal: $journal);
    $body = '{"event":"gameSessionBuyRefund","index":3,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
        . '"transactionId":3,"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"r","gameId":12,"isMobile":false}';
    $event = $receiver->handle(TOKEN, null, $body);
    $event->begin();
    $event->reply(true);
    $event->finish();
    $client = new Client($sandbox->url, TOKEN, caFile: $sandbox->caFile, fetchAction: null);
    foreach ([[null, 2], [1, 1]] as [$limit, $missing]) {
        $recovery = new Recovery($receiver, $client, limit: $limit);
        T::eq($missing, $recovery->report()->missing, 'missing with limit ' . show($limit));
        $recovery->close();
    }
    T::eq('limit', T::throws(ConfigurationException::class, fn () => new Recovery($receiver, $client, limit: 0), 'limit 0')?->field, 'limit named');
});

$sandbox->stop();

T::finish();
