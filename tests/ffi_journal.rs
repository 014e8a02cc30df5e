//! The journal through the C ABI, on SQLite: a receiver with a journal, `sp_event_begin`,
//! `sp_event_finish`, `sp_event_abandon`, refused deliveries recorded, gaps, and the failures a
//! host meets (conflict, busy, no journal, not begun, a bad URL, an unusable file); the
//! operator's functions (reports, resolving gaps, deciding index jumps, resolving conflicts,
//! renumbering) and retention (prune, vital signs, gap ages, the journal's own retention) used
//! properly and carelessly; a backup (`sp_journal_backup`) restored from.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::ptr;

use serde_json::{Value, json};
use slotpartner::ffi::client::*;
use slotpartner::ffi::error::{sp_error, sp_last_error, sp_last_error_message};
use slotpartner::ffi::event::{
    sp_begin, sp_claim, sp_event, sp_event_abandon, sp_event_begin, sp_event_differing, sp_event_finish, sp_event_free,
    sp_event_reply, sp_event_reply_pruned,
};
use slotpartner::ffi::journal::*;
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::recovery::*;
use slotpartner::ffi::reply::{sp_buffer, sp_buffer_free};
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
    open_journal_with(url, |config| {
        // SAFETY: a live configuration.
        assert_eq!(unsafe { sp_journal_config_set_busy_wait_ms(config, busy_wait_ms) }, SP_OK);
    })
}

/// Opens the journal at `url` after `configure` set what it sets.
fn open_journal_with(url: &CStr, configure: impl FnOnce(*mut sp_journal_config)) -> Result<*mut sp_journal, sp_status> {
    let (mut config, mut journal) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout; the configuration is freed once the journal is open.
    unsafe {
        assert_eq!(sp_journal_config_new(url.as_ptr(), &mut config), SP_OK);
        configure(config);
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

/// The refund `body` of another game session: its decisive content differs.
fn other_session(body: &str) -> String {
    let other = body.replace(r#""gameSessionId":5,"#, r#""gameSessionId":6,"#);
    assert_ne!(other, body);
    other
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
    // The index and gameId may differ in a resend (they decide nothing); gameSessionId may not.
    let ev = handle(r, &refund(900_002, 2, 13)).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_DONE);
    free(ev);
    let ev = handle(r, &other_session(&refund(900_002, 1, 12))).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_CONFLICT);
    let e = last_error();
    assert_eq!(e.http_status, 409);
    let message = text(e.message);
    assert!(message.contains("900002") && message.contains("gameSessionId"), "{message}");
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

fn differing(ev: *const sp_event) -> String {
    let mut out = sp_str::NONE;
    // SAFETY: valid pointers.
    assert_eq!(unsafe { sp_event_differing(ev, &mut out) }, SP_OK);
    text(out).to_owned()
}

/// A resend with another decisive field of a delivery abandoned before it was finished is handed
/// out as new (never refused forever), naming the differences on the event; the conflict stays
/// open for the operator.
#[test]
fn a_changed_resend_of_an_unfinished_delivery_is_handed_out_naming_the_differences() {
    let dir = TempDir::new("differing");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let body = refund(900_013, 1, 7);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1);
    assert_eq!(differing(ev), "");
    // SAFETY: a live event.
    assert_eq!(unsafe { sp_event_abandon(ev) }, SP_OK);
    free(ev);
    let ev = handle(r, &other_session(&body)).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 2));
    assert_eq!(differing(ev), "gameSessionId: first 5, now 6");
    reply(ev, true, None);
    assert_eq!(finish(ev), SP_OK);
    assert_eq!(differing(ev), "gameSessionId: first 5, now 6", "kept after the claim settles");
    // Careless: NULL event, NULL out.
    let mut out = sp_str::NONE;
    // SAFETY: NULL pointers are checked, never dereferenced.
    unsafe {
        assert_eq!(sp_event_differing(ptr::null(), &mut out), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_event_differing(ev, ptr::null_mut()), SP_ERR_INVALID_ARGUMENT);
    }
    free(ev);
    let stats = status(journal);
    assert_eq!((stats.open_conflicts, stats.conflicts, stats.unfinished), (1, 1, 0));
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

// ---------------------------------------------------------------------------------------------
// The operator's functions: reports, resolving gaps, index jumps, conflicts, renumbering.

const INDEX_JUMPS: i32 = sp_journal_report_kind::SP_JOURNAL_REPORT_INDEX_JUMPS as i32;
const CONFLICTS: i32 = sp_journal_report_kind::SP_JOURNAL_REPORT_CONFLICTS as i32;
const RESOLUTIONS: i32 = sp_journal_report_kind::SP_JOURNAL_REPORT_RESOLUTIONS as i32;
const UNRECOVERABLE: i32 = sp_journal_report_kind::SP_JOURNAL_REPORT_UNRECOVERABLE as i32;
const FAR: i64 = 1_000_000_000_000;

/// Delivers `body` as a new delivery, claimed and finished with a reply of its own.
fn deliver(r: *const sp_receiver, body: &str) {
    let ev = handle(r, body).unwrap_or_else(|s| panic!("{s:?}: {body}"));
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_NEW, "{body}");
    let stored = br#"{"ok":true}"#;
    // SAFETY: a live, claimed event; the reply is readable for its length.
    assert_eq!(unsafe { sp_event_finish(ev, stored.as_ptr(), stored.len()) }, SP_OK);
    free(ev);
}

fn bonus(index: i64) -> String {
    format!(r#"{{"event":"bonusGranted","index":{index}}}"#)
}

/// `sp_journal_report` with a sentinel out-parameter, which must be written exactly on success:
/// the buffer's NUL-terminated text parsed as JSON.
fn report(journal: *const sp_journal, kind: i32, all: bool, limit: usize) -> Result<Value, sp_status> {
    let sentinel = ptr::dangling_mut::<sp_buffer>();
    let mut out = sentinel;
    // SAFETY: valid pointers; the buffer is read, then freed once.
    unsafe {
        let got = sp_journal_report(journal, kind, all, limit, &mut out);
        if got != SP_OK {
            assert_eq!(out, sentinel, "out written on failure");
            return Err(got);
        }
        let view = (*out).text;
        assert_eq!(*view.ptr.add(view.len), 0, "not NUL-terminated");
        let value = serde_json::from_str(text(view)).expect("a JSON report");
        sp_buffer_free(out);
        Ok(value)
    }
}

fn entries(journal: *const sp_journal, kind: i32, all: bool) -> Vec<Value> {
    match report(journal, kind, all, usize::MAX).unwrap() {
        Value::Array(entries) => entries,
        other => panic!("not an array: {other}"),
    }
}

/// Asserts an `SP_ERR_INVALID_ARGUMENT` about `field`.
fn refused(got: sp_status, field: &str) {
    let e = last_error();
    assert_eq!(got, SP_ERR_INVALID_ARGUMENT, "{}", text(e.message));
    assert_eq!(text(e.field), field, "{}", text(e.message));
}

fn resolve(journal: *const sp_journal, first: i64, last: i64, note: &CStr) -> Result<u64, sp_status> {
    let mut closed = 77_u64;
    // SAFETY: valid pointers.
    match unsafe { sp_journal_resolve(journal, first, last, note.as_ptr(), &mut closed) } {
        SP_OK => Ok(closed),
        status => {
            assert_eq!(closed, 77, "closed written on failure");
            Err(status)
        }
    }
}

fn free_journal(r: *mut sp_receiver, journal: *mut sp_journal) {
    // SAFETY: live objects, freed once.
    unsafe {
        sp_receiver_free(r);
        sp_journal_free(journal);
    }
}

#[test]
fn an_index_jump_is_reported_and_accepted_and_a_gap_resolved_by_hand() {
    let dir = TempDir::new("jump");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    for index in [1, 2, 4, 5] {
        deliver(r, &refund(920_000 + index, index, 12));
    }
    let s = status(journal);
    assert_eq!((s.missing, s.resolved, s.index_jumps, s.unfinished, s.numbering), (1, 0, 0, 0, 1));
    refused(resolve(journal, 3, 6, c"beyond").unwrap_err(), "range");
    refused(resolve(journal, 4, 3, c"backwards").unwrap_err(), "range");

    deliver(r, &bonus(FAR));
    let s = status(journal);
    assert_eq!((s.index_jumps, s.missing, s.has_highest_index, s.highest_index), (1, 1, true, FAR));
    let jumps = entries(journal, INDEX_JUMPS, false);
    assert_eq!(jumps.len(), 1, "{jumps:?}");
    let jump = &jumps[0];
    assert_eq!((&jump["kind"], &jump["index"], &jump["previous_highest"]), (&json!("jump"), &json!(FAR), &json!(5)));
    assert_eq!(jump["key"], json!(format!("event#{FAR}#bonusGranted")));
    assert_eq!(jump["decision"], Value::Null);
    let id = jump["id"].as_i64().unwrap();
    // SAFETY: valid pointers.
    unsafe {
        refused(sp_journal_accept_jump(journal, id, c"".as_ptr()), "note");
        assert_eq!(status(journal).index_jumps, 1, "a refused decision changes nothing");
        assert_eq!(sp_journal_accept_jump(journal, id, c"the service moved its numbering".as_ptr()), SP_OK);
        refused(sp_journal_accept_jump(journal, id, c"again".as_ptr()), "id");
        refused(sp_journal_jump_is_gap(journal, id, c"too late".as_ptr()), "id");
    }
    assert_eq!(status(journal).index_jumps, 0);
    assert_eq!(entries(journal, INDEX_JUMPS, false), Vec::<Value>::new());
    let decided = entries(journal, INDEX_JUMPS, true);
    assert_eq!(
        (&decided[0]["decision"], &decided[0]["note"]),
        (&json!("accepted"), &json!("the service moved its numbering"))
    );

    // The gap of index 3, closed by hand: no longer missing, counted resolved, listed.
    assert_eq!(resolve(journal, 3, 3, c"the service confirms no event 3"), Ok(1));
    let s = status(journal);
    assert_eq!((s.missing, s.resolved, s.index_jumps), (0, 1, 0));
    assert!(missing(journal).is_empty());
    let resolutions = entries(journal, RESOLUTIONS, false);
    assert_eq!(resolutions.len(), 1);
    let resolution = &resolutions[0];
    assert_eq!((&resolution["first"], &resolution["last"], &resolution["closed"]), (&json!(3), &json!(3), &json!(1)));
    assert_eq!(resolution["note"], json!("the service confirms no event 3"));
    // A range with nothing missing closes none; `closed` may be NULL.
    assert_eq!(resolve(journal, 1, 5, c"nothing left"), Ok(0));
    // SAFETY: valid pointers; NULL `closed` is allowed.
    assert_eq!(unsafe { sp_journal_resolve(journal, 1, 2, c"again".as_ptr(), ptr::null_mut()) }, SP_OK);
    assert_eq!(entries(journal, RESOLUTIONS, false).len(), 3);
    assert_eq!(status(journal).resolved, 1);
    // Limit 0 gives an empty array of every kind; a limit counts entries.
    for kind in [INDEX_JUMPS, CONFLICTS, RESOLUTIONS, UNRECOVERABLE] {
        assert_eq!(report(journal, kind, true, 0), Ok(json!([])), "kind {kind}");
    }
    assert_eq!(report(journal, RESOLUTIONS, false, 2).unwrap().as_array().unwrap().len(), 2);
    free_journal(r, journal);
}

#[test]
fn a_jump_declared_a_gap_counts_missing_under_the_configured_window() {
    let dir = TempDir::new("gap");
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        assert_eq!(unsafe { sp_journal_config_set_max_index_jump(config, 10) }, SP_OK);
    })
    .unwrap();
    let r = receiver(journal);
    deliver(r, &refund(930_001, 1, 12));
    deliver(r, &refund(930_050, 50, 12));
    let s = status(journal);
    assert_eq!((s.missing, s.index_jumps), (0, 1), "50 is more than 10 beyond 1: a jump, not a gap");
    let id = entries(journal, INDEX_JUMPS, false)[0]["id"].as_i64().unwrap();
    // SAFETY: valid pointers.
    assert_eq!(unsafe { sp_journal_jump_is_gap(journal, id, c"an outage: fetch them".as_ptr()) }, SP_OK);
    let s = status(journal);
    assert_eq!((s.missing, s.index_jumps), (48, 0));
    assert_eq!(missing(journal), vec![(2, 49)]);
    assert_eq!(entries(journal, INDEX_JUMPS, true)[0]["decision"], json!("gap"));
    free_journal(r, journal);
}

