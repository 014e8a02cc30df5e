//! `send --burst`: N refund and payout events with consecutive indexes,
//! delivered by a seeded schedule that loses, repeats and reorders some of
//! them, with a report of what was sent and delivered; and the deterministic
//! event builder that `serve` shares to answer `getEvent` by index.
//!
//! Every event is a function of (seed, kind mix, index) alone: a ChaCha8
//! generator seeded with the seed draws on stream `index`, so `serve` with the
//! same seed builds the same bytes for one index without knowing the others.
//! The schedule draws on its own stream of the same seed.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rand::seq::index::sample;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::http::JSON_UTF8;
use crate::send::{self, EventKind, MAX_REPLY};

/// Most events one burst sends.
pub const MAX_BURST: u64 = 1_000_000;
/// Highest event index a burst or `serve --events-*` may use (keeps the
/// derived transaction ids below 10^9 and apart from the buy ids).
pub const MAX_INDEX: u64 = 99_999_999;
/// `transactionId` = this + index.
pub const TRANSACTION_BASE: u64 = 900_000_000;
/// `buyTransactionId` = this + index.
pub const BUY_TRANSACTION_BASE: u64 = 800_000_000;
/// Most parallel connections of `--concurrency`.
pub const MAX_CONCURRENCY: usize = 64;
/// A reordered event is swapped with one up to this many places later.
pub const REORDER_WINDOW: usize = 4;
/// A repeat follows its first delivery by 1 to this many places.
pub const REPEAT_LAG: usize = 8;
/// Currency of every burst payout (`moneyWon` in minor units).
pub const CURRENCY: &str = "EUR";
/// The action of the action address that answers an event by index.
pub const GET_EVENT_ACTION: &str = "getEvent";
/// Its parameter.
pub const GET_EVENT_INDEX: &str = "index";

/// ChaCha stream of the delivery schedule (event streams are their index).
const SCHEDULE_STREAM: u64 = u64::MAX;
/// 2024-06-11T00:00:00Z; `epochReleasedMillis` = this + index × 1000 + jitter.
const EPOCH_BASE_MS: u64 = 1_718_064_000_000;

/// Which kinds a burst sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventMix {
    /// Refunds and payouts, each index one or the other with equal odds.
    Mixed,
    Refund,
    Payout,
}

impl EventMix {
    pub fn parse(s: &str) -> Option<EventMix> {
        match s {
            "mixed" => Some(EventMix::Mixed),
            "refund" => Some(EventMix::Refund),
            "payout" => Some(EventMix::Payout),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EventMix::Mixed => "mixed",
            EventMix::Refund => "refund",
            EventMix::Payout => "payout",
        }
    }
}

