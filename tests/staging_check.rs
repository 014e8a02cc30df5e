//! The check of a staged statement (`Staged::new`) against the databases themselves, on SQLite and
//! on a throw-away PostgreSQL cluster (skipped with a message when PostgreSQL is not installed).
//!
//! The reported escapes: `-- note\rCOMMIT` (PostgreSQL ends a `--` comment at a carriage return)
//! and a byte order mark before `COMMIT` (SQLite reads it as a blank) were accepted; the server
//! committed the staged credit without the reply, and the documented flow (abandon, answer 503)
//! credited again on every redelivery. Now refused, and three deliveries credit once, with the
//! claim written by `begin` and at finish. A staged statement's failure under claim at finish no
//! longer speaks of a claim that was never written.
//!
//! The proof that the check agrees with the servers' own lexers: a few thousand texts made by a
//! seeded generator (every blank and line end either lexer accepts and some it does not, line
//! comments ended by each, nested and unterminated block comments, empty statements, each
//! database's quoting) before statements a credit needs and before transaction and session
//! control, and allowed statements followed by fragments, a `;` and control. Each is judged by
//! the check and run, as the journal runs a staged statement, inside a transaction by both
//! servers, which are watched: PostgreSQL's command tag and transaction status, savepoints, the
//! transaction's settings, and the session after the commit (settings, prepared statements,
//! listened channels, advisory locks, temporary tables, cursors, prepared transactions);
//! SQLite's transaction, savepoints and session (its `PRAGMA`s, attached databases, temporary
//! tables). Nothing either server ran as transaction or session control, and nothing it found
//! to be several statements, passes the check; what both ran as an allowed statement passes.

use slotpartner::journal::{Begin, Journal, JournalOptions, SqlValue, Staged};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/backends.rs"]
mod backends;
use backends::{Backend, Postgres, Sqlite};

#[path = "e2e/refunds.rs"]
mod refunds;
use refunds::{new_claim, plain_refund, reply};

fn at_finish() -> JournalOptions {
    JournalOptions { claim_at_finish: true, ..JournalOptions::default() }
}

/// A journal at `url` with a ledger beside it that has no unique key on the transaction, as the
/// report's had: a second run of the credit is a second row.
fn journal_with_keyless_ledger(b: &dyn Backend, url: &str, options: &JournalOptions) -> Journal {
    let journal = Journal::open(url, options).unwrap_or_else(|e| panic!("open {url}: {e}"));
    let id = if b.name() == "postgres" { "BIGSERIAL PRIMARY KEY" } else { "INTEGER PRIMARY KEY" };
    b.exec(url, &format!("CREATE TABLE credits (id {id}, transaction_id BIGINT NOT NULL, amount BIGINT NOT NULL)"));
    journal
}

/// Three deliveries of one refund, each handled as the README says: the credit staged, with
/// `hidden` after it when staging accepts it; a failed finish abandoned (answer 503, the service
/// delivers again). `hidden` is refused at staging, and the ledger holds at most one credit.
fn a_hidden_commit_never_credits_twice(b: &dyn Backend, hidden: &str) {
    for (mode, options) in [("begin", JournalOptions::default()), ("at_finish", at_finish())] {
        let url = b.url(&format!("hidden_commit_{mode}_{}", hidden.len()));
        let journal = journal_with_keyless_ledger(b, &url, &options);
        let credit = format!("INSERT INTO credits (transaction_id, amount) VALUES ({}, 150000)", b.param(1));
        for _ in 0..3 {
            let claim = match journal.begin(&plain_refund(1)).expect("begin") {
                Begin::New(claim) => claim,
                Begin::Done(_) => continue,
                other => panic!("{mode}: expected New or Done, got {other:?}"),
            };
            let mut staged = vec![Staged::new(credit.clone(), vec![SqlValue::Int(1)]).unwrap()];
            staged.extend(Staged::new(hidden, Vec::new()));
            if journal.finish_with(&claim, &reply(1), &staged).is_err() {
                journal.abandon(&claim).expect("abandon");
            }
        }
        let credits = b.count(&url, "SELECT count(*) FROM credits");
        assert!(credits <= 1, "{mode}: {hidden:?}: {credits} credits from 3 deliveries");
        let error = Staged::new(hidden, Vec::new()).err();
        assert_eq!(error.as_ref().map(|e| e.field.as_str()), Some("sql"), "{mode}: {hidden:?} accepted at staging");
    }
}

