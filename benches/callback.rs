//! Cost of one callback through the C ABI (authenticate + parse + validate + read + reply +
//! free), next to the least a hand-written integration does with the same body: serde_json
//! parsing it into a plain struct (for a 60 KiB body: `std::str::from_utf8` plus serde_json
//! skipping the same bytes). Two ways through the ABI: an `sp_event` (`sp_receiver_handle`,
//! `sp_event_reply`/`_reply_balance`, `sp_event_free`), and a record in the host's buffer
//! (`sp_receiver_handle_record`; the success reply of a refund or payout kept by the host, as
//! the bindings keep it; a balance reply written into the host's buffer by
//! `sp_receiver_reply_balance`).
//! Prints medians of alternating rounds, the fastest round beside them, the ratio, and, where
//! valgrind is on the PATH, instructions per call counted by callgrind (exact on a noisy
//! machine: judge a change by them).
//!
//! Run: `make bench` (or `cargo bench --bench callback`).

use std::hint::black_box;
use std::process::Command;
use std::ptr;
use std::time::Instant;

use serde::Deserialize;
use serde::de::IgnoredAny;
use slotpartner::ffi::event::{sp_event, sp_event_free, sp_event_reply, sp_event_reply_balance};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::record::{sp_receiver_handle_record, sp_record};
use slotpartner::ffi::reply::sp_receiver_reply_balance;
use slotpartner::ffi::status::sp_status;
use slotpartner::ffi::str::sp_str;

const TOKEN: &std::ffi::CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const REMOTE: &std::ffi::CStr = c"34.254.138.20";

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlainRefund {
    event: String,
    game_session_identifier: String,
    player_identifier: Option<String>,
    player_partner_identifier: Option<String>,
    transaction_id: i64,
    buy_transaction_id: i64,
    game_session_id: i64,
    partner_game_request_identifier: String,
    game_id: i64,
    is_mobile: bool,
    bonus_code: Option<String>,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlainPayout {
    event: String,
    jackpot_identifier: String,
    player_identifier: Option<String>,
    player_partner_identifier: Option<String>,
    #[serde(rename = "currencyISO4217")]
    currency_iso4217: String,
    money_won: i64,
    coins_won: i64,
    is_money: bool,
    epoch_released_millis: i64,
    is_primary: bool,
    transaction_id: i64,
    buy_transaction_id: i64,
    partner_game_request_identifier: String,
    game_session_id: i64,
    game_id: i64,
    bonus_code: Option<String>,
    is_mobile: Option<bool>,
}

#[allow(dead_code)]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlainBalance {
    action: String,
    player_identifier: Option<String>,
    player_partner_identifier: Option<String>,
}

fn receiver() -> *mut sp_receiver {
    let mut config = ptr::null_mut();
    let mut receiver = ptr::null_mut();
    // SAFETY: valid pointers and NUL-terminated strings throughout.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), sp_status::SP_OK);
        assert_eq!(sp_receiver_config_add_token(config, TOKEN.as_ptr()), sp_status::SP_OK);
        assert_eq!(sp_receiver_config_set_sources(config, c"staging".as_ptr()), sp_status::SP_OK);
        assert_eq!(sp_receiver_new(config, &mut receiver), sp_status::SP_OK);
        sp_receiver_config_free(config);
    }
    receiver
}

/// One callback as a host makes it: handle, reply, free. Returns the reply length.
fn through_abi(receiver: *const sp_receiver, body: &[u8]) -> usize {
    let mut event: *mut sp_event = ptr::null_mut();
    let mut reply = sp_str::NONE;
    // SAFETY: valid receiver, body and out-pointers; the event is freed once.
    unsafe {
        let status = sp_receiver_handle(
            receiver,
            TOKEN.as_ptr(),
            REMOTE.as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            &mut event,
        );
        assert_eq!(status, sp_status::SP_OK);
        let status = if (*event).balance_query.is_null() {
            sp_event_reply(event, true, ptr::null(), &mut reply)
        } else {
            sp_event_reply_balance(event, 100_000, ptr::null(), 0, &mut reply)
        };
        assert_eq!(status, sp_status::SP_OK);
        let len = reply.len;
        sp_event_free(event);
        len
    }
}

