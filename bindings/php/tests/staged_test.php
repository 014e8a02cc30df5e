<?php

declare(strict_types=1);

// Event::stage(): statements of the partner's own staged on a claim and run by finish() in the
// transaction that stores the reply, on a SQLite journal in a temporary directory whose file
// also holds the tables the statements write (read back through PDO): run once at finish and
// never for a repeat, in order, all or none when one fails (the claim still held, the
// statements still staged), refused on an event without a claim, transaction control refused,
// parameters of the wrong type refused before any call, null/int/string bound exactly (many of
// them, long ones: no pointer into a freed PHP string), dropped by abandon(), free() and a lost
// claim, the last error's message passed back in, and the FFI calls it costs.

require __DIR__ . '/helper.php';

use SlotPartner\ClaimLostException;
use SlotPartner\ConfigurationException;
use SlotPartner\Event;
use SlotPartner\Journal;
use SlotPartner\JournalException;
use SlotPartner\Library;
use SlotPartner\Native;
use SlotPartner\Outcome;
use SlotPartner\Receiver;

function payoutBody(int $transactionId, int $index, int $money = 150000): string
{
    return '{"event":"jackpotPayout","index":' . $index . ',"jackpotIdentifier":"jp-major-eu","playerIdentifier":"p-1",'
        . '"playerPartnerIdentifier":"partner-42","currencyISO4217":"EUR","moneyWon":' . $money . ',"coinsWon":0,"isMoney":true,'
        . '"epochReleasedMillis":1795300123456,"isPrimary":true,"transactionId":' . $transactionId . ',"buyTransactionId":1,'
        . '"partnerGameRequestIdentifier":"req-1","gameSessionId":5,"gameId":12,"isMobile":false}';
}

/** A journal in a fresh SQLite file, with a PDO connection to the same file for the tables. */
final class Db
{
    public readonly Journal $journal;
    public readonly Receiver $receiver;
    public readonly PDO $pdo;

    public function __construct(string $tables = '', ?int $leaseMs = null)
    {
        $file = tempDir() . '/journal.db';
        $this->journal = new Journal('sqlite:' . $file, leaseMs: $leaseMs);
        $this->receiver = new Receiver(TOKEN, sources: 'any', journal: $this->journal);
        $this->pdo = new PDO('sqlite:' . $file, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5]);
        if ($tables !== '') {
            $this->pdo->exec($tables);
        }
    }

    /** A claimed event (begin() answered New), checked. */
    public function claimed(string $body, int $attempt = 1): Event
    {
        $event = $this->receiver->parse($body);
        $claim = $event->begin();
        if ($claim->outcome !== Outcome::New || $claim->attempt !== $attempt) {
            throw new RuntimeException('expected New attempt ' . $attempt . ', got ' . $claim->outcome->name . ' attempt ' . $claim->attempt);
        }
        return $event;
    }

    /** @return list<list<mixed>> */
    public function rows(string $sql): array
    {
        return $this->pdo->query($sql)->fetchAll(PDO::FETCH_NUM);
    }

    public function count(string $table): int
    {
        return (int) $this->pdo->query('SELECT COUNT(*) FROM ' . $table)->fetchColumn();
    }
}

const CREDITS = 'CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, player TEXT NOT NULL, amount INTEGER NOT NULL)';
const CREDIT = 'INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?)';

