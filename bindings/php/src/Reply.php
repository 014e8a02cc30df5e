<?php

declare(strict_types=1);

namespace SlotPartner;

/**
 * Reply bodies built without an event (sp_reply_result_new, sp_reply_balance_new): for a
 * wrapper the spec does not show, or an answer prepared ahead. Each call allocates one native
 * buffer, copies it into the returned PHP string and frees it (two FFI calls).
 */
final class Reply
{
    private function __construct()
    {
    }

    /**
     * `{"<wrapper>":{"success":<success>,"errorMessage":"<message>"}}`. $message must be null
     * or '' when $success is true and must explain the failure when it is false; it is
     * JSON-escaped. With $omitEmptyMessage a success leaves `errorMessage` out.
     *
     * @throws ConfigurationException
     */
    public static function result(string $wrapper, bool $success, ?string $message = null, bool $omitEmptyMessage = false): string
    {
        $native = Native::get();
        $out = $native->out('sp_buffer');
        $native->check($native->ffi->sp_reply_result_new(
            Native::cString($wrapper, 'wrapper'),
            $success,
            Native::cString($message, 'message'),
            $omitEmptyMessage,
            $out,
        ));
        return self::take($native, $out[0]);
    }

    /**
     * `{"<wrapper>":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}`,
     * the balance reply shape existing integrations use, when $errorMessage is null or ''.
     * $money (minor units) and $coins are 0 to 2^53-1, $currency three uppercase letters. A
     * non-empty $errorMessage builds a failure that states no balance,
     * `{"<wrapper>":{"errorMessage":"<errorMessage>"}}` ($money, $currency and $coins unused):
     * send it with an error status (a Receiver uses its balanceFailureHttpStatus, 500 by default).
     *
     * $money and $coins must be ints: they are declared mixed so that PHP does not coerce them
     * in a file without strict_types (1299.99 or "1299.99" would become 1299); a float, a
     * string, a bool or null is refused naming the argument (ConfigurationException).
     *
     * @throws ConfigurationException
     */
    public static function balance(mixed $money, string $currency = 'EUR', mixed $coins = 0, ?string $errorMessage = null, string $wrapper = 'playerBalance'): string
    {
        $money = Native::amount($money, 'money');
        $coins = Native::amount($coins, 'coins');
        $native = Native::get();
        $out = $native->out('sp_buffer');
        $native->check($native->ffi->sp_reply_balance_new(
            Native::cString($wrapper, 'wrapper'),
            $money,
            Native::cString($currency, 'currency'),
            $coins,
            Native::cString($errorMessage, 'error_message'),
            $out,
        ));
        return self::take($native, $out[0]);
    }

    /** Copies an owned `sp_buffer *` into a PHP string and frees it. */
    private static function take(Native $native, \FFI\CData $buffer): string
    {
        try {
            return $buffer->text->ptr;
        } finally {
            $native->ffi->sp_buffer_free($buffer);
        }
    }
}