/// A staged statement failing under claim at finish: nothing was written for the claim, so the
/// error does not say it is held; with the claim written by `begin`, it does.
fn a_failure_tells_what_stays_of_the_claim(b: &dyn Backend) {
    for (mode, options) in [("begin", JournalOptions::default()), ("at_finish", at_finish())] {
        let url = b.url(&format!("what_stays_{mode}"));
        let journal = journal_with_keyless_ledger(b, &url, &options);
        let claim = new_claim(&journal, &plain_refund(1));
        let missing = Staged::new("INSERT INTO no_such_table (x) VALUES (1)", Vec::new()).unwrap();
        let error = journal.finish_with(&claim, &reply(1), &[missing]).unwrap_err();
        assert_eq!(error.field, "statements[0]", "{mode}: {error}");
        assert!(error.message.contains("nothing was stored"), "{mode}: {error}");
        if mode == "begin" {
            assert!(error.message.contains("the claim is still held"), "{mode}: {error}");
        } else {
            assert!(!error.message.contains("held"), "{mode}: no claim was written: {error}");
            assert!(error.message.contains("the next delivery runs the logic again"), "{mode}: {error}");
        }
    }
}

#[test]
fn sqlite_the_reported_problems() {
    let b = Sqlite(TempDir::new("slotpartner-staging-check"));
    a_hidden_commit_never_credits_twice(&b, "\u{feff}COMMIT");
    a_hidden_commit_never_credits_twice(&b, "-- note\rCOMMIT");
    a_failure_tells_what_stays_of_the_claim(&b);
}

#[test]
fn postgres_the_reported_problems() {
    let Some(cluster) = Cluster::start("PostgreSQL staging check") else { return };
    let b = Postgres(cluster);
    a_hidden_commit_never_credits_twice(&b, "-- note\rCOMMIT");
    a_hidden_commit_never_credits_twice(&b, "\u{feff}COMMIT");
    a_failure_tells_what_stays_of_the_claim(&b);
    a_setting_that_changes_the_parsing_is_refused(&b);
}

/// Reported by a review: `SET LOCAL standard_conforming_strings = off` passed the check, and
/// after it PostgreSQL reads `SELECT 'x\'' INTO sneaky --'` (two strings to the check, a
/// plain `SELECT`) as `SELECT ... INTO`, creating a table. Shown on the server, in a
/// transaction rolled back; the setting is now refused, however it is named.
fn a_setting_that_changes_the_parsing_is_refused(b: &Postgres) {
    let fooled = r"SELECT 'x\'' INTO sneaky --'";
    assert!(Staged::new(fooled, vec![]).is_ok(), "the check reads {fooled} as a plain SELECT");
    let mut client = postgres::Client::connect(&b.0.schema_url("parsing_setting"), postgres::NoTls).unwrap();
    let mut tx = client.transaction().unwrap();
    tx.batch_execute("SET LOCAL standard_conforming_strings = off").unwrap();
    tx.execute(fooled, &[]).unwrap();
    let created: i64 = tx.query_one("SELECT count(*) FROM pg_class WHERE relname = 'sneaky'", &[]).unwrap().get(0);
    assert_eq!(created, 1, "the server read {fooled} as SELECT ... INTO");
    tx.rollback().unwrap();
    for setting in [
        "SET LOCAL standard_conforming_strings = off",
        "SET LOCAL \"standard_conforming_strings\" TO off",
        "SELECT set_config('standard_conforming_strings', 'off', true)",
        "SET LOCAL client_encoding = 'SJIS'",
        "SET LOCAL backslash_quote = on",
    ] {
        let error = Staged::new(setting, vec![]).expect_err(setting);
        assert_eq!(error.field, "sql", "{setting}: {error}");
        assert!(error.message.contains("names the setting"), "{setting}: {error}");
    }
}