T::test('a staged INSERT runs at finish() with the reply; a repeat is answered from the journal and runs nothing', function (): void {
    // No unique key on credits: a second run of the statement would show as a second row.
    $db = new Db(CREDITS);
    $event = $db->claimed(payoutBody(910001, 1));
    $event->stage(CREDIT, ['payout', 910001, 'partner-42', 150000]);
    T::eq(0, $db->count('credits'), 'staged, not run yet');
    $reply = $event->reply(true);
    $event->finish();
    T::eq([['payout', 910001, 'partner-42', 150000]], $db->rows('SELECT * FROM credits'), 'the row, after finish()');
    T::eq([1, 0], [$db->journal->status()->handled, $db->journal->status()->inProgress], 'the reply stored with it');
    foreach ([1, 2] as $n) {
        $again = $db->receiver->parse(payoutBody(910001, 1));
        $claim = $again->begin();
        T::eq([Outcome::Done, $reply], [$claim->outcome, $claim->reply], 'repeat ' . $n . ': Done with the stored reply');
        $e = T::throws(ConfigurationException::class, fn () => $again->stage(CREDIT, ['payout', 910001, 'partner-42', 150000]), 'repeat ' . $n . ': stage() on a Done event');
        T::eq('event', $e?->field, 'repeat ' . $n . ': the event named');
        $again->finish();   // does nothing for a Done event
    }
    T::eq(1, $db->count('credits'), 'the statement ran once');
    T::eq(2, $db->journal->status()->replayed, 'two repeats replayed');
});

T::test('statements run in the order staged, in one transaction with the reply', function (): void {
    $db = new Db('CREATE TABLE counter (v INTEGER); CREATE TABLE steps (n INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT)');
    $event = $db->claimed(payoutBody(910002, 1));
    // In order: 1, then 1 * 10 + 2 = 12. The other way round the UPDATE finds no row: 1.
    $event->stage('INSERT INTO counter (v) VALUES (?)', [1]);
    $event->stage('UPDATE counter SET v = v * 10 + ?', [2]);
    $event->stage('INSERT INTO steps (name) VALUES (?)', ['first']);
    $event->stage("INSERT INTO steps (name) VALUES ('second')");   // no parameter
    $event->stage('INSERT INTO steps (name) VALUES (?1 || ?1)', ['third']);   // ?1 twice
    $event->reply(true);
    $event->finish();
    T::eq([[12]], $db->rows('SELECT v FROM counter'), 'the UPDATE ran after the INSERT');
    T::eq([[1, 'first'], [2, 'second'], [3, 'thirdthird']], $db->rows('SELECT n, name FROM steps ORDER BY n'), 'the inserts in order');
});

T::test('a failing statement: finish() throws naming statements[N], nothing is stored, the next delivery is attempt 2', function (): void {
    $db = new Db('CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))');
    $db->pdo->exec("INSERT INTO credits VALUES ('payout', 7, 100)");   // the second statement will collide with it
    $event = $db->claimed(payoutBody(910003, 1));
    $event->stage('INSERT INTO credits VALUES (?, ?, ?)', ['payout', 910003, 150000]);
    $event->stage('INSERT INTO credits VALUES (?, ?, ?)', ['payout', 7, 1]);
    $event->reply(true);
    $e = T::throws(JournalException::class, fn () => $event->finish(), 'finish() with a unique violation');
    T::eq(['statements[1]', 24, 'SP_ERR_JOURNAL', 503], [$e?->field, $e?->status, $e?->statusName, $e?->httpStatus], 'field, status and HTTP answer');
    $message = (string) $e?->getMessage();
    T::true(str_contains($message, 'INSERT INTO credits VALUES (?, ?, ?)') && str_contains($message, 'UNIQUE'), 'the statement and the database\'s error named: ' . $message);
    T::true(!str_contains((string) $e?->responseBody, 'credits'), 'the answer names nothing of the database: ' . $e?->responseBody);
    T::eq([['payout', 7, 100]], $db->rows('SELECT * FROM credits ORDER BY transaction_id'), 'the first statement\'s row rolled back');
    $status = $db->journal->status();
    T::eq([0, 1], [$status->handled, $status->inProgress], 'no reply stored, the claim still held');
    // Still staged: the same failure again.
    T::eq('statements[1]', T::throws(JournalException::class, fn () => $event->finish(), 'finish() again')?->field, 'the same statement fails again');
    $event->abandon();
    $e = T::throws(ClaimLostException::class, fn () => $event->finish(), 'finish() after abandon()');
    T::true(str_contains((string) $e?->getMessage(), 'the claim was abandoned'), 'why: ' . $e?->getMessage());
    T::eq(1, $db->count('credits'), 'nothing ran');
    $claim = $db->receiver->parse(payoutBody(910003, 1))->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'the next delivery: New, attempt 2');
});

