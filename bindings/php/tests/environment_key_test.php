<?php

declare(strict_types=1);

// Endpoint::fromEnvironment() finds the process's endpoint by the raw texts of its variables
// (sp_endpoint_shared_keyed) before reading any of them as a setting: the same texts find the
// endpoint made from them, and texts differing in any one variable, or other settings given,
// never do. In a file of its own: it fills the library's slots of kept endpoints, which the
// other files' processes keep for their own.

use SlotPartner\Endpoint;
use SlotPartner\Library;
use SlotPartner\Native;

require __DIR__ . '/helper.php';

/** Forwards every call to the library and records each sp_endpoint_shared_keyed call's key, settings and handle. */
final class KeyRecordingFfi
{
    /** @var list<string> the sp_endpoint_shared* functions called since the last reset() */
    public array $calls = [];

    /** @var list<array{key: string, settings: ?string, found: bool}> */
    public array $keyed = [];

    public function __construct(private readonly FFI $ffi)
    {
    }

    /** @param list<mixed> $args */
    public function __call(string $name, array $args): mixed
    {
        if (str_starts_with($name, 'sp_endpoint_shared')) {
            $this->calls[] = $name;
        }
        $result = $this->ffi->$name(...$args);
        if ($name === 'sp_endpoint_shared_keyed') {
            $this->keyed[] = ['key' => $args[0], 'settings' => $args[2], 'found' => $args[4][0] !== null];
        }
        return $result;
    }

    public function reset(): void
    {
        $this->calls = [];
        $this->keyed = [];
    }
}

$recording = new KeyRecordingFfi(Library::ffi());
Native::useFfi($recording);

/** A text for each variable other than the one the base environment holds, which the library accepts. */
const CHANGED = [
    'token' => OTHER_TOKEN,
    'sources' => 'staging',
    'trusted_proxies' => '10.0.0.0/8',
    'max_body_bytes' => '4096',
    'max_depth' => '16',
    'max_identifier_bytes' => '128',
    'index_field' => 'position',
    'strict_index' => '1',
    'reject_unknown_events' => '1',
    'balance_wrapper' => 'wallet',
    'balance_currency' => 'USD',
    'balance_failure_http_status' => '200',
    'omit_empty_error_message' => '1',
    'journal' => 'sqlite:/nonexistent/other.db',
    'lease_ms' => '20000',
    'busy_wait_ms' => '1000',
    'durable' => '0',
    'claim_at_finish' => '0',
    'first_index' => '1',
    'max_reply_bytes' => '4096',
    'lock_timeout_ms' => '4000',
    'command_timeout_ms' => '14000',
    'max_index_jump' => '1000',
    'not_found_limit' => '4',
    'retention_ms' => '86400000',
    'retry_after' => '7',
    'optimistic' => '1',
];

/** The variables every case starts from (the journal is opened by a first request only: none is made). */
const BASE = [
    'SLOTPARTNER_TOKEN' => TOKEN,
    'SLOTPARTNER_SOURCES' => '127.0.0.1',
    'SLOTPARTNER_JOURNAL' => 'sqlite:/nonexistent/journal.db',
    'SLOTPARTNER_CLAIM_AT_FINISH' => '1',
];

/** fromEnvironment($settings) with exactly $variables set among the SLOTPARTNER_ ones; the endpoint and the calls it made. */
function fromEnvironment(KeyRecordingFfi $recording, array $variables, array $settings = []): array
{
    $names = array_map(static fn (string $key): string => 'SLOTPARTNER_' . strtoupper($key), array_keys(Endpoint::ENVIRONMENT));
    foreach ($names as $name) {
        putenv($name);
    }
    foreach ($variables as $name => $value) {
        putenv($name . '=' . $value);
    }
    try {
        $recording->reset();
        $endpoint = Endpoint::fromEnvironment($settings);
        return [$endpoint, $recording->calls, $recording->keyed];
    } finally {
        foreach ($names as $name) {
            putenv($name);
        }
    }
}

T::test('the key holds every variable: its names are ENVIRONMENT\'s', function (): void {
    $variables = (new ReflectionClassConstant(Endpoint::class, 'VARIABLES'))->getValue();
    $expected = [];
    foreach (array_keys(Endpoint::ENVIRONMENT) as $key) {
        $expected[$key] = 'SLOTPARTNER_' . strtoupper($key);
    }
    T::eq($expected, $variables, 'VARIABLES: every setting of ENVIRONMENT, its variable, in its order');
    T::eq(array_keys(Endpoint::ENVIRONMENT), array_keys(CHANGED), 'this test changes every variable');
});

