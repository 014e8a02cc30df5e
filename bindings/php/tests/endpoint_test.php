<?php

declare(strict_types=1);

// SlotPartner\Endpoint in process (handle(), the core serve() and the adapters build on): the
// FFI calls a request costs, counted against the step-by-step flow it replaces; the logic's
// failure and its redelivery credited once; an OtherEvent's reply; refused settings;
// fromEnvironment(). The same endpoint behind nginx and PHP-FPM: fpm_test.php.

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\ConfigurationException;
use SlotPartner\Endpoint;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;
use SlotPartner\Journal;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\OtherEvent;
use SlotPartner\Outcome;
use SlotPartner\Receiver;

require __DIR__ . '/helper.php';

const CREDIT = 'INSERT INTO credits (kind, transaction_id, amount) VALUES (?, ?, ?) ON CONFLICT (kind, transaction_id) DO NOTHING';

/**
 * A SQLite journal file holding the ledger's table; its URL. The file is only ever opened by
 * another process than the library's: two copies of SQLite in one process (PHP's PDO and the
 * library's) do not see each other's locks, and one closing the file drops the other's.
 */
function journalWithLedger(): string
{
    $file = tempDir() . '/journal.db';
    ledgerSql('sqlite:' . $file, 'CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))', true);
    return 'sqlite:' . $file;
}

/** Runs $sql on the journal's file in a child PHP (the journal made first when $create); the rows. */
function ledgerSql(string $journal, string $sql, bool $create = false): array
{
    $code = 'require "' . PACKAGE . '/autoload.php";'
        . ($create ? 'new SlotPartner\Journal($argv[1]);' : '')
        . 'echo json_encode((new PDO($argv[1]))->query($argv[2])->fetchAll(PDO::FETCH_NUM));';
    [$rc, $out, $err] = runPhp(['-d', 'ffi.enable=1', '-r', $code, $journal, $sql]);
    if ($rc !== 0) {
        throw new RuntimeException('ledger: ' . $out . $err);
    }
    return json_decode($out, true);
}

/** @return list<array{0: string, 1: int, 2: int}> the ledger's rows */
function credits(string $journal): array
{
    return ledgerSql($journal, 'SELECT kind, transaction_id, amount FROM credits ORDER BY kind, transaction_id');
}

/** The demo logic: credits refunds and payouts (staged), answers balances. */
function logic(Event $e): mixed
{
    if ($e instanceof BuyRefund || $e instanceof JackpotPayout) {
        $e->stage(CREDIT, [$e instanceof BuyRefund ? 'refund' : 'payout', $e->transactionId, $e instanceof JackpotPayout ? $e->moneyWon : 0]);
        return $e->reply(true);
    }
    if ($e instanceof BalanceQuery) {
        return $e->replyBalance(100000);
    }
    return '{"ok":true}';
}

$counting = new CountingFfi(Library::ffi());
Native::useFfi($counting);

/** The FFI calls of one request, a new Endpoint as under PHP-FPM. */
function callsOf(CountingFfi $counting, array $settings, string $body, callable $logic): array
{
    $counting->reset();
    $endpoint = new Endpoint($settings);
    $response = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, $body, $logic);
    unset($endpoint);
    return [$counting->total(), $response, $counting->calls];
}

