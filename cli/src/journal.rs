//! `journal status`, `journal gaps`, `journal show`.

use serde::Serialize;
use slotpartner::Journal;
use slotpartner::journal::{Record, Status};

use crate::args::{GapsArgs, ShowArgs, StatusArgs};
use crate::config::open_journal;
use crate::journal_admin::{ConflictJson, JumpJson, ResolutionJson, conflict_lines, jump_line, resolution_line};
use crate::output::{age_text, elapsed_text, lossy, print_json};
use crate::{Fail, Outcome, Verdict};
use slotpartner::journal::rfc3339_ms;

#[derive(Serialize)]
struct StatusJson {
    handled: u64,
    replayed: u64,
    conflicts: u64,
    refused: u64,
    in_progress: u64,
    missing: u64,
    unfinished: u64,
    open_conflicts: u64,
    index_jumps: u64,
    resolved: u64,
    unrecoverable: u64,
    numbering: i64,
    first_index: Option<i64>,
    /// Whether the first index is configured; `false`: it is the lowest seen, and `recover` asks
    /// the service below it each run.
    first_index_stored: bool,
    highest_index: Option<i64>,
    watermark: Option<i64>,
    /// The index after the highest seen that the service last had no event for (`recover`'s
    /// probe of the tail), and when; `null` when never asked.
    tail_checked_index: Option<i64>,
    tail_checked: Option<String>,
    /// Missing indexes, unfinished deliveries, open conflicts or open index jumps.
    needs_attention: bool,
    /// Deliveries compacted by `journal prune`, and compact records it removed (counters).
    pruned: u64,
    forgotten: u64,
    /// The bytes the journal takes; `null` when unknown.
    size_bytes: Option<u64>,
    /// When the oldest delivery with its reply stored was finished (RFC 3339, and ms since the
    /// Unix epoch); `null` when none.
    oldest_record: Option<String>,
    oldest_record_ms: Option<i64>,
    /// When a new index was last seen; `null` when none yet.
    last_delivery: Option<String>,
    last_delivery_ms: Option<i64>,
    /// When the oldest missing index was found missing, and how many seconds ago; `null` when
    /// nothing is missing.
    oldest_gap: Option<String>,
    oldest_gap_ms: Option<i64>,
    oldest_gap_age_seconds: Option<u64>,
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
            unfinished: s.unfinished,
            open_conflicts: s.open_conflicts,
            index_jumps: s.index_jumps,
            resolved: s.resolved,
            unrecoverable: s.unrecoverable,
            numbering: s.numbering,
            first_index: s.first_index,
            first_index_stored: s.first_index_stored,
            highest_index: s.highest_index,
            watermark: s.watermark,
            tail_checked_index: s.tail_checked.map(|(index, _)| index),
            tail_checked: s.tail_checked.map(|(_, ms)| rfc3339_ms(ms)),
            needs_attention: Journal::needs_attention(&s),
            pruned: s.pruned,
            forgotten: s.forgotten,
            size_bytes: s.size_bytes,
            oldest_record: s.oldest_record_ms.map(rfc3339_ms),
            oldest_record_ms: s.oldest_record_ms,
            last_delivery: s.last_delivery_ms.map(rfc3339_ms),
            last_delivery_ms: s.last_delivery_ms,
            oldest_gap: s.oldest_gap_ms.map(rfc3339_ms),
            oldest_gap_ms: s.oldest_gap_ms,
            oldest_gap_age_seconds: s.oldest_gap_ms.map(|ms| age_of(ms).as_secs()),
        }
    }
}

/// How long ago `ms` (ms since the Unix epoch) was, on this host's clock; zero for a time ahead.
fn age_of(ms: i64) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(slotpartner::journal::now_ms().saturating_sub(ms)).unwrap_or(0))
}

/// `2024-06-11T08:30:05.123Z (12m 5s ago)`, or `none`; a time ahead of this host's clock (a
/// clock that was ahead wrote it) says so: `(3h 0m ahead of this host's clock)`.
fn time_and_age(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "none".to_owned() };
    let ahead =
        std::time::Duration::from_millis(u64::try_from(ms.saturating_sub(slotpartner::journal::now_ms())).unwrap_or(0));
    if ahead >= std::time::Duration::from_secs(1) {
        format!("{} ({} ahead of this host's clock)", rfc3339_ms(ms), elapsed_text(ahead))
    } else {
        format!("{} ({} ago)", rfc3339_ms(ms), elapsed_text(age_of(ms)))
    }
}

