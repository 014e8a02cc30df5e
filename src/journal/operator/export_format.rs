//! The files of an export (see `export.rs`): CSV or JSON Lines, one row per delivery, the same
//! columns in the same order in both, shared by the C API and the operator command.
//!
//! Columns are named as the partner interface names the field where it has one (`transactionId`,
//! `playerIdentifier`, `moneyWon`, `currencyISO4217`, `errorMessage`, ...), the journal's own in
//! snake case (`first_delivery`, `last_update`); see `COLUMNS`. Times are RFC 3339 in UTC with
//! milliseconds (`2026-10-01T08:30:05.123Z`); amounts are integers in minor units as the service
//! sent them; `isMoney` is `true` or `false`.
//!
//! - CSV (RFC 4180): a header row, then a record per delivery, each line ended by CRLF; a field
//!   holding `"`, `,`, CR or LF is quoted, its quotes doubled. An empty field is a value the
//!   delivery does not have. The file is data for programs: cells are written as they are, never
//!   altered against spreadsheet formulas (that would corrupt a negative number or an identifier
//!   starting with `=`, `+`, `-` or `@`); open it in a spreadsheet only through its import, with
//!   every column as text.
//! - JSON Lines: a JSON object per delivery on its own line (LF), every column present, `null`
//!   for an empty one; numbers as numbers, `isMoney` as a boolean.

use std::io::Write;
use std::path::Path;

use crate::callback::json::push_quoted;
use crate::error::{Error, ErrorKind, Result};

use super::export::ExportRow;
use super::new_file::NewFile;
use super::{Journal, rfc3339_ms};

/// The format of an export file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExportFormat {
    /// CSV after RFC 4180, with a header row.
    Csv,
    /// JSON Lines: one object per line.
    Jsonl,
}

impl ExportFormat {
    /// `csv` or `jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Csv => "csv",
            ExportFormat::Jsonl => "jsonl",
        }
    }

    /// `csv` or `jsonl`. Errors: `InvalidArgument` (field `format`) for anything else.
    pub fn parse(text: &str) -> Result<ExportFormat> {
        match text {
            "csv" => Ok(ExportFormat::Csv),
            "jsonl" => Ok(ExportFormat::Jsonl),
            other => {
                let problem = format!("expected csv or jsonl, got {:?}", other.chars().take(40).collect::<String>());
                Err(Error::field(ErrorKind::InvalidArgument, "format", problem))
            }
        }
    }
}

/// The columns of an export, in order: the CSV header and the JSON Lines object's names.
pub const COLUMNS: &[&str] = &[
    "index",
    "key",
    "event",
    "transactionId",
    "playerIdentifier",
    "playerPartnerIdentifier",
    "moneyWon",
    "coinsWon",
    "isMoney",
    "currencyISO4217",
    "gameSessionId",
    "outcome",
    "errorMessage",
    "state",
    "attempts",
    "first_delivery",
    "last_update",
    "finished",
];

/// A value of a column.
enum Cell<'a> {
    Empty,
    Int(i64),
    Bool(bool),
    Text(&'a str),
    Owned(String),
}

impl<'a> Cell<'a> {
    fn text(value: Option<&'a str>) -> Cell<'a> {
        value.map_or(Cell::Empty, Cell::Text)
    }
    fn int(value: Option<i64>) -> Cell<'a> {
        value.map_or(Cell::Empty, Cell::Int)
    }
    fn time(ms: Option<i64>) -> Cell<'a> {
        ms.map_or(Cell::Empty, |ms| Cell::Owned(rfc3339_ms(ms)))
    }
}

/// The cells of `row`, in the order of `COLUMNS`.
fn cells(row: &ExportRow) -> [Cell<'_>; 18] {
    [
        Cell::int(row.index),
        Cell::Text(&row.key),
        Cell::Text(&row.event),
        Cell::int(row.transaction_id),
        Cell::text(row.player_identifier.as_deref()),
        Cell::text(row.player_partner_identifier.as_deref()),
        Cell::int(row.money_won),
        Cell::int(row.coins_won),
        row.is_money.map_or(Cell::Empty, Cell::Bool),
        Cell::text(row.currency.as_deref()),
        Cell::int(row.game_session_id),
        Cell::Text(&row.outcome),
        Cell::text(row.error_message.as_deref()),
        Cell::Text(&row.state),
        Cell::Int(row.attempts),
        Cell::time(Some(row.first_delivery_ms)),
        Cell::time(Some(row.last_update_ms)),
        Cell::time(row.finished_ms),
    ]
}

/// Writes export rows to `W` in a format, a row at a time (nothing is kept but one line): the
/// CSV header when created, then `write` for each row, then `finish`. Owns `W` until `finish`
/// hands it back; give it a buffered writer.
pub struct ExportWriter<W: Write> {
    out: W,
    format: ExportFormat,
    line: String,
}

impl<W: Write> ExportWriter<W> {
    /// A writer of `format` into `out`; for CSV the header row is written now.
    pub fn new(out: W, format: ExportFormat) -> std::io::Result<ExportWriter<W>> {
        let mut writer = ExportWriter { out, format, line: String::with_capacity(512) };
        if format == ExportFormat::Csv {
            writer.out.write_all(COLUMNS.join(",").as_bytes())?;
            writer.out.write_all(b"\r\n")?;
        }
        Ok(writer)
    }

