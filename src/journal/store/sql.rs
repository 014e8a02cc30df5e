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
    /// Runs a query; every row, integer columns as `Value::Int`, text ones as `Value::Text`,
    /// binary ones as `Value::Text` read as UTF-8 (invalid sequences replaced).
    fn rows(&mut self, sql: &str, params: &[Value]) -> Result<Vec<SqlRow>>;
    /// The wall clock of the server (PostgreSQL) or of this host (SQLite), in ms since the Unix
    /// epoch: the times kept for people. Never a lease's; those go by `lease_clock`.
    fn now_ms(&mut self) -> Result<i64>;
    /// Now on the clock leases are set and judged by (see [`LeaseClock`]).
    fn lease_clock(&mut self) -> Result<LeaseClock>;
    /// The clause a query ends with to lock the rows it reads, leaving rows other transactions
    /// hold: ` FOR UPDATE SKIP LOCKED` on PostgreSQL; nothing on SQLite, whose writers take
    /// turns anyway.
    fn lock_rows(&self) -> &'static str {
        ""
    }
}

/// The clock leases (claims' `lease_until_ms`, locks' `until_ms`) are set and judged by, read
/// once for the decisions of a transaction, so that every process and host sharing a journal
/// judges a lease alike and no step of a wall clock moves one:
///
/// - PostgreSQL: the server's wall clock (`clock_timestamp()`), one clock for every host; no
///   boot (`lease_boot` stays NULL).
/// - SQLite: the host's `CLOCK_BOOTTIME` (ms since the boot, suspend included), with the boot's
///   identity (`/proc/sys/kernel/random/boot_id`) stored beside each lease as `lease_boot`. A
///   lease of another boot, or of none (a row written before leases went by this clock), is
///   over: its worker did not outlive the boot, or ran a release that judged by the wall clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseClock {
    /// Now on the lease clock, in ms.
    pub now_ms: i64,
    /// The boot the lease clock counts from (SQLite), `None` on PostgreSQL.
    pub boot: Option<String>,
    /// Now on the wall clock of `Sql::now_ms`, to show a lease to people.
    pub wall_ms: i64,
}

impl LeaseClock {
    /// The end of a lease of `lease_ms` that starts now (stored with `boot`).
    pub fn until(&self, lease_ms: i64) -> i64 {
        self.now_ms.saturating_add(lease_ms)
    }

    /// Whether a lease set until `until_ms` in `boot` still runs.
    pub fn runs(&self, until_ms: i64, boot: Option<&str>) -> bool {
        boot == self.boot.as_deref() && until_ms > self.now_ms
    }

    /// A lease's end for people, on the wall clock (a guess as good as that clock: it moves
    /// with its steps; the lease does not). A lease of another boot or of none ended at the latest
    /// when this boot began, which is what it shows.
    pub fn wall_of(&self, until_ms: i64, boot: Option<&str>) -> i64 {
        let until = if boot == self.boot.as_deref() { until_ms } else { until_ms.min(0) };
        self.wall_ms.saturating_add(until.saturating_sub(self.now_ms))
    }
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
    fn leases_run_in_their_boot_until_their_end() {
        let clock = LeaseClock { now_ms: 10_000, boot: Some("b".to_owned()), wall_ms: 1_700_000_010_000 };
        assert!(clock.runs(clock.until(1), Some("b")));
        assert!(!clock.runs(10_000, Some("b")), "a lease ending now has ended");
        assert!(!clock.runs(i64::MAX, Some("a")), "a lease of another boot has ended");
        assert!(!clock.runs(i64::MAX, None), "a lease of no boot has ended");
        assert_eq!(clock.wall_of(40_000, Some("b")), 1_700_000_040_000);
        assert_eq!(clock.wall_of(40_000, Some("a")), 1_700_000_000_000, "at the latest when this boot began");
        let server = LeaseClock { now_ms: 1_700_000_010_000, boot: None, wall_ms: 1_700_000_010_000 };
        assert!(server.runs(1_700_000_010_001, None) && !server.runs(1_700_000_010_000, None));
        assert_eq!(server.wall_of(1_700_000_040_000, None), 1_700_000_040_000);
    }

    #[test]
    fn values_read_as_their_type() {
        assert_eq!(Value::from(5).int(), Some(5));
        assert_eq!(Value::from("x").text().as_deref(), Some("x"));
        assert_eq!(Value::Int(None).int(), None);
        assert_eq!(Value::from(7).text().as_deref(), Some("7"));
    }
}