/// The refund's and payout's success reply, as a host keeps it.
const KEPT_SUCCESS: &[u8] = br#"{"refund":{"success":true,"errorMessage":""}}"#;

/// One callback through a record: handle into the host's buffer, reply (kept, or written into the
/// host's buffer for a balance). Returns the reply length.
fn through_record(receiver: *const sp_receiver, body: &[u8], buffer: &mut [u64]) -> usize {
    let mut size = 0usize;
    // SAFETY: valid receiver, body, buffers (the record's aligned, each writable for its
    // length) and out-pointers.
    unsafe {
        let record = buffer.as_mut_ptr().cast();
        let status = sp_receiver_handle_record(
            receiver,
            TOKEN.as_ptr(),
            REMOTE.as_ptr(),
            ptr::null(),
            body.as_ptr(),
            body.len(),
            record,
            buffer.len() * 8,
            &mut size,
        );
        assert_eq!(status, sp_status::SP_OK);
        if (*record.cast::<sp_record>()).kind != slotpartner::ffi::event::sp_event_kind::SP_EVENT_KIND_BALANCE_QUERY {
            return black_box(KEPT_SUCCESS).len();
        }
        let mut reply = [0u8; 256];
        let mut len = 0usize;
        let status = sp_receiver_reply_balance(
            receiver,
            100_000,
            ptr::null(),
            0,
            reply.as_mut_ptr().cast(),
            reply.len(),
            &mut len,
        );
        assert_eq!(status, sp_status::SP_OK);
        black_box(&reply);
        len
    }
}

/// One row: a body and the peer that reads it.
struct Case {
    name: &'static str,
    body: Vec<u8>,
    peer: fn(&[u8]) -> usize,
    peer_name: &'static str,
}

fn cases() -> Vec<Case> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let load = |name: &str| std::fs::read(root.join(name)).expect("fixture");
    let payout = load("payout.json");
    vec![
        Case {
            name: "gameSessionBuyRefund",
            body: load("refund.json"),
            peer: |b| serde_json::from_slice::<PlainRefund>(b).map(|r| r.game_id as usize).unwrap(),
            peer_name: "serde_json typed",
        },
        Case {
            name: "jackpotPayout",
            body: payout.clone(),
            peer: |b| serde_json::from_slice::<PlainPayout>(b).map(|p| p.game_id as usize).unwrap(),
            peer_name: "serde_json typed",
        },
        Case {
            name: "getPlayerBalance",
            body: load("balance.json"),
            peer: |b| serde_json::from_slice::<PlainBalance>(b).map(|q| q.action.len()).unwrap(),
            peer_name: "serde_json typed",
        },
        Case {
            name: "jackpotPayout 60 KiB",
            body: padded(&payout, 60 * 1024),
            peer: |b| {
                let text = std::str::from_utf8(b).unwrap();
                serde_json::from_str::<IgnoredAny>(text).map(|_| text.len()).unwrap()
            },
            peer_name: "utf8 + serde skip",
        },
    ]
}

/// `body` (an object) with a field the spec does not define added in front, an array of small
/// objects, so that the whole is about `size` bytes: a large body the library must check all of.
fn padded(body: &[u8], size: usize) -> Vec<u8> {
    let item = br#"{"spin":123456,"symbols":["cherry","bell","seven"],"win":false,"note":"\u00e9t\u00e9"},"#;
    let mut padding = b"{\"history\":[".to_vec();
    while padding.len() + item.len() + body.len() + 2 < size {
        padding.extend_from_slice(item);
    }
    padding.pop();
    padding.extend_from_slice(b"],");
    padding.extend_from_slice(&body[1..]);
    padding
}