T::test('FFI calls a request: the endpoint against the step-by-step flow', function () use ($counting): void {
    $journal = journalWithLedger();
    $settings = ['token' => TOKEN, 'sources' => '127.0.0.1', 'journal' => $journal, 'reject_unknown_events' => true];
    [$new, $response, $calls] = callsOf($counting, $settings, fixture('refund.json'), 'logic');
    T::eq(200, $response->status, 'a new refund: 200');
    T::eq(['sp_endpoint_shared', 'sp_endpoint_receive', 'sp_event_stage', 'sp_event_reply', 'sp_exchange_complete', 'sp_exchange_free', 'sp_endpoint_free'], array_keys($calls), 'a new refund: the calls');
    T::true($new <= 7, 'a new refund with its staged credit: at most 7 calls, got ' . $new);
    [$repeat, $response] = callsOf($counting, $settings, fixture('refund.json'), 'logic');
    T::eq(4, $repeat, 'a repeat: shared, receive, exchange free, endpoint free');
    T::eq('repeated delivery answered from the journal', $response->log, 'a repeat is logged');
    [$refused] = callsOf($counting, $settings + [], fixture('not_json.json'), 'logic');
    T::eq(4, $refused, 'a refused body: 4 calls');

    // The same refund through the step-by-step API, as the previous example ran it per request:
    // a receiver to authenticate, the journal, a receiver with it, handle, begin, stage, reply,
    // finish, and the frees.
    $counting->reset();
    $make = static fn (?Journal $j) => new Receiver(tokens: TOKEN, sources: '127.0.0.1', maxBodyBytes: 65536, rejectUnknownEvents: true, journal: $j);
    $receiver = $make(null);
    $receiver->authenticate(TOKEN, '127.0.0.1');
    $receiver = $make(new Journal($journal));
    $event = $receiver->handle(TOKEN, '127.0.0.1', str_replace('"transactionId":', '"transactionId":1', fixture('payout.json')));
    T::eq(Outcome::New, $event->begin()->outcome, 'step by step: a new payout');
    $event->stage(CREDIT, ['payout', $event->transactionId, $event->moneyWon]);
    $event->reply(true);
    $event->finish();
    unset($event, $receiver);
    $old = $counting->total();
    T::true($old > 2 * $new, 'the step-by-step flow costs more than twice the calls: ' . $old . ' against ' . $new);
    echo 'FFI calls a new refund: step by step ' . $old . ', endpoint ' . $new . "; a repeat: endpoint " . $repeat . "\n";
});

T::test('the logic\'s failure: 503 with Retry-After, the claim released, the redelivery credited once', function (): void {
    $journal = journalWithLedger();
    $endpoint = new Endpoint(['token' => TOKEN, 'sources' => '127.0.0.1', 'journal' => $journal, 'retry_after' => 7]);
    $failing = static function (Event $e): never {
        $e->stage(CREDIT, ['payout', 1, 1]);
        throw new RuntimeException('the ledger is down');
    };
    $response = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('payout.json'), $failing);
    T::eq(503, $response->status, 'failure: 503');
    T::eq('7', $response->headers['Retry-After'] ?? null, 'failure: Retry-After from the settings');
    T::true(str_contains($response->log, 'RuntimeException: the ledger is down'), 'the log names the exception: ' . $response->log);
    T::true(!str_contains($response->body, 'ledger'), 'the body names nothing of it: ' . $response->body);
    T::eq([], credits($journal), 'nothing credited');
    $first = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('payout.json'), 'logic');
    T::eq(200, $first->status, 'the redelivery: 200');
    $again = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('payout.json'), $failing);
    T::eq([200, $first->body], [$again->status, $again->body], 'a repeat: the same bytes, the logic not run');
    T::eq(1, count(credits($journal)), 'credited once: ' . json_encode(credits($journal)));
    $error = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), static fn (Event $e) => throw new Error('a bug'));
    T::eq(503, $error->status, 'an Error (not an Exception) is a failure too, not a fatal');
    $none = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), static fn (Event $e) => null);
    T::eq(503, $none->status, 'no reply built: 503');
});

T::test('the event is the logic\'s while it runs, then let go', function (): void {
    $endpoint = new Endpoint(['token' => TOKEN, 'sources' => '127.0.0.1']);
    $kept = null;
    $before = Event::liveCount();
    $response = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), static function (Event $e) use (&$kept): string {
        $kept = $e;
        return $e->reply(true);
    });
    T::eq(200, $response->status, 'answered');
    T::eq($before, Event::liveCount(), 'no event left live');
    T::true($kept instanceof BuyRefund && $kept->transactionId > 0, 'its fields stay readable');
    T::throws(ConfigurationException::class, static fn () => $kept->reply(true), 'a reply built afterwards is refused');
    $freed = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), static function (Event $e): string {
        $e->free();   // the exchange's event: let go here, freed by the exchange alone
        return '';
    });
    T::eq(503, $freed->status, 'an event freed by the logic: no reply, 503, and no double free');
    T::eq($before, Event::liveCount(), 'still no event left live');
    $balance = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('balance.json'), 'logic');
    T::eq([200, '{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}'], [$balance->status, $balance->body], 'a balance without a journal');
});

