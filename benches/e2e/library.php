<?php

declare(strict_types=1);

/*
 * library.php: bindings/php/examples/callback.php as the end-to-end benchmark runs it (make
 * bench-e2e): the same flow through the binding and the journal, request for request (a receiver
 * without a journal checks the source and token, then the journal is opened and a receiver with
 * it handles, claims, runs the logic and finishes), with two changes:
 *
 *   - the ledger is a table in the journal's own database, written through PDO (a persistent
 *     connection, a prepared INSERT ... ON CONFLICT DO NOTHING keyed by kind and transactionId,
 *     one transaction of its own: the journal's claim and finish are the library's) instead of
 *     the example's directory of files;
 *   - the demo's line per event on stderr is left out (benches/e2e/handwritten.php logs none
 *     either); refusals and failures are still logged.
 *
 * Configuration (the FastCGI parameters nginx passes, read with getenv() as the example reads
 * its environment): SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL as in the
 * example; E2E_LEDGER_DSN, the PDO DSN of the ledger's database (sqlite:PATH, the journal's
 * file; or pgsql:host=...;port=...;dbname=..., the journal's database), E2E_LEDGER_USER.
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;
use SlotPartner\Journal;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\SlotPartnerException;

require dirname(__DIR__, 2) . '/bindings/php/autoload.php';

const MAX_BODY_BYTES = 65536;
const LEDGER_DOWN = '{"error":{"code":"ledger_unavailable","field":"","message":"the ledger is unavailable; deliver again later"}}';

final class LedgerDown extends RuntimeException
{
}

function respond(int $status, string $body, ?string $extraHeader = null): void
{
    http_response_code($status);
    header_remove('X-Powered-By');
    if ($extraHeader !== null) {
        header($extraHeader);
    }
    header('Content-Type: application/json; charset=utf-8');
    echo $body;
}

function respondError(SlotPartnerException $e): void
{
    if ($e->httpStatus === null || $e->responseBody === null) {
        respond(500, '{"error":{"code":"internal_error","field":"","message":"no error recorded"}}');
        return;
    }
    respond($e->httpStatus, $e->responseBody);
}

function logLine(string $line): void
{
    error_log('library.php: ' . $line);
}

/** The ledger's persistent connection (one per PHP-FPM worker and DSN). */
function ledger(): PDO
{
    $dsn = (string) getenv('E2E_LEDGER_DSN');
    $user = getenv('E2E_LEDGER_USER');
    $options = [PDO::ATTR_PERSISTENT => true, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION];
    if (str_starts_with($dsn, 'pgsql:')) {
        $options[PDO::PGSQL_ATTR_DISABLE_PREPARES] = true;   // one round trip a statement
    }
    $pdo = new PDO($dsn, $user === false ? null : $user, null, $options);
    if (str_starts_with($dsn, 'sqlite:')) {
        $pdo->exec('PRAGMA synchronous = FULL');   // per connection; WAL mode is the file's
        $pdo->setAttribute(PDO::ATTR_TIMEOUT, 5);
    }
    return $pdo;
}

/**
 * The ledger: credits $amount for $kind/$transactionId once (the unique key refuses a second
 * credit, such as a delivery run again after its worker died between the credit and finish()).
 */
