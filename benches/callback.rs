//! Cost of one callback through the C ABI (authenticate + parse + validate + read + reply +
//! free), next to serde_json alone parsing the same body into a plain struct, the least a
//! hand-written integration would do. Prints ns per callback and the ratio.
//!
//! Run: `make bench` (or `cargo bench --bench callback`).

use std::hint::black_box;
use std::ptr;
use std::time::Instant;

use serde::Deserialize;
use slotpartner::ffi::event::{sp_event, sp_event_free, sp_event_reply, sp_event_reply_balance};
use slotpartner::ffi::receiver::*;
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

/// ns per call of `f` over one round.
fn round(f: &mut impl FnMut() -> usize) -> f64 {
    const CALLS: usize = 5_000;
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

/// Medians of ns per call of `ours` and `theirs`, measured in alternating rounds so that the
/// drifting speed of a shared machine weighs on both alike.
fn measure(mut ours: impl FnMut() -> usize, mut theirs: impl FnMut() -> usize) -> (f64, f64) {
    const ROUNDS: usize = 41;
    round(&mut ours);
    round(&mut theirs);
    let (mut a, mut b): (Vec<f64>, Vec<f64>) = (0..ROUNDS).map(|_| (round(&mut ours), round(&mut theirs))).unzip();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    (a[ROUNDS / 2], b[ROUNDS / 2])
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let load = |name: &str| std::fs::read(root.join(name)).expect("fixture");
    let (refund, payout, balance) = (load("refund.json"), load("payout.json"), load("balance.json"));
    let receiver = receiver();

    println!("{:<22} {:>8} {:>14} {:>16} {:>7}", "callback", "bytes", "slotpartner", "serde_json", "ratio");
    let row = |name: &str, body: &[u8], peer: &dyn Fn(&[u8]) -> usize| {
        let (ours, theirs) = measure(|| through_abi(receiver, black_box(body)), || peer(black_box(body)));
        println!("{name:<22} {:>8} {ours:>11.0} ns {theirs:>13.0} ns {:>6.2}x", body.len(), ours / theirs);
    };
    row("gameSessionBuyRefund", &refund, &|b| {
        serde_json::from_slice::<PlainRefund>(b).map(|r| r.game_id as usize).unwrap()
    });
    row("jackpotPayout", &payout, &|b| serde_json::from_slice::<PlainPayout>(b).map(|p| p.game_id as usize).unwrap());
    row("getPlayerBalance", &balance, &|b| serde_json::from_slice::<PlainBalance>(b).map(|q| q.action.len()).unwrap());
    // SAFETY: made by sp_receiver_new, freed once.
    unsafe { sp_receiver_free(receiver) };
}