T::test('an other event: the JSON text the logic returns, 200', function (): void {
    $endpoint = new Endpoint(['token' => TOKEN, 'sources' => '127.0.0.1']);
    $response = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('other_event.json'), static fn (OtherEvent $e): string => '{"seen":"' . $e->name . '"}');
    T::eq(200, $response->status, 'status');
    T::true(str_starts_with($response->body, '{"seen":"'), 'the body is the logic\'s: ' . $response->body);
    $wrong = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('other_event.json'), static fn (Event $e): int => 1);
    T::eq(503, $wrong->status, 'not a string: 503');
    T::true(str_contains($wrong->log, 'returned int'), 'the log says what it returned: ' . $wrong->log);
});

T::test('refused settings: every request answered 500, the log names the setting', function (): void {
    $endpoint = new Endpoint(['sources' => 'any']);
    T::true($endpoint->configurationError() instanceof ConfigurationException, 'configurationError()');
    $response = $endpoint->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), 'logic');
    T::eq(500, $response->status, 'status');
    T::eq('{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}', $response->body, 'a body naming nothing');
    T::eq('configuration: token: no partner token is configured', $response->log, 'the log');
    $typo = new Endpoint(['token' => TOKEN, 'sourcse' => 'any']);
    T::true(str_contains((string) $typo->configurationError()?->getMessage(), 'sourcse'), 'an unknown key is named');
    $list = new Endpoint([TOKEN]);
    T::eq('settings', $list->configurationError()?->field, 'a list is refused');
});

T::test('fromEnvironment() reads the SLOTPARTNER_ variables', function (): void {
    $journal = journalWithLedger();
    putenv('SLOTPARTNER_TOKEN=' . OTHER_TOKEN . ', ' . TOKEN);
    putenv('SLOTPARTNER_SOURCES=10.0.0.0/8');
    putenv('SLOTPARTNER_TRUSTED_PROXIES=127.0.0.1');
    putenv('SLOTPARTNER_STRICT_INDEX=1');
    putenv('SLOTPARTNER_JOURNAL=' . $journal);
    putenv('SLOTPARTNER_CLAIM_AT_FINISH=1');
    putenv('SLOTPARTNER_FIRST_INDEX=5');
    try {
        $endpoint = Endpoint::fromEnvironment(['reject_unknown_events' => true]);
        T::eq(null, $endpoint->configurationError(), 'accepted');
        $via = static fn (?string $forwarded, string $body) => $endpoint->handle('POST', TOKEN, '127.0.0.1', $forwarded, $body, 'logic')->status;
        T::eq(403, $via(null, fixture('refund.json')), 'the proxy itself is no source');
        T::eq(200, $via('10.1.2.3', fixture('refund.json')), 'a source behind the trusted proxy, the second token');
        $indexString = (string) preg_replace('/"index": *[0-9]*/', '"index":"42"', fixture('payout.json'));
        T::eq(200, $via('10.1.2.3', $indexString), 'strict index: 200 ...');
        T::true(str_contains($endpoint->handle('POST', TOKEN, '127.0.0.1', '10.1.2.3', $indexString, 'logic')->body, '"success":false'), '... with success false');
        T::eq(400, $via('10.1.2.3', fixture('other_event.json')), 'the settings given win: unknown events refused');
        T::eq(1, count(credits($journal)), 'the journal of SLOTPARTNER_JOURNAL credited');
        putenv('SLOTPARTNER_TOKEN');
        T::eq('configuration: token: no partner token is configured (is SLOTPARTNER_TOKEN set?)', Endpoint::fromEnvironment()->handle('POST', null, null, null, '', 'logic')->log, 'unset: a hint');
    } finally {
        foreach (['TOKEN', 'SOURCES', 'TRUSTED_PROXIES', 'STRICT_INDEX', 'JOURNAL', 'CLAIM_AT_FINISH', 'FIRST_INDEX'] as $name) {
            putenv('SLOTPARTNER_' . $name);
        }
    }
});

/**
 * The library's table of the environment's settings (KEYS in src/endpoint/settings.rs, which
 * sp_endpoint_from_environment reads): key => kind (Text, Switch, Number, Tokens), in its order.
 *
 * @return array<string, string>
 */
function libraryEnvironmentKeys(): array
{
    $source = (string) file_get_contents(ROOT . '/src/endpoint/settings.rs');
    if (preg_match('/^const KEYS: \[\(&str, Kind\); ([0-9]+)\] = \[\n(.*?)\n\];$/ms', $source, $table) !== 1) {
        throw new RuntimeException('no KEYS table in src/endpoint/settings.rs');
    }
    preg_match_all('/^    \("([a-z_]+)", Kind::([A-Za-z]+)\),$/m', $table[2], $rows, PREG_SET_ORDER);
    if (count($rows) !== (int) $table[1] || count($rows) !== substr_count($table[2], "\n") + 1) {
        throw new RuntimeException('KEYS holds ' . $table[1] . ' rows, ' . count($rows) . ' read: a row of another form');
    }
    return array_combine(array_column($rows, 1), array_column($rows, 2));
}

