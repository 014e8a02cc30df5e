#!/usr/bin/env python3
"""What a delivery's transaction costs PostgreSQL by how it is written on the wire.

    python3 benches/pg_sync.py [ROUNDS] [SECONDS]     (3 rounds of 10 s a variant by default)

The same statements, prepared once a connection by name, sent three ways over the extended
protocol (raw messages on a socket, so that nothing else differs):

  roundtrips  each statement then a Sync, the answer awaited before the next (PDO, psycopg);
  sync_each   every statement of the transaction written at once, a Sync after each;
  as_library  written at once as the journal writes them: its settings and guard in one
              simple-protocol batch (`begin_batch`), the credit and the storing statement each
              ending in a Sync (tokio-postgres writes one a statement), `COMMIT` a batch of its
              own: four answers to wait for;
  one_sync    every statement written at once, one Sync at the end (libpq's pipeline mode).

Two transactions: the journal's, for a delivery claimed at finish with a staged credit (BEGIN,
the two SET LOCALs, the guard, the credit, the storing statement, COMMIT: the statements of
schema version 6 as the library writes them with statements kept prepared, copied here; the
script refuses a journal of another version), and the hand-written one (BEGIN, the idempotency
row, the credit, COMMIT). Four client processes, synchronous_commit off (the disk out of it),
rounds alternating; printed: the CPU of every PostgreSQL process a transaction (/proc, as make
bench-e2e reads it), medians and each round's.

Needs PostgreSQL, PHP with PDO PostgreSQL and the library built; installs the packages it lacks
as make bench-e2e does (apt-get, as root), else names them and stops.
"""

from __future__ import annotations

import multiprocessing
import pathlib
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "e2e"))
import run  # noqa: E402

SCHEMA_VERSION = "6"
# The numbering lock's key and the journal's first numbering, as a new journal has them.
JOURNAL = [
    "BEGIN ISOLATION LEVEL READ COMMITTED",
    "SET LOCAL lock_timeout = 5000",
    "SET LOCAL synchronous_commit = off",
    "SELECT pg_advisory_xact_lock_shared(8318265534402355826), set_config('slotpartner.guard', 'on', true)",
    "INSERT INTO credits (kind, transaction_id, player, amount) VALUES ('refund', $1::bigint, 'player-1', 10) "
    "ON CONFLICT (kind, transaction_id) DO NOTHING",
    "WITH durable AS (SELECT set_config('synchronous_commit', 'off', true)), "
    "numbered AS (SELECT 1 FROM sp_journal_meta WHERE key = 'numbering' AND value = 1 AND EXISTS "
    f"(SELECT 1 FROM sp_journal_meta WHERE key = 'schema_version' AND value = {SCHEMA_VERSION})), "
    "finished AS (INSERT INTO sp_journal_delivery (key, name, transaction_id, first_index, content, state, token, "
    "attempts, created_ms, updated_ms, lease_until_ms, finished_ms, reply) SELECT 'gameSessionBuyRefund:' || $1::bigint, "
    "'gameSessionBuyRefund', $1::bigint, $1::bigint, repeat('x', 400), 'done', '\\x0123456789abcdef0123456789abcdef'::bytea, 1, "
    "(extract(epoch from clock_timestamp()) * 1000)::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint, 0, "
    "(extract(epoch from clock_timestamp()) * 1000)::bigint, '{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}'::bytea "
    "FROM numbered WHERE current_setting('slotpartner.guard', true) = 'on' ON CONFLICT (key) DO NOTHING RETURNING 1), "
    "seen AS (INSERT INTO sp_journal_seen (idx, at_ms) SELECT $1::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint "
    "WHERE $1::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM finished) ON CONFLICT DO NOTHING) "
    "SELECT (SELECT count(*) FROM finished), current_setting('slotpartner.guard', true), "
    "(SELECT key FROM sp_journal_delivery WHERE $1::bigint IS NOT NULL AND first_index = $1::bigint "
    "AND key <> 'gameSessionBuyRefund:' || $1::bigint AND EXISTS (SELECT 1 FROM finished) LIMIT 1), "
    "EXISTS (SELECT 1 FROM numbered) FROM durable",
    "COMMIT",
]
HANDWRITTEN = [
    "BEGIN",
    "INSERT INTO callbacks (kind, transaction_id, content_hash, event_index, reply) VALUES ('refund', $1::bigint, "
    "'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', $1::bigint, "
    "'{\"refund\":{\"success\":true,\"errorMessage\":\"\"}}') ON CONFLICT DO NOTHING",
    "INSERT INTO credits (kind, transaction_id, player, amount) VALUES ('refund', $1::bigint, 'player-1', 10)",
    "COMMIT",
]
TRANSACTIONS = {"journal": JOURNAL, "handwritten": HANDWRITTEN}
# The journal's settings and guard (its first four statements), sent as one batch by `as_library`.
BATCHED = 4
VARIANTS = [
    ("journal", "roundtrips"),
    ("journal", "sync_each"),
    ("journal", "as_library"),
    ("journal", "one_sync"),
    ("handwritten", "roundtrips"),
    ("handwritten", "one_sync"),
]
CLIENTS = 4


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def text(value: str) -> bytes:
    return value.encode() + b"\0"


