//! Connections kept across calls, per process: a small idle pool per journal URL, and the
//! process-wide registry that hands the same pool to every `Journal::open` of that URL.
//!
//! Hand-made rather than a pool crate: the pool starts no thread in the host process (a PHP-FPM
//! worker, a CGI program), it keeps each connection's prepared statements with it, and it never
//! reuses a connection inherited across `fork` (a pre-forking server that opened a journal before
//! forking): the child leaves the parent's connections alone and opens its own.

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::error::Result;

/// Idle connections, at most `max_idle`; a caller that finds none opens a new one.
pub(crate) struct Pool<C> {
    idle: Mutex<Idle<C>>,
    max_idle: usize,
}

struct Idle<C> {
    pid: u32,
    conns: Vec<C>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<C> Pool<C> {
    pub fn new(max_idle: usize) -> Self {
        Pool { idle: Mutex::new(Idle { pid: std::process::id(), conns: Vec::new() }), max_idle }
    }

    /// An idle connection of this process, or a new one from `open`.
    pub fn get(&self, open: impl FnOnce() -> Result<C>) -> Result<Pooled<'_, C>> {
        let idle = {
            // Inside the journal while the pool's lock is held, so that no fork copies it held.
            let _inside = super::fork_guard::enter()?;
            let mut idle = lock(&self.idle);
            let pid = std::process::id();
            if idle.pid != pid {
                // Forked: the parent still uses these; closing them here would disturb it.
                std::mem::forget(std::mem::take(&mut idle.conns));
                idle.pid = pid;
            }
            idle.conns.pop()
        };
        let conn = match idle {
            Some(conn) => conn,
            None => open()?,
        };
        Ok(Pooled { pool: self, conn: Some(conn), broken: false })
    }

    /// Takes every idle connection of this process out of the pool (the caller closes them).
    pub fn drain(&self) -> Vec<C> {
        let mut idle = lock(&self.idle);
        if idle.pid != std::process::id() {
            return Vec::new();
        }
        std::mem::take(&mut idle.conns)
    }

    fn put_back(&self, conn: C) {
        let Ok(_inside) = super::fork_guard::enter() else {
            // A child forked while a thread of its parent was inside: it keeps nothing.
            std::mem::forget(conn);
            return;
        };
        let mut idle = lock(&self.idle);
        if idle.pid != std::process::id() {
            std::mem::forget(conn);
        } else if idle.conns.len() < self.max_idle {
            idle.conns.push(conn);
        }
    }
}

/// A connection taken from a pool; it goes back when dropped unless marked broken.
pub(crate) struct Pooled<'a, C> {
    pool: &'a Pool<C>,
    conn: Option<C>,
    broken: bool,
}

impl<C> Pooled<'_, C> {
    /// Drop the connection instead of keeping it (its session failed).
    pub fn mark_broken(&mut self) {
        self.broken = true;
    }
}

impl<C> Deref for Pooled<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("a pooled connection until dropped")
    }
}

impl<C> DerefMut for Pooled<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("a pooled connection until dropped")
    }
}

impl<C> Drop for Pooled<'_, C> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if !self.broken && !std::thread::panicking() {
                self.pool.put_back(conn);
            }
        }
    }
}

/// A process-wide map from a key (a journal URL) to the one shared value for it, kept for the
/// life of the process so that a journal opened on every request reuses its connections.
pub(crate) struct Registry<K, V>(OnceLock<Mutex<HashMap<K, Arc<V>>>>);

impl<K: Eq + Hash, V> Registry<K, V> {
    pub const fn new() -> Self {
        Registry(OnceLock::new())
    }

    /// Every value made so far.
    pub fn values(&self) -> Vec<Arc<V>> {
        match self.0.get() {
            Some(map) => lock(map).values().cloned().collect(),
            None => Vec::new(),
        }
    }

    /// The value for `key`, made by `make` the first time.
    pub fn get_or_make(&self, key: K, make: impl FnOnce() -> Result<V>) -> Result<Arc<V>> {
        let mut map = lock(self.0.get_or_init(Default::default));
        if let Some(value) = map.get(&key) {
            return Ok(Arc::clone(value));
        }
        let value = Arc::new(make()?);
        map.insert(key, Arc::clone(&value));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_reused_and_broken_ones_dropped() {
        let pool: Pool<u32> = Pool::new(2);
        let mut opened = 0;
        {
            let a = pool.get(|| Ok(1)).unwrap();
            let b = pool.get(|| Ok(2)).unwrap();
            let c = pool.get(|| Ok(3)).unwrap();
            assert_eq!((*a, *b, *c), (1, 2, 3));
        }
        let mut d = pool
            .get(|| {
                opened += 1;
                Ok(9)
            })
            .unwrap();
        assert_ne!(*d, 9, "an idle connection is reused");
        assert_eq!(opened, 0);
        d.mark_broken();
        drop(d);
        assert_eq!(lock(&pool.idle).conns.len(), 1);
    }

    #[test]
    fn the_registry_shares_one_value_per_key() {
        static REGISTRY: Registry<String, u32> = Registry::new();
        let a = REGISTRY.get_or_make("x".into(), || Ok(1)).unwrap();
        let b = REGISTRY.get_or_make("x".into(), || Ok(2)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