T::test('a failed finish() keeps the statements staged: finish() again runs each once', function (): void {
    $db = new Db('CREATE TABLE first (v TEXT)');
    $event = $db->claimed(payoutBody(910004, 1));
    $event->stage('INSERT INTO first VALUES (?)', ['a']);
    $event->stage('INSERT INTO second VALUES (?)', ['b']);   // no such table yet
    $reply = $event->reply(true);
    $e = T::throws(JournalException::class, fn () => $event->finish(), 'a missing table');
    T::eq('statements[1]', $e?->field, 'the second statement named');
    T::true(str_contains((string) $e?->getMessage(), 'no such table: second'), 'the database\'s error: ' . $e?->getMessage());
    T::eq(0, $db->count('first'), 'the first statement rolled back');
    $db->pdo->exec('CREATE TABLE second (v TEXT)');
    $event->finish();
    T::eq([[['a']], [['b']]], [$db->rows('SELECT v FROM first'), $db->rows('SELECT v FROM second')], 'each ran once, after the table was made');
    $claim = $db->receiver->parse(payoutBody(910004, 1))->begin();
    T::eq([Outcome::Done, $reply], [$claim->outcome, $claim->reply], 'the reply stored');
});

T::test('stage() on an event that holds no claim throws naming event', function (): void {
    $db = new Db(CREDITS);
    $args = [CREDIT, ['payout', 1, 'p', 1]];
    $refused = static function (Event $event, string $what) use ($args): void {
        $e = T::throws(ConfigurationException::class, fn () => $event->stage(...$args), $what);
        T::eq(['event', 1, 500], [$e?->field, $e?->status, $e?->httpStatus], $what . ': field, status, HTTP answer');
        T::eq('invalid_argument', json_decode((string) $e?->responseBody, true)['error']['code'] ?? null, $what . ': the invalid_argument body');
    };
    $refused($db->receiver->parse(payoutBody(910005, 1)), 'not begun');
    $refused($db->receiver->handle(TOKEN, '127.0.0.1', payoutBody(910005, 1)), 'not begun (handle())');
    $refused((new Receiver(TOKEN, sources: 'any'))->handle(TOKEN, '127.0.0.1', payoutBody(910005, 1)), 'from a Receiver without a journal');
    $balance = $db->receiver->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
    T::eq(Outcome::NotJournaled, $balance->begin()->outcome, 'a balance query is not journaled');
    $refused($balance, 'not journaled');
    $event = $db->claimed(payoutBody(910005, 1));
    $event->reply(true);
    $event->finish();
    $refused($event, 'finished');
    $done = $db->receiver->parse(payoutBody(910005, 1));
    T::eq(Outcome::Done, $done->begin()->outcome, 'a repeat');
    $refused($done, 'answered from the journal (Done)');
    $abandoned = $db->claimed(payoutBody(910006, 2));
    $abandoned->abandon();
    $refused($abandoned, 'abandoned');
    $freed = $db->claimed(payoutBody(910006, 2), 2);
    $freed->free();
    $refused($freed, 'freed');
    T::eq(0, $db->count('credits'), 'nothing ran');
});

T::test('transaction control is refused naming sql, and nothing is staged', function (): void {
    $db = new Db(CREDITS);
    $event = $db->claimed(payoutBody(910007, 1));
    foreach (['COMMIT', 'commit', 'BEGIN', '  begin immediate', 'ROLLBACK', 'SAVEPOINT s1', 'RELEASE s1', 'END', 'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE', '', "COMMIT;\n"] as $sql) {
        $e = T::throws(ConfigurationException::class, fn () => $event->stage($sql), json_encode($sql));
        T::eq(['sql', 500], [$e?->field, $e?->httpStatus], json_encode($sql) . ': field and HTTP answer');
        T::eq('', json_decode((string) $e?->responseBody, true)['error']['field'] ?? null, json_encode($sql) . ': the body names no setting (the log does)');
    }
    $e = T::throws(ConfigurationException::class, fn () => $event->stage("INSERT INTO credits VALUES ('\xff', 1, 'p', 1)"), 'SQL that is not UTF-8');
    T::eq('sql', $e?->field, 'not UTF-8: sql named');
    $event->stage(CREDIT, ['payout', 910007, 'partner-42', 1]);
    $event->reply(true);
    $event->finish();
    T::eq(1, $db->count('credits'), 'only the statement accepted ran');
});

