<?php

declare(strict_types=1);

namespace SlotPartner\HttpFoundation;

use SlotPartner\Endpoint;
use SlotPartner\Event;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;

/**
 * An Endpoint for Symfony HttpFoundation, and so for Laravel, whose Illuminate\Http\Request
 * extends Symfony's Request: a Request in, a Response out.
 *
 * The method is the request's real one (getRealMethod(): X-HTTP-Method-Override is not
 * followed); the peer address is $request->server->get('REMOTE_ADDR'), the address the web server
 * saw, not getClientIp(), which applies Symfony's own trusted proxies: the library alone decides
 * whether X-Forwarded-For is believed (the endpoint's trusted_proxies). The body is read up to
 * the endpoint's limit plus one byte. The log line, when there is one, goes to $log (error_log()
 * by default).
 *
 * Loaded only when used: symfony/http-foundation is needed then (composer.json "suggest").
 */
final class Adapter
{
    /** @var \Closure(string): mixed */
    private readonly \Closure $log;

    /** @param (callable(string): mixed)|null $log where the log line goes (default error_log) */
    public function __construct(private readonly Endpoint $endpoint, ?callable $log = null)
    {
        $this->log = $log === null ? static fn (string $line): bool => \error_log($line) : \Closure::fromCallable($log);
    }

    /** @param callable(Event): mixed $logic as for Endpoint::handle() */
    public function handle(Request $request, callable $logic): Response
    {
        $remoteAddr = $request->server->get('REMOTE_ADDR');
        $content = $request->getContent(true);
        $body = (string) \stream_get_contents($content, $this->endpoint->maxBodyBytes + 1);
        $answer = $this->endpoint->handle(
            $request->getRealMethod(),
            $request->headers->get('X-Service-Token'),
            \is_string($remoteAddr) ? $remoteAddr : null,
            $request->headers->get('X-Forwarded-For'),
            $body,
            $logic,
        );
        if ($answer->log !== '') {
            ($this->log)($answer->log);
        }
        return new Response($answer->body, $answer->status, $answer->headers);
    }
}