/// One generated event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurstEvent {
    pub index: u64,
    /// [`EventKind::Refund`] or [`EventKind::Payout`].
    pub kind: EventKind,
    pub transaction_id: u64,
    /// `moneyWon` of a payout (minor units of [`CURRENCY`]); refunds carry no amount.
    pub money_won: Option<u64>,
    /// The JSON body, byte for byte as sent and as `getEvent` returns it.
    pub body: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RefundBody {
    event: &'static str,
    index: u64,
    game_session_identifier: String,
    player_identifier: String,
    player_partner_identifier: String,
    transaction_id: u64,
    buy_transaction_id: u64,
    game_session_id: u64,
    partner_game_request_identifier: String,
    game_id: u64,
    is_mobile: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    bonus_code: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PayoutBody {
    event: &'static str,
    index: u64,
    jackpot_identifier: &'static str,
    player_identifier: String,
    player_partner_identifier: String,
    #[serde(rename = "currencyISO4217")]
    currency: &'static str,
    money_won: u64,
    coins_won: u64,
    is_money: bool,
    epoch_released_millis: u64,
    is_primary: bool,
    transaction_id: u64,
    buy_transaction_id: u64,
    partner_game_request_identifier: String,
    game_session_id: u64,
    game_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    bonus_code: Option<&'static str>,
    is_mobile: bool,
}

fn uuid_text(x: u128) -> String {
    // Version 4, RFC 4122 variant.
    let x = (x & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
    let h = format!("{x:032x}");
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// The event with `index` of the burst with `seed` and `mix`: the same
/// value, and the same body bytes, for the same three inputs. Its
/// `transactionId` is [`TRANSACTION_BASE`] + index, `buyTransactionId`
/// [`BUY_TRANSACTION_BASE`] + index.
pub fn burst_event(seed: u64, mix: EventMix, index: u64) -> BurstEvent {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    let kind = match mix {
        EventMix::Mixed if rng.random_bool(0.5) => EventKind::Payout,
        EventMix::Mixed | EventMix::Refund => EventKind::Refund,
        EventMix::Payout => EventKind::Payout,
    };
    let player = rng.random_range(1..=8u64);
    let player_identifier = format!("svc-player-{}", 48_210 + player);
    let player_partner_identifier = format!("partner-user-{}", 1_040 + player);
    let game_id = rng.random_range(1001..=1007u64);
    let game_session_id = rng.random_range(5_500_000..=5_599_999u64);
    let partner_game_request_identifier = format!("pgr-{:016x}", rng.random::<u64>());
    let is_mobile = rng.random_bool(0.4);
    let bonus_code = rng.random_bool(0.1).then_some("SPRING24");
    let transaction_id = TRANSACTION_BASE + index;
    let buy_transaction_id = BUY_TRANSACTION_BASE + index;
    let (body, money_won) = match kind {
        EventKind::Payout => {
            let is_primary = rng.random_bool(0.2);
            let money_won =
                if is_primary { rng.random_range(100_000..=5_000_000u64) } else { rng.random_range(500..=50_000u64) };
            let body = PayoutBody {
                event: EventKind::Payout.name(),
                index,
                jackpot_identifier: if is_primary { "jp-dragons-hoard-major" } else { "jp-dragons-hoard-minor" },
                player_identifier,
                player_partner_identifier,
                currency: CURRENCY,
                money_won,
                coins_won: 0,
                is_money: true,
                epoch_released_millis: EPOCH_BASE_MS + index * 1000 + rng.random_range(0..1000u64),
                is_primary,
                transaction_id,
                buy_transaction_id,
                partner_game_request_identifier,
                game_session_id,
                game_id,
                bonus_code,
                is_mobile,
            };
            (serde_json::to_string(&body), Some(money_won))
        }
        _ => {
            let body = RefundBody {
                event: EventKind::Refund.name(),
                index,
                game_session_identifier: uuid_text(rng.random::<u128>()),
                player_identifier,
                player_partner_identifier,
                transaction_id,
                buy_transaction_id,
                game_session_id,
                partner_game_request_identifier,
                game_id,
                is_mobile,
                bonus_code,
            };
            (serde_json::to_string(&body), None)
        }
    };
    BurstEvent { index, kind, transaction_id, money_won, body: body.expect("a plain struct serialises") }
}

/// The events of one burst: indexes `first_index ..= first_index + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSet {
    pub seed: u64,
    pub mix: EventMix,
    pub first_index: u64,
    pub count: u64,
}

impl EventSet {
    /// Checks the index range (usage errors).
    pub fn validate(&self) -> Result<(), String> {
        if self.count == 0 || self.count > MAX_INDEX + 1 {
            return Err(format!("the event count must be between 1 and {}", MAX_INDEX + 1));
        }
        match self.first_index.checked_add(self.count - 1) {
            Some(last) if last <= MAX_INDEX => Ok(()),
            _ => Err(format!("event indexes must stay at most {MAX_INDEX}")),
        }
    }

    /// Whether `index` is one of the set's.
    pub fn contains(&self, index: u64) -> bool {
        index >= self.first_index && index - self.first_index < self.count
    }

    /// The event with `index`, if the set has it.
    pub fn get(&self, index: u64) -> Option<BurstEvent> {
        self.contains(index).then(|| burst_event(self.seed, self.mix, index))
    }
}

/// Shares of a burst's events lost, repeated and reordered (each 0 to 1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shares {
    pub lose: f64,
    pub repeat: f64,
    pub reorder: f64,
}

/// One POST of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub index: u64,
    /// 1 for the event's first delivery in the schedule, 2, 3 … for repeats.
    pub copy: u32,
}

