<?php

declare(strict_types=1);

/*
 * library.php: bindings/php/examples/callback.php as the end-to-end benchmark runs it (make
 * bench-e2e): the same flow through the binding and the journal, request for request (a receiver
 * without a journal checks the source and token, then the journal is opened and a receiver with
 * it handles, claims, runs the logic and finishes), with two changes:
 *
 *   - the ledger is a table in the journal's own database (`credits`, keyed by kind and
 *     transactionId; benches/e2e/db.php creates it) instead of the example's directory of files,
 *     and its credit is staged on the claim (Event::stage(): a plain INSERT with the journal's
 *     placeholders, $1..$4 on PostgreSQL, ? on SQLite) rather than written through a connection
 *     of this script's: finish() runs it in the transaction that stores the reply, after
 *     confirming the claim, so the credit and the reply commit together with one durable
 *     commit, or neither (a second credit for a key would fail that finish(), never pass
 *     unseen). No PDO connection: the journal's pooled one does all the writing. A
 *     finish() that fails (a staged statement refused, the storage down, the claim lost) credited
 *     nothing: the claim is released (abandon(), unless it was lost already) and the answer is
 *     503 with the ledger_unavailable body and Retry-After, so that the service delivers again.
 *     Since everything the logic does is staged, the journal is opened with claimAtFinish: the
 *     claim is written by finish() with the credit and the reply, one commit a delivery, as
 *     the hand-written integration's one transaction; two deliveries of one key at once both
 *     run the logic, and the second finish() credits nothing: it returns when the first stored
 *     the very same reply, else throws ClaimLostException (503);
 *   - the demo's line per event on stderr is left out (benches/e2e/handwritten.php logs none
 *     either); refusals and failures are still logged.
 *
 * Configuration (the FastCGI parameters nginx passes, read with getenv() as the example reads
 * its environment): SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL as in the
 * example, the journal required (sqlite:PATH or postgres://...: the ledger's database too).
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\ClaimLostException;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;
use SlotPartner\Journal;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\SlotPartnerException;

require __DIR__ . '/steps.php';   // E2E_STEPS=1: the worker's CPU by step (no-op otherwise)
require dirname(__DIR__, 2) . '/bindings/php/autoload.php';
step('autoload');

const MAX_BODY_BYTES = 65536;
const LEDGER_DOWN = '{"error":{"code":"ledger_unavailable","field":"","message":"the ledger is unavailable; deliver again later"}}';

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

/**
 * The example's business logic, its credit staged on the claim: $credit is the ledger's INSERT in
 * the journal database's dialect, run by finish() with the reply.
 */
function handleEvent(Event $event, string $credit): string
{
    if ($event instanceof BuyRefund) {
        $event->stage($credit, ['refund', $event->transactionId, $event->playerPartnerIdentifier ?? $event->playerIdentifier, 0]);
        return $event->reply(true);
    }
    if ($event instanceof JackpotPayout) {
        $event->stage($credit, ['payout', $event->transactionId, $event->playerPartnerIdentifier ?? $event->playerIdentifier, $event->moneyWon]);
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
if ($journalUrl === '') {
    // The credit is staged on the journal's claim: no journal, no ledger.
    logLine('configuration: SLOTPARTNER_JOURNAL is not set (the ledger lives in the journal\'s database)');
    respond(500, '{"error":{"code":"internal_error","field":"","message":"the endpoint is not configured"}}');
    return;
}
// The ledger's credit in the journal database's own dialect, a no-op on a credit made before
// (the README: a statement that ended the journal's transaction never credits twice).
$credit = 'INSERT INTO credits (kind, transaction_id, player, amount) VALUES '
    . (str_starts_with($journalUrl, 'postgres') ? '($1, $2, $3, $4)' : '(?, ?, ?, ?)')
    . ' ON CONFLICT (kind, transaction_id) DO NOTHING';
try {
    $receiver = makeReceiver();
    step('receiver');
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
step('authenticate');
try {
    $receiver = makeReceiver(new Journal($journalUrl, claimAtFinish: true));
} catch (SlotPartnerException $e) {
    logLine('journal: ' . $e->getMessage());
    respondError($e);
    return;
}
step('journal');
try {
    $event = $receiver->handle($token, $remoteAddr, $body, $forwardedFor);
} catch (SlotPartnerException $e) {
    logLine('refused: ' . $e->getMessage());
    respondError($e);
    return;
}
step('handle');
try {
    $claim = $event->begin();
} catch (SlotPartnerException $e) {
    logLine('journal: ' . $e->getMessage());
    respondError($e);
    return;
}
step('begin');
if ($claim->outcome === Outcome::Done) {
    respond(200, (string) $claim->reply);
    return;
}
try {
    $reply = handleEvent($event, $credit);
} catch (SlotPartnerException $e) {
    logLine('reply: ' . $e->getMessage());
    respondError($e);
    return;
}
step('logic');
if ($claim->outcome === Outcome::New) {
    try {
        $event->finish();   // the staged credit, then the reply: one transaction
    } catch (SlotPartnerException $e) {
        // Nothing was stored and no credit made: the service delivers again.
        logLine('journal finish: ' . $e->getMessage());
        if (!$e instanceof ClaimLostException) {   // a lost claim is no longer this delivery's to release
            try {
                $event->abandon();
            } catch (SlotPartnerException $e) {
                logLine('journal abandon: ' . $e->getMessage());   // the claim ends with its lease
            }
        }
        respond(503, LEDGER_DOWN, 'Retry-After: 5');
        return;
    }
}
step('finish');
respond($event->replyHttpStatus(), $reply);
