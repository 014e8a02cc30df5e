<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * The whole callback endpoint in one object (sp_endpoint): source, token, body, the journal's
 * claim, repeats, conflicts and every refusal are decided by the library; the partner's logic
 * only gets a new event and builds its reply.
 *
 * ```php
 * (new SlotPartner\Endpoint(['token' => $token, 'journal' => 'sqlite:/var/lib/partner/journal.db']))
 *     ->serve(fn (SlotPartner\Event $e) => $e->reply(true));
 * ```
 *
 * The native endpoint is found with sp_endpoint_shared: the same settings (byte for byte) find
 * the same endpoint in the same process, its journal open. Under PHP-FPM, whose variables die
 * with each request, a new Endpoint at the top of every request is one FFI call, not a receiver
 * and a journal rebuilt (the worker process keeps them); the handle is freed (one more call)
 * when this object is destroyed. fromEnvironment() finds it by a key of the variables' raw
 * texts and the settings given (sp_endpoint_shared_keyed), before it reads any of them as a
 * setting: a worker reads and checks them at its first request only. A request costs
 * sp_endpoint_shared (or _keyed), sp_endpoint_receive, sp_exchange_free and sp_endpoint_free;
 * a new event two more (its reply, sp_exchange_complete) and one a staged statement.
 *
 * The logic (handle(), serve(), the adapters) gets the typed event (BuyRefund, JackpotPayout,
 * BalanceQuery, OtherEvent), claimed already when the endpoint has a journal, and returns the
 * reply it built with $e->reply(...) or $e->replyBalance(...) (that reply is sent: the
 * returned value is not read), or for an OtherEvent the JSON text to send with 200. It may stage
 * its ledger's credit on the event ($e->stage(...)), which commits with the stored reply. A
 * Throwable it throws is a failure that may pass (the ledger is down): the claim is released and
 * the answer is 503 with Retry-After, so that the service delivers again; its class and message
 * go to the log line. Do not call begin(), finish() or abandon() on it: the endpoint does. The
 * event is let go when the logic returns: keep its fields, not the object.
 *
 * A setting the library refuses does not throw here: every request is then answered with the
 * library's answer to it (500, a body that names nothing of it) and the log line names the
 * setting (`configuration: token: ...`); configurationError() returns it for a host that checks
 * at start. One thread at a time; not cloneable.
 */
final class Endpoint
{
    /** The library's body limit when the settings name none. */
    public const DEFAULT_MAX_BODY_BYTES = 65536;

    /** The answer's body to a CONTENT_LENGTH that is not a number or promises more than arrived (%s: which). */
    public const BAD_LENGTH_BODY = '{"error":{"code":"bad_request","field":"CONTENT_LENGTH","message":"CONTENT_LENGTH %s"}}';

    /**
     * Every setting fromEnvironment() reads, from the variable `SLOTPARTNER_` and the key in
     * capitals, with how its text is read: the library's own table (KEYS in
     * src/endpoint/settings.rs, what sp_endpoint_from_environment reads), in its order, so that
     * the SLOTPARTNER_ variables mean the same in C, C++, PHP and Python (tests/endpoint_test.php
     * compares the two). Text is taken as is, Switch is 1/true/yes/on or 0/false/no/off (any
     * case), Number an integer, Tokens comma-separated tokens.
     */
    public const ENVIRONMENT = [
        'token' => 'Tokens',
        'sources' => 'Text',
        'trusted_proxies' => 'Text',
        'max_body_bytes' => 'Number',
        'max_depth' => 'Number',
        'max_identifier_bytes' => 'Number',
        'index_field' => 'Text',
        'strict_index' => 'Switch',
        'reject_unknown_events' => 'Switch',
        'balance_wrapper' => 'Text',
        'balance_currency' => 'Text',
        'balance_failure_http_status' => 'Number',
        'omit_empty_error_message' => 'Switch',
        'journal' => 'Text',
        'lease_ms' => 'Number',
        'busy_wait_ms' => 'Number',
        'durable' => 'Switch',
        'claim_at_finish' => 'Switch',
        'first_index' => 'Number',
        'max_reply_bytes' => 'Number',
        'lock_timeout_ms' => 'Number',
        'command_timeout_ms' => 'Number',
        'max_index_jump' => 'Number',
        'not_found_limit' => 'Number',
        'retention_ms' => 'Number',
        'retry_after' => 'Number',
        'optimistic' => 'Switch',
    ];

