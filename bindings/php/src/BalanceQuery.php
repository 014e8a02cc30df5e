<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI\CData;

/**
 * `getPlayerBalance`: the service asks for a player's balance. Answer with
 * replyBalance($money) or, when the balance cannot be given, reply(false, "why"):
 * `{"playerBalance":{"errorMessage":"why"}}`, stating no balance, to be sent with
 * replyHttpStatus() (the Receiver's balanceFailureHttpStatus, 500 by default).
 *
 * At least one of the two identifiers is present; an absent one is null. Lifetime and
 * ownership: see Event.
 */
final class BalanceQuery extends Event
{
    /** The service's player identifier; null when absent. */
    public readonly ?string $playerIdentifier;

    /** The partner's player identifier; null when absent. */
    public readonly ?string $playerPartnerIdentifier;

    /**
     * Copies the fields of the native `sp_event *` and takes ownership of it.
     *
     * @param list<string> $strings the event's `strings` block, split (see Event)
     *
     * @internal Built by Receiver::handle()/parse() (Event::adopt), not by applications.
     */
    protected function __construct(Native $native, CData $event, array $strings)
    {
        $this->playerIdentifier = $strings[0] === '' ? null : $strings[0];
        $this->playerPartnerIdentifier = $strings[1] === '' ? null : $strings[1];
        parent::__construct($native, $event, $strings);
    }

    /**
     * The successful balance reply (sp_event_reply_balance):
     * `{"playerBalance":{"money":<money>,"currencyISO4217":"EUR","coins":<coins>,"errorMessage":""}}`,
     * wrapper and default currency as the Receiver is configured. $money is in minor units;
     * $money and $coins are 0 to 2^53-1; $currency null for the configured one.
     *
     * Returns a PHP string (copied from the library); may be called again, the last call wins.
     * Sent with replyHttpStatus(): 200.
     *
     * @throws SlotPartnerException
     */
    public function replyBalance(int $money, ?string $currency = null, int $coins = 0): string
    {
        $native = $this->native;
        $handle = $this->handle();
        $status = $native->ffi->sp_event_reply_balance(
            $handle,
            $money,
            $currency === null ? null : Native::cString($currency, 'currency'),
            $coins,
            $native->strOut,
        );
        if ($status !== Status::OK) {
            throw $native->error($status);
        }
        $this->replied($handle); // not null: the library refuses a freed event
        return $native->str->ptr;
    }
}