/// The order in which a burst delivers its events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub deliveries: Vec<Delivery>,
    /// Never delivered, ascending.
    pub lost: Vec<u64>,
    /// Delivered two or more times, ascending.
    pub repeated: Vec<u64>,
    /// Delivered (first) after an event with a higher index, ascending.
    pub reordered: Vec<u64>,
}

fn share_of(share: f64, n: usize) -> usize {
    ((share * n as f64).round() as usize).min(n)
}

/// The delivery schedule of `count` events from `first_index`:
/// round(lose × count) events, drawn at random, are never delivered; of the
/// others, round(reorder × delivered) are each swapped with one up to
/// [`REORDER_WINDOW`] places later, and round(repeat × delivered) are
/// delivered again (a quarter of them twice again) 1 to [`REPEAT_LAG`] places
/// after their first delivery, so a repeat never precedes the first.
pub fn schedule(first_index: u64, count: u64, shares: Shares, seed: u64) -> Schedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(SCHEDULE_STREAM);
    let n = count as usize;
    let mut lost_pos = sample(&mut rng, n, share_of(shares.lose, n)).into_vec();
    lost_pos.sort_unstable();
    let lost: Vec<u64> = lost_pos.iter().map(|&p| first_index + p as u64).collect();
    let mut order: Vec<u64> = Vec::with_capacity(n - lost.len());
    let mut lost_iter = lost.iter().peekable();
    for index in first_index..first_index + count {
        if lost_iter.peek() == Some(&&index) {
            lost_iter.next();
        } else {
            order.push(index);
        }
    }

    let m = order.len();
    if m > 1 {
        let mut picks = sample(&mut rng, m - 1, share_of(shares.reorder, m).min(m - 1)).into_vec();
        picks.sort_unstable();
        for p in picks {
            let q = (p + rng.random_range(1..=REORDER_WINDOW)).min(m - 1);
            order.swap(p, q);
        }
    }
    let mut reordered = Vec::new();
    let mut highest = None;
    for &index in &order {
        match highest {
            Some(h) if index < h => reordered.push(index),
            _ => highest = Some(index),
        }
    }
    reordered.sort_unstable();

    let mut repeat_pos = sample(&mut rng, m, share_of(shares.repeat, m)).into_vec();
    repeat_pos.sort_unstable();
    // (place, tie-break, index): first deliveries sort before repeats at the same place.
    let mut slots: Vec<(usize, u32, u64)> = order.iter().enumerate().map(|(p, &i)| (p, 0, i)).collect();
    for &p in &repeat_pos {
        let extra = if rng.random_bool(0.25) { 2 } else { 1 };
        for c in 0..extra {
            slots.push((p + rng.random_range(1..=REPEAT_LAG), 1 + c, order[p]));
        }
    }
    slots.sort_by_key(|&(place, tie, _)| (place, tie));
    let mut copies: HashMap<u64, u32> = HashMap::new();
    let deliveries = slots
        .into_iter()
        .map(|(_, _, index)| {
            let copy = copies.entry(index).or_insert(0);
            *copy += 1;
            Delivery { index, copy: *copy }
        })
        .collect();
    let mut repeated: Vec<u64> = repeat_pos.iter().map(|&p| order[p]).collect();
    repeated.sort_unstable();
    Schedule { deliveries, lost, repeated, reordered }
}