#[test]
fn a_conflict_is_listed_and_resolved_by_hand() {
    let dir = TempDir::new("conflicts");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    deliver(r, &refund(940_001, 1, 12));
    let ev = handle(r, &other_session(&refund(940_001, 1, 12))).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_CONFLICT);
    free(ev);
    assert_eq!(status(journal).open_conflicts, 1);
    let conflicts = entries(journal, CONFLICTS, false);
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    let conflict = &conflicts[0];
    assert_eq!((&conflict["transaction_id"], &conflict["outcome"]), (&json!(940_001), &json!("refused")));
    let differing = conflict["differing"].as_array().unwrap();
    assert_eq!(differing, &[json!("gameSessionId: first 5, now 6")]);
    let id = conflict["id"].as_i64().unwrap();
    // SAFETY: valid pointers.
    unsafe {
        refused(sp_journal_resolve_conflict(journal, id, c" \t ".as_ptr()), "note");
        refused(sp_journal_resolve_conflict(journal, id + 1, c"no such".as_ptr()), "id");
        assert_eq!(status(journal).open_conflicts, 1);
        assert_eq!(sp_journal_resolve_conflict(journal, id, c"session 6 was a test by the service".as_ptr()), SP_OK);
        refused(sp_journal_resolve_conflict(journal, id, c"again".as_ptr()), "id");
    }
    let s = status(journal);
    assert_eq!((s.open_conflicts, s.conflicts), (0, 1), "resolved, still counted");
    assert_eq!(entries(journal, CONFLICTS, false), Vec::<Value>::new());
    assert_eq!(entries(journal, CONFLICTS, true)[0]["note"], json!("session 6 was a test by the service"));
    free_journal(r, journal);
}

#[test]
fn renumbering_starts_a_new_numbering_and_keeps_the_old_replies() {
    let dir = TempDir::new("renumber");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    deliver(r, &bonus(1));
    deliver(r, &bonus(3));
    deliver(r, &refund(970_005, 5, 12));
    assert_eq!(status(journal).missing, 2);
    let mut numbering = 0_i64;
    // SAFETY: valid pointers.
    unsafe {
        refused(sp_journal_renumber(journal, -1, c"negative".as_ptr(), &mut numbering), "first_index");
        refused(sp_journal_renumber(journal, 1, c"".as_ptr(), &mut numbering), "note");
        // Indexes 2 and 4 are missing: not given up silently.
        refused(sp_journal_renumber(journal, 1, c"the service restarted".as_ptr(), &mut numbering), "first_index");
        assert_eq!(numbering, 0, "written only on success");
        assert_eq!(
            sp_journal_renumber_giving_up_gaps(
                journal,
                1,
                c"the service restarted its numbering".as_ptr(),
                &mut numbering
            ),
            SP_OK
        );
    }
    assert_eq!(numbering, 2);
    let s = status(journal);
    assert_eq!((s.numbering, s.missing, s.has_highest_index), (2, 0, false));
    let given_up: Vec<(Value, Value)> =
        entries(journal, RESOLUTIONS, false).into_iter().map(|r| (r["first"].clone(), r["note"].clone())).collect();
    let note = json!("given up by renumbering from 1: the service restarted its numbering");
    assert_eq!(given_up, vec![(json!(4), note.clone()), (json!(2), note)]);
    // Index 1 of the new numbering is a new event, never the old one's stored reply; a refund,
    // keyed by its transactionId, is still answered with its stored reply.
    deliver(r, &bonus(1));
    let ev = handle(r, &refund(970_005, 5, 12)).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, text(claim.reply)), (sp_begin::SP_BEGIN_DONE, r#"{"ok":true}"#));
    free(ev);
    // SAFETY: valid pointers; NULL `numbering` is allowed.
    // (The refund's repeat carried index 5 of the new numbering: 2-4 are missing there.)
    assert_eq!(
        unsafe { sp_journal_renumber_giving_up_gaps(journal, 0, c"once more".as_ptr(), ptr::null_mut()) },
        SP_OK
    );
    assert_eq!(status(journal).numbering, 3);
    let renumberings: Vec<Value> =
        entries(journal, INDEX_JUMPS, true).into_iter().filter(|j| j["kind"] == json!("renumbered")).collect();
    assert_eq!(renumberings.len(), 2, "{renumberings:?}");
    assert_eq!(renumberings[0]["note"], json!("once more"));
    free_journal(r, journal);
}

