//! Refunds through a journal, for the retention tests: a refund's delivery, its reply, and a
//! delivery handled from `begin` to `finish`. Included with `#[path]` by each test file.

#![allow(dead_code)] // each includer uses part of it

use std::time::Duration;

use slotpartner::journal::{Begin, Claim, Delivery, Journal, RecordState};
use slotpartner::{ParseOptions, parse};

pub const DAY_MS: i64 = 86_400_000;

pub fn delivery(body: &str) -> Delivery {
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid body"))
}

/// A refund; `request` (`partnerGameRequestIdentifier`) varies a decisive field under one key.
pub fn refund(transaction_id: i64, index: i64, request: &str) -> Delivery {
    delivery(&format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{transaction_id}","playerIdentifier":"player-1","transactionId":{transaction_id},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"{request}","gameId":3,"isMobile":false,"index":{index}}}"#,
        transaction_id + 1_000_000
    ))
}

/// Refund `n` at index `n`.
pub fn plain_refund(n: i64) -> Delivery {
    refund(n, n, &format!("req-{n}"))
}

/// The reply stored for refund `n`.
pub fn reply(n: i64) -> Vec<u8> {
    format!(r#"{{"refund":{{"success":true,"errorMessage":"","n":{n}}}}}"#).into_bytes()
}

pub fn new_claim(journal: &Journal, delivery: &Delivery) -> Claim {
    match journal.begin(delivery).expect("begin") {
        Begin::New(claim) => claim,
        other => panic!("expected New for {:?}, got {other:?}", delivery.key()),
    }
}

/// Handles `delivery` from New to finish with `reply`.
pub fn handle(journal: &Journal, delivery: &Delivery, reply: &[u8]) {
    let claim = new_claim(journal, delivery);
    journal.finish(&claim, reply).expect("finish");
}

/// The state of the first record of `transaction_id`.
pub fn state_of(journal: &Journal, transaction_id: i64) -> RecordState {
    journal.lookup(transaction_id).expect("lookup")[0].state
}

pub fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}
