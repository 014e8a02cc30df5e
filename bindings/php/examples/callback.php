<?php

declare(strict_types=1);

/*
 * callback.php: a complete endpoint for the service's callbacks, answering exactly like
 * examples/c/callback_cgi.c (same statuses, same JSON bodies).
 *
 *   SLOTPARTNER_TOKEN=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f SLOTPARTNER_SOURCES=127.0.0.1 \
 *     php -d ffi.enable=1 -S 127.0.0.1:8080 bindings/php/examples/callback.php
 *
 * (php -S is the cli-server SAPI: under the default ffi.enable=preload FFI works there only
 * with preloading, `-d opcache.preload=bindings/php/preload.php`, see README.md.)
 *
 * Configuration (environment):
 *   SLOTPARTNER_TOKEN    the partner token the service sends in X-Service-Token (a UUID)
 *   SLOTPARTNER_SOURCES  staging, production, any, or a comma-separated list of addresses
 *                        and CIDR ranges (default: production)
 *   SLOTPARTNER_TRUSTED_PROXIES  proxies whose X-Forwarded-For is believed (default: none)
 *   SLOTPARTNER_STRICT_INDEX     1 to refuse an event whose index is not a non-negative integer
 *                                (default: handle it with no index)
 *   SLOTPARTNER_JOURNAL  a delivery journal (sqlite:PATH, or postgres://... across hosts): each
 *                        refund and payout is handled once, a repeated delivery is answered with
 *                        the first reply byte for byte, and a refused one is recorded as seen
 *   SLOTPARTNER_WALLET   a directory standing in for the partner's ledger: one file per credited
 *                        transaction, created only if absent, so a transactionId is never
 *                        credited twice (the unique key exactly-once needs across a crash)
 *   SLOTPARTNER_LIB      the library file (default: the checkout's target/release build)
 *
 * Answers: 405 for a method other than POST; 401 for a missing or wrong token; 403 for a source
 * not allowed; 413 for a body over the limit; 400 with a JSON error body for a body that is not
 * JSON, not an object, or names an unknown event; 200 with the event's wrapper, success false and
 * the field-naming errorMessage for a known event with invalid fields; 200 with success true for
 * a valid event; a refused balance query is answered 500 with a body that states no balance.
 * Replies are sent with the status the event gives ($event->replyHttpStatus()); X-Forwarded-For
 * is passed on as received. The demo business logic accepts every valid event (but knows no
 * player called "unknown-player") and logs one line per event to stderr, and one for its index;
 * replace handleEvent() with yours.
 *
 * With SLOTPARTNER_JOURNAL set, every valid event is claimed first ($event->begin()): a repeated
 * delivery is answered 200 with the stored reply and runs nothing (logged "repeated delivery
 * answered from the journal"); a new one runs the logic, then $event->finish() stores its reply; a
 * conflict (same transactionId, other content) is answered 409, a busy claim or a journal that
 * fails 503, each with the library's answer. When the ledger (SLOTPARTNER_WALLET) fails, the claim
 * is abandoned and the answer is 503 with Retry-After: 5, so that the service delivers again.
 * Without it, the answers are the ones above, unchanged. The source and token are checked
 * ($receiver->authenticate()) before the journal is opened: a request refused there is answered
 * 401 or 403 as without a journal and never makes it connect. A journal that cannot be opened
 * (its server down) is answered 503 with a body that names nothing of it (its URL is in the log
 * line only); the next request tries again.
 *
 * A configuration that is refused is logged and answered 500 with the error's JSON body; without
 * SLOTPARTNER_TOKEN the log line reads "configuration: token: must be a string, not null (is
 * SLOTPARTNER_TOKEN set?)".
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;
use SlotPartner\Journal;
use SlotPartner\Outcome;
use SlotPartner\Receiver;
use SlotPartner\SlotPartnerException;

$package = dirname(__DIR__);
require is_file($package . '/vendor/autoload.php') ? $package . '/vendor/autoload.php' : $package . '/autoload.php';

const MAX_BODY_BYTES = 65536;
const LEDGER_DOWN = '{"error":{"code":"ledger_unavailable","field":"","message":"the ledger is unavailable; deliver again later"}}';

/** The demo ledger failed (a transient failure of the partner's own store). */
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

/** Answers with what the library says the failure deserves (status and JSON body). */
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
    file_put_contents('php://stderr', 'callback.php: ' . $line . "\n");
}

/**
 * The demo ledger: credits $amount for $kind/$transactionId once. The file is created only if
 * absent (fopen mode "x"), the ledger's unique key: a second credit of the same transaction, such
 * as a delivery run again after its worker died between the credit and finish(), finds it and
 * changes nothing. Throws LedgerDown when the ledger fails.
 */
function credit(?string $wallet, string $kind, int $transactionId, int $amount): void
{
    if ($wallet === null || $wallet === '') {
        return;
    }
    $path = $wallet . '/' . $kind . '-' . $transactionId;
    $file = @fopen($path, 'x');
    if ($file === false) {
        if (file_exists($path)) {
            return; // credited before: the unique key refuses a second credit
        }
        throw new LedgerDown('cannot create ' . $path . ': ' . (error_get_last()['message'] ?? 'unknown error'));
    }
    if (fwrite($file, $amount . "\n") === false || !fsync($file)) {
        fclose($file);
        unlink($path);
        throw new LedgerDown('cannot write ' . $path);
    }
    fclose($file);
}