    /** Each setting's variable, by the setting's key: ENVIRONMENT's, in its order (a test compares the two). */
    private const VARIABLES = [
        'token' => 'SLOTPARTNER_TOKEN',
        'sources' => 'SLOTPARTNER_SOURCES',
        'trusted_proxies' => 'SLOTPARTNER_TRUSTED_PROXIES',
        'max_body_bytes' => 'SLOTPARTNER_MAX_BODY_BYTES',
        'max_depth' => 'SLOTPARTNER_MAX_DEPTH',
        'max_identifier_bytes' => 'SLOTPARTNER_MAX_IDENTIFIER_BYTES',
        'index_field' => 'SLOTPARTNER_INDEX_FIELD',
        'strict_index' => 'SLOTPARTNER_STRICT_INDEX',
        'reject_unknown_events' => 'SLOTPARTNER_REJECT_UNKNOWN_EVENTS',
        'balance_wrapper' => 'SLOTPARTNER_BALANCE_WRAPPER',
        'balance_currency' => 'SLOTPARTNER_BALANCE_CURRENCY',
        'balance_failure_http_status' => 'SLOTPARTNER_BALANCE_FAILURE_HTTP_STATUS',
        'omit_empty_error_message' => 'SLOTPARTNER_OMIT_EMPTY_ERROR_MESSAGE',
        'journal' => 'SLOTPARTNER_JOURNAL',
        'lease_ms' => 'SLOTPARTNER_LEASE_MS',
        'busy_wait_ms' => 'SLOTPARTNER_BUSY_WAIT_MS',
        'durable' => 'SLOTPARTNER_DURABLE',
        'claim_at_finish' => 'SLOTPARTNER_CLAIM_AT_FINISH',
        'first_index' => 'SLOTPARTNER_FIRST_INDEX',
        'max_reply_bytes' => 'SLOTPARTNER_MAX_REPLY_BYTES',
        'lock_timeout_ms' => 'SLOTPARTNER_LOCK_TIMEOUT_MS',
        'command_timeout_ms' => 'SLOTPARTNER_COMMAND_TIMEOUT_MS',
        'max_index_jump' => 'SLOTPARTNER_MAX_INDEX_JUMP',
        'not_found_limit' => 'SLOTPARTNER_NOT_FOUND_LIMIT',
        'retention_ms' => 'SLOTPARTNER_RETENTION_MS',
        'retry_after' => 'SLOTPARTNER_RETRY_AFTER',
        'optimistic' => 'SLOTPARTNER_OPTIMISTIC',
    ];

    /**
     * What begins the key fromEnvironment() finds its endpoint by (sp_endpoint_shared_keyed): the
     * key is the raw texts its settings are made of, and this names how they are made of them.
     * Change the number whenever settingsFromEnvironment() reads a text otherwise: a worker that
     * loads the new code keeps the library, and its keys, of the old.
     */
    private const KEY_PREFIX = 'SlotPartner\\Endpoint::fromEnvironment 1';

    /** The spellings of a switch (lower case) and what they mean, as the library reads them. */
    private const SWITCHES = ['1' => true, 'true' => true, 'yes' => true, 'on' => true, '0' => false, 'false' => false, 'no' => false, 'off' => false];

    /** What a variable's text is trimmed of: Unicode's White_Space, as Rust's str::trim (the library's). */
    private const WHITE_SPACE = '[\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]';

    /** The hint added to the log line of a refused token when no token was given at all. */
    private const TOKEN_HINT = ' (is SLOTPARTNER_TOKEN set?)';

    /** Added to the log line of a refused token (see the constructor). */
    private readonly string $hint;

    /** The owned `sp_endpoint *` handle; null when the settings were refused. */
    private ?CData $handle = null;