    /// Writes one row.
    pub fn write(&mut self, row: &ExportRow) -> std::io::Result<()> {
        let line = &mut self.line;
        line.clear();
        match self.format {
            ExportFormat::Csv => {
                for (i, cell) in cells(row).iter().enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    match cell {
                        Cell::Empty => {}
                        Cell::Int(n) => line.push_str(itoa::Buffer::new().format(*n)),
                        Cell::Bool(b) => line.push_str(if *b { "true" } else { "false" }),
                        Cell::Text(s) => push_csv(line, s),
                        Cell::Owned(s) => push_csv(line, s),
                    }
                }
                line.push_str("\r\n");
            }
            ExportFormat::Jsonl => {
                line.push('{');
                for (i, (name, cell)) in COLUMNS.iter().zip(cells(row).iter()).enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    push_quoted(line, name);
                    line.push(':');
                    match cell {
                        Cell::Empty => line.push_str("null"),
                        Cell::Int(n) => line.push_str(itoa::Buffer::new().format(*n)),
                        Cell::Bool(b) => line.push_str(if *b { "true" } else { "false" }),
                        Cell::Text(s) => push_quoted(line, s),
                        Cell::Owned(s) => push_quoted(line, s),
                    }
                }
                line.push_str("}\n");
            }
        }
        self.out.write_all(line.as_bytes())
    }

    /// Flushes and hands back the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// `text` as a CSV field (RFC 4180): quoted, its quotes doubled, when it holds `"`, `,`, CR or LF.
fn push_csv(out: &mut String, text: &str) {
    if text.contains(['"', ',', '\r', '\n']) {
        out.push('"');
        out.push_str(&text.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(text);
    }
}

fn refuse(problem: String) -> Error {
    Error::field(ErrorKind::InvalidArgument, "path", problem)
}

/// `Journal::export_to_file`: the export written to a temporary file beside `path`, flushed,
/// then given `path`'s name.
pub(crate) fn to_file(
    journal: &Journal,
    since_ms: i64,
    until_ms: i64,
    format: ExportFormat,
    path: &Path,
    progress: &mut dyn FnMut(&ExportRow),
) -> Result<u64> {
    super::export::check_period(since_ms, until_ms)?;
    let (partial, file) = NewFile::create(path, "path", "export")?;
    let failed = |e: std::io::Error| refuse(format!("cannot write {}: {e}", partial.temp().display()));
    let mut writer = ExportWriter::new(std::io::BufWriter::with_capacity(1 << 16, file), format).map_err(failed)?;
    let rows = journal.export(since_ms, until_ms, &mut |row| {
        writer.write(row).map_err(failed)?;
        progress(row);
        Ok(())
    })?;
    let file = writer.finish().map_err(failed)?.into_inner().map_err(|e| failed(e.into_error()))?;
    file.sync_all().map_err(failed)?;
    drop(file);
    partial.place()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> ExportRow {
        ExportRow {
            id: 1,
            index: Some(41),
            key: "jackpotPayout:900002".to_owned(),
            event: "jackpotPayout".to_owned(),
            transaction_id: Some(900_002),
            player_identifier: Some("p \"1\", =2\r\nx".to_owned()),
            player_partner_identifier: None,
            money_won: Some(-1500),
            coins_won: Some(0),
            is_money: Some(true),
            currency: Some("EUR".to_owned()),
            game_session_id: Some(3),
            outcome: "failure".to_owned(),
            error_message: Some("no, \u{e9}".to_owned()),
            state: "done".to_owned(),
            attempts: 1,
            first_delivery_ms: 1_790_812_800_000,
            last_update_ms: 1_790_812_800_123,
            finished_ms: None,
        }
    }

    fn written(format: ExportFormat, rows: &[ExportRow]) -> String {
        let mut writer = ExportWriter::new(Vec::new(), format).unwrap();
        for row in rows {
            writer.write(row).unwrap();
        }
        String::from_utf8(writer.finish().unwrap()).unwrap()
    }

    #[test]
    fn csv_quotes_what_must_be_and_alters_nothing() {
        let text = written(ExportFormat::Csv, &[row()]);
        let mut lines = text.split("\r\n");
        assert_eq!(lines.next().unwrap(), COLUMNS.join(","));
        assert_eq!(
            &text[text.find("\r\n").unwrap() + 2..],
            "41,jackpotPayout:900002,jackpotPayout,900002,\"p \"\"1\"\", =2\r\nx\",,-1500,0,true,EUR,3,failure,\"no, \u{e9}\",done,1,2026-10-01T00:00:00.000Z,2026-10-01T00:00:00.123Z,\r\n"
        );
        let empty = ExportRow::default();
        assert_eq!(
            written(ExportFormat::Csv, &[empty]).lines().nth(1).unwrap().matches(',').count(),
            COLUMNS.len() - 1
        );
    }

    #[test]
    fn jsonl_has_every_column_typed_with_null_for_empty_ones() {
        let text = written(ExportFormat::Jsonl, &[row(), ExportRow::default()]);
        assert!(text.ends_with("}\n") && text.lines().count() == 2);
        let first: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first.keys().map(String::as_str).collect::<Vec<_>>().len(), COLUMNS.len());
        assert_eq!(first["moneyWon"], -1500);
        assert_eq!(first["isMoney"], true);
        assert_eq!(first["playerIdentifier"], "p \"1\", =2\r\nx");
        assert_eq!(first["playerPartnerIdentifier"], serde_json::Value::Null);
        assert_eq!(first["first_delivery"], "2026-10-01T00:00:00.000Z");
        assert_eq!(first["finished"], serde_json::Value::Null);
        let names: Vec<String> = serde_json::from_str::<serde_json::Value>(text.lines().nth(1).unwrap())
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(names.len(), COLUMNS.len());
    }

    #[test]
    fn formats_parse_by_name() {
        assert_eq!(ExportFormat::parse("csv").unwrap(), ExportFormat::Csv);
        assert_eq!(ExportFormat::parse("jsonl").unwrap().as_str(), "jsonl");
        assert_eq!(ExportFormat::parse("xlsx").unwrap_err().field, "format");
    }
}
