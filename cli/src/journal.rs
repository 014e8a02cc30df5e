//! `journal status`, `journal gaps`, `journal show`.

use serde::Serialize;
use slotpartner::journal::{Record, Status};

use crate::args::{GapsArgs, ShowArgs, StatusArgs};
use crate::config::open_journal;
use crate::output::{lossy, print_json};
use crate::{Outcome, Verdict};
use slotpartner::journal::rfc3339_ms;

#[derive(Serialize)]
struct StatusJson {
    handled: u64,
    replayed: u64,
    conflicts: u64,
    refused: u64,
    in_progress: u64,
    missing: u64,
    first_index: Option<i64>,
    highest_index: Option<i64>,
    watermark: Option<i64>,
}

impl From<Status> for StatusJson {
    fn from(s: Status) -> Self {
        StatusJson {
            handled: s.handled,
            replayed: s.replayed,
            conflicts: s.conflicts,
            refused: s.refused,
            in_progress: s.in_progress,
            missing: s.missing,
            first_index: s.first_index,
            highest_index: s.highest_index,
            watermark: s.watermark,
        }
    }
}

/// Counts and gap figures. Exit 0 whenever the journal could be read: `gaps` is the check.
pub fn status(args: &StatusArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let status = journal.status()?;
    if args.json {
        print_json(&StatusJson::from(status))?;
        return Ok(Verdict::Good);
    }
    let optional = |value: Option<i64>| value.map_or_else(|| "none".to_owned(), |v| v.to_string());
    println!("handled:       {}", status.handled);
    println!("replayed:      {}", status.replayed);
    println!("conflicts:     {}", status.conflicts);
    println!("refused:       {}", status.refused);
    println!("in progress:   {}", status.in_progress);
    println!("missing:       {}", status.missing);
    println!("first index:   {}", optional(status.first_index));
    println!("highest index: {}", optional(status.highest_index));
    println!("watermark:     {}", optional(status.watermark));
    Ok(Verdict::Good)
}

#[derive(Serialize)]
struct Range {
    first: i64,
    last: i64,
}

#[derive(Serialize)]
struct GapsJson {
    missing: u64,
    ranges: Vec<Range>,
    /// More ranges exist than `--limit` let be listed.
    truncated: bool,
}

/// `3` or `6-8`.
pub fn range_text(first: i64, last: i64) -> String {
    if first == last { first.to_string() } else { format!("{first}-{last}") }
}

/// The missing indexes as ranges; exit 1 when any.
pub fn gaps(args: &GapsArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let mut missing = journal.missing(limit.saturating_add(1))?;
    let truncated = missing.len() > limit;
    missing.truncate(limit);
    let count = if missing.is_empty() { 0 } else { journal.status()?.missing };
    if args.json {
        let ranges = missing.iter().map(|&(first, last)| Range { first, last }).collect();
        print_json(&GapsJson { missing: count, ranges, truncated })?;
    } else {
        for &(first, last) in &missing {
            println!("{}", range_text(first, last));
        }
        if truncated {
            eprintln!("slotpartner: only the first {limit} ranges are listed ({count} indexes missing in all)");
        }
    }
    Ok(Verdict::bad_if(!missing.is_empty()))
}

#[derive(Serialize)]
struct RecordJson {
    key: String,
    event: Option<String>,
    index: Option<i64>,
    transaction_id: Option<i64>,
    state: &'static str,
    attempts: i64,
    created: String,
    updated: String,
    lease_until: Option<String>,
    finished: Option<String>,
    /// The stored reply as text (`done` records only).
    reply: Option<String>,
}

impl From<&Record> for RecordJson {
    fn from(r: &Record) -> Self {
        RecordJson {
            key: r.key.clone(),
            event: r.name.clone(),
            index: r.index,
            transaction_id: r.transaction_id,
            state: r.state.as_str(),
            attempts: r.attempts,
            created: rfc3339_ms(r.created_ms),
            updated: rfc3339_ms(r.updated_ms),
            lease_until: r.lease_until_ms.map(rfc3339_ms),
            finished: r.finished_ms.map(rfc3339_ms),
            reply: r.reply.as_deref().map(lossy),
        }
    }
}

/// Every record of a transactionId; exit 1 when there is none.
pub fn show(args: &ShowArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let records = journal.lookup(args.transaction_id)?;
    let shown: Vec<RecordJson> = records.iter().map(RecordJson::from).collect();
    if args.json {
        print_json(&shown)?;
    } else if shown.is_empty() {
        eprintln!("slotpartner: the journal holds no record of transactionId {}", args.transaction_id);
    } else {
        for (i, r) in shown.iter().enumerate() {
            if i > 0 {
                println!();
            }
            let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
            let number = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
            println!("key:            {}", r.key);
            println!("event:          {}", or_none(&r.event));
            println!("index:          {}", number(r.index));
            println!("transactionId:  {}", number(r.transaction_id));
            println!("state:          {}", r.state);
            println!("attempts:       {}", r.attempts);
            println!("created:        {}", r.created);
            println!("updated:        {}", r.updated);
            if r.lease_until.is_some() {
                println!("lease until:    {}", or_none(&r.lease_until));
            }
            println!("finished:       {}", or_none(&r.finished));
            println!("reply:          {}", or_none(&r.reply));
        }
    }
    Ok(Verdict::bad_if(shown.is_empty()))
}
