<?php

// Deliberately WITHOUT declare(strict_types=1): calls made from this file get PHP's coercive
// typing, as in an integration that never turned strict types on (a float or a numeric string
// passed for an int parameter would be converted, 1299.99 to 1299).

function looseBalance($money, $coins = 0): string
{
    return SlotPartner\Reply::balance($money, 'EUR', $coins);
}

function looseReplyBalance(SlotPartner\BalanceQuery $event, $money, $coins = 0): string
{
    return $event->replyBalance($money, null, $coins);
}
