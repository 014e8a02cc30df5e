<?php

declare(strict_types=1);

/*
 * db.php: the databases of make bench-e2e (run by benches/e2e/run.py, as the servers' user).
 *
 *   php db.php library JOURNAL_URL LEDGER_DSN [USER]   creates the journal (through the binding)
 *                                                      and the ledger table beside it
 *   php db.php handwritten DSN [USER]                  creates the idempotency and ledger tables
 *   php db.php totals DSN [USER]                       prints "ROWS AMOUNT PAYOUTS REFUNDS" of
 *                                                      the ledger
 */

const CREDITS = 'CREATE TABLE IF NOT EXISTS credits (kind TEXT NOT NULL, transaction_id BIGINT NOT NULL, '
    . 'player TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (kind, transaction_id))';
const CALLBACKS = 'CREATE TABLE IF NOT EXISTS callbacks (kind TEXT NOT NULL, transaction_id BIGINT NOT NULL, '
    . 'content_hash TEXT NOT NULL, event_index BIGINT, reply TEXT NOT NULL, PRIMARY KEY (kind, transaction_id))';

function connect(string $dsn, ?string $user): PDO
{
    $pdo = new PDO($dsn, $user, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    if (str_starts_with($dsn, 'sqlite:')) {
        $pdo->exec('PRAGMA journal_mode = WAL');
    }
    return $pdo;
}

[$command, $target] = [$argv[1] ?? '', $argv[2] ?? ''];
switch ($command) {
    case 'library':
        require dirname(__DIR__, 2) . '/bindings/php/autoload.php';
        new SlotPartner\Journal($target);   // created with its schema, then closed
        connect($argv[3], $argv[4] ?? null)->exec(CREDITS);
        break;
    case 'handwritten':
        $pdo = connect($target, $argv[3] ?? null);
        $pdo->exec(CALLBACKS);
        $pdo->exec(CREDITS);
        break;
    case 'totals':
        $row = connect($target, $argv[3] ?? null)->query(
            "SELECT COUNT(*), COALESCE(SUM(amount), 0), COUNT(*) FILTER (WHERE kind = 'payout'), "
            . "COUNT(*) FILTER (WHERE kind = 'refund') FROM credits"
        )->fetch(PDO::FETCH_NUM);
        echo implode(' ', $row), "\n";
        break;
    default:
        fwrite(STDERR, "usage: db.php library JOURNAL_URL LEDGER_DSN [USER] | handwritten DSN [USER] | totals DSN [USER]\n");
        exit(2);
}
