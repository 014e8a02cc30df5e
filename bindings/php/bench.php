<?php

declare(strict_types=1);

/*
 * The cost of one callback through the binding (authenticate, parse and validate, read every
 * field, build the reply, free), next to json_decode() alone and to json_decode() plus the
 * checks a careful partner writes by hand for the same fields, and next to the least a binding
 * with this API can do over FFI (minimal(): the floor of the binding's own cost).
 *
 *   php bindings/php/bench.php            # runs itself without and with opcache (+ JIT)
 *   php bindings/php/bench.php --here     # only in this process, as configured
 *
 * Method: the variants run interleaved in rounds (so that a noisy neighbour hits them all
 * alike); each round times 4,000 callbacks of one variant; the median and the fastest round
 * are printed, in microseconds per callback. FFI crossings are counted by wrapping the loaded
 * FFI object (tests/CountingFfi.php), in a separate pass.
 */

use SlotPartner\BalanceQuery;
use SlotPartner\BuyRefund;
use SlotPartner\Event;
use SlotPartner\JackpotPayout;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\Receiver;

require __DIR__ . '/autoload.php';
require __DIR__ . '/tests/CountingFfi.php';

const TOKEN = '6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f';
const PEER = '127.0.0.1';
const ROUNDS = 15;
const PER_ROUND = 4000;

if (!in_array('--here', $argv, true)) {
    $configurations = [
        'no opcache' => ['-d', 'opcache.enable_cli=0'],
        'opcache' => ['-d', 'opcache.enable_cli=1', '-d', 'opcache.jit=off'],
        'opcache + JIT (tracing)' => ['-d', 'opcache.enable_cli=1', '-d', 'opcache.jit=tracing', '-d', 'opcache.jit_buffer_size=64M'],
    ];
    $status = 0;
    foreach ($configurations as $label => $options) {
        echo "== $label\n";
        passthru(escapeshellarg(PHP_BINARY) . ' ' . implode(' ', array_map('escapeshellarg', $options)) . ' ' . escapeshellarg(__FILE__) . ' --here', $rc);
        $status = max($status, $rc);
        echo "\n";
    }
    exit($status);
}

/** Checks a careful partner writes around json_decode(), for the same rules where PHP can. */
final class HandChecked
{
    private const MAX_AMOUNT = 9007199254740991;
    private const ALLOWED = ['127.0.0.1', '::1'];

    /** @return array{0: int, 1: string} HTTP status and reply */
    public static function handle(?string $token, string $peer, string $body): array
    {
        if (!in_array($peer, self::ALLOWED, true)) {
            return [403, '{"error":"forbidden"}'];
        }
        if ($token === null || !hash_equals(TOKEN, $token)) {
            return [401, '{"error":"unauthorized"}'];
        }
        if (strlen($body) > 65536) {
            return [413, '{"error":"too large"}'];
        }
        try {
            $data = json_decode($body, true, 32, JSON_THROW_ON_ERROR);
        } catch (JsonException) {
            return [400, '{"error":"invalid JSON"}'];
        }
        if (!is_array($data) || ($data !== [] && array_is_list($data))) {
            return [400, '{"error":"not an object"}'];
        }
        $name = $data['event'] ?? $data['action'] ?? null;
        return match ($name) {
            'gameSessionBuyRefund' => self::refund($data),
            'jackpotPayout' => self::payout($data),
            'getPlayerBalance' => self::balance($data),
            default => [400, '{"error":"unknown event"}'],
        };
    }

    /** @param array<string, mixed> $d */
    private static function refund(array $d): array
    {
        $ok = self::id($d, 'gameSessionIdentifier') && self::players($d)
            && self::int($d, 'transactionId') && self::int($d, 'buyTransactionId') && self::int($d, 'gameSessionId')
            && self::id($d, 'partnerGameRequestIdentifier') && self::int($d, 'gameId')
            && is_bool($d['isMobile'] ?? null) && self::optionalId($d, 'bonusCode') && self::index($d);
        $event = $ok ? [
            $d['gameSessionIdentifier'], $d['playerIdentifier'] ?? null, $d['playerPartnerIdentifier'] ?? null, $d['transactionId'],
            $d['buyTransactionId'], $d['gameSessionId'], $d['partnerGameRequestIdentifier'], $d['gameId'], $d['isMobile'],
            $d['bonusCode'] ?? null, $d['index'] ?? null,
        ] : null;
        return [200, json_encode(['refund' => ['success' => $event !== null, 'errorMessage' => $event !== null ? '' : 'invalid']])];
    }

