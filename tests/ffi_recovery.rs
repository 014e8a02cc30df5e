//! Recovery of lost events through the C ABI, against the sandbox over HTTPS on loopback: the
//! sandbox knows events 1 to 20; some are delivered, the rest are recovered, already claimed,
//! handled and finished; a late delivery during recovery is handled once; faults are reported by
//! reason and a second run finishes the job.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::ptr;

use slotpartner::ffi::client::*;
use slotpartner::ffi::event::{
    sp_begin, sp_claim, sp_event, sp_event_begin, sp_event_finish, sp_event_free, sp_event_reply,
};
use slotpartner::ffi::journal::*;
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::recovery::*;
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;
use slotpartner_sandbox::burst::{EventMix, EventSet, burst_event};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerHandle, run_server};

const SEED: u64 = 11;

fn events() -> EventSet {
    EventSet { seed: SEED, mix: EventMix::Mixed, first_index: 1, count: 20 }
}

fn sandbox() -> ServerHandle {
    run_server(ServerConfig { events: Some(events()), ..ServerConfig::default() }).expect("sandbox starts")
}

struct Setup {
    dir: PathGuard,
    journal: *mut sp_journal,
    receiver: *mut sp_receiver,
}

struct PathGuard(std::path::PathBuf);
impl Drop for PathGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn setup(name: &str) -> Setup {
    let dir = std::env::temp_dir().join(format!("slotpartner-recovery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = CString::new(format!("sqlite:{}", dir.join("journal.db").display())).unwrap();
    let (mut jc, mut journal, mut rc, mut receiver) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let token = CString::new(DEFAULT_TOKEN).unwrap();
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_journal_config_new(url.as_ptr(), &mut jc), SP_OK);
        assert_eq!(sp_journal_config_set_first_index(jc, 1), SP_OK);
        assert_eq!(sp_journal_open(jc, &mut journal), SP_OK);
        sp_journal_config_free(jc);
        assert_eq!(sp_receiver_config_new(&mut rc), SP_OK);
        assert_eq!(sp_receiver_config_add_token(rc, token.as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_sources(rc, c"any".as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_journal(rc, journal), SP_OK);
        assert_eq!(sp_receiver_new(rc, &mut receiver), SP_OK);
        sp_receiver_config_free(rc);
    }
    Setup { dir: PathGuard(dir), journal, receiver }
}

impl Drop for Setup {
    fn drop(&mut self) {
        // SAFETY: live objects, freed once.
        unsafe {
            sp_receiver_free(self.receiver);
            sp_journal_free(self.journal);
        }
        let _ = &self.dir;
    }
}

fn client(server: &ServerHandle, path: &str) -> *mut sp_client {
    let url = CString::new(format!("{}{path}", server.base_url())).unwrap();
    let token = CString::new(DEFAULT_TOKEN).unwrap();
    let (mut config, mut client) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_client_config_new(url.as_ptr(), token.as_ptr(), &mut config), SP_OK);
        let pem = server.ca_pem().as_bytes();
        assert_eq!(sp_client_config_add_ca_pem(config, pem.as_ptr(), pem.len()), SP_OK);
        assert_eq!(sp_client_config_set_retries(config, 0, 1), SP_OK);
        assert_eq!(sp_client_new(config, &mut client), SP_OK);
        sp_client_config_free(config);
    }
    client
}

/// Delivers the sandbox's event `index` as a callback would, handled and finished.
fn deliver(s: &Setup, index: u64) -> sp_begin {
    let body = burst_event(SEED, EventMix::Mixed, index).body;
    let mut ev = ptr::null_mut();
    let mut claim = MaybeUninit::<sp_claim>::uninit();
    let token = CString::new(DEFAULT_TOKEN).unwrap();
    // SAFETY: valid pointers; the claim is written on SP_OK.
    unsafe {
        let got = sp_receiver_handle(
            s.receiver,
            token.as_ptr(),
            c"127.0.0.1".as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            &mut ev,
        );
        assert_eq!(got, SP_OK);
        assert_eq!(sp_event_begin(ev, claim.as_mut_ptr()), SP_OK);
        let outcome = claim.assume_init().outcome;
        if outcome == sp_begin::SP_BEGIN_NEW {
            handle(ev);
        }
        sp_event_free(ev);
        outcome
    }
}

/// The partner's handler for a claimed event: reply success and finish.
fn handle(ev: *mut sp_event) {
    let mut reply = sp_str::NONE;
    // SAFETY: a live, claimed event.
    unsafe {
        assert_eq!(sp_event_reply(ev, true, ptr::null(), &mut reply), SP_OK);
        assert_eq!(sp_event_finish(ev, ptr::null(), 0), SP_OK);
    }
}

