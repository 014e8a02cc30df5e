//! The operator's decisions about the journal: `journal resolve`, `resolutions`, `conflicts`,
//! `resolve-conflict`, `jumps`, `accept-jump`, `jump-is-gap`, `renumber`; and the lines and JSON
//! of index jumps, conflicts and resolutions that `journal gaps` and `journal show` share.

use serde::Serialize;
use slotpartner::journal::{ConflictRecord, IndexJump, JumpKind, Resolution, rfc3339_ms};

use crate::args::{ConflictsArgs, DecideArgs, JumpsArgs, RenumberArgs, ResolutionsArgs, ResolveArgs};
use crate::config::open_journal;
use crate::journal::range_text;
use crate::output::{print_json, quoted};
use crate::{Outcome, Verdict};

/// An index jump with its times as RFC 3339 (UTC).
#[derive(Serialize)]
pub struct JumpJson<'a> {
    #[serde(flatten)]
    pub record: &'a IndexJump,
    pub at: String,
    pub last: String,
    pub decided: Option<String>,
}

impl<'a> JumpJson<'a> {
    pub fn of(record: &'a IndexJump) -> Self {
        JumpJson {
            record,
            at: rfc3339_ms(record.at_ms),
            last: rfc3339_ms(record.last_ms),
            decided: record.decided_ms.map(rfc3339_ms),
        }
    }
}

/// A conflict with its times as RFC 3339 (UTC).
#[derive(Serialize)]
pub struct ConflictJson<'a> {
    #[serde(flatten)]
    pub record: &'a ConflictRecord,
    pub first_seen: String,
    pub last_seen: String,
    pub resolved: Option<String>,
}

impl<'a> ConflictJson<'a> {
    pub fn of(record: &'a ConflictRecord) -> Self {
        ConflictJson {
            record,
            first_seen: rfc3339_ms(record.first_ms),
            last_seen: rfc3339_ms(record.last_ms),
            resolved: record.resolved_ms.map(rfc3339_ms),
        }
    }
}

/// A resolution with its time as RFC 3339 (UTC).
#[derive(Serialize)]
pub struct ResolutionJson<'a> {
    #[serde(flatten)]
    pub record: &'a Resolution,
    pub at: String,
}

impl<'a> ResolutionJson<'a> {
    pub fn of(record: &'a Resolution) -> Self {
        ResolutionJson { record, at: rfc3339_ms(record.at_ms) }
    }
}

/// `id=2 kind=jump index=1000000000000 previous_highest=5 event=... key=... at=... state=open`.
pub fn jump_line(j: &IndexJump) -> String {
    let mut line = format!("id={} kind={} index={}", j.id, j.kind.as_str(), j.index);
    let previous = j.previous_highest.map_or_else(|| "none".to_owned(), |p| p.to_string());
    line.push_str(&format!(" previous_highest={previous}"));
    if let Some(name) = &j.name {
        line.push_str(&format!(" event={}", quoted_if_needed(name)));
    }
    if let Some(key) = &j.key {
        line.push_str(&format!(" key={}", quoted_if_needed(key)));
    }
    if let Some(other) = &j.other_key {
        line.push_str(&format!(" other_key={}", quoted_if_needed(other)));
    }
    if j.kind == JumpKind::Reused && j.count > 1 {
        line.push_str(&format!(" count={} last_index={} last={}", j.count, j.last_index, rfc3339_ms(j.last_ms)));
    }
    line.push_str(&format!(" numbering={} at={}", j.numbering, rfc3339_ms(j.at_ms)));
    match &j.decision {
        None => line.push_str(" state=open"),
        Some(decision) => {
            line.push_str(&format!(" state={}", quoted_if_needed(decision)));
            if let Some(at) = j.decided_ms {
                line.push_str(&format!(" decided={}", rfc3339_ms(at)));
            }
            if let Some(note) = &j.note {
                line.push_str(&format!(" note={}", quoted(note)));
            }
        }
    }
    line
}

/// `id=1 range=3-4 closed=2 numbering=1 at=... note="..."`.
pub fn resolution_line(r: &Resolution) -> String {
    format!(
        "id={} range={} closed={} numbering={} at={} note={}",
        r.id,
        range_text(r.first, r.last),
        r.closed,
        r.numbering,
        rfc3339_ms(r.at_ms),
        quoted(&r.note)
    )
}

/// A conflict as a few lines: what, when, the fields that differ, both contents.
pub fn conflict_lines(c: &ConflictRecord) -> Vec<String> {
    let number = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let state = match c.resolved_ms {
        None => "open".to_owned(),
        Some(at) => format!("resolved {}", rfc3339_ms(at)),
    };
    let mut lines = vec![
        format!("conflict {}: {} ({state})", c.id, quoted_if_needed(&c.key)),
        format!(
            "  event: {} transactionId: {} index: {}",
            quoted_if_needed(&c.name),
            number(c.transaction_id),
            number(c.index)
        ),
        format!(
            "  outcome: {} deliveries: {} first seen: {} last seen: {}",
            c.outcome,
            c.count,
            rfc3339_ms(c.first_ms),
            rfc3339_ms(c.last_ms)
        ),
    ];
    for field in &c.differing {
        lines.push(format!("  differs: {}", crate::one_line(field)));
    }
    lines.push(format!("  first content: {}", crate::one_line(&c.first_content)));
    lines.push(format!("  now content:   {}", crate::one_line(&c.now_content)));
    if let Some(note) = &c.note {
        lines.push(format!("  note: {}", quoted(note)));
    }
    lines
}

