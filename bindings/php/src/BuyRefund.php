<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * `gameSessionBuyRefund`: the service refunds a game session purchase. Answer with
 * reply(true) once the refund is booked, or reply(false, "why") when it cannot be.
 *
 * At least one of the two player identifiers is present; absent optional strings are null.
 * Identifiers are 0 to 2^63-1. Lifetime and ownership: see Event.
 */
final class BuyRefund extends Event
{
    public readonly string $gameSessionIdentifier;

    /** The service's player identifier; null when absent. */
    public readonly ?string $playerIdentifier;

    /** The partner's player identifier; null when absent. */
    public readonly ?string $playerPartnerIdentifier;

    /** This refund's transaction. */
    public readonly int $transactionId;

    /** The purchase being refunded. */
    public readonly int $buyTransactionId;

    public readonly int $gameSessionId;

    public readonly string $partnerGameRequestIdentifier;

    public readonly int $gameId;

    public readonly bool $isMobile;

    /** Null when absent. */
    public readonly ?string $bonusCode;

    /**
     * Copies the fields of the event; Event::adopt() and Event::fromRecord() set the common ones.
     *
     * @param CData $r the numbers: the `sp_buy_refund *` of the native event, or the `sp_record *`
     *     (the same field names)
     * @param list<string> $strings the event's `strings` block, split (see Event)
     *
     * @internal Built by Receiver::handle()/parse() (Event::adopt, Event::fromRecord), not by applications.
     */
    protected function __construct(CData $r, array $strings)
    {
        $this->gameSessionIdentifier = $strings[0];
        $this->playerIdentifier = $strings[1] === '' ? null : $strings[1];
        $this->playerPartnerIdentifier = $strings[2] === '' ? null : $strings[2];
        $this->transactionId = $r->transaction_id;
        $this->buyTransactionId = $r->buy_transaction_id;
        $this->gameSessionId = $r->game_session_id;
        $this->partnerGameRequestIdentifier = $strings[3];
        $this->gameId = $r->game_id;
        $this->isMobile = $r->is_mobile;
        $this->bonusCode = $strings[4] === '' ? null : $strings[4];
    }
}