    /** The library; null when it could not be loaded (the refusal says why). */
    private ?Native $native = null;

    /** `sp_exchange *[1]`: the out-parameter of sp_endpoint_receive. */
    private ?CData $exchangeOut = null;

    private ?ConfigurationException $refused = null;

    /** The largest body the library accepts: serve() and the adapters read one byte more. */
    public readonly int $maxBodyBytes;

    /**
     * @param array<string, mixed> $settings the library's settings by their C setters' names
     *     (`token`, `sources`, `trusted_proxies`, `max_body_bytes`, `strict_index`,
     *     `reject_unknown_events`, `journal`, `claim_at_finish`, `first_index`, `retry_after`...:
     *     include/slotpartner.h, sp_endpoint_from_settings); a null value is left out (the
     *     library's default). Sent as one JSON object: an unknown key or a value of the wrong
     *     type is refused naming it
     * @param string $hint added to the log line of a refused token (fromEnvironment() names
     *     the variable to set)
     * @param ConfigurationException|null $refused a refusal found before the library is asked
     *     (fromEnvironment()'s of a variable it cannot read): every request is answered with it,
     *     the library not called
     */
    public function __construct(array $settings, string $hint = '', ?ConfigurationException $refused = null)
    {
        $this->open($settings, $hint, $refused, null);
    }

    /**
     * The constructor's work; with $key, the endpoint is found with sp_endpoint_shared_keyed
     * and kept under $key too (see fromEnvironment()).
     *
     * @param array<string, mixed> $settings
     */
    private function open(array $settings, string $hint, ?ConfigurationException $refused, ?string $key): void
    {
        $this->hint = $hint;
        foreach ($settings as $name => $value) {
            if ($value === null) {
                unset($settings[$name]);
            }
        }
        $limit = $settings['max_body_bytes'] ?? null;
        $this->maxBodyBytes = \is_int($limit) && $limit > 0 ? $limit : self::DEFAULT_MAX_BODY_BYTES;
        if ($refused !== null) {
            $this->refused = $refused;
            return;
        }
        try {
            $native = Native::get();
        } catch (ConfigurationException $e) {
            // FFI disabled, the library not found: answered as a refused setting (500, the
            // library's misconfigured body), the log line naming the cause.
            $this->refused = new ConfigurationException('library: ' . $e->getMessage(), $e->status, $e->statusName, 'library', 500, Native::misconfiguredBody(), $e);
            return;
        }
        $this->native = $native;
        $this->exchangeOut = $native->out('sp_exchange');
        $json = \json_encode($settings, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE);
        if ($json === false || \array_is_list($settings) && $settings !== []) {
            $this->refused = Native::argumentRefused('settings', $json === false
                ? 'cannot be written as JSON: ' . \json_last_error_msg()
                : 'must be an array keyed by setting names, not a list');
            return;
        }
        $out = $native->out('sp_endpoint');
        if ($json === '[]') {
            $json = '{}';
        }
        $status = $key === null
            ? $native->ffi->sp_endpoint_shared($json, \strlen($json), $out)
            : $native->ffi->sp_endpoint_shared_keyed($key, \strlen($key), $json, \strlen($json), $out);
        if ($status !== Status::OK) {
            $error = $native->error($status);
            // Only an argument's refusal (a ConfigurationException) is reported for settings.
            $this->refused = $error instanceof ConfigurationException ? $error
                : Native::argumentRefused($error->field === '' ? 'settings' : $error->field, $error->getMessage());
            return;
        }
        $this->handle = $out[0];
    }

