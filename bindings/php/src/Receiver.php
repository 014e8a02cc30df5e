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
 */
final class Receiver
{
    /** The owned `sp_receiver *`. */
    private ?CData $handle = null;

    private readonly Native $native;

    /**
     * Settings left null keep the library's default (shown in brackets).
     *
     * @param string|list<string>|null $tokens the partner token (a UUID) the service sends in
     *     X-Service-Token; two during a rotation. Null (an unset environment variable) is
     *     refused by the library like an empty list, naming the field `token`
     * @param string $sources "any", or a comma-separated list of "staging", "production" (the
     *     spec's addresses), IPv4/IPv6 addresses and CIDR ranges
     * @param string|null $trustedProxies comma-separated addresses and ranges whose
     *     X-Forwarded-For is believed [none]
     * @param int|null $maxBodyBytes largest body accepted [65536]
     * @param int|null $maxDepth deepest nesting accepted, 1 to 100, top-level object = 1 [32]
     * @param int|null $maxIdentifierBytes longest identifier or code accepted [256]
     * @param string|null $indexField name of the service's event index field ["index"]
     * @param bool $strictIndex refuse an event whose index field is present but not a
     *     non-negative integer ("42", -1, 1.5), naming the field (ValidationException, HTTP 200
     *     with the event's wrapper and success false) [false: such an event is handled with
     *     $index null and $indexUnreadable true, the raw value in $extra]
     * @param bool $rejectUnknownEvents refuse events other than the three known ones
     *     (ValidationException, HTTP 400) instead of passing them through as OtherEvent
     * @param string|null $balanceWrapper wrapper key of balance replies ["playerBalance"]
     * @param string|null $balanceCurrency currency of balance replies when none is named ["EUR"]
     * @param bool $omitEmptyErrorMessage leave `errorMessage` out of successful replies instead
     *     of sending ""
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
        string $sources = 'production',
        ?string $trustedProxies = null,
        ?int $maxBodyBytes = null,
        ?int $maxDepth = null,
        ?int $maxIdentifierBytes = null,
        ?string $indexField = null,
        bool $rejectUnknownEvents = false,
        ?string $balanceWrapper = null,
        ?string $balanceCurrency = null,
        bool $omitEmptyErrorMessage = false,
        bool $strictIndex = false,
        ?int $balanceFailureHttpStatus = null,
        ?Journal $journal = null,
    ) {
        $native = Native::get();
        $this->native = $native;
        $ffi = $native->ffi;
        $configOut = $native->out('sp_receiver_config');
        $native->check($ffi->sp_receiver_config_new($configOut));
        $config = $configOut[0];
        try {
            foreach (is_array($tokens) ? $tokens : [$tokens] as $token) {
                // A null token reaches the library, which refuses it ("token: must not be NULL").
                $native->check($ffi->sp_receiver_config_add_token($config, Native::cString($token, 'token')));
            }
            $native->check($ffi->sp_receiver_config_set_sources($config, Native::cString($sources, 'sources')));
            if ($trustedProxies !== null) {
                $native->check($ffi->sp_receiver_config_set_trusted_proxies($config, Native::cString($trustedProxies, 'trusted_proxies')));
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
            $native->check($ffi->sp_receiver_config_set_strict_index($config, $strictIndex));
            $native->check($ffi->sp_receiver_config_set_reject_unknown_events($config, $rejectUnknownEvents));
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
            $native->check($ffi->sp_receiver_config_set_omit_empty_error_message($config, $omitEmptyErrorMessage));
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
        return Event::adopt($native, $native->eventOut[0]);
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
        return Event::adopt($native, $native->eventOut[0]);
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
