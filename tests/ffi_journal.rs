//! The journal through the C ABI, on SQLite: a receiver with a journal, `sp_event_begin`,
//! `sp_event_finish`, `sp_event_abandon`, refused deliveries recorded, gaps, and the failures a
//! host meets (conflict, busy, no journal, not begun, a bad URL, an unusable file).

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::ptr;

use slotpartner::ffi::error::{sp_error, sp_last_error};
use slotpartner::ffi::event::{
    sp_begin, sp_claim, sp_event, sp_event_abandon, sp_event_begin, sp_event_finish, sp_event_free, sp_event_reply,
};
use slotpartner::ffi::journal::*;
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::ffi::str::sp_str;

const TOKEN: &CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";

fn text<'a>(s: sp_str) -> &'a str {
    assert!(!s.ptr.is_null());
    // SAFETY: a view the library handed out, valid while its owner lives.
    std::str::from_utf8(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) }).unwrap()
}

fn last_error() -> sp_error {
    let mut out = MaybeUninit::<sp_error>::uninit();
    // SAFETY: a writable out-parameter, written on SP_OK.
    unsafe {
        assert_eq!(sp_last_error(out.as_mut_ptr()), SP_OK, "a last error");
        out.assume_init()
    }
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("slotpartner-ffi-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn url(&self) -> CString {
        CString::new(format!("sqlite:{}", self.0.join("journal.db").display())).unwrap()
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open_journal(url: &CStr, busy_wait_ms: u64) -> Result<*mut sp_journal, sp_status> {
    let (mut config, mut journal) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout; the configuration is freed once the journal is open.
    unsafe {
        assert_eq!(sp_journal_config_new(url.as_ptr(), &mut config), SP_OK);
        assert_eq!(sp_journal_config_set_busy_wait_ms(config, busy_wait_ms), SP_OK);
        let got = sp_journal_open(config, &mut journal);
        sp_journal_config_free(config);
        if got == SP_OK { Ok(journal) } else { Err(got) }
    }
}

fn receiver(journal: *const sp_journal) -> *mut sp_receiver {
    let (mut config, mut r) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), SP_OK);
        assert_eq!(sp_receiver_config_add_token(config, TOKEN.as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_sources(config, c"any".as_ptr()), SP_OK);
        if !journal.is_null() {
            assert_eq!(sp_receiver_config_set_journal(config, journal), SP_OK);
        }
        assert_eq!(sp_receiver_new(config, &mut r), SP_OK);
        sp_receiver_config_free(config);
    }
    r
}

fn refund(transaction_id: i64, index: i64, game_id: i64) -> String {
    format!(
        r#"{{"event":"gameSessionBuyRefund","index":{index},"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1","transactionId":{transaction_id},"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":{game_id},"isMobile":false}}"#
    )
}

fn handle(r: *const sp_receiver, body: &str) -> Result<*mut sp_event, sp_status> {
    let mut ev = ptr::null_mut();
    // SAFETY: valid pointers.
    let got = unsafe {
        sp_receiver_handle(r, TOKEN.as_ptr(), c"127.0.0.1".as_ptr(), ptr::null(), body.as_ptr(), body.len(), &mut ev)
    };
    if got == SP_OK { Ok(ev) } else { Err(got) }
}

fn begin(ev: *mut sp_event) -> Result<sp_claim, sp_status> {
    let mut out = MaybeUninit::<sp_claim>::uninit();
    // SAFETY: a live event and a writable out-parameter, written on SP_OK.
    match unsafe { sp_event_begin(ev, out.as_mut_ptr()) } {
        SP_OK => Ok(unsafe { out.assume_init() }),
        status => Err(status),
    }
}

fn reply(ev: *mut sp_event, success: bool, message: Option<&CStr>) -> String {
    let mut out = sp_str::NONE;
    // SAFETY: valid pointers.
    let got = unsafe { sp_event_reply(ev, success, message.map_or(ptr::null(), CStr::as_ptr), &mut out) };
    assert_eq!(got, SP_OK);
    text(out).to_owned()
}

fn finish(ev: *mut sp_event) -> sp_status {
    // SAFETY: a live event; NULL reply means the event's last reply.
    unsafe { sp_event_finish(ev, ptr::null(), 0) }
}

fn free(ev: *mut sp_event) {
    // SAFETY: a live event, freed once.
    unsafe { sp_event_free(ev) }
}