fn start(s: &Setup, client: *const sp_client) -> *mut sp_recovery {
    let mut recovery = ptr::null_mut();
    // SAFETY: valid pointers.
    assert_eq!(unsafe { sp_recovery_new(s.receiver, client, 1000, &mut recovery) }, SP_OK);
    recovery
}

/// Pulls every recovered event, handling each; returns their indexes.
fn drain(recovery: *mut sp_recovery, mut between: impl FnMut(usize)) -> Vec<i64> {
    let mut indexes = Vec::new();
    loop {
        let mut ev = ptr::null_mut();
        // SAFETY: valid pointers.
        assert_eq!(unsafe { sp_recovery_next(recovery, &mut ev) }, SP_OK);
        if ev.is_null() {
            return indexes;
        }
        // SAFETY: a live event handed out above.
        let event = unsafe { &*ev };
        assert!(event.has_index);
        indexes.push(event.index);
        handle(ev);
        // SAFETY: freed once.
        unsafe { sp_event_free(ev) };
        between(indexes.len());
    }
}

struct Report {
    missing: u64,
    recovered: u64,
    handled_meanwhile: u64,
    failures: Vec<(i64, sp_recovery_reason, sp_status, String)>,
}

fn report(recovery: *mut sp_recovery) -> Report {
    let mut out = MaybeUninit::<sp_recovery_summary>::uninit();
    // SAFETY: valid pointers; the failures are copied while the recovery lives.
    unsafe {
        assert_eq!(sp_recovery_report(recovery, out.as_mut_ptr()), SP_OK);
        let r = out.assume_init();
        let failures =
            if r.failures_len == 0 { &[][..] } else { std::slice::from_raw_parts(r.failures, r.failures_len) };
        let failures = failures
            .iter()
            .map(|f| {
                let message = CStr::from_ptr(f.message.ptr).to_str().unwrap().to_owned();
                (f.index, f.reason, f.status, message)
            })
            .collect();
        Report { missing: r.missing, recovered: r.recovered, handled_meanwhile: r.handled_meanwhile, failures }
    }
}

fn missing(s: &Setup) -> Vec<(i64, i64)> {
    let mut out = ptr::null_mut();
    // SAFETY: valid pointers; freed once copied.
    unsafe {
        assert_eq!(sp_journal_missing(s.journal, 100, &mut out), SP_OK);
        let view = &*out;
        let ranges = if view.len == 0 { &[][..] } else { std::slice::from_raw_parts(view.ranges, view.len) };
        let copied = ranges.iter().map(|r| (r.first, r.last)).collect();
        sp_index_ranges_free(out);
        copied
    }
}

#[test]
fn lost_events_are_recovered_claimed_and_a_late_delivery_is_handled_once() {
    let server = sandbox();
    let s = setup("pull");
    for index in [1, 2, 4, 5, 9, 10] {
        assert_eq!(deliver(&s, index), sp_begin::SP_BEGIN_NEW);
    }
    assert_eq!(missing(&s), vec![(3, 3), (6, 8)]);
    let client = client(&server, "");
    let recovery = start(&s, client);
    // One recovery at a time: a second one is refused, naming the first.
    let mut second = ptr::null_mut();
    // SAFETY: valid pointers.
    assert_eq!(unsafe { sp_recovery_new(s.receiver, client, 1000, &mut second) }, SP_ERR_BUSY);
    assert!(second.is_null());
    // SAFETY: the last error on this thread, read at once.
    let message = unsafe { CStr::from_ptr(slotpartner::ffi::error::sp_last_error_message().ptr) }.to_string_lossy();
    assert!(message.contains("recover is held by recovery, pid "), "{message}");
    // Index 8 arrives late while recovery runs (after the first recovered event).
    let recovered = drain(recovery, |n| {
        if n == 1 {
            assert_eq!(deliver(&s, 8), sp_begin::SP_BEGIN_NEW);
        }
    });
    assert_eq!(recovered, vec![3, 6, 7]);
    let r = report(recovery);
    assert_eq!((r.missing, r.recovered, r.handled_meanwhile, r.failures.len()), (4, 3, 1, 0));
    assert!(missing(&s).is_empty());
    // Every one is handled once: a second delivery of each is answered from the journal.
    for index in 1..=10 {
        assert_eq!(deliver(&s, index), sp_begin::SP_BEGIN_DONE, "index {index}");
    }
    // SAFETY: live objects, freed once.
    unsafe {
        sp_recovery_free(recovery);
        // Freed: the next recovery may start.
        let mut next = ptr::null_mut();
        assert_eq!(sp_recovery_new(s.receiver, client, 1000, &mut next), SP_OK);
        sp_recovery_free(next);
        sp_client_free(client);
    }
}

