<?php

declare(strict_types=1);

namespace SlotPartner;

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
     * Copies the fields of the event; Event::adopt() and Event::fromRecord() set the common ones.
     *
     * @param list<string> $strings the event's `strings` block, split (see Event)
     *
     * @internal Built by Receiver::handle()/parse() (Event::adopt, Event::fromRecord), not by applications.
     */
    protected function __construct(array $strings)
    {
        $this->playerIdentifier = $strings[0] === '' ? null : $strings[0];
        $this->playerPartnerIdentifier = $strings[1] === '' ? null : $strings[1];
    }

    /**
     * The successful balance reply (sp_event_reply_balance):
     * `{"playerBalance":{"money":<money>,"currencyISO4217":"EUR","coins":<coins>,"errorMessage":""}}`,
     * wrapper and default currency as the Receiver is configured. $money is in minor units;
     * $money and $coins are 0 to 2^53-1; $currency null for the configured one.
     *
     * Returns a PHP string (copied from the library); may be called again, the last call wins.
     * Sent with replyHttpStatus(): 200. For an event that was not begun, the library builds the
     * reply once per Receiver and currency with marker amounts, and the reply is then put
     * together from its parts around them (no FFI call); amounts out of range, and the first
     * reply of each currency, go through the library.
     *
     * @throws SlotPartnerException
     */
    public function replyBalance(mixed $money, ?string $currency = null, mixed $coins = 0): string
    {
        // Declared mixed so that PHP never coerces an amount (without strict_types, 1299.99 or
        // "1299.99" would silently become 1299): anything but an int is refused naming it.
        // Native::amount(), inline: this runs once a callback.
        if (!\is_int($money)) {
            throw Native::wrongType('money', $money, 'an int');
        }
        if (!\is_int($coins)) {
            throw Native::wrongType('coins', $coins, 'an int');
        }
        $kept = $this->keptReplies();
        if ($kept !== null && $money >= 0 && $money <= self::MAX_AMOUNT && $coins >= 0 && $coins <= self::MAX_AMOUNT) {
            $key = $currency === null ? 'balance ' : 'balance ' . $currency;
            $parts = $kept[$key] ?? null;
            if ($parts === null) {
                $parts = $kept[$key] = self::split($this->built(self::MONEY_MARK, $currency, self::COINS_MARK));
            }
            if ($parts !== []) {
                $this->repliedOk();
                return $parts[0] . $money . $parts[1] . $coins . $parts[2];
            }
        }
        return $this->built($money, $currency, $coins);
    }

    private const MAX_AMOUNT = 9007199254740991;

    private const MONEY_MARK = 7391846205113;

    private const COINS_MARK = 5208613947331;

    /**
     * A reply the library built, as its parts around the marker amounts; [] when they cannot be
     * told apart (a wrapper holding their digits), so that every reply is built by the library.
     *
     * @return list<string>
     */
    private static function split(string $reply): array
    {
        $money = (string) self::MONEY_MARK;
        $coins = (string) self::COINS_MARK;
        if (substr_count($reply, $money) !== 1 || substr_count($reply, $coins) !== 1 || strpos($reply, $money) > strpos($reply, $coins)) {
            return [];
        }
        [$head, $rest] = explode($money, $reply);
        [$middle, $tail] = explode($coins, $rest);
        return [$head, $middle, $tail];
    }

    /** The balance reply built by the library inside this event (sp_event_reply_balance). */
    private function built(int $money, ?string $currency, int $coins): string
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
