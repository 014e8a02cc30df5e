//! What a staged statement may be: one statement of a kind a ledger's credit needs, decided by
//! what may run rather than by what may not. The text is read by both databases' lexers
//! (`lexer`), past the blanks, comments and empty statements (`;`) each skips, and it passes only
//! when both readings pass, whichever database the journal is: a text the two read differently
//! (`-- note\rCOMMIT`, a byte order mark before `COMMIT`) passes only if both read an allowed
//! statement.
//!
//! Allowed first words: `INSERT`, `UPDATE`, `DELETE`, `MERGE` (PostgreSQL), `REPLACE` (SQLite),
//! `SELECT` (a ledger's stored function: `SELECT credit($1, $2)`), `WITH` (a data-modifying
//! common table expression), and `SET LOCAL` (a setting that ends with the transaction, as
//! `search_path` or `role` for the ledger's schema). Everything else is refused, transaction
//! control (`BEGIN`, `COMMIT`, `ROLLBACK`, `END`, `ABORT`, `SAVEPOINT`, `RELEASE`, `PREPARE
//! TRANSACTION`) and session commands (`SET` without `LOCAL`, `RESET`, `DISCARD`, `DEALLOCATE`,
//! `PREPARE`, `LISTEN`, `LOAD`, `CALL`, `DO`, `VACUUM`, SQLite's `PRAGMA`, `ATTACH`) among them,
//! and so is a word the check does not know (`VALUES`, `TABLE`, `LOCK`, `EXPLAIN`: a credit needs
//! none of them). Also refused: a second statement after a `;` (both servers refuse several
//! statements in one prepared text as well: PostgreSQL's extended protocol, and rusqlite's
//! `prepare`, which prepares the rest to see that it is empty), `SELECT ... INTO` (it creates a
//! table, and a temporary one outlives the transaction on the pooled connection), and text a
//! server cannot read to its end (an unterminated string, quoted identifier or, on PostgreSQL,
//! comment).
//!
//! Refused too: a text naming a setting that changes how PostgreSQL reads the text of the
//! statements after it in the transaction (`standard_conforming_strings`, `backslash_quote`,
//! `client_encoding`), as a word or inside a quoted token, whatever the statement
//! (`SET LOCAL standard_conforming_strings = off`, `SELECT set_config('client_encoding', ...)`):
//! after it, the server would read a staged text otherwise than both lexers do (`'x\''` one
//! string to the one, a string and more to the other), and a `SELECT ... INTO` could pass as a
//! plain `SELECT`.
//!
//! What no lexer can see: a function called by an allowed statement that changes the session,
//! `SELECT set_config('lock_timeout', '0', false)` or `pg_advisory_lock(...)`, directly or inside
//! the ledger's own function. The journal does not trust the pooled connection for what it
//! relies on: it sets its own settings (`lock_timeout`, `synchronous_commit`) in every
//! transaction it begins, sets the durability of the commit in the statement storing the reply
//! (after the staged statements), and drops a connection whose session was changed so that its
//! statements fail (its tables no longer found). A session-level advisory lock taken by a
//! partner's function stays with the connection until it closes: take transaction-level ones
//! (`pg_advisory_xact_lock`).

use super::lexer::{self, Dialect, Kind, Token, Unterminated};
use super::passed;

/// The statement kinds a credit needs, by first word (`SET` only as `SET LOCAL`).
const ALLOWED: [&str; 7] = ["INSERT", "UPDATE", "DELETE", "MERGE", "REPLACE", "SELECT", "WITH"];

/// Settings that change how PostgreSQL reads a statement's text (PostgreSQL's "Lexical
/// Structure": string escapes and the bytes of the client's encoding), lower-case.
const READING_SETTINGS: [&str; 3] = ["standard_conforming_strings", "backslash_quote", "client_encoding"];

/// How `ALLOWED` reads in messages.
const ALLOWED_TEXT: &str = "INSERT, UPDATE, DELETE, MERGE (PostgreSQL), REPLACE (SQLite), SELECT, WITH or SET LOCAL";