// ---------------------------------------------------------------------------------------------
// The proof: generated statements, judged by the check and run by both real servers.

/// Statements a credit needs, valid on both databases (`probe` holds a row `n = 0`).
const ALLOWED_ON_BOTH: &[&str] = &[
    "INSERT INTO probe (n) VALUES (1)",
    "INSERT INTO probe (n) VALUES (1) ON CONFLICT DO NOTHING",
    "UPDATE probe SET n = n WHERE n = 0",
    "DELETE FROM probe WHERE n = -1",
    "SELECT 4242",
    "WITH s AS (SELECT 1 AS n) INSERT INTO probe (n) SELECT n FROM s",
];

/// Statements a credit needs that one database knows.
const ALLOWED_ON_ONE: &[&str] = &[
    "SET LOCAL lock_timeout = '3s'",
    "MERGE INTO probe USING (SELECT 2 AS n) s ON probe.n = s.n WHEN NOT MATCHED THEN INSERT (n) VALUES (s.n)",
    "REPLACE INTO probe (n) VALUES (1)",
];

/// Transaction and session control of either database, each with an effect the probes see when
/// it runs inside the journal's transaction (the savepoint `base` and the session's `base_*`
/// things are made before each statement; `probe_session` is a procedure setting
/// `lock_timeout` for the session).
const CONTROL: &[&str] = &[
    "COMMIT",
    "COMMIT WORK",
    "COMMIT AND CHAIN",
    "END",
    "END TRANSACTION",
    "ROLLBACK",
    "ROLLBACK AND CHAIN",
    "ABORT",
    "BEGIN",
    "BEGIN IMMEDIATE",
    "START TRANSACTION",
    "PREPARE TRANSACTION 'probe_gid'",
    "SAVEPOINT sp",
    "RELEASE SAVEPOINT base",
    "RELEASE base",
    "ROLLBACK TO SAVEPOINT base",
    "ROLLBACK TO base",
    "SET lock_timeout = '1s'",
    "SET SESSION lock_timeout = '1s'",
    "set search_path = pg_catalog, public",
    "SET TRANSACTION READ ONLY",
    "SET TIME ZONE 'Asia/Tokyo'",
    "RESET lock_timeout",
    "RESET ALL",
    "DISCARD TEMP",
    "DISCARD PLANS",
    "DEALLOCATE ALL",
    "DEALLOCATE base_statement",
    "PREPARE p AS SELECT 1",
    "LISTEN probe_channel",
    "UNLISTEN *",
    "LOAD 'plpgsql'",
    "CALL probe_session()",
    "DO $$ BEGIN PERFORM set_config('lock_timeout', '3s', false); END $$",
    "VACUUM",
    "CHECKPOINT",
    "SELECT 1 INTO TEMP probe_temp",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "PRAGMA busy_timeout = 1234",
    "PRAGMA cache_size = 77",
    "PRAGMA query_only = 1",
    "PRAGMA recursive_triggers = 1",
    "ATTACH ':memory:' AS other",
    "DETACH other",
    "CREATE TEMP TABLE probe_temp (n INTEGER)",
];

/// What may come before a statement: every blank and line end either lexer knows and some it
/// does not, comments ended by each, nested and unterminated ones, empty statements, and quoting
/// (each database's own: `E''`, dollar quoting, `U&`, brackets, backticks, blobs).
const PRELUDE: &[&str] = &[
    " ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\u{c}",
    "\u{b}",
    "\u{a0}",
    "\u{2028}",
    "\u{feff}",
    "\u{85}",
    "\u{3000}",
    "--",
    "-- note",
    "-- note\n",
    "-- note\r",
    "-- note\r\n",
    "-- note\u{b}",
    "-- note\u{c}",
    "-- note\u{2028}",
    "-- */\n",
    "-- /*\r",
    "/**/",
    "/* note */",
    "/*/ note */",
    "/* a /* b */ c */",
    "/* a /* b */",
    "/* note",
    "/* -- */",
    "/* '*/",
    "/*\r*/",
    "*/",
    ";",
    " ; ",
    "E'\\''",
    "E'\\'",
    "'\\'",
    "'x'",
    "''",
    "$$",
    "$$ x $$",
    "$t$ ; $t$",
    "$t$",
    "U&\"x\"",
    "U&'\\0041'",
    "U&\"",
    "\"x\"",
    "[x]",
    "[",
    "`x`",
    "x'00'",
];

