<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI;
use FFI\CData;

/**
 * The loaded library plus the scratch out-parameters every call reuses, so that a callback
 * allocates no FFI memory of its own. One per process (per request without preloading); the
 * scratch memory is PHP-owned and lives as long as this object.
 *
 * @internal Used by the binding's classes; not part of the API.
 */
final class Native
{
    /** What a list-valued setting's items are trimmed of (the same characters in every binding). */
    private const BLANKS = " \t\r\n\f\v";

    /** `sp_sql_kind` values, as sp_event_stage reads them from an `sp_sql_value`. */
    public const SQL_NULL = 0;
    public const SQL_INT = 1;
    public const SQL_TEXT = 2;

    /** Parameters of a staged statement that the kept `sp_sql_value` array holds at most (see stage()). */
    private const SQL_VALUES_KEPT = 64;

    /** Bytes of text parameters that the kept text buffer holds at most (see stage()). */
    private const SQL_TEXT_KEPT = 16384;

    /** The kept arrays' first lengths (see stage()): most statements need no more. */
    private const SQL_VALUES_FIRST_KEPT = 8;
    private const SQL_TEXT_FIRST_KEPT = 256;

    private static ?self $instance = null;

    private static ?object $override = null;

    /** @var array<int, string> sp_status_name() results, by code */
    private static array $statusNames = [];

    /** @var array<string, CData> out-parameter arrays by pointee type, see out() */
    private array $outs = [];

    /*
     * The scratch properties below (the out-parameters, the staged statement's arrays and the
     * error apart: the functions that use them make them) are made at their first read, by
     * __get(): the constructor unsets them. Without preloading as with it, a PHP-FPM worker
     * makes this object again for every request; one through an Endpoint reads the reply view
     * alone, and so no longer makes the record buffer, the claim and the error each time (about
     * 30 µs of a request's CPU in make bench-e2e).
     */

    /** `sp_event *[1]`: out-parameter of sp_receiver_handle/_parse (decays to sp_event **). */
    public readonly CData $eventOut;

    /** `sp_str`: the reply view written by sp_event_reply/_reply_balance and the error body. */
    public readonly CData $str;

    /** `sp_str *` pointing at $str. */
    public readonly CData $strOut;

    /** `sp_claim`: the answer written by sp_event_begin. */
    public readonly CData $claim;

    /** `sp_claim *` pointing at $claim. */
    public readonly CData $claimOut;

    /**
     * `sp_record *`: the header of the record sp_receiver_handle_record writes into this
     * process's record buffer (`uint64_t[]`, aligned for it); read it right after the call.
     */
    public CData $record;

    /** `char *`: the record's strings, right after its header. */
    public CData $recordStrings;

    /** The record buffer itself, passed to sp_receiver_handle_record as its `void *record`. */
    public CData $recordBuffer;

    /** Bytes in $recordBuffer. */
    public int $recordCapacity;

    /** `size_t[1]`: the record size sp_receiver_handle_record reports (decays to `size_t *`). */
    public readonly CData $recordSize;

    /**
     * `sp_sql_value[$sqlValuesKept]`, made at the first staged statement with parameters and
     * made larger (up to SQL_VALUES_KEPT) when one needs more (see stage()).
     */
    private ?CData $sqlValues = null;

    /** The length of $sqlValues. */
    private int $sqlValuesKept = 0;

    /**
     * `char[$sqlTextKept]`, made at the first staged statement with text and made larger (up to
     * SQL_TEXT_KEPT) when one needs more (see stage()).
     */
    private ?CData $sqlText = null;

    /** The length of $sqlText. */
    private int $sqlTextKept = 0;

    /** `sp_error`: the last failure written by sp_last_error, made at the first failure. */
    private ?CData $lastError = null;

    /** `sp_error *` pointing at $lastError. */
    private ?CData $lastErrorOut = null;

    /** @param FFI|object $ffi the library, or a call-forwarding double in tests */
    private function __construct(public readonly object $ffi)
    {
        unset(
            $this->eventOut, $this->str, $this->strOut, $this->claim, $this->claimOut, $this->record,
            $this->recordStrings, $this->recordBuffer, $this->recordCapacity, $this->recordSize,
        );
    }