/// Why one database's reading of a text refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    /// Only blanks, comments and `;`.
    NoStatement,
    /// The first token, not an allowed first word: as written (a word upper-cased).
    Start(String),
    /// `SET` not followed by `LOCAL`.
    SetWithoutLocal,
    /// `SELECT ... INTO`.
    SelectInto,
    /// A token naming one of `READING_SETTINGS` (the setting).
    ReadingSetting(&'static str),
    /// A token (as written) after the `;` at byte `at`.
    Second {
        at: usize,
        found: String,
    },
    Unterminated(Unterminated),
}

/// Why `sql` may not be staged, if it may not: a sentence after the field's name. A text this
/// thread passed lately passes without being read again (`passed`).
pub(super) fn refusal(sql: &str) -> Option<String> {
    passed::judged(sql, read_refusal)
}

/// `refusal`, the text read by both lexers.
fn read_refusal(sql: &str) -> Option<String> {
    let [postgres, sqlite] = Dialect::ALL.map(|dialect| judge(sql, dialect).err());
    match (postgres, sqlite) {
        (None, None) => None,
        (Some(p), Some(s)) if p == s => Some(sentence(&p, None)),
        (Some(p), Some(s)) => {
            Some(format!("{} as PostgreSQL reads it, and {} as SQLite reads it; {}", what(&p), what(&s), why(&p)))
        }
        (Some(p), None) => Some(sentence(&p, Some(Dialect::Postgres))),
        (None, Some(s)) => Some(sentence(&s, Some(Dialect::Sqlite))),
    }
}

/// The refusal of `problem`, found reading the text as `only` reads it when the other database
/// reads it otherwise.
fn sentence(problem: &Problem, only: Option<Dialect>) -> String {
    match only {
        None => format!("{}; {}", what(problem), why(problem)),
        Some(dialect) => format!(
            "{} as {} reads it (the other database reads it otherwise, and a statement must pass as both read it); {}",
            what(problem),
            dialect.name(),
            why(problem)
        ),
    }
}

fn what(problem: &Problem) -> String {
    match problem {
        Problem::NoStatement => "holds no statement, only blanks, comments and ';'".to_owned(),
        Problem::Start(found) => format!("starts with {found}"),
        Problem::SetWithoutLocal => "starts with SET without LOCAL".to_owned(),
        Problem::SelectInto => "is SELECT ... INTO".to_owned(),
        Problem::ReadingSetting(setting) => format!("names the setting {setting}"),
        Problem::Second { at, found } => format!("holds a second statement: {found} after the ';' at byte {at}"),
        Problem::Unterminated(u) => format!("has an unterminated {} from byte {}", u.what, u.start),
    }
}

fn why(problem: &Problem) -> String {
    match problem {
        Problem::NoStatement => "stage the statement itself".to_owned(),
        Problem::Start(_) => format!(
            "a staged statement starts with {ALLOWED_TEXT}: the journal begins and commits the transaction staged statements run in, and a statement may not change the session of the journal's pooled connection"
        ),
        Problem::SetWithoutLocal => format!("{} (a setting made without LOCAL outlives the transaction)", why(&Problem::Start(String::new()))),
        Problem::SelectInto => {
            "it creates a table, and a temporary one outlives the transaction on the journal's pooled connection (create the table beforehand, then INSERT INTO ... SELECT)".to_owned()
        }
        Problem::Second { .. } => "stage each statement on its own".to_owned(),
        Problem::ReadingSetting(_) => {
            "it changes the way the database parses the statements after it, and the journal checks staged statements as parsed by default".to_owned()
        }
        Problem::Unterminated(_) => "the database refuses text that ends inside a token".to_owned(),
    }
}

