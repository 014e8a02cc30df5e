<?php

declare(strict_types=1);

/*
 * handwritten.php: the callback endpoint a careful PHP team writes by hand for the same contract
 * (partner-interface.md), the peer of benches/e2e/library.php in make bench-e2e. No library:
 *
 *   - the source address against a list, the X-Service-Token with hash_equals (UUIDs compared
 *     without regard to case, as the library does);
 *   - the body at most 64 KiB, json_decode with depth 33 (PHP counts the values inside
 *     the deepest container as a level: the library's 32 levels, the top-level object being 1), JSON_BIGINT_AS_STRING (an integer beyond PHP_INT_MAX stays exact and is
 *     refused as a string, never rounded to a float) and JSON_THROW_ON_ERROR (invalid UTF-8, a
 *     lone surrogate, a byte order mark are refused); the top level must be an object;
 *   - the library's field checks for refunds, payouts and balance queries: required fields,
 *     JSON integers (identifiers 0 to 2^63-1, amounts 0 to 2^53-1), booleans, identifiers and
 *     codes non-empty, at most 256 bytes, without control characters, the currency three
 *     uppercase letters, at least one player identifier, an optional field's null as absent, the
 *     index read leniently (kept when it is a non-negative integer);
 *   - then, in ONE transaction of a persistent PDO connection with prepared statements, an
 *     idempotency row keyed by kind and transactionId holding a digest of the decisive fields
 *     (the library's list), the index and the reply (INSERT ... ON CONFLICT DO NOTHING), and the
 *     credit when the row is new; for a repeat, the stored reply, or 409 when the decisive
 *     fields differ; the balance query is answered without a transaction (never replayed);
 *   - the library's replies and statuses: {"refund":{"success":true,"errorMessage":""}}, the
 *     wrapper with success false and a field-naming message for invalid fields, a refused balance
 *     query 500 without a balance, {"error":{...}} with 401, 403, 405, 409, 413, 400 and 503.
 *
 * Not done that the library does: duplicate keys are not refused (json_decode keeps the last
 * one), numbers in fields the spec does not define are not checked, no gap bookkeeping beyond
 * the stored index.
 *
 * Configuration (FastCGI parameters): SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES (a comma-separated
 * list of addresses), E2E_DB_DSN (sqlite:PATH or pgsql:...), E2E_DB_USER.
 */

require __DIR__ . '/steps.php';   // E2E_STEPS=1: the worker's CPU by step (no-op otherwise)

const MAX_BODY = 65536;
const MAX_DEPTH = 33;   // json_decode's depth: the library's 32 container levels, plus one
const MAX_IDENTIFIER = 256;
const MAX_AMOUNT = 9007199254740991;   // 2^53 - 1

final class Invalid extends Exception
{
    public function __construct(public readonly string $field, string $message)
    {
        parent::__construct($message);
    }
}

function respond(int $status, string $body, ?string $header = null): void
{
    http_response_code($status);
    header_remove('X-Powered-By');
    if ($header !== null) {
        header($header);
    }
    header('Content-Type: application/json; charset=utf-8');
    echo $body;
}

function json(mixed $value): string
{
    return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR);
}

function respondError(int $status, string $code, string $field, string $message): void
{
    respond($status, json(['error' => ['code' => $code, 'field' => $field, 'message' => $message]]));
}

function shown(mixed $value): string
{
    return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION | JSON_INVALID_UTF8_SUBSTITUTE) ?: '?';
}

/** Reads the fields of one event, naming the field in each refusal. */
final class Fields
{
    public function __construct(private readonly stdClass $body, private readonly string $event)
    {
    }