/// Fragments between an allowed statement and a `;` and control after it: what might hide the
/// second statement from one lexer and not from the other.
const BETWEEN: &[&str] = &[
    " ", "'", "E'", "\\", "''", "$$", "$t$", "--", "\n", "\r", "/*", "*/", "\"", "U&'", "[", "]", "`", "x'", "(", ")",
    "$a(", ";", "\u{feff}",
];

/// What may follow a statement.
const AFTER: &[&str] = &["", ";", " ;", "\n", " -- end", "; -- end", ";;", " /* end */"];

/// A seeded generator (SplitMix64): the same cases on every run.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        usize::try_from((z ^ (z >> 31)) % n as u64).unwrap()
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    fn some(&mut self, from: &[&str], most: usize) -> String {
        (0..self.below(most + 1)).map(|_| self.pick(from)).collect()
    }
}

/// A generated text, and whether its statement is one a credit needs on both databases.
struct Case {
    text: String,
    allowed_on_both: bool,
}

/// The reported texts, then `count` generated ones: a prelude before a statement (allowed or
/// control), and an allowed statement with fragments, a `;` and control after it.
fn cases(count: usize) -> Vec<Case> {
    let mut cases: Vec<Case> = ["-- note\rCOMMIT", "\u{feff}COMMIT", "SELECT set_config('x.y', 'z', true); COMMIT"]
        .into_iter()
        .map(|text| Case { text: text.to_owned(), allowed_on_both: false })
        .collect();
    let mut seeded = Seeded(33);
    while cases.len() < count {
        let case = match seeded.below(4) {
            0 => {
                let statement = seeded.pick(ALLOWED_ON_BOTH);
                let text = format!("{}{statement}{}", seeded.some(PRELUDE, 4), seeded.pick(AFTER));
                Case { text, allowed_on_both: true }
            }
            1 => {
                let statement = seeded.pick(ALLOWED_ON_ONE);
                let text = format!("{}{statement}{}", seeded.some(PRELUDE, 3), seeded.pick(AFTER));
                Case { text, allowed_on_both: false }
            }
            2 => {
                let statement = seeded.pick(CONTROL);
                let text = format!("{}{statement}{}", seeded.some(PRELUDE, 4), seeded.pick(AFTER));
                Case { text, allowed_on_both: false }
            }
            _ => {
                let (first, control) = (seeded.pick(ALLOWED_ON_BOTH), seeded.pick(CONTROL));
                let text = format!("{first} {}; {control}{}", seeded.some(BETWEEN, 4), seeded.some(BETWEEN, 2));
                Case { text, allowed_on_both: false }
            }
        };
        cases.push(case);
    }
    cases
}

/// What a server did with a text run as a staged statement is, inside the journal's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ran {
    /// Refused (an error), or a text that holds no statement.
    Refused(String),
    /// Refused as several statements in one prepared text.
    Several,
    /// Ran: PostgreSQL's command tag, or `ran` on SQLite.
    Statement(String),
}

/// A server's account of a text: what it ran, and the transaction or session control it saw
/// done, if any.
#[derive(Debug)]
struct Seen {
    ran: Ran,
    control: Option<String>,
}