/** Runs $body with the variables $variables set (name => value; null: unset), every SLOTPARTNER_ setting's variable unset otherwise. */
function withEnvironment(array $variables, callable $body): mixed
{
    $names = array_map(static fn (string $key): string => 'SLOTPARTNER_' . strtoupper($key), array_keys(Endpoint::ENVIRONMENT));
    foreach ($names as $name) {
        putenv($name);
    }
    foreach ($variables as $name => $value) {
        putenv($value === null ? $name : $name . '=' . $value);
    }
    try {
        return $body();
    } finally {
        foreach (array_merge($names, array_keys($variables)) as $name) {
            putenv($name);
        }
    }
}

T::test('the binding reads the environment\'s settings the library reads, each of the same kind', function (): void {
    $library = libraryEnvironmentKeys();
    T::eq(27, count($library), 'the library\'s table read whole');
    T::eq($library, Endpoint::ENVIRONMENT, 'Endpoint::ENVIRONMENT is the library\'s KEYS: names, kinds and order');
});

T::test('settingsFromEnvironment(): the library\'s rules for every SLOTPARTNER_ variable', function (): void {
    $read = static fn (array $variables, array $settings = []): array => withEnvironment($variables, static fn (): array => Endpoint::settingsFromEnvironment($settings));
    $refusal = static function (array $variables): ?ConfigurationException {
        try {
            withEnvironment($variables, static fn (): array => Endpoint::settingsFromEnvironment());
        } catch (ConfigurationException $e) {
            return $e;
        }
        return null;
    };
    T::eq([], $read([]), 'nothing set: nothing read');
    foreach (['1', 'true', 'TRUE', 'Yes', 'on', " On\t"] as $spelling) {
        T::eq(['reject_unknown_events' => true], $read(['SLOTPARTNER_REJECT_UNKNOWN_EVENTS' => $spelling]), 'a switch on: ' . json_encode($spelling));
    }
    foreach (['0', 'false', 'False', 'NO', 'off', ' 0 '] as $spelling) {
        T::eq(['strict_index' => false], $read(['SLOTPARTNER_STRICT_INDEX' => $spelling]), 'a switch off: ' . json_encode($spelling));
    }
    $maybe = $refusal(['SLOTPARTNER_STRICT_INDEX' => 'maybe']);
    T::eq(['SLOTPARTNER_STRICT_INDEX', 'SLOTPARTNER_STRICT_INDEX: expected 1 or 0 (true or false), got "maybe"'], [$maybe?->field, $maybe?->getMessage()], 'a bad switch names the variable');
    T::eq(500, $maybe?->httpStatus, 'answered as a refused setting');
    T::eq(['max_body_bytes' => 4096, 'first_index' => -3, 'retry_after' => 7], $read(['SLOTPARTNER_MAX_BODY_BYTES' => ' 4096 ', 'SLOTPARTNER_FIRST_INDEX' => '-3', 'SLOTPARTNER_RETRY_AFTER' => '+007']), 'numbers');
    foreach (['64k', '1.5', '1_000', '-', '0x10', '9223372036854775808'] as $bad) {
        $e = $refusal(['SLOTPARTNER_LEASE_MS' => $bad]);
        T::eq(['SLOTPARTNER_LEASE_MS', 'SLOTPARTNER_LEASE_MS: expected an integer, got "' . $bad . '"'], [$e?->field, $e?->getMessage()], 'not an integer: ' . $bad);
    }
    T::eq(['lease_ms' => PHP_INT_MAX], $read(['SLOTPARTNER_LEASE_MS' => '9223372036854775807']), 'the largest integer');
    T::eq(['token' => [TOKEN]], $read(['SLOTPARTNER_TOKEN' => ' ' . TOKEN . ' ']), 'one token');
    T::eq(['token' => [OTHER_TOKEN, TOKEN]], $read(['SLOTPARTNER_TOKEN' => OTHER_TOKEN . ' , ' . TOKEN]), 'two tokens, comma-separated');
    T::eq(['sources' => '10.0.0.0/8, staging', 'journal' => 'sqlite:/tmp/x.db'], $read(['SLOTPARTNER_SOURCES' => "10.0.0.0/8, staging\n", 'SLOTPARTNER_JOURNAL' => 'sqlite:/tmp/x.db']), 'text as is, trimmed');
    T::eq(['balance_currency' => 'EUR'], $read(['SLOTPARTNER_BALANCE_CURRENCY' => "\u{A0}EUR\u{3000}"]), 'trimmed of Unicode\'s spaces as the library trims');
    T::eq('SLOTPARTNER_INDEX_FIELD', $refusal(['SLOTPARTNER_INDEX_FIELD' => "ind\xFFex"])?->field, 'not UTF-8: refused naming the variable');
    T::eq([], $read(['SLOTPARTNER_TOKEN' => '', 'SLOTPARTNER_STRICT_INDEX' => ' ', 'SLOTPARTNER_MAX_DEPTH' => "\t"]), 'empty or blank: unset');
    T::eq(['strict_index' => false, 'sources' => 'any', 'journal' => null], $read(['SLOTPARTNER_STRICT_INDEX' => 'maybe', 'SLOTPARTNER_SOURCES' => 'staging', 'SLOTPARTNER_JOURNAL' => 'sqlite:/tmp/x.db'], ['strict_index' => false, 'sources' => 'any', 'journal' => null]), 'an explicit setting wins, its variable not read (null: the default)');
});

