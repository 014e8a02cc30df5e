<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * A configured callback receiver: authenticates the service's requests and parses and
 * validates their bodies into typed events (sp_receiver).
 *
 * Build one per process (or per request without a persistent worker) and use it for every
 * callback; it is immutable. The native receiver is freed when this object is destroyed; events
 * it returned stay valid after that. Not cloneable.
 *
 * ```php
 * $receiver = new Receiver(tokens: '6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f');
 * $event = $receiver->handle($_SERVER['HTTP_X_SERVICE_TOKEN'] ?? null, $_SERVER['REMOTE_ADDR'], $body);
 * ```
 *
 * authenticate() checks the source and token alone (before a Journal is opened: a request
 * refused there never reaches it).
 */
final class Receiver
{
    /** The owned `sp_receiver *`. */
    private ?CData $handle = null;

    private readonly Native $native;

    /**
     * Whether the Receiver has a journal: its events then come with their native event
     * (sp_receiver_handle), which begin() claims; without one, from a record.
     */
    private readonly bool $journaled;

    /**
     * The success replies of refunds and payouts built so far, by event class: they depend on
     * the Receiver's settings alone, so the library builds each once (see Event::reply()).
     *
     * @var \ArrayObject<string, string>
     */
    private readonly \ArrayObject $successes;