T::test('the key is the prefix, the settings\' JSON and every variable of VARIABLES in its order, each after a NUL', function (): void {
    $variables = (new ReflectionClassConstant(Endpoint::class, 'VARIABLES'))->getValue();
    $prefix = (new ReflectionClassConstant(Endpoint::class, 'KEY_PREFIX'))->getValue();
    $keyOf = new ReflectionMethod(Endpoint::class, 'environmentKey');
    $settings = ['reject_unknown_events' => true];
    try {
        foreach (array_values($variables) as $n => $name) {
            putenv($name . '=text ' . $n);   // a text of its own for each
        }
        $expected = $prefix . "\0" . json_encode($settings);
        foreach ($variables as $name) {
            $expected .= "\0" . getenv($name);
        }
        T::eq($expected, $keyOf->invoke(null, $settings), 'every variable set');
        putenv($variables['journal']);
        T::eq(str_replace("\0text 13\0", "\0\0", $expected), $keyOf->invoke(null, $settings), 'one unset: empty');
    } finally {
        foreach ($variables as $name) {
            putenv($name);
        }
    }
});

T::test('the same texts find the endpoint by the key alone; it serves as the one made from them', function () use ($recording): void {
    $limited = BASE + ['SLOTPARTNER_MAX_BODY_BYTES' => ' 64 '];
    [$first, $calls, $keyed] = fromEnvironment($recording, $limited);
    T::eq(null, $first->configurationError(), 'accepted');
    T::eq(['sp_endpoint_shared_keyed', 'sp_endpoint_shared_keyed'], $calls, 'the first: not found by the key, then made from the settings');
    T::eq([false, true], array_column($keyed, 'found'), '... and kept under the key');
    T::eq(null, $keyed[0]['settings'], 'the first call only finds');
    T::eq($keyed[0]['key'], $keyed[1]['key'], 'one key');
    $settings = json_decode((string) $keyed[1]['settings'], true);
    T::eq(64, $settings['max_body_bytes'] ?? null, 'the settings read from the texts');
    [$again, $calls, $keyed] = fromEnvironment($recording, $limited);
    T::eq(['sp_endpoint_shared_keyed'], $calls, 'the same texts: found by the key, one call');
    T::eq([true], array_column($keyed, 'found'), '... found');
    T::eq(null, $again->configurationError(), 'accepted');
    T::eq(64, $again->maxBodyBytes, 'the body limit of the texts');
    $body = fixture('refund.json');
    foreach ([$first, $again] as $i => $endpoint) {
        T::eq(413, $endpoint->handle('POST', TOKEN, '127.0.0.1', null, $body, 'var_dump')->status, 'the limit is the library\'s: ' . $i);
        T::eq(401, $endpoint->handle('POST', OTHER_TOKEN, '127.0.0.1', null, '{}', 'var_dump')->status, 'the token: ' . $i);
        T::eq(403, $endpoint->handle('POST', TOKEN, '10.9.9.9', null, '{}', 'var_dump')->status, 'the sources: ' . $i);
    }
    [$given] = fromEnvironment($recording, $limited, ['max_body_bytes' => 128]);
    T::eq(128, $given->maxBodyBytes, 'a limit given wins over the variable');
    [$again, $calls] = fromEnvironment($recording, $limited, ['max_body_bytes' => 128]);
    T::eq([['sp_endpoint_shared_keyed'], 128], [$calls, $again->maxBodyBytes], '... found by the key with it');
    [$unset, $calls] = fromEnvironment($recording, $limited, ['max_body_bytes' => null]);
    T::eq(Endpoint::DEFAULT_MAX_BODY_BYTES, $unset->maxBodyBytes, 'null given: the default, the variable not read');
    [$unset, $calls] = fromEnvironment($recording, $limited, ['max_body_bytes' => null]);
    T::eq([['sp_endpoint_shared_keyed'], Endpoint::DEFAULT_MAX_BODY_BYTES], [$calls, $unset->maxBodyBytes], '... found by the key with it');
});