T::test('fromEnvironment(): every variable reaches the endpoint, a bad one is its refusal', function (): void {
    $base = ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1'];
    $other = withEnvironment($base + ['SLOTPARTNER_REJECT_UNKNOWN_EVENTS' => 'yes'], static fn () => Endpoint::fromEnvironment()->handle('POST', TOKEN, '127.0.0.1', null, fixture('other_event.json'), 'logic'));
    T::eq(400, $other->status, 'SLOTPARTNER_REJECT_UNKNOWN_EVENTS=yes: an unknown event refused');
    $limited = withEnvironment($base + ['SLOTPARTNER_MAX_BODY_BYTES' => '64'], static fn () => Endpoint::fromEnvironment());
    T::eq(64, $limited->maxBodyBytes, 'SLOTPARTNER_MAX_BODY_BYTES: the limit serve() reads to');
    T::eq(413, $limited->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), 'logic')->status, '... and the library\'s');
    $bad = withEnvironment($base + ['SLOTPARTNER_OMIT_EMPTY_ERROR_MESSAGE' => 'maybe'], static fn () => Endpoint::fromEnvironment());
    T::eq('SLOTPARTNER_OMIT_EMPTY_ERROR_MESSAGE', $bad->configurationError()?->field, 'a bad variable: the refusal');
    $response = $bad->handle('POST', TOKEN, '127.0.0.1', null, fixture('refund.json'), 'logic');
    T::eq([500, '{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}'], [$response->status, $response->body], 'answered 500, the body naming nothing');
    T::eq('configuration: SLOTPARTNER_OMIT_EMPTY_ERROR_MESSAGE: expected 1 or 0 (true or false), got "maybe"', $response->log, 'the log names the variable');
    $given = withEnvironment($base + ['SLOTPARTNER_REJECT_UNKNOWN_EVENTS' => '1'], static fn () => Endpoint::fromEnvironment(['reject_unknown_events' => false]));
    T::eq(200, $given->handle('POST', TOKEN, '127.0.0.1', null, fixture('other_event.json'), 'logic')->status, 'the setting given wins over the variable');
    $empty = withEnvironment(['SLOTPARTNER_TOKEN' => ' '], static fn () => Endpoint::fromEnvironment());
    T::eq('configuration: token: no partner token is configured (is SLOTPARTNER_TOKEN set?)', $empty->handle('POST', null, null, null, '', 'logic')->log, 'a blank token is none: the hint');
});

T::test('a NUL in a header is refused, not cut short', function (): void {
    $endpoint = new Endpoint(['token' => TOKEN, 'sources' => '127.0.0.1']);
    T::eq(401, $endpoint->handle('POST', TOKEN . "\0junk", '127.0.0.1', null, fixture('refund.json'), 'logic')->status, 'token with a NUL');
    T::eq(403, $endpoint->handle('POST', TOKEN, "127.0.0.1\0", null, fixture('refund.json'), 'logic')->status, 'address with a NUL');
});

T::finish();