    /**
     * Every setting but $tokens is optional: null (the default) keeps the library's default,
     * shown in brackets. The list-valued settings ($tokens, $sources, $trustedProxies) take one
     * comma-separated string or an array of strings, each item trimmed of blanks; an empty item
     * (a stray comma), an item that is not a string, or an array item holding a comma is refused
     * naming the setting. An empty value ('', []) is refused for $tokens and $sources and means
     * none for $trustedProxies.
     *
     * @param string|list<string>|null $tokens the partner token (a UUID) the service sends in
     *     X-Service-Token, or two during a rotation ('A, B' or [A, B]). Required: null (an unset
     *     environment variable) is refused naming the field `token` ("token: must be a string,
     *     not null", with the answer the library gives a NULL token in C: HTTP 500); errors name
     *     the field `token`, as the library's do
     * @param string|list<string>|null $sources "any", or "staging", "production" (the spec's
     *     addresses), IPv4/IPv6 addresses and CIDR ranges ["production"]
     * @param string|list<string>|null $trustedProxies addresses and ranges whose
     *     X-Forwarded-For is believed [none; an empty value means none too]
     * @param int|null $maxBodyBytes largest body accepted, at least 2 [65536]
     * @param int|null $maxDepth deepest nesting accepted, 1 to 100, top-level object = 1 [32]
     * @param int|null $maxIdentifierBytes longest identifier or code accepted, at least 1 [256]
     * @param string|null $indexField name of the service's event index field ["index"]
     * @param bool|null $rejectUnknownEvents refuse events other than the three known ones
     *     (ValidationException, HTTP 400) instead of passing them through as OtherEvent [false]
     * @param string|null $balanceWrapper wrapper key of balance replies ["playerBalance"]
     * @param string|null $balanceCurrency currency of balance replies when none is named ["EUR"]
     * @param bool|null $omitEmptyErrorMessage leave `errorMessage` out of successful replies
     *     instead of sending "" [false]
     * @param bool|null $strictIndex refuse an event whose index field is present but not a
     *     non-negative integer ("42", -1, 1.5), naming the field (ValidationException, HTTP 200
     *     with the event's wrapper and success false) [false: such an event is handled with
     *     $index null and $indexUnreadable true, the raw value in $extra]
     * @param int|null $balanceFailureHttpStatus the HTTP status a refused balance query is
     *     answered with (Event::replyHttpStatus() after reply(false, ...), and httpStatus of a
     *     balance query refused by validation): 200, or 400 to 599 [500]. The body states no
     *     balance either way: `{"playerBalance":{"errorMessage":"..."}}`
     * @param Journal|null $journal the delivery journal this receiver's deliveries go through:
     *     its events can be claimed with Event::begin(), and a body refused by validation whose
     *     index can be read is recorded as seen and refused (not reported missing). The receiver
     *     keeps the native journal open [none]
     *
     * @throws ConfigurationException for an unusable setting (no token, a malformed one, ...)
     */
    public function __construct(
        string|array|null $tokens,
        string|array|null $sources = null,
        string|array|null $trustedProxies = null,
        ?int $maxBodyBytes = null,
        ?int $maxDepth = null,
        ?int $maxIdentifierBytes = null,
        ?string $indexField = null,
        ?bool $rejectUnknownEvents = null,
        ?string $balanceWrapper = null,
        ?string $balanceCurrency = null,
        ?bool $omitEmptyErrorMessage = null,
        ?bool $strictIndex = null,
        ?int $balanceFailureHttpStatus = null,
        ?Journal $journal = null,
    ) {
        $native = Native::get();
        $this->native = $native;
        $this->successes = new \ArrayObject();
        $this->journaled = $journal !== null;
        $ffi = $native->ffi;
        if ($tokens === null) {
            throw Native::wrongType('token', null); // "token: must be a string, not null", HTTP 500 as in C
        }
        // A blank string reaches the library as it is, which refuses it as it does in C.
        $tokenList = Native::listSetting($tokens, 'token') ?: (is_string($tokens) ? [$tokens] : []);
        $sourceList = $sources === null ? null : implode(',', Native::listSetting($sources, 'sources'));
        $proxyList = $trustedProxies === null ? null : implode(',', Native::listSetting($trustedProxies, 'trusted_proxies'));
        $configOut = $native->out('sp_receiver_config');
        $native->check($ffi->sp_receiver_config_new($configOut));
        $config = $configOut[0];
        try {
            foreach ($tokenList as $token) {
                $native->check($ffi->sp_receiver_config_add_token($config, Native::cString($token, 'token')));
            }
            if ($sourceList !== null) {
                $native->check($ffi->sp_receiver_config_set_sources($config, Native::cString($sourceList, 'sources')));
            }
            if ($proxyList !== null) {
                $native->check($ffi->sp_receiver_config_set_trusted_proxies($config, Native::cString($proxyList, 'trusted_proxies')));
            }
            if ($maxBodyBytes !== null) {
                $native->check($ffi->sp_receiver_config_set_max_body_bytes($config, Native::unsigned($maxBodyBytes, 'max_body_bytes')));
            }
            if ($maxDepth !== null) {
                $native->check($ffi->sp_receiver_config_set_max_depth($config, Native::unsigned($maxDepth, 'max_depth')));
            }
            if ($maxIdentifierBytes !== null) {
                $native->check($ffi->sp_receiver_config_set_max_identifier_bytes($config, Native::unsigned($maxIdentifierBytes, 'max_identifier_bytes')));
            }
            if ($indexField !== null) {
                $native->check($ffi->sp_receiver_config_set_index_field($config, Native::cString($indexField, 'index_field')));
            }
            if ($strictIndex !== null) {
                $native->check($ffi->sp_receiver_config_set_strict_index($config, $strictIndex));
            }
            if ($rejectUnknownEvents !== null) {
                $native->check($ffi->sp_receiver_config_set_reject_unknown_events($config, $rejectUnknownEvents));
            }
            if ($balanceWrapper !== null) {
                $native->check($ffi->sp_receiver_config_set_balance_wrapper($config, Native::cString($balanceWrapper, 'balance_wrapper')));
            }
            if ($balanceCurrency !== null) {
                $native->check($ffi->sp_receiver_config_set_balance_currency($config, Native::cString($balanceCurrency, 'balance_currency')));
            }
            if ($balanceFailureHttpStatus !== null) {
                // A uint16_t in C: refused here rather than wrapped (65736 would become 200).
                $native->check($ffi->sp_receiver_config_set_balance_failure_http_status($config, Native::unsigned($balanceFailureHttpStatus, 'balance_failure_http_status', 0xFFFF)));
            }
            if ($omitEmptyErrorMessage !== null) {
                $native->check($ffi->sp_receiver_config_set_omit_empty_error_message($config, $omitEmptyErrorMessage));
            }
            if ($journal !== null) {
                $native->check($ffi->sp_receiver_config_set_journal($config, $journal->handle()));
            }
            $receiverOut = $native->out('sp_receiver');
            $native->check($ffi->sp_receiver_new($config, $receiverOut));
            $this->handle = $receiverOut[0];
        } finally {
            $ffi->sp_receiver_config_free($config);
        }
    }