    /**
     * Makes the scratch property $name at its first read (see above) and returns it; a view and
     * the pointer to it are made together. PHP calls this only for a property that is unset.
     */
    public function __get(string $name): mixed
    {
        $ffi = $this->ffi;
        switch ($name) {
            case 'eventOut':
                $this->eventOut = $this->out('sp_event');
                break;
            case 'str':
            case 'strOut':
                $this->str = $ffi->new('sp_str');
                $this->strOut = FFI::addr($this->str);
                break;
            case 'claim':
            case 'claimOut':
                $this->claim = $ffi->new('sp_claim');
                $this->claimOut = FFI::addr($this->claim);
                break;
            case 'recordSize':
                $this->recordSize = $ffi->new('size_t[1]');
                break;
            case 'record':
            case 'recordStrings':
            case 'recordBuffer':
            case 'recordCapacity':
                $this->growRecord(4096);
                break;
            default:
                throw new \Error('Undefined property: ' . self::class . '::$' . $name);
        }
        return $this->{$name};
    }

    /**
     * Makes the record buffer at least $capacity bytes (and at least the header plus 4 KiB, the
     * first size): a body whose record does not fit is handled again with a buffer this size.
     * Events copy their record out at once, so replacing the buffer invalidates nothing.
     */
    public function growRecord(int $capacity): void
    {
        $header = FFI::sizeof($this->ffi->type('sp_record'));
        $words = intdiv(max($capacity, $header + 4096) + 7, 8);
        $this->recordBuffer = $this->ffi->new("uint64_t[$words]");
        $this->recordCapacity = 8 * $words;
        $this->record = $this->ffi->cast('sp_record *', FFI::addr($this->recordBuffer));
        $this->recordStrings = $this->ffi->cast('char *', FFI::addr($this->recordBuffer)) + $header;
    }

    public static function get(): self
    {
        return self::$instance ??= new self(self::$override ?? Library::ffi());
    }

    /**
     * Routes the binding's calls through $ffi (null: the real library again). Objects created
     * before keep the FFI object they were created with. For tests and the benchmark, which
     * count the calls crossing into the library.
     */
    public static function useFfi(?object $ffi): void
    {
        self::$override = $ffi;
        self::$instance = null;
    }

    /**
     * A reusable `<type> *[1]`, the out-parameter of a _new function (it decays to `<type> **`).
     * Read `[0]` right after the call: it copies the pointer. Reused rather than created per
     * call because PHP FFI keeps the element type of every fresh array it reads from until the
     * end of the request (about 120 bytes a call).
     */
    public function out(string $type): CData
    {
        return $this->outs[$type] ??= $this->ffi->new($type . ' *[1]');
    }

    /**
     * Calls sp_event_stage for $event with $sql and $params (a list: see Event::stage()) and
     * returns its status. Each parameter becomes an `sp_sql_value`: null as SQL_NULL, an int as
     * SQL_INT, a string as SQL_TEXT with its bytes copied into memory of this object (PHP FFI
     * refuses to point a struct's `char *` at a PHP string, whose buffer may be a temporary's).
     * The library copies everything during the call, so the same array and text buffer serve
     * every statement: they are made at the first statement as small as it allows (8 values,
     * 256 bytes of text, FFI zeroes what it makes: a 16 KiB buffer made at every PHP-FPM
     * request cost it about 17,000 instructions) and made larger when a statement needs more,
     * up to SQL_VALUES_KEPT parameters and SQL_TEXT_KEPT bytes of text; a larger statement
     * gets arrays of its own size, freed when this returns.
     *
     * @param list<mixed> $params
     *
     * @throws ConfigurationException naming `params[N]` for a value that is not null, an int or
     *     a string (HTTP 500, the invalid_argument body, as wrongType())
     */
    public function stage(?CData $event, string $sql, array $params): int
    {
        $count = \count($params);
        if ($count === 0) {
            return $this->ffi->sp_event_stage($event, $sql, \strlen($sql), null, 0);
        }
        if ($count <= $this->sqlValuesKept) {
            $values = $this->sqlValues;
        } elseif ($count <= self::SQL_VALUES_KEPT) {
            $this->sqlValuesKept = \min(self::SQL_VALUES_KEPT, \max($count, self::SQL_VALUES_FIRST_KEPT, 2 * $this->sqlValuesKept));
            $values = $this->sqlValues = $this->ffi->new('sp_sql_value[' . $this->sqlValuesKept . ']');
        } else {
            $values = $this->ffi->new('sp_sql_value[' . $count . ']');   // lives until this returns
        }
        $text = $this->sqlText ??= $this->ffi->new('char[' . ($this->sqlTextKept = self::SQL_TEXT_FIRST_KEPT) . ']');
        $used = self::fillSqlValues($values, $params, $text, $this->sqlTextKept);
        if ($used > $this->sqlTextKept) {
            if ($used <= self::SQL_TEXT_KEPT) {
                $this->sqlTextKept = \min(self::SQL_TEXT_KEPT, \max($used, 2 * $this->sqlTextKept));
                $text = $this->sqlText = $this->ffi->new('char[' . $this->sqlTextKept . ']');
            } else {
                $text = $this->ffi->new('char[' . $used . ']');   // lives until this returns
            }
            self::fillSqlValues($values, $params, $text, $used);
        }
        return $this->ffi->sp_event_stage($event, $sql, \strlen($sql), $values, $count);
    }

