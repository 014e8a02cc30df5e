<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * A client of the service (sp_client): getGames and any other action, over HTTPS.
 *
 * Immutable; keeps connections alive between calls: build one per process and reuse it. The
 * native client is freed when this object is destroyed; every answer is copied into PHP values
 * and its native memory freed before the method returns. Calls block for up to the time-out
 * (times the tries for getGames). Not cloneable.
 */
final class Client
{
    /** The library's retry defaults (sp_client_config_new), for the one of $retries and $retryBackoffMs left null. */
    private const DEFAULT_RETRIES = 2;
    private const DEFAULT_RETRY_BACKOFF_MS = 200;

    /** The owned `sp_client *`. */
    private ?CData $handle = null;

    private readonly Native $native;

    /**
     * Every setting after $token is optional: null (the default) keeps the library's default,
     * shown in brackets. The environment (HTTPS_PROXY, SSL_CERT_FILE, ...) is never consulted.
     *
     * @param string $baseUrl the service's address, https:// only (the token must not travel in clear)
     * @param string $token the partner token (a UUID), sent as X-Service-Token
     * @param string|null $caFile a PEM file of CA certificates to trust as well [none]
     * @param string|null $caPem PEM text of CA certificates to trust as well [none]
     * @param int|null $connectTimeoutMs time to open a connection, TCP and TLS, at least 1 [5000]
     * @param int|null $timeoutMs time for a whole call, answer included, at least 1 [15000]
     * @param int|null $retries how often getGames and Recovery's fetches are tried again (0 to
     *     10) after a connection failure, a time-out or a 5xx answer [2]; call() is never retried
     * @param int|null $retryBackoffMs first wait before a retry, doubled each time; 0 for none
     *     [200]
     * @param TrustRoots|null $trustRoots roots trusted besides $caFile/$caPem [Bundled]
     * @param string|null $proxy `http://host:port` or `socks5://host:port`, optional
     *     `user:password@` [a direct connection]
     * @param int|null $maxResponseBytes largest answer accepted, at least 1024 [8 MiB]
     * @param bool|null $lenientGames give a game missing a field of spec 2.1 the field's empty
     *     value instead of failing the call [false]
     * @param string|null $fetchAction the operation that fetches a lost event again (Recovery)
     *     ["getEvent"]
     * @param string|null $fetchIndexParam the parameter carrying the lost event's index ["index"]
     * @param string|null $fetchEventKey the key of the answer holding the event ["event", for
     *     `{"event":{...}}`; '' when the answer is the event itself]. The spec says a lost event
     *     "can be obtained later through the partner-to-service interface by giving the id of
     *     the lost event" but shows neither the operation, nor its parameter, nor its answer: the
     *     three defaults are assumptions (the sandbox's), so the request is
     *     `{"action":"getEvent","index":42}` answered `{"event":{...}}`. A fetch is retried like
     *     getGames; a 404 answer means the service knows no such event
     *
     * @throws ConfigurationException
     */
    public function __construct(
        string $baseUrl,
        string $token,
        ?string $caFile = null,
        ?string $caPem = null,
        ?int $connectTimeoutMs = null,
        ?int $timeoutMs = null,
        ?int $retries = null,
        ?int $retryBackoffMs = null,
        ?TrustRoots $trustRoots = null,
        ?string $proxy = null,
        ?int $maxResponseBytes = null,
        ?bool $lenientGames = null,
        ?string $fetchAction = null,
        ?string $fetchIndexParam = null,
        ?string $fetchEventKey = null,
    ) {
        $native = Native::get();
        $this->native = $native;
        $ffi = $native->ffi;
        $configOut = $native->out('sp_client_config');
        $native->check($ffi->sp_client_config_new(Native::cString($baseUrl, 'base_url'), Native::cString($token, 'token'), $configOut));
        $config = $configOut[0];
        try {
            if ($caFile !== null) {
                $native->check($ffi->sp_client_config_add_ca_file($config, Native::cString($caFile, 'ca_file')));
            }
            if ($caPem !== null) {
                $native->check($ffi->sp_client_config_add_ca_pem($config, $caPem, \strlen($caPem)));
            }
            if ($connectTimeoutMs !== null) {
                $native->check($ffi->sp_client_config_set_connect_timeout_ms($config, Native::unsigned($connectTimeoutMs, 'connect_timeout_ms')));
            }
            if ($timeoutMs !== null) {
                $native->check($ffi->sp_client_config_set_timeout_ms($config, Native::unsigned($timeoutMs, 'timeout_ms')));
            }
            if ($retries !== null || $retryBackoffMs !== null) {
                // One C setter takes both: the one left null keeps the library's default.
                $native->check($ffi->sp_client_config_set_retries(
                    $config,
                    Native::unsigned($retries ?? self::DEFAULT_RETRIES, 'retries', 0xFFFFFFFF),
                    Native::unsigned($retryBackoffMs ?? self::DEFAULT_RETRY_BACKOFF_MS, 'backoff_ms'),
                ));
            }
            if ($trustRoots !== null) {
                $native->check($ffi->sp_client_config_set_trust_roots($config, $trustRoots->value));
            }
            if ($proxy !== null) {
                $native->check($ffi->sp_client_config_set_proxy($config, Native::cString($proxy, 'proxy')));
            }
            if ($maxResponseBytes !== null) {
                $native->check($ffi->sp_client_config_set_max_response_bytes($config, Native::unsigned($maxResponseBytes, 'max_response_bytes')));
            }
            if ($lenientGames !== null) {
                $native->check($ffi->sp_client_config_set_lenient_games($config, $lenientGames));
            }
            if ($fetchAction !== null) {
                $native->check($ffi->sp_client_config_set_fetch_action($config, Native::cString($fetchAction, 'fetch_action')));
            }
            if ($fetchIndexParam !== null) {
                $native->check($ffi->sp_client_config_set_fetch_index_param($config, Native::cString($fetchIndexParam, 'fetch_index_param')));
            }
            if ($fetchEventKey !== null) {
                $native->check($ffi->sp_client_config_set_fetch_event_key($config, Native::cString($fetchEventKey, 'fetch_event_key')));
            }
            $clientOut = $native->out('sp_client');
            $native->check($ffi->sp_client_new($config, $clientOut));
            $this->handle = $clientOut[0];
        } finally {
            $ffi->sp_client_config_free($config);
        }
    }

