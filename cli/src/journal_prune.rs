//! `journal prune --older-than DURATION`: retention. Finished deliveries older than the
//! retention are compacted (reply and content removed, a digest kept), in small batches that
//! workers barely notice; then a SQLite journal gives the freed pages back. Exit 0 when nothing
//! eligible is left, 1 when `--max-time` (or an export running) stopped it first (more is left for
//! the next run).

use std::time::Duration;

use serde::Serialize;
use slotpartner::journal::{PruneOptions, PruneReport};

use crate::args::PruneArgs;
use crate::config::open_journal;
use crate::output::{age_text, print_json};
use crate::{Fail, Outcome, Verdict};

#[derive(Serialize)]
struct PruneJson {
    /// `--older-than` and `--forget-older-than`, in seconds.
    older_than_seconds: u64,
    forget_older_than_seconds: Option<u64>,
    /// Finished deliveries compacted (reply and content removed, digest kept).
    compacted: u64,
    /// Compact records removed (`--forget-older-than`).
    forgotten: u64,
    /// Records of deliveries refused by validation removed.
    refused_removed: u64,
    /// Resolved conflicts removed.
    conflicts_removed: u64,
    batches: u64,
    /// The longest a batch's transaction took: what a delivery may have waited for it.
    longest_batch_ms: f64,
    /// Bytes given back to the file system (SQLite; 0 on PostgreSQL, whose autovacuum reuses them).
    bytes_returned: u64,
    /// Nothing eligible is left; false when `--max-time` or an export running stopped it first
    /// (exit 1).
    complete: bool,
    /// Why it stopped before done: `max_time`, or the export running; `null` when complete.
    stopped_by: Option<String>,
}

pub fn prune(args: &PruneArgs) -> Outcome {
    if let Some(forget) = args.forget_older_than {
        if forget <= args.older_than {
            return Err(Fail(format!(
                "--forget-older-than ({}) must be longer than --older-than ({}): compact records outlive the replies",
                age_text(forget),
                age_text(args.older_than)
            )));
        }
    }
    let journal = open_journal(&args.journal)?;
    let options = PruneOptions {
        forget_older_than: args.forget_older_than,
        batch: usize::try_from(args.batch).unwrap_or(usize::MAX),
        max_time: args.max_time,
        ..PruneOptions::older_than(args.older_than)
    };
    let report = journal.prune(&options)?;
    let verdict = Verdict::bad_if(!report.complete);
    if args.json {
        print_json(&json_of(args, &report))?;
        return Ok(verdict);
    }
    crate::outln!("compacted:         {}", report.compacted);
    crate::outln!("forgotten:         {}", report.forgotten);
    crate::outln!("refused removed:   {}", report.refused_removed);
    crate::outln!("conflicts removed: {}", report.conflicts_removed);
    crate::outln!("batches:           {}", report.batches);
    crate::outln!("longest batch:     {}", millis_text(report.longest_batch));
    crate::outln!("bytes returned:    {}", report.bytes_returned);
    crate::outln!("complete:          {}", if report.complete { "yes" } else { "no" });
    if !report.complete {
        let why = match report.stopped_by.as_deref() {
            Some("max_time") | None => format!("at --max-time {}", args.max_time.map(age_text).unwrap_or_default()),
            Some(other) => format!("early: {other}"),
        };
        eprintln!("slotpartner: prune stopped {why}: more is left for the next run");
    }
    Ok(verdict)
}

fn json_of(args: &PruneArgs, report: &PruneReport) -> PruneJson {
    PruneJson {
        older_than_seconds: args.older_than.as_secs(),
        forget_older_than_seconds: args.forget_older_than.map(|d| d.as_secs()),
        compacted: report.compacted,
        forgotten: report.forgotten,
        refused_removed: report.refused_removed,
        conflicts_removed: report.conflicts_removed,
        batches: report.batches,
        longest_batch_ms: (report.longest_batch.as_secs_f64() * 1_000_000.0).round() / 1000.0,
        bytes_returned: report.bytes_returned,
        complete: report.complete,
        stopped_by: report.stopped_by.clone(),
    }
}

/// `12.345 ms`.
fn millis_text(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}