T::test('parameters that are not null, int or string, and arrays that are not lists, are refused before any call', function (): void {
    $db = new Db(CREDITS);
    $event = $db->claimed(payoutBody(910008, 1));
    $counter = new CountingFfi(Library::ffi());
    $cases = [
        ['params[0]', [1.5], 'float'],
        ['params[3]', ['payout', 1, 'p', 150000.0], 'float'],
        ['params[1]', ['payout', true, 'p', 1], 'bool'],
        ['params[2]', ['payout', 1, false, 1], 'bool'],
        ['params[0]', [[1]], 'array'],
        ['params[1]', ['payout', new stdClass()], 'stdClass'],
        ['params[0]', [NAN], 'float'],
        ['params[70]', array_merge(array_fill(0, 70, 'x'), [0.5]), 'float'],
    ];
    foreach ($cases as [$field, $params, $type]) {
        $e = T::throws(ConfigurationException::class, fn () => $event->stage(CREDIT, $params), $field . ' ' . $type);
        T::eq([$field, 1, 'SP_ERR_INVALID_ARGUMENT', 500], [$e?->field, $e?->status, $e?->statusName, $e?->httpStatus], $field . ' ' . $type . ': field, status, HTTP answer');
        T::eq($field . ': must be null, an int or a string, not ' . $type, $e?->getMessage(), $field . ' ' . $type . ': the message');
        T::eq(['error' => ['code' => 'invalid_argument', 'field' => '', 'message' => 'the partner is misconfigured; its log says how']], json_decode((string) $e?->responseBody, true), $field . ' ' . $type . ': the body says nothing of the setting');
    }
    $lists = [
        [['kind' => 'payout'], "'kind' at position 0"],
        [[1 => 'payout'], '1 at position 0'],
        [[0 => 'payout', 2 => 1], '2 at position 1'],
        [[1 => 'b', 0 => 'a'], '1 at position 0'],
    ];
    foreach ($lists as [$params, $where]) {
        $e = T::throws(ConfigurationException::class, fn () => $event->stage(CREDIT, $params), 'not a list: ' . $where);
        T::eq(['params', 500], [$e?->field, $e?->httpStatus], 'not a list: field and HTTP answer');
        T::eq('params: must be a list (keys 0, 1, 2... in order), not an array keyed ' . $where, $e?->getMessage(), 'not a list: the message');
    }
    Native::useFfi($counter);
    try {
        $counted = $db->claimed(payoutBody(910009, 2));
        $counter->reset();
        T::throws(ConfigurationException::class, fn () => $counted->stage(CREDIT, ['payout', 1.0, 'p', 1]), 'through the counter');
        T::throws(ConfigurationException::class, fn () => $counted->stage(CREDIT, ['a' => 1]), 'not a list, through the counter');
        T::eq([], $counter->calls, 'refused without calling the library');
        $counted->abandon();
    } finally {
        Native::useFfi(null);
    }
    $e = T::throws(ConfigurationException::class, fn () => $event->stage(CREDIT, ['payout', 1, "\xc3\x28", 1]), 'text that is not UTF-8');
    T::eq('params[2].bytes', $e?->field, 'the library names the parameter\'s bytes');
    $event->reply(true);
    $event->finish();
    T::eq(0, $db->count('credits'), 'nothing was staged');
});

