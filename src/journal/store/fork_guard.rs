//! Forking while the journal is in use: no thread is inside the journal at the instant of a
//! `fork`, so a child never inherits a lock or a half-done SQLite call of its parent.
//!
//! Pre-forking servers (a PHP-FPM master, a C server, Python's `multiprocessing`) fork while
//! other threads of the parent may be in the middle of a journal call. The child has only the
//! forking thread; whatever the others held at that instant stays held in the child forever: a
//! Rust mutex (the registry, a pool, the write gate) and, worse, SQLite's own per-process state,
//! which every connection to a file shares, fresh ones of the child included: SQLite's static
//! mutexes, and the unix VFS's inode list and shared-memory node with their lock counts. A child
//! forked while a parent thread held a WAL read or write lock believes that lock is still held
//! and answers "database is locked" forever, or hangs on a mutex no thread will release.
//!
//! So every journal entry point (`Journal::open` and each call that reaches the registry, a pool
//! or the storage) holds an `Inside` pass for its duration, and a `pthread_atfork` handler
//! (`before_fork`, registered by `crate::ffi::fork` the first time a journal is opened) marks a
//! fork pending, holds new entrants back and waits until no thread is inside; `after_fork_parent`
//! and `after_fork_child` let the entrants go. At the fork, then, no parent thread is inside
//! SQLite or holds a library mutex, and SQLite's inherited per-file state shows no lock held (the
//! pool still leaves the parent's connections alone in the child and opens its own).
//!
//! Nothing here can deadlock: the handler waits at most `fork_wait` (twice the longest lock
//! time-out of the journals opened, at least 10 s, at most 60 s), and an entrant held back waits
//! at most as long. A fork that went on while a thread was still inside (a journal call that took
//! longer than that, say a PostgreSQL server that stopped answering) leaves a child whose
//! inherited state cannot be trusted: every journal call in that child fails at once with a
//! `Journal` error saying so, rather than hanging.
//!
//! A thread cannot fork from inside a journal call (there is no callback through which it
//! could); were it to, the child would be such an untrusted one too.
//!
//! Only std atomics and a thread-local counter: nothing here is a mutex the child could inherit
//! locked, and the handlers do nothing but atomic operations, reading the clock and sleeping.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

/// The shortest and the longest a fork waits for the threads inside the journal.
const MIN_WAIT: Duration = Duration::from_secs(10);
const MAX_WAIT: Duration = Duration::from_secs(60);

/// The state of one process (one static, `GUARD`; tests make their own).
pub(crate) struct ForkGuard {
    /// Passes held now, nested ones included (and, for an instant, entrants that find a fork
    /// pending and step back out).
    inside: AtomicUsize,
    /// Forks being prepared by `before_fork` and not yet through `after_fork_*`.
    pending: AtomicUsize,
    /// Passes held by threads that stopped waiting for a pending fork (see `enter`).
    intruders: AtomicUsize,
    /// This process was forked while a thread of its parent was inside: no journal call here.
    untrusted: AtomicBool,
    /// The longest lock time-out of the journals opened, in ms (see `fork_wait`).
    longest_lock_timeout_ms: AtomicU64,
    /// The shortest wait (`MIN_WAIT`; tests shorten it).
    min_wait: Duration,
}

static GUARD: ForkGuard = ForkGuard::new(MIN_WAIT);

thread_local! {
    /// How many passes this thread holds (journal calls nest).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Set by `before_fork` for the child of the fork this thread is making: the fork went on
    /// while a thread was inside.
    static FORKED_INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Held while a thread is inside the journal; dropped on the thread that took it.
#[must_use]
pub(crate) struct Inside<'g> {
    guard: &'g ForkGuard,
    intruder: bool,
    /// Not `Send`: `DEPTH` is the taking thread's.
    _thread: PhantomData<*const ()>,
}

/// Enters the journal: waits while a fork is being prepared, and fails when this process is a
/// child forked while its parent was inside (see the module's doc).
pub(crate) fn enter() -> Result<Inside<'static>> {
    GUARD.enter()
}

