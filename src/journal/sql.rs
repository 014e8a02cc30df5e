//! One statement interface over both backends, for the journal's operations that are not on a
//! delivery's path (operators' reads and corrections, recovery's bookkeeping, the migration):
//! written once in `admin.rs` with `?1`-style parameters, which PostgreSQL gets as `$1`.

use crate::error::Result;

/// A parameter or a column value. Typed nulls, since PostgreSQL checks a parameter's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}

impl Value {
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(v) => *v,
            Value::Text(_) => None,
        }
    }

    pub fn text(&self) -> Option<String> {
        match self {
            Value::Text(v) => v.clone(),
            Value::Int(v) => v.map(|v| v.to_string()),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(Some(v))
    }
}

impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Self {
        Value::Int(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(Some(v.to_owned()))
    }
}

impl From<Option<&str>> for Value {
    fn from(v: Option<&str>) -> Self {
        Value::Text(v.map(str::to_owned))
    }
}

/// A row of a query: its values in column order.
pub(crate) type SqlRow = Vec<Value>;

/// Statements inside one transaction of a backend; a failure is a `Journal` error naming the
/// journal.
pub(crate) trait Sql {
    /// Runs a statement; the rows it changed.
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64>;
    /// Runs a query; every row, integer columns as `Value::Int`, text ones as `Value::Text`.
    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<SqlRow>>;
    /// The server's clock (PostgreSQL) or this host's (SQLite), in ms since the Unix epoch.
    fn now_ms(&mut self) -> Result<i64>;
}

/// The first row, if any.
pub(crate) fn row(sql: &mut dyn Sql, text: &str, params: &[Value]) -> Result<Option<SqlRow>> {
    Ok(sql.rows(text, params)?.into_iter().next())
}

/// The first column of the first row as an integer (`None`: no row, or NULL).
pub(crate) fn int(sql: &mut dyn Sql, text: &str, params: &[Value]) -> Result<Option<i64>> {
    Ok(row(sql, text, params)?.and_then(|row| row.first().and_then(Value::int)))
}

/// `?1`-style parameters as PostgreSQL's `$1`.
pub(crate) fn dollar_params(sql: &str) -> String {
    sql.replace('?', "$")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_become_dollars() {
        assert_eq!(dollar_params("SELECT ?1, ?2 WHERE a = ?1"), "SELECT $1, $2 WHERE a = $1");
    }

    #[test]
    fn values_read_as_their_type() {
        assert_eq!(Value::from(5).int(), Some(5));
        assert_eq!(Value::from("x").text().as_deref(), Some("x"));
        assert_eq!(Value::Int(None).int(), None);
        assert_eq!(Value::from(7).text().as_deref(), Some("7"));
    }
}