T::test('null, int and string parameters are bound exactly', function (): void {
    // No declared type: SQLite keeps each value as bound (no affinity conversion).
    $db = new Db('CREATE TABLE v (n INTEGER PRIMARY KEY, x)');
    $values = [
        null, 0, 1, -1, PHP_INT_MAX, PHP_INT_MIN, 2 ** 53 + 1, '', '0', '007', ' 1 ', 'NULL', "it's; DROP TABLE v; --",
        'héllo wörld € 💶 ✓', "line\nbreak\ttab", "nul\0inside", str_repeat('é', 3000), '$1', '?',
    ];
    $event = $db->claimed(payoutBody(910010, 1));
    foreach ($values as $n => $value) {
        $event->stage('INSERT INTO v (n, x) VALUES (?, ?)', [$n, $value]);
    }
    $event->reply(true);
    $event->finish();
    $rows = $db->rows('SELECT n, typeof(x), x FROM v ORDER BY n');
    T::eq(count($values), count($rows), 'a row each');
    foreach ($values as $n => $value) {
        $type = $value === null ? 'null' : (is_int($value) ? 'integer' : 'text');
        T::eq([$n, $type, $value], $rows[$n] ?? null, 'value ' . $n . ' (' . get_debug_type($value) . ')');
    }
});

T::test('many parameters and long texts, from temporaries: every byte arrives (no pointer into a freed string)', function (): void {
    $db = new Db('CREATE TABLE v (stmt INTEGER, n INTEGER, x)');
    $event = $db->claimed(payoutBody(910011, 1));
    $expected = [];
    // Rows of two parameters each. 1: 8 values (the kept array's first length); 2: 16 values and
    // 3: 4 texts of 300 bytes (the kept array and text buffer made larger); 4: 600 values, more
    // than the kept array holds; 5: 3 texts of 10,000 bytes, more than the kept text buffer
    // holds; 6: 64 values (the kept array and text buffer again); 7: 10 texts of 1,000 bytes
    // (the kept text buffer made larger again); 8: ints and nulls in the slots earlier
    // statements filled with texts.
    $sizes = [1 => [4, 5], 2 => [8, 5], 3 => [4, 300], 4 => [300, 20], 5 => [3, 10000], 6 => [32, 7], 7 => [10, 1000]];
    foreach ($sizes as $stmt => [$count, $length]) {
        $placeholders = implode(', ', array_fill(0, $count, '(' . $stmt . ', ?, ?)'));
        $params = [];
        for ($i = 0; $i < $count; $i++) {
            // Built here and dropped with $params: temporaries, as a host's are.
            $text = substr(str_repeat(sprintf('%d-%d-%s|', $stmt, $i, bin2hex(random_bytes(3))), intdiv($length, 8) + 2), 0, $length);
            $params[] = $i;
            $params[] = $text;
            $expected[] = [$stmt, $i, $text];
        }
        $event->stage('INSERT INTO v (stmt, n, x) VALUES ' . $placeholders, $params);
        unset($params);
        $garbage = [];
        for ($i = 0; $i < 200; $i++) {
            $garbage[] = str_repeat(chr(65 + $i % 26), $length);   // reuses freed memory
        }
        unset($garbage);
    }
    $event->stage('INSERT INTO v (stmt, n, x) VALUES (8, ?, ?), (8, ?, ?)', [0, PHP_INT_MIN, 1, null]);
    $expected[] = [8, 0, PHP_INT_MIN];
    $expected[] = [8, 1, null];
    finishAndCompare($event, $db, $expected);
});

