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