    /** @param array<string, mixed> $d */
    private static function payout(array $d): array
    {
        $ok = self::id($d, 'jackpotIdentifier') && self::players($d)
            && is_string($d['currencyISO4217'] ?? null) && preg_match('/^[A-Z]{3}$/D', $d['currencyISO4217']) === 1
            && self::amount($d, 'moneyWon') && self::amount($d, 'coinsWon') && is_bool($d['isMoney'] ?? null)
            && self::int($d, 'epochReleasedMillis') && is_bool($d['isPrimary'] ?? null)
            && self::int($d, 'transactionId') && self::int($d, 'buyTransactionId')
            && self::id($d, 'partnerGameRequestIdentifier') && self::int($d, 'gameSessionId') && self::int($d, 'gameId')
            && self::optionalId($d, 'bonusCode') && (!isset($d['isMobile']) || is_bool($d['isMobile'])) && self::index($d);
        $event = $ok ? [
            $d['jackpotIdentifier'], $d['playerIdentifier'] ?? null, $d['playerPartnerIdentifier'] ?? null, $d['currencyISO4217'],
            $d['moneyWon'], $d['coinsWon'], $d['isMoney'], $d['epochReleasedMillis'], $d['isPrimary'], $d['transactionId'],
            $d['buyTransactionId'], $d['partnerGameRequestIdentifier'], $d['gameSessionId'], $d['gameId'],
            $d['bonusCode'] ?? null, $d['isMobile'] ?? null, $d['index'] ?? null,
        ] : null;
        return [200, json_encode(['payout' => ['success' => $event !== null, 'errorMessage' => $event !== null ? '' : 'invalid']])];
    }

    /** @param array<string, mixed> $d */
    private static function balance(array $d): array
    {
        $ok = self::players($d) && self::index($d);
        $event = $ok ? [$d['playerIdentifier'] ?? null, $d['playerPartnerIdentifier'] ?? null, $d['index'] ?? null] : null;
        return [200, json_encode(['playerBalance' => ['money' => $event !== null ? 100000 : 0, 'currencyISO4217' => 'EUR', 'coins' => 0, 'errorMessage' => $event !== null ? '' : 'invalid']])];
    }

    /** A non-empty identifier of at most 256 bytes without C0, DEL or C1 control characters. */
    private static function id(array $d, string $key): bool
    {
        $v = $d[$key] ?? null;
        return is_string($v) && $v !== '' && strlen($v) <= 256 && preg_match('/[\x00-\x1F\x7F\x{80}-\x{9F}]/u', $v) === 0;
    }

    private static function optionalId(array $d, string $key): bool
    {
        return !isset($d[$key]) || self::id($d, $key);
    }

    private static function players(array $d): bool
    {
        $service = isset($d['playerIdentifier']);
        $partner = isset($d['playerPartnerIdentifier']);
        return ($service || $partner) && (!$service || self::id($d, 'playerIdentifier')) && (!$partner || self::id($d, 'playerPartnerIdentifier'));
    }

    private static function int(array $d, string $key): bool
    {
        $v = $d[$key] ?? null;
        return is_int($v) && $v >= 0;
    }

    private static function amount(array $d, string $key): bool
    {
        return self::int($d, $key) && $d[$key] <= self::MAX_AMOUNT;
    }

    private static function index(array $d): bool
    {
        return !isset($d['index']) || self::int($d, 'index');
    }
}