/// Registers the fork handlers (once per process) and notes `lock_timeout` for `fork_wait`.
/// Called by `Journal::open`, before it enters.
pub(crate) fn install(lock_timeout: Duration) -> Result<()> {
    let ms = u64::try_from(lock_timeout.as_millis()).unwrap_or(u64::MAX);
    GUARD.longest_lock_timeout_ms.fetch_max(ms, SeqCst);
    crate::ffi::fork::register_fork_handlers()
        .map_err(|e| Error::new(ErrorKind::Journal, format!("journal: cannot register its fork handlers: {e}")))
}

/// The `pthread_atfork` prepare handler: holds new entrants back and waits until no thread is
/// inside (at most `fork_wait`).
pub fn before_fork() {
    GUARD.before_fork(GUARD.fork_wait());
}

/// The `pthread_atfork` handler run in the parent after the fork: lets entrants in again.
pub fn after_fork_parent() {
    GUARD.after_fork_parent();
}

/// The `pthread_atfork` handler run in the child: only the forking thread exists here.
pub fn after_fork_child() {
    GUARD.after_fork_child();
}

/// Fork handlers of this process closing idle SQLite connections right now, and forks between
/// their prepare handler's end and their parent handler (see `before_fork`).
static CLOSING: AtomicUsize = AtomicUsize::new(0);
static FORKING: AtomicUsize = AtomicUsize::new(0);

/// Sleeps a little, longer each time up to 1 ms.
fn nap(pause: &mut Duration) {
    std::thread::sleep(*pause);
    *pause = (*pause * 2).min(Duration::from_millis(1));
}

impl ForkGuard {
    const fn new(min_wait: Duration) -> Self {
        ForkGuard {
            inside: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            intruders: AtomicUsize::new(0),
            untrusted: AtomicBool::new(false),
            longest_lock_timeout_ms: AtomicU64::new(0),
            min_wait,
        }
    }

    /// How long a fork waits for the threads inside: a journal call waits at most about twice its
    /// lock time-out (this process's write gate, then the storage's lock).
    fn fork_wait(&self) -> Duration {
        let longest = Duration::from_millis(self.longest_lock_timeout_ms.load(SeqCst));
        longest.saturating_mul(2).clamp(self.min_wait, MAX_WAIT)
    }