    /**
     * Handles one callback: checks the source address, then the token, then parses and
     * validates the body (one FFI call). Answer the returned event with its reply method.
     *
     * @param string|null $token the X-Service-Token header (null when absent); tokens are
     *     compared case-insensitively
     * @param string|null $remoteAddr the peer address ($_SERVER['REMOTE_ADDR']); not looked at
     *     under sources "any" (null or not an address is then fine)
     * @param string $body the raw request body (php://input)
     * @param string|null $forwardedFor the X-Forwarded-For header as received (bytes; null when
     *     absent): read only when $remoteAddr is a trusted proxy, ignored unread otherwise; from
     *     a trusted proxy, a value that is not UTF-8 is refused as a forbidden source (403)
     *
     * @throws AuthenticationException token missing or wrong (HTTP 401), source not allowed (403)
     * @throws ValidationException body or event refused (HTTP 413, 400, 200 with success false,
     *     or 500 with no balance stated for a balance query with an invalid field)
     */
    public function handle(?string $token, ?string $remoteAddr, string $body, ?string $forwardedFor = null): Event
    {
        $native = $this->native;
        // C sees a string up to its first NUL: `<token>\0junk` would pass as `<token>`. A NUL
        // becomes U+FFFD so that the library refuses the value with its usual answer. (Inline
        // checks: this is the per-callback path.)
        if ($token !== null && str_contains($token, "\0")) {
            $token = Native::withoutNul($token);
        }
        if ($remoteAddr !== null && str_contains($remoteAddr, "\0")) {
            $remoteAddr = Native::withoutNul($remoteAddr);
        }
        if ($forwardedFor !== null && str_contains($forwardedFor, "\0")) {
            $forwardedFor = Native::withoutNul($forwardedFor);
        }
        if ($this->journaled) {
            $status = $native->ffi->sp_receiver_handle(
                $this->handle,
                $token,
                $remoteAddr,
                $forwardedFor,
                $body,
                \strlen($body),
                $native->eventOut,
            );
            if ($status !== Status::OK) {
                throw $native->error($status);
            }
            return Event::adopt($native, $native->eventOut[0], $this->successes);
        }
        $status = $native->ffi->sp_receiver_handle_record(
            $this->handle,
            $token,
            $remoteAddr,
            $forwardedFor,
            $body,
            \strlen($body),
            $native->recordBuffer,
            $native->recordCapacity,
            $native->recordSize,
        );
        if ($status !== Status::OK) {
            // A record larger than the buffer (the size reported exceeds it; a size left from
            // an earlier call never does): grown, and the callback handled again (without a
            // journal, handling changes nothing).
            if ($status !== Status::INVALID_ARGUMENT || $native->recordSize[0] <= $native->recordCapacity) {
                throw $native->error($status);
            }
            $native->growRecord($native->recordSize[0]);
            return $this->handle($token, $remoteAddr, $body, $forwardedFor);
        }
        return Event::fromRecord($native, $this, $body, $this->successes);
    }

    /**
     * Checks the source address, then the token, as handle() does first, without a body: nothing
     * is parsed and no journal is touched (one FFI call, sp_receiver_authenticate). Call it before
     * opening a Journal, so that a caller without the token never makes the journal connect to
     * its storage; then handle the callback with a Receiver that has the journal. The arguments
     * are those of handle().
     *
     * ```php
     * $receiver->authenticate($_SERVER['HTTP_X_SERVICE_TOKEN'] ?? null, $_SERVER['REMOTE_ADDR'] ?? null);
     * $journaled = new Receiver(tokens: $token, journal: new Journal($url));   // only now
     * ```
     *
     * @throws AuthenticationException as handle() throws it for the same request: token missing
     *     or wrong (HTTP 401), source not allowed (403), with the same httpStatus and responseBody
     */
    public function authenticate(?string $token, ?string $remoteAddr, ?string $forwardedFor = null): void
    {
        $native = $this->native;
        if ($token !== null && str_contains($token, "\0")) {
            $token = Native::withoutNul($token);
        }
        if ($remoteAddr !== null && str_contains($remoteAddr, "\0")) {
            $remoteAddr = Native::withoutNul($remoteAddr);
        }
        if ($forwardedFor !== null && str_contains($forwardedFor, "\0")) {
            $forwardedFor = Native::withoutNul($forwardedFor);
        }
        $status = $native->ffi->sp_receiver_authenticate($this->handle, $token, $remoteAddr, $forwardedFor);
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
    }

    /**
     * Parses and validates a body without checking source or token (for tools and tests).
     *
     * @throws ValidationException
     */
    public function parse(string $body): Event
    {
        $native = $this->native;
        $status = $native->ffi->sp_receiver_parse($this->handle, $body, \strlen($body), $native->eventOut);
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
        return Event::adopt($native, $native->eventOut[0], $this->successes);
    }

    /**
     * The native event of $body, which this Receiver handled before into a record: the
     * `sp_event *` an event read from that record builds its replies in (the caller owns it).
     *
     * @internal Called by Event.
     */
    public function nativeEvent(string $body): CData
    {
        $native = $this->native;
        $native->check($native->ffi->sp_receiver_parse($this->handle, $body, \strlen($body), $native->eventOut));
        return $native->eventOut[0];
    }

    /**
     * The owned `sp_receiver *`, for Recovery.
     *
     * @internal
     */
    public function nativeHandle(): ?CData
    {
        return $this->handle;
    }

    public function __destruct()
    {
        $handle = $this->handle;
        if ($handle !== null) {
            $this->handle = null;
            $this->native->ffi->sp_receiver_free($handle);
        }
    }

    private function __clone()
    {
    }
}