/// Whether `sql`, read by `dialect`'s lexer, is one allowed statement.
fn judge(sql: &str, dialect: Dialect) -> Result<(), Problem> {
    let word = |token: &Token| (token.kind == Kind::Word).then(|| &sql[token.start..token.end]);
    let is = |token: &Token, keyword: &str| word(token).is_some_and(|w| w.eq_ignore_ascii_case(keyword));
    let mut tokens = lexer::tokens(sql, dialect).filter(|t| !matches!(t, Ok(Token { kind: Kind::Blank, .. })));
    let mut next = || tokens.next().map(|t| t.map_err(Problem::Unterminated)).transpose();
    // Past the empty statements before it.
    let first = loop {
        match next()? {
            None => return Err(Problem::NoStatement),
            Some(token) if token.kind == Kind::Semicolon => {}
            Some(token) => break token,
        }
    };
    let names_a_reading_setting = |token: &Token| {
        let text =
            matches!(token.kind, Kind::Word | Kind::Quoted).then(|| sql[token.start..token.end].to_ascii_lowercase());
        text.and_then(|text| READING_SETTINGS.into_iter().find(|setting| text.contains(setting)))
    };
    if is(&first, "SET") {
        if !next()?.is_some_and(|token| is(&token, "LOCAL")) {
            return Err(Problem::SetWithoutLocal);
        }
    } else if !ALLOWED.iter().any(|allowed| is(&first, allowed)) {
        return Err(Problem::Start(as_written(sql, &first)));
    }
    // The rest: within the first statement, the last statement word outside parentheses (for
    // `SELECT ... INTO`); after its `;`, nothing but blanks and more `;`.
    let mut selecting = is(&first, "SELECT");
    let mut depth = 0_i64;
    let mut end = None;
    while let Some(token) = next()? {
        if let Some(setting) = names_a_reading_setting(&token) {
            return Err(Problem::ReadingSetting(setting));
        }
        match (token.kind, end) {
            (Kind::Semicolon, _) => end = end.or(Some(token.start)),
            (_, Some(at)) => return Err(Problem::Second { at, found: as_written(sql, &token) }),
            (Kind::Open, None) => depth += 1,
            (Kind::Close, None) => depth -= 1,
            (Kind::Word, None) if depth == 0 => {
                if is(&token, "SELECT") {
                    selecting = true;
                } else if ["INSERT", "UPDATE", "DELETE", "MERGE", "REPLACE"].iter().any(|w| is(&token, w)) {
                    selecting = false;
                } else if selecting && is(&token, "INTO") {
                    return Err(Problem::SelectInto);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `token` for a message: a keyword upper-cased, anything else as written (escaped, at most 30
/// characters), in quotes.
fn as_written(sql: &str, token: &Token) -> String {
    let text = &sql[token.start..token.end];
    if token.kind == Kind::Word && text.bytes().all(|b| b.is_ascii_alphabetic()) {
        return text.to_ascii_uppercase();
    }
    let shown: String = text.chars().take(30).collect();
    let more = if shown.len() < text.len() { "..." } else { "" };
    format!("'{}{more}'", shown.escape_debug())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sql: &str) -> String {
        refusal(sql).unwrap_or_else(|| panic!("{sql:?} passed"))
    }

    #[test]
    fn passes_the_statements_a_credit_needs() {
        for sql in [
            "INSERT INTO credits VALUES (1)",
            "  insert into credits values ($1, $2);",
            "INSERT INTO credits VALUES (?1) ON CONFLICT (transaction_id) DO NOTHING;\n-- done\n;",
            "UPDATE balances SET amount = amount + $1 WHERE player = $2",
            "DELETE FROM holds WHERE id = ?",
            "MERGE INTO balances b USING (SELECT 1 AS id) s ON b.id = s.id WHEN MATCHED THEN UPDATE SET n = 1",
            "REPLACE INTO balances VALUES (?1, ?2)",
            "SELECT credit($1, $2)",
            "SELECT * FROM balances WHERE player = $1 FOR UPDATE",
            "WITH c AS (INSERT INTO credits VALUES (1) RETURNING *) UPDATE t SET n = (SELECT count(*) FROM c)",
            "WITH s AS (SELECT 1 AS n) INSERT INTO credits SELECT n FROM s",
            "INSERT INTO t SELECT a FROM (SELECT 1 AS a) x",
            "SET LOCAL search_path = ledger",
            "set /* x */ local role clerk",
            "/* COMMIT */ DELETE FROM t",
            "/* a */ /**/ /*/ b */ DELETE FROM t",
            "-- the credit\r\nINSERT INTO credits VALUES (1)",
            ";; INSERT INTO t VALUES ('a;b', \"c;d\")",
            "INSERT INTO t VALUES ('it''s -- no comment; COMMIT')",
            "\tINSERT INTO t VALUES (1)\u{c}",
        ] {
            assert_eq!(refusal(sql), None, "{sql:?}");
        }
    }

    #[test]
    fn refuses_what_a_credit_does_not_need_naming_it() {
        for (sql, found) in [
            ("COMMIT", "starts with COMMIT; a staged statement starts with INSERT, UPDATE"),
            ("  commit;", "starts with COMMIT"),
            ("/* x */ -- y\n Rollback", "starts with ROLLBACK"),
            ("end", "starts with END"),
            ("abort", "starts with ABORT"),
            ("PREPARE TRANSACTION 'x'", "starts with PREPARE"),
            ("SAVEPOINT a", "starts with SAVEPOINT"),
            ("VALUES (1)", "starts with VALUES"),
            ("CALL credit(1)", "starts with CALL"),
            ("DO $$ BEGIN COMMIT; END $$", "starts with DO"),
            ("PRAGMA foreign_keys = off", "starts with PRAGMA"),
            ("ATTACH 'x.db' AS x", "starts with ATTACH"),
            ("\"INSERT\" INTO t VALUES (1)", "starts with '\\\"INSERT\\\"'"),
            ("(SELECT 1)", "starts with '('"),
            ("set transaction read only", "starts with SET without LOCAL; a staged statement starts with INSERT"),
            ("SET search_path = ledger", "SET without LOCAL"),
            ("SET SESSION lock_timeout = 0", "SET without LOCAL"),
            ("SELECT 1 INTO TEMP t", "is SELECT ... INTO; it creates a table"),
            ("WITH s AS (SELECT 1) SELECT * INTO t FROM s", "is SELECT ... INTO"),
            ("INSERT INTO t VALUES (1); COMMIT", "holds a second statement: COMMIT after the ';' at byte 24"),
            ("SELECT 1;;SELECT 2", "holds a second statement: SELECT after the ';' at byte 8"),
            ("INSERT INTO t VALUES ('a)", "has an unterminated string from byte 22"),
            ("", "holds no statement"),
            (" -- only a note", "holds no statement"),
            // After it, PostgreSQL would read `SELECT 'x\'' INTO t --'` as SELECT ... INTO.
            (
                "SET LOCAL standard_conforming_strings = off",
                "names the setting standard_conforming_strings; it changes the way",
            ),
            ("set local Standard_Conforming_Strings to off", "names the setting standard_conforming_strings"),
            ("SET LOCAL \"standard_conforming_strings\" = off", "names the setting standard_conforming_strings"),
            ("SET LOCAL backslash_quote = on", "names the setting backslash_quote"),
            ("SET LOCAL client_encoding = 'SJIS'", "names the setting client_encoding"),
            ("SELECT set_config('standard_conforming_strings', 'off', true)", "names the setting standard"),
            ("SELECT set_config('Client_Encoding', 'SJIS', true)", "names the setting client_encoding"),
        ] {
            let message = refused(sql);
            assert!(message.contains(found), "{sql:?}: {message}");
            assert!(!message.contains(" reads it"), "{sql:?}: both read it alike: {message}");
        }
    }

    #[test]
    fn a_text_the_databases_read_differently_passes_only_as_both_read_it() {
        for (sql, found) in [
            ("-- note\rCOMMIT", "starts with COMMIT as PostgreSQL reads it, and holds no statement"),
            ("/* a /* b */ */ DELETE FROM t", "starts with '*' as SQLite reads it (the other database"),
            ("/* a /* b */ */ COMMIT", "starts with COMMIT as PostgreSQL reads it, and starts with '*' as SQLite"),
            (
                "\u{feff}COMMIT",
                "starts with '\\u{feff}COMMIT' as PostgreSQL reads it, and starts with COMMIT as SQLite",
            ),
            ("/* a /* b */ INSERT INTO t VALUES (1) */ COMMIT", "starts with COMMIT as PostgreSQL reads it"),
            ("/* a /* b */ COMMIT */ INSERT INTO t VALUES (1)", "starts with COMMIT as SQLite reads it (the other"),
            ("-- x\rINSERT INTO t VALUES (1)", "holds no statement, only blanks, comments and ';' as SQLite reads it"),
            ("SELECT E'\\';COMMIT;--'", "holds a second statement: COMMIT after the ';' at byte 11 as SQLite"),
            ("SELECT $$;COMMIT;$$", "holds a second statement: COMMIT after the ';' at byte 9 as SQLite"),
            ("SELECT [a;COMMIT]", "holds a second statement: COMMIT after the ';' at byte 9 as PostgreSQL"),
            ("\u{b}INSERT INTO t VALUES (1)", "starts with '\\u{b}' as SQLite reads it"),
            ("INSERT INTO t VALUES (1) /* open", "has an unterminated /* comment from byte 25 as PostgreSQL"),
        ] {
            let message = refused(sql);
            assert!(message.contains(found), "{sql:?}: {message}");
        }
    }

    /// Texts from pieces a hostile or careless host might put together: statements allowed and
    /// not, after blanks and comments the two lexers read differently, before a second statement
    /// or an unterminated token. Seeded, so a failure repeats.
    fn generated(count: usize) -> Vec<String> {
        const BEFORE: [&str; 10] =
            ["", " ", ";", "-- note\r", "-- note\n", "/* a /* b */ */ ", "/* x */", "\u{feff}", "\u{b}", "/* open "];
        const STATEMENT: [&str; 12] = [
            "INSERT INTO t VALUES (1)",
            "insert into credits (transaction_id, amount) values (?1, ?2)",
            "COMMIT",
            "SET LOCAL role clerk",
            "SET role clerk",
            "SELECT 1 INTO t",
            "SELECT credit($1, $2)",
            "DELETE FROM t WHERE a = 'x;COMMIT'",
            "SELECT $$;COMMIT;$$",
            "SELECT [a;COMMIT]",
            "SELECT E'\\';COMMIT;--'",
            "WITH c AS (DELETE FROM t RETURNING *) SELECT * INTO x FROM c",
        ];
        const AFTER: [&str; 8] = ["", ";", "; COMMIT", ";;", " -- end", " /* open", " 'a", "\n;\n"];
        let mut state = 0x5eed_u64;
        let mut next = |n: usize| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        };
        (0..count)
            .map(|_| {
                let (before, statement, after) = (next(BEFORE.len()), next(STATEMENT.len()), next(AFTER.len()));
                format!("{}{}{}", BEFORE[before], STATEMENT[statement], AFTER[after])
            })
            .collect()
    }

    /// The memo of passed texts answers as the lexers do, for a text met the first time and
    /// again, whatever was judged before it on the thread.
    #[test]
    fn a_text_judged_again_gets_the_lexers_answer() {
        let texts = generated(3000);
        let passing = texts.iter().filter(|t| read_refusal(t).is_none()).count();
        assert!(passing > 100 && passing < texts.len() - 100, "{passing} of {} pass", texts.len());
        for (at, sql) in texts.iter().enumerate() {
            let expected = read_refusal(sql);
            assert_eq!(refusal(sql), expected, "{sql:?}");
            assert_eq!(refusal(sql), expected, "{sql:?} again");
            // One met a while ago, kept or pushed out since.
            let earlier = &texts[at / 2];
            assert_eq!(refusal(earlier), read_refusal(earlier), "{earlier:?}");
        }
        for kept in passed::kept() {
            assert_eq!(read_refusal(&kept), None, "{kept:?} kept");
        }
    }

    /// However many distinct texts pass, a thread keeps at most `ENTRIES`, none longer than
    /// `LONGEST`, and never one refused.
    #[test]
    fn the_memo_is_bounded_and_keeps_only_passed_texts() {
        let (entries, longest) = passed::BOUNDS;
        std::thread::spawn(move || {
            for n in 0..10 * entries {
                let sql = format!("INSERT INTO t VALUES ({n})");
                assert_eq!(refusal(&sql), None);
                assert!(passed::kept().len() <= entries);
            }
            let kept = passed::kept();
            assert_eq!(kept.len(), entries);
            // The latest, in the slots filled in turn.
            for n in 9 * entries..10 * entries {
                assert!(kept.contains(&format!("INSERT INTO t VALUES ({n})")), "{n}: {kept:?}");
            }
            let long = format!("INSERT INTO t VALUES ('{}')", "x".repeat(longest));
            assert_eq!(refusal(&long), None);
            let refused = "INSERT INTO t VALUES (1); COMMIT";
            assert!(refusal(refused).is_some());
            assert!(refusal(refused).is_some());
            assert!(!passed::kept().iter().any(|t| *t == long || t == refused), "{:?}", passed::kept());
            assert_eq!(passed::kept().len(), entries);
            // One byte more than a kept text is judged on its own.
            assert!(refusal("INSERT INTO t VALUES (0);").is_none());
            assert!(refusal(&format!("{};COMMIT", kept[0])).is_some());
        })
        .join()
        .unwrap();
    }
}
