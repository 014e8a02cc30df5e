//! The endpoint in one call through the C ABI (`sp_endpoint_receive`, `sp_exchange_complete`),
//! every answer a request can get decided by the library: refusals before the journal, a
//! balance query answered with the journal down, a repeat from the journal, a conflict, the
//! logic's failure and a missing reply released and answered 503 with `Retry-After`, a staged
//! credit committed with the reply, an exchange freed uncompleted, a journal that accepts and
//! never answers; and the careless host (the exchange's own views handed back in, completing
//! twice, NULLs).

use std::ffi::{CStr, CString};
use std::net::TcpListener;
use std::path::PathBuf;
use std::ptr;
use std::time::{Duration, Instant};

use slotpartner::ffi::endpoint::*;
use slotpartner::ffi::event::{
    sp_event_abandon, sp_event_finish, sp_event_free, sp_event_kind, sp_event_reply, sp_event_reply_balance,
};
use slotpartner::ffi::journal::*;
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::staged::{sp_event_stage, sp_sql_value};
use slotpartner::ffi::status::sp_status::*;
use slotpartner::ffi::str::sp_str;

const TOKEN: &CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";

fn text(s: sp_str) -> String {
    if s.ptr.is_null() {
        return String::new();
    }
    // SAFETY: a view the library handed out, valid while its exchange lives.
    String::from_utf8(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) }.to_vec()).unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("slotpartner-endpoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn db(&self) -> PathBuf {
        self.0.join("journal.db")
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An endpoint allowing 127.0.0.1 with the test token, and a journal at `url` when given.
fn endpoint(url: Option<&str>, configure: impl FnOnce(*mut sp_receiver_config)) -> *mut sp_endpoint {
    let (mut receiver, mut journal, mut endpoint) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout; the configurations are freed once the endpoint is made.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut receiver), SP_OK);
        assert_eq!(sp_receiver_config_add_token(receiver, TOKEN.as_ptr()), SP_OK);
        assert_eq!(sp_receiver_config_set_sources(receiver, c"127.0.0.1".as_ptr()), SP_OK);
        configure(receiver);
        if let Some(url) = url {
            let url = CString::new(url).unwrap();
            assert_eq!(sp_journal_config_new(url.as_ptr(), &mut journal), SP_OK);
            assert_eq!(sp_journal_config_set_busy_wait_ms(journal, 50), SP_OK);
        }
        assert_eq!(sp_endpoint_new(receiver, journal, &mut endpoint), SP_OK);
        sp_receiver_config_free(receiver);
        sp_journal_config_free(journal);
    }
    endpoint
}

/// The final response of an exchange, read out.
#[derive(Debug)]
struct Sent {
    status: u16,
    body: String,
    headers: Vec<(String, String)>,
    log: String,
}