fn status(journal: *const sp_journal) -> sp_journal_stats {
    let mut out = MaybeUninit::<sp_journal_stats>::uninit();
    // SAFETY: valid pointers, written on SP_OK.
    unsafe {
        assert_eq!(sp_journal_status(journal, out.as_mut_ptr()), SP_OK);
        out.assume_init()
    }
}

fn missing(journal: *const sp_journal) -> Vec<(i64, i64)> {
    let mut out = ptr::null_mut();
    // SAFETY: valid pointers; the ranges are freed once copied.
    unsafe {
        assert_eq!(sp_journal_missing(journal, 100, &mut out), SP_OK);
        let view = &*out;
        let ranges = if view.len == 0 { &[][..] } else { std::slice::from_raw_parts(view.ranges, view.len) };
        let copied = ranges.iter().map(|r| (r.first, r.last)).collect();
        sp_index_ranges_free(out);
        copied
    }
}

/// The reply a finish stores is the last one built for the event, whether it is a success
/// (which the receiver builds once and every event views) or a failure built for this event.
#[test]
fn finishing_stores_the_last_reply_however_it_was_built() {
    let dir = TempDir::new("last-reply");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let success_reply = r#"{"refund":{"success":true,"errorMessage":""}}"#;
    let failure = r#"{"refund":{"success":false,"errorMessage":"ledger says no"}}"#;
    // (transaction, the replies built in order, the one stored)
    let cases = [
        (910_001, [true, false], failure),
        (910_002, [false, true], success_reply),
        (910_003, [true, true], success_reply),
    ];
    for (transaction, builds, stored) in cases {
        let ev = handle(r, &refund(transaction, 1, 12)).unwrap();
        assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_NEW);
        for success in builds {
            let built = if success { reply(ev, true, None) } else { reply(ev, false, Some(c"ledger says no")) };
            assert_eq!(built, if success { success_reply } else { failure });
        }
        assert_eq!(finish(ev), SP_OK);
        free(ev);
        let ev = handle(r, &refund(transaction, 1, 12)).unwrap();
        let claim = begin(ev).unwrap();
        assert_eq!((claim.outcome, text(claim.reply)), (sp_begin::SP_BEGIN_DONE, stored), "transaction {transaction}");
        free(ev);
    }
    // SAFETY: live objects, freed once.
    unsafe {
        sp_journal_free(journal);
        sp_receiver_free(r);
    }
}

#[test]
fn a_repeated_delivery_gets_the_first_reply_and_runs_nothing() {
    let dir = TempDir::new("repeat");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(900_001, 1, 12)).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 1));
    assert!(claim.reply.ptr.is_null());
    let first = reply(ev, false, Some(c"game session \"gs-1\" ended"));
    assert_eq!(finish(ev), SP_OK);
    assert_eq!(finish(ev), SP_OK, "finishing a settled event does nothing");
    free(ev);
    // The repeat, formatted differently: the same reply, byte for byte, and status 200.
    let repeat = refund(900_001, 1, 12).replace(',', " , ");
    let ev = handle(r, &repeat).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!(claim.outcome, sp_begin::SP_BEGIN_DONE);
    assert_eq!(text(claim.reply), first);
    // SAFETY: a live event.
    assert_eq!(unsafe { (*ev).reply_http_status }, 200);
    free(ev);
    let s = status(journal);
    assert_eq!((s.handled, s.replayed, s.in_progress, s.missing), (1, 1, 0, 0));
    // SAFETY: live objects, freed once; the receiver keeps the journal open until it goes.
    unsafe {
        sp_journal_free(journal);
        sp_receiver_free(r);
    }
}

#[test]
fn same_transaction_with_other_content_is_a_conflict_and_the_first_stays() {
    let dir = TempDir::new("conflict");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(900_002, 1, 12)).unwrap();
    begin(ev).unwrap();
    let first = reply(ev, true, None);
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    let ev = handle(r, &refund(900_002, 2, 13)).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_CONFLICT);
    let e = last_error();
    assert_eq!(e.http_status, 409);
    assert!(text(e.message).contains("900002") && text(e.message).contains("gameId"), "{}", text(e.message));
    free(ev);
    let ev = handle(r, &refund(900_002, 1, 12)).unwrap();
    assert_eq!(text(begin(ev).unwrap().reply), first);
    free(ev);
    assert_eq!(status(journal).conflicts, 1);
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
}