/** One callback through the binding: handle, read every field, reply, free (destructor). */
function throughBinding(Receiver $receiver, string $body): string
{
    $event = $receiver->handle(TOKEN, PEER, $body);
    if ($event instanceof BuyRefund) {
        $fields = [$event->gameSessionIdentifier, $event->playerIdentifier, $event->playerPartnerIdentifier, $event->transactionId,
            $event->buyTransactionId, $event->gameSessionId, $event->partnerGameRequestIdentifier, $event->gameId, $event->isMobile,
            $event->bonusCode, $event->index, $event->extra];
        return $event->reply(true);
    }
    if ($event instanceof JackpotPayout) {
        $fields = [$event->jackpotIdentifier, $event->playerIdentifier, $event->playerPartnerIdentifier, $event->currencyISO4217,
            $event->moneyWon, $event->coinsWon, $event->isMoney, $event->epochReleasedMillis, $event->isPrimary, $event->transactionId,
            $event->buyTransactionId, $event->partnerGameRequestIdentifier, $event->gameSessionId, $event->gameId, $event->bonusCode,
            $event->isMobile, $event->index, $event->extra];
        return $event->reply(true);
    }
    if ($event instanceof BalanceQuery) {
        $fields = [$event->playerIdentifier, $event->playerPartnerIdentifier, $event->index, $event->extra];
        return $event->replyBalance(100000);
    }
    throw new LogicException('unexpected event ' . $event->name);
}

/**
 * The least a binding with this API can build per callback, to show the binding's own cost
 * against (see minimal()): the event's fields in readonly properties of a class of its kind,
 * named as the binding's, and a destructor counting the event gone (as the binding's events
 * have, for Event::liveCount() and their native event). No methods, no private state.
 */
abstract class MinimalEvent
{
    public static int $live = 0;

    public function __destruct()
    {
        --self::$live;
    }
}

final class MinimalRefund extends MinimalEvent
{
    /** @param array<string, string> $extra */
    public function __construct(
        public readonly string $gameSessionIdentifier,
        public readonly ?string $playerIdentifier,
        public readonly ?string $playerPartnerIdentifier,
        public readonly int $transactionId,
        public readonly int $buyTransactionId,
        public readonly int $gameSessionId,
        public readonly string $partnerGameRequestIdentifier,
        public readonly int $gameId,
        public readonly bool $isMobile,
        public readonly ?string $bonusCode,
        public readonly string $name,
        public readonly ?int $index,
        public readonly bool $indexUnreadable,
        public readonly array $extra,
    ) {
        ++self::$live;
    }
}

final class MinimalPayout extends MinimalEvent
{
    /** @param array<string, string> $extra */
    public function __construct(
        public readonly string $jackpotIdentifier,
        public readonly ?string $playerIdentifier,
        public readonly ?string $playerPartnerIdentifier,
        public readonly string $currencyISO4217,
        public readonly int $moneyWon,
        public readonly int $coinsWon,
        public readonly bool $isMoney,
        public readonly int $epochReleasedMillis,
        public readonly bool $isPrimary,
        public readonly int $transactionId,
        public readonly int $buyTransactionId,
        public readonly string $partnerGameRequestIdentifier,
        public readonly int $gameSessionId,
        public readonly int $gameId,
        public readonly ?string $bonusCode,
        public readonly ?bool $isMobile,
        public readonly string $name,
        public readonly ?int $index,
        public readonly bool $indexUnreadable,
        public readonly array $extra,
    ) {
        ++self::$live;
    }
}

final class MinimalBalance extends MinimalEvent
{
    /** @param array<string, string> $extra */
    public function __construct(
        public readonly ?string $playerIdentifier,
        public readonly ?string $playerPartnerIdentifier,
        public readonly string $name,
        public readonly ?int $index,
        public readonly bool $indexUnreadable,
        public readonly array $extra,
    ) {
        ++self::$live;
    }
}

/**
 * The least a binding with this API can do per callback over FFI: the library's call into the
 * record buffer, the strings in one copy, each of the record's numbers read once, the typed
 * event (MinimalEvent), every property read as throughBinding() reads them, and a reply kept
 * from an earlier callback (a balance reply completed with the amounts). Nothing kept for a
 * failure reply or a journal, no Receiver or Event methods in between.
 *
 * @param list<string> $reply the kept reply, or the three parts around a balance's amounts
 */
