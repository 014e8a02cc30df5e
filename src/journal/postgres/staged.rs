//! The partner's staged statements on PostgreSQL: prepared once a connection (a few kept, like
//! the journal's own), their parameters sent in text format so that the server converts each to
//! its column's type, run inside the transaction of `finish`, sent together with the statement
//! storing the reply.

use std::collections::HashMap;
use std::error::Error as StdError;

use bytes::BytesMut;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Format, IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Row, Statement};

use super::super::hex::hex;
use super::super::staged::{self, SqlValue, Staged};
use super::{Client, Fail, Params, PipelineError, TxResult, connection_lost};

/// How many of the partner's statements a connection keeps prepared; past it, all are dropped.
const KEPT: usize = 64;

/// The partner's statements prepared on one connection, by text.
#[derive(Default)]
pub(super) struct Prepared(HashMap<String, Statement>);

/// A parameter in text format, accepted for any type: the server reads it as the column's type.
#[derive(Debug)]
struct AsText<'a>(&'a SqlValue);

impl ToSql for AsText<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self.0 {
            SqlValue::Null => return Ok(IsNull::Yes),
            SqlValue::Int(v) => out.extend_from_slice(v.to_string().as_bytes()),
            SqlValue::Text(v) => out.extend_from_slice(v.as_bytes()),
            SqlValue::Blob(v) if *ty == Type::BYTEA => {
                out.extend_from_slice(b"\\x");
                out.extend_from_slice(hex(v).as_bytes());
            }
            SqlValue::Blob(_) => return Err(format!("bytes cannot be bound to a parameter of type {ty}").into()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

/// Runs `staged` in order on `client`, inside the caller's transaction, then `last` (one of the
/// journal's statements, with its parameters), all sent in one round trip (with the
/// transaction's deferred `BEGIN`, if not yet sent); answers `last`'s rows. Inside the
/// transaction, the statements after a failed one fail too: the first failure is the one told.
/// A lost connection or a serialization failure is left to the caller's retry (`Fail::Db`);
/// any other failure of a staged statement names it (`Fail::Journal`), and the caller's
/// rollback undoes them all.
pub(super) fn run_then(
    client: &mut Client,
    prepared: &mut Prepared,
    staged: &[Staged],
    last: (&Statement, Params<'_>),
) -> TxResult<Vec<Row>> {
    let mut statements = Vec::with_capacity(staged.len());
    for (at, statement) in staged.iter().enumerate() {
        match prepare(client, prepared, statement.sql()) {
            Ok(ready) => statements.push(ready),
            // The transaction's deferred `BEGIN` went with it: its failure is not the statement's.
            Err(PipelineError::Before(e)) => return Err(Fail::Db(e)),
            Err(PipelineError::At(_, e)) => return Err(failure(prepared, at, statement, e)),
        }
    }
    let texts: Vec<Vec<AsText<'_>>> =
        staged.iter().map(|statement| statement.params().iter().map(AsText).collect()).collect();
    let refs: Vec<Vec<&(dyn ToSql + Sync)>> =
        texts.iter().map(|params| params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()).collect();
    let mut requests: Vec<(&Statement, Params<'_>)> =
        statements.iter().zip(refs.iter()).map(|(statement, params)| (statement, params.as_slice())).collect();
    requests.push(last);
    match client.pipeline(&requests) {
        Ok(mut answers) => Ok(answers.pop().unwrap_or_default()),
        Err(PipelineError::At(at, e)) if at < staged.len() => Err(failure(prepared, at, &staged[at], e)),
        Err(PipelineError::At(_, e) | PipelineError::Before(e)) => Err(Fail::Db(e)),
    }
}

/// The failure of the staged statement at `at` (from 0).
fn failure(prepared: &mut Prepared, at: usize, statement: &Staged, e: tokio_postgres::Error) -> Fail {
    // Prepared again next time: a statement that failed may be stale (its table changed).
    prepared.0.remove(statement.sql());
    let code = e.code();
    if connection_lost(&e)
        || code == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
        || code == Some(&SqlState::T_R_DEADLOCK_DETECTED)
        || code == Some(&SqlState::FEATURE_NOT_SUPPORTED)
    {
        return Fail::Db(e);
    }
    let problem = match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => match StdError::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    };
    Fail::Journal(staged::failed(at + 1, statement, &problem))
}

fn prepare(client: &mut Client, prepared: &mut Prepared, sql: &str) -> Result<Statement, PipelineError> {
    if let Some(statement) = prepared.0.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare_apart(sql)?;
    if prepared.0.len() >= KEPT {
        prepared.0.clear();
    }
    prepared.0.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}