SYNC = message(b"S", b"")
EXECUTE = message(b"E", text("") + struct.pack("!i", 0))


def query(sql: str) -> bytes:
    """A simple-protocol batch: one answer (ReadyForQuery) for all its statements."""
    return message(b"Q", text(sql))


def parse(name: str, sql: str) -> bytes:
    return message(b"P", text(name) + text(sql) + struct.pack("!h", 0))


def bind(name: str, parameters: list[bytes]) -> bytes:
    body = text("") + text(name) + struct.pack("!hh", 0, len(parameters))
    for value in parameters:
        body += struct.pack("!i", len(value)) + value
    return message(b"B", body + struct.pack("!h", 0))


class Connection:
    """One connection speaking the protocol by hand (trust authentication, loopback)."""

    def __init__(self, port: int, database: str) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = struct.pack("!i", 196608) + text("user") + text(run.PG_USER) + text("database") + text(database) + b"\0"
        self.socket.sendall(struct.pack("!i", len(body) + 4) + body)
        self.buffer = b""
        self.until_ready(1)

    def read(self) -> tuple[bytes, bytes]:
        while len(self.buffer) < 5:
            self.receive()
        size = struct.unpack("!i", self.buffer[1:5])[0]
        while len(self.buffer) < 1 + size:
            self.receive()
        kind, body, self.buffer = self.buffer[:1], self.buffer[5 : 1 + size], self.buffer[1 + size :]
        return kind, body

    def receive(self) -> None:
        data = self.socket.recv(65536)
        if not data:
            raise SystemExit("pg_sync: the server closed the connection")
        self.buffer += data

    def until_ready(self, count: int) -> None:
        """Reads up to the count-th ReadyForQuery; an error message ends the run."""
        for _ in range(count):
            while True:
                kind, body = self.read()
                if kind == b"E":
                    raise SystemExit("pg_sync: " + body.replace(b"\0", b" ").decode(errors="replace"))
                if kind == b"Z":
                    break


def client(port: int, database: str, statements: list[str], mode: str, seconds: float, first: int, done) -> None:
    connection = Connection(port, database)
    names = [f"s{i}" for i in range(len(statements))]
    connection.socket.sendall(b"".join(parse(n, s) for n, s in zip(names, statements)) + SYNC)
    connection.until_ready(1)
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        index = str(first + count).encode()
        executes = [bind(n, [index] if "$1" in s else []) + EXECUTE for n, s in zip(names, statements)]
        if mode == "roundtrips":
            for execute in executes:
                connection.socket.sendall(execute + SYNC)
                connection.until_ready(1)
        elif mode == "sync_each":
            connection.socket.sendall(b"".join(execute + SYNC for execute in executes))
            connection.until_ready(len(executes))
        elif mode == "as_library":
            middle = executes[BATCHED:-1]
            batch = query("; ".join(statements[:BATCHED]))
            connection.socket.sendall(batch + b"".join(execute + SYNC for execute in middle) + query(statements[-1]))
            connection.until_ready(len(middle) + 2)
        else:
            connection.socket.sendall(b"".join(executes) + SYNC)
            connection.until_ready(1)
        count += 1
    done.put(count)