T::test('the kept buffers grown from their first lengths at their boundaries: every byte arrives', function (): void {
    // The kept array and text buffer as a new process has them (none made yet), then statements
    // at each boundary: 8 and 9 values, 256 and 257 bytes of text, 16,384 and 16,385.
    $native = Native::get();
    foreach (['sqlValues' => null, 'sqlValuesKept' => 0, 'sqlText' => null, 'sqlTextKept' => 0] as $name => $value) {
        (new ReflectionProperty(Native::class, $name))->setValue($native, $value);
    }
    $db = new Db('CREATE TABLE v (stmt INTEGER, n INTEGER, x)');
    $event = $db->claimed(payoutBody(910013, 1));
    $expected = [];
    // [values (pairs of n and x), bytes of text in all]: texts split as evenly as they go.
    $shapes = [1 => [8, 256], 2 => [8, 257], 3 => [9, 257], 4 => [2, 16384], 5 => [2, 16385], 6 => [64, 16384], 7 => [64, 16385], 8 => [9, 256]];
    foreach ($shapes as $stmt => [$values, $bytes]) {
        $rows = intdiv($values, 2);
        $params = [];
        $left = $bytes;
        for ($i = 0; $i < $rows; $i++) {
            $length = $i === $rows - 1 ? $left : intdiv($bytes, $rows);
            $left -= $length;
            $text = substr(str_repeat(sprintf('%d.%d.%s;', $stmt, $i, bin2hex(random_bytes(2))), intdiv($length, 6) + 2), 0, $length);
            $params[] = $i;
            $params[] = $text;
            $expected[] = [$stmt, $i, $text];
        }
        $placeholders = implode(', ', array_fill(0, $rows, '(' . $stmt . ', ?, ?)'));
        if ($values % 2 === 1) {
            $placeholders .= ', (' . $stmt . ', ?, NULL)';
            $params[] = $rows;
            $expected[] = [$stmt, $rows, null];
        }
        $event->stage('INSERT INTO v (stmt, n, x) VALUES ' . $placeholders, $params);
        unset($params);
        $garbage = [];
        for ($i = 0; $i < 100; $i++) {
            $garbage[] = str_repeat(chr(97 + $i % 26), 300);   // reuses freed memory
        }
        unset($garbage);
    }
    finishAndCompare($event, $db, $expected);
});

T::test('abandon(), free() and a dropped event drop the staged statements unrun', function (): void {
    $db = new Db(CREDITS);
    $body = payoutBody(910012, 1);
    $event = $db->claimed($body);
    $event->stage(CREDIT, ['payout', 910012, 'partner-42', 150000]);
    $event->reply(true);
    $event->abandon();
    $e = T::throws(ClaimLostException::class, fn () => $event->finish(), 'finish() after abandon()');
    T::eq([25, 503], [$e?->status, $e?->httpStatus], 'status and HTTP answer');
    T::eq(0, $db->count('credits'), 'abandon(): the table stays empty');
    $event = $db->claimed($body, 2);
    $event->stage(CREDIT, ['payout', 910012, 'partner-42', 150000]);
    $event->free();
    T::eq(0, $db->count('credits'), 'free(): the table stays empty');
    $event = $db->claimed($body, 3);
    $event->stage(CREDIT, ['payout', 910012, 'partner-42', 150000]);
    $event = null;   // destroyed while claimed
    T::eq(0, $db->count('credits'), 'destroyed: the table stays empty');
    $event = $db->claimed($body, 4);
    $event->stage(CREDIT, ['payout', 910012, 'partner-42', 150000]);
    $event->reply(true);
    $event->finish();
    T::eq(1, $db->count('credits'), 'attempt 4 finished: one row');
});

T::test('a claim taken over: finish() throws ClaimLostException and no staged statement ran', function (): void {
    $db = new Db(CREDITS, leaseMs: 30);
    $slow = $db->claimed(payoutBody(910013, 1));
    $slow->stage(CREDIT, ['payout', 910013, 'slow', 1]);
    $slow->reply(true);
    usleep(100_000);   // the lease ends
    $other = $db->claimed(payoutBody(910013, 1), 2);
    $e = T::throws(ClaimLostException::class, fn () => $slow->finish(), 'finish() of the lost claim');
    T::true(str_contains((string) $e?->getMessage(), 'taken over by attempt 2'), 'why: ' . $e?->getMessage());
    T::eq(0, $db->count('credits'), 'the slow delivery\'s statement did not run');
    $other->stage(CREDIT, ['payout', 910013, 'other', 2]);
    $other->reply(true);
    $other->finish();
    T::eq([['other', 2]], $db->rows('SELECT player, amount FROM credits'), 'only the delivery holding the claim credited');
});