function minimal(Native $native, FFI\CData $receiver, string $body, array $reply): string
{
    $status = $native->ffi->sp_receiver_handle_record($receiver, TOKEN, PEER, null, $body, strlen($body), $native->recordBuffer, $native->recordCapacity, $native->recordSize);
    if ($status !== 0) {
        throw new RuntimeException("bench: status $status");
    }
    $r = $native->record;
    $s = explode("\0", FFI::string($native->recordStrings, $r->strings_len));
    $count = $r->extra_fields_len;
    $extra = [];
    for ($i = 6, $end = 6 + 2 * $count; $i < $end; $i += 2) {
        $extra[$s[$i]] = $s[$i + 1];
    }
    $name = $s[6 + 2 * $count];
    $index = $r->has_index ? $r->index : null;
    $unreadable = $r->index_unreadable;
    $kind = $r->kind;
    if ($kind === 1) {
        $event = new MinimalRefund($s[0], $s[1] === '' ? null : $s[1], $s[2] === '' ? null : $s[2], $r->transaction_id,
            $r->buy_transaction_id, $r->game_session_id, $s[3], $r->game_id, $r->is_mobile, $s[4] === '' ? null : $s[4],
            $name, $index, $unreadable, $extra);
        $fields = [$event->gameSessionIdentifier, $event->playerIdentifier, $event->playerPartnerIdentifier, $event->transactionId,
            $event->buyTransactionId, $event->gameSessionId, $event->partnerGameRequestIdentifier, $event->gameId, $event->isMobile,
            $event->bonusCode, $event->index, $event->extra];
        return $reply[0];
    }
    if ($kind === 2) {
        $event = new MinimalPayout($s[0], $s[1] === '' ? null : $s[1], $s[2] === '' ? null : $s[2], $s[3], $r->money_won,
            $r->coins_won, $r->is_money, $r->epoch_released_millis, $r->is_primary, $r->transaction_id, $r->buy_transaction_id,
            $s[4], $r->game_session_id, $r->game_id, $s[5] === '' ? null : $s[5], $r->has_is_mobile ? $r->is_mobile : null,
            $name, $index, $unreadable, $extra);
        $fields = [$event->jackpotIdentifier, $event->playerIdentifier, $event->playerPartnerIdentifier, $event->currencyISO4217,
            $event->moneyWon, $event->coinsWon, $event->isMoney, $event->epochReleasedMillis, $event->isPrimary, $event->transactionId,
            $event->buyTransactionId, $event->partnerGameRequestIdentifier, $event->gameSessionId, $event->gameId, $event->bonusCode,
            $event->isMobile, $event->index, $event->extra];
        return $reply[0];
    }
    $event = new MinimalBalance($s[0] === '' ? null : $s[0], $s[1] === '' ? null : $s[1], $name, $index, $unreadable, $extra);
    $fields = [$event->playerIdentifier, $event->playerPartnerIdentifier, $event->index, $event->extra];
    return $reply[0] . 100000 . $reply[1] . 0 . $reply[2];
}

/**
 * @param array<string, callable(): mixed> $variants
 * @return array<string, array{0: float, 1: float}> median and fastest round, µs per call
 */
function measure(array $variants): array
{
    foreach ($variants as $run) {
        for ($i = 0; $i < 2000; $i++) {
            $run();
        }
    }
    $times = [];
    for ($round = 0; $round < ROUNDS; $round++) {
        foreach ($variants as $label => $run) {
            $start = hrtime(true);
            for ($i = 0; $i < PER_ROUND; $i++) {
                $run();
            }
            $times[$label][] = (hrtime(true) - $start) / 1000 / PER_ROUND;
        }
    }
    $result = [];
    foreach ($times as $label => $list) {
        sort($list);
        $result[$label] = [$list[intdiv(count($list), 2)], $list[0]];
    }
    return $result;
}

$root = dirname(__DIR__, 2);
$receiver = new Receiver(TOKEN, sources: '127.0.0.1,::1');
$opcache = function_exists('opcache_get_status') && is_array(opcache_get_status(false));
printf("PHP %s, opcache %s, JIT %s, library %s (%s)\n", PHP_VERSION, $opcache ? 'on' : 'off', $opcache ? ((string) ini_get('opcache.jit') ?: 'off') : 'off', Library::version(), Library::source());