function credit(string $kind, int $transactionId, string $player, int $amount): void
{
    try {
        ledger()->prepare('INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
            ->execute([$kind, $transactionId, $player, $amount]);
    } catch (PDOException $e) {
        throw new LedgerDown($e->getMessage());
    }
}

/** The example's business logic, crediting through the ledger table. */
function handleEvent(Event $event): string
{
    if ($event instanceof BuyRefund) {
        credit('refund', $event->transactionId, $event->playerPartnerIdentifier ?? $event->playerIdentifier, 0);
        return $event->reply(true);
    }
    if ($event instanceof JackpotPayout) {
        credit('payout', $event->transactionId, $event->playerPartnerIdentifier ?? $event->playerIdentifier, $event->moneyWon);
        return $event->reply(true);
    }
    if ($event instanceof BalanceQuery) {
        $player = $event->playerPartnerIdentifier ?? $event->playerIdentifier;
        if ($player === 'unknown-player') {
            return $event->reply(false, 'player unknown-player is not known');
        }
        return $event->replyBalance(100000, null, 0);
    }
    return $event->reply(false, 'unsupported event');
}

function readBody(): ?string
{
    $lengthText = $_SERVER['CONTENT_LENGTH'] ?? $_SERVER['HTTP_CONTENT_LENGTH'] ?? '';
    $length = 0;
    if ($lengthText !== '') {
        if (preg_match('/^[ \t\n\v\f\r]*\+?[0-9]+$/D', $lengthText) !== 1) {
            return null;
        }
        $length = (int) ltrim($lengthText, " \t\n\v\f\r+");
    }
    $wanted = min($length, MAX_BODY_BYTES + 1);
    $body = $wanted === 0 ? '' : file_get_contents('php://input', false, null, 0, $wanted);
    if ($body === false || strlen($body) < $wanted) {
        return null;
    }
    return $body;
}

if (($_SERVER['REQUEST_METHOD'] ?? '') !== 'POST') {
    respond(405, '{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}', 'Allow: POST');
    return;
}

function makeReceiver(?Journal $journal = null): Receiver
{
    $token = getenv('SLOTPARTNER_TOKEN');
    $sources = getenv('SLOTPARTNER_SOURCES');
    $proxies = getenv('SLOTPARTNER_TRUSTED_PROXIES');
    return new Receiver(
        tokens: $token === false ? null : $token,
        sources: $sources === false ? 'production' : $sources,
        trustedProxies: $proxies === false ? null : $proxies,
        maxBodyBytes: MAX_BODY_BYTES,
        rejectUnknownEvents: true,
        strictIndex: getenv('SLOTPARTNER_STRICT_INDEX') === '1',
        journal: $journal,
    );
}

$journalUrl = (string) getenv('SLOTPARTNER_JOURNAL');
$journal = null;
try {
    $receiver = makeReceiver();
} catch (SlotPartnerException $e) {
    logLine('configuration: ' . $e->getMessage());
    respondError($e);
    return;
}

$body = readBody();
if ($body === null) {
    respond(400, '{"error":{"code":"bad_request","field":"CONTENT_LENGTH","message":"CONTENT_LENGTH is invalid or the body is shorter"}}');
    return;
}

$token = $_SERVER['HTTP_X_SERVICE_TOKEN'] ?? null;
$remoteAddr = $_SERVER['REMOTE_ADDR'] ?? null;
$forwardedFor = $_SERVER['HTTP_X_FORWARDED_FOR'] ?? null;
try {
    $receiver->authenticate($token, $remoteAddr, $forwardedFor);
} catch (SlotPartnerException $e) {
    logLine('refused: ' . $e->getMessage());
    respondError($e);
    return;
}
if ($journalUrl !== '') {
    try {
        $journal = new Journal($journalUrl);
        $receiver = makeReceiver($journal);
    } catch (SlotPartnerException $e) {
        logLine('journal: ' . $e->getMessage());
        respondError($e);
        return;
    }
}
try {
    $event = $receiver->handle($token, $remoteAddr, $body, $forwardedFor);
} catch (SlotPartnerException $e) {
    logLine('refused: ' . $e->getMessage());
    respondError($e);
    return;
}
if ($journal !== null) {
    try {
        $claim = $event->begin();
    } catch (SlotPartnerException $e) {
        logLine('journal: ' . $e->getMessage());
        respondError($e);
        return;
    }
    if ($claim->outcome === Outcome::Done) {
        respond(200, (string) $claim->reply);
        return;
    }
}
try {
    $reply = handleEvent($event);
} catch (SlotPartnerException $e) {
    logLine('reply: ' . $e->getMessage());
    respondError($e);
    return;
} catch (LedgerDown $e) {
    logLine('ledger: ' . $e->getMessage());
    if ($journal !== null) {
        try {
            $event->abandon();
        } catch (SlotPartnerException $e) {
            logLine('journal abandon: ' . $e->getMessage());
        }
    }
    respond(503, LEDGER_DOWN, 'Retry-After: 5');
    return;
}
if ($journal !== null) {
    try {
        $event->finish();
    } catch (SlotPartnerException $e) {
        logLine('journal finish: ' . $e->getMessage());
    }
}
respond($event->replyHttpStatus(), $reply);