    /**
     * The endpoint the environment configures (the variables of the pool, `env[NAME] = ...`, or
     * nginx's `fastcgi_param NAME value;`, as getenv() sees them): every setting, from
     * `SLOTPARTNER_<SETTING>` (SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL,
     * SLOTPARTNER_REJECT_UNKNOWN_EVENTS...), read as sp_endpoint_from_environment reads them
     * (see settingsFromEnvironment()). $settings adds to them and wins (say
     * `['reject_unknown_events' => true]`). A variable that cannot be read does not throw: it is
     * the endpoint's refusal, answered as a refused setting (500, the log line naming the
     * variable), as configurationError() returns it. With no token at all, the log line of the
     * refusal ends with ` (is SLOTPARTNER_TOKEN set?)`.
     *
     * @param array<string, mixed> $settings
     */
    public static function fromEnvironment(array $settings = []): self
    {
        // The worker's endpoint found by the variables' raw texts, before any of them is read
        // as a setting: under PHP-FPM every request but a worker's first finds it so.
        $key = self::environmentKey($settings);
        $self = (new \ReflectionClass(self::class))->newInstanceWithoutConstructor();
        if ($key !== null && $self->found($key, $settings)) {
            return $self;
        }
        try {
            $read = self::settingsFromEnvironment($settings);
        } catch (ConfigurationException $e) {
            $self->open([], '', $e, null);
            return $self;
        }
        $self->open($read, isset($read['token']) ? '' : self::TOKEN_HINT, null, $key);
        return $self;
    }

    /**
     * The key fromEnvironment() keeps its endpoint under: KEY_PREFIX, $settings as JSON, and the
     * raw text of every variable of VARIABLES (unset as empty), each after a NUL. The settings
     * are made of nothing else, so one key always names the same settings. Null (the endpoint
     * found by its settings alone) when $settings holds a value whose JSON may change from one
     * call to the next (an object), or has no JSON, or a text holds a NUL (the key would be
     * ambiguous).
     *
     * @param array<string, mixed> $settings
     */
    private static function environmentKey(array $settings): ?string
    {
        foreach ($settings as $value) {
            if (\is_array($value)) {
                foreach ($value as $item) {
                    if ($item !== null && !\is_scalar($item)) {
                        return null;
                    }
                }
            } elseif ($value !== null && !\is_scalar($value)) {
                return null;
            }
        }
        $json = \json_encode($settings, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE);
        if ($json === false) {
            return null;
        }
        // Every variable of VARIABLES, in its order, written out: one string built at once,
        // without a loop that grows it 27 times (about 3,000 instructions a request). A
        // variable left out here would leave the key naming more than one settings text:
        // tests/environment_key_test.php changes each of VARIABLES in turn.
        $key = self::KEY_PREFIX . "\0" . $json
            . "\0" . \getenv('SLOTPARTNER_TOKEN')
            . "\0" . \getenv('SLOTPARTNER_SOURCES')
            . "\0" . \getenv('SLOTPARTNER_TRUSTED_PROXIES')
            . "\0" . \getenv('SLOTPARTNER_MAX_BODY_BYTES')
            . "\0" . \getenv('SLOTPARTNER_MAX_DEPTH')
            . "\0" . \getenv('SLOTPARTNER_MAX_IDENTIFIER_BYTES')
            . "\0" . \getenv('SLOTPARTNER_INDEX_FIELD')
            . "\0" . \getenv('SLOTPARTNER_STRICT_INDEX')
            . "\0" . \getenv('SLOTPARTNER_REJECT_UNKNOWN_EVENTS')
            . "\0" . \getenv('SLOTPARTNER_BALANCE_WRAPPER')
            . "\0" . \getenv('SLOTPARTNER_BALANCE_CURRENCY')
            . "\0" . \getenv('SLOTPARTNER_BALANCE_FAILURE_HTTP_STATUS')
            . "\0" . \getenv('SLOTPARTNER_OMIT_EMPTY_ERROR_MESSAGE')
            . "\0" . \getenv('SLOTPARTNER_JOURNAL')
            . "\0" . \getenv('SLOTPARTNER_LEASE_MS')
            . "\0" . \getenv('SLOTPARTNER_BUSY_WAIT_MS')
            . "\0" . \getenv('SLOTPARTNER_DURABLE')
            . "\0" . \getenv('SLOTPARTNER_CLAIM_AT_FINISH')
            . "\0" . \getenv('SLOTPARTNER_FIRST_INDEX')
            . "\0" . \getenv('SLOTPARTNER_MAX_REPLY_BYTES')
            . "\0" . \getenv('SLOTPARTNER_LOCK_TIMEOUT_MS')
            . "\0" . \getenv('SLOTPARTNER_COMMAND_TIMEOUT_MS')
            . "\0" . \getenv('SLOTPARTNER_MAX_INDEX_JUMP')
            . "\0" . \getenv('SLOTPARTNER_NOT_FOUND_LIMIT')
            . "\0" . \getenv('SLOTPARTNER_RETENTION_MS')
            . "\0" . \getenv('SLOTPARTNER_RETRY_AFTER')
            . "\0" . \getenv('SLOTPARTNER_OPTIMISTIC');
        return \substr_count($key, "\0") === \count(self::VARIABLES) + 1 ? $key : null;
    }