#[test]
fn the_check_agrees_with_both_servers() {
    const CASES: usize = 3000;
    let dir = TempDir::new("slotpartner-staging-proof");
    let mut sqlite = SqliteProbe::open(&dir);
    let cluster = Cluster::start("the staging check against PostgreSQL");
    let mut postgres = cluster.as_ref().map(PostgresProbe::start);
    let started = std::time::Instant::now();
    let (mut passed, mut control_seen, mut several_seen, mut ran_on_both) = (0, [0, 0], [0, 0], 0);
    for case in cases(CASES) {
        let staged = Staged::new(case.text.clone(), Vec::new());
        if let Err(e) = &staged {
            assert_eq!(e.field, "sql", "{:?}: {e}", case.text);
        }
        let seen = [postgres.as_mut().map(|p| p.run(&case.text)), Some(sqlite.run(&case.text))];
        for (at, seen) in seen.iter().enumerate() {
            let Some(seen) = seen else { continue };
            control_seen[at] += usize::from(seen.control.is_some());
            several_seen[at] += usize::from(seen.ran == Ran::Several);
            if staged.is_ok() {
                assert!(seen.control.is_none(), "{:?} passed the check, and the server: {seen:?}", case.text);
                assert_ne!(seen.ran, Ran::Several, "{:?} passed the check, and the server saw several", case.text);
            }
        }
        // Run as an allowed statement by both servers: the check passes it too.
        let ran = |seen: &Option<Seen>| match seen {
            Some(Seen { ran: Ran::Statement(tag), control: None }) => !tag.starts_with("SET"),
            _ => false,
        };
        if case.allowed_on_both && ran(&seen[0]) && ran(&seen[1]) {
            ran_on_both += 1;
            assert!(staged.is_ok(), "{:?} ran on both servers, refused: {:?}", case.text, staged.unwrap_err());
        }
        passed += usize::from(staged.is_ok());
    }
    println!(
        "{CASES} texts in {} ms: {passed} passed the check, {ran_on_both} ran as allowed by both servers; control seen run by PostgreSQL {}, SQLite {}; several statements seen by PostgreSQL {}, SQLite {}",
        started.elapsed().as_millis(),
        control_seen[0],
        control_seen[1],
        several_seen[0],
        several_seen[1]
    );
    // The generated texts did reach the servers as control and as several statements, and as
    // statements the check passes.
    assert!(passed >= CASES / 10, "{passed}");
    if postgres.is_some() {
        assert!(ran_on_both >= CASES / 20, "{ran_on_both}");
        assert!(control_seen[0] >= CASES / 40 && several_seen[0] >= CASES / 100, "{control_seen:?} {several_seen:?}");
    }
    assert!(control_seen[1] >= CASES / 40 && several_seen[1] >= CASES / 100, "{control_seen:?} {several_seen:?}");
}

/// The SQLite side: a connection to a file, as the journal's, with a session of its own set up
/// before each text (`PRAGMA`s, a `probe` table, the savepoint `base` inside `BEGIN IMMEDIATE`).
struct SqliteProbe {
    path: std::path::PathBuf,
    connection: rusqlite::Connection,
    /// The session's state as set up (`SESSION`).
    session: String,
}

impl SqliteProbe {
    const SESSION: &str = "SELECT (SELECT * FROM pragma_busy_timeout) || ',' || (SELECT * FROM pragma_cache_size) || ',' || (SELECT * FROM pragma_query_only) || ',' || (SELECT * FROM pragma_recursive_triggers) || ',' || (SELECT * FROM pragma_temp_store) || ',' || (SELECT * FROM pragma_synchronous) || ',' || (SELECT * FROM pragma_foreign_keys) || ',' || (SELECT group_concat(name) FROM pragma_database_list) || ',' || (SELECT count(*) FROM sqlite_temp_master)";

    fn open(dir: &TempDir) -> SqliteProbe {
        let path = dir.path().join("proof.db");
        let setup = rusqlite::Connection::open(&path).unwrap();
        setup
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE probe (n INTEGER); INSERT INTO probe VALUES (0); CREATE TABLE marks (n INTEGER)")
            .unwrap();
        let connection = SqliteProbe::connect(&path);
        let session = SqliteProbe::session(&connection);
        SqliteProbe { path, connection, session }
    }

    fn connect(path: &std::path::Path) -> rusqlite::Connection {
        let connection = rusqlite::Connection::open(path).unwrap();
        connection
            .execute_batch("PRAGMA busy_timeout = 7000; PRAGMA cache_size = -3000; PRAGMA synchronous = OFF")
            .unwrap();
        connection
    }

    fn session(connection: &rusqlite::Connection) -> String {
        connection.query_row(SqliteProbe::SESSION, [], |r| r.get(0)).unwrap()
    }