/// ns per call of `f` over one round.
fn round(f: &mut impl FnMut() -> usize, calls: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// (median, fastest) of ns per call of each of `sides`, measured in alternating rounds so that
/// the drifting speed of a shared machine weighs on all alike.
fn measure<const N: usize>(calls: usize, mut sides: [&mut dyn FnMut() -> usize; N]) -> [(f64, f64); N] {
    const ROUNDS: usize = 41;
    let mut times = [(); N].map(|_| Vec::with_capacity(ROUNDS));
    for round_number in 0..=ROUNDS {
        for (side, times) in sides.iter_mut().zip(&mut times) {
            let ns = round(&mut || side(), calls);
            if round_number > 0 {
                times.push(ns); // the first round warms up
            }
        }
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        (t[ROUNDS / 2], t[0])
    })
}

/// Instructions per call of one side of one case, counted by callgrind as the difference of two
/// runs of this program (`--instructions-run`) that differ only in their number of calls, so
/// that start-up and set-up cancel out. `None` when valgrind cannot be run.
fn instructions(case: usize, side: &str) -> Option<f64> {
    let run = |calls: usize| -> Option<f64> {
        let out = Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(std::env::current_exe().ok()?)
            .args(["--instructions-run", &case.to_string(), side, &calls.to_string()])
            .output()
            .ok()?;
        let log = String::from_utf8_lossy(&out.stderr);
        let collected = log.lines().find_map(|l| l.split("Collected :").nth(1))?;
        collected.trim().parse().ok()
    };
    Some((run(1100)? - run(100)?) / 1000.0)
}

/// A record buffer that fits any record of `body` (see `sp_receiver_handle_record`).
fn record_buffer(body: &[u8]) -> Vec<u64> {
    vec![0; (std::mem::size_of::<sp_record>() + body.len() + 8).div_ceil(8)]
}

fn main() {
    let cases = cases();
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--instructions-run") {
        let (case, side, calls) = (&cases[args[at + 1].parse::<usize>().unwrap()], &args[at + 2], &args[at + 3]);
        let receiver = receiver();
        let mut buffer = record_buffer(&case.body);
        for _ in 0..calls.parse::<usize>().unwrap() {
            black_box(match side.as_str() {
                "ours" => through_abi(receiver, black_box(&case.body)),
                "record" => through_record(receiver, black_box(&case.body), &mut buffer),
                _ => (case.peer)(black_box(&case.body)),
            });
        }
        return;
    }
    let receiver = receiver();
    let counted = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    println!("One callback through the C ABI (handle + reply + free; \"record\": handle into the host's buffer");
    println!("+ reply) next to the peer reading the same body; medians of 41 alternating rounds, fastest");
    println!(
        "round in brackets; instructions per call by callgrind{}",
        if counted { "" } else { " (skipped: valgrind is not on the PATH)" }
    );
    println!(
        "{:<27} {:>6} {:>19} {:>19} {:>6} | {:>9} {:>9} {:>6} | peer",
        "callback", "bytes", "slotpartner ns", "peer ns", "ratio", "ours Ir", "peer Ir", "ratio"
    );
    for (number, case) in cases.iter().enumerate() {
        let calls = if case.body.len() > 10_000 { 200 } else { 5_000 };
        let mut buffer = record_buffer(&case.body);
        let [ours, record, theirs] = measure(
            calls,
            [
                &mut || through_abi(receiver, black_box(&case.body)),
                &mut || through_record(receiver, black_box(&case.body), &mut buffer),
                &mut || (case.peer)(black_box(&case.body)),
            ],
        );
        let peer_count = if counted { instructions(number, "peer") } else { None };
        for (label, side, time) in [("", "ours", ours), (" record", "record", record)] {
            let counts = peer_count.and_then(|peer| Some((instructions(number, side)?, peer)));
            let counts = counts.map_or_else(
                || format!("{:>9} {:>9} {:>6}", "-", "-", "-"),
                |(a, b)| format!("{a:>9.0} {b:>9.0} {:>5.2}x", a / b),
            );
            println!(
                "{:<27} {:>6} {:>8.0} ({:>8.0}) {:>8.0} ({:>8.0}) {:>5.2}x | {counts} | {}",
                format!("{}{label}", case.name),
                case.body.len(),
                time.0,
                time.1,
                theirs.0,
                theirs.1,
                time.0 / theirs.0,
                case.peer_name
            );
        }
    }
    // SAFETY: made by sp_receiver_new, freed once.
    unsafe { sp_receiver_free(receiver) };
}