    private function value(string $name, bool $required): mixed
    {
        $value = property_exists($this->body, $name) ? $this->body->{$name} : null;
        if ($value === null && $required) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': required field is missing');
        }
        return $value;
    }

    public function id(string $name): int
    {
        $value = $this->value($name, true);
        if (!is_int($value) || $value < 0) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': expected a non-negative integer, got ' . shown($value));
        }
        return $value;
    }

    public function amount(string $name): int
    {
        $value = $this->id($name);
        if ($value > MAX_AMOUNT) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': out of range (at most 2^53-1), got ' . $value);
        }
        return $value;
    }

    public function bool(string $name, bool $required = true): ?bool
    {
        $value = $this->value($name, $required);
        if ($value !== null && !is_bool($value)) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': expected a boolean, got ' . shown($value));
        }
        return $value;
    }

    public function text(string $name, bool $required = true): ?string
    {
        $value = $this->value($name, $required);
        if ($value === null) {
            return null;
        }
        if (!is_string($value)) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': expected a string, got ' . shown($value));
        }
        if ($value === '' || strlen($value) > MAX_IDENTIFIER || preg_match('/[\x00-\x1f\x7f]|\xc2[\x80-\x9f]/', $value) === 1) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': expected a non-empty string of at most ' . MAX_IDENTIFIER . ' bytes without control characters');
        }
        return $value;
    }

    public function currency(string $name): string
    {
        $value = $this->text($name);
        if (preg_match('/^[A-Z]{3}$/D', $value) !== 1) {
            throw new Invalid($this->event . '.' . $name, $this->event . '.' . $name . ': expected three uppercase letters (ISO 4217), got ' . shown($value));
        }
        return $value;
    }

    /** [playerIdentifier, playerPartnerIdentifier], at least one of them. */
    public function players(): array
    {
        $players = [$this->text('playerIdentifier', false), $this->text('playerPartnerIdentifier', false)];
        if ($players === [null, null]) {
            throw new Invalid($this->event . '.playerIdentifier', $this->event . '.playerIdentifier: required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)');
        }
        return $players;
    }

    /** The index when it is a non-negative integer; null otherwise (never refuses money). */
    public function index(): ?int
    {
        $value = property_exists($this->body, 'index') ? $this->body->index : null;
        return is_int($value) && $value >= 0 ? $value : null;
    }
}

/** The database: one persistent connection per PHP-FPM worker. */
function db(): PDO
{
    $dsn = (string) getenv('E2E_DB_DSN');
    $user = getenv('E2E_DB_USER');
    $options = [PDO::ATTR_PERSISTENT => true, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION];
    if (str_starts_with($dsn, 'pgsql:')) {
        $options[PDO::PGSQL_ATTR_DISABLE_PREPARES] = true;   // one round trip a statement
    }
    $pdo = new PDO($dsn, $user === false ? null : $user, null, $options);
    if (str_starts_with($dsn, 'sqlite:')) {
        $pdo->exec('PRAGMA synchronous = FULL');   // durable commits; WAL mode is the file's
        $pdo->setAttribute(PDO::ATTR_TIMEOUT, 5);
    }
    return $pdo;
}

/**
 * Handles a refund or payout once: the idempotency row and the credit in one transaction; a
 * repeat gets the stored reply, other content under the same key 409.
 * @return array{int, string}
 */
function once(string $kind, string $event, int $transactionId, ?int $index, string $digest, string $player, int $amount, string $reply): array
{
    step('checks');
    $pdo = db();
    $sqlite = $pdo->getAttribute(PDO::ATTR_DRIVER_NAME) === 'sqlite';
    $sqlite ? $pdo->exec('BEGIN IMMEDIATE') : $pdo->beginTransaction();
    try {
        $claim = $pdo->prepare('INSERT INTO callbacks (kind, transaction_id, content_hash, event_index, reply) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING');
        $claim->execute([$kind, $transactionId, $digest, $index, $reply]);
        if ($claim->rowCount() === 1) {
            $pdo->prepare('INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?)')
                ->execute([$kind, $transactionId, $player, $amount]);
            $answer = [200, $reply];
        } else {
            $stored = $pdo->prepare('SELECT content_hash, reply FROM callbacks WHERE kind = ? AND transaction_id = ?');
            $stored->execute([$kind, $transactionId]);
            [$storedDigest, $storedReply] = $stored->fetch(PDO::FETCH_NUM);
            $answer = hash_equals($storedDigest, $digest)
                ? [200, $storedReply]
                : [409, json(['error' => ['code' => 'conflict', 'field' => $event . '.transactionId', 'message' => $event . '.transactionId: transactionId ' . $transactionId . ' was delivered before with other content']])];
        }
        $sqlite ? $pdo->exec('COMMIT') : $pdo->commit();
        step('database');
        return $answer;
    } catch (Throwable $e) {
        try {
            $sqlite ? $pdo->exec('ROLLBACK') : $pdo->rollBack();
        } catch (Throwable) {
        }
        throw $e;
    }
}