    /// Runs `text` as the journal runs a staged statement (`prepare`, then every row read).
    fn run(&mut self, text: &str) -> Seen {
        let c = &self.connection;
        c.execute_batch("BEGIN IMMEDIATE; DELETE FROM marks; SAVEPOINT base; INSERT INTO marks VALUES (1)").unwrap();
        let ran = match c.prepare(text) {
            Err(rusqlite::Error::MultipleStatement) => Ran::Several,
            Err(e) => Ran::Refused(e.to_string()),
            Ok(statement) if statement.expanded_sql().is_none() => Ran::Refused("no statement".to_owned()),
            Ok(mut statement) => {
                let read = statement.query([]).and_then(|mut rows| {
                    while rows.next()?.is_some() {}
                    Ok(())
                });
                match read {
                    Ok(()) => Ran::Statement("ran".to_owned()),
                    Err(e) => Ran::Refused(e.to_string()),
                }
            }
        };
        let mut control = None;
        if c.is_autocommit() {
            control = Some("ended the transaction".to_owned());
        } else {
            if c.query_row("SELECT count(*) FROM marks", [], |r| r.get::<_, i64>(0)).unwrap() == 0 {
                control = Some("rolled back to a savepoint".to_owned());
            } else if c.execute_batch("RELEASE sp").is_ok() {
                control = Some("made a savepoint".to_owned());
            } else if c.execute_batch("RELEASE base").is_err() {
                control = Some("released a savepoint".to_owned());
            }
            if !c.is_autocommit() {
                // Committed, as the journal commits: a temporary table would stay.
                c.execute_batch("COMMIT").unwrap_or_else(|e| panic!("{text:?}: COMMIT: {e}"));
            }
        }
        if SqliteProbe::session(c) != self.session {
            control = control.or(Some("changed the session".to_owned()));
            self.connection = SqliteProbe::connect(&self.path);
        }
        Seen { ran, control }
    }
}

/// The PostgreSQL side: a connection of its own speaking the wire protocol (so that it sees the
/// server's command tag, and its transaction status after each statement), with a session set
/// up as a pooled connection's (settings, a listened channel, a prepared statement, a temporary
/// table) and, before each text, a transaction with a transaction-local guard and the savepoint
/// `base`. The text is sent as the journal sends a staged statement, prepared (the extended
/// protocol), then executed.
struct PostgresProbe {
    port: u16,
    wire: Wire,
    /// The session's state as set up (`SESSION`), and the transaction's once begun (`IN_TRANSACTION`).
    session: Vec<Option<String>>,
    in_transaction: Vec<Option<String>>,
}

impl PostgresProbe {
    const SETUP: &str = "SET lock_timeout = '7s'; SET synchronous_commit = off; LISTEN base_channel; PREPARE base_statement AS SELECT 1; CREATE TEMP TABLE base_temp (n int)";
    const SESSION: &str = "SELECT (SELECT md5(string_agg(name || '=' || coalesce(setting, ''), ',' ORDER BY name)) FROM pg_settings WHERE source <> 'default'), (SELECT string_agg(name, ',' ORDER BY name) FROM pg_prepared_statements), (SELECT string_agg(c, ',' ORDER BY c) FROM pg_listening_channels() c), (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'), (SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE relnamespace = pg_my_temp_schema()), (SELECT count(*) FROM pg_cursors), (SELECT count(*) FROM pg_prepared_xacts)";
    const BEGIN: &str = "BEGIN; SELECT set_config('probe.guard', 'on', true); SAVEPOINT base; SELECT set_config('probe.after', 'on', true)";
    const IN_TRANSACTION: &str = "SELECT current_setting('probe.guard', true), current_setting('probe.after', true), current_setting('transaction_read_only'), current_setting('transaction_isolation')";