    fn enter(&self) -> Result<Inside<'_>> {
        let depth = DEPTH.get();
        let mut intruder = false;
        if depth > 0 {
            // Nested: this thread is inside already, and a fork waits for it to leave.
            self.inside.fetch_add(1, SeqCst);
        } else {
            let mut held_back: Option<Instant> = None;
            let mut pause = Duration::from_micros(50);
            loop {
                // Count in first, then look (both SeqCst, as `before_fork` marks, then looks):
                // either the fork sees this thread inside, or this thread sees the fork.
                self.inside.fetch_add(1, SeqCst);
                if self.pending.load(SeqCst) == 0 {
                    break;
                }
                let since = *held_back.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.fork_wait() {
                    // A fork that takes this long is stuck elsewhere (another library's fork
                    // handler waiting for a lock this thread's caller holds?): go on rather than
                    // wait forever. Its child will know (see `before_fork`).
                    self.intruders.fetch_add(1, SeqCst);
                    intruder = true;
                    break;
                }
                self.inside.fetch_sub(1, SeqCst);
                nap(&mut pause);
            }
        }
        DEPTH.set(depth + 1);
        let pass = Inside { guard: self, intruder, _thread: PhantomData };
        if self.untrusted.load(SeqCst) {
            return Err(Error::new(
                ErrorKind::Journal,
                "journal: this process was forked while another thread of its parent was inside the journal, so \
                 the journal's state it inherited (locks, connections) cannot be trusted; the journal cannot be \
                 used in this process: start it afresh (the parent's journal calls took longer than the fork \
                 waits for them)",
            ));
        }
        Ok(pass)
    }

    /// Marks a fork pending, then waits until no other thread is inside, at most `wait`.
    fn before_fork(&self, wait: Duration) {
        self.pending.fetch_add(1, SeqCst);
        // A forking thread inside a journal call itself (it cannot be, there being no callback)
        // waits only for the others.
        let own = DEPTH.get();
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_micros(20);
        let mut clear = self.inside.load(SeqCst) == own;
        while !clear && Instant::now() < deadline {
            nap(&mut pause);
            clear = self.inside.load(SeqCst) == own;
        }
        FORKED_INSIDE.set(!clear || own > 0);
        // No thread is inside: every SQLite connection is idle in its pool. Closed now, so that
        // the child inherits none of SQLite's per-file lock bookkeeping (its fresh connections
        // then take real locks of their own, among them the shared-memory file's); the parent
        // reopens on next use. A close never overlaps a fork of another thread (whose child
        // would inherit SQLite's or a pool's lock held mid-close): a closer waits until no fork
        // is in flight, and a fork waits until no close is running (both counted, each side
        // announcing itself before it looks at the other).
        if clear && own == 0 {
            CLOSING.fetch_add(1, SeqCst);
            let mut pause = Duration::from_micros(20);
            while FORKING.load(SeqCst) > 0 && Instant::now() < deadline {
                nap(&mut pause);
            }
            if FORKING.load(SeqCst) == 0 {
                super::sqlite::close_idle_connections();
            } else {
                FORKED_INSIDE.set(true);
            }
            CLOSING.fetch_sub(1, SeqCst);
        }
        let mut pause = Duration::from_micros(20);
        loop {
            FORKING.fetch_add(1, SeqCst);
            if CLOSING.load(SeqCst) == 0 {
                break;
            }
            FORKING.fetch_sub(1, SeqCst);
            if Instant::now() >= deadline {
                FORKING.fetch_add(1, SeqCst);
                FORKED_INSIDE.set(true);
                break;
            }
            nap(&mut pause);
        }
    }

    fn after_fork_parent(&self) {
        FORKING.fetch_sub(1, SeqCst);
        FORKED_INSIDE.set(false);
        self.pending.fetch_sub(1, SeqCst);
    }

    fn after_fork_child(&self) {
        // Every other thread is gone: so are their passes, pending forks and waits. What they
        // left behind mattered only if one was inside (or came in) at the fork.
        if FORKED_INSIDE.get() || self.intruders.load(SeqCst) > 0 {
            self.untrusted.store(true, SeqCst);
        }
        FORKED_INSIDE.set(false);
        self.intruders.store(0, SeqCst);
        self.inside.store(DEPTH.get(), SeqCst);
        self.pending.store(0, SeqCst);
        FORKING.store(0, SeqCst);
        CLOSING.store(0, SeqCst);
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get().saturating_sub(1));
        if self.intruder {
            self.guard.intruders.fetch_sub(1, SeqCst);
        }
        self.guard.inside.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;

    fn leaked() -> &'static ForkGuard {
        Box::leak(Box::new(ForkGuard::new(MIN_WAIT)))
    }

    #[test]
    fn a_fork_waits_until_the_thread_inside_leaves_and_holds_new_entrants_back() {
        let guard = leaked();
        let left = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let inside = {
            let left = Arc::clone(&left);
            std::thread::spawn(move || {
                let pass = guard.enter().unwrap();
                entered_tx.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
                left.store(true, SeqCst);
                drop(pass);
            })
        };
        entered_rx.recv().unwrap();
        let started = Instant::now();
        guard.before_fork(Duration::from_secs(10));
        assert!(left.load(SeqCst), "the fork went on while a thread was inside");
        assert!(started.elapsed() >= Duration::from_millis(100), "the fork did not wait");
        assert!(!FORKED_INSIDE.get(), "a clean fork was taken for one made with a thread inside");

        // While the fork is pending, an entrant waits; after it, it goes in.
        let came_in = Arc::new(AtomicBool::new(false));
        let entrant = {
            let came_in = Arc::clone(&came_in);
            std::thread::spawn(move || {
                let _pass = guard.enter().unwrap();
                came_in.store(true, SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!came_in.load(SeqCst), "an entrant came in while a fork was pending");
        assert_eq!(guard.inside.load(SeqCst), 0, "an entrant held back counts as inside");
        guard.after_fork_parent();
        entrant.join().unwrap();
        inside.join().unwrap();
        assert!(came_in.load(SeqCst));
        assert_eq!(guard.inside.load(SeqCst), 0);
    }

    #[test]
    fn a_fork_never_waits_longer_than_its_bound_and_its_child_refuses_the_journal() {
        let guard = leaked();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (leave_tx, leave_rx) = std::sync::mpsc::channel::<()>();
        let stuck = std::thread::spawn(move || {
            let _pass = guard.enter().unwrap();
            entered_tx.send(()).unwrap();
            let _ = leave_rx.recv();
        });
        entered_rx.recv().unwrap();
        let started = Instant::now();
        guard.before_fork(Duration::from_millis(100));
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5), "waited {waited:?}");
        // What the child of that fork does (on this, the forking thread).
        guard.after_fork_child();
        let refused = guard.enter().err().expect("a child forked with a thread inside used the journal");
        assert_eq!(refused.kind, ErrorKind::Journal);
        assert!(refused.message.contains("forked while another thread"), "{}", refused.message);
        assert_eq!(DEPTH.get(), 0, "a refused entry left this thread counted inside");
        leave_tx.send(()).unwrap();
        stuck.join().unwrap();
    }

    #[test]
    fn a_child_of_a_clean_fork_starts_clean() {
        let guard = leaked();
        guard.before_fork(Duration::from_secs(1));
        // Another thread's fork was pending too, and an entrant stepping back out was counted.
        guard.pending.fetch_add(1, SeqCst);
        guard.inside.fetch_add(1, SeqCst);
        guard.after_fork_child();
        assert_eq!(guard.pending.load(SeqCst), 0);
        assert_eq!(guard.inside.load(SeqCst), 0);
        let pass = guard.enter().expect("the child of a clean fork may use the journal");
        drop(pass);
    }

    #[test]
    fn nested_entries_never_wait_for_a_pending_fork() {
        let guard = leaked();
        let outer = guard.enter().unwrap();
        guard.pending.fetch_add(1, SeqCst); // a fork another thread is preparing
        let started = Instant::now();
        let inner = guard.enter().unwrap();
        assert!(started.elapsed() < Duration::from_secs(1), "a nested entry waited for the fork");
        assert_eq!(guard.inside.load(SeqCst), 2);
        drop(inner);
        drop(outer);
        assert_eq!(guard.inside.load(SeqCst), 0);
        guard.pending.fetch_sub(1, SeqCst);
    }

    #[test]
    fn an_entrant_held_back_too_long_goes_in_and_the_child_of_that_fork_refuses_the_journal() {
        let guard: &'static ForkGuard = Box::leak(Box::new(ForkGuard::new(Duration::from_millis(100))));
        // A fork pending far longer than its bound, as if stuck in another library's handler.
        guard.pending.fetch_add(1, SeqCst);
        let started = Instant::now();
        let entrant = std::thread::spawn(move || {
            let pass = guard.enter().unwrap();
            let waited = started.elapsed();
            let intruders = guard.intruders.load(SeqCst);
            drop(pass);
            (waited, intruders, guard.intruders.load(SeqCst))
        });
        let (waited, intruders, after) = entrant.join().unwrap();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5), "waited {waited:?}");
        assert_eq!((intruders, after), (1, 0), "an intruder is counted while inside, and only then");
        // A child forked while an intruder was inside refuses the journal.
        guard.intruders.fetch_add(1, SeqCst);
        guard.after_fork_child();
        assert!(guard.enter().is_err(), "a child forked while an intruder was inside used the journal");
    }

    #[test]
    fn the_fork_wait_follows_the_longest_lock_time_out_within_bounds() {
        let guard = leaked();
        assert_eq!(guard.fork_wait(), MIN_WAIT);
        guard.longest_lock_timeout_ms.fetch_max(20_000, SeqCst);
        assert_eq!(guard.fork_wait(), Duration::from_secs(40));
        guard.longest_lock_timeout_ms.fetch_max(24 * 3600 * 1000, SeqCst);
        assert_eq!(guard.fork_wait(), MAX_WAIT);
    }
}