/// Everything `send --burst` needs.
#[derive(Debug, Clone)]
pub struct BurstOptions {
    pub url: String,
    /// `X-Service-Token` value; empty leaves the header out.
    pub token: String,
    pub ca_file: Option<PathBuf>,
    pub first_index: u64,
    pub count: u64,
    pub mix: EventMix,
    pub seed: u64,
    pub shares: Shares,
    pub concurrency: usize,
    /// Every reply must also have `success` equal to this.
    pub expect_success: Option<bool>,
    /// Print only the deliveries that failed a check (and the summary).
    pub quiet: bool,
    /// Time every request and report the rate and the latency percentiles
    /// ([`BurstReport::latency`], one more summary line). Off by default, so that the same seed
    /// gives the same output and report; [`BurstOptions::new`] turns it on when [`LATENCY_ENV`]
    /// is set.
    pub latency: bool,
}

impl BurstOptions {
    /// Defaults: index 1, mixed kinds, seed 1, nothing lost, repeated or
    /// reordered, one connection, latency not timed.
    pub fn new(url: &str, count: u64) -> BurstOptions {
        BurstOptions {
            url: url.to_string(),
            token: crate::DEFAULT_TOKEN.to_string(),
            ca_file: None,
            first_index: 1,
            count,
            mix: EventMix::Mixed,
            seed: 1,
            shares: Shares::default(),
            concurrency: 1,
            expect_success: None,
            quiet: false,
            latency: false,
        }
    }

    /// The events this burst draws from (`serve` needs the same to answer `getEvent`).
    pub fn events(&self) -> EventSet {
        EventSet { seed: self.seed, mix: self.mix, first_index: self.first_index, count: self.count }
    }

    /// Checks the options (usage errors).
    pub fn validate(&self) -> Result<(), String> {
        send::check_url(&self.url)?;
        if self.count == 0 || self.count > MAX_BURST {
            return Err(format!("--burst must be between 1 and {MAX_BURST}"));
        }
        self.events().validate().map_err(|e| format!("--index/--burst: {e}"))?;
        for (name, share) in
            [("--lose", self.shares.lose), ("--repeat", self.shares.repeat), ("--reorder", self.shares.reorder)]
        {
            if !(0.0..=1.0).contains(&share) {
                return Err(format!("{name} must be a share between 0 and 1, got {share}"));
            }
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(format!("--concurrency must be between 1 and {MAX_CONCURRENCY}"));
        }
        Ok(())
    }
}

/// One failed check of one delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub index: u64,
    pub delivery: u32,
    /// `request` (no reply), `verdict` (reply of the wrong shape or status) or
    /// `repeatMismatch` (a repeat answered unlike the first reply).
    pub check: &'static str,
    pub reason: String,
}

/// What a burst sent and delivered (the `--report-json` document).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BurstReport {
    pub url: String,
    pub seed: u64,
    pub kind: EventMix,
    pub first_index: u64,
    pub last_index: u64,
    pub lose: f64,
    pub repeat: f64,
    pub reorder: f64,
    pub concurrency: usize,
    /// Events generated: every index of the range, lost ones included.
    pub sent: u64,
    pub sent_payouts: u64,
    pub sent_refunds: u64,
    /// Sum of `moneyWon` over every payout generated, lost ones included.
    pub sent_money_total: u64,
    /// Distinct events posted at least once (every index not lost).
    pub delivered: u64,
    /// POST requests made (delivered + repeats).
    pub deliveries: u64,
    pub lost: u64,
    pub lost_indexes: Vec<u64>,
    pub repeated: u64,
    pub repeated_indexes: Vec<u64>,
    /// Events delivered after an event with a higher index.
    pub reordered: u64,
    pub reordered_indexes: Vec<u64>,
    pub currency: &'static str,
    pub delivered_payouts: u64,
    pub delivered_refunds: u64,
    /// Sum of `moneyWon` over the distinct delivered payouts: what a partner
    /// credits once per event (refunds carry no amount in the interface).
    pub delivered_money_total: u64,
    /// `transactionId`s of the delivered payouts, by index.
    pub delivered_payout_transaction_ids: Vec<u64>,
    /// `transactionId`s of the delivered refunds, by index.
    pub delivered_refund_transaction_ids: Vec<u64>,
    /// Replies that passed every check.
    pub replies_ok: u64,
    pub request_failures: u64,
    pub verdict_failures: u64,
    pub repeat_mismatches: u64,
    pub failures: Vec<Failure>,
    /// No check failed.
    pub ok: bool,
    /// The rate and the requests' latency, when [`BurstOptions::latency`] asked for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