#[test]
fn unrecoverable_indexes_are_counted_reported_and_resolved() {
    use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, run_server};
    // The sandbox knows no event at all: every fetch is answered 404.
    let server = run_server(ServerConfig::default()).expect("sandbox starts");
    let dir = TempDir::new("unrecoverable");
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        unsafe {
            assert_eq!(sp_journal_config_set_first_index(config, 1), SP_OK);
            assert_eq!(sp_journal_config_set_not_found_limit(config, 2), SP_OK);
        }
    })
    .unwrap();
    let r = receiver(journal);
    deliver(r, &refund(950_001, 1, 12));
    deliver(r, &refund(950_003, 3, 12));
    let url = CString::new(server.base_url()).unwrap();
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
    // One run of recovery: (missing it set out to fetch, failures, unrecoverable).
    let run = || -> (u64, usize, usize) {
        let (mut recovery, mut ev) = (ptr::null_mut(), ptr::null_mut());
        let mut summary = MaybeUninit::<sp_recovery_summary>::uninit();
        // SAFETY: valid pointers; the summary is written on SP_OK and read before the free.
        unsafe {
            assert_eq!(sp_recovery_new(r, client, 100, &mut recovery), SP_OK);
            assert_eq!(sp_recovery_next(recovery, &mut ev), SP_OK);
            assert!(ev.is_null(), "the service knows no event");
            assert_eq!(sp_recovery_report(recovery, summary.as_mut_ptr()), SP_OK);
            let s = summary.assume_init();
            if s.failures_len > 0 {
                let failure = &*s.failures;
                assert_eq!((failure.index, failure.reason), (2, sp_recovery_reason::SP_RECOVERY_NOT_FOUND));
            }
            let counts = (s.missing, s.failures_len, s.unrecoverable);
            sp_recovery_free(recovery);
            counts
        }
    };
    assert_eq!(run(), (1, 1, 0));
    assert_eq!(status(journal).unrecoverable, 0, "one 404 of the two allowed");
    assert_eq!(run(), (1, 1, 0));
    let s = status(journal);
    assert_eq!((s.unrecoverable, s.missing), (1, 1), "two runs of 404: unrecoverable, still missing");
    assert_eq!(report(journal, UNRECOVERABLE, false, usize::MAX), Ok(json!([2])));
    assert_eq!(run(), (0, 0, 1), "no longer fetched, reported");
    assert_eq!(resolve(journal, 2, 2, c"the service lost event 2"), Ok(1));
    let s = status(journal);
    assert_eq!((s.unrecoverable, s.missing, s.resolved), (0, 0, 1));
    assert_eq!(report(journal, UNRECOVERABLE, false, usize::MAX), Ok(json!([])));
    // SAFETY: a live client, freed once.
    unsafe { sp_client_free(client) };
    free_journal(r, journal);
}

/// A careless host: NULL pointers, empty notes, the last error's own message handed back in as
/// a note, kinds and limits at the ends of their ranges.
#[test]
fn operator_functions_refuse_careless_arguments() {
    let dir = TempDir::new("careless");
    let journal = open_journal(&dir.url(), 2000).unwrap();
    let r = receiver(journal);
    for index in [1, 3] {
        deliver(r, &refund(960_000 + index, index, 12));
    }
    let (j, none) = (ptr::null::<sp_journal>(), ptr::null::<std::ffi::c_char>());
    let note = c"a note".as_ptr();
    let mut buffer = ptr::dangling_mut::<sp_buffer>();
    let (mut closed, mut numbering) = (0_u64, 0_i64);
    // SAFETY: every pointer is NULL or valid; NULL is what is being tested.
    unsafe {
        refused(sp_journal_resolve(j, 2, 2, note, &mut closed), "journal");
        refused(sp_journal_accept_jump(j, 1, note), "journal");
        refused(sp_journal_jump_is_gap(j, 1, note), "journal");
        refused(sp_journal_resolve_conflict(j, 1, note), "journal");
        refused(sp_journal_renumber(j, 1, note, &mut numbering), "journal");
        refused(sp_journal_report(j, INDEX_JUMPS, false, 10, &mut buffer), "journal");
        refused(sp_journal_report(journal, INDEX_JUMPS, false, 10, ptr::null_mut()), "out");
        refused(sp_journal_resolve(journal, 2, 2, none, &mut closed), "note");
        refused(sp_journal_accept_jump(journal, 1, none), "note");
        refused(sp_journal_jump_is_gap(journal, 1, none), "note");
        refused(sp_journal_resolve_conflict(journal, 1, none), "note");
        refused(sp_journal_renumber(journal, 1, none, &mut numbering), "note");
        refused(sp_journal_resolve(journal, 2, 2, c"".as_ptr(), &mut closed), "note");
        refused(sp_journal_resolve(journal, 2, 2, c"\x01".as_ptr(), &mut closed), "note");
        refused(sp_journal_resolve(journal, 2, 2, c"\xff".as_ptr(), &mut closed), "note");
        refused(sp_journal_resolve(journal, -1, 2, note, &mut closed), "range");
        refused(sp_journal_resolve(journal, 2, i64::MAX, note, &mut closed), "range");
        refused(sp_journal_resolve(journal, i64::MIN, i64::MIN, note, &mut closed), "range");
        for id in [0, -1, i64::MAX, i64::MIN] {
            refused(sp_journal_accept_jump(journal, id, note), "id");
            refused(sp_journal_jump_is_gap(journal, id, note), "id");
            refused(sp_journal_resolve_conflict(journal, id, note), "id");
        }
        refused(sp_journal_renumber(journal, i64::MIN, note, &mut numbering), "first_index");
        assert_eq!(buffer, ptr::dangling_mut(), "out written on failure");
        assert_eq!((closed, numbering), (0, 0), "written on failure");
    }
    for kind in [0, 5, 99, -1, i32::MIN, i32::MAX] {
        refused(report(journal, kind, true, 10).unwrap_err(), "kind");
        assert!(text(last_error().message).contains(&kind.to_string()), "{}", text(last_error().message));
    }
    for kind in [INDEX_JUMPS, CONFLICTS, RESOLUTIONS, UNRECOVERABLE] {
        for all in [false, true] {
            assert_eq!(report(journal, kind, all, usize::MAX), Ok(json!([])), "kind {kind}");
            assert_eq!(report(journal, kind, all, 0), Ok(json!([])), "kind {kind}");
        }
    }
    let s = status(journal);
    assert_eq!((s.missing, s.resolved, s.numbering), (1, 0, 1), "nothing refused changed anything");

    // The last error's message handed back in as the note: read whole before it is replaced.
    // SAFETY: the message view is valid until the next status-returning call returns.
    unsafe {
        refused(sp_journal_accept_jump(journal, 7, note), "id");
        for call in 0..4 {
            let message = sp_last_error_message();
            let got = match call {
                0 => sp_journal_accept_jump(journal, 7, message.ptr),
                1 => sp_journal_jump_is_gap(journal, 7, message.ptr),
                2 => sp_journal_resolve_conflict(journal, 7, message.ptr),
                _ => sp_journal_resolve(journal, 5, 9, message.ptr, &mut closed),
            };
            refused(got, if call == 3 { "range" } else { "id" });
        }
        let message = sp_last_error_message();
        let copied = text(message).to_owned();
        assert_eq!(sp_journal_resolve(journal, 2, 2, message.ptr, &mut closed), SP_OK);
        assert_eq!(closed, 1);
        assert_eq!(entries(journal, RESOLUTIONS, false)[0]["note"], json!(copied));
        refused(sp_journal_resolve(journal, 2, 2, c"".as_ptr(), ptr::null_mut()), "note");
        let message = sp_last_error_message();
        let copied = text(message).to_owned();
        assert_eq!(sp_journal_renumber(journal, 1, message.ptr, ptr::null_mut()), SP_OK);
        assert_eq!(entries(journal, INDEX_JUMPS, true)[0]["note"], json!(copied));
    }
    free_journal(r, journal);
}

/// A refused body that did not name its event moves no gap bookkeeping; one that named it
/// counts its index as seen (and refused).
#[test]
fn a_refused_body_moves_the_gaps_only_when_it_named_its_event() {
    let dir = TempDir::new("refused-unnamed");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    for i in 1..=5 {
        deliver(r, &bonus(i));
    }
    assert!(handle(r, r#"{"index":1000000000000}"#).is_err());
    let stats = status(journal);
    assert_eq!((stats.missing, stats.highest_index, stats.refused, stats.index_jumps), (0, 5, 0, 0));
    assert!(handle(r, r#"{"event":"gameSessionBuyRefund","index":7}"#).is_err());
    let stats = status(journal);
    assert_eq!((stats.missing, stats.highest_index, stats.refused), (1, 7, 1));
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// Finishing or abandoning a claim the event no longer holds.

fn abandon(ev: *mut sp_event) -> sp_status {
    // SAFETY: a live event.
    unsafe { sp_event_abandon(ev) }
}

/// `sp_event_finish` with `reply` given.
fn finish_with(ev: *mut sp_event, reply: &[u8]) -> sp_status {
    // SAFETY: a live event; the reply is readable for its length.
    unsafe { sp_event_finish(ev, reply.as_ptr(), reply.len()) }
}

/// The last error's status and message, which must name `why`.
fn lost_because(got: sp_status, why: &str) {
    assert_eq!(got, SP_ERR_CLAIM_LOST, "expected SP_ERR_CLAIM_LOST ({why})");
    let e = last_error();
    let message = text(e.message);
    assert_eq!((e.status, e.http_status), (SP_ERR_CLAIM_LOST, 503), "{message}");
    assert!(message.contains(why), "the message says why ({why}): {message}");
    assert!(message.contains("nothing was stored"), "{message}");
}

/// Finishing an event whose claim this worker abandoned stores nothing and says so, every time
/// it is tried; abandoning it again does nothing. The next delivery runs as attempt 2.
#[test]
fn finishing_an_abandoned_claim_fails_every_time_and_stores_nothing() {
    let dir = TempDir::new("finish-abandoned");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let body = refund(900_021, 1, 12);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1);
    reply(ev, true, None);
    assert_eq!(abandon(ev), SP_OK);
    for _ in 0..3 {
        lost_because(finish(ev), "the claim was abandoned");
        lost_because(finish_with(ev, b"{\"late\":true}"), "the claim was abandoned");
    }
    assert_eq!(abandon(ev), SP_OK, "abandoning again does nothing");
    lost_because(finish(ev), "the claim was abandoned");
    free(ev);
    let s = status(journal);
    assert_eq!((s.handled, s.in_progress, s.unfinished), (0, 0, 1), "nothing was stored");
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 2));
    let second = reply(ev, false, Some(c"second attempt"));
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    let ev = handle(r, &body).unwrap();
    assert_eq!(text(begin(ev).unwrap().reply), second);
    free(ev);
    free_journal(r, journal);
}

/// A claim whose lease ran out and that another delivery took over: its event's finish and
/// abandon fail with `SP_ERR_CLAIM_LOST` naming the attempt that took it over, the first time
/// and every time after, and store nothing; the attempt that took over finishes as usual.
#[test]
fn a_claim_taken_over_cannot_be_finished_or_abandoned_later() {
    let dir = TempDir::new("finish-lost");
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        unsafe {
            assert_eq!(sp_journal_config_set_busy_wait_ms(config, 0), SP_OK);
            assert_eq!(sp_journal_config_set_lease_ms(config, 100), SP_OK);
        }
    })
    .unwrap();
    let r = receiver(journal);
    let (finished_late, abandoned_late) = (refund(900_022, 1, 12), refund(900_023, 2, 12));
    let mut takers = Vec::new();
    for (body, first_step_finishes) in [(&finished_late, true), (&abandoned_late, false)] {
        let dead = handle(r, body).unwrap();
        assert_eq!(begin(dead).unwrap().attempt, 1);
        reply(dead, true, None);
        std::thread::sleep(std::time::Duration::from_millis(150));
        let taker = handle(r, body).unwrap();
        assert_eq!(begin(taker).unwrap().attempt, 2);
        // The first worker wakes up: whichever it tries first, and whatever after, is refused.
        let first = if first_step_finishes { finish(dead) } else { abandon(dead) };
        lost_because(first, "taken over by attempt 2");
        for _ in 0..2 {
            lost_because(finish(dead), "taken over by attempt 2");
            lost_because(abandon(dead), "taken over by attempt 2");
        }
        free(dead);
        takers.push((taker, body));
    }
    for (taker, body) in takers {
        let stored = reply(taker, false, Some(c"attempt two"));
        assert_eq!(finish(taker), SP_OK);
        free(taker);
        let ev = handle(r, body).unwrap();
        assert_eq!(text(begin(ev).unwrap().reply), stored, "the late attempt stored nothing");
        free(ev);
    }
    let s = status(journal);
    assert_eq!((s.handled, s.in_progress, s.unfinished), (2, 0, 0));
    free_journal(r, journal);
}

