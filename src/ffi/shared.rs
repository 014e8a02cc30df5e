//! The endpoints `sp_endpoint_shared` keeps for the process's life, one for each settings text,
//! and the keys `sp_endpoint_shared_keyed` finds them by.
//!
//! Lock-free: fixed rows of slots, each filled once with a compare-and-swap and never emptied,
//! so that a `fork()` while another thread fills one leaves the child nothing to wait for (a
//! mutex held by that thread would stay locked in the child for ever).

use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::endpoint::Endpoint;
use crate::error::{Error, ErrorKind};

/// How many settings texts are kept; more make an endpoint per call. As many keys are kept.
const SLOTS: usize = 16;

/// One kept endpoint and the settings it was made from. Leaked on purpose: it lives as long as
/// the process, and the slot hands out references to it.
struct Kept {
    settings: Vec<u8>,
    endpoint: Arc<Endpoint>,
}

/// A caller's key for one kept endpoint. Leaked on purpose, as `Kept`.
struct Keyed {
    key: Vec<u8>,
    kept: &'static Kept,
}

static KEPT: [AtomicPtr<Kept>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];

static KEYED: [AtomicPtr<Keyed>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];

/// The slot's entry, when it holds one.
fn filled<T>(slot: &AtomicPtr<T>) -> Option<&'static T> {
    // SAFETY: a non-NULL slot points to a `T` that was leaked into it and is never freed.
    unsafe { slot.load(Ordering::Acquire).as_ref() }
}

/// Puts `entry` into the first empty slot of `slots` unless `same` says a filled slot holds its
/// equal: the entry now in a slot (its own or the equal one), or None when every slot is taken
/// by others (`entry` is dropped then, as it is when an equal one is found).
fn keep<T>(slots: &'static [AtomicPtr<T>; SLOTS], entry: T, same: impl Fn(&T) -> bool) -> Option<&'static T> {
    let mine = Box::into_raw(Box::new(entry));
    for slot in slots {
        match slot.compare_exchange(ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: `mine` came from Box::into_raw and is now leaked into the slot for ever.
            Ok(_) => return Some(unsafe { &*mine }),
            Err(theirs) => {
                // SAFETY: a non-NULL slot holds a leaked `T`.
                let theirs = unsafe { &*theirs };
                if same(theirs) {
                    // SAFETY: `mine` came from Box::into_raw above and was never shared.
                    drop(unsafe { Box::from_raw(mine) });
                    return Some(theirs);
                }
            }
        }
    }
    // SAFETY: as above, `mine` was never shared.
    drop(unsafe { Box::from_raw(mine) });
    None
}

/// The endpoint kept for `settings`, made and kept now if none is.
pub(crate) fn endpoint(settings: &[u8]) -> crate::Result<Arc<Endpoint>> {
    kept_or_own(settings).map(|(endpoint, _)| endpoint)
}

/// The endpoint for `settings` and its entry when it is kept (None: every slot is taken, the
/// endpoint is the caller's alone, freed with its last handle).
fn kept_or_own(settings: &[u8]) -> crate::Result<(Arc<Endpoint>, Option<&'static Kept>)> {
    if let Some(found) = KEPT.iter().map_while(filled).find(|k| k.settings == settings) {
        return Ok((Arc::clone(&found.endpoint), Some(found)));
    }
    let endpoint = Arc::new(Endpoint::from_settings(settings)?);
    let entry = Kept { settings: settings.to_vec(), endpoint: Arc::clone(&endpoint) };
    // Another thread may keep the same settings first: its endpoint is used, this one dropped.
    Ok(match keep(&KEPT, entry, |theirs| theirs.settings == settings) {
        Some(kept) => (Arc::clone(&kept.endpoint), Some(kept)),
        None => (endpoint, None),
    })
}

/// The endpoint kept under `key`, when one is.
pub(crate) fn find(key: &[u8]) -> Option<Arc<Endpoint>> {
    KEYED.iter().map_while(filled).find(|k| k.key == key).map(|k| Arc::clone(&k.kept.endpoint))
}

/// The endpoint kept for `settings` (as `endpoint`), kept under `key` too when it is kept. Refused
/// (field `key`) when `key` names an endpoint of other settings already.
pub(crate) fn endpoint_keyed(key: &[u8], settings: &[u8]) -> crate::Result<Arc<Endpoint>> {
    let other = || Error::field(ErrorKind::InvalidArgument, "key", "names an endpoint made with other settings");
    if let Some(found) = KEYED.iter().map_while(filled).find(|k| k.key == key) {
        return if found.kept.settings == settings { Ok(Arc::clone(&found.kept.endpoint)) } else { Err(other()) };
    }
    let (endpoint, kept) = kept_or_own(settings)?;
    let Some(kept) = kept else {
        return Ok(endpoint); // not kept: neither is its key, which finds nothing
    };
    // Every slot taken: the key is not kept, and finds nothing; its settings still do.
    match keep(&KEYED, Keyed { key: key.to_vec(), kept }, |theirs| theirs.key == key) {
        Some(keyed) if !ptr::eq(keyed.kept, kept) => Err(other()),
        _ => Ok(endpoint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test of the process's slots: it fills them all.
    #[test]
    fn a_key_finds_its_settings_endpoint_and_keys_beyond_the_slots_find_nothing() {
        let settings = |n: usize| {
            format!(r#"{{"token":"6f1c2a3e-8b7d-4c5e-9f10-{n:012}","max_body_bytes":{}}}"#, 1000 + n).into_bytes()
        };
        for n in 0..SLOTS {
            let key = format!("key {n}");
            assert!(find(key.as_bytes()).is_none());
            let made = endpoint_keyed(key.as_bytes(), &settings(n)).unwrap();
            assert!(Arc::ptr_eq(&made, &find(key.as_bytes()).unwrap()), "found by its key");
            assert!(Arc::ptr_eq(&made, &endpoint(&settings(n)).unwrap()), "found by its settings");
            assert!(Arc::ptr_eq(&made, &endpoint_keyed(key.as_bytes(), &settings(n)).unwrap()), "by both");
        }
        // A key names one settings text: other settings under it are refused, naming the key.
        let refused = endpoint_keyed(b"key 0", &settings(1)).err().unwrap();
        assert_eq!(refused.field, "key", "{refused}");
        // Every slot taken: settings not kept make an endpoint per call, and keep no key.
        let extra = settings(SLOTS);
        let first = endpoint_keyed(b"key extra", &extra).unwrap();
        assert!(find(b"key extra").is_none());
        assert!(!Arc::ptr_eq(&first, &endpoint_keyed(b"key extra", &extra).unwrap()));
        // Every key slot taken: a new key of kept settings gives their endpoint, and is not kept.
        let again = endpoint_keyed(b"key 0 again", &settings(0)).unwrap();
        assert!(Arc::ptr_eq(&again, &find(b"key 0").unwrap()));
        assert!(find(b"key 0 again").is_none());
    }
}