    /**
     * Makes this object the handle of the endpoint kept under $key (sp_endpoint_shared_keyed
     * without settings), when there is one; false otherwise (this object untouched).
     *
     * @param array<string, mixed> $settings fromEnvironment()'s, which the key holds
     */
    private function found(string $key, array $settings): bool
    {
        try {
            $native = Native::get();
        } catch (ConfigurationException) {
            return false;   // the settings' way says why
        }
        $out = $native->out('sp_endpoint');
        if ($native->ffi->sp_endpoint_shared_keyed($key, \strlen($key), null, 0, $out) !== Status::OK) {
            return false;
        }
        $handle = $out[0];
        if ($handle === null) {
            return false;
        }
        // The body limit as the settings' way reads it: the key's settings were read without a
        // refusal when the endpoint was kept under it, and read the same now.
        try {
            $limit = \array_key_exists('max_body_bytes', $settings) ? $settings['max_body_bytes']
                : self::variable('max_body_bytes', self::ENVIRONMENT['max_body_bytes']);
        } catch (ConfigurationException) {
            $native->ffi->sp_endpoint_free($handle);
            return false;
        }
        $this->hint = '';
        $this->maxBodyBytes = \is_int($limit) && $limit > 0 ? $limit : self::DEFAULT_MAX_BODY_BYTES;
        $this->native = $native;
        $this->exchangeOut = $native->out('sp_exchange');
        $this->handle = $handle;
        return true;
    }

    /**
     * $settings with every setting of ENVIRONMENT it does not hold (a key it holds, null
     * included, wins: its variable is not read) read from its variable `SLOTPARTNER_<KEY>`, by
     * the library's rules (sp_endpoint_from_environment in include/slotpartner.h): the text is
     * trimmed of white space; unset or empty leaves the setting out (the library's default);
     * Text is taken as is; a Switch is `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`
     * (any case); a Number is an integer (a sign, then digits); SLOTPARTNER_TOKEN is a list of
     * the comma-separated tokens, each trimmed. One getenv() a setting, no call into the library.
     *
     * @param array<string, mixed> $settings
     *
     * @return array<string, mixed>
     *
     * @throws ConfigurationException naming the variable whose text cannot be read (not UTF-8,
     *     a Switch or Number of another spelling), with the answer to a refused setting (500)
     */
    public static function settingsFromEnvironment(array $settings = []): array
    {
        foreach (self::ENVIRONMENT as $key => $kind) {
            if (\array_key_exists($key, $settings)) {
                continue;
            }
            $value = self::variable($key, $kind);
            if ($value !== null) {
                $settings[$key] = $value;
            }
        }
        return $settings;
    }

    /**
     * The setting $key of kind $kind read from its variable (see settingsFromEnvironment()); null
     * when the variable is unset, empty or blank.
     *
     * @throws ConfigurationException naming the variable whose text cannot be read
     */
    private static function variable(string $key, string $kind): mixed
    {
        $name = self::VARIABLES[$key];
        $text = \getenv($name);
        if (!\is_string($text) || $text === '') {
            return null;
        }
        $text = self::trimmed($text) ?? throw Native::argumentRefused($name, 'is not UTF-8');
        if ($text === '') {
            return null;
        }
        return match ($kind) {
            'Tokens' => \array_map(static fn (string $token): string => (string) self::trimmed($token), \explode(',', $text)),
            'Switch' => self::SWITCHES[\strtolower($text)]
                ?? throw Native::argumentRefused($name, 'expected 1 or 0 (true or false), got ' . self::quoted($text)),
            'Number' => self::integer($text)
                ?? throw Native::argumentRefused($name, 'expected an integer, got ' . self::quoted($text)),
            default => $text,
        };
    }

