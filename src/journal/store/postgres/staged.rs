//! The partner's staged statements on PostgreSQL: sent unnamed (see `client`), or kept prepared
//! by name where the URL keeps the journal's own (`statement_cache`, a direct connection); their
//! parameters in text format and declared of no type (OID 0), so that the server infers each
//! from the statement and reads it as its column's type; bytes declared `bytea`. Run inside the
//! transaction of `finish`, sent together with the statement storing the reply; their rows, if
//! any, dropped unread.

use std::error::Error as StdError;
use std::sync::LazyLock;

use bytes::BytesMut;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Format, IsNull, Kind, ToSql, Type, to_sql_checked};

use super::super::hex::hex;
use super::super::staged::{self, SqlValue, Staged};
use super::client::{Sql, Typed};
use super::statement_cache::StatementCache;
use super::{Client, Fail, PipelineError, TxResult, connection_lost};

/// A parameter's type left to the server (OID 0 in the Parse message: "unspecified").
static UNSPECIFIED: LazyLock<Type> =
    LazyLock::new(|| Type::new("unknown".to_owned(), 0, Kind::Simple, "pg_catalog".to_owned()));

/// A parameter in text format: the server reads it as the type it infers for it; bytes in
/// `bytea`'s hex format, declared `bytea` (see `declared`).
#[derive(Debug)]
struct AsText<'a>(&'a SqlValue);

impl ToSql for AsText<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match self.0 {
            SqlValue::Null => return Ok(IsNull::Yes),
            SqlValue::Int(v) => out.extend_from_slice(v.to_string().as_bytes()),
            SqlValue::Text(v) => out.extend_from_slice(v.as_bytes()),
            SqlValue::Blob(v) => {
                out.extend_from_slice(b"\\x");
                out.extend_from_slice(hex(v).as_bytes());
            }
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

/// The type a staged parameter is declared as: `bytea` for bytes (so that bytes bound where the
/// server expects text are refused by it, not stored as their hex text), else left to the server.
fn declared(value: &SqlValue) -> Type {
    match value {
        SqlValue::Blob(_) => Type::BYTEA,
        SqlValue::Null | SqlValue::Int(_) | SqlValue::Text(_) => UNSPECIFIED.clone(),
    }
}

/// Runs `staged` in order on `client`, inside the caller's transaction, then `last` (one of the
/// journal's statements, with its parameters), all sent in one round trip (with the
/// transaction's deferred `BEGIN`, if not yet sent); answers `last`'s rows. A statement the
/// connection keeps (`statements`, see `StatementCache::staged`) is sent by name; one it is to
/// keep is prepared first, in a round trip of its own (once a connection). Inside the
/// transaction, the statements after a failed one fail too: the first failure is the one told.
/// A lost connection, a serialization failure or a statement kept prepared gone stale is left to
/// the caller's retry (`Fail::Db`); any other failure of a staged statement names it
/// (`Fail::Journal`), and the caller's rollback undoes them all.
pub(super) fn run_then(
    client: &mut Client,
    statements: &mut StatementCache,
    staged: &[Staged],
    last: (Sql<'_>, &Typed<'_>),
) -> TxResult<Vec<Row>> {
    let texts: Vec<Vec<AsText<'_>>> =
        staged.iter().map(|statement| statement.params().iter().map(AsText).collect()).collect();
    let params: Vec<Vec<(&(dyn ToSql + Sync), Type)>> = texts
        .iter()
        .map(|values| values.iter().map(|value| (value as &(dyn ToSql + Sync), declared(value.0))).collect())
        .collect();
    let types: Vec<Vec<Type>> = params.iter().map(|params| params.iter().map(|(_, ty)| ty.clone()).collect()).collect();
    let declared: Vec<(&str, &[Type])> =
        staged.iter().zip(&types).map(|(statement, types)| (statement.sql(), types.as_slice())).collect();
    // Each as sent, and whether kept from before this transaction: only those may have gone
    // stale (one prepared now holds its tables' locks until the transaction ends).
    let named = match statements.staged(client, &declared) {
        Ok(named) => named,
        Err(PipelineError::At(at, e)) => return Err(failure(at, &staged[at], false, e)),
        Err(PipelineError::Before(e) | PipelineError::After(e)) => return Err(Fail::Db(e)),
    };
    let executed: Vec<(Sql<'_>, &Typed<'_>)> = staged
        .iter()
        .zip(&params)
        .zip(&named)
        .map(|((statement, params), (named, _))| {
            (super::statement_cache::sql(statement.sql(), named.as_ref()), params.as_slice())
        })
        .collect();
    match client.pipeline(&executed, last) {
        Ok(rows) => Ok(rows),
        Err(PipelineError::At(at, e)) if at < staged.len() => Err(failure(at, &staged[at], named[at].1, e)),
        Err(PipelineError::At(_, e) | PipelineError::Before(e) | PipelineError::After(e)) => Err(Fail::Db(e)),
    }
}

/// The failure of the staged statement at `at` (from 0), sent by name as `kept` by a transaction
/// before this one.
///
/// Such a statement failing as a stale one does (its plan's result type changed with its table,
/// `0A000`; its name dropped by a `DEALLOCATE`, `26000`) is the connection's failure, not the
/// statement's: left to the caller, which runs the work again on a fresh connection (`poisoned`),
/// where it is prepared again. Were it the statement's own (`0A000` is also "not supported"),
/// the same failure comes again there from the statement prepared in that transaction, which
/// names it.
fn failure(at: usize, statement: &Staged, kept: bool, e: tokio_postgres::Error) -> Fail {
    let code = e.code();
    if connection_lost(&e)
        || code == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
        || code == Some(&SqlState::T_R_DEADLOCK_DETECTED)
        || (kept
            && [SqlState::FEATURE_NOT_SUPPORTED, SqlState::INVALID_SQL_STATEMENT_NAME].iter().any(|c| code == Some(c)))
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
