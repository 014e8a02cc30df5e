//! `journal backup FILE`: a copy of a live SQLite journal, taken while the workers write.

use serde::Serialize;

use crate::args::BackupArgs;
use crate::config::open_journal;
use crate::output::{print_json, quoted};
use crate::{Outcome, Verdict};

#[derive(Serialize)]
struct BackupJson {
    /// The backup file, as given.
    file: String,
    pages: u64,
    bytes: u64,
    elapsed_ms: u64,
}

/// `journal backup FILE`: exit 0 once the copy is in place, 2 (an error line) when there is none.
pub fn backup(args: &BackupArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let report = journal.backup(&args.file)?;
    let file = args.file.to_string_lossy().into_owned();
    let elapsed_ms = u64::try_from(report.elapsed.as_millis()).unwrap_or(u64::MAX);
    if args.json {
        print_json(&BackupJson { file, pages: report.pages, bytes: report.bytes, elapsed_ms })?;
    } else {
        crate::outln!(
            "backup written: file={} pages={} bytes={} elapsed_ms={elapsed_ms}",
            quoted(&file),
            report.pages,
            report.bytes
        );
    }
    Ok(Verdict::Good)
}