    /**
     * $text trimmed of white space as Rust's str::trim trims it (the library's: Unicode's
     * White_Space); null when it is not UTF-8. Plain ASCII text is not given to PCRE.
     */
    private static function trimmed(string $text): ?string
    {
        $text = \trim($text, " \t\n\v\f\r");
        if (\preg_match('/[\x80-\xFF]/', $text) !== 1) {
            return $text;
        }
        return \preg_replace('/^' . self::WHITE_SPACE . '+|' . self::WHITE_SPACE . '+$/uD', '', $text);
    }

    /** $text as an int when it is one (a sign, then digits, within 64 bits), as Rust's i64 parse; else null. */
    private static function integer(string $text): ?int
    {
        if (\preg_match('/^[+-]?[0-9]+$/D', $text) !== 1) {
            return null;
        }
        $value = $text + 0;   // a numeric string: an int, or a float beyond 64 bits
        return \is_int($value) ? $value : null;
    }

    /** $text in double quotes, for a refusal's message. */
    private static function quoted(string $text): string
    {
        return (string) \json_encode($text, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE | \JSON_INVALID_UTF8_SUBSTITUTE);
    }

    /** The refusal of the settings, for a host that checks them at start; null when accepted. */
    public function configurationError(): ?ConfigurationException
    {
        return $this->refused;
    }

    /**
     * Handles the request PHP's SAPI holds (PHP-FPM, php -S, CGI): the method, X-Service-Token,
     * REMOTE_ADDR and X-Forwarded-For from $_SERVER, the body from php://input (at most
     * maxBodyBytes + 1 bytes, so that a larger one is refused 413); sends the answer and writes
     * its log line, when there is one, with error_log(). A CONTENT_LENGTH that is not a number
     * or promises more bytes than arrived is answered 400 (BAD_LENGTH_BODY) without the library.
     *
     * @param callable(Event): mixed $logic see the class's comment
     */
    public function serve(callable $logic): void
    {
        [$body, $problem] = self::inputBody($this->maxBodyBytes);
        $response = $body === null
            ? new Response(400, ['Content-Type' => 'application/json; charset=utf-8'], \sprintf(self::BAD_LENGTH_BODY, $problem), 'refused: CONTENT_LENGTH ' . $problem)
            : $this->handle(
                (string) ($_SERVER['REQUEST_METHOD'] ?? 'GET'),
                $_SERVER['HTTP_X_SERVICE_TOKEN'] ?? null,
                $_SERVER['REMOTE_ADDR'] ?? null,
                $_SERVER['HTTP_X_FORWARDED_FOR'] ?? null,
                $body,
                $logic,
            );
        $response->send();
        if ($response->log !== '') {
            \error_log($response->log);
        }
    }

