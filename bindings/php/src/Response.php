<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * The final answer of one request through an Endpoint: what to send (status, headers, body) and
 * one line for the host's log, never sent. Immutable, plain PHP values copied from the library:
 * valid whatever happens to the exchange they came from.
 */
final class Response
{
    /**
     * @param int $status the HTTP status: 200, or the refusal's (400, 401, 403, 405, 409, 413,
     *     500, 503)
     * @param array<string, string> $headers name => value: `Content-Type` always, `Retry-After`
     *     on a 503, `Allow` on a 405
     * @param string $body the JSON body, byte for byte (a repeat's is the first reply's bytes)
     * @param string $log a line for the host's log (a refusal and why, a repeat, a failure with
     *     its cause), '' when there is nothing to say
     */
    public function __construct(
        public readonly int $status,
        public readonly array $headers,
        public readonly string $body,
        public readonly string $log,
    ) {
    }

    /**
     * Copies an `sp_response` (the views it holds stay the exchange's).
     *
     * @internal Called by Endpoint.
     */
    public static function copy(CData $response): self
    {
        $headers = [];
        for ($i = 0, $count = $response->headers_len; $i < $count; ++$i) {
            $header = $response->headers[$i];
            $headers[Native::text($header->name)] = Native::text($header->value);
        }
        return new self($response->status, $headers, Native::text($response->body), Native::text($response->log));
    }

    /**
     * The answer to a failure the library reported instead of a response (a setting it refused):
     * its HTTP status and JSON body, which name nothing of the setting, and its message for the
     * log, between $context and $hint.
     *
     * @internal Called by Endpoint.
     */
    public static function ofError(SlotPartnerException $e, string $context, string $hint = ''): self
    {
        return new self(
            $e->httpStatus ?? 500,
            ['Content-Type' => 'application/json; charset=utf-8'],
            $e->responseBody ?? '{"error":{"code":"internal_error","field":"","message":"no error recorded"}}',
            $context . $e->getMessage() . $hint,
        );
    }

    /**
     * Sends status, headers and body through PHP's SAPI (PHP-FPM, php -S); the log line is not
     * sent (Endpoint::serve() writes it with error_log()).
     */
    public function send(): void
    {
        http_response_code($this->status);
        header_remove('X-Powered-By');
        foreach ($this->headers as $name => $value) {
            header($name . ': ' . $value);
        }
        echo $this->body;
    }
}
