//! The endpoints `sp_endpoint_shared` keeps for the process's life, one for each settings text.
//!
//! Lock-free: a fixed row of slots, each filled once with a compare-and-swap and never emptied,
//! so that a `fork()` while another thread fills one leaves the child nothing to wait for (a
//! mutex held by that thread would stay locked in the child for ever).

use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::endpoint::Endpoint;

/// How many settings texts are kept; more make an endpoint per call.
const SLOTS: usize = 16;

/// One kept endpoint and the settings it was made from. Leaked on purpose: it lives as long as
/// the process, and the slot hands out references to it.
struct Kept {
    settings: Vec<u8>,
    endpoint: Arc<Endpoint>,
}

static KEPT: [AtomicPtr<Kept>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];

/// The slot's endpoint, when it holds one.
fn kept(slot: &AtomicPtr<Kept>) -> Option<&'static Kept> {
    // SAFETY: a non-NULL slot points to a `Kept` that was leaked into it and is never freed.
    unsafe { slot.load(Ordering::Acquire).as_ref() }
}

/// The endpoint kept for `settings`, made and kept now if none is.
pub(crate) fn endpoint(settings: &[u8]) -> crate::Result<Arc<Endpoint>> {
    if let Some(found) = KEPT.iter().map_while(kept).find(|k| k.settings == settings) {
        return Ok(Arc::clone(&found.endpoint));
    }
    let endpoint = Arc::new(Endpoint::from_settings(settings)?);
    let mine = Box::into_raw(Box::new(Kept { settings: settings.to_vec(), endpoint: Arc::clone(&endpoint) }));
    for slot in &KEPT {
        match slot.compare_exchange(ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(endpoint),
            // Another thread kept the same settings first: use its endpoint, drop this one.
            Err(theirs) => {
                // SAFETY: a non-NULL slot holds a leaked `Kept`.
                let theirs = unsafe { &*theirs };
                if theirs.settings == settings {
                    // SAFETY: `mine` came from Box::into_raw above and was never shared.
                    drop(unsafe { Box::from_raw(mine) });
                    return Ok(Arc::clone(&theirs.endpoint));
                }
            }
        }
    }
    // Every slot is taken: an endpoint of its own, freed with its last handle.
    // SAFETY: as above, `mine` was never shared.
    drop(unsafe { Box::from_raw(mine) });
    Ok(endpoint)
}