T::test('a careless host passes the last error back: its message as the SQL and as a parameter', function (): void {
    $db = new Db('CREATE TABLE log (message TEXT, body TEXT)');
    $event = $db->claimed(payoutBody(910014, 1));
    $e = T::throws(ConfigurationException::class, fn () => $event->stage('COMMIT'), 'COMMIT');
    $message = (string) $e?->getMessage();
    T::true(str_starts_with($message, 'sql: '), 'a message: ' . $message);
    // No statement a credit needs: refused at staging, naming what it starts with.
    $again = T::throws(ConfigurationException::class, fn () => $event->stage($message), 'the message as SQL');
    T::eq('sql', $again?->field, 'the message as SQL: sql named');
    T::true(str_contains((string) $again?->getMessage(), 'starts with SQL'), 'what it starts with: ' . $again?->getMessage());
    $event->stage('INSERT INTO no_such_table VALUES (?)', [$message]);
    $event->stage('INSERT INTO log VALUES (?, ?)', [$message, (string) $e?->responseBody]);
    $event->reply(true);
    $failed = T::throws(JournalException::class, fn () => $event->finish(), 'finish() with a missing table');
    T::eq('statements[0]', $failed?->field, 'the missing table, statement 0, fails');
    T::true(str_contains((string) $failed?->getMessage(), 'no_such_table'), 'named: ' . $failed?->getMessage());
    $event->abandon();
    // The same, with a failure's message and body passed as parameters of a statement that works.
    $event = $db->claimed(payoutBody(910014, 1), 2);
    $event->stage('INSERT INTO log VALUES (?, ?)', [(string) $failed?->getMessage(), (string) $failed?->responseBody]);
    $event->stage('INSERT INTO log VALUES (?, ?)', [$message, (string) $e?->responseBody]);
    $event->reply(true);
    $event->finish();
    T::eq([[(string) $failed?->getMessage(), (string) $failed?->responseBody], [$message, (string) $e?->responseBody]], $db->rows('SELECT message, body FROM log ORDER BY rowid'), 'both stored byte for byte');
});

T::test('FFI calls: one sp_event_stage per statement, on top of the five of a new delivery', function (): void {
    $db = new Db(CREDITS);
    $counter = new CountingFfi(Library::ffi());
    Native::useFfi($counter);
    try {
        $receiver = new Receiver(TOKEN, sources: 'any', journal: $db->journal);
        $counter->reset();
        $event = $receiver->handle(TOKEN, '127.0.0.1', payoutBody(910015, 1));
        $event->begin();
        $event->stage(CREDIT, ['payout', 910015, 'partner-42', 150000]);
        $event->stage('UPDATE credits SET amount = amount + ?', [1]);
        $event->reply(true);
        $event->finish();
        $event = null;
        T::eq(['sp_receiver_handle' => 1, 'sp_event_begin' => 1, 'sp_event_stage' => 2, 'sp_event_reply' => 1, 'sp_event_finish' => 1, 'sp_event_free' => 1], $counter->calls, 'seven for two statements');
    } finally {
        Native::useFfi(null);
    }
    T::eq([[150001]], $db->rows('SELECT amount FROM credits'), 'both ran');
});

T::test('staging does not grow PHP\'s heap', function (): void {
    $db = new Db(CREDITS);
    $run = static function (int $first, int $events) use ($db): void {
        for ($i = $first; $i < $first + $events; $i++) {
            $event = $db->claimed(payoutBody(920000 + $i, $i + 1));
            for ($s = 0; $s < 5; $s++) {
                $event->stage(CREDIT, ['payout', 1_000_000 * $s + $i, 'partner-' . $i, $i * 100]);
            }
            $event->stage('INSERT INTO credits VALUES (?, ?, ?, ?)', array_merge(['big', $i, str_repeat('x', 20000)], [1]));
            $event->abandon();   // dropped unrun: the test measures staging, not the database
        }
    };
    $run(0, 50);   // warm-up: the kept arrays, the library's pools
    $before = memory_get_usage();
    $run(50, 300);
    $grown = memory_get_usage() - $before;
    T::true($grown < 4096, 'heap grew by ' . $grown . ' bytes over 300 events of 6 statements');
    T::eq(0, $db->count('credits'), 'nothing ran');
});

// The README's "Staged statements" snippet as it stands, run with respond() recording the answer.

/** @var array{0: int, 1: string}|null what the snippet answered */
$snippetAnswer = null;

