//! The export of handled deliveries for reconciliation, on SQLite and on a throw-away PostgreSQL
//! cluster: refunds and payouts with their fields and outcomes, unfinished deliveries and compact
//! records, the period's bounds, pages of the journal, files in both formats, the export lock
//! (retention and a second export wait for it); deliveries compacted by retention for real on
//! SQLite; and `sp_journal_export` through the C ABI, used properly and carelessly.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;
use std::ptr;

use slotpartner::ffi::error::{sp_error, sp_last_error};
use slotpartner::ffi::journal::*;
use slotpartner::ffi::status::sp_status::{self, *};
use slotpartner::journal::{
    Begin, Claim, Delivery, EXPORT_COLUMNS, ExportFormat, ExportRow, Journal, JournalOptions, PruneOptions, Synchronous,
};
use slotpartner::{ErrorKind, ParseOptions, parse};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

#[path = "e2e/backends.rs"]
mod backends;
use backends::{Backend, Postgres, Sqlite, run_suite};

fn delivery(body: &str) -> Delivery {
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid body"))
}

fn refund(transaction_id: i64, index: i64) -> Delivery {
    delivery(&format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerPartnerIdentifier":"partner-7","transactionId":{transaction_id},"buyTransactionId":1,"gameSessionId":55,"partnerGameRequestIdentifier":"req-1","gameId":7,"isMobile":false,"index":{index}}}"#
    ))
}

fn payout(transaction_id: i64, index: i64, money: i64) -> Delivery {
    delivery(&format!(
        r#"{{"event":"jackpotPayout","jackpotIdentifier":"jp-1","playerIdentifier":"player, \"one\"","currencyISO4217":"EUR","moneyWon":{money},"coinsWon":3,"isMoney":true,"epochReleasedMillis":1700000000000,"isPrimary":true,"transactionId":{transaction_id},"buyTransactionId":2,"partnerGameRequestIdentifier":"req-2","gameSessionId":66,"gameId":7,"index":{index}}}"#
    ))
}

fn open(url: &str) -> Journal {
    // Replies flushed the cheap way: these tests write thousands.
    let options = JournalOptions { synchronous: Synchronous::Normal, ..JournalOptions::default() };
    Journal::open(url, &options).unwrap_or_else(|e| panic!("open {url}: {e}"))
}

fn claim(journal: &Journal, delivery: &Delivery) -> Claim {
    match journal.begin(delivery).expect("begin") {
        Begin::New(claim) => claim,
        other => panic!("expected New for {:?}, got {other:?}", delivery.key()),
    }
}

fn handle(journal: &Journal, delivery: &Delivery, reply: &str) {
    let claim = claim(journal, delivery);
    journal.finish(&claim, reply.as_bytes()).expect("finish");
}

fn all(journal: &Journal) -> Vec<ExportRow> {
    period(journal, i64::MIN, i64::MAX)
}

fn period(journal: &Journal, since: i64, until: i64) -> Vec<ExportRow> {
    let mut rows = Vec::new();
    let n = journal
        .export(since, until, &mut |row| {
            rows.push(row.clone());
            Ok(())
        })
        .expect("export");
    assert_eq!(n as usize, rows.len());
    assert!(rows.windows(2).all(|w| w[0].id < w[1].id), "rows in the journal's order");
    rows
}

type Behaviour = fn(&dyn Backend);

const SUITE: &[(&str, Behaviour)] = &[
    ("refunds_and_payouts_with_their_fields", refunds_and_payouts_with_their_fields),
    ("the_period_is_of_first_deliveries", the_period_is_of_first_deliveries),
    ("pages_of_the_journal", pages_of_the_journal),
    ("files_in_both_formats", files_in_both_formats),
    ("an_export_holds_off_retention_and_other_exports", an_export_holds_off_retention_and_other_exports),
];

#[test]
fn sqlite_export() {
    run_suite(SUITE, "sqlite", &Sqlite(TempDir::new("slotpartner-export")));
}

#[test]
fn postgres_export() {
    let Some(cluster) = Cluster::start("PostgreSQL export") else { return };
    run_suite(SUITE, "postgres", &Postgres(cluster));
}

// ---------------------------------------------------------------------------------------------
// Behaviours