impl Sent {
    fn of(exchange: *mut sp_exchange) -> Sent {
        // SAFETY: a live exchange; its views are valid while it lives.
        let response = unsafe { (*exchange).response };
        let headers = (0..response.headers_len)
            // SAFETY: `headers_len` entries at `headers`.
            .map(|i| unsafe { *response.headers.add(i) })
            .map(|h| (text(h.name), text(h.value)))
            .collect();
        Sent { status: response.status, body: text(response.body), headers, log: text(response.log) }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Receives a POST from 127.0.0.1 with the token.
fn receive(endpoint: *const sp_endpoint, body: &[u8]) -> *mut sp_exchange {
    receive_as(endpoint, c"POST", Some(TOKEN), c"127.0.0.1", body)
}

fn receive_as(
    endpoint: *const sp_endpoint,
    method: &CStr,
    token: Option<&CStr>,
    addr: &CStr,
    body: &[u8],
) -> *mut sp_exchange {
    let mut exchange = ptr::null_mut();
    let token = token.map_or(ptr::null(), CStr::as_ptr);
    // SAFETY: valid pointers.
    let got = unsafe {
        sp_endpoint_receive(
            endpoint,
            method.as_ptr(),
            token,
            addr.as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            &mut exchange,
        )
    };
    assert_eq!(got, SP_OK);
    exchange
}

/// The whole request: receive, then `logic` on the event when there is one, then complete.
fn serve(endpoint: *const sp_endpoint, body: &[u8], logic: impl FnOnce(*mut sp_exchange) -> Option<CString>) -> Sent {
    let exchange = receive(endpoint, body);
    // SAFETY: a live exchange.
    unsafe {
        if !(*exchange).event.is_null() {
            let failure = logic(exchange);
            let failure = failure.as_ref().map_or(ptr::null(), |f| f.as_ptr());
            assert_eq!(sp_exchange_complete(exchange, failure, ptr::null(), 0), SP_OK);
        }
        let sent = Sent::of(exchange);
        sp_exchange_free(exchange);
        sent
    }
}

/// The logic that accepts: the event's success reply.
fn accept(exchange: *mut sp_exchange) -> Option<CString> {
    let mut reply = sp_str { ptr: ptr::null(), len: 0 };
    // SAFETY: the live event of a live exchange.
    assert_eq!(unsafe { sp_event_reply((*exchange).event, true, ptr::null(), &mut reply) }, SP_OK);
    None
}

fn with_payout(money: i64) -> Vec<u8> {
    let mut body: serde_json::Value = serde_json::from_slice(&fixture("payout.json")).unwrap();
    body["moneyWon"] = money.into();
    serde_json::to_vec(&body).unwrap()
}

#[test]
fn refusals_are_answered_before_the_journal_is_opened() {
    // A journal nobody can reach: no refusal below waits for it or mentions it.
    let endpoint = endpoint(Some("postgres://partner@127.0.0.1:1/journal?connect_timeout=1"), |_| {});
    let refund = fixture("refund.json");
    let get = Sent::of(receive_as(endpoint, c"GET", Some(TOKEN), c"127.0.0.1", b""));
    assert_eq!((get.status, get.header("Allow")), (405, Some("POST")), "{get:?}");
    assert_eq!(get.header("Content-Type"), Some("application/json; charset=utf-8"));
    let no_token = Sent::of(receive_as(endpoint, c"POST", None, c"127.0.0.1", &refund));
    assert_eq!(no_token.status, 401, "{no_token:?}");
    assert!(no_token.log.starts_with("refused:"), "{no_token:?}");
    let wrong =
        Sent::of(receive_as(endpoint, c"POST", Some(c"00000000-0000-0000-0000-000000000000"), c"127.0.0.1", &refund));
    assert_eq!(wrong.status, 401);
    let stranger = Sent::of(receive_as(endpoint, c"POST", Some(TOKEN), c"10.1.2.3", &refund));
    assert_eq!(stranger.status, 403, "{stranger:?}");
    for (body, status) in [(&b"not json"[..], 400), (&vec![b' '; 70_000][..], 413)] {
        let sent = Sent::of(receive(endpoint, body));
        assert_eq!(sent.status, status, "{sent:?}");
        assert!(!sent.body.contains("127.0.0.1") && !sent.body.contains("postgres"), "{sent:?}");
        assert_eq!(sent.header("Retry-After"), None);
    }
    let invalid = Sent::of(receive(endpoint, &fixture("invalid_negative_amount.json")));
    assert_eq!(invalid.status, 200, "a known event with an invalid field: its failure reply");
    assert!(invalid.body.contains(r#""success":false"#), "{invalid:?}");
    // SAFETY: the endpoint is live and used by nothing else now.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn a_balance_query_is_answered_with_the_journal_down_and_a_refund_gets_503_with_retry_after() {
    let endpoint = endpoint(Some("postgres://partner@127.0.0.1:1/journal?connect_timeout=1"), |_| {});
    let balance = serve(endpoint, &fixture("balance.json"), |exchange| {
        // SAFETY: the live event of a live exchange.
        unsafe {
            let event = (*exchange).event;
            assert_eq!((*event).kind, sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY);
            let mut reply = sp_str { ptr: ptr::null(), len: 0 };
            assert_eq!(sp_event_reply_balance(event, 12_345, ptr::null(), 0, &mut reply), SP_OK);
        }
        None
    });
    assert_eq!(balance.status, 200, "{balance:?}");
    assert!(balance.body.contains(r#""money":12345"#), "{balance:?}");
    assert!(balance.log.contains("not recorded"), "the index could not be recorded: {balance:?}");
    let refund = serve(endpoint, &fixture("refund.json"), |_| panic!("the logic must not run"));
    assert_eq!((refund.status, refund.header("Retry-After")), (503, Some("5")), "{refund:?}");
    assert!(!refund.body.contains("127.0.0.1") && !refund.body.contains("postgres"), "{refund:?}");
    assert!(refund.log.contains("127.0.0.1"), "the log names the journal: {refund:?}");
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn a_journal_that_accepts_and_never_answers_is_answered_503_within_its_connect_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("postgres://partner@127.0.0.1:{port}/journal?connect_timeout=1&sslmode=disable");
    let endpoint = endpoint(Some(&url), |_| {});
    let started = Instant::now();
    let refund = serve(endpoint, &fixture("refund.json"), |_| panic!("the logic must not run"));
    assert_eq!(refund.status, 503, "{refund:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "waited {:?}", started.elapsed());
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
    drop(silent);
}

#[test]
fn a_repeat_gets_the_stored_reply_a_conflict_409_and_the_logic_runs_once() {
    let dir = TempDir::new("repeat");
    let endpoint = endpoint(Some(&format!("sqlite:{}", dir.db().display())), |_| {});
    let mut runs = 0;
    let first = serve(endpoint, &with_payout(500), |exchange| {
        runs += 1;
        accept(exchange)
    });
    assert_eq!(first.status, 200, "{first:?}");
    let again = serve(endpoint, &with_payout(500), |_| panic!("a repeat runs nothing"));
    assert_eq!((again.status, &again.body), (200, &first.body));
    assert!(again.log.contains("repeated delivery"), "{again:?}");
    let other = serve(endpoint, &with_payout(900), |_| panic!("a conflict runs nothing"));
    assert_eq!(other.status, 409, "{other:?}");
    assert!(other.body.contains("moneyWon"), "the conflict names the field: {other:?}");
    assert_eq!(runs, 1);
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn a_failure_after_the_claim_is_answered_503_and_the_next_delivery_runs_again() {
    let dir = TempDir::new("failure");
    let endpoint = endpoint(Some(&format!("sqlite:{}", dir.db().display())), |_| {});
    let refund = fixture("refund.json");
    let failed = serve(endpoint, &refund, |_| Some(CString::new("the ledger is down").unwrap()));
    assert_eq!((failed.status, failed.header("Retry-After")), (503, Some("5")), "{failed:?}");
    assert!(failed.log.contains("the ledger is down") && failed.log.contains("released"), "{failed:?}");
    assert!(!failed.body.contains("ledger"), "the caller learns nothing of the partner: {failed:?}");
    let no_reply = serve(endpoint, &refund, |_| None);
    assert_eq!(no_reply.status, 503, "no reply built: {no_reply:?}");
    assert!(no_reply.log.contains("no reply"), "{no_reply:?}");
    // Freed without completing: the claim is released, not held until its lease ends.
    let exchange = receive(endpoint, &refund);
    // SAFETY: live pointers.
    unsafe {
        assert!(!(*exchange).event.is_null());
        sp_exchange_free(exchange);
    }
    let done = serve(endpoint, &refund, accept);
    assert_eq!(done.status, 200, "{done:?}");
    assert!(done.log.contains("attempt 4"), "the fourth attempt: {done:?}");
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

/// Stages `INSERT INTO credits ... ON CONFLICT DO NOTHING` with the payout's transaction and amount.
fn stage_credit(exchange: *mut sp_exchange, sql: &str) {
    // SAFETY: the live event of a live exchange; the payout struct is there for a payout.
    unsafe {
        let event = (*exchange).event;
        let payout = &*(*event).jackpot_payout;
        let params = [payout.transaction_id, payout.money_won].map(|v| sp_sql_value {
            kind: 1,
            int_value: v,
            bytes: ptr::null(),
            len: 0,
        });
        assert_eq!(sp_event_stage(event, sql.as_ptr().cast(), sql.len(), params.as_ptr(), params.len()), SP_OK);
    }
}

#[test]
fn a_staged_credit_commits_with_the_reply_and_a_failing_one_answers_503() {
    let dir = TempDir::new("staged");
    let url = format!("sqlite:{}", dir.db().display());
    let endpoint = endpoint(Some(&url), |_| {});
    // The journal's file is made by the first request that needs it; the ledger lives beside.
    // An event passed through has no reply builder: the host gives its reply.
    let warm = receive(endpoint, &fixture("other_event.json"));
    // SAFETY: a live exchange waiting for its completion.
    unsafe {
        assert_eq!((*(*warm).event).kind, sp_event_kind::SP_EVENT_KIND_OTHER);
        assert_eq!(sp_exchange_complete(warm, ptr::null(), b"{}".as_ptr(), 2), SP_OK);
        assert_eq!((Sent::of(warm).status, Sent::of(warm).body.as_str()), (200, "{}"));
        sp_exchange_free(warm);
    }
    let insert = "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2) ON CONFLICT (transaction_id) DO NOTHING";
    let missing_table = serve(endpoint, &with_payout(700), |exchange| {
        stage_credit(exchange, insert);
        accept(exchange)
    });
    assert_eq!(missing_table.status, 503, "{missing_table:?}");
    let ledger = rusqlite::Connection::open(dir.db()).unwrap();
    ledger.execute_batch("CREATE TABLE credits (transaction_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)").unwrap();
    let paid = serve(endpoint, &with_payout(700), |exchange| {
        stage_credit(exchange, insert);
        accept(exchange)
    });
    assert_eq!(paid.status, 200, "{paid:?}");
    let credited: (i64, i64) =
        ledger.query_row("SELECT count(*), sum(amount) FROM credits", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(credited, (1, 700));
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn the_exchanges_claim_is_settled_by_the_exchange_alone_not_by_sp_event_finish_or_abandon() {
    let dir = TempDir::new("abandoned");
    let endpoint = endpoint(Some(&format!("sqlite:{}", dir.db().display())), |_| {});
    let warm = serve(endpoint, &fixture("refund.json"), accept);
    assert_eq!(warm.status, 200, "{warm:?}");
    let ledger = rusqlite::Connection::open(dir.db()).unwrap();
    ledger.execute_batch("CREATE TABLE credits (transaction_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)").unwrap();
    let insert = "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2) ON CONFLICT (transaction_id) DO NOTHING";
    // A careless host releases or finishes the exchange's claim itself: refused, the claim and
    // its staged credit stay, and the exchange stores both with the reply (a release that took
    // the staged credit with it while the answer said 200 would lose the payout).
    let paid = serve(endpoint, &with_payout(600), |exchange| {
        stage_credit(exchange, insert);
        accept(exchange);
        // SAFETY: the live event of a live exchange.
        unsafe {
            assert_eq!(sp_event_abandon((*exchange).event), SP_ERR_INVALID_ARGUMENT);
            assert_eq!(sp_event_finish((*exchange).event, ptr::null(), 0), SP_ERR_INVALID_ARGUMENT);
        }
        None
    });
    assert_eq!(paid.status, 200, "{paid:?}");
    let credits: i64 = ledger.query_row("SELECT count(*) FROM credits", [], |r| r.get(0)).unwrap();
    assert_eq!(credits, 1, "the staged credit committed with the reply");
    let again = serve(endpoint, &with_payout(600), |_| panic!("a repeat runs nothing"));
    assert_eq!((again.status, again.body), (200, paid.body));
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn the_exchanges_event_freed_by_the_host_stays_the_exchanges_and_is_freed_once() {
    let dir = TempDir::new("freed-event");
    let endpoint = endpoint(Some(&format!("sqlite:{}", dir.db().display())), |_| {});
    // The host frees the event the exchange owns (PHP's binding once did): the exchange still
    // completes it, stores its reply and frees it once.
    let paid = serve(endpoint, &with_payout(650), |exchange| {
        accept(exchange);
        // SAFETY: the live event of a live exchange, freed where it must not be.
        unsafe { sp_event_free((*exchange).event) };
        None
    });
    assert_eq!(paid.status, 200, "{paid:?}");
    let again = serve(endpoint, &with_payout(650), |_| panic!("a repeat runs nothing"));
    assert_eq!((again.status, again.body), (200, paid.body));
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

/// An exchange answered at once (a 405).
fn answered_again(endpoint: *const sp_endpoint) -> *mut sp_exchange {
    receive_as(endpoint, c"GET", Some(TOKEN), c"127.0.0.1", b"")
}

#[test]
fn a_careless_host_cannot_change_a_response_or_crash_the_exchange() {
    let dir = TempDir::new("careless");
    let endpoint = endpoint(Some(&format!("sqlite:{}", dir.db().display())), |_| {});
    let refund = fixture("refund.json");
    // SAFETY: every pointer is valid or deliberately NULL, as the cases say.
    unsafe {
        let mut exchange = ptr::null_mut();
        let method_null = sp_endpoint_receive(
            endpoint,
            ptr::null(),
            TOKEN.as_ptr(),
            c"127.0.0.1".as_ptr(),
            ptr::null(),
            refund.as_ptr(),
            refund.len(),
            &mut exchange,
        );
        assert_eq!((method_null, exchange), (SP_ERR_INVALID_ARGUMENT, ptr::null_mut()));
        let body_null = sp_endpoint_receive(
            endpoint,
            c"POST".as_ptr(),
            TOKEN.as_ptr(),
            c"127.0.0.1".as_ptr(),
            ptr::null(),
            ptr::null(),
            usize::MAX,
            &mut exchange,
        );
        assert_eq!(body_null, SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_exchange_complete(ptr::null_mut(), ptr::null(), ptr::null(), 0), SP_ERR_INVALID_ARGUMENT);

        let answered = receive_as(endpoint, c"PUT", Some(TOKEN), c"127.0.0.1", b"");
        let log = (*answered).response.log;
        assert_eq!(sp_exchange_complete(answered, log.ptr, ptr::null(), 0), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(Sent::of(answered).status, 405);
        sp_exchange_free(answered);

        let exchange = receive(endpoint, &refund);
        // Nothing to write before the exchange is complete; a closed descriptor is refused.
        assert_eq!(sp_exchange_write_cgi(exchange, 1), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_exchange_write_cgi(ptr::null(), 1), SP_ERR_INVALID_ARGUMENT);
        let answered = answered_again(endpoint);
        assert_eq!(sp_exchange_write_cgi(answered, -1), SP_ERR_INVALID_ARGUMENT);
        sp_exchange_free(answered);
        accept(exchange);
        // The host scribbles over the view: the library keeps its own copies.
        let event = (*exchange).event;
        (*exchange).event = ptr::null_mut();
        (*exchange).response.status = 999;
        (*event).reply_http_status = 418;
        assert_eq!(sp_exchange_complete(exchange, ptr::null(), ptr::null(), 0), SP_OK);
        let sent = Sent::of(exchange);
        assert_eq!(sent.status, 200, "{sent:?}");
        // Completing again, with the response's own body as the failure: refused, unchanged.
        let body = (*exchange).response.body;
        assert_eq!(sp_exchange_complete(exchange, body.ptr, body.ptr.cast(), body.len), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(Sent::of(exchange).body, sent.body);
        sp_exchange_free(exchange);
        sp_exchange_free(ptr::null_mut());
        sp_endpoint_free(ptr::null_mut());
        // Retry-After is set before the first request, not while an exchange lives.
        let alive = receive(endpoint, &refund);
        assert_eq!(sp_endpoint_set_retry_after(endpoint, 30), SP_ERR_INVALID_ARGUMENT);
        sp_exchange_free(alive);
        assert_eq!(sp_endpoint_set_retry_after(endpoint, 0), SP_ERR_INVALID_ARGUMENT);
        assert_eq!(sp_endpoint_set_retry_after(endpoint, 30), SP_OK);
        sp_endpoint_free(endpoint);
    }
}

/// The response's headers are an array the host may write into (Python's ctypes knows no
/// `const`): the CGI response is written from the exchange's own copies, never from views the
/// host may have replaced (which could point anywhere).
#[test]
fn a_careless_host_cannot_change_the_headers_written_for_cgi() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let endpoint = endpoint(None, |_| {});
    let exchange = answered_again(endpoint);
    let written = |exchange: *const sp_exchange| {
        let (mut reader, writer) = std::io::pipe().unwrap();
        // SAFETY: a live exchange and an open descriptor.
        assert_eq!(unsafe { sp_exchange_write_cgi(exchange, writer.as_raw_fd()) }, SP_OK);
        drop(writer);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        text
    };
    let before = written(exchange);
    assert!(before.contains("\r\nAllow: POST\r\n"), "{before}");
    // SAFETY: a live exchange; the host writes into every header the array holds.
    unsafe {
        let response = (*exchange).response;
        for i in 0..response.headers_len {
            let header = response.headers.cast_mut().add(i);
            (*header).name = sp_str::from_static(c"X-Scribbled");
            (*header).value = sp_str::from_static(c"by the host");
        }
    }
    assert_eq!(written(exchange), before);
    // SAFETY: live, freed once.
    unsafe {
        sp_exchange_free(exchange);
        sp_endpoint_free(endpoint);
    }
}

/// A host may copy the exchange as bytes (Python's `bytes(struct)`, PHP's `FFI::string`): every
/// byte of it, padding included, is defined, before and after `sp_exchange_complete` (under
/// miri, undefined bytes read here are undefined behaviour).
#[test]
fn the_bytes_of_an_exchange_handed_out_are_all_defined() {
    let endpoint = endpoint(None, |_| {});
    let bytes_of = |exchange: *const sp_exchange| {
        // SAFETY: a live exchange, readable as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(exchange.cast::<u8>(), size_of::<sp_exchange>()) };
        // Every byte read as a number, as the host's copy would be.
        bytes.iter().map(|&b| u64::from(b)).sum::<u64>()
    };
    let answered = answered_again(endpoint);
    assert!(bytes_of(answered) > 0);
    // Included, not read: the test runs under miri's isolation too (`make test-miri`).
    let exchange = receive(endpoint, include_bytes!("fixtures/refund.json"));
    assert!(bytes_of(exchange) > 0);
    accept(exchange);
    // SAFETY: live exchanges, completed once, freed once.
    unsafe {
        assert_eq!(sp_exchange_complete(exchange, ptr::null(), ptr::null(), 0), SP_OK);
        assert!(bytes_of(exchange) > 0);
        sp_exchange_free(exchange);
        sp_exchange_free(answered);
        sp_endpoint_free(endpoint);
    }
}

#[test]
fn without_a_journal_every_valid_event_runs_the_logic_and_a_refused_balance_is_500() {
    let endpoint = endpoint(None, |_| {});
    let refund = serve(endpoint, &fixture("refund.json"), accept);
    assert_eq!(refund.status, 200, "{refund:?}");
    let again = serve(endpoint, &fixture("refund.json"), accept);
    assert_eq!(again.status, 200, "no journal: the logic runs again");
    let refused = serve(endpoint, &fixture("balance.json"), |exchange| {
        let mut reply = sp_str { ptr: ptr::null(), len: 0 };
        // SAFETY: live event.
        let got = unsafe { sp_event_reply((*exchange).event, false, c"no such player".as_ptr(), &mut reply) };
        assert_eq!(got, SP_OK);
        None
    });
    assert_eq!(refused.status, 500, "{refused:?}");
    assert!(!refused.body.contains("money"), "{refused:?}");
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}

#[test]
fn an_endpoint_from_settings_and_the_shared_one_serve_alike_and_a_typo_is_refused_by_name() {
    let dir = TempDir::new("settings");
    let settings = format!(
        r#"{{"token":"{}","sources":"127.0.0.1","journal":"sqlite:{}","claim_at_finish":true,"retry_after":7}}"#,
        TOKEN.to_str().unwrap(),
        dir.db().display()
    );
    let (mut own, mut first, mut second) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers throughout.
    unsafe {
        assert_eq!(sp_endpoint_from_settings(settings.as_ptr().cast(), settings.len(), &mut own), SP_OK);
        assert_eq!(sp_endpoint_shared(settings.as_ptr().cast(), settings.len(), &mut first), SP_OK);
        assert_eq!(sp_endpoint_shared(settings.as_ptr().cast(), settings.len(), &mut second), SP_OK);
        // The shared endpoint is kept by the process: its Retry-After is the settings' own.
        assert_eq!(sp_endpoint_set_retry_after(own, 9), SP_OK);
        assert_eq!(sp_endpoint_set_retry_after(first, 9), SP_ERR_INVALID_ARGUMENT);
        let paid = serve(first, &with_payout(300), accept);
        assert_eq!(paid.status, 200, "{paid:?}");
        sp_endpoint_free(first);
        let again = serve(second, &with_payout(300), |_| panic!("a repeat runs nothing"));
        assert_eq!((again.status, again.body), (200, paid.body));
        let failed = serve(second, &with_payout(301), |_| panic!("a conflict runs nothing"));
        assert_eq!(failed.status, 409);
        let down = serve(own, &fixture("refund.json"), |_| Some(CString::new("ledger down").unwrap()));
        assert_eq!(down.header("Retry-After"), Some("9"), "{down:?}");
        let down = serve(second, &fixture("refund.json"), |_| Some(CString::new("ledger down").unwrap()));
        assert_eq!(down.header("Retry-After"), Some("7"), "{down:?}");
        sp_endpoint_free(second);
        sp_endpoint_free(own);

        let typo = r#"{"tokn":"x"}"#;
        let mut none = ptr::null_mut();
        assert_eq!(sp_endpoint_shared(typo.as_ptr().cast(), typo.len(), &mut none), SP_ERR_INVALID_ARGUMENT);
        assert!(none.is_null());
        let message = slotpartner::ffi::error::sp_last_error_message();
        assert!(text(message).contains("tokn"), "{}", text(message));
    }
}

#[test]
fn a_keyed_endpoint_is_found_by_its_key_alone_and_a_key_names_one_settings_text() {
    let token = TOKEN.to_str().unwrap();
    let limited = format!(r#"{{"token":"{token}","sources":"127.0.0.1","max_body_bytes":64,"retry_after":11}}"#);
    let open = format!(r#"{{"token":"{token}","sources":"127.0.0.1","retry_after":11}}"#);
    let (key, other_key) = (b"tests/endpoint.rs limited\0", b"tests/endpoint.rs open\0");
    let keyed = |key: &[u8], settings: Option<&str>| {
        let mut out = ptr::NonNull::<sp_endpoint>::dangling().as_ptr();
        let (settings, len) = settings.map_or((ptr::null(), 0), |s| (s.as_ptr(), s.len()));
        // SAFETY: valid pointers and lengths.
        let got = unsafe { sp_endpoint_shared_keyed(key.as_ptr().cast(), key.len(), settings.cast(), len, &mut out) };
        (got, out)
    };
    let (got, none) = keyed(key, None);
    assert_eq!((got, none), (SP_OK, ptr::null_mut()), "a key not kept finds nothing, written NULL");
    let (got, made) = keyed(key, Some(&limited));
    assert_eq!(got, SP_OK);
    let (got, found) = keyed(key, None);
    assert_eq!(got, SP_OK);
    assert!(!found.is_null() && found != made, "a handle of its own");
    // The same settings by another way, and by the key and the settings again: one endpoint,
    // whose every handle serves as it does.
    let (mut shared, again) = (ptr::null_mut(), keyed(key, Some(&limited)));
    // SAFETY: valid pointers.
    assert_eq!(unsafe { sp_endpoint_shared(limited.as_ptr().cast(), limited.len(), &mut shared) }, SP_OK);
    assert_eq!(again.0, SP_OK);
    for endpoint in [made, found, shared, again.1] {
        assert_eq!(serve(endpoint, &fixture("refund.json"), accept).status, 413, "the settings' body limit");
        // SAFETY: a shared endpoint: its Retry-After is its settings'.
        assert_eq!(unsafe { sp_endpoint_set_retry_after(endpoint, 9) }, SP_ERR_INVALID_ARGUMENT);
    }
    // The key names those settings for ever: other settings under it are refused, naming it.
    let (got, refused) = keyed(key, Some(&open));
    assert_eq!(got, SP_ERR_INVALID_ARGUMENT);
    assert_eq!(refused, ptr::NonNull::dangling().as_ptr(), "out is written only on success");
    assert_eq!(text(slotpartner::ffi::error::sp_last_error_field()), "key");
    // Another key, other settings: another endpoint, found by its key.
    let (got, opened) = keyed(other_key, Some(&open));
    assert_eq!(got, SP_OK);
    let (_, found_open) = keyed(other_key, None);
    let down = serve(found_open, &fixture("refund.json"), |_| Some(CString::new("ledger down").unwrap()));
    assert_eq!((down.status, down.header("Retry-After")), (503, Some("11")), "{down:?}");
    assert_eq!(serve(found_open, &fixture("refund.json"), accept).status, 200);
    // Settings refused are kept under no key.
    let typo = format!(r#"{{"tokn":"{token}"}}"#);
    let (got, _) = keyed(b"tests/endpoint.rs typo", Some(&typo));
    assert_eq!(got, SP_ERR_INVALID_ARGUMENT);
    assert_eq!(keyed(b"tests/endpoint.rs typo", None), (SP_OK, ptr::null_mut()));
    for endpoint in [made, found, shared, again.1, opened, found_open] {
        // SAFETY: each handle is freed once.
        unsafe { sp_endpoint_free(endpoint) };
    }
    let (got, after) = keyed(key, None);
    assert!(got == SP_OK && !after.is_null(), "the endpoint outlives its handles: still found");
    // SAFETY: freed once.
    unsafe { sp_endpoint_free(after) };
}

#[test]
fn a_setting_of_the_wrong_type_or_out_of_range_is_refused_naming_its_key() {
    let token = TOKEN.to_str().unwrap();
    for (key, value) in
        [("max_body_bytes", r#""64k""#), ("max_body_bytes", "-1"), ("lease_ms", "1e30"), ("retry_after", "99999999999")]
    {
        let settings = format!(r#"{{"token":"{token}","journal":"sqlite:/nonexistent/j.db","{key}":{value}}}"#);
        let mut endpoint = ptr::null_mut();
        // SAFETY: valid pointers.
        let got = unsafe { sp_endpoint_from_settings(settings.as_ptr().cast(), settings.len(), &mut endpoint) };
        assert_eq!((got, endpoint), (SP_ERR_INVALID_ARGUMENT, ptr::null_mut()), "{settings}");
        let message = text(slotpartner::ffi::error::sp_last_error_message());
        assert!(message.contains(key), "{key}: {value} is refused without naming {key}: {message}");
    }
}

#[test]
fn optimistic_runs_the_logic_before_any_read_and_answers_a_repeat_found_at_finish_from_the_journal() {
    let dir = TempDir::new("optimistic");
    let ledger_setup = rusqlite::Connection::open(dir.db()).unwrap();
    drop(ledger_setup);
    let settings = |extra: &str| {
        format!(
            r#"{{"token":"{}","sources":"127.0.0.1","journal":"sqlite:{}"{extra}}}"#,
            TOKEN.to_str().unwrap(),
            dir.db().display()
        )
    };
    let mut endpoint = ptr::null_mut();
    let refused = settings(r#","optimistic":true"#);
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(
            sp_endpoint_from_settings(refused.as_ptr().cast(), refused.len(), &mut endpoint),
            SP_ERR_INVALID_ARGUMENT
        );
        let error = slotpartner::ffi::error::sp_last_error_field();
        assert_eq!(text(error), "optimistic");
        let good = settings(r#","claim_at_finish":true,"optimistic":true"#);
        assert_eq!(sp_endpoint_from_settings(good.as_ptr().cast(), good.len(), &mut endpoint), SP_OK);
    }
    // The journal's file exists once a request needed it; the ledger lives beside its tables.
    let warm = serve(endpoint, &fixture("refund.json"), accept);
    assert_eq!(warm.status, 200, "{warm:?}");
    let ledger = rusqlite::Connection::open(dir.db()).unwrap();
    ledger.execute_batch("CREATE TABLE credits (transaction_id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)").unwrap();
    let insert = "INSERT INTO credits (transaction_id, amount) VALUES (?1, ?2) ON CONFLICT (transaction_id) DO NOTHING";
    let mut runs = 0;
    let mut pay = |money: i64| {
        serve(endpoint, &with_payout(money), |exchange| {
            runs += 1;
            stage_credit(exchange, insert);
            accept(exchange)
        })
    };
    let first = pay(800);
    assert_eq!(first.status, 200, "{first:?}");
    let repeat = pay(800);
    assert_eq!((repeat.status, &repeat.body), (200, &first.body), "{repeat:?}");
    let conflict = pay(900);
    assert_eq!(conflict.status, 409, "{conflict:?}");
    assert_eq!(runs, 3, "optimistic: the logic ran before the journal was read, every time");
    let credited: (i64, i64) =
        ledger.query_row("SELECT count(*), sum(amount) FROM credits", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(credited, (1, 800), "only the first run's staged credit took effect");
    // SAFETY: live, unused elsewhere.
    unsafe { sp_endpoint_free(endpoint) };
}