/// Events that hold no claim of their own still finish and abandon as no-ops: answered from the
/// journal, or not journaled at all.
#[test]
fn finishing_or_abandoning_an_event_answered_from_the_journal_does_nothing() {
    let dir = TempDir::new("finish-settled");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let body = refund(900_024, 1, 12);
    deliver(r, &body);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_DONE);
    for _ in 0..2 {
        assert_eq!(finish(ev), SP_OK);
        assert_eq!(finish_with(ev, b"other"), SP_OK);
        assert_eq!(abandon(ev), SP_OK);
    }
    free(ev);
    let ev = handle(r, r#"{"action":"getPlayerBalance","playerIdentifier":"p-1","index":2}"#).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_NOT_JOURNALED);
    for _ in 0..2 {
        assert_eq!(abandon(ev), SP_OK);
        assert_eq!(finish_with(ev, b"other"), SP_OK);
    }
    free(ev);
    let ev = handle(r, &body).unwrap();
    assert_eq!(text(begin(ev).unwrap().reply), r#"{"ok":true}"#);
    free(ev);
    free_journal(r, journal);
}

/// An abandon the storage refused leaves the claim held, as a refused finish does: the event can
/// still be finished (or abandoned again) once the storage is back, and is never reported
/// finished while nothing was stored.
#[test]
fn a_refused_abandon_keeps_the_claim() {
    let dir = TempDir::new("abandon-refused");
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        unsafe {
            assert_eq!(sp_journal_config_set_busy_wait_ms(config, 0), SP_OK);
            assert_eq!(sp_journal_config_set_lock_timeout_ms(config, 50), SP_OK);
        }
    })
    .unwrap();
    let r = receiver(journal);
    let body = refund(900_025, 1, 12);
    let ev = handle(r, &body).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1);
    let stored = reply(ev, true, None);
    // Another program holds the journal's write lock: the abandon cannot be written.
    let path = dir.0.join("journal.db");
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    assert_eq!(abandon(ev), SP_ERR_JOURNAL);
    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    assert_eq!(finish(ev), SP_OK, "the claim is still held: finishing stores the reply");
    free(ev);
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, text(claim.reply)), (sp_begin::SP_BEGIN_DONE, stored.as_str()));
    free(ev);
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// Closing unfinished deliveries by hand.

/// `sp_journal_close_unfinished` with a sentinel `closed`, which must be written exactly on
/// success.
fn close_unfinished(journal: *const sp_journal, index: i64, note: *const std::ffi::c_char) -> Result<u64, sp_status> {
    let mut closed = 77_u64;
    // SAFETY: `journal` and `note` are NULL or valid, as the callers choose; `closed` is writable.
    match unsafe { sp_journal_close_unfinished(journal, index, note, &mut closed) } {
        SP_OK => Ok(closed),
        status => {
            assert_eq!(closed, 77, "closed written on failure");
            Err(status)
        }
    }
}