fn refunds_and_payouts_with_their_fields(b: &dyn Backend) {
    let url = b.url("fields");
    let journal = open(&url);
    assert_eq!(journal.export_extent().unwrap(), None);
    assert!(all(&journal).is_empty());
    handle(&journal, &refund(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    handle(&journal, &payout(900_002, 2, 1500), r#"{"payout":{"success":false,"errorMessage":"jackpot, \"closed\""}}"#);
    journal.abandon(&claim(&journal, &refund(900_003, 3))).unwrap();
    let _held = claim(&journal, &payout(900_004, 4, 10));
    handle(&journal, &payout(900_005, 5, 700), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    // The compact record a retention leaves of an old finished delivery.
    b.exec(
        &url,
        r#"UPDATE sp_journal_delivery SET state = 'pruned', content = '{"digest":"00ff","outcome":"success"}', reply = NULL WHERE key = 'jackpotPayout:900005'"#,
    );
    // A stored content that is no JSON object does not stop the export.
    b.exec(&url, "UPDATE sp_journal_delivery SET content = 'garbled' WHERE key = 'gameSessionBuyRefund:900003'");

    let rows = all(&journal);
    assert_eq!(rows.len(), 5);
    let (first_id, last_id) = journal.export_extent().unwrap().unwrap();
    assert_eq!((first_id, last_id), (rows[0].id, rows[4].id));

    let refund = &rows[0];
    assert_eq!(
        (refund.index, refund.key.as_str(), refund.event.as_str(), refund.transaction_id),
        (Some(1), "gameSessionBuyRefund:900001", "gameSessionBuyRefund", Some(900_001))
    );
    assert_eq!(
        (refund.player_identifier.as_deref(), refund.player_partner_identifier.as_deref()),
        (None, Some("partner-7"))
    );
    assert_eq!(
        (refund.money_won, refund.coins_won, refund.is_money, refund.currency.as_deref()),
        (None, None, None, None)
    );
    assert_eq!(
        (refund.game_session_id, refund.outcome.as_str(), refund.error_message.as_deref()),
        (Some(55), "success", None)
    );
    assert_eq!((refund.state.as_str(), refund.attempts), ("done", 1));
    assert!(refund.finished_ms.is_some_and(|f| f >= refund.first_delivery_ms && f == refund.last_update_ms));

    let payout = &rows[1];
    assert_eq!(
        (payout.player_identifier.as_deref(), payout.player_partner_identifier.as_deref()),
        (Some("player, \"one\""), None)
    );
    assert_eq!(
        (payout.money_won, payout.coins_won, payout.is_money, payout.currency.as_deref(), payout.game_session_id),
        (Some(1500), Some(3), Some(true), Some("EUR"), Some(66))
    );
    assert_eq!((payout.outcome.as_str(), payout.error_message.as_deref()), ("failure", Some("jackpot, \"closed\"")));

    let abandoned = &rows[2];
    assert_eq!(
        (abandoned.outcome.as_str(), abandoned.state.as_str(), abandoned.finished_ms),
        ("abandoned", "abandoned", None)
    );
    assert_eq!(
        (abandoned.transaction_id, abandoned.player_partner_identifier.as_deref()),
        (Some(900_003), None),
        "garbled content: empty"
    );

    let claimed = &rows[3];
    assert_eq!((claimed.outcome.as_str(), claimed.money_won), ("claimed", Some(10)));

    let compact = &rows[4];
    assert_eq!(
        (compact.key.as_str(), compact.transaction_id, compact.index, compact.state.as_str(), compact.outcome.as_str()),
        ("jackpotPayout:900005", Some(900_005), Some(5), "pruned", "success")
    );
    assert_eq!(
        (compact.player_identifier.as_deref(), compact.money_won, compact.currency.as_deref()),
        (None, None, None)
    );
    assert!(compact.finished_ms.is_some());

    // An error of the callback stops the export and comes back.
    let mut seen = 0;
    let stopped = journal.export(i64::MIN, i64::MAX, &mut |_| {
        seen += 1;
        Err(slotpartner::Error::new(ErrorKind::Journal, "stop here"))
    });
    assert_eq!((stopped.unwrap_err().message.as_str(), seen), ("stop here", 1));
    let refused = journal.export(5, 5, &mut |_| Ok(())).unwrap_err();
    assert_eq!((refused.kind, refused.field.as_str()), (ErrorKind::InvalidArgument, "until_ms"));
}

fn the_period_is_of_first_deliveries(b: &dyn Backend) {
    let journal = open(&b.url("period"));
    handle(&journal, &refund(1, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    std::thread::sleep(std::time::Duration::from_millis(5));
    handle(&journal, &payout(2, 2, 100), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    std::thread::sleep(std::time::Duration::from_millis(5));
    // A delivery first claimed early and finished late belongs to the time it was first claimed.
    let late = claim(&journal, &refund(3, 3));
    std::thread::sleep(std::time::Duration::from_millis(5));
    handle(&journal, &payout(4, 4, 100), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    journal.finish(&late, br#"{"refund":{"success":true,"errorMessage":""}}"#).unwrap();
    let rows = all(&journal);
    let times: Vec<i64> = rows.iter().map(|r| r.first_delivery_ms).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    let keys = |rows: Vec<ExportRow>| rows.into_iter().map(|r| r.transaction_id.unwrap()).collect::<Vec<_>>();
    assert_eq!(keys(period(&journal, times[0], times[2])), [1, 2], "until is left out");
    assert_eq!(keys(period(&journal, times[1], times[3] + 1)), [2, 3, 4]);
    assert_eq!(keys(period(&journal, times[1] + 1, times[2] + 1)), [3]);
    assert_eq!(keys(period(&journal, times[3] + 1, i64::MAX)), Vec::<i64>::new());
}

fn pages_of_the_journal(b: &dyn Backend) {
    let journal = open(&b.url("pages"));
    let n = 2_345;
    for i in 1..=n {
        handle(&journal, &refund(i, i), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    }
    let rows = all(&journal);
    assert_eq!(rows.len(), n as usize);
    assert!(rows.iter().zip(1..).all(|(row, i)| row.transaction_id == Some(i) && row.index == Some(i)));
    // A period in the middle: pages before and after it hold none of its rows.
    let (since, until) = (rows[1_200].first_delivery_ms, rows[1_210].first_delivery_ms + 1);
    let expected = rows.iter().filter(|r| (since..until).contains(&r.first_delivery_ms)).count();
    assert!(expected >= 11);
    assert_eq!(period(&journal, since, until).len(), expected);
}

fn files_in_both_formats(b: &dyn Backend) {
    let journal = open(&b.url("files"));
    handle(&journal, &refund(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    handle(&journal, &payout(900_002, 2, 1500), r#"{"payout":{"success":false,"errorMessage":"line one\nline, two"}}"#);
    let dir = TempDir::new("slotpartner-export-files");
    let csv = dir.path().join("deliveries.csv");
    let mut progress = 0;
    assert_eq!(journal.export_to_file(i64::MIN, i64::MAX, ExportFormat::Csv, &csv, &mut |_| progress += 1).unwrap(), 2);
    assert_eq!(progress, 2);
    let text = std::fs::read_to_string(&csv).unwrap();
    let records = parse_csv(&text);
    assert_eq!(records[0], EXPORT_COLUMNS);
    assert_eq!(records.len(), 3);
    let column =
        |record: &Vec<String>, name: &str| record[EXPORT_COLUMNS.iter().position(|c| *c == name).unwrap()].clone();
    assert_eq!(column(&records[1], "moneyWon"), "");
    assert_eq!(column(&records[1], "outcome"), "success");
    assert_eq!(column(&records[2], "playerIdentifier"), "player, \"one\"");
    assert_eq!(column(&records[2], "errorMessage"), "line one\nline, two");
    assert_eq!(column(&records[2], "moneyWon"), "1500");
    assert_eq!(column(&records[2], "isMoney"), "true");
    assert!(column(&records[2], "first_delivery").ends_with('Z'));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&csv).unwrap().permissions().mode() & 0o777, 0o600);

    // Never over an existing file; nothing is left behind.
    let again = journal.export_to_file(i64::MIN, i64::MAX, ExportFormat::Jsonl, &csv, &mut |_| {}).unwrap_err();
    assert_eq!((again.kind, again.field.as_str()), (ErrorKind::InvalidArgument, "path"));
    assert!(again.message.contains("exists"), "{again}");
    let missing = journal
        .export_to_file(i64::MIN, i64::MAX, ExportFormat::Csv, &dir.path().join("no/such/folder.csv"), &mut |_| {})
        .unwrap_err();
    assert_eq!(missing.field, "path");
    let jsonl = dir.path().join("deliveries.jsonl");
    assert_eq!(journal.export_to_file(i64::MIN, i64::MAX, ExportFormat::Jsonl, &jsonl, &mut |_| {}).unwrap(), 2);
    let objects: Vec<serde_json::Value> =
        std::fs::read_to_string(&jsonl).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((objects[1]["moneyWon"].as_i64(), objects[0]["moneyWon"].is_null()), (Some(1500), true));
    assert_eq!(objects[1]["transactionId"], 900_002);
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
}

fn an_export_holds_off_retention_and_other_exports(b: &dyn Backend) {
    let journal = open(&b.url("lock"));
    handle(&journal, &refund(1, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    handle(&journal, &payout(2, 2, 100), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    let retention = PruneOptions::older_than(std::time::Duration::from_secs(86_400));
    let mut seen = 0;
    let rows = journal
        .export(i64::MIN, i64::MAX, &mut |_| {
            seen += 1;
            let second = journal.export(i64::MIN, i64::MAX, &mut |_| Ok(())).unwrap_err();
            assert_eq!((second.kind, second.field.as_str()), (ErrorKind::Busy, "lock"), "{second}");
            assert!(second.message.contains("another export of this journal is running"), "{second}");
            let report = journal.prune(&retention).unwrap();
            assert!(
                !report.complete && report.stopped_by.as_deref().is_some_and(|s| s.contains("export")),
                "{report:?}"
            );
            Ok(())
        })
        .unwrap();
    assert_eq!((rows, seen), (2, 2));
    // Released at the end, after an error of the callback too.
    assert!(
        journal.export(i64::MIN, i64::MAX, &mut |_| Err(slotpartner::Error::new(ErrorKind::Journal, "stop"))).is_err()
    );
    assert_eq!(journal.export(i64::MIN, i64::MAX, &mut |_| Ok(())).unwrap(), 2);
    let report = journal.prune(&retention).unwrap();
    assert!(report.complete && report.stopped_by.is_none(), "{report:?}");
}

/// Retention compacts old deliveries for real (the wall clock of this thread set back for them,
/// which SQLite's journal reads): they export as compact records with their kept outcome.
#[test]
fn compacted_deliveries_export_what_retention_kept() {
    let dir = TempDir::new("slotpartner-export-pruned");
    let journal = open(&format!("sqlite:{}", dir.path().join("journal.db").display()));
    let day = 86_400_000;
    slotpartner::journal::shift_wall_clock_for_tests(-3 * day);
    handle(&journal, &refund(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    handle(&journal, &payout(900_002, 2, 1500), r#"{"payout":{"success":false,"errorMessage":"closed"}}"#);
    slotpartner::journal::shift_wall_clock_for_tests(0);
    handle(&journal, &payout(900_003, 3, 700), r#"{"payout":{"success":true,"errorMessage":""}}"#);
    let report = journal.prune(&PruneOptions::older_than(std::time::Duration::from_secs(86_400))).unwrap();
    assert_eq!(report.compacted, 2, "{report:?}");
    let mut rows = all(&journal);
    rows.sort_by_key(|r| r.transaction_id);
    let summary: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.transaction_id.unwrap(),
                r.state.as_str(),
                r.outcome.as_str(),
                r.money_won,
                r.player_identifier.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (900_001, "pruned", "success", None, false),
            (900_002, "pruned", "failure", None, false),
            (900_003, "done", "success", Some(700), true),
        ]
    );
    let compact = &rows[1];
    assert_eq!(
        (compact.key.as_str(), compact.index, compact.error_message.as_deref()),
        ("jackpotPayout:900002", Some(2), None)
    );
    assert!(compact.finished_ms.is_some() && compact.first_delivery_ms < rows[2].first_delivery_ms - 2 * day);
}

/// RFC 4180 read back: quoted fields with doubled quotes, CRLF between records.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') => assert_eq!(chars.next(), Some('\n'), "CRLF"),
            (false, '\n') => panic!("a bare LF ends no record"),
            (false, c) => field.push(c),
        }
        if !quoted && c == '\r' {
            record.push(std::mem::take(&mut field));
            records.push(std::mem::take(&mut record));
        }
    }
    assert!(record.is_empty() && field.is_empty(), "the last record ends with CRLF");
    records
}

// ---------------------------------------------------------------------------------------------
// The C ABI

fn last_error() -> (String, String) {
    let mut out = MaybeUninit::<sp_error>::uninit();
    // SAFETY: a writable out-parameter, written on SP_OK; the views live until the next call.
    unsafe {
        assert_eq!(sp_last_error(out.as_mut_ptr()), SP_OK, "a last error");
        let e = out.assume_init();
        let text = |s: slotpartner::ffi::str::sp_str| {
            String::from_utf8_lossy(std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len)).into_owned()
        };
        (text(e.field), text(e.message))
    }
}

fn refused(got: sp_status, field: &str) {
    let (got_field, message) = last_error();
    assert_eq!(got, SP_ERR_INVALID_ARGUMENT, "{message}");
    assert_eq!(got_field, field, "{message}");
}

fn c_journal(url: &str) -> *mut sp_journal {
    let url = CString::new(url).unwrap();
    let (mut config, mut journal) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers; the configuration is freed once the journal is open.
    unsafe {
        assert_eq!(sp_journal_config_new(url.as_ptr(), &mut config), SP_OK);
        assert_eq!(sp_journal_open(config, &mut journal), SP_OK);
        sp_journal_config_free(config);
    }
    journal
}

#[test]
fn the_c_abi_writes_a_file_and_refuses_what_it_cannot() {
    let dir = TempDir::new("slotpartner-export-ffi");
    let url = format!("sqlite:{}", dir.path().join("journal.db").display());
    let journal = c_journal(&url);
    let rust = open(&url);
    handle(&rust, &refund(900_001, 1), r#"{"refund":{"success":true,"errorMessage":""}}"#);
    handle(&rust, &payout(900_002, 2, 1500), r#"{"payout":{"success":false,"errorMessage":"no"}}"#);
    let path = |name: &str| CString::new(dir.path().join(name).to_str().unwrap()).unwrap();
    let csv = path("out.csv");
    let export = |format: i32, file: &CStr, rows: *mut u64| {
        // SAFETY: a live journal, NUL-terminated path, NULL or writable rows.
        unsafe { sp_journal_export(journal, i64::MIN, i64::MAX, format, file.as_ptr(), rows) }
    };
    let mut rows = 77_u64;
    refused(export(0, &csv, &mut rows), "format");
    refused(export(3, &csv, &mut rows), "format");
    refused(export(-1, &csv, &mut rows), "format");
    // SAFETY: NULL arguments are refused, never dereferenced.
    unsafe {
        refused(sp_journal_export(journal, 0, i64::MAX, 1, ptr::null(), &mut rows), "path");
        refused(sp_journal_export(ptr::null(), 0, i64::MAX, 1, csv.as_ptr(), &mut rows), "journal");
        refused(sp_journal_export(journal, 10, 10, 1, csv.as_ptr(), &mut rows), "until_ms");
        refused(sp_journal_export(journal, 0, i64::MAX, 1, c"".as_ptr(), &mut rows), "path");
        refused(sp_journal_export(journal, 0, i64::MAX, 1, c"/no/such/folder/x.csv".as_ptr(), &mut rows), "path");
    }
    assert_eq!(rows, 77, "rows_out is written only on success");
    assert_eq!(export(sp_export_format::SP_EXPORT_CSV as i32, &csv, &mut rows), SP_OK);
    assert_eq!(rows, 2);
    let records = parse_csv(&std::fs::read_to_string(dir.path().join("out.csv")).unwrap());
    assert_eq!(records.len(), 3);
    refused(export(1, &csv, &mut rows), "path");
    assert!(last_error().1.contains("exists"));
    assert_eq!(export(sp_export_format::SP_EXPORT_JSONL as i32, &path("out.jsonl"), ptr::null_mut()), SP_OK);
    let text = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 2);
    let payout: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!((payout["outcome"].as_str(), payout["errorMessage"].as_str()), (Some("failure"), Some("no")));
    // SAFETY: the journal came from sp_journal_open and is not used afterwards.
    unsafe { sp_journal_free(journal) };
}
