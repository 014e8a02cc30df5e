//! Statements of the partner's own, staged on a claim and run inside the transaction that stores
//! its reply (`Journal::finish_with`): the ledger's credit and the stored reply commit together,
//! with one durable commit, or not at all.
//!
//! They are queued, not run through a callback: the partner decides its reply first, stages the
//! writes that go with it (a ledger row, a balance update), and `finish` runs them in order after
//! it has confirmed that the claim is still this worker's. A statement that fails rolls back the
//! whole transaction: no credit, no stored reply, and the claim as it was (held when `begin`
//! wrote it; never written under claim at finish). The partner cannot read a staged statement's
//! result before deciding the reply; logic that must read first keeps its own transaction and
//! the ledger's unique key (see the module documentation of `journal`).
//!
//! The SQL is the database's own dialect, with its own positional placeholders: `$1, $2` on
//! PostgreSQL, `?` or `?1` on SQLite. Parameters are bound, never spliced into the text. What
//! a statement may be is decided at staging (`allowed`), by both databases' lexers (`lexer`).

mod allowed;
mod lexer;
mod passed;

use crate::error::{Error, ErrorKind, Result};

/// The most statements one claim may stage.
pub const MAX_STAGED: usize = 1000;
/// The most parameters one statement may bind (PostgreSQL's protocol limit).
pub const MAX_PARAMS: usize = 65_535;
/// The longest statement text, in bytes.
pub const MAX_SQL_BYTES: usize = 1 << 20;

/// A value bound to a staged statement's parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// SQL `NULL`.
    Null,
    /// A 64-bit integer (an amount in minor units, an id).
    Int(i64),
    /// UTF-8 text; on PostgreSQL sent in text format, so that the server converts it to the
    /// column's type (`numeric`, `timestamptz`, `uuid`, ...).
    Text(String),
    /// Bytes (`bytea` on PostgreSQL, a blob on SQLite).
    Blob(Vec<u8>),
}

/// One statement of the partner's, with its parameters, staged on a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    sql: String,
    params: Vec<SqlValue>,
}

impl Staged {
    /// Checks and keeps `sql` with `params`. Errors: `InvalidArgument` naming `sql` (empty, over
    /// `MAX_SQL_BYTES`, holding a NUL, or not one statement of a kind a credit needs as both
    /// databases read it: see `allowed`; `COMMIT` and the other transaction control are the
    /// journal's) or `params` (more than `MAX_PARAMS`).
    pub fn new(sql: impl Into<String>, params: Vec<SqlValue>) -> Result<Staged> {
        let sql = sql.into();
        let invalid = |field: &str, problem: String| Err(Error::field(ErrorKind::InvalidArgument, field, problem));
        if sql.trim().is_empty() {
            return invalid("sql", "is empty".to_owned());
        }
        if sql.len() > MAX_SQL_BYTES {
            return invalid("sql", format!("is {} bytes, more than the limit of {MAX_SQL_BYTES}", sql.len()));
        }
        if let Some(at) = sql.find('\0') {
            return invalid("sql", format!("holds a NUL character at byte {at}: neither database reads past it"));
        }
        if let Some(problem) = allowed::refusal(&sql) {
            return invalid("sql", problem);
        }
        if params.len() > MAX_PARAMS {
            return invalid("params", format!("has {} values, more than the limit of {MAX_PARAMS}", params.len()));
        }
        Ok(Staged { sql, params })
    }

    /// The statement's text.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The statement's parameters, in order.
    pub fn params(&self) -> &[SqlValue] {
        &self.params
    }
}

/// Checks that one more statement may be staged beside `already` others.
pub fn check_room(already: usize) -> Result<()> {
    if already >= MAX_STAGED {
        return Err(Error::field(
            ErrorKind::InvalidArgument,
            "sql",
            format!("{MAX_STAGED} statements are staged already, the most one claim may carry"),
        ));
    }
    Ok(())
}

/// Whether `error` is one of `failed`: a staged statement refused by the database.
pub(crate) fn is_failed(error: &Error) -> bool {
    error.field.starts_with("statements[")
}

/// The error of staged statement `number` (from 1) failing with the database's `problem`:
/// nothing was stored. What stays of the claim is added by `tell_what_stays`.
pub(crate) fn failed(number: usize, staged: &Staged, problem: &str) -> Error {
    Error::field(
        ErrorKind::Journal,
        format!("statements[{}]", number - 1),
        format!(
            "staged statement {number} ({}) failed: {problem}; the transaction was rolled back: nothing was stored and no staged statement took effect",
            sql_excerpt(&staged.sql)
        ),
    )
}

/// The error of a staged statement having ended the journal's transaction (a `COMMIT` or
/// `ROLLBACK` the check at staging could not see): the reply was not stored, but what the
/// statements did may have been committed without it. What stays of the claim, and what the
/// host does, is added by `tell_what_stays`.
pub(crate) fn escaped() -> Error {
    Error::field(
        ErrorKind::Journal,
        "statements",
        "a staged statement ended the journal's transaction: the reply was not stored, but what the staged statements did may have been committed without it",
    )
}