/**
 * Replies, finishes (the staged statements run) and checks that table `v` holds exactly the
 * rows `$expected` ([stmt, n, x], in order of stmt and n).
 *
 * @param list<array{int, int, mixed}> $expected
 */
function finishAndCompare(Event $event, Db $db, array $expected): void
{
    $event->reply(true);
    $event->finish();
    $rows = $db->rows('SELECT stmt, n, x FROM v ORDER BY stmt, n');
    T::eq(count($expected), count($rows), 'every row');
    $wrong = array_keys(array_filter(array_map(static fn (array $e, ?array $r): bool => $e !== $r, $expected, $rows)));
    T::eq([], $wrong, 'every value exact (wrong rows listed)');
}

function respond(int $status, string $json): void
{
    $GLOBALS['snippetAnswer'] = [$status, $json];
}

/**
 * Runs the snippet for $body from $receiver; returns its answer (null: it answered nothing, as
 * for a Done claim, which the snippet leaves to the code above it).
 *
 * @return array{0: int, 1: string}|null
 */
function runStagedSnippet(Receiver $receiver, string $body): ?array
{
    $readme = (string) file_get_contents(PACKAGE . '/README.md');
    if (preg_match('/\n### Staged statements[^\n]*\n.*?```php\n(.*?)```/s', $readme, $m) !== 1) {
        throw new RuntimeException('no PHP snippet under "Staged statements" in README.md');
    }
    $event = $receiver->handle(TOKEN, '127.0.0.1', $body);
    $claim = $event->begin();
    $GLOBALS['snippetAnswer'] = null;
    $log = ini_set('error_log', '/dev/null');
    try {
        (static function (string $code, Event $event, SlotPartner\Claim $claim): void {
            eval($code);
        })($m[1], $event, $claim);
    } finally {
        ini_set('error_log', (string) $log);
    }
    return $GLOBALS['snippetAnswer'];
}

T::test('the README snippet: the credit commits with the reply, never twice, and a failed finish() answers 503 and credits nothing', function (): void {
    $db = new Db('CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, player TEXT NOT NULL, '
        . 'amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))');
    T::eq([200, '{"payout":{"success":true,"errorMessage":""}}'], runStagedSnippet($db->receiver, payoutBody(910020, 1)), 'a new payout: 200');
    T::eq([['payout', 910020, 'partner-42', 150000]], $db->rows('SELECT * FROM credits'), 'credited once');
    T::eq(null, runStagedSnippet($db->receiver, payoutBody(910020, 1)), 'a repeat: Done, left to the code above');
    T::eq(1, $db->count('credits'), 'a repeat credits nothing');
    // A credit the ledger holds already for this transaction (a run whose reply was not stored):
    // ON CONFLICT DO NOTHING credits nothing twice, and the reply is stored.
    $db->pdo->exec("INSERT INTO credits VALUES ('payout', 910021, 'elsewhere', 1)");
    T::eq(200, runStagedSnippet($db->receiver, payoutBody(910021, 2))[0] ?? null, 'credited before: 200');
    $credited = [[910020, 150000], [910021, 1]];
    T::eq($credited, $db->rows('SELECT transaction_id, amount FROM credits ORDER BY transaction_id'), 'not credited twice');
    // The ledger's table gone: the staged INSERT fails at finish().
    $db->pdo->exec('ALTER TABLE credits RENAME TO credits_away');
    $down = runStagedSnippet($db->receiver, payoutBody(910022, 3));
    $db->pdo->exec('ALTER TABLE credits_away RENAME TO credits');
    T::eq(503, $down[0] ?? null, 'the statement failed: 503');
    T::eq('ledger_unavailable', json_decode($down[1] ?? '', true)['error']['code'] ?? null, 'the ledger_unavailable body');
    T::eq($credited, $db->rows('SELECT transaction_id, amount FROM credits ORDER BY transaction_id'), 'nothing credited');
    $claim = $db->receiver->parse(payoutBody(910022, 3))->begin();
    T::eq([Outcome::New, 2], [$claim->outcome, $claim->attempt], 'abandoned: the next delivery is attempt 2');
});

T::finish();