/// How fast a burst's requests were answered: every delivery timed from the moment its worker
/// began the request to the moment the whole reply was read (connecting included when a
/// connection had to be made), failed requests too.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    /// From the first request's start to the last reply's end.
    pub elapsed_ms: f64,
    /// Deliveries (POST requests) a second over `elapsed_ms`.
    pub per_second: f64,
    pub mean_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Latency {
    /// The figures of `times` (one per request, any order) over `elapsed`.
    pub fn of(mut times: Vec<Duration>, elapsed: Duration) -> Latency {
        times.sort_unstable();
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        // The nearest-rank percentile: the smallest time at or above p% of the requests.
        let rank = |p: usize| match times.len() {
            0 => 0,
            n => us(times[(n * p).div_ceil(100).clamp(1, n) - 1]),
        };
        let total: Duration = times.iter().sum();
        let seconds = elapsed.as_secs_f64();
        Latency {
            elapsed_ms: (seconds * 1e6).round() / 1e3,
            per_second: if seconds > 0.0 { (times.len() as f64 / seconds * 10.0).round() / 10.0 } else { 0.0 },
            mean_us: if times.is_empty() { 0 } else { us(total) / times.len() as u64 },
            p50_us: rank(50),
            p90_us: rank(90),
            p99_us: rank(99),
            max_us: times.last().map_or(0, |&d| us(d)),
        }
    }
}

impl BurstReport {
    /// The report as pretty JSON (the `--report-json` file).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plain struct serialises") + "\n"
    }

    /// The `summary …` lines printed after the deliveries.
    pub fn summary_lines(&self) -> Vec<String> {
        let list = |v: &[u64]| {
            if v.is_empty() { "-".to_string() } else { v.iter().map(u64::to_string).collect::<Vec<_>>().join(",") }
        };
        let mut lines = vec![
            format!(
                "summary seed={} kind={} indexes={}..{} sent={} delivered={} deliveries={}",
                self.seed,
                self.kind.name(),
                self.first_index,
                self.last_index,
                self.sent,
                self.delivered,
                self.deliveries
            ),
            format!("summary lost={} lost_indexes={}", self.lost, list(&self.lost_indexes)),
            format!("summary repeated={} repeated_indexes={}", self.repeated, list(&self.repeated_indexes)),
            format!("summary reordered={}", self.reordered),
            format!(
                "summary sent_payouts={} sent_refunds={} sent_money_total={} currency={}",
                self.sent_payouts, self.sent_refunds, self.sent_money_total, self.currency
            ),
            format!(
                "summary delivered_payouts={} delivered_refunds={} delivered_money_total={} currency={}",
                self.delivered_payouts, self.delivered_refunds, self.delivered_money_total, self.currency
            ),
        ];
        if let Some(l) = &self.latency {
            lines.push(format!(
                "summary concurrency={} elapsed_ms={:.1} per_second={:.1} latency_mean_us={} latency_p50_us={} latency_p90_us={} latency_p99_us={} latency_max_us={}",
                self.concurrency, l.elapsed_ms, l.per_second, l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.max_us
            ));
        }
        lines.push(format!(
            "summary replies_ok={} request_failures={} verdict_failures={} repeat_mismatches={} result={}",
            self.replies_ok,
            self.request_failures,
            self.verdict_failures,
            self.repeat_mismatches,
            if self.ok { "ok" } else { "FAILED" }
        ));
        lines
    }
}

struct Outcome {
    delivery: Delivery,
    kind: EventKind,
    /// Err: the request failed; Ok((status, Err)): reading the reply failed.
    reply: Result<(u16, Result<Vec<u8>, String>), String>,
    /// From the request's start to the reply's end, when timed.
    took: Option<Duration>,
}