    /**
     * Writes $params into $values, their text into $text (a `char[$capacity]` array). Returns
     * the bytes of text the parameters hold: when above $capacity, the text pointers are not all
     * written (fill again with a buffer that size). The text pointers are made by adding an
     * offset to the `char[]` array itself (each sum gets a pointer type of its own), never to a
     * `char *` kept in a variable: when FFI made that pointer's type for it (a cast's), the sum
     * takes the type over, and the kept pointer is left with a type freed along with the sum
     * (a wrong "Attempt to write over data boundary", then a crash).
     *
     * @param list<mixed> $params
     */
    private static function fillSqlValues(CData $values, array $params, CData $text, int $capacity): int
    {
        $used = 0;
        foreach ($params as $i => $param) {
            $value = $values[$i];
            if (\is_int($param)) {
                $value->kind = self::SQL_INT;
                $value->int_value = $param;
            } elseif (\is_string($param)) {
                $len = \strlen($param);
                $value->kind = self::SQL_TEXT;
                $value->len = $len;
                if ($len === 0) {
                    $value->bytes = null;   // the empty text
                } elseif ($used + $len <= $capacity) {
                    $bytes = $text + $used;
                    FFI::memcpy($bytes, $param, $len);
                    $value->bytes = $bytes;
                    $used += $len;
                } else {
                    $used += $len;      // counted only: the caller fills again with a larger buffer
                    $capacity = -1;     // nothing more is copied into this buffer
                }
            } elseif ($param === null) {
                $value->kind = self::SQL_NULL;
            } else {
                throw self::wrongType('params[' . $i . ']', $param, 'null, an int or a string');
            }
        }
        return $used;
    }

    /**
     * The exception for the failure the library just reported with $status. Reads the calling
     * thread's whole last error at once with sp_last_error (its views are valid only until the
     * next status-returning sp_ call) and copies it: one crossing, plus one for sp_status_name
     * the first time a code is seen.
     */
    public function error(int $status): SlotPartnerException
    {
        $statusName = $this->statusName($status);
        if ($this->lastError === null) {
            $this->lastError = $this->ffi->new('sp_error');
            $this->lastErrorOut = FFI::addr($this->lastError);
        }
        $e = $this->lastError;
        if ($this->ffi->sp_last_error($this->lastErrorOut) !== Status::OK) {
            return SlotPartnerException::create($statusName, $status, $statusName); // no failure recorded
        }
        return SlotPartnerException::create(
            self::text($e->message),
            $status,
            $statusName,
            self::text($e->field),
            $e->http_status,
            self::text($e->response_body),
            $e->event_name->ptr,
            $e->has_index ? $e->index : null,
            $e->has_transaction_id ? $e->transaction_id : null,
        );
    }

    /** The name of a status code, such as "SP_ERR_WRONG_TYPE" (sp_status_name, cached). */
    public function statusName(int $status): string
    {
        return self::$statusNames[$status] ??= (string) $this->ffi->sp_status_name($status);
    }

    /** Throws the exception for $status unless it is Status::OK. */
    public function check(int $status): void
    {
        if ($status !== Status::OK) {
            throw $this->error($status);
        }
    }

