//! The fork handlers of the journal's fork guard (`crate::journal::fork_guard`), registered with
//! `pthread_atfork` the first time a journal is opened in the process. Not part of the C API:
//! hosts call nothing; every `fork()` of the process (C's, PHP's `pcntl_fork`, Python's
//! `os.fork` and `multiprocessing`) runs them. On glibc, `pthread_atfork` is linked into the
//! library with the library's own `__dso_handle`, so that a library unloaded with `dlclose`
//! takes its handlers with it.
//!
//! No C function: nothing here is exported.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::journal::fork_guard;

/// Whether the handlers are registered (or being registered) in this process.
static REGISTERED: AtomicBool = AtomicBool::new(false);

extern "C" fn prepare() {
    fork_guard::before_fork();
}

extern "C" fn parent() {
    fork_guard::after_fork_parent();
}

extern "C" fn child() {
    fork_guard::after_fork_child();
}

/// Registers the fork guard's handlers, once per process (a child inherits them). A plain
/// atomic flag, not a `Once`: a `Once` being run by another thread at a fork would stay
/// running in the child for ever. Errors: `pthread_atfork`'s (ENOMEM).
pub(crate) fn register_fork_handlers() -> Result<(), std::io::Error> {
    if REGISTERED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let (prepare, parent, child): (unsafe extern "C" fn(), unsafe extern "C" fn(), unsafe extern "C" fn()) =
        (prepare, parent, child);
    // SAFETY: the handlers are functions of this library, which takes them with it if it is
    // unloaded (see the module's doc); they only touch atomics and thread-locals, read the clock
    // and sleep, all allowed in a fork handler, and never unwind.
    let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    if rc != 0 {
        REGISTERED.store(false, Ordering::SeqCst);
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
