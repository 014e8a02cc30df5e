//! `journal export`: the deliveries of a period as CSV or JSON Lines, for the monthly
//! reconciliation with the service's reports. The rows stream from the journal (a page of 1,000
//! at a time) to stdout or to a new file, so memory stays constant whatever the period holds.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use slotpartner::journal::{ExportFormat, ExportRow, ExportWriter, Journal, rfc3339_ms};

use crate::args::ExportArgs;
use crate::config::open_journal;
use crate::output::print_json;
use crate::{Fail, Outcome, Verdict};

/// The summary `--json` prints once the file is in place.
#[derive(Serialize)]
struct Summary<'a> {
    rows: u64,
    since: String,
    /// `None`: no end was given.
    until: Option<String>,
    format: &'static str,
    output: &'a str,
}

/// Writes the period's deliveries; exit 0 once written (an empty period too).
pub fn run(args: &ExportArgs) -> Outcome {
    if args.json && args.output.is_none() {
        return Err(Fail(
            "--json prints a summary of an export to a file: give --output FILE (without it the rows themselves go to stdout)"
                .to_owned(),
        ));
    }
    let until = args.until.unwrap_or(i64::MAX);
    if until <= args.since {
        return Err(Fail(format!("--until: {} is not after --since {}", rfc3339_ms(until), rfc3339_ms(args.since))));
    }
    let format = ExportFormat::parse(&args.format)?;
    let journal = open_journal(&args.journal)?;
    let bar = Progress::start(&journal)?;
    let mut advance = |row: &ExportRow| {
        if let Some(bar) = &bar {
            bar.advance(row);
        }
    };
    let rows = match &args.output {
        Some(path) => journal.export_to_file(args.since, until, format, path, &mut advance).map_err(Fail::from),
        None => match to_stdout(&journal, args.since, until, format, &mut advance) {
            Ok(rows) => Ok(rows),
            // A reader that stopped reading (`| head`) is no failure of the export.
            Err(Stopped::Pipe) => Ok(0),
            Err(Stopped::Fail(fail)) => Err(fail),
        },
    };
    if let Some(bar) = &bar {
        bar.bar.finish_and_clear();
    }
    let rows = rows?;
    if let Some(path) = &args.output {
        let output = path.to_string_lossy();
        if args.json {
            print_json(&Summary {
                rows,
                since: rfc3339_ms(args.since),
                until: args.until.map(rfc3339_ms),
                format: format.as_str(),
                output: &output,
            })?;
        } else {
            eprintln!("{rows} deliveries written to {output}");
        }
    }
    Ok(Verdict::Good)
}

/// Why writing to stdout stopped early.
enum Stopped {
    /// The reader closed the pipe.
    Pipe,
    Fail(Fail),
}

fn to_stdout(
    journal: &Journal,
    since: i64,
    until: i64,
    format: ExportFormat,
    advance: &mut dyn FnMut(&ExportRow),
) -> Result<u64, Stopped> {
    let stdout = std::io::stdout();
    let mut pipe_closed = false;
    let mut failed = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            pipe_closed = true;
        }
        slotpartner::Error::new(slotpartner::ErrorKind::InvalidArgument, format!("cannot write to stdout: {e}"))
    };
    let result = (|| {
        let mut writer = ExportWriter::new(std::io::BufWriter::with_capacity(1 << 16, stdout.lock()), format)
            .map_err(&mut failed)?;
        let rows = journal.export(since, until, &mut |row| {
            writer.write(row).map_err(&mut failed)?;
            advance(row);
            Ok(())
        })?;
        writer.finish().map_err(&mut failed)?.flush().map_err(&mut failed)?;
        Ok::<u64, slotpartner::Error>(rows)
    })();
    match result {
        Ok(rows) => Ok(rows),
        Err(_) if pipe_closed => Err(Stopped::Pipe),
        Err(e) => Err(Stopped::Fail(e.into())),
    }
}

/// A bar on stderr when it is a terminal, over the journal's row numbers (what the export goes
/// through; the rows of the period are not counted ahead).
struct Progress {
    bar: ProgressBar,
    /// The lowest row number of the journal.
    first_id: i64,
}