/// A word as is; anything with spaces, quotes or control characters as a JSON string.
fn quoted_if_needed(text: &str) -> String {
    let plain = !text.is_empty() && text.chars().all(|c| !c.is_whitespace() && !c.is_control() && c != '"');
    if plain { text.to_owned() } else { quoted(text) }
}

/// At most `limit` entries of a list read with one more: the entries, and whether more exist.
fn cut<T>(mut items: Vec<T>, limit: usize) -> (Vec<T>, bool) {
    let more = items.len() > limit;
    items.truncate(limit);
    (items, more)
}

fn limit_of(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

fn note_more(more: bool, limit: usize, what: &str) {
    if more {
        eprintln!("slotpartner: only the first {limit} {what} are listed (--limit)");
    }
}

/// `journal resolve FIRST-LAST --note TEXT`.
pub fn resolve(args: &ResolveArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let (first, last) = args.range;
    let closed = journal.resolve(first, last, &args.note)?;
    let missing = journal.status()?.missing;
    let range = range_text(first, last);
    match closed {
        0 => {
            crate::outln!("resolved {range}: none of its indexes was missing; the note is kept ({missing} missing now)")
        }
        1 => crate::outln!("resolved {range}: 1 missing index closed ({missing} missing now)"),
        n => crate::outln!("resolved {range}: {n} missing indexes closed ({missing} missing now)"),
    }
    Ok(Verdict::Good)
}

/// `journal resolutions`.
pub fn resolutions(args: &ResolutionsArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let limit = limit_of(args.limit);
    let (list, more) = cut(journal.resolutions(limit.saturating_add(1))?, limit);
    if args.json {
        print_json(&list.iter().map(ResolutionJson::of).collect::<Vec<_>>())?;
    } else {
        for r in &list {
            crate::outln!("{}", resolution_line(r));
        }
    }
    note_more(more, limit, "resolutions");
    Ok(Verdict::Good)
}

/// `journal conflicts [--all]`: exit 1 when any is open.
pub fn conflicts(args: &ConflictsArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let limit = limit_of(args.limit);
    let (list, more) = cut(journal.conflicts(args.all, limit.saturating_add(1))?, limit);
    if args.json {
        print_json(&list.iter().map(ConflictJson::of).collect::<Vec<_>>())?;
    } else {
        for (i, c) in list.iter().enumerate() {
            if i > 0 {
                crate::outln!();
            }
            for line in conflict_lines(c) {
                crate::outln!("{line}");
            }
        }
    }
    note_more(more, limit, "conflicts");
    let open = journal.status()?.open_conflicts;
    Ok(Verdict::bad_if(open > 0))
}

/// `journal resolve-conflict ID --note TEXT`.
pub fn resolve_conflict(args: &DecideArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    journal.resolve_conflict(args.id, &args.note)?;
    let open = journal.status()?.open_conflicts;
    crate::outln!("conflict {} resolved ({open} open now)", args.id);
    Ok(Verdict::Good)
}

/// `journal close-unfinished INDEX --note TEXT`.
pub fn close_unfinished(args: &DecideArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let closed = journal.close_unfinished(args.id, &args.note)?;
    let left = journal.status()?.unfinished;
    crate::outln!("closed {closed} unfinished deliveries at index {} ({left} unfinished now)", args.id);
    Ok(Verdict::Good)
}

/// `journal jumps [--all]`: exit 1 when any is open.
pub fn jumps(args: &JumpsArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let limit = limit_of(args.limit);
    let (list, more) = cut(journal.index_jumps(args.all, limit.saturating_add(1))?, limit);
    if args.json {
        print_json(&list.iter().map(JumpJson::of).collect::<Vec<_>>())?;
    } else {
        for j in &list {
            crate::outln!("{}", jump_line(j));
        }
    }
    note_more(more, limit, "index jumps");
    let open = journal.status()?.index_jumps;
    Ok(Verdict::bad_if(open > 0))
}

/// `journal accept-jump ID --note TEXT`.
pub fn accept_jump(args: &DecideArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    journal.accept_jump(args.id, &args.note)?;
    let status = journal.status()?;
    crate::outln!(
        "index jump {} accepted ({} open now, {} indexes missing)",
        args.id,
        status.index_jumps,
        status.missing
    );
    Ok(Verdict::Good)
}

/// `journal jump-is-gap ID --note TEXT`.
pub fn jump_is_gap(args: &DecideArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    journal.jump_is_gap(args.id, &args.note)?;
    let status = journal.status()?;
    crate::outln!(
        "index jump {} is a gap: its stretch counts as missing ({} open now, {} indexes missing)",
        args.id,
        status.index_jumps,
        status.missing
    );
    Ok(Verdict::Good)
}

/// `journal renumber --from N --note TEXT [--give-up-gaps]`.
pub fn renumber(args: &RenumberArgs) -> Outcome {
    let journal = open_journal(&args.journal)?;
    let numbering = if args.give_up_gaps {
        journal.renumber_giving_up_gaps(args.first, &args.note)?
    } else {
        journal.renumber(args.first, &args.note)?
    };
    crate::outln!("numbering {numbering} starts at index {}", args.first);
    Ok(Verdict::Good)
}