fn post(agent: &ureq::Agent, opts: &BurstOptions, body: &str) -> Result<(u16, Result<Vec<u8>, String>), String> {
    let mut request = agent.post(&opts.url).header("Content-Type", JSON_UTF8);
    if !opts.token.is_empty() {
        request = request.header("X-Service-Token", opts.token.as_str());
    }
    let mut resp = request.send(body.as_bytes()).map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let read = resp.body_mut().with_config().limit(MAX_REPLY).read_to_vec().map_err(|e| e.to_string());
    Ok((status, read))
}

/// Sends the burst, writes one line per delivery (unless `quiet`, then only
/// the failed ones) and the summary lines to `out`, and returns the report.
/// `Err` for usage errors (nothing sent) and for output that cannot be written.
pub fn run(opts: &BurstOptions, out: &mut dyn Write) -> Result<BurstReport, String> {
    opts.validate()?;
    let agent = send::agent_with(opts.ca_file.as_ref(), opts.concurrency)?;
    let set = opts.events();
    let plan = schedule(opts.first_index, opts.count, opts.shares, opts.seed);

    let mut report = BurstReport {
        url: opts.url.clone(),
        seed: opts.seed,
        kind: opts.mix,
        first_index: opts.first_index,
        last_index: opts.first_index + opts.count - 1,
        lose: opts.shares.lose,
        repeat: opts.shares.repeat,
        reorder: opts.shares.reorder,
        concurrency: opts.concurrency,
        sent: opts.count,
        sent_payouts: 0,
        sent_refunds: 0,
        sent_money_total: 0,
        delivered: opts.count - plan.lost.len() as u64,
        deliveries: plan.deliveries.len() as u64,
        lost: plan.lost.len() as u64,
        lost_indexes: plan.lost.clone(),
        repeated: plan.repeated.len() as u64,
        repeated_indexes: plan.repeated.clone(),
        reordered: plan.reordered.len() as u64,
        reordered_indexes: plan.reordered.clone(),
        currency: CURRENCY,
        delivered_payouts: 0,
        delivered_refunds: 0,
        delivered_money_total: 0,
        delivered_payout_transaction_ids: Vec::new(),
        delivered_refund_transaction_ids: Vec::new(),
        replies_ok: 0,
        request_failures: 0,
        verdict_failures: 0,
        repeat_mismatches: 0,
        failures: Vec::new(),
        ok: true,
        latency: None,
    };
    let mut lost = plan.lost.iter().peekable();
    for index in opts.first_index..=report.last_index {
        let event = burst_event(opts.seed, opts.mix, index);
        let delivered = if lost.peek() == Some(&&index) {
            lost.next();
            false
        } else {
            true
        };
        match event.money_won {
            Some(money) => {
                report.sent_payouts += 1;
                report.sent_money_total += money;
                if delivered {
                    report.delivered_payouts += 1;
                    report.delivered_money_total += money;
                    report.delivered_payout_transaction_ids.push(event.transaction_id);
                }
            }
            None => {
                report.sent_refunds += 1;
                if delivered {
                    report.delivered_refunds += 1;
                    report.delivered_refund_transaction_ids.push(event.transaction_id);
                }
            }
        }
    }

    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<Outcome>();
    let mut write_error = None;
    let mut times: Vec<Duration> = Vec::with_capacity(if opts.latency { plan.deliveries.len() } else { 0 });
    let started = Instant::now();
    let mut last_reply = started;
    thread::scope(|scope| {
        for _ in 0..opts.concurrency {
            let tx = tx.clone();
            let (next, plan, agent) = (&next, &plan, &agent);
            scope.spawn(move || {
                while let Some(&delivery) = plan.deliveries.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let event = burst_event(set.seed, set.mix, delivery.index);
                    let start = opts.latency.then(Instant::now);
                    let reply = post(agent, opts, &event.body);
                    let took = start.map(|s| s.elapsed());
                    if tx.send(Outcome { delivery, kind: event.kind, reply, took }).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // First reply (status, body, delivery) per repeated index, in order of arrival.
        let mut first: HashMap<u64, (u16, Vec<u8>, u32)> = HashMap::new();
        for outcome in rx {
            if let Some(took) = outcome.took {
                times.push(took);
                last_reply = Instant::now();
            }
            let Delivery { index, copy } = outcome.delivery;
            let mut problems: Vec<(&'static str, String)> = Vec::new();
            let (status_text, shown) = match outcome.reply {
                Err(e) => {
                    problems.push(("request", format!("request failed: {e}")));
                    ("-".to_string(), "-".to_string())
                }
                Ok((status, Err(e))) => {
                    problems.push(("request", format!("reading the reply failed: {e}")));
                    (status.to_string(), "-".to_string())
                }
                Ok((status, Ok(body))) => {
                    if let Err(reason) = send::verdict(outcome.kind, status, &body, opts.expect_success, None) {
                        problems.push(("verdict", reason));
                    }
                    let shown = send::show_body(&body);
                    match first.get(&index) {
                        Some((s, b, d)) if *s != status || *b != body => problems.push((
                            "repeatMismatch",
                            format!(
                                "reply differs from the first reply to this event (delivery={d} http={s} body={})",
                                send::show_body(b)
                            ),
                        )),
                        Some(_) => {}
                        None if plan.repeated.binary_search(&index).is_ok() => {
                            first.insert(index, (status, body, copy));
                        }
                        None => {}
                    }
                    (status.to_string(), shown)
                }
            };
            let verdict_text = if problems.is_empty() {
                report.replies_ok += 1;
                "ok".to_string()
            } else {
                let reasons: Vec<&str> = problems.iter().map(|(_, r)| r.as_str()).collect();
                format!("UNEXPECTED: {}", reasons.join("; "))
            };
            for (check, reason) in problems.iter().cloned() {
                match check {
                    "request" => report.request_failures += 1,
                    "verdict" => report.verdict_failures += 1,
                    _ => report.repeat_mismatches += 1,
                }
                report.failures.push(Failure { index, delivery: copy, check, reason });
            }
            if (!opts.quiet || !problems.is_empty()) && write_error.is_none() {
                let line = format!(
                    "index={index} event={} delivery={copy} http={status_text} body={shown} verdict={verdict_text}",
                    outcome.kind.name()
                );
                if let Err(e) = writeln!(out, "{line}") {
                    write_error = Some(e);
                }
            }
        }
    });
    if let Some(e) = write_error {
        return Err(format!("cannot write output: {e}"));
    }
    report.ok = report.failures.is_empty();
    if opts.latency {
        report.latency = Some(Latency::of(times, last_reply - started));
    }
    for line in report.summary_lines() {
        writeln!(out, "{line}").map_err(|e| format!("cannot write output: {e}"))?;
    }
    let _ = out.flush();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn shares(lose: f64, repeat: f64, reorder: f64) -> Shares {
        Shares { lose, repeat, reorder }
    }

    #[test]
    fn events_are_a_function_of_seed_mix_and_index() {
        let a = burst_event(7, EventMix::Mixed, 42);
        assert_eq!(a, burst_event(7, EventMix::Mixed, 42));
        assert_ne!(a.body, burst_event(8, EventMix::Mixed, 42).body);
        assert_eq!(a.transaction_id, TRANSACTION_BASE + 42);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["index"], 42);
        assert_eq!(v["transactionId"], TRANSACTION_BASE + 42);
        assert_eq!(v["buyTransactionId"], BUY_TRANSACTION_BASE + 42);
        assert_eq!(v["event"], a.kind.name());

        let kinds: Vec<EventKind> = (1..=200).map(|i| burst_event(3, EventMix::Mixed, i).kind).collect();
        let payouts = kinds.iter().filter(|k| **k == EventKind::Payout).count();
        assert!((60..=140).contains(&payouts), "{payouts} payouts of 200");
        assert!((1..=50).all(|i| burst_event(3, EventMix::Refund, i).kind == EventKind::Refund));

        let p = burst_event(3, EventMix::Payout, 9);
        let v: Value = serde_json::from_str(&p.body).unwrap();
        assert_eq!(v["moneyWon"].as_u64(), p.money_won);
        assert_eq!(v["currencyISO4217"], "EUR");
        assert_eq!(v["isMoney"], true);
        assert_eq!(v["coinsWon"], 0);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert!(keys.len() >= 17, "{keys:?}");
        let r = burst_event(3, EventMix::Refund, 9);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert!(crate::is_uuid(v["gameSessionIdentifier"].as_str().unwrap()));
        assert_eq!(r.money_won, None);
    }

    #[test]
    fn schedule_counts_and_order() {
        let s = schedule(1, 1000, shares(0.02, 0.01, 0.05), 11);
        assert_eq!(s, schedule(1, 1000, shares(0.02, 0.01, 0.05), 11));
        assert_ne!(s.lost, schedule(1, 1000, shares(0.02, 0.01, 0.05), 12).lost);
        assert_eq!(s.lost.len(), 20);
        assert_eq!(s.repeated.len(), 10);
        assert!(!s.reordered.is_empty());
        let mut seen: HashMap<u64, u32> = HashMap::new();
        for d in &s.deliveries {
            assert!(s.lost.binary_search(&d.index).is_err(), "lost {} delivered", d.index);
            let n = seen.entry(d.index).or_insert(0);
            *n += 1;
            assert_eq!(*n, d.copy, "copies in order");
        }
        assert_eq!(seen.len(), 980);
        for (index, n) in &seen {
            assert_eq!(*n > 1, s.repeated.binary_search(index).is_ok());
        }
        // Nothing lost, repeated or reordered: the plain sequence.
        let plain = schedule(5, 10, Shares::default(), 1);
        let indexes: Vec<u64> = plain.deliveries.iter().map(|d| d.index).collect();
        assert_eq!(indexes, (5..15).collect::<Vec<_>>());
        assert!(plain.lost.is_empty() && plain.repeated.is_empty() && plain.reordered.is_empty());
        // Everything lost.
        let none = schedule(1, 3, shares(1.0, 1.0, 1.0), 1);
        assert!(none.deliveries.is_empty());
        assert_eq!(none.lost, [1, 2, 3]);
    }

    #[test]
    fn latency_percentiles_by_nearest_rank() {
        let ms = |n: u64| Duration::from_millis(n);
        let l = Latency::of((1..=200).rev().map(ms).collect(), Duration::from_secs(2));
        assert_eq!((l.p50_us, l.p90_us, l.p99_us, l.max_us), (100_000, 180_000, 198_000, 200_000));
        assert_eq!((l.per_second, l.elapsed_ms), (100.0, 2000.0));
        assert_eq!(l.mean_us, 100_500);
        let one = Latency::of(vec![ms(3)], ms(4));
        assert_eq!((one.p50_us, one.p99_us, one.per_second), (3000, 3000, 250.0));
        let none = Latency::of(Vec::new(), Duration::ZERO);
        assert_eq!((none.p50_us, none.max_us, none.per_second), (0, 0, 0.0));
    }

    #[test]
    fn option_checks() {
        let mut o = BurstOptions::new("http://127.0.0.1:9/cb", 10);
        assert!(o.validate().is_ok());
        o.shares.lose = 1.5;
        assert!(o.validate().is_err());
        o.shares.lose = 0.0;
        o.concurrency = 0;
        assert!(o.validate().is_err());
        o.concurrency = 4;
        o.first_index = MAX_INDEX;
        assert!(o.validate().is_err());
        o.first_index = MAX_INDEX - 9;
        assert!(o.validate().is_ok());
        o.count = 0;
        assert!(o.validate().is_err());
    }
}