def missing_packages() -> list[str]:
    """The Debian packages this run needs and the machine lacks: PostgreSQL, and PHP with PDO
    PostgreSQL (benches/e2e/db.php makes the tables; FFI comes with php-cli)."""
    wanted = [] if run.postgres_bin() else ["postgresql"]
    version = run.php_version()
    modules = subprocess.run(["php", "-m"], capture_output=True, text=True).stdout.split() if version else []
    if not version:
        wanted.append("php-cli")
    if "pdo_pgsql" not in modules:
        wanted.append(f"php{version}-pgsql" if version else "php-pgsql")
    return wanted


def main() -> int:
    try:
        run.install(missing_packages())
    except run.Failed as failed:
        print(f"pg_sync: {failed}")
        return 1
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    work = pathlib.Path(tempfile.mkdtemp(prefix="pg-sync-"))
    work.chmod(0o711)
    servers = run.Servers(work)
    try:
        port = run.start_postgres(servers, work)
        database = "bench"
        run.psql(port, "postgres", f"CREATE DATABASE {database}")
        url = f"postgres://{run.PG_USER}@127.0.0.1:{port}/{database}?sslmode=disable"
        dsn = f"pgsql:host=127.0.0.1;port={port};dbname={database}"
        run.as_user(["php", str(run.HERE / "db.php"), "library", url, dsn, run.PG_USER], "the journal")
        run.as_user(["php", str(run.HERE / "db.php"), "handwritten", dsn, run.PG_USER], "the hand-written tables")
        version = run.psql(port, database, "SELECT value FROM sp_journal_meta WHERE key = 'schema_version'").strip()
        if version != SCHEMA_VERSION:
            print(f"pg_sync: the journal is at schema version {version}; these statements are version {SCHEMA_VERSION}'s")
            return 1
        run.psql(port, "postgres", f"ALTER DATABASE {database} SET synchronous_commit = off")
        variants = VARIANTS
        cpu: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        first = 1
        for r in range(rounds):
            for transaction, mode in variants if r % 2 == 0 else variants[::-1]:
                run.psql(port, database, "CHECKPOINT")
                done: multiprocessing.Queue = multiprocessing.Queue()
                before = run.cpu_by_program().get("PostgreSQL", 0.0)
                clients = [
                    multiprocessing.Process(
                        target=client,
                        args=(port, database, TRANSACTIONS[transaction], mode, seconds, first + i * 10**8, done),
                    )
                    for i in range(CLIENTS)
                ]
                for c in clients:
                    c.start()
                count = sum(done.get(timeout=seconds + 60) for _ in clients)
                for c in clients:
                    c.join()
                used = run.cpu_by_program().get("PostgreSQL", 0.0) - before
                first += CLIENTS * 10**8
                cpu[(transaction, mode)].append(used * 1e6 / count)
                print(f"round {r + 1}: {transaction:11} {mode:10} {count / seconds:7.0f}/s  {cpu[(transaction, mode)][-1]:5.0f} us", flush=True)
        print(f"\nPostgreSQL's CPU a transaction ({CLIENTS} clients, median of {rounds} rounds; each round's):")
        for (transaction, mode), values in cpu.items():
            print(f"  {transaction:11} {mode:10} {statistics.median(values):5.0f} us  {[round(v) for v in values]}")
        return 0
    finally:
        servers.stop_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
