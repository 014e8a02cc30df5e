<?php

declare(strict_types=1);

/*
 * library.php: the callback endpoint as a partner writes it on SlotPartner\Endpoint, as the
 * end-to-end benchmark runs it (make bench-e2e): bindings/php/examples/callback.php with its
 * ledger in the journal's own database (`credits`, keyed by kind and transactionId;
 * benches/e2e/db.php creates it) and the credit staged on the claim ($e->stage(): the journal's
 * placeholders, $1..$4 on PostgreSQL, ? on SQLite, ON CONFLICT DO NOTHING), so that the credit
 * and the stored reply commit together with one durable commit, or neither. No PDO connection:
 * the journal's pooled one does all the writing. Since everything the logic does is staged, the
 * claim is written at finish (claim_at_finish): one commit a delivery, as the hand-written
 * integration's one transaction. No line per event is logged (benches/e2e/handwritten.php logs
 * none either); refusals and failures are, through error_log.
 *
 * The endpoint (receiver and journal) is found with sp_endpoint_shared: made by a worker's first
 * request, found again by each later one. Every answer is the library's.
 *
 * Configuration (the FastCGI parameters nginx passes, read with getenv()): SLOTPARTNER_TOKEN,
 * SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL (required: the ledger's database too).
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Endpoint;
use SlotPartner\Event;

require __DIR__ . '/steps.php';   // E2E_STEPS=1: the worker's CPU by step (no-op otherwise)
require dirname(__DIR__, 2) . '/bindings/php/autoload.php';
step('autoload');

$journal = (string) getenv('SLOTPARTNER_JOURNAL');
$credit = 'INSERT INTO credits (kind, transaction_id, player, amount) VALUES '
    . (str_starts_with($journal, 'postgres') ? '($1, $2, $3, $4)' : '(?, ?, ?, ?)')
    . ' ON CONFLICT (kind, transaction_id) DO NOTHING';
$endpoint = Endpoint::fromEnvironment(['reject_unknown_events' => true, 'claim_at_finish' => true, 'optimistic' => true]);
step('endpoint');
$endpoint->serve(static function (Event $e) use ($credit): string {
    step('receive');
    $player = $e->playerPartnerIdentifier ?? $e->playerIdentifier;
    if ($e instanceof BalanceQuery) {
        return $player === 'unknown-player' ? $e->reply(false, 'player unknown-player is not known') : $e->replyBalance(100000, null, 0);
    }
    $refund = $e instanceof BuyRefund;   // else a JackpotPayout: the others are refused
    $e->stage($credit, [$refund ? 'refund' : 'payout', $e->transactionId, $player, $refund ? 0 : $e->moneyWon]);
    $reply = $e->reply(true);
    step('logic');
    return $reply;
});
step('complete');