/// A refund begun and abandoned at index 5 is unfinished until closed by hand; closed, it is
/// neither counted nor refused again, its note is kept, and a later delivery of it runs as
/// attempt 2.
#[test]
fn an_unfinished_delivery_is_closed_by_hand_and_runs_again_as_the_next_attempt() {
    let dir = TempDir::new("close-unfinished");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    deliver(r, &refund(980_004, 4, 12));
    let body = refund(980_005, 5, 12);
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 1));
    assert_eq!(abandon(ev), SP_OK);
    free(ev);
    assert_eq!(status(journal).unfinished, 1);

    let no_such = close_unfinished(journal, 4, c"finished, not unfinished".as_ptr()).unwrap_err();
    refused(no_such, "index");
    assert!(text(last_error().message).contains("index 4"), "{}", text(last_error().message));
    refused(close_unfinished(journal, 5, c"".as_ptr()).unwrap_err(), "note");
    assert_eq!(status(journal).unfinished, 1, "nothing refused changed anything");

    assert_eq!(close_unfinished(journal, 5, c"refunded by hand, ticket 4411".as_ptr()), Ok(1));
    let s = status(journal);
    assert_eq!((s.unfinished, s.in_progress, s.handled), (0, 0, 1));
    let resolution = &entries(journal, RESOLUTIONS, false)[0];
    assert_eq!((&resolution["first"], &resolution["last"]), (&json!(5), &json!(5)));
    let note = resolution["note"].as_str().unwrap();
    assert!(note.contains("refunded by hand, ticket 4411"), "{note}");
    // Closed once: no unfinished delivery carries index 5 any more; `closed` may be NULL.
    refused(close_unfinished(journal, 5, c"again".as_ptr()).unwrap_err(), "index");
    // SAFETY: valid pointers; NULL `closed` is allowed.
    refused(unsafe { sp_journal_close_unfinished(journal, 5, c"again".as_ptr(), ptr::null_mut()) }, "index");

    // The service delivers it again: it runs as its next attempt, and finishes as usual.
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 2));
    assert_eq!(finish_with(ev, br#"{"again":true}"#), SP_OK);
    free(ev);
    let s = status(journal);
    assert_eq!((s.unfinished, s.handled), (0, 2));
    free_journal(r, journal);
}

/// A careless host: a NULL journal, NULL and empty notes, an index no unfinished delivery
/// carries, and the last error's own message handed back in as the note.
#[test]
fn close_unfinished_refuses_careless_arguments() {
    let dir = TempDir::new("close-unfinished-careless");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    deliver(r, &refund(990_001, 1, 12));
    let ev = handle(r, &refund(990_002, 2, 12)).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1);
    assert_eq!(abandon(ev), SP_OK);
    free(ev);
    let note = c"a note".as_ptr();
    refused(close_unfinished(ptr::null(), 2, note).unwrap_err(), "journal");
    // SAFETY: NULL journal and NULL `closed`: refused before anything is read or written.
    refused(unsafe { sp_journal_close_unfinished(ptr::null(), 2, note, ptr::null_mut()) }, "journal");
    refused(close_unfinished(journal, 2, ptr::null()).unwrap_err(), "note");
    for blank in [c"", c" \t ", c"\x01"] {
        refused(close_unfinished(journal, 2, blank.as_ptr()).unwrap_err(), "note");
    }
    // A claim a worker still holds (its lease running) is in progress, not unfinished.
    let held = handle(r, &refund(990_003, 3, 12)).unwrap();
    assert_eq!(begin(held).unwrap().attempt, 1);
    for index in [1, 3, 0, -1, i64::MAX, i64::MIN] {
        refused(close_unfinished(journal, index, note).unwrap_err(), "index");
    }
    let s = status(journal);
    assert_eq!((s.unfinished, s.in_progress), (1, 1), "nothing refused changed anything");
    assert_eq!(finish_with(held, br#"{"held":true}"#), SP_OK, "the held claim is still its worker's");
    free(held);

    // The last error's message handed back in as the note: refused for the index, then taken
    // whole for the real one.
    // SAFETY: the message view is valid until the next status-returning call returns.
    unsafe {
        refused(sp_journal_close_unfinished(journal, 7, note, ptr::null_mut()), "index");
        for _ in 0..3 {
            let message = sp_last_error_message();
            refused(sp_journal_close_unfinished(journal, 7, message.ptr, ptr::null_mut()), "index");
        }
        let message = sp_last_error_message();
        let copied = text(message).to_owned();
        let mut closed = 0_u64;
        assert_eq!(sp_journal_close_unfinished(journal, 2, message.ptr, &mut closed), SP_OK);
        assert_eq!(closed, 1);
        let kept = entries(journal, RESOLUTIONS, false)[0]["note"].as_str().unwrap().to_owned();
        assert!(kept.ends_with(&copied), "{kept} keeps {copied}");
    }
    assert_eq!(status(journal).unfinished, 0);
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// What a caller is told of a journal failure: the answer (`sp_last_error_response`) says only
// that the partner is temporarily unavailable; the URL, path, host and user stay in the message,
// for the host's log.

#[path = "e2e/cluster.rs"]
mod cluster;

/// The last error is `SP_ERR_JOURNAL` answered 503 with a JSON body holding none of `secrets`
/// (each of which the message, kept for the log, must hold at least one of).
fn journal_failure_names_nothing(got: sp_status, secrets: &[&str], what: &str) {
    assert_eq!(got, SP_ERR_JOURNAL, "{what}: {}", text(last_error().message));
    let e = last_error();
    let (message, body) = (text(e.message), text(e.response_body));
    assert_eq!((e.status, e.http_status), (SP_ERR_JOURNAL, 503), "{what}: {message}");
    let parsed: Value = serde_json::from_str(body).unwrap_or_else(|error| panic!("{what}: not JSON ({error}): {body}"));
    assert_eq!(parsed["error"]["code"], json!("journal"), "{what}: {body}");
    for secret in secrets {
        assert!(!body.contains(secret), "{what}: the answer names {secret}: {body}");
    }
    assert!(secrets.iter().any(|secret| message.contains(secret)), "{what}: the log keeps it: {message}");
}

#[test]
fn an_unreachable_postgres_at_open_answers_nothing_of_it() {
    let url = c"postgres://sp_owner:sp_secret@127.0.0.1:1/sp_ledger";
    let got = open_journal_with(url, |config| {
        // SAFETY: a live configuration.
        assert_eq!(unsafe { sp_journal_config_set_lock_timeout_ms(config, 2000) }, SP_OK);
    });
    let secrets = ["postgres", "127.0.0.1", ":1/", "sp_owner", "sp_secret", "sp_ledger"];
    journal_failure_names_nothing(got.unwrap_err(), &secrets, "PostgreSQL unreachable at open");
    assert!(!text(last_error().message).contains("sp_secret"), "not even the log gets the password");
}

#[test]
fn an_unusable_sqlite_file_answers_nothing_of_its_path() {
    let dir = TempDir::new("unusable-answer");
    let path = dir.0.display().to_string();
    // A directory where the file should be, and a file of another kind.
    let directory = CString::new(format!("sqlite:{path}")).unwrap();
    journal_failure_names_nothing(open_journal(&directory, 10).unwrap_err(), &[&path, "sqlite"], "a directory");
    let other = dir.0.join("notes.txt");
    std::fs::write(&other, "these are not the journal's tables, nor a database at all\n".repeat(200)).unwrap();
    let other_url = CString::new(format!("sqlite:{}", other.display())).unwrap();
    let secrets = [other.to_str().unwrap(), "notes.txt", "sqlite"];
    journal_failure_names_nothing(open_journal(&other_url, 10).unwrap_err(), &secrets, "not a database");
}

/// A journal whose SQLite file another program holds locked: begin, finish and abandon fail,
/// answering nothing of the path.
#[test]
fn a_locked_sqlite_journal_at_begin_finish_and_abandon_answers_nothing_of_its_path() {
    let dir = TempDir::new("locked-answer");
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        unsafe {
            assert_eq!(sp_journal_config_set_busy_wait_ms(config, 0), SP_OK);
            assert_eq!(sp_journal_config_set_lock_timeout_ms(config, 50), SP_OK);
        }
    })
    .unwrap();
    let r = receiver(journal);
    let path = dir.0.join("journal.db");
    let secrets = [path.to_str().unwrap(), "journal.db", "sqlite"];
    let claimed = handle(r, &refund(900_031, 1, 12)).unwrap();
    assert_eq!(begin(claimed).unwrap().attempt, 1);
    reply(claimed, true, None);
    let fresh = handle(r, &refund(900_032, 2, 12)).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    journal_failure_names_nothing(begin(fresh).unwrap_err(), &secrets, "begin");
    journal_failure_names_nothing(finish(claimed), &secrets, "finish");
    journal_failure_names_nothing(abandon(claimed), &secrets, "abandon");
    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    assert_eq!(finish(claimed), SP_OK, "the claim was kept");
    free(claimed);
    free(fresh);
    free_journal(r, journal);
}

/// A PostgreSQL journal whose server goes away after it was opened: the next begin fails,
/// answering nothing of the server.
#[test]
fn postgres_gone_at_begin_answers_nothing_of_it() {
    let Some(cluster) = cluster::Cluster::start("PostgreSQL gone at begin (C ABI)") else { return };
    let url = cluster.schema_url("sp_gone_schema");
    let port = format!(":{}", cluster.port());
    let journal = open_journal_with(&CString::new(url).unwrap(), |config| {
        // SAFETY: a live configuration.
        assert_eq!(unsafe { sp_journal_config_set_lock_timeout_ms(config, 2000) }, SP_OK);
    })
    .unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(900_041, 1, 12)).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 1, "the server is there");
    reply(ev, true, None);
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    drop(cluster); // stopped: connections refused from now on
    let ev = handle(r, &refund(900_042, 2, 12)).unwrap();
    let secrets = ["postgres", "127.0.0.1", port.as_str(), "sp_gone_schema"];
    journal_failure_names_nothing(begin(ev).unwrap_err(), &secrets, "PostgreSQL gone at begin");
    free(ev);
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// Retention and vital signs: `sp_journal_prune`, `sp_journal_vitals`,
// `sp_journal_missing_older_than`, `sp_event_reply_pruned`, `sp_journal_config_set_retention_ms`.

const DAY_MS: u64 = 86_400_000;

fn vitals(journal: *const sp_journal) -> sp_journal_vital_signs {
    let mut out = MaybeUninit::<sp_journal_vital_signs>::uninit();
    // SAFETY: valid pointers, written on SP_OK.
    unsafe {
        assert_eq!(sp_journal_vitals(journal, out.as_mut_ptr()), SP_OK);
        out.assume_init()
    }
}

fn prune_options(older_than_ms: u64) -> sp_prune_options {
    let mut out = MaybeUninit::<sp_prune_options>::uninit();
    // SAFETY: a writable out-parameter, written on SP_OK.
    unsafe {
        assert_eq!(sp_prune_options_default(out.as_mut_ptr(), older_than_ms), SP_OK);
        out.assume_init()
    }
}

/// A report no prune writes, to tell whether a failed prune wrote its out-parameter.
const UNTOUCHED: sp_prune_report = sp_prune_report {
    compacted: 77,
    forgotten: 77,
    refused_removed: 77,
    conflicts_removed: 77,
    batches: 77,
    longest_batch_us: 77,
    bytes_returned: 77,
    complete: true,
    export_running: true,
};

/// `sp_journal_prune`; on a failure, checks that the report was not written.
fn prune(journal: *const sp_journal, options: &sp_prune_options) -> Result<sp_prune_report, sp_status> {
    let mut out = UNTOUCHED;
    // SAFETY: valid pointers.
    match unsafe { sp_journal_prune(journal, options, &mut out) } {
        SP_OK => Ok(out),
        status => {
            assert_eq!(out, UNTOUCHED, "out written on failure");
            Err(status)
        }
    }
}

fn reply_pruned(ev: *const sp_event) -> bool {
    // SAFETY: a live event or NULL.
    unsafe { sp_event_reply_pruned(ev) }
}