impl Progress {
    fn start(journal: &Journal) -> Result<Option<Progress>, Fail> {
        if !std::io::stderr().is_terminal() {
            return Ok(None);
        }
        let Some((first_id, last_id)) = journal.export_extent()? else { return Ok(None) };
        let len = u64::try_from(last_id.saturating_sub(first_id)).unwrap_or(0) + 1;
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let style =
            ProgressStyle::with_template("{spinner} exporting [{elapsed_precise}] [{wide_bar}] {percent}% (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Ok(Some(Progress { bar, first_id }))
    }

    fn advance(&self, row: &ExportRow) {
        self.bar.set_position(u64::try_from(row.id.saturating_sub(self.first_id)).unwrap_or(0) + 1);
    }
}

/// A date (`2026-10-01`, its midnight in UTC) or an RFC 3339 time (`2026-10-01T08:30:00Z`,
/// `2026-10-01T10:30:00.250+02:00`) as milliseconds since the Unix epoch. A time finer than a
/// millisecond is rounded up: the journal keeps whole milliseconds, and a row at `t` lies in a
/// period from `a` to `b` exactly when it lies from `ceil(a)` to `ceil(b)`.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let wrong = || format!("expected a date (2026-10-01) or an RFC 3339 time (2026-10-01T08:30:00Z), got {text:?}");
    let digits = |part: &str| -> Option<i64> {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse().ok()).flatten()
    };
    let date = text.get(..10).ok_or_else(wrong)?;
    let (year, month, day) = match date.as_bytes() {
        [_, _, _, _, b'-', _, _, b'-', _, _] => (digits(&date[..4]), digits(&date[5..7]), digits(&date[8..])),
        _ => return Err(wrong()),
    };
    let (Some(year), Some(month), Some(day)) = (year, month, day) else { return Err(wrong()) };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(format!("{date} is no day of the calendar"));
    }
    let midnight = days_from_civil(year, month, day) * 86_400_000;
    let rest = &text[10..];
    if rest.is_empty() {
        return Ok(midnight);
    }
    let rest = rest.strip_prefix(['T', 't', ' ']).ok_or_else(wrong)?;
    // HH:MM:SS, then a fraction, then Z or an offset.
    let clock = rest.get(..8).ok_or_else(wrong)?;
    let (hour, minute, second) = match clock.as_bytes() {
        [_, _, b':', _, _, b':', _, _] => (digits(&clock[..2]), digits(&clock[3..5]), digits(&clock[6..])),
        _ => return Err(wrong()),
    };
    let (Some(hour), Some(minute), Some(second)) = (hour, minute, second) else { return Err(wrong()) };
    if hour > 23 || minute > 59 || second > 60 {
        return Err(format!("{clock} is no time of day"));
    }
    let mut rest = &rest[8..];
    let mut nanos = 0_i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let end = fraction.find(|c: char| !c.is_ascii_digit()).unwrap_or(fraction.len());
        if end == 0 || end > 9 {
            return Err(wrong());
        }
        nanos = digits(&fraction[..end]).ok_or_else(wrong)? * 10_i64.pow(9 - end as u32);
        rest = &fraction[end..];
    }
    let offset_minutes = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (Some(h), Some(m)) = (digits(&rest[1..3]), digits(&rest[4..])) else { return Err(wrong()) };
            if h > 23 || m > 59 {
                return Err(format!("{rest} is no offset from UTC"));
            }
            if *sign == b'+' { h * 60 + m } else { -(h * 60 + m) }
        }
        [] => return Err(format!("{text:?} needs its offset from UTC: Z or +HH:MM")),
        _ => return Err(wrong()),
    };
    let seconds = hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(midnight + seconds * 1000 + (nanos + 999_999) / 1_000_000)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date, after Howard Hinnant's `days_from_civil`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_time;
    use slotpartner::journal::rfc3339_ms;

    #[test]
    fn dates_and_times() {
        assert_eq!(parse_time("1970-01-01"), Ok(0));
        assert_eq!(parse_time("2026-10-01").map(rfc3339_ms).unwrap(), "2026-10-01T00:00:00.000Z");
        assert_eq!(parse_time("2024-02-29").map(rfc3339_ms).unwrap(), "2024-02-29T00:00:00.000Z");
        assert_eq!(parse_time("2026-10-01T08:30:05Z").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.000Z");
        assert_eq!(parse_time("2026-10-01t08:30:05.123z").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.123Z");
        assert_eq!(parse_time("2026-10-01T10:30:05.5+02:00").map(rfc3339_ms).unwrap(), "2026-10-01T08:30:05.500Z");
        assert_eq!(parse_time("2026-10-01 00:00:00-01:30").map(rfc3339_ms).unwrap(), "2026-10-01T01:30:00.000Z");
        assert_eq!(parse_time("1969-12-31T23:59:59.999Z"), Ok(-1));
        // Finer than a millisecond: rounded up, as the journal's whole milliseconds need.
        assert_eq!(parse_time("1970-01-01T00:00:00.000001Z"), Ok(1));
        assert_eq!(parse_time("1970-01-01T00:00:00.001000000Z"), Ok(1));
        for bad in [
            "",
            "2026-13-01",
            "2026-02-29",
            "2026-10-32",
            "2026-1-01",
            "26-10-01",
            "2026/10/01",
            "2026-10-01T",
            "2026-10-01T08:30Z",
            "2026-10-01T24:00:00Z",
            "2026-10-01T08:30:00",
            "2026-10-01T08:30:00.Z",
            "2026-10-01T08:30:00+0200",
            "2026-10-01T08:30:00+24:00",
            "2026-10-01Tx8:30:00Z",
            "2026-10-01T08:30:00Z junk",
            "october",
            "2026-10-01\u{e9}",
        ] {
            assert!(parse_time(bad).is_err(), "{bad:?}");
        }
    }
}
