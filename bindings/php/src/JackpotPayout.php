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
     * Copies the fields of the native `sp_event *` and takes ownership of it.
     *
     * @internal Built by Receiver::handle()/parse() (Event::adopt), not by applications.
     */
    protected function __construct(Native $native, CData $event)
    {
        $p = $event->jackpot_payout;
        $this->jackpotIdentifier = $p->jackpot_identifier->ptr;
        $this->playerIdentifier = $p->player_identifier->ptr;
        $this->playerPartnerIdentifier = $p->player_partner_identifier->ptr;
        $this->currencyISO4217 = $p->currency_iso4217->ptr;
        $this->moneyWon = $p->money_won;
        $this->coinsWon = $p->coins_won;
        $this->isMoney = $p->is_money;
        $this->epochReleasedMillis = $p->epoch_released_millis;
        $this->isPrimary = $p->is_primary;
        $this->transactionId = $p->transaction_id;
        $this->buyTransactionId = $p->buy_transaction_id;
        $this->partnerGameRequestIdentifier = $p->partner_game_request_identifier->ptr;
        $this->gameSessionId = $p->game_session_id;
        $this->gameId = $p->game_id;
        $this->bonusCode = $p->bonus_code->ptr;
        $this->isMobile = $p->has_is_mobile ? $p->is_mobile : null;
        parent::__construct($native, $event);
    }
}