T::test('texts differing in any one variable, or other settings given, are not found by another\'s key', function () use ($recording): void {
    [$base, $calls] = fromEnvironment($recording, BASE);
    T::eq(null, $base->configurationError(), 'the base accepted');
    [, $calls] = fromEnvironment($recording, BASE);
    T::eq(['sp_endpoint_shared_keyed'], $calls, 'the base: found by its key');
    // Before the variables: these fill five of the library's 16 slots, the variables the rest.
    foreach ([['reject_unknown_events' => true], ['reject_unknown_events' => false], ['reject_unknown_events' => null], ['token' => [TOKEN, OTHER_TOKEN]], ['token' => [OTHER_TOKEN, TOKEN]]] as $given) {
        [$endpoint, , $keyed] = fromEnvironment($recording, BASE, $given);
        T::eq(null, $endpoint->configurationError(), json_encode($given) . ' accepted');
        T::eq([false, true], array_column($keyed, 'found'), json_encode($given) . ' given: not found by the base\'s key');
    }
    [, $calls] = fromEnvironment($recording, BASE, ['token' => [TOKEN, OTHER_TOKEN]]);
    T::eq(['sp_endpoint_shared_keyed'], $calls, 'settings given: found by their key again');
    foreach (CHANGED as $key => $text) {
        $name = 'SLOTPARTNER_' . strtoupper($key);
        [$changed, $calls, $keyed] = fromEnvironment($recording, [$name => $text] + BASE);
        T::eq(null, $changed->configurationError(), $name . '=' . $text . ' accepted');
        T::eq([false, true], array_column($keyed, 'found'), $name . ': not found by the base\'s key, made from its settings');
        $settings = json_decode((string) ($keyed[1]['settings'] ?? ''), true);
        $expected = match (Endpoint::ENVIRONMENT[$key]) {
            'Tokens' => [$text],
            'Switch' => $text === '1',
            'Number' => (int) $text,
            default => $text,
        };
        T::eq($expected, $settings[$key] ?? null, $name . ': the endpoint has its value');
        // The same value in another spelling is another key too: never the base's endpoint.
        [, , $keyed] = fromEnvironment($recording, [$name => ' ' . $text] + BASE);
        T::eq(false, $keyed[0]['found'] ?? true, $name . ' with a blank: not found by another\'s key');
        [, $calls] = fromEnvironment($recording, BASE);
        T::eq(['sp_endpoint_shared_keyed'], $calls, 'the base again after ' . $name . ': found by its key');
    }
});

T::test('settings whose JSON may change, and refused ones, are never found by a key', function () use ($recording): void {
    $object = new class () implements JsonSerializable {
        public function jsonSerialize(): mixed
        {
            return 'staging';
        }
    };
    [$endpoint, $calls] = fromEnvironment($recording, BASE, ['sources' => $object]);
    T::eq(['sp_endpoint_shared'], $calls, 'an object given: found by its settings alone');
    T::eq(null, $endpoint->configurationError(), '... and accepted');
    [, $calls] = fromEnvironment($recording, BASE, ['sources' => [$object]]);
    T::eq(['sp_endpoint_shared'], $calls, 'an object in a list given: found by its settings alone');
    [$bad, $calls] = fromEnvironment($recording, BASE, ['sources' => "\xFF"]);
    T::eq([], $calls, 'no JSON: refused before the library is asked');
    T::eq('settings', $bad->configurationError()?->field, '... naming the settings');
    for ($i = 0; $i < 2; $i++) {
        [$bad, $calls] = fromEnvironment($recording, BASE + ['SLOTPARTNER_STRICT_INDEX' => 'maybe']);
        T::eq(['sp_endpoint_shared_keyed'], $calls, 'a variable refused: not found, the library not asked to make it (' . $i . ')');
        T::eq('SLOTPARTNER_STRICT_INDEX', $bad->configurationError()?->field, '... refused naming it (' . $i . ')');
        [$bad, $calls] = fromEnvironment($recording, BASE + ['SLOTPARTNER_LEASE_MS' => '0']);
        T::eq(['sp_endpoint_shared_keyed', 'sp_endpoint_shared_keyed'], $calls, 'a setting the library refuses: not found, then refused (' . $i . ')');
        T::eq((new Endpoint(['token' => TOKEN, 'journal' => 'sqlite:/nonexistent/journal.db', 'lease_ms' => 0]))->configurationError()?->getMessage(), $bad->configurationError()?->getMessage(), '... as given (' . $i . ')');
        [$none] = fromEnvironment($recording, []);
        T::eq('configuration: token: no partner token is configured (is SLOTPARTNER_TOKEN set?)', $none->handle('POST', null, null, null, '', 'var_dump')->log, 'no token: the hint (' . $i . ')');
    }
});

T::finish();
