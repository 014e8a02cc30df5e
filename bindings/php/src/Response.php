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
     * Copies an `sp_response` (the views it holds stay the exchange's). Each view's `->ptr` read
     * plainly into a variable, as Native::text() reads it, but without a call a view: this runs
     * once a request (the calls and the header array's pointer read again at each header cost
     * it about 1,500 instructions).
     *
     * @internal Called by Endpoint.
     */
    public static function copy(CData $response): self
    {
        $headers = [];
        $count = $response->headers_len;
        if ($count > 0) {
            $list = $response->headers;
            for ($i = 0; $i < $count; ++$i) {
                $header = $list[$i];
                $name = $header->name->ptr;
                $value = $header->value->ptr;
                $headers[$name ?? ''] = $value ?? '';
            }
        }
        $body = $response->body->ptr;
        $log = $response->log->ptr;
        return new self($response->status, $headers, $body ?? '', $log ?? '');
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