/** @return array{int, string} */
function handle(stdClass $body): array
{
    $action = property_exists($body, 'action') ? $body->action : null;
    $event = property_exists($body, 'event') ? $body->event : null;
    if ($event === null && $action === 'getPlayerBalance') {
        try {
            [$service, $partner] = (new Fields($body, 'getPlayerBalance'))->players();
        } catch (Invalid $e) {
            return [500, json(['playerBalance' => ['errorMessage' => $e->getMessage()]])];
        }
        if (($partner ?? $service) === 'unknown-player') {
            return [500, '{"playerBalance":{"errorMessage":"player unknown-player is not known"}}'];
        }
        return [200, '{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}'];
    }
    $name = $event ?? $action;
    if (!is_string($name)) {
        return [400, json(['error' => ['code' => 'missing_field', 'field' => 'event', 'message' => 'event: required field is missing']])];
    }
    if ($name === 'gameSessionBuyRefund') {
        $kind = 'refund';
        $f = new Fields($body, $name);
        try {
            $decisive = [
                $f->text('gameSessionIdentifier'), ...$f->players(), $transactionId = $f->id('transactionId'),
                $f->id('buyTransactionId'), $f->id('gameSessionId'), $f->text('partnerGameRequestIdentifier'),
            ];
            $f->id('gameId');
            $f->bool('isMobile');
            $f->text('bonusCode', false);
            $amount = 0;
        } catch (Invalid $e) {
            return [200, json(['refund' => ['success' => false, 'errorMessage' => $e->getMessage()]])];
        }
        $reply = '{"refund":{"success":true,"errorMessage":""}}';
    } elseif ($name === 'jackpotPayout') {
        $kind = 'payout';
        $f = new Fields($body, $name);
        try {
            $decisive = [
                $f->text('jackpotIdentifier'), ...$f->players(), $f->currency('currencyISO4217'),
                $amount = $f->amount('moneyWon'), $f->amount('coinsWon'), $f->bool('isMoney'), $f->bool('isPrimary'),
                $transactionId = $f->id('transactionId'), $f->id('buyTransactionId'),
                $f->text('partnerGameRequestIdentifier'), $f->id('gameSessionId'),
            ];
            $f->id('epochReleasedMillis');
            $f->id('gameId');
            $f->text('bonusCode', false);
            $f->bool('isMobile', false);
        } catch (Invalid $e) {
            return [200, json(['payout' => ['success' => false, 'errorMessage' => $e->getMessage()]])];
        }
        $reply = '{"payout":{"success":true,"errorMessage":""}}';
    } else {
        return [400, json(['error' => ['code' => 'unknown_event', 'field' => 'event', 'message' => 'event: unknown event ' . shown($name)]])];
    }
    $player = $decisive[2] ?? $decisive[1];
    return once($kind, $name, $transactionId, $f->index(), hash('sha256', json($decisive)), $player, $amount, $reply);
}

if (($_SERVER['REQUEST_METHOD'] ?? '') !== 'POST') {
    respond(405, '{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}', 'Allow: POST');
    return;
}
$remote = $_SERVER['REMOTE_ADDR'] ?? '';
if (!in_array($remote, array_map('trim', explode(',', (string) getenv('SLOTPARTNER_SOURCES'))), true)) {
    respondError(403, 'forbidden_source', 'remote_addr', 'remote_addr: ' . $remote . ' is not an allowed source');
    return;
}
$token = $_SERVER['HTTP_X_SERVICE_TOKEN'] ?? null;
if ($token === null) {
    respondError(401, 'missing_token', 'X-Service-Token', 'X-Service-Token: header is missing');
    return;
}
if (!hash_equals(strtolower((string) getenv('SLOTPARTNER_TOKEN')), strtolower($token))) {
    respondError(401, 'wrong_token', 'X-Service-Token', 'X-Service-Token: the token is not valid');
    return;
}
if ((int) ($_SERVER['CONTENT_LENGTH'] ?? 0) > MAX_BODY) {
    respondError(413, 'body_too_large', '', 'body: more than the limit of ' . MAX_BODY . ' bytes');
    return;
}
$raw = (string) file_get_contents('php://input', false, null, 0, MAX_BODY + 1);
if (strlen($raw) > MAX_BODY) {
    respondError(413, 'body_too_large', '', 'body: more than the limit of ' . MAX_BODY . ' bytes');
    return;
}
try {
    $body = json_decode($raw, false, MAX_DEPTH, JSON_BIGINT_AS_STRING | JSON_THROW_ON_ERROR);
} catch (JsonException $e) {
    respondError(400, 'invalid_json', '', 'body: invalid JSON: ' . $e->getMessage());
    return;
}
if (!$body instanceof stdClass) {
    respondError(400, 'not_an_object', '', 'body: the top level is not a JSON object');
    return;
}
try {
    [$status, $reply] = handle($body);
} catch (PDOException $e) {
    error_log('handwritten.php: database: ' . $e->getMessage());
    respond(503, '{"error":{"code":"journal","field":"","message":"the partner is temporarily unavailable; deliver again later"}}', 'Retry-After: 5');
    return;
}
respond($status, $reply);
