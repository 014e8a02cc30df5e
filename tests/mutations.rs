//! Valid bodies mutated at random, many thousand times, through the core and the C ABI: nothing
//! panics, every refusal names its problem, no invalid body is answered `"success":true`, and
//! every accepted body yields a reply. Deterministic: a fixed seed, no dependency.

use std::ffi::CStr;
use std::ptr;

use slotpartner::ffi::error::{sp_last_error_message, sp_last_error_response};
use slotpartner::ffi::event::{sp_event, sp_event_free, sp_event_reply, sp_event_reply_balance};
use slotpartner::ffi::receiver::*;
use slotpartner::ffi::status::sp_status;
use slotpartner::ffi::str::sp_str;
use slotpartner::{ParseOptions, Receiver, ReceiverConfig};

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes that change the meaning of JSON text, and some that break UTF-8.
const PIECES: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\\udc00",
    b"null",
    b"true",
    b"1.5",
    b"-1",
    b"1e400",
    b"99999999999999999999",
    b"\x00",
    b"\x1f",
    b"\xff",
    b"\xc2\x85",
    b"\"event\":1",
    b"\"moneyWon\":",
    b"\"index\":",
    b"\"jackpotPayout\"",
    b" ",
    b"0",
];

fn mutate(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(out.len() + 1);
        match rng.below(3) {
            0 => {
                let piece = PIECES[rng.below(PIECES.len())];
                out.splice(at..at, piece.iter().copied());
            }
            1 if at < out.len() => {
                let end = (at + 1 + rng.below(8)).min(out.len());
                out.drain(at..end);
            }
            _ if at < out.len() => out[at] = PIECES[rng.below(PIECES.len())][0],
            _ => {}
        }
    }
    out
}

fn text(s: sp_str) -> String {
    // SAFETY: the library's views are valid, NUL-terminated UTF-8 until the next status call.
    let bytes = unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) };
    assert_eq!(unsafe { *s.ptr.add(s.len) }, 0, "not NUL-terminated");
    String::from_utf8(bytes.to_vec()).expect("UTF-8 view")
}

fn abi_receiver() -> *mut sp_receiver {
    let (mut config, mut receiver) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers and NUL-terminated strings.
    unsafe {
        assert_eq!(sp_receiver_config_new(&mut config), sp_status::SP_OK);
        let token: &CStr = c"6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
        assert_eq!(sp_receiver_config_add_token(config, token.as_ptr()), sp_status::SP_OK);
        assert_eq!(sp_receiver_new(config, &mut receiver), sp_status::SP_OK);
        sp_receiver_config_free(config);
    }
    receiver
}

/// One body through the C ABI: accepted bodies get a reply, refused ones a named answer that is
/// never a success.
fn through_abi(receiver: *const sp_receiver, body: &[u8]) -> bool {
    let mut event: *mut sp_event = ptr::null_mut();
    // SAFETY: valid receiver, body and out-pointer; the event is freed once.
    unsafe {
        if sp_receiver_parse(receiver, body.as_ptr(), body.len(), &mut event) != sp_status::SP_OK {
            assert!(event.is_null(), "out-parameter written on failure");
            assert!(!text(sp_last_error_message()).is_empty());
            let (mut http, mut answer) = (0u16, sp_str::NONE);
            assert_eq!(sp_last_error_response(&mut http, &mut answer), sp_status::SP_OK);
            let answer = text(answer);
            assert!(!answer.contains(r#""success":true"#), "{answer}");
            serde_json::from_str::<serde_json::Value>(&answer).expect("the answer is JSON");
            return false;
        }
        let mut reply = sp_str::NONE;
        let status = if (*event).balance_query.is_null() {
            sp_event_reply(event, true, ptr::null(), &mut reply)
        } else {
            sp_event_reply_balance(event, 1, ptr::null(), 0, &mut reply)
        };
        if status == sp_status::SP_OK {
            serde_json::from_str::<serde_json::Value>(&text(reply)).expect("the reply is JSON");
        } else {
            assert_eq!(status, sp_status::SP_ERR_UNKNOWN_EVENT, "only an unknown event has no reply");
        }
        sp_event_free(event);
        true
    }
}

#[test]
fn mutated_bodies_never_panic_and_are_never_a_false_success() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let bodies: Vec<Vec<u8>> =
        ["refund.json", "payout.json", "payout_minimal.json", "balance.json", "other_event.json"]
            .iter()
            .map(|name| std::fs::read(fixtures.join(name)).unwrap())
            .collect();
    let mut config = ReceiverConfig::default();
    config.add_token("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f").unwrap();
    let core = Receiver::new(config).unwrap();
    let abi = abi_receiver();
    let mut rng = Rng(0x005E_ED0F_5107);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..50_000 {
        let original = &bodies[rng.below(bodies.len())];
        let body = mutate(&mut rng, original);
        let by_core = match slotpartner::parse(&body, &ParseOptions::default()) {
            Ok(_) => true,
            Err(e) => {
                assert!(!e.message.is_empty() && !e.message.contains('\0'), "{e:?}");
                let answer = core.error_response(&e);
                assert!(!answer.body.contains(r#""success":true"#), "{}", answer.body);
                false
            }
        };
        assert_eq!(through_abi(abi, &body), by_core, "core and C ABI disagree on {}", String::from_utf8_lossy(&body));
        if by_core { accepted += 1 } else { refused += 1 }
    }
    // SAFETY: made by sp_receiver_new, freed once.
    unsafe { sp_receiver_free(abi) };
    println!("{accepted} accepted, {refused} refused");
    assert!(accepted > 1_000 && refused > 10_000, "the mutations exercise both paths: {accepted} / {refused}");
}