    /**
     * Handles one request given explicitly, as the web server saw it, and returns the answer
     * (sp_endpoint_receive, the logic, sp_exchange_complete): what serve() and the PSR-7 and
     * HttpFoundation adapters build on.
     *
     * @param string $method the request's method (anything but POST is answered 405)
     * @param string|null $token the X-Service-Token header, null when absent
     * @param string|null $remoteAddr the peer's address (REMOTE_ADDR)
     * @param string|null $forwardedFor the X-Forwarded-For header as received, null when absent
     *     (read only from a trusted proxy)
     * @param string $body the body, or its first maxBodyBytes + 1 bytes
     * @param callable(Event): mixed $logic see the class's comment
     */
    public function handle(string $method, ?string $token, ?string $remoteAddr, ?string $forwardedFor, string $body, callable $logic): Response
    {
        $native = $this->native;
        if ($this->handle === null || $native === null || $this->exchangeOut === null) {
            return Response::ofError($this->refused ?? Native::argumentRefused('settings', 'refused'), 'configuration: ', $this->refused?->field === 'token' ? $this->hint : '');
        }
        $ffi = $native->ffi;
        // C reads a string up to its first NUL: one inside becomes U+FFFD, refused as it is.
        // (Each checked in place: a loop over references to them cost a request about 5 µs.)
        if (\str_contains($method, "\0")) {
            $method = Native::withoutNul($method);
        }
        if ($token !== null && \str_contains($token, "\0")) {
            $token = Native::withoutNul($token);
        }
        if ($remoteAddr !== null && \str_contains($remoteAddr, "\0")) {
            $remoteAddr = Native::withoutNul($remoteAddr);
        }
        if ($forwardedFor !== null && \str_contains($forwardedFor, "\0")) {
            $forwardedFor = Native::withoutNul($forwardedFor);
        }
        $status = $ffi->sp_endpoint_receive($this->handle, $method, $token, $remoteAddr, $forwardedFor, $body, \strlen($body), $this->exchangeOut);
        if ($status !== Status::OK) {
            return Response::ofError($native->error($status), 'endpoint: ');
        }
        $exchange = $this->exchangeOut[0];
        try {
            $event = $exchange->event;
            if ($event !== null) {
                $status = $this->complete($native, $exchange, $event, $logic);
                if ($status !== Status::OK) {
                    return Response::ofError($native->error($status), 'endpoint: ');
                }
            }
            return Response::copy($exchange->response);
        } finally {
            $ffi->sp_exchange_free($exchange);
        }
    }

    /** Runs the logic on the exchange's event, then completes the exchange; its status. */
    private function complete(Native $native, CData $exchange, CData $event, callable $logic): int
    {
        $failure = null;
        $reply = null;
        $typed = Event::adopt($native, $event, null, false);
        try {
            $result = $logic($typed);
            if ($typed instanceof OtherEvent) {
                if (\is_string($result)) {
                    $reply = $result;
                } else {
                    $failure = 'the logic returned ' . \get_debug_type($result) . ' for the event ' . $typed->name . ', not the JSON text to send';
                }
            }
        } catch (\Throwable $e) {
            $failure = \get_class($e) . ': ' . $e->getMessage();
        } finally {
            $typed->disown();
        }
        return $native->ffi->sp_exchange_complete(
            $exchange,
            $failure === null ? null : Native::withoutNul($failure),
            $reply,
            $reply === null ? 0 : \strlen($reply),
        );
    }

    /**
     * The request body from php://input, at most $limit + 1 bytes, as CGI's sp_endpoint_receive_cgi
     * reads it; [null, why] when CONTENT_LENGTH is not a number or the body is shorter than it says.
     *
     * @return array{0: ?string, 1: string}
     */
    private static function inputBody(int $limit): array
    {
        $lengthText = (string) ($_SERVER['CONTENT_LENGTH'] ?? $_SERVER['HTTP_CONTENT_LENGTH'] ?? '');
        $length = 0;
        if ($lengthText !== '' && \strspn($lengthText, '0123456789') === \strlen($lengthText)) {
            $length = (int) $lengthText;   // digits alone, as nginx and Apache pass it: no PCRE
        } elseif ($lengthText !== '') {
            if (\preg_match('/^[ \t\n\v\f\r]*\+?[0-9]+[ \t\n\v\f\r]*$/D', $lengthText) !== 1) {
                return [null, 'is not a number'];
            }
            $length = (int) \trim($lengthText, " \t\n\v\f\r+");
        }
        $wanted = \min($length, $limit + 1);
        $body = $wanted === 0 ? '' : \file_get_contents('php://input', false, null, 0, $wanted);
        if ($body === false || \strlen($body) < $wanted) {
            return [null, 'says more than the body holds'];
        }
        return [$body, ''];
    }

    public function __destruct()
    {
        $handle = $this->handle;
        if ($handle !== null && $this->native !== null) {
            $this->handle = null;
            $this->native->ffi->sp_endpoint_free($handle);
        }
    }

    private function __clone()
    {
    }
}
