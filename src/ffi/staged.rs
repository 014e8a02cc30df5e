//! Staged statements: the partner's own SQL, run by `sp_event_finish` in the transaction that
//! stores the reply (see `sp_event_stage`).

use std::ffi::c_char;

use crate::error::{Error, ErrorKind, Result};
use crate::journal::{MAX_PARAMS, SqlValue, Staged};

use super::args;
use super::event::{self, sp_event};
use super::status::sp_status;

/// What an `sp_sql_value` holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum sp_sql_kind {
    /// SQL `NULL`; `int_value`, `bytes` and `len` are not read.
    SP_SQL_NULL = 0,
    /// `int_value`, a 64-bit integer (an amount in minor units, an id).
    SP_SQL_INT = 1,
    /// `len` bytes of UTF-8 text at `bytes` (no NUL needed; NULL with `len` 0 is the empty
    /// text). On PostgreSQL sent in text format, so that the server reads it as the parameter's
    /// type (`numeric`, `timestamptz`, `uuid`, ...).
    SP_SQL_TEXT = 2,
    /// `len` bytes at `bytes` (`bytea` on PostgreSQL, a blob on SQLite).
    SP_SQL_BLOB = 3,
}

/// One parameter of a staged statement, read by `sp_event_stage` and copied: the caller's memory
/// is not kept. `kind` is an `sp_sql_kind` held as an integer, so that any value a host writes is
/// read safely: another value is refused.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct sp_sql_value {
    pub kind: u32,
    pub int_value: i64,
    pub bytes: *const u8,
    pub len: usize,
}

/// Stages a statement of the partner's own (its ledger's credit, say) on the claim `event` holds,
/// to run when `sp_event_finish` stores the reply: in the same transaction, after the claim is
/// confirmed this event's, in the order staged. The credit and the stored reply then commit
/// together, with one durable commit, or not at all; exactly once no longer rests on the ledger's
/// own unique key. Use it when the ledger lives in the journal's database.
///
/// `sql` (`sql_len` bytes of UTF-8, no NUL needed) is the database's own dialect with its own
/// positional placeholders (`$1` on PostgreSQL, `?` or `?1` on SQLite); `params` holds
/// `params_len` values bound to them, never spliced into the text. Both are copied. A statement
/// is run for its effect: its rows, if any, are not read, so a reply cannot depend on them
/// (logic that must read first keeps its own transaction and the ledger's unique key).
///
/// The statements run before the reply is stored, and the reply is stored only if the
/// transaction is still the journal's: a statement that ended it in a way the check at staging
/// cannot see makes `sp_event_finish` fail (`SP_ERR_JOURNAL`, field `statements`) without
/// storing the reply, though what the statements did may have been committed: abandon and
/// answer 503, and stage the credit with `ON CONFLICT (...) DO NOTHING` on the ledger's unique
/// key, so that the next delivery's run credits nothing twice.
/// `sp_event_finish` runs them all or none: when one fails it answers `SP_ERR_JOURNAL`, field
/// `statements[N]` (from 0), naming the statement and the database's error; nothing was stored,
/// the statements stay staged and the claim is still held (under claim at finish, none was
/// written): finish again, or abandon.
/// `SP_ERR_CLAIM_LOST` from `sp_event_finish` means no staged statement ran: answer 503 and let
/// the delivery that holds the key now run the logic. `sp_event_abandon` and `sp_event_free`
/// drop them unrun.
///
/// Fails with `SP_ERR_INVALID_ARGUMENT`, staging nothing: field `event` when it holds no claim
/// (not begun, answered from the journal, not journaled, finished or abandoned: no finish would
/// run the statement); field `sql` when it is NULL, empty, not UTF-8, holds a NUL, is longer
/// than 1 MiB, or is not one statement of a kind a credit needs as both PostgreSQL's and
/// SQLite's lexers read it (past the blanks, comments and `;` each skips): it must start with
/// `INSERT`, `UPDATE`, `DELETE`, `MERGE`, `REPLACE` (SQLite), `SELECT`, `WITH` or `SET LOCAL`.
/// Transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`...: the journal's), commands
/// that outlive the transaction on the pooled connection (a `SET` other than `SET LOCAL`,
/// `RESET`, `DISCARD`, `DEALLOCATE`, `LISTEN`, `CALL`, `DO`, SQLite's `PRAGMA`, `ATTACH`), DDL,
/// `SELECT ... INTO`, a second statement after `;` and text ending inside a string or comment
/// are refused, the message naming what was found; or 1,000 statements are staged already;
/// field `params` when `params_len` exceeds
/// 65,535 or `params` is NULL with `params_len` above 0; field `params[N].kind` for an unknown
/// kind, `params[N].bytes` for text that is not UTF-8 or bytes NULL with `len` above 0.
///
/// # Safety
/// `event` is NULL or live and used by no other thread; `sql` is NULL or `sql_len` readable bytes;
/// `params` is NULL or `params_len` readable values, each `bytes` NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sp_event_stage(
    event: *mut sp_event,
    sql: *const c_char,
    sql_len: usize,
    params: *const sp_sql_value,
    params_len: usize,
) -> sp_status {
    status_boundary!({
        // SAFETY: the caller promises NULL or valid pointers as documented; everything is copied
        // before the event is touched (a host may pass the library's own strings back in).
        let statement = unsafe { read_statement(sql, sql_len, params, params_len)? };
        // SAFETY: the caller promises NULL or a live event it does not share.
        unsafe { event::stage(event, statement)? };
        Ok(())
    })
}