/// Counts and gap figures; exit 1 when the journal needs attention.
pub fn status(args: &StatusArgs) -> Outcome {
    if args.prometheus {
        return crate::metrics::print(&args.journal);
    }
    let journal = open_journal(&args.journal)?;
    let status = journal.status()?;
    let verdict = Verdict::bad_if(Journal::needs_attention(&status));
    if args.json {
        print_json(&StatusJson::from(status))?;
        return Ok(verdict);
    }
    let optional = |value: Option<i64>| value.map_or_else(|| "none".to_owned(), |v| v.to_string());
    crate::outln!("handled:        {}", status.handled);
    crate::outln!("replayed:       {}", status.replayed);
    crate::outln!("conflicts:      {}", status.conflicts);
    crate::outln!("open conflicts: {}", status.open_conflicts);
    crate::outln!("refused:        {}", status.refused);
    crate::outln!("in progress:    {}", status.in_progress);
    crate::outln!("unfinished:     {}", status.unfinished);
    crate::outln!("missing:        {}", status.missing);
    crate::outln!("unrecoverable:  {}", status.unrecoverable);
    crate::outln!("resolved:       {}", status.resolved);
    crate::outln!("index jumps:    {}", status.index_jumps);
    crate::outln!("numbering:      {}", status.numbering);
    let first_from = match (status.first_index, status.first_index_stored) {
        (None, _) => "",
        (Some(_), true) => " (configured)",
        (Some(_), false) => " (the lowest seen: recover asks the service below it each run)",
    };
    crate::outln!("first index:    {}{first_from}", optional(status.first_index));
    crate::outln!("highest index:  {}", optional(status.highest_index));
    crate::outln!("watermark:      {}", optional(status.watermark));
    crate::outln!("pruned:         {}", status.pruned);
    crate::outln!("forgotten:      {}", status.forgotten);
    crate::outln!(
        "size:           {}",
        status.size_bytes.map_or_else(|| "unknown".to_owned(), |b| format!("{b} bytes"))
    );
    crate::outln!("oldest reply:   {}", time_and_age(status.oldest_record_ms));
    crate::outln!("last new index: {}", time_and_age(status.last_delivery_ms));
    crate::outln!("oldest gap:     {}", time_and_age(status.oldest_gap_ms));
    let tail = match status.tail_checked {
        Some((index, ms)) => format!("none at {index} when recover asked, {}", time_and_age(Some(ms))),
        None => "never asked (recover asks the service after the highest index once no new one came for --min-age)"
            .to_owned(),
    };
    crate::outln!("tail:           {tail}");
    Ok(verdict)
}

#[derive(Serialize)]
struct Range {
    first: i64,
    last: i64,
}

#[derive(Serialize)]
struct GapsJson<'a> {
    missing: u64,
    ranges: Vec<Range>,
    /// More ranges exist than `--limit` let be listed.
    truncated: bool,
    /// Missing indexes no longer fetched (HTTP 404 for `--not-found-limit` recovery runs).
    unrecoverable: Vec<i64>,
    /// Indexes of deliveries claimed and never finished.
    unfinished: Vec<i64>,
    /// Open index jumps and reused indexes.
    index_jumps: Vec<JumpJson<'a>>,
    open_conflicts: u64,
    /// Ranges closed by hand in the current numbering, newest first.
    resolved: Vec<ResolutionJson<'a>>,
    /// `--older-than`: only gaps found missing at least that long ago are listed; `null` without it.
    older_than: Option<String>,
    /// Missing indexes left out for being younger than `--older-than` (0 without it, or when
    /// the ranges were truncated by `--limit`).
    younger: u64,
    /// What the exit status says: missing indexes (with `--older-than`, old enough ones),
    /// unfinished deliveries, open conflicts or open index jumps.
    needs_attention: bool,
}

/// `3` or `6-8`.
pub fn range_text(first: i64, last: i64) -> String {
    if first == last { first.to_string() } else { format!("{first}-{last}") }
}

/// Sorted indexes as ranges: `2-4,7`; `-` when there are none.
pub fn indexes_text(indexes: &[i64]) -> String {
    let mut parts = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        parts.push(range_text(first, last));
    }
    if parts.is_empty() { "-".to_owned() } else { parts.join(",") }
}