/// Moves the finishing time of the delivery of `transaction_id` back by `days`, behind the
/// library's back (the retention's minimum is a day).
fn age(dir: &TempDir, transaction_id: i64, days: i64) {
    let db = rusqlite::Connection::open(dir.0.join("journal.db")).unwrap();
    let shift = days * DAY_MS as i64;
    let sql = format!(
        "UPDATE sp_journal_delivery SET finished_ms = finished_ms - {shift} WHERE transaction_id = {transaction_id}"
    );
    assert_eq!(db.execute(&sql, []).unwrap(), 1, "{sql}");
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// A delivery finished 100 days ago is compacted by a prune of what is older than 90 days; the
/// report counts it, the vitals count it, nothing else moves. Its repeat runs as attempt 2 with
/// `sp_event_reply_pruned` true; a repeat with other decisive content is a conflict; a young
/// delivery's repeat still gets its stored reply.
#[test]
fn prune_compacts_an_aged_delivery_and_its_repeat_says_the_reply_was_pruned() {
    let dir = TempDir::new("prune");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let (old, young) = (refund(960_001, 1, 12), refund(960_002, 2, 12));
    for body in [&old, &young] {
        let ev = handle(r, body).unwrap();
        assert_eq!(begin(ev).unwrap().attempt, 1);
        assert!(!reply_pruned(ev), "a first delivery");
        reply(ev, true, None);
        assert_eq!(finish(ev), SP_OK);
        free(ev);
    }
    let before = vitals(journal);
    assert_eq!((before.pruned, before.forgotten), (0, 0));
    assert!(before.has_size_bytes && before.size_bytes > 0, "{before:?}");
    assert!(before.has_oldest_record_ms && before.has_last_delivery_ms && !before.has_oldest_gap_ms, "{before:?}");
    assert!((now_ms() - before.last_delivery_ms).abs() < 60_000, "{before:?}");
    age(&dir, 960_001, 100);
    assert!(vitals(journal).oldest_record_ms < before.oldest_record_ms - 99 * DAY_MS as i64);

    let options = prune_options(90 * DAY_MS);
    let expected = sp_prune_options {
        older_than_ms: 90 * DAY_MS,
        forget_older_than_ms: 0,
        batch: 200,
        pause_ms: 10,
        max_time_ms: 0,
    };
    assert_eq!(options, expected, "the library's defaults");
    let report = prune(journal, &options).unwrap();
    assert_eq!(
        (report.compacted, report.forgotten, report.refused_removed, report.conflicts_removed),
        (1, 0, 0, 0),
        "{report:?}"
    );
    assert_eq!(report.batches, 2, "one batch compacting, one finding nothing left: {report:?}");
    assert!(report.complete, "{report:?}");
    assert!(report.longest_batch_us < 60_000_000, "{report:?}");
    let after = vitals(journal);
    assert_eq!((after.pruned, after.forgotten), (1, 0));
    assert!(after.has_oldest_record_ms && after.oldest_record_ms >= before.oldest_record_ms, "the young one is left");
    let s = status(journal);
    assert_eq!((s.handled, s.missing, s.in_progress, s.unfinished), (2, 0, 0, 0), "nothing else moved");
    let again = prune(journal, &options).unwrap();
    assert_eq!((again.compacted, again.batches, again.complete), (0, 1, true), "{again:?}");

    // Other decisive content under the compacted key: a conflict, as before the prune.
    let ev = handle(r, &other_session(&old)).unwrap();
    assert_eq!(begin(ev).unwrap_err(), SP_ERR_CONFLICT);
    assert!(!reply_pruned(ev), "refused, not claimed");
    free(ev);
    // The same content: its next attempt, the reply pruned; kept after the claim settles.
    let ev = handle(r, &old).unwrap();
    assert!(!reply_pruned(ev), "not begun");
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 2));
    assert!(reply_pruned(ev));
    assert_eq!(differing(ev), "");
    reply(ev, true, None);
    assert_eq!(finish(ev), SP_OK);
    assert!(reply_pruned(ev), "kept after the claim settles");
    free(ev);
    // Finished again, it is answered from the journal.
    let ev = handle(r, &old).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_DONE);
    assert!(!reply_pruned(ev), "answered from the journal");
    free(ev);
    // The young delivery kept its reply.
    let ev = handle(r, &young).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_DONE);
    assert!(!reply_pruned(ev));
    free(ev);
    assert!(!reply_pruned(ptr::null()), "NULL is no claim");
    free_journal(r, journal);
}

/// Compact records older than `forget_older_than_ms` are removed; a repeat of one is a new
/// delivery again.
#[test]
fn prune_forgets_compact_records_only_when_asked() {
    let dir = TempDir::new("prune-forget");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let body = refund(961_001, 1, 12);
    deliver(r, &body);
    age(&dir, 961_001, 400);
    // The cutoffs count from the newest stored reply at the latest: a young one is there.
    deliver(r, &refund(961_002, 2, 12));
    let mut options = prune_options(90 * DAY_MS);
    assert_eq!(prune(journal, &options).unwrap().compacted, 1);
    options.forget_older_than_ms = 365 * DAY_MS;
    options.batch = 1;
    options.pause_ms = 0;
    let report = prune(journal, &options).unwrap();
    assert_eq!((report.compacted, report.forgotten, report.complete), (0, 1, true), "{report:?}");
    let v = vitals(journal);
    assert_eq!((v.pruned, v.forgotten), (1, 1));
    let ev = handle(r, &body).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 1), "forgotten: a new delivery");
    assert!(!reply_pruned(ev));
    free(ev);
    free_journal(r, journal);
}

/// Careless prunes: NULL arguments, options out of range (each refused naming its field, the
/// report untouched), and options sharing their memory with the report.
#[test]
fn prune_refuses_careless_arguments_naming_them() {
    let dir = TempDir::new("prune-careless");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    deliver(r, &refund(962_001, 1, 12));
    let day = prune_options(DAY_MS);
    refused(prune(ptr::null(), &day).unwrap_err(), "journal");
    let mut out = UNTOUCHED;
    // SAFETY: NULL options and NULL out are checked, never dereferenced.
    unsafe {
        refused(sp_journal_prune(journal, ptr::null(), &mut out), "options");
        refused(sp_journal_prune(journal, &day, ptr::null_mut()), "out");
        refused(sp_journal_prune(ptr::null(), ptr::null(), ptr::null_mut()), "journal");
        refused(sp_prune_options_default(ptr::null_mut(), DAY_MS), "out");
    }
    assert_eq!(out, UNTOUCHED);
    type Change = fn(&mut sp_prune_options);
    let cases: [(&str, Change); 9] = [
        ("older_than", |o| o.older_than_ms = DAY_MS - 1),
        ("older_than", |o| o.older_than_ms = 0),
        ("older_than", |o| o.older_than_ms = u64::MAX),
        ("forget_older_than", |o| o.forget_older_than_ms = o.older_than_ms),
        ("forget_older_than", |o| o.forget_older_than_ms = 1),
        ("forget_older_than", |o| o.forget_older_than_ms = u64::MAX),
        ("batch", |o| o.batch = 100_001),
        ("batch", |o| o.batch = u32::MAX),
        ("pause", |o| o.pause_ms = 60_001),
    ];
    for (field, change) in cases {
        let mut options = day;
        change(&mut options);
        refused(prune(journal, &options).unwrap_err(), field);
        assert!(text(last_error().message).contains(field), "{}", text(last_error().message));
    }
    let v = vitals(journal);
    assert_eq!(v.pruned, 0, "nothing refused removed anything");
    // The options read in the memory the report is then written into.
    #[repr(C)]
    union Shared {
        options: sp_prune_options,
        report: sp_prune_report,
    }
    let mut shared = Shared { report: UNTOUCHED };
    shared.options = prune_options(DAY_MS);
    let at = ptr::addr_of_mut!(shared);
    // SAFETY: the union holds either struct; the library reads the options before writing.
    let report = unsafe {
        assert_eq!(sp_journal_prune(journal, at.cast::<sp_prune_options>(), at.cast::<sp_prune_report>()), SP_OK);
        shared.report
    };
    assert_eq!((report.compacted, report.batches, report.complete), (0, 1, true), "{report:?}");
    free_journal(r, journal);
}

/// A gap younger than the asked age is left out of `sp_journal_missing_older_than`; the vitals
/// date it. Careless arguments are refused naming them.
#[test]
fn missing_older_than_leaves_out_young_gaps() {
    let dir = TempDir::new("missing-older");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    for index in [1, 3] {
        deliver(r, &refund(963_000 + index, index, 12));
    }
    let older_than = |min_age_ms: u64, limit: usize| -> Result<Vec<(i64, i64)>, sp_status> {
        let sentinel = ptr::dangling_mut::<sp_index_ranges>();
        let mut out = sentinel;
        // SAFETY: valid pointers; the ranges are freed once copied.
        unsafe {
            let got = sp_journal_missing_older_than(journal, min_age_ms, limit, &mut out);
            if got != SP_OK {
                assert_eq!(out, sentinel, "out written on failure");
                return Err(got);
            }
            let view = &*out;
            let ranges = if view.len == 0 { &[][..] } else { std::slice::from_raw_parts(view.ranges, view.len) };
            let copied = ranges.iter().map(|r| (r.first, r.last)).collect();
            sp_index_ranges_free(out);
            Ok(copied)
        }
    };
    assert_eq!(older_than(0, 100), Ok(vec![(2, 2)]));
    assert_eq!(older_than(3_600_000, 100), Ok(vec![]), "the gap opened just now");
    assert_eq!(older_than(u64::MAX, 1), Ok(vec![]));
    let v = vitals(journal);
    assert!(v.has_oldest_gap_ms && (now_ms() - v.oldest_gap_ms).abs() < 60_000, "{v:?}");
    // The gap opened when 3 came: make that two hours ago.
    let db = rusqlite::Connection::open(dir.0.join("journal.db")).unwrap();
    db.execute("UPDATE sp_journal_runs SET since_ms = since_ms - 7200000 WHERE lo = 3", []).unwrap();
    assert_eq!(older_than(3_600_000, 100), Ok(vec![(2, 2)]));
    let v = vitals(journal);
    let age = now_ms() - v.oldest_gap_ms;
    assert!((7_100_000..7_300_000).contains(&age), "two hours, not {age} ms");
    for limit in [0, 1_000_001, usize::MAX] {
        refused(older_than(0, limit).unwrap_err(), "limit");
    }
    let mut out = ptr::null_mut();
    // SAFETY: NULL pointers are checked, never dereferenced.
    unsafe {
        refused(sp_journal_missing_older_than(ptr::null(), 0, 1, &mut out), "journal");
        refused(sp_journal_missing_older_than(journal, 0, 1, ptr::null_mut()), "out");
        refused(sp_journal_vitals(ptr::null(), ptr::null_mut()), "journal");
        refused(sp_journal_vitals(journal, ptr::null_mut()), "out");
    }
    assert!(out.is_null());
    free_journal(r, journal);
}