    fn start(cluster: &Cluster) -> PostgresProbe {
        // PREPARE TRANSACTION runs only where prepared transactions are enabled.
        let mut admin = cluster.client();
        admin.batch_execute("ALTER SYSTEM SET max_prepared_transactions = 4").unwrap();
        drop(admin);
        cluster.restart();
        let mut admin = cluster.client();
        admin
            .batch_execute(
                "CREATE TABLE probe (n int); INSERT INTO probe VALUES (0); CREATE PROCEDURE probe_session() LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('lock_timeout', '3s', false); END $$",
            )
            .unwrap();
        let port = cluster.port();
        let wire = PostgresProbe::connect(port);
        let mut probe = PostgresProbe { port, wire, session: Vec::new(), in_transaction: Vec::new() };
        probe.session = probe.session();
        let begun = probe.wire.simple(&format!("{}; {}", PostgresProbe::BEGIN, PostgresProbe::IN_TRANSACTION));
        probe.in_transaction = begun.rows.last().cloned().unwrap();
        assert_eq!(probe.wire.simple("ROLLBACK").status, b'I');
        probe
    }

    fn connect(port: u16) -> Wire {
        let mut wire = Wire::connect(port);
        let set_up = wire.simple(PostgresProbe::SETUP);
        assert!(matches!(set_up.reply, Reply::Tag(_)), "{set_up:?}");
        wire
    }

    fn session(&mut self) -> Vec<Option<String>> {
        let answer = self.wire.simple(PostgresProbe::SESSION);
        assert!(matches!(answer.reply, Reply::Tag(_)), "{answer:?}");
        answer.rows.into_iter().last().unwrap()
    }

    fn run(&mut self, text: &str) -> Seen {
        // The transaction begun and the text sent together, in one round trip.
        self.wire.write(&Wire::message(b'Q', &[PostgresProbe::BEGIN.as_bytes(), b"\0"].concat()));
        let begun = self.wire.answer();
        let answer = self.wire.extended(text);
        assert_eq!(begun.status, b'T', "{begun:?}");
        let ran = match &answer.reply {
            Reply::Tag(tag) => Ran::Statement(tag.clone()),
            Reply::Empty => Ran::Refused("no statement".to_owned()),
            Reply::Error { message, .. } if message.contains("cannot insert multiple commands") => Ran::Several,
            Reply::Error { code, message } => Ran::Refused(format!("{message} ({code})")),
        };
        let mut control = match &ran {
            Ran::Statement(tag)
                if !["INSERT", "UPDATE", "DELETE", "MERGE", "SELECT", "SET"].iter().any(|k| tag.starts_with(k)) =>
            {
                Some(format!("ran {tag}"))
            }
            _ => None,
        };
        // The transaction's state, then committed as the journal commits (a session setting
        // made in it stays), and the session's state.
        let after = match answer.status {
            b'T' => {
                let after =
                    self.wire.simple(&format!("{}; COMMIT; {}", PostgresProbe::IN_TRANSACTION, PostgresProbe::SESSION));
                assert_eq!(after.status, b'I', "{text:?}: COMMIT: {after:?}");
                if after.rows[0] != self.in_transaction {
                    control = control.or(Some(format!("changed the transaction: {:?}", after.rows[0])));
                }
                after
            }
            // Refused: the rollback undoes whatever the statement began.
            b'E' => {
                assert_eq!(self.wire.simple("ROLLBACK").status, b'I');
                return Seen { ran, control };
            }
            _ => {
                control = control.or(Some("ended the transaction".to_owned()));
                self.wire.simple(PostgresProbe::SESSION)
            }
        };
        let session = after.rows.last().cloned();
        if session.as_ref() != Some(&self.session) {
            control = control.or(Some(format!("changed the session: {session:?}")));
            // A prepared transaction left behind, then a fresh session.
            let _ = self.wire.simple("ROLLBACK PREPARED 'probe_gid'");
            self.wire = PostgresProbe::connect(self.port);
            self.session = self.session();
        }
        Seen { ran, control }
    }
}

/// How PostgreSQL answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    /// The command tag of the last statement (`INSERT 0 1`, `COMMIT`, `SET`...).
    Tag(String),
    /// An empty query (blanks and comments only).
    Empty,
    Error {
        code: String,
        message: String,
    },
}

