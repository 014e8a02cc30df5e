<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * `jackpotPayout`: the service pays out a jackpot. Answer with reply(true) once it is credited,
 * or reply(false, "why").
 *
 * Amounts are 0 to 2^53-1, identifiers 0 to 2^63-1. At least one of the two player identifiers
 * is present; absent optional fields are null. Lifetime and ownership: see Event.
 */
final class JackpotPayout extends Event
{
    public readonly string $jackpotIdentifier;

    /** The service's player identifier; null when absent. */
    public readonly ?string $playerIdentifier;

    /** The partner's player identifier; null when absent. */
    public readonly ?string $playerPartnerIdentifier;

    /** Three uppercase letters. */
    public readonly string $currencyISO4217;

    /** In minor currency units (cents). */
    public readonly int $moneyWon;

    public readonly int $coinsWon;

    public readonly bool $isMoney;

    public readonly int $epochReleasedMillis;

    public readonly bool $isPrimary;

    public readonly int $transactionId;

    public readonly int $buyTransactionId;

    public readonly string $partnerGameRequestIdentifier;

    public readonly int $gameSessionId;

    public readonly int $gameId;

    /** Null when absent. */
    public readonly ?string $bonusCode;

    /** Null when absent. */
    public readonly ?bool $isMobile;

    /**
     * Copies the fields of the event; Event::adopt() and Event::fromRecord() set the common ones.
     *
     * @param CData $p the numbers: the `sp_jackpot_payout *` of the native event, or the `sp_record *`
     *     (the same field names)
     * @param list<string> $strings the event's `strings` block, split (see Event)
     *
     * @internal Built by Receiver::handle()/parse() (Event::adopt, Event::fromRecord), not by applications.
     */
    protected function __construct(CData $p, array $strings)
    {
        $this->jackpotIdentifier = $strings[0];
        $this->playerIdentifier = $strings[1] === '' ? null : $strings[1];
        $this->playerPartnerIdentifier = $strings[2] === '' ? null : $strings[2];
        $this->currencyISO4217 = $strings[3];
        $this->moneyWon = $p->money_won;
        $this->coinsWon = $p->coins_won;
        $this->isMoney = $p->is_money;
        $this->epochReleasedMillis = $p->epoch_released_millis;
        $this->isPrimary = $p->is_primary;
        $this->transactionId = $p->transaction_id;
        $this->buyTransactionId = $p->buy_transaction_id;
        $this->partnerGameRequestIdentifier = $strings[4];
        $this->gameSessionId = $p->game_session_id;
        $this->gameId = $p->game_id;
        $this->bonusCode = $strings[5] === '' ? null : $strings[5];
        $this->isMobile = $p->has_is_mobile ? $p->is_mobile : null;
    }
}