/** The demo business logic: accept every valid event, credit it, log it, and build its reply. */
function handleEvent(Event $event, ?string $wallet = null): string
{
    if ($event instanceof BuyRefund) {
        logLine(sprintf(
            'refund transaction %d of purchase %d for player %s',
            $event->transactionId,
            $event->buyTransactionId,
            $event->playerPartnerIdentifier ?? $event->playerIdentifier,
        ));
        credit($wallet, 'refund', $event->transactionId, 0);
        return $event->reply(true);
    }
    if ($event instanceof JackpotPayout) {
        logLine(sprintf(
            'payout %d %s (minor units) of %s jackpot %s for player %s',
            $event->moneyWon,
            $event->currencyISO4217,
            $event->isPrimary ? 'major' : 'minor',
            $event->jackpotIdentifier,
            $event->playerPartnerIdentifier ?? $event->playerIdentifier,
        ));
        credit($wallet, 'payout', $event->transactionId, $event->moneyWon);
        return $event->reply(true);
    }
    if ($event instanceof BalanceQuery) {
        $player = $event->playerPartnerIdentifier ?? $event->playerIdentifier;
        logLine('balance query for player ' . $player);
        if ($player === 'unknown-player') {
            // No balance is stated; sent with $event->replyHttpStatus() (500 by default).
            return $event->reply(false, 'player unknown-player is not known');
        }
        return $event->replyBalance(100000, null, 0);
    }
    // Not reached: the receiver refuses unknown events.
    return $event->reply(false, 'unsupported event');
}

/** The index, as the log shows it: the number, or why there is none. */
function logIndex(Event $event): void
{
    if ($event->index !== null) {
        logLine('index ' . $event->index);
    } elseif ($event->indexUnreadable) {
        logLine('index unreadable (' . ($event->extra['index'] ?? '?') . '), handled without one');
    }
}

/**
 * Reads the body like the CGI: at most MAX_BODY_BYTES + 1 bytes, so that an oversized body is
 * refused by the library's limit. Null when CONTENT_LENGTH is invalid or the body is shorter.
 */
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
        return null; // shorter than CONTENT_LENGTH
    }
    return $body;
}

if (($_SERVER['REQUEST_METHOD'] ?? '') !== 'POST') {
    respond(405, '{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}', 'Allow: POST');
    return;
}

/** The receiver the environment configures, with $journal when given (throws ConfigurationException). */
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
$wallet = (string) getenv('SLOTPARTNER_WALLET');
$journal = null;
try {
    $receiver = makeReceiver();   // no journal yet: it checks the source and token first
} catch (SlotPartnerException $e) {
    $unset = $e->field === 'token' && getenv('SLOTPARTNER_TOKEN') === false;
    logLine('configuration: ' . $e->getMessage() . ($unset ? ' (is SLOTPARTNER_TOKEN set?)' : ''));
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
$forwardedFor = $_SERVER['HTTP_X_FORWARDED_FOR'] ?? null;   // the bytes received; read only from a trusted proxy
try {
    // Source and token first: a request refused here (401, 403) never reaches the journal.
    $receiver->authenticate($token, $remoteAddr, $forwardedFor);
} catch (SlotPartnerException $e) {
    logLine('refused: ' . $e->getMessage());
    respondError($e);
    return;
}
if ($journalUrl !== '') {
    // Opened only now, for a request that passed: its URL goes to the log, never to the caller.
    try {
        $journal = new Journal($journalUrl);
        $receiver = makeReceiver($journal);
    } catch (SlotPartnerException $e) {
        logLine('journal: ' . $e->getMessage());
        respondError($e);   // 503: the service delivers again later
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
    // Claimed first: a repeat is answered with the stored reply, running nothing.
    try {
        $claim = $event->begin();
    } catch (SlotPartnerException $e) {
        logLine('journal: ' . $e->getMessage());
        respondError($e);   // 409 conflict, 503 busy or journal down
        return;
    }
    if ($claim->outcome === Outcome::Done) {
        logLine('repeated delivery answered from the journal');
        respond(200, (string) $claim->reply);
        return;
    }
    if ($claim->attempt > 1) {
        logLine('attempt ' . $claim->attempt);
    }
}
try {
    $reply = handleEvent($event, $wallet);
} catch (SlotPartnerException $e) {
    logLine('reply: ' . $e->getMessage());
    respondError($e);
    return;
} catch (LedgerDown $e) {
    logLine('ledger: ' . $e->getMessage());
    if ($journal !== null) {
        // A transient failure: release the claim so that the next delivery runs again.
        try {
            $event->abandon();
        } catch (SlotPartnerException $e) {
            logLine('journal abandon: ' . $e->getMessage());   // the claim ends with its lease
        }
    }
    respond(503, LEDGER_DOWN, 'Retry-After: 5');
    return;
}
if ($journal !== null) {
    try {
        $event->finish();   // stores the reply once the ledger has the credit
    } catch (SlotPartnerException $e) {
        // ClaimLostException: the credit is made; the next delivery finds it in the ledger.
        logLine('journal finish: ' . $e->getMessage());
    }
}
logIndex($event);
respond($event->replyHttpStatus(), $reply);   // 200; 500 for a refused balance query
