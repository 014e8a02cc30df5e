//! The texts this thread's `allowed::refusal` passed lately, so that a host staging the same
//! statement at every delivery (its credit, its text fixed in its code) has it read by both
//! lexers once, not at every delivery.
//!
//! The judgement depends on the text alone, so a text found here passes as it passed before.
//! Only passed texts are kept, at most `ENTRIES` of them and none longer than `LONGEST` bytes:
//! a text refused, or too long, is judged every time, and texts passing in turn replace the
//! oldest. The memory is so bounded whatever texts a host stages (at most `ENTRIES` times
//! `LONGEST` bytes a thread), and a host staging many distinct texts only loses the memo's gain.
//!
//! A thread-local, not a process-wide table: no lock for threads to wait on, and none a child of
//! `fork` could inherit held (a child keeps the forking thread's texts, which judge the same
//! there). The texts are freed with their thread.

use std::cell::RefCell;

/// The most texts a thread keeps.
const ENTRIES: usize = 8;
/// The longest text kept, in bytes; a longer one is judged every time.
const LONGEST: usize = 4096;

/// This thread's passed texts, in `ENTRIES` slots filled in turn.
struct Passed {
    texts: [Option<Box<str>>; ENTRIES],
    /// The slot the next text passed goes into (the oldest once all are filled).
    next: usize,
}

thread_local! {
    static PASSED: RefCell<Passed> = const { RefCell::new(Passed { texts: [const { None }; ENTRIES], next: 0 }) };
}

/// `judge(sql)`: none when this thread passed `sql` lately, without judging it again; else
/// judged, and kept when it passes (unless longer than `LONGEST`) in place of the oldest text
/// kept. On a thread whose locals are gone (a thread-local destructor staging a statement),
/// judged every time.
pub(super) fn judged(sql: &str, judge: impl FnOnce(&str) -> Option<String>) -> Option<String> {
    if PASSED.try_with(|passed| passed.borrow().texts.iter().flatten().any(|t| **t == *sql)).unwrap_or(false) {
        return None;
    }
    let refusal = judge(sql);
    if refusal.is_none() && sql.len() <= LONGEST {
        let _ = PASSED.try_with(|passed| {
            let mut passed = passed.borrow_mut();
            let at = passed.next;
            passed.texts[at] = Some(sql.into());
            passed.next = (at + 1) % ENTRIES;
        });
    }
    refusal
}

/// This thread's kept texts (tests).
#[cfg(test)]
pub(super) fn kept() -> Vec<String> {
    PASSED.with(|passed| passed.borrow().texts.iter().flatten().map(|t| t.to_string()).collect())
}

/// The bounds (tests).
#[cfg(test)]
pub(super) const BOUNDS: (usize, usize) = (ENTRIES, LONGEST);