#[test]
fn an_abandoned_or_freed_claim_runs_again_as_the_next_attempt() {
    let dir = TempDir::new("abandon");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let body = refund(900_003, 1, 12);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1);
    // SAFETY: a live event.
    assert_eq!(unsafe { sp_event_abandon(ev) }, SP_OK);
    // SAFETY: as above: abandoning twice does nothing.
    assert_eq!(unsafe { sp_event_abandon(ev) }, SP_OK);
    free(ev);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 2);
    free(ev); // freed while claimed: released
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 3));
    reply(ev, true, None);
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
}

#[test]
fn a_second_worker_waits_then_is_told_busy() {
    let dir = TempDir::new("busy");
    let journal = open_journal(&dir.url(), 50).unwrap();
    let r = receiver(journal);
    let body = refund(900_004, 1, 12);
    let holder = handle(r, &body).unwrap();
    begin(holder).unwrap();
    let waiter = handle(r, &body).unwrap();
    assert_eq!(begin(waiter).unwrap_err(), SP_ERR_BUSY);
    assert_eq!(last_error().http_status, 503);
    reply(holder, true, None);
    assert_eq!(finish(holder), SP_OK);
    free(holder);
    free(waiter);
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
}

#[test]
fn balance_queries_are_not_replayed_but_refusals_and_indexes_are_seen() {
    let dir = TempDir::new("seen");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let ev = handle(r, r#"{"action":"getPlayerBalance","playerIdentifier":"p-1","index":2}"#).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_NOT_JOURNALED);
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    // Refused by validation, its index readable: seen and refused, not missing.
    let refused = refund(900_005, 4, 12).replace("\"gameId\":12", "\"gameId\":1.5");
    assert_eq!(handle(r, &refused).unwrap_err(), SP_ERR_WRONG_TYPE);
    let e = last_error();
    assert_eq!((e.has_index, e.index, e.transaction_id), (true, 4, 900_005));
    for index in [1, 7] {
        let ev = handle(r, &refund(900_100 + index, index, 12)).unwrap();
        begin(ev).unwrap();
        reply(ev, true, None);
        assert_eq!(finish(ev), SP_OK);
        free(ev);
    }
    assert_eq!(missing(journal), vec![(3, 3), (5, 6)]);
    let s = status(journal);
    assert_eq!((s.refused, s.missing, s.handled), (1, 3, 2));
    assert_eq!((s.first_index, s.highest_index, s.watermark), (1, 7, 2));
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
}

#[test]
fn misuse_and_unusable_journals_get_clear_errors() {
    // No journal on the receiver; finish before begin.
    let r = receiver(ptr::null());
    let ev = handle(r, &refund(1, 1, 1)).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_INVALID_ARGUMENT);
    assert!(text(last_error().message).contains("no journal"));
    free(ev);
    // SAFETY: a live receiver, freed once.
    unsafe { sp_receiver_free(r) };
    let dir = TempDir::new("misuse");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(2, 1, 1)).unwrap();
    assert_eq!(finish(ev), SP_ERR_INVALID_ARGUMENT);
    assert!(text(last_error().message).contains("not begun"));
    // SAFETY: a live event.
    assert_eq!(unsafe { sp_event_abandon(ev) }, SP_ERR_INVALID_ARGUMENT);
    begin(ev).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_INVALID_ARGUMENT, "begun twice");
    assert_eq!(finish(ev), SP_ERR_INVALID_ARGUMENT, "no reply built");
    assert_eq!(text(last_error().field), "reply");
    free(ev);
    let mut out = ptr::null_mut();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(sp_journal_missing(journal, 0, &mut out), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(text(last_error().field), "limit");
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
    // A URL of no journal kind, and a path that cannot hold one.
    assert_eq!(open_journal(c"mysql://x", 10).unwrap_err(), SP_ERR_INVALID_ARGUMENT);
    assert_eq!(text(last_error().field), "journal_url");
    let not_a_file = CString::new(format!("sqlite:{}", dir.0.display())).unwrap();
    assert_eq!(open_journal(&not_a_file, 10).unwrap_err(), SP_ERR_JOURNAL);
    assert_eq!(last_error().http_status, 503);
}