/// Completes an error of `failed` or `escaped` (any other is left as it is) with what stays of
/// the claim: held, when `begin` wrote it (`written`); nothing, under claim at finish. Either
/// way the next delivery runs the logic again once the claim is abandoned; after `escaped`, a
/// credit staged with its ledger's unique key and `ON CONFLICT DO NOTHING` then credits nothing
/// twice.
pub(crate) fn tell_what_stays(error: &mut Error, written: bool) {
    let escaped = match error.field.as_str() {
        "statements" => true,
        field if field.starts_with("statements[") => false,
        _ => return,
    };
    let stays =
        if written { "; the claim is still held" } else { "; no claim was written for the delivery (claim at finish)" };
    let then = if escaped {
        ": abandon it and answer 503, and the next delivery runs the logic again (a credit staged with ON CONFLICT DO NOTHING on the ledger's unique key then credits nothing twice)"
    } else {
        ": finish again, or abandon it and answer 503, and the next delivery runs the logic again"
    };
    error.message.push_str(stays);
    error.message.push_str(then);
}

/// The first 60 characters of `sql` on one line, for messages.
fn sql_excerpt(sql: &str) -> String {
    let one_line: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(60) {
        Some((at, _)) => format!("{}...", &one_line[..at]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_transaction_and_session_control_naming_sql() {
        for (sql, word) in [
            ("COMMIT", "COMMIT"),
            ("/* x */ -- y\n Rollback", "ROLLBACK"),
            (";COMMIT", "COMMIT"),
            ("/* x */;COMMIT", "COMMIT"),
            ("-- note\rCOMMIT", "COMMIT"),
            ("\u{feff}COMMIT", "COMMIT"),
            ("set transaction read only", "SET without LOCAL"),
            ("set role clerk", "SET without LOCAL"),
            ("DEALLOCATE ALL", "DEALLOCATE"),
            ("RESET ALL", "RESET"),
            ("PRAGMA foreign_keys = off", "PRAGMA"),
            ("INSERT INTO t VALUES (1); COMMIT", "second statement: COMMIT"),
        ] {
            let error = Staged::new(sql, vec![]).unwrap_err();
            assert_eq!((error.kind, error.field.as_str()), (ErrorKind::InvalidArgument, "sql"), "{sql:?}");
            assert!(error.message.starts_with("sql: "), "{sql:?}: {}", error.message);
            assert!(error.message.contains(word), "{sql:?}: {}", error.message);
        }
        let error = Staged::new("INSERT INTO t VALUES ('a\0')", vec![]).unwrap_err();
        assert!(error.message.contains("holds a NUL character at byte 24"), "{}", error.message);
        for sql in ["INSERT INTO credits VALUES (1)", "SET LOCAL search_path = ledger", "SELECT credit($1, $2)"] {
            assert!(Staged::new(sql, vec![]).is_ok(), "{sql}");
        }
    }

    #[test]
    fn refuses_empty_and_oversized() {
        assert_eq!(Staged::new(" \n", vec![]).unwrap_err().field, "sql");
        let error = Staged::new("SELECT 1", vec![SqlValue::Null; MAX_PARAMS + 1]).unwrap_err();
        assert_eq!(error.field, "params");
        assert!(check_room(MAX_STAGED - 1).is_ok());
        assert!(check_room(MAX_STAGED).is_err());
    }

    #[test]
    fn failure_names_the_statement_and_what_stays() {
        let staged = Staged::new("INSERT   INTO credits\n (a) VALUES ($1)", vec![SqlValue::Int(1)]).unwrap();
        let error = failed(2, &staged, "duplicate key");
        assert_eq!(error.field, "statements[1]");
        assert!(
            error.message.contains("staged statement 2 (INSERT INTO credits (a) VALUES ($1)) failed: duplicate key")
        );
        assert!(error.message.ends_with("nothing was stored and no staged statement took effect"), "{}", error.message);
        let told = |mut error: Error, written| {
            tell_what_stays(&mut error, written);
            error.message
        };
        let held = told(error.clone(), true);
        assert!(held.contains("took effect; the claim is still held: finish again, or abandon it"), "{held}");
        let unwritten = told(error, false);
        assert!(unwritten.contains("took effect; no claim was written for the delivery (claim at finish)"));
        assert!(!unwritten.contains("held") && unwritten.contains("the next delivery runs the logic again"));
        let escaped = told(escaped(), false);
        assert!(escaped.contains("no claim was written") && escaped.contains("ON CONFLICT DO NOTHING"), "{escaped}");
        let other = Error::field(ErrorKind::Journal, "reply", "too long");
        assert_eq!(told(other.clone(), true), other.message, "not a staged statement's error");
    }
}