/// The journal's own retention: refused below a day, and once set, a finish a second after the
/// last one compacts what is old.
#[test]
fn the_journals_own_retention_compacts_on_finish() {
    let dir = TempDir::new("retention");
    let mut config = ptr::null_mut();
    // SAFETY: valid pointers; NULL configurations are refused.
    unsafe {
        assert_eq!(sp_journal_config_new(dir.url().as_ptr(), &mut config), SP_OK);
        for ms in [1, DAY_MS - 1, i64::MAX as u64, u64::MAX] {
            refused(sp_journal_config_set_retention_ms(config, ms), "retention");
        }
        refused(sp_journal_config_set_retention_ms(ptr::null_mut(), DAY_MS), "config");
        // The longest retention the setting takes opens.
        assert_eq!(sp_journal_config_set_retention_ms(config, i64::MAX as u64 - 1), SP_OK);
        let mut opened = ptr::null_mut();
        assert_eq!(sp_journal_open(config, &mut opened), SP_OK, "{}", text(last_error().message));
        sp_journal_free(opened);
        for ms in [DAY_MS, 0] {
            assert_eq!(sp_journal_config_set_retention_ms(config, ms), SP_OK);
        }
        sp_journal_config_free(config);
    }
    let journal = open_journal_with(&dir.url(), |config| {
        // SAFETY: a live configuration.
        assert_eq!(unsafe { sp_journal_config_set_retention_ms(config, 90 * DAY_MS) }, SP_OK);
    })
    .unwrap();
    let r = receiver(journal);
    deliver(r, &refund(964_001, 1, 12));
    age(&dir, 964_001, 100);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    deliver(r, &refund(964_002, 2, 12));
    assert_eq!(vitals(journal).pruned, 1);
    let ev = handle(r, &refund(964_001, 1, 12)).unwrap();
    assert_eq!(begin(ev).unwrap().attempt, 2);
    assert!(reply_pruned(ev));
    free(ev);
    free_journal(r, journal);
}

/// `sp_journal_backup`: the copy is a journal of its own that answers a repeat with the stored
/// reply; an existing destination is refused naming `dest` and left as it was; NULLs and text
/// that is not UTF-8 are named.
#[test]
fn a_backup_answers_repeats_and_never_replaces_a_file() {
    let dir = TempDir::new("backup");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(965_001, 1, 12)).unwrap();
    begin(ev).unwrap();
    let stored = reply(ev, false, Some(c"player blocked"));
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    let path = dir.0.join("backup.db");
    let dest = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: live pointers.
    assert_eq!(unsafe { sp_journal_backup(journal, dest.as_ptr()) }, SP_OK);
    let copy = open_journal(&CString::new(format!("sqlite:{}", path.display())).unwrap(), 0).unwrap();
    let rc = receiver(copy);
    let ev = handle(rc, &refund(965_001, 1, 12)).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, text(claim.reply)), (sp_begin::SP_BEGIN_DONE, stored.as_str()));
    free(ev);
    let bytes = std::fs::read(&path).unwrap();
    // SAFETY: NULL or live pointers; NULL and bad text are what is tested.
    unsafe {
        refused(sp_journal_backup(journal, dest.as_ptr()), "dest");
        assert!(text(last_error().message).contains("exists"));
        refused(sp_journal_backup(ptr::null(), dest.as_ptr()), "journal");
        refused(sp_journal_backup(journal, ptr::null()), "dest");
        refused(sp_journal_backup(journal, c"/tmp/\xff.db".as_ptr()), "dest");
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "a refused backup touched the existing file");
    free_journal(rc, copy);
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// Staged statements: the partner's SQL run by `sp_event_finish` with the reply.

use slotpartner::ffi::staged::{sp_event_stage, sp_sql_kind, sp_sql_value};

fn sql_int(v: i64) -> sp_sql_value {
    sp_sql_value { kind: sp_sql_kind::SP_SQL_INT as u32, int_value: v, bytes: ptr::null(), len: 0 }
}

fn sql_text(v: &[u8]) -> sp_sql_value {
    sp_sql_value { kind: sp_sql_kind::SP_SQL_TEXT as u32, int_value: 0, bytes: v.as_ptr(), len: v.len() }
}

fn stage(ev: *mut sp_event, sql: &str, params: &[sp_sql_value]) -> sp_status {
    // SAFETY: a live event (or NULL), readable text and values.
    unsafe { sp_event_stage(ev, sql.as_ptr().cast(), sql.len(), params.as_ptr(), params.len()) }
}

/// The status and field of a refused call.
fn refused_naming(got: sp_status, status: sp_status, field: &str) {
    assert_eq!(got, status, "expected {status:?} naming {field}");
    let e = last_error();
    assert_eq!(text(e.field), field, "{}", text(e.message));
}

fn ledger_rows(dir: &TempDir) -> Vec<(i64, String)> {
    let db = rusqlite::Connection::open(dir.0.join("journal.db")).unwrap();
    let mut rows = db.prepare("SELECT transaction_id, note FROM ledger ORDER BY rowid").unwrap();
    rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
}

/// Staged statements run once, with the reply, in order; a failing one stores nothing and keeps
/// the claim and the statements; an event holding no claim stages nothing; freeing a claimed
/// event drops its statements unrun.
#[test]
fn staged_statements_run_with_the_reply_or_not_at_all() {
    let dir = TempDir::new("staged");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let db = rusqlite::Connection::open(dir.0.join("journal.db")).unwrap();
    db.execute_batch("CREATE TABLE ledger (transaction_id INTEGER UNIQUE, note TEXT)").unwrap();
    let r = receiver(journal);
    let insert = "INSERT INTO ledger (transaction_id, note) VALUES (?1, ?2)";

    // Not begun: refused, naming the event.
    let ev = handle(r, &refund(1, 1, 1)).unwrap();
    refused_naming(stage(ev, insert, &[sql_int(1), sql_text(b"a")]), SP_ERR_INVALID_ARGUMENT, "event");
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_NEW);
    reply(ev, true, None);
    assert_eq!(stage(ev, insert, &[sql_int(1), sql_text(b"first")]), SP_OK);
    // The second fails at finish: nothing of the first stays, the claim and both stay staged.
    assert_eq!(
        stage(ev, "INSERT INTO ledger (transaction_id, note) VALUES (?1, ?2)", &[sql_int(1), sql_text(b"dup")]),
        SP_OK
    );
    refused_naming(finish(ev), SP_ERR_JOURNAL, "statements[1]");
    assert!(text(last_error().message).contains("UNIQUE"), "the database's words");
    assert_eq!(last_error().http_status, 503);
    assert!(ledger_rows(&dir).is_empty());
    free(ev); // abandons the claim: its statements never run
    assert!(ledger_rows(&dir).is_empty());

    // Attempt 2 stages one good statement and finishes; then the event holds no claim.
    let ev = handle(r, &refund(1, 1, 1)).unwrap();
    let claim = begin(ev).unwrap();
    assert_eq!((claim.outcome, claim.attempt), (sp_begin::SP_BEGIN_NEW, 2));
    reply(ev, true, None);
    assert_eq!(stage(ev, insert, &[sql_int(1), sql_text("Grüße".as_bytes())]), SP_OK);
    assert_eq!(finish(ev), SP_OK);
    assert_eq!(ledger_rows(&dir), vec![(1, "Grüße".to_owned())]);
    refused_naming(stage(ev, insert, &[sql_int(1), sql_text(b"late")]), SP_ERR_INVALID_ARGUMENT, "event");
    free(ev);
    // A repeat is answered from the journal and stages nothing.
    let ev = handle(r, &refund(1, 1, 1)).unwrap();
    assert_eq!(begin(ev).unwrap().outcome, sp_begin::SP_BEGIN_DONE);
    refused_naming(stage(ev, insert, &[sql_int(1), sql_text(b"again")]), SP_ERR_INVALID_ARGUMENT, "event");
    free(ev);
    assert_eq!(ledger_rows(&dir).len(), 1);

    // Abandoned: the staged statement is dropped, and finishing fails as for any abandon.
    let ev = handle(r, &refund(2, 2, 1)).unwrap();
    begin(ev).unwrap();
    reply(ev, true, None);
    assert_eq!(stage(ev, insert, &[sql_int(2), sql_text(b"x")]), SP_OK);
    assert_eq!(abandon(ev), SP_OK);
    assert_eq!(finish(ev), SP_ERR_CLAIM_LOST);
    free(ev);
    assert_eq!(ledger_rows(&dir).len(), 1);
    free_journal(r, journal);
}