/// A request's answer: the reply, the rows, and the transaction status after it (`I` idle, `T`
/// in a transaction, `E` in a failed one).
#[derive(Debug)]
struct Answer {
    reply: Reply,
    rows: Vec<Vec<Option<String>>>,
    status: u8,
}

/// A PostgreSQL connection speaking protocol 3.0 itself, on loopback, as `postgres` (trust).
struct Wire(std::net::TcpStream);

impl Wire {
    fn connect(port: u16) -> Wire {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut wire = Wire(stream);
        let mut startup = 196_608_i32.to_be_bytes().to_vec();
        startup.extend_from_slice(b"user\0postgres\0database\0postgres\0\0");
        let mut framed = i32::try_from(startup.len() + 4).unwrap().to_be_bytes().to_vec();
        framed.extend(startup);
        wire.write(&framed);
        let answer = wire.answer();
        assert_eq!((answer.reply, answer.status), (Reply::Empty, b'I'), "startup");
        wire
    }

    fn write(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(&mut self.0, bytes).unwrap();
    }

    /// A message of `kind` with `body`.
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut message = vec![kind];
        message.extend_from_slice(&i32::try_from(body.len() + 4).unwrap().to_be_bytes());
        message.extend_from_slice(body);
        message
    }

    /// `sql` as a simple query (several statements allowed).
    fn simple(&mut self, sql: &str) -> Answer {
        self.write(&Wire::message(b'Q', &[sql.as_bytes(), b"\0"].concat()));
        self.answer()
    }

    /// `sql` parsed, bound and executed as the unnamed statement, then a sync.
    fn extended(&mut self, sql: &str) -> Answer {
        let mut request = Wire::message(b'P', &[b"\0", sql.as_bytes(), b"\0\0\0"].concat());
        request.extend(Wire::message(b'B', b"\0\0\0\0\0\0\0\0"));
        request.extend(Wire::message(b'E', b"\0\0\0\0\0"));
        request.extend(Wire::message(b'S', b""));
        self.write(&request);
        self.answer()
    }

    /// The messages up to ReadyForQuery: the last tag or the first error, the rows.
    fn answer(&mut self) -> Answer {
        use std::io::Read;
        let (mut reply, mut rows) = (Reply::Empty, Vec::new());
        loop {
            let mut head = [0_u8; 5];
            self.0.read_exact(&mut head).expect("a message from PostgreSQL");
            let length = usize::try_from(i32::from_be_bytes(head[1..].try_into().unwrap())).unwrap() - 4;
            let mut body = vec![0_u8; length];
            self.0.read_exact(&mut body).unwrap();
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes.split(|&b| b == 0).next().unwrap()).into_owned();
            match head[0] {
                b'R' => assert_eq!(body[..4], [0, 0, 0, 0], "authentication other than trust"),
                b'C' if !matches!(reply, Reply::Error { .. }) => reply = Reply::Tag(text(&body)),
                b'I' if !matches!(reply, Reply::Error { .. }) => reply = Reply::Empty,
                b'E' if !matches!(reply, Reply::Error { .. }) => {
                    let field = |kind: u8| {
                        body.split(|&b| b == 0)
                            .find(|f| f.first() == Some(&kind))
                            .map(|f| text(&f[1..]))
                            .unwrap_or_default()
                    };
                    reply = Reply::Error { code: field(b'C'), message: field(b'M') };
                }
                b'D' => {
                    let count = usize::from(u16::from_be_bytes([body[0], body[1]]));
                    let (mut at, mut row) = (2, Vec::with_capacity(count));
                    for _ in 0..count {
                        let size = i32::from_be_bytes(body[at..at + 4].try_into().unwrap());
                        at += 4;
                        row.push(usize::try_from(size).ok().map(|size| {
                            at += size;
                            String::from_utf8_lossy(&body[at - size..at]).into_owned()
                        }));
                    }
                    rows.push(row);
                }
                b'Z' => return Answer { reply, rows, status: body[0] },
                _ => {} // parse and bind complete, notices, parameter status, notifications
            }
        }
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        // Terminate, if the server still listens.
        let _ = std::io::Write::write_all(&mut self.0, &Wire::message(b'X', b""));
    }
}