$counter = new CountingFfi(Library::ffi());
$native = Native::get();
$rawReceiver = (static fn (Receiver $r): FFI\CData => (fn () => $this->handle)->call($r))($receiver);
printf("%-8s %6s | %11s %11s %11s %11s %11s %11s | %9s %8s %8s %9s | %s\n", 'event', 'bytes', 'json_decode', 'dec+encode', 'decode+hand', 'binding', 'minimal', 'library', 'bind/json', 'bind/d+e', 'bind/hand', 'min/json', 'FFI crossings per callback');
foreach (['refund', 'payout', 'balance'] as $kind) {
    // Compact JSON, as the service sends it.
    $body = json_encode(json_decode((string) file_get_contents($root . '/tests/fixtures/' . $kind . '.json')), JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    if (HandChecked::handle(TOKEN, PEER, $body)[1] !== throughBinding($receiver, $body)) {
        fwrite(STDERR, "bench: the two handlers answer $kind differently\n");
        exit(1);
    }
    Native::useFfi($counter);
    $counted = new Receiver(TOKEN, sources: '127.0.0.1,::1');
    throughBinding($counted, $body); // the first success reply is built, then reused
    $counter->reset();
    throughBinding($counted, $body);
    $crossings = $counter->total();
    $names = implode(', ', array_keys($counter->calls));
    unset($counted);
    Native::useFfi(null);

    $reply = ['refund' => ['refund' => ['success' => true, 'errorMessage' => '']], 'payout' => ['payout' => ['success' => true, 'errorMessage' => '']],
        'balance' => ['playerBalance' => ['money' => 100000, 'currencyISO4217' => 'EUR', 'coins' => 0, 'errorMessage' => '']]][$kind];
    $kept = $kind === 'balance' ? ['{"playerBalance":{"money":', ',"currencyISO4217":"EUR","coins":', ',"errorMessage":""}}'] : [throughBinding($receiver, $body)];
    if (minimal($native, $rawReceiver, $body, $kept) !== throughBinding($receiver, $body)) {
        fwrite(STDERR, "bench: the minimal path answers $kind differently\n");
        exit(1);
    }
    $r = measure([
        'json_decode' => static fn () => json_decode($body, true),
        // The peer's fastest path: decode the body, encode the reply (no checks at all).
        'decode_encode' => static fn () => json_encode([json_decode($body, true), $reply][1]),
        'hand' => static fn () => HandChecked::handle(TOKEN, PEER, $body),
        'binding' => static fn () => throughBinding($receiver, $body),
        'minimal' => static fn () => minimal($native, $rawReceiver, $body, $kept),
        // The floor: the library's handle into a record through FFI, no PHP objects, no reply.
        'library' => static function () use ($native, $rawReceiver, $body): void {
            $native->ffi->sp_receiver_handle_record($rawReceiver, TOKEN, PEER, null, $body, strlen($body), $native->recordBuffer, $native->recordCapacity, $native->recordSize);
        },
    ]);
    printf(
        "%-8s %6d | %11.2f %11.2f %11.2f %11.2f %11.2f %11.2f | %8.2fx %7.2fx %7.2fx %8.2fx | %d (%s)\n",
        $kind,
        strlen($body),
        $r['json_decode'][0],
        $r['decode_encode'][0],
        $r['hand'][0],
        $r['binding'][0],
        $r['minimal'][0],
        $r['library'][0],
        $r['binding'][0] / $r['json_decode'][0],
        $r['binding'][0] / $r['decode_encode'][0],
        $r['binding'][0] / $r['hand'][0],
        $r['minimal'][0] / $r['json_decode'][0],
        $crossings,
        $names,
    );
    printf("%-8s %6s | %11.2f %11.2f %11.2f %11.2f %11.2f %11.2f | (fastest round)\n", '', '', $r['json_decode'][1], $r['decode_encode'][1], $r['hand'][1], $r['binding'][1], $r['minimal'][1], $r['library'][1]);
}
echo "µs per callback, median of ", ROUNDS, " rounds of ", PER_ROUND, " callbacks. dec+encode: json_decode() of the body and\n";
echo "json_encode() of the reply, nothing checked (the peer bind/d+e compares with). decode+hand: json_decode() plus the same\n";
echo "checks by hand (source, token, types, required fields, ranges, currency, identifiers) and json_encode()\n";
echo "of the reply. binding: Receiver::handle(), every property read, reply, free. minimal: the least a\n";
echo "binding with this API can do over FFI (the call, the strings in one copy, each number read once, the\n";
echo "typed event with readonly properties and a destructor, every property read, a kept reply; see\n";
echo "minimal()). library: the bare\n";
echo "sp_receiver_handle_record through FFI (the floor). The binding also refuses duplicate keys,\n";
echo "lone surrogates and 1.0 for an integer, which json_decode() lets through.\n";
if (Event::liveCount() !== 0) {
    fwrite(STDERR, "bench: events left unfreed\n");
    exit(1);
}