/// What a careless host hands `sp_event_stage`: NULL everywhere, `SIZE_MAX` lengths, unknown
/// kinds, text that is not UTF-8, transaction control, and the library's own last error message
/// as the SQL. Each is refused naming its argument, and nothing is staged.
#[test]
fn staging_refuses_careless_arguments() {
    let dir = TempDir::new("staged-careless");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    let ev = handle(r, &refund(3, 3, 1)).unwrap();
    begin(ev).unwrap();
    reply(ev, true, None);
    let ok = "SELECT 1";
    refused_naming(stage(ptr::null_mut(), ok, &[]), SP_ERR_INVALID_ARGUMENT, "event");
    // SAFETY (each call): pointers NULL or readable for the lengths given, except where the
    // length is refused before anything is read.
    unsafe {
        refused_naming(sp_event_stage(ev, ptr::null(), 0, ptr::null(), 0), SP_ERR_INVALID_ARGUMENT, "sql");
        refused_naming(
            sp_event_stage(ev, ok.as_ptr().cast(), usize::MAX, ptr::null(), 0),
            SP_ERR_INVALID_ARGUMENT,
            "sql",
        );
        refused_naming(
            sp_event_stage(ev, ok.as_ptr().cast(), ok.len(), ptr::null(), 2),
            SP_ERR_INVALID_ARGUMENT,
            "params",
        );
        let one = [sql_int(1)];
        refused_naming(
            sp_event_stage(ev, ok.as_ptr().cast(), ok.len(), one.as_ptr(), usize::MAX),
            SP_ERR_INVALID_ARGUMENT,
            "params",
        );
    }
    refused_naming(stage(ev, "  ", &[]), SP_ERR_INVALID_ARGUMENT, "sql");
    refused_naming(stage(ev, "/* now */ COMMIT", &[]), SP_ERR_INVALID_ARGUMENT, "sql");
    let bad_utf8 = b"SELECT '\xff'";
    // SAFETY: readable bytes.
    let got = unsafe { sp_event_stage(ev, bad_utf8.as_ptr().cast(), bad_utf8.len(), ptr::null(), 0) };
    refused_naming(got, SP_ERR_INVALID_ARGUMENT, "sql");
    let unknown = sp_sql_value { kind: 99, int_value: 0, bytes: ptr::null(), len: 0 };
    refused_naming(stage(ev, ok, &[sql_int(1), unknown]), SP_ERR_INVALID_ARGUMENT, "params[1].kind");
    let dangling = sp_sql_value { kind: sp_sql_kind::SP_SQL_TEXT as u32, int_value: 0, bytes: ptr::null(), len: 5 };
    refused_naming(stage(ev, ok, &[dangling]), SP_ERR_INVALID_ARGUMENT, "params[0].bytes");
    let huge =
        sp_sql_value { kind: sp_sql_kind::SP_SQL_BLOB as u32, int_value: 0, bytes: ok.as_ptr(), len: usize::MAX };
    refused_naming(stage(ev, ok, &[huge]), SP_ERR_INVALID_ARGUMENT, "params[0].bytes");
    refused_naming(stage(ev, ok, &[sql_int(1), sql_text(b"\xc3")]), SP_ERR_INVALID_ARGUMENT, "params[1].bytes");
    // The last error's own message handed back as the SQL: copied before anything else (the
    // refusal replaces the message it was read from), and refused at staging, its first word
    // being no statement a credit needs.
    let message = sp_last_error_message();
    // SAFETY: the view the library handed out, valid until this call returns.
    let got = unsafe { sp_event_stage(ev, message.ptr, message.len, ptr::null(), 0) };
    refused_naming(got, SP_ERR_INVALID_ARGUMENT, "sql");
    assert!(text(last_error().message).contains("starts with PARAMS"), "{}", text(last_error().message));
    // Nothing of the above was staged: the finish runs no statement and succeeds.
    assert_eq!(finish(ev), SP_OK);
    free(ev);
    free_journal(r, journal);
}

// ---------------------------------------------------------------------------------------------
// Out-parameters written whole into the host's memory.

/// `size_of` of the field `field` picks out of a `T`.
fn field_size<T, F>(_field: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The byte offsets of `$ty` that none of the listed fields (all of them) covers: its padding.
macro_rules! padding {
    ($ty:ident { $($field:ident),+ $(,)? }) => {{
        // Every field named, or this fails to compile.
        let _every_field = |s: $ty| { let $ty { $($field: _),+ } = s; };
        let mut covered = vec![false; size_of::<$ty>()];
        $(
            let at = std::mem::offset_of!($ty, $field);
            covered[at..at + field_size(|s: &$ty| &s.$field)].fill(true);
        )+
        covered.iter().enumerate().filter(|(_, c)| !**c).map(|(at, _)| at).collect::<Vec<usize>>()
    }};
}

/// `write` called on memory of a `T` the host filled with 0xAA (it need not be zeroed); its
/// bytes after a successful call.
fn written_over_a_pattern<T>(write: impl FnOnce(*mut T) -> sp_status) -> Vec<u8> {
    let mut out = MaybeUninit::<T>::uninit();
    // SAFETY: the memory is the size of a `T`, written whole before it is read as bytes.
    unsafe {
        out.as_mut_ptr().cast::<u8>().write_bytes(0xAA, size_of::<T>());
        assert_eq!(write(out.as_mut_ptr()), SP_OK, "{}", std::any::type_name::<T>());
        std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), size_of::<T>()).to_vec()
    }
}

/// A host copying a struct the library wrote into its memory as bytes (Python's
/// `bytes(struct)`, PHP's `FFI::string`) finds zeros in its padding, never what was there before
/// (the host's pattern here) or the library's stack.
#[test]
fn structs_written_into_the_hosts_memory_have_zeros_for_padding() {
    let dir = TempDir::new("padding");
    let journal = open_journal(&dir.url(), 0).unwrap();
    let r = receiver(journal);
    deliver(r, &refund(963_001, 1, 12));
    let ev = handle(r, &refund(963_002, 2, 12)).unwrap();
    let cases: Vec<(&str, Vec<usize>, Vec<u8>)> = vec![
        (
            "sp_claim",
            padding!(sp_claim { outcome, attempt, reply }),
            // SAFETY: a live event, not begun yet.
            written_over_a_pattern(|out| unsafe { sp_event_begin(ev, out) }),
        ),
        (
            "sp_journal_stats",
            padding!(sp_journal_stats {
                handled,
                replayed,
                conflicts,
                refused,
                in_progress,
                missing,
                has_first_index,
                first_index,
                has_highest_index,
                highest_index,
                has_watermark,
                watermark,
                unfinished,
                open_conflicts,
                index_jumps,
                resolved,
                unrecoverable,
                numbering,
            }),
            // SAFETY: a live journal.
            written_over_a_pattern(|out| unsafe { sp_journal_status(journal, out) }),
        ),
        (
            "sp_journal_vital_signs",
            padding!(sp_journal_vital_signs {
                pruned,
                forgotten,
                has_size_bytes,
                size_bytes,
                has_oldest_record_ms,
                oldest_record_ms,
                has_last_delivery_ms,
                last_delivery_ms,
                has_oldest_gap_ms,
                oldest_gap_ms,
            }),
            // SAFETY: a live journal.
            written_over_a_pattern(|out| unsafe { sp_journal_vitals(journal, out) }),
        ),
        (
            "sp_prune_report",
            padding!(sp_prune_report {
                compacted,
                forgotten,
                refused_removed,
                conflicts_removed,
                batches,
                longest_batch_us,
                bytes_returned,
                complete,
                export_running,
            }),
            // SAFETY: a live journal and options.
            written_over_a_pattern(|out| unsafe { sp_journal_prune(journal, &prune_options(DAY_MS), out) }),
        ),
        (
            "sp_error",
            padding!(sp_error {
                status,
                message,
                field,
                http_status,
                response_body,
                event_name,
                has_index,
                index,
                has_transaction_id,
                transaction_id,
            }),
            {
                // A refused body: the error carries the event's name, index and transaction.
                let body = refund(963_003, 3, 12).replace("\"gameId\":12", "\"gameId\":\"twelve\"");
                assert_ne!(body, refund(963_003, 3, 12));
                assert!(handle(r, &body).is_err());
                // SAFETY: a writable out-parameter.
                written_over_a_pattern(|out| unsafe { sp_last_error(out) })
            },
        ),
    ];
    for (name, padding, bytes) in cases {
        assert!(!padding.is_empty(), "{name} has padding on this target");
        let at: Vec<(usize, u8)> = padding.iter().map(|&at| (at, bytes[at])).filter(|&(_, b)| b != 0).collect();
        assert!(at.is_empty(), "{name}: padding bytes not zero (offset, byte): {at:?}");
    }
    free(ev);
    free_journal(r, journal);
}
