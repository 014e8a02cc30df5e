<?php

declare(strict_types=1);

/*
 * callback.php: the whole callback endpoint (SlotPartner\Endpoint) with a demo ledger.
 *
 *   SLOTPARTNER_TOKEN=6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f SLOTPARTNER_SOURCES=127.0.0.1 \
 *   SLOTPARTNER_JOURNAL=sqlite:/tmp/journal.db SLOTPARTNER_LEDGER=sqlite:/tmp/ledger.db \
 *     php -d ffi.enable=1 -S 127.0.0.1:8080 bindings/php/examples/callback.php
 *
 * Settings: Endpoint::fromEnvironment(), every setting as SLOTPARTNER_<SETTING> (SLOTPARTNER_TOKEN,
 * _SOURCES, _TRUSTED_PROXIES, _JOURNAL, _CLAIM_AT_FINISH...). Every answer (405, 401, 403, 413,
 * 400, a field error, a repeat, 409, 503 with Retry-After) is the library's. SLOTPARTNER_LEDGER
 * is the demo ledger, a PDO DSN (sqlite: or pgsql:; never the journal's SQLite file). A credit
 * is one INSERT keyed by kind and transactionId, ON CONFLICT DO NOTHING: it exists with its
 * amount or not at all, and a delivery run again (its worker died before the journal stored the
 * reply) credits nothing more. A ledger that fails throws: 503, the service delivers again.
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Endpoint;
use SlotPartner\Event;

$package = dirname(__DIR__);
require is_file($package . '/vendor/autoload.php') ? $package . '/vendor/autoload.php' : $package . '/autoload.php';

/** Credits $amount for $kind/$transactionId once; throws PDOException when the ledger fails. */
function credit(string $kind, int $transactionId, int $amount): void
{
    $dsn = (string) getenv('SLOTPARTNER_LEDGER');
    if ($dsn === '') {
        return;   // no ledger: the demo accepts without crediting
    }
    $ledger = new PDO($dsn, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    $ledger->exec('CREATE TABLE IF NOT EXISTS credits (kind TEXT NOT NULL, transaction_id BIGINT NOT NULL, '
        . 'amount BIGINT NOT NULL, PRIMARY KEY (kind, transaction_id))');
    $ledger->prepare('INSERT INTO credits (kind, transaction_id, amount) VALUES (?, ?, ?) '
        . 'ON CONFLICT (kind, transaction_id) DO NOTHING')->execute([$kind, $transactionId, $amount]);
}

Endpoint::fromEnvironment(['reject_unknown_events' => true])->serve(static function (Event $e): string {
    $player = $e->playerPartnerIdentifier ?? $e->playerIdentifier;
    $index = $e->index ?? ($e->indexUnreadable ? 'unreadable ' . $e->extra['index'] : 'none');
    error_log('callback.php: ' . $e->name . ' for player ' . $player . ', index ' . $index);
    if ($e instanceof BalanceQuery) {
        return $player === 'unknown-player'   // no balance stated: 500 with the library's body
            ? $e->reply(false, 'player unknown-player is not known')
            : $e->replyBalance(100000);
    }
    if ($e instanceof BuyRefund) {
        credit('refund', $e->transactionId, 0);
    } else {
        credit('payout', $e->transactionId, $e->moneyWon);   // a JackpotPayout: the others are refused
    }
    return $e->reply(true);
});
