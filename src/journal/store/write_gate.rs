//! One writer at a time among the threads of this process, in front of SQLite's own write lock.
//!
//! SQLite lets one connection write at a time; a connection that finds the lock taken sleeps in
//! SQLite's busy handler, 1, 2, 5, 10 ms and longer, far beyond the fraction of a millisecond a
//! journal transaction holds the lock. Threads of one process therefore queue here first, on a
//! condition variable that wakes the next one the moment the lock is free; SQLite's lock and its
//! busy handler still order the processes sharing the file, and still decide alone: the gate is
//! an aid to throughput, never needed for correctness.
//!
//! The gate is passed through, not waited for, when waiting for it would break the journal's
//! promises: after the lock time-out (SQLite's busy handler then waits its own time-out as
//! before), and in a process forked while a thread of its parent held the gate (that thread does
//! not exist in the child, so the child takes the gate over).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The gate: which process holds it, by pid (`None` when free).
#[derive(Default)]
pub(crate) struct WriteGate {
    holder: Mutex<Option<u32>>,
    freed: Condvar,
}

/// A pass through the gate: the gate is held until the pass is dropped.
pub(crate) struct Pass<'g> {
    gate: &'g WriteGate,
}

fn lock(holder: &Mutex<Option<u32>>) -> MutexGuard<'_, Option<u32>> {
    holder.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl WriteGate {
    /// Waits until this thread is the process's one writer, at most `timeout`; `None` when the
    /// time ran out (go on without the gate: SQLite's lock still decides).
    pub fn enter(&self, timeout: Duration) -> Option<Pass<'_>> {
        let pid = std::process::id();
        let deadline = Instant::now().checked_add(timeout);
        let mut holder = lock(&self.holder);
        loop {
            // Free, or held by the process this one was forked from (whose holder thread does
            // not exist here, so it would never be released): take it.
            if holder.is_none_or(|held_by| held_by != pid) {
                *holder = Some(pid);
                return Some(Pass { gate: self });
            }
            let left = match deadline {
                Some(deadline) => deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?,
                None => Duration::from_secs(3600),
            };
            holder = self.freed.wait_timeout(holder, left).unwrap_or_else(|poisoned| poisoned.into_inner()).0;
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        *lock(&self.gate.holder) = None;
        self.gate.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn one_thread_at_a_time_passes() {
        let gate = Arc::new(WriteGate::default());
        let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (gate, inside, most) = (Arc::clone(&gate), Arc::clone(&inside), Arc::clone(&most));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _pass = gate.enter(Duration::from_secs(10)).expect("the gate within 10 s");
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(most.load(Ordering::SeqCst), 1, "two threads inside at once");
    }

    #[test]
    fn waiting_ends_at_the_time_out_and_the_gate_reopens_when_the_pass_goes() {
        let gate = WriteGate::default();
        let pass = gate.enter(Duration::ZERO).expect("a free gate is entered at once");
        let started = Instant::now();
        assert!(gate.enter(Duration::from_millis(50)).is_none(), "entered a held gate");
        assert!(started.elapsed() >= Duration::from_millis(50), "gave up before the time-out");
        drop(pass);
        assert!(gate.enter(Duration::ZERO).is_some(), "the gate stayed closed after the pass went");
    }

    #[test]
    fn a_gate_held_by_another_process_is_taken_over() {
        // As in a child forked while a thread of its parent held the gate.
        let gate = WriteGate::default();
        *lock(&gate.holder) = Some(std::process::id().wrapping_add(1));
        assert!(gate.enter(Duration::ZERO).is_some());
    }
}