/// The missing indexes as ranges, then what else needs attention; exit 1 when anything does.
pub fn gaps(args: &GapsArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let mut missing = match args.older_than {
        Some(age) => journal.missing_older_than(age, limit.saturating_add(1))?,
        None => journal.missing(limit.saturating_add(1))?,
    };
    let truncated = missing.len() > limit;
    missing.truncate(limit);
    let status = journal.status()?;
    // With --older-than, the younger gaps are left out, and are no bad news: the ranges listed
    // are every old one unless truncated (old gaps lie below the young ones).
    let listed: u64 = missing.iter().map(|&(first, last)| u64::try_from(last - first + 1).unwrap_or(0)).sum();
    let younger = match (args.older_than, truncated) {
        (Some(_), false) => status.missing.saturating_sub(listed),
        _ => 0,
    };
    let unrecoverable = journal.unrecoverable(limit)?;
    let unfinished = journal.unfinished(limit)?;
    let jumps = journal.index_jumps(false, limit)?;
    let resolutions: Vec<_> =
        journal.resolutions(limit)?.into_iter().filter(|r| r.numbering == status.numbering).collect();
    let needs_attention = match args.older_than {
        Some(_) => !missing.is_empty() || status.unfinished > 0 || status.open_conflicts > 0 || status.index_jumps > 0,
        None => Journal::needs_attention(&status),
    };
    if args.json {
        let ranges = missing.iter().map(|&(first, last)| Range { first, last }).collect();
        print_json(&GapsJson {
            missing: status.missing,
            ranges,
            truncated,
            unrecoverable,
            unfinished,
            index_jumps: jumps.iter().map(JumpJson::of).collect(),
            open_conflicts: status.open_conflicts,
            resolved: resolutions.iter().map(ResolutionJson::of).collect(),
            older_than: args.older_than.map(age_text),
            younger,
            needs_attention,
        })?;
    } else {
        for &(first, last) in &missing {
            crate::outln!("{}", range_text(first, last));
        }
        if !unrecoverable.is_empty() {
            crate::outln!("unrecoverable: {}", indexes_text(&unrecoverable));
        }
        if !unfinished.is_empty() {
            crate::outln!("unfinished: {}", indexes_text(&unfinished));
        }
        for jump in &jumps {
            crate::outln!("jump: {}", jump_line(jump));
        }
        if status.open_conflicts > 0 {
            crate::outln!("conflicts: {} open (see 'slotpartner journal conflicts')", status.open_conflicts);
        }
        for resolution in &resolutions {
            crate::outln!("resolved: {}", resolution_line(resolution));
        }
        if truncated {
            eprintln!(
                "slotpartner: only the first {limit} ranges are listed ({} indexes missing in all)",
                status.missing
            );
        }
        if younger > 0 {
            let age = args.older_than.map(age_text).unwrap_or_default();
            eprintln!("slotpartner: {younger} missing indexes found missing less than {age} ago are not listed");
        }
    }
    Ok(Verdict::bad_if(needs_attention))
}

#[derive(Serialize)]
struct RecordJson<'a> {
    key: String,
    event: Option<String>,
    index: Option<i64>,
    transaction_id: Option<i64>,
    state: String,
    /// `null` (as `created` and `updated`) for a delivery found by index that carries no
    /// transactionId: the journal tells only its key and state by index.
    attempts: Option<i64>,
    created: Option<String>,
    updated: Option<String>,
    lease_until: Option<String>,
    finished: Option<String>,
    /// The stored reply as text (`done` records only).
    reply: Option<String>,
    /// Conflicts on this record's key no operator resolved yet.
    open_conflicts: Vec<ConflictJson<'a>>,
}

impl RecordJson<'_> {
    fn of(r: &Record) -> Self {
        RecordJson {
            key: r.key.clone(),
            event: r.name.clone(),
            index: r.index,
            transaction_id: r.transaction_id,
            state: r.state.as_str().to_owned(),
            attempts: Some(r.attempts),
            created: Some(rfc3339_ms(r.created_ms)),
            updated: Some(rfc3339_ms(r.updated_ms)),
            lease_until: r.lease_until_ms.map(rfc3339_ms),
            finished: r.finished_ms.map(rfc3339_ms),
            reply: r.reply.as_deref().map(lossy),
            open_conflicts: Vec::new(),
        }
    }

    /// A delivery at `index` without a transactionId, from its key (`event#17#bonusGranted`)
    /// and state alone.
    fn keyed(key: &str, state: &str, index: i64) -> Self {
        RecordJson {
            key: key.to_owned(),
            event: key.rsplit_once('#').map(|(_, name)| name.to_owned()),
            index: Some(index),
            transaction_id: None,
            state: state.to_owned(),
            attempts: None,
            created: None,
            updated: None,
            lease_until: None,
            finished: None,
            reply: None,
            open_conflicts: Vec::new(),
        }
    }
}