    /**
     * $value for a `const char *` argument of a setting. PHP hands C its bytes up to the first
     * NUL, so a NUL inside would silently cut the value short: refused instead.
     */
    public static function cString(?string $value, string $field): ?string
    {
        if ($value !== null && str_contains($value, "\0")) {
            throw new ConfigurationException($field . ': must not contain a NUL byte', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', $field);
        }
        return $value;
    }

    /**
     * The items of a list-valued setting (tokens, sources, trusted_proxies): one comma-separated
     * string (`'staging, 10.1.2.0/24'`) or an array of strings (`['staging', '10.1.2.0/24']`),
     * one item per string, each trimmed of blanks (the same rules as the Python binding's). []
     * for an empty value (a blank string or an empty array), which the library refuses for tokens
     * and sources as it does in C and takes as none for trusted proxies.
     *
     * @param string|array<mixed> $value
     *
     * @return list<string>
     *
     * @throws ConfigurationException naming $field for a malformed value: an item that is empty
     *     (a stray comma), not a string, or an array item holding a comma
     */
    public static function listSetting(string|array $value, string $field): array
    {
        if (is_string($value)) {
            if (trim($value, self::BLANKS) === '') {
                return [];
            }
            $items = explode(',', $value);
            $where = 'between commas';
        } else {
            $items = array_values($value);
            $where = 'of the list';
            foreach ($items as $i => $item) {
                if (!is_string($item)) {
                    throw self::argumentError($field, sprintf('item %d of the list is %s, not a string', $i + 1, get_debug_type($item)));
                }
                if (str_contains($item, ',')) {
                    throw self::argumentError($field, sprintf('item %d of the list holds a comma: give one value per item', $i + 1));
                }
            }
        }
        $result = [];
        foreach ($items as $i => $item) {
            $text = trim((string) $item, self::BLANKS);
            if ($text === '') {
                throw self::argumentError($field, sprintf('item %d %s is empty', $i + 1, $where));
            }
            $result[] = $text;
        }
        return $result;
    }

    /** A status-1 error found by the binding before calling the library (no HTTP answer). */
    public static function argumentError(string $field, string $problem): ConfigurationException
    {
        return new ConfigurationException($field . ': ' . $problem, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', $field);
    }

    /**
     * $value when it is an int. An amount parameter is declared mixed so that PHP never coerces
     * it (without strict_types, 1299.99 or "1299.99" would silently become 1299): anything but
     * an int (a float, a numeric string, a bool, null) is refused naming $field.
     *
     * @throws ConfigurationException
     */
    public static function amount(mixed $value, string $field): int
    {
        if (!is_int($value)) {
            throw self::wrongType($field, $value, 'an int');
        }
        return $value;
    }

    /**
     * `<field>: must be a string, not null`: a string argument of another type, found by the
     * binding where C would be handed NULL. It carries the answer the library gives a NULL
     * string in C (HTTP 500, an `invalid_argument` JSON body), so that an endpoint answers it as
     * it answers any refused setting.
     */
    public static function wrongType(string $field, mixed $value, string $expected = 'a string'): ConfigurationException
    {
        return self::argumentRefused($field, 'must be ' . $expected . ', not ' . get_debug_type($value));
    }

    /**
     * `<field>: <problem>`: an argument of a call refused by the binding before it calls the
     * library, with the answer the library gives a refused argument (HTTP 500, an
     * `invalid_argument` JSON body saying only that the partner is misconfigured: the setting
     * and its problem are for the log, never the caller), as wrongType().
     */
    public static function argumentRefused(string $field, string $problem): ConfigurationException
    {
        $message = $field . ': ' . $problem;
        return new ConfigurationException($message, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', $field, 500, self::misconfiguredBody());
    }

    /**
     * The body the library answers a refused setting with (src/callback/response.rs,
     * MISCONFIGURED): an `invalid_argument` error saying only that the partner is
     * misconfigured, for the answers the binding gives without the library.
     */
    public static function misconfiguredBody(): string
    {
        return json_encode(
            ['error' => ['code' => 'invalid_argument', 'field' => '', 'message' => 'the partner is misconfigured; its log says how']],
            JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR,
        );
    }

    /**
     * A request header or address with its NUL bytes replaced by U+FFFD: a NUL would cut it
     * short in C, the replacement makes the library refuse it as it refuses any bad value.
     */
    public static function withoutNul(string $value): string
    {
        return str_replace("\0", "\u{FFFD}", $value);
    }

    /** $value for an unsigned integer argument: refused when negative or above $max. */
    public static function unsigned(int $value, string $field, int $max = PHP_INT_MAX): int
    {
        if ($value < 0 || $value > $max) {
            throw new ConfigurationException($field . ': must be 0 to ' . $max . ', got ' . $value, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', $field);
        }
        return $value;
    }

    /**
     * The string an `sp_str` views, '' when absent. (Read `->ptr` plainly: PHP FFI turns a
     * `const char *` into a PHP string only in a plain read, not under `??` or isset().)
     */
    public static function text(CData $str): string
    {
        $text = $str->ptr;
        return $text ?? '';
    }

    /** Keeps var_dump() away from the scratch views, which may point into freed replies. */
    public function __debugInfo(): array
    {
        return ['library' => Library::source()];
    }

    /**
     * Extra fields (name => raw JSON) of an `sp_field` array of $count entries.
     *
     * @return array<string, string>
     */
    public static function fields(?CData $fields, int $count): array
    {
        $out = [];
        for ($i = 0; $i < $count; $i++) {
            $field = $fields[$i];
            $out[$field->name->ptr] = $field->json->ptr;
        }
        return $out;
    }

    /**
     * The strings of an `sp_str` array of $count entries.
     *
     * @return list<string>
     */
    public static function strings(?CData $items, int $count): array
    {
        $out = [];
        for ($i = 0; $i < $count; $i++) {
            $out[] = $items[$i]->ptr;
        }
        return $out;
    }
}
