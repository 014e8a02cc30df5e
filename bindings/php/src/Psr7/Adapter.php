<?php

declare(strict_types=1);

namespace SlotPartner\Psr7;

use Psr\Http\Message\ResponseFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\StreamFactoryInterface;
use SlotPartner\Endpoint;
use SlotPartner\Event;

/**
 * An Endpoint for frameworks speaking PSR-7 (Slim, Mezzio, any PSR-15 stack): a
 * ServerRequestInterface in, a ResponseInterface out, made with the PSR-17 factories given (one
 * object is usually both: Nyholm\Psr7\Factory\Psr17Factory, GuzzleHttp\Psr7\HttpFactory).
 *
 * The peer address is the server parameter REMOTE_ADDR (getServerParams()), the address the web
 * server saw: the library alone decides whether X-Forwarded-For is believed (the endpoint's
 * trusted_proxies). The body is read up to the endpoint's limit plus one byte. The log line,
 * when there is one, goes to $log (error_log() by default).
 *
 * Loaded only when used: the PSR interfaces are needed then (composer.json "suggest").
 */
final class Adapter
{
    /** @var \Closure(string): mixed */
    private readonly \Closure $log;

    /** @param (callable(string): mixed)|null $log where the log line goes (default error_log) */
    public function __construct(
        private readonly Endpoint $endpoint,
        private readonly ResponseFactoryInterface $responses,
        private readonly StreamFactoryInterface $streams,
        ?callable $log = null,
    ) {
        $this->log = $log === null ? static fn (string $line): bool => \error_log($line) : \Closure::fromCallable($log);
    }

    /** @param callable(Event): mixed $logic as for Endpoint::handle() */
    public function handle(ServerRequestInterface $request, callable $logic): ResponseInterface
    {
        $remoteAddr = $request->getServerParams()['REMOTE_ADDR'] ?? null;
        $answer = $this->endpoint->handle(
            $request->getMethod(),
            $request->hasHeader('X-Service-Token') ? $request->getHeaderLine('X-Service-Token') : null,
            \is_string($remoteAddr) ? $remoteAddr : null,
            $request->hasHeader('X-Forwarded-For') ? $request->getHeaderLine('X-Forwarded-For') : null,
            self::body($request, $this->endpoint->maxBodyBytes + 1),
            $logic,
        );
        if ($answer->log !== '') {
            ($this->log)($answer->log);
        }
        $response = $this->responses->createResponse($answer->status)->withBody($this->streams->createStream($answer->body));
        foreach ($answer->headers as $name => $value) {
            $response = $response->withHeader($name, $value);
        }
        return $response;
    }

    /** The first $limit bytes of the request's body, from its start. */
    private static function body(ServerRequestInterface $request, int $limit): string
    {
        $stream = $request->getBody();
        if ($stream->isSeekable()) {
            $stream->rewind();
        }
        $body = '';
        while (\strlen($body) < $limit && !$stream->eof()) {
            $chunk = $stream->read($limit - \strlen($body));
            if ($chunk === '') {
                break;
            }
            $body .= $chunk;
        }
        return $body;
    }
}