/// The records of `--index N`: the deliveries whose first delivery carried N (found by their
/// transactionId when they have one, so that every detail shows), and the refused deliveries
/// at N of those transactions.
fn records_at(journal: &Journal, index: i64) -> Result<Vec<RecordJson<'static>>, Fail> {
    let at = journal.deliveries_at(index)?;
    let mut transactions: Vec<i64> = at.iter().filter_map(|(_, _, id)| *id).collect();
    transactions.sort_unstable();
    transactions.dedup();
    let mut shown = Vec::new();
    for id in transactions {
        shown.extend(journal.lookup(id)?.iter().filter(|r| r.index == Some(index)).map(RecordJson::of));
    }
    for (key, state, _) in at.iter().filter(|(_, _, id)| id.is_none()) {
        shown.push(RecordJson::keyed(key, state, index));
    }
    Ok(shown)
}

/// Every record of a transactionId (or of an index) and its open conflicts; exit 1 when there
/// is no record.
pub fn show(args: &ShowArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let (mut shown, what) = match (args.index, args.transaction_id) {
        (Some(index), _) => (records_at(&journal, index)?, format!("index {index}")),
        (None, Some(id)) => (journal.lookup(id)?.iter().map(RecordJson::of).collect(), format!("transactionId {id}")),
        (None, None) => return Err(Fail("give a TRANSACTION_ID or --index N".to_owned())),
    };
    // A conflict goes with the record of its key (the first delivery of that key); one of the
    // transaction whose key has no record here (it should not happen) goes with the first.
    let conflicts: Vec<_> = journal
        .conflicts(false, usize::MAX)?
        .into_iter()
        .filter(|c| match args.index {
            Some(_) => shown.iter().any(|r| r.key == c.key),
            None => c.transaction_id == args.transaction_id,
        })
        .collect();
    for conflict in &conflicts {
        let at = shown.iter().position(|r| r.key == conflict.key).unwrap_or(0);
        if let Some(record) = shown.get_mut(at) {
            record.open_conflicts.push(ConflictJson::of(conflict));
        }
    }
    if args.json {
        print_json(&shown)?;
    } else if shown.is_empty() {
        eprintln!("slotpartner: the journal holds no record of {what}");
    } else {
        for (i, r) in shown.iter().enumerate() {
            if i > 0 {
                crate::outln!();
            }
            let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
            let number = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
            crate::outln!("key:            {}", r.key);
            crate::outln!("event:          {}", or_none(&r.event));
            crate::outln!("index:          {}", number(r.index));
            crate::outln!("transactionId:  {}", number(r.transaction_id));
            crate::outln!("state:          {}", r.state);
            crate::outln!("attempts:       {}", number(r.attempts));
            crate::outln!("created:        {}", or_none(&r.created));
            crate::outln!("updated:        {}", or_none(&r.updated));
            if r.lease_until.is_some() {
                crate::outln!("lease until:    {}", or_none(&r.lease_until));
            }
            crate::outln!("finished:       {}", or_none(&r.finished));
            crate::outln!("reply:          {}", or_none(&r.reply));
            for conflict in &r.open_conflicts {
                crate::outln!();
                for line in conflict_lines(conflict.record) {
                    crate::outln!("{line}");
                }
            }
        }
    }
    Ok(Verdict::bad_if(shown.is_empty()))
}

/// `journal create`: the journal's tables made (or migrated), as an endpoint's first delivery
/// makes them; exit 0 once they are there, 2 (an error line) when they cannot be.
pub fn create(args: &crate::args::CreateArgs) -> Outcome {
    let (url, options) = crate::config::journal_settings(&args.journal)?;
    slotpartner::Journal::open(url, &options)?;
    crate::outln!("journal ready: schema version {}", slotpartner::journal::SCHEMA_VERSION);
    Ok(Verdict::Good)
}