/// Copies and checks the statement and its parameters.
///
/// # Safety
/// As for `sp_event_stage`.
unsafe fn read_statement(
    sql: *const c_char,
    sql_len: usize,
    params: *const sp_sql_value,
    params_len: usize,
) -> Result<Staged> {
    if sql.is_null() {
        return Err(args::null("sql"));
    }
    // SAFETY: the caller promises `sql_len` readable bytes at a non-NULL `sql`.
    let text = unsafe { args::bytes("sql", sql.cast::<u8>(), sql_len)? };
    let text = args::utf8("sql", text)?;
    if params_len > MAX_PARAMS {
        let problem = format!("{params_len} values is more than the limit of {MAX_PARAMS}");
        return Err(Error::field(ErrorKind::InvalidArgument, "params", problem));
    }
    let values: &[sp_sql_value] = if params.is_null() {
        if params_len > 0 {
            return Err(args::null("params"));
        }
        &[]
    } else {
        // SAFETY: the caller promises `params_len` readable values; the count is bounded above.
        unsafe { std::slice::from_raw_parts(params, params_len) }
    };
    let mut bound = Vec::with_capacity(values.len());
    for (at, value) in values.iter().enumerate() {
        // SAFETY: each value's bytes are as the caller promises.
        bound.push(unsafe { read_value(at, value)? });
    }
    Staged::new(text, bound)
}

/// One parameter, copied.
///
/// # Safety
/// `value.bytes` is NULL or `value.len` readable bytes.
unsafe fn read_value(at: usize, value: &sp_sql_value) -> Result<SqlValue> {
    let bytes = |field: &str| {
        // SAFETY: the caller's promise, passed on.
        unsafe { args::bytes(field, value.bytes, value.len) }
    };
    Ok(match value.kind {
        k if k == sp_sql_kind::SP_SQL_NULL as u32 => SqlValue::Null,
        k if k == sp_sql_kind::SP_SQL_INT as u32 => SqlValue::Int(value.int_value),
        k if k == sp_sql_kind::SP_SQL_TEXT as u32 => {
            let field = format!("params[{at}].bytes");
            SqlValue::Text(args::utf8(&field, bytes(&field)?)?.to_owned())
        }
        k if k == sp_sql_kind::SP_SQL_BLOB as u32 => SqlValue::Blob(bytes(&format!("params[{at}].bytes"))?.to_vec()),
        other => {
            let problem =
                format!("{other} is not a kind of value (SP_SQL_NULL 0, SP_SQL_INT 1, SP_SQL_TEXT 2, SP_SQL_BLOB 3)");
            return Err(Error::field(ErrorKind::InvalidArgument, format!("params[{at}].kind"), problem));
        }
    })
}
