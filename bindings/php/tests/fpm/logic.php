<?php

declare(strict_types=1);

// The business logic the three front scripts of fpm_test.php share: the ledger's credit staged
// into the journal's database (created by the test), a failure on demand (the file
// FPM_TEST_FAIL_FILE, removed by the failure it causes), a balance, and an other event's reply.

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;

require dirname(__DIR__, 2) . '/autoload.php';

function logic(Event $e): mixed
{
    if ($e instanceof BuyRefund || $e instanceof JackpotPayout) {
        $fail = getenv('FPM_TEST_FAIL_FILE');
        if (is_string($fail) && $fail !== '' && @unlink($fail)) {
            throw new RuntimeException('the ledger is down (test failure on demand)');
        }
        $e->stage(
            'INSERT INTO credits (kind, transaction_id, amount) VALUES (?, ?, ?) ON CONFLICT (kind, transaction_id) DO NOTHING',
            [$e instanceof BuyRefund ? 'refund' : 'payout', $e->transactionId, $e instanceof JackpotPayout ? $e->moneyWon : 0],
        );
        return $e->reply(true);
    }
    if ($e instanceof BalanceQuery) {
        return $e->replyBalance(100000);
    }
    return '{"other":' . json_encode($e->name) . '}';
}
