//! The partner's staged statements on PostgreSQL: prepared once a connection (a few kept, like
//! the journal's own), their parameters sent in text format so that the server converts each to
//! its column's type, run inside the transaction of `finish`.

use std::collections::HashMap;
use std::error::Error as StdError;

use bytes::BytesMut;
use postgres::error::SqlState;
use postgres::types::{Format, IsNull, ToSql, Type, to_sql_checked};
use postgres::{Client, Statement};

use super::super::hex::hex;
use super::super::staged::{self, SqlValue, Staged};
use super::{Fail, TxResult, connection_lost};

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

/// Runs `staged` in order on `client`, inside the caller's transaction. A lost connection or a
/// serialization failure is left to the caller's retry (`Fail::Db`); any other failure names its
/// statement (`Fail::Journal`), and the caller's rollback undoes them all.
pub(super) fn run(client: &mut Client, prepared: &mut Prepared, staged: &[Staged]) -> TxResult<()> {
    for (at, statement) in staged.iter().enumerate() {
        let ran = prepare(client, prepared, statement.sql()).and_then(|prepared| {
            let params: Vec<AsText<'_>> = statement.params().iter().map(AsText).collect();
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
            client.execute(&prepared, &refs)
        });
        if let Err(e) = ran {
            // Prepared again next time: a statement that failed may be stale (its table changed).
            prepared.0.remove(statement.sql());
            let code = e.code();
            if connection_lost(&e)
                || code == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                || code == Some(&SqlState::T_R_DEADLOCK_DETECTED)
                || code == Some(&SqlState::FEATURE_NOT_SUPPORTED)
            {
                return Err(Fail::Db(e));
            }
            let problem = match e.as_db_error() {
                Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
                None => match StdError::source(&e) {
                    Some(cause) => format!("{e}: {cause}"),
                    None => e.to_string(),
                },
            };
            return Err(Fail::Journal(staged::failed(at + 1, statement, &problem)));
        }
    }
    Ok(())
}

fn prepare(client: &mut Client, prepared: &mut Prepared, sql: &str) -> Result<Statement, postgres::Error> {
    if let Some(statement) = prepared.0.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(sql)?;
    if prepared.0.len() >= KEPT {
        prepared.0.clear();
    }
    prepared.0.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}