    /**
     * getGames in $locale ("en-US"; "en_US" is sent as "en-US"), for the game $gameId or for
     * all games when null. An unknown id gives [].
     *
     * @return list<Game>
     *
     * @throws ServiceException the service answered another HTTP status (in the message) or a
     *     malformed answer
     * @throws TransportException connection, time-out, TLS, answer too large
     * @throws ConfigurationException a malformed locale or a negative game id
     */
    public function getGames(string $locale, ?int $gameId = null): array
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $out = $native->out('sp_games');
        $native->check($ffi->sp_client_get_games(
            $this->handle,
            Native::cString($locale, 'locale'),
            $gameId === null ? -1 : Native::unsigned($gameId, 'game_id'),
            $out,
        ));
        $games = $out[0];
        try {
            $list = [];
            $count = $games->len;
            for ($i = 0; $i < $count; $i++) {
                $list[] = Game::fromNative($games->games[$i]);
            }
            return $list;
        } finally {
            $ffi->sp_games_free($games);
        }
    }

    /**
     * Calls any $action with $params (sent as `{"action":<action>, ...params}`): how to reach
     * operations the spec does not show. Not retried: an action may not be safe to repeat.
     * Returns the decoded JSON answer.
     *
     * @param array<string, mixed> $params
     *
     * @return array<mixed>
     *
     * @throws ServiceException also when the answer is not a JSON object or array
     * @throws TransportException
     * @throws ConfigurationException
     */
    public function call(string $action, array $params = []): array
    {
        $native = $this->native;
        $ffi = $native->ffi;
        $json = $params === [] ? null : json_encode($params, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION);
        $out = $native->out('sp_buffer');
        $native->check($ffi->sp_client_call(
            $this->handle,
            Native::cString($action, 'action'),
            $json,
            $json === null ? 0 : \strlen($json),
            $out,
        ));
        $buffer = $out[0];
        try {
            $text = Native::text($buffer->text);
        } finally {
            $ffi->sp_buffer_free($buffer);
        }
        try {
            $answer = json_decode($text, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        } catch (\JsonException $e) {
            throw new ServiceException($action . ': the answer is not JSON: ' . $e->getMessage(), Status::BAD_RESPONSE, 'SP_ERR_BAD_RESPONSE', $action);
        }
        if (!is_array($answer)) {
            throw new ServiceException($action . ': the answer is not a JSON object', Status::BAD_RESPONSE, 'SP_ERR_BAD_RESPONSE', $action);
        }
        return $answer;
    }

    /**
     * The owned `sp_client *`, for Recovery.
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
            $this->native->ffi->sp_client_free($handle);
        }
    }

    private function __clone()
    {
    }
}