#[test]
fn failures_are_reported_by_reason_and_a_second_run_finishes_the_job() {
    let server = sandbox();
    let s = setup("faults");
    // 22 is beyond the sandbox's events (it knows 1 to 20): 21 will be unknown to it.
    for index in [1, 3, 22] {
        assert_eq!(deliver(&s, index), sp_begin::SP_BEGIN_NEW);
    }
    // Missing: 2 and 4..=21. The service fails: every fetch answered 500.
    let failing = client(&server, "/fault/status/500");
    let recovery = start(&s, failing);
    assert!(drain(recovery, |_| {}).is_empty());
    let r = report(recovery);
    assert_eq!((r.missing, r.recovered, r.failures.len()), (19, 0, 19));
    assert!(r.failures.iter().all(|f| f.1 == sp_recovery_reason::SP_RECOVERY_SERVICE && f.2 == SP_ERR_HTTP_STATUS));
    assert!(r.failures[0].3.contains("500"), "{}", r.failures[0].3);
    // Malformed answers: the event fails validation, named.
    let malformed = client(&server, "/fault/malformed");
    let second = start(&s, malformed);
    assert!(drain(second, |_| {}).is_empty());
    let r = report(second);
    assert!(
        r.failures
            .iter()
            .any(|f| f.1 == sp_recovery_reason::SP_RECOVERY_INVALID_EVENT && f.3.contains("transactionId"))
    );
    // A healthy run recovers what the service knows; 21 is unknown to it (404).
    let healthy = client(&server, "");
    let third = start(&s, healthy);
    let recovered = drain(third, |_| {});
    assert_eq!(recovered.len(), 18);
    let r = report(third);
    assert_eq!(r.failures.len(), 1);
    assert_eq!((r.failures[0].0, r.failures[0].1), (21, sp_recovery_reason::SP_RECOVERY_NOT_FOUND));
    assert_eq!(missing(&s), vec![(21, 21)]);
    // SAFETY: live objects, freed once.
    unsafe {
        for recovery in [recovery, second, third] {
            sp_recovery_free(recovery);
        }
        for client in [failing, malformed, healthy] {
            sp_client_free(client);
        }
    }
}

#[test]
fn a_receiver_without_journal_cannot_recover() {
    let server = sandbox();
    let (mut rc, mut receiver, mut recovery) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let token = CString::new(DEFAULT_TOKEN).unwrap();
    let client = client(&server, "");
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut rc), SP_OK);
        assert_eq!(sp_receiver_config_add_token(rc, token.as_ptr()), SP_OK);
        assert_eq!(sp_receiver_new(rc, &mut receiver), SP_OK);
        assert_eq!(sp_recovery_new(receiver, client, 10, &mut recovery), SP_ERR_INVALID_ARGUMENT);
        assert!(recovery.is_null());
        sp_receiver_config_free(rc);
        sp_receiver_free(receiver);
        sp_client_free(client);
    }
}

#[test]
fn a_recovered_event_abandoned_is_fetched_again_by_the_next_recovery() {
    let server = sandbox();
    let s = setup("abandoned");
    for index in [1, 3] {
        deliver(&s, index);
    }
    let client = client(&server, "");
    let first = start(&s, client);
    let mut ev = ptr::null_mut();
    // SAFETY: valid pointers; the recovered event is abandoned (the partner's store was down).
    unsafe {
        assert_eq!(sp_recovery_next(first, &mut ev), SP_OK);
        assert_eq!((*ev).index, 2);
        assert_eq!(slotpartner::ffi::event::sp_event_abandon(ev), SP_OK);
        sp_event_free(ev);
        assert_eq!(sp_recovery_next(first, &mut ev), SP_OK);
        assert!(ev.is_null());
    }
    // Index 2 counts as seen, but nothing was stored: the next recovery fetches it again.
    assert!(missing(&s).is_empty());
    let second = start(&s, client);
    assert_eq!(drain(second, |_| {}), vec![2]);
    assert_eq!(deliver(&s, 2), sp_begin::SP_BEGIN_DONE);
    let third = start(&s, client);
    assert_eq!(report(third).missing, 0);
    // SAFETY: live objects, freed once.
    unsafe {
        for recovery in [first, second, third] {
            sp_recovery_free(recovery);
        }
        sp_client_free(client);
    }
}
