//! The PostgreSQL journal over TLS, with libpq's `sslmode` and `sslrootcert` in its URL: a
//! throw-away cluster on loopback serves a certificate for `localhost` alone, signed by a CA this
//! test makes; another cluster offers no TLS. A URL that checks what the server presents works
//! (a delivery begun and finished, over a connection the server reports as TLS); a wrong CA, a
//! wrong host name and a server without TLS are refused with a message that names the cause and
//! the URL parameter to change, and never the password.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use slotpartner::journal::{Begin, Delivery, Journal, JournalOptions};
use slotpartner::{Error, ErrorKind, ParseOptions, parse};

#[path = "e2e/cluster.rs"]
mod cluster;
use cluster::{Cluster, TempDir};

/// A certificate authority of the test's own.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
}

/// A server certificate for `names`, signed by `ca`: the chain (leaf, then CA) and the key, in PEM.
fn server_cert(ca: &Ca, names: &[&str]) -> (String, String) {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, names[0]);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (format!("{}{}", cert.pem(), ca.pem), key.serialize_pem())
}

fn refund(transaction_id: i64) -> Delivery {
    let body = format!(
        r#"{{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-{transaction_id}","playerIdentifier":"player-1","transactionId":{transaction_id},"buyTransactionId":{},"gameSessionId":5,"partnerGameRequestIdentifier":"req-{transaction_id}","gameId":7,"isMobile":false,"index":{transaction_id}}}"#,
        transaction_id + 1_000_000
    );
    Delivery::of(&parse(body.as_bytes(), &ParseOptions::default()).expect("a valid body"))
}

fn options() -> JournalOptions {
    JournalOptions { lock_timeout: Duration::from_secs(5), ..Default::default() }
}

/// A URL of the cluster listening on `port`, by `host`, with `query` (and an `application_name`
/// of `case`, by which the server's view of the connections is found).
fn url(host: &str, port: u16, case: &str, query: &str) -> String {
    format!("postgres://postgres:s3cret@{host}:{port}/postgres?application_name={case}&{query}")
}

/// Opens the journal at `url` and runs one delivery from begin to finish, then its repeat.
fn deliver(url: &str, transaction_id: i64) -> Result<(), Error> {
    let journal = Journal::open(url, &options())?;
    let delivery = refund(transaction_id);
    let reply = br#"{"refund":{"success":true,"errorMessage":""}}"#;
    match journal.begin(&delivery)? {
        Begin::New(claim) => journal.finish(&claim, reply)?,
        other => panic!("{url}: expected a new claim, got {other:?}"),
    }
    match journal.begin(&delivery)? {
        Begin::Done(stored) => assert_eq!(stored, reply),
        other => panic!("{url}: expected the stored reply, got {other:?}"),
    }
    Ok(())
}

/// Whether the server sees the connections of `case` as TLS (`pg_stat_ssl`); `None` when it sees
/// none of them.
fn over_tls(cluster: &Cluster, case: &str) -> Option<bool> {
    let row = cluster
        .client()
        .query_one(
            "SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&case],
        )
        .expect("pg_stat_ssl");
    let count: i64 = row.get(0);
    (count > 0).then(|| row.get(1))
}

/// The refusal of `url`: a journal error whose message holds each of `needles` and not the password.
fn refused(url: &str, transaction_id: i64, needles: &[&str]) -> String {
    let error = deliver(url, transaction_id).err().unwrap_or_else(|| panic!("{url} was not refused"));
    assert_eq!(error.kind, ErrorKind::Journal, "{url}: {error}");
    for needle in needles {
        assert!(error.message.contains(needle), "{url}: {needle:?} is not in: {}", error.message);
    }
    assert!(!error.message.contains("s3cret"), "{url}: the password is in: {}", error.message);
    error.message
}

#[test]
fn postgres_journal_over_tls() {
    let Some(cluster) = Cluster::start("PostgreSQL over TLS") else { return };
    let right = ca("slotpartner test CA");
    let wrong = ca("another CA");
    let (chain, key) = server_cert(&right, &["localhost"]);
    cluster.enable_tls(&chain, &key);
    let files = TempDir::new("slotpartner-pg-tls");
    let right_pem = files.path().join("right-ca.pem");
    let wrong_pem = files.path().join("wrong-ca.pem");
    std::fs::write(&right_pem, &right.pem).unwrap();
    std::fs::write(&wrong_pem, &wrong.pem).unwrap();
    let (right_pem, wrong_pem) = (right_pem.display().to_string(), wrong_pem.display().to_string());
    let port = cluster.port();

    // The certificate's name, the right CA: works, encrypted. `hostaddr` keeps the connection on
    // 127.0.0.1 (where the server listens) while `localhost` is the name checked.
    let case = "verify_full_ok";
    let good = url("localhost", port, case, &format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={right_pem}"));
    deliver(&good, 1).unwrap_or_else(|e| panic!("{good}: {e}"));
    assert_eq!(over_tls(&cluster, case), Some(true), "the journal's connections are TLS");

    // Another CA: the chain does not verify.
    let query = format!("hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={wrong_pem}");
    refused(&url("localhost", port, "wrong_ca", &query), 2, &["not signed by", "sslrootcert", &wrong_pem]);

    // By address, where the certificate names `localhost` alone.
    let query = format!("sslmode=verify-full&sslrootcert={right_pem}");
    let message = refused(
        &url("127.0.0.1", port, "wrong_name", &query),
        3,
        &["does not name the host", "localhost", "127.0.0.1", "sslmode=verify-ca"],
    );
    assert!(message.contains(&format!("127.0.0.1:{port}/postgres")), "the message names the journal: {message}");

    // verify-ca checks the chain alone: the same address passes, another CA does not.
    let case = "verify_ca_ok";
    let ca_only = url("127.0.0.1", port, case, &format!("sslmode=verify-ca&sslrootcert={right_pem}"));
    deliver(&ca_only, 4).unwrap_or_else(|e| panic!("{ca_only}: {e}"));
    assert_eq!(over_tls(&cluster, case), Some(true));
    let query = format!("sslmode=verify-ca&sslrootcert={wrong_pem}");
    refused(&url("127.0.0.1", port, "verify_ca_wrong", &query), 5, &["not signed by", "sslrootcert"]);

    // require encrypts without checking; with sslrootcert it checks the chain, as libpq's does.
    let case = "require_ok";
    let require = url("127.0.0.1", port, case, "sslmode=require");
    deliver(&require, 6).unwrap_or_else(|e| panic!("{require}: {e}"));
    assert_eq!(over_tls(&cluster, case), Some(true));
    let query = format!("sslmode=require&sslrootcert={wrong_pem}");
    refused(&url("127.0.0.1", port, "require_wrong_ca", &query), 7, &["not signed by", "sslrootcert"]);

    // prefer (libpq's default, also with no sslmode at all) takes the TLS the server offers.
    for (case, query) in [("prefer_tls", "sslmode=prefer"), ("default_tls", "connect_timeout=5")] {
        let prefer = url("127.0.0.1", port, case, query);
        deliver(&prefer, if case == "prefer_tls" { 8 } else { 9 }).unwrap_or_else(|e| panic!("{prefer}: {e}"));
        assert_eq!(over_tls(&cluster, case), Some(true), "{case}");
    }

    // disable stays plain, even against a server with TLS.
    let case = "disable_plain";
    deliver(&url("127.0.0.1", port, case, "sslmode=disable"), 10).unwrap();
    assert_eq!(over_tls(&cluster, case), Some(false));
}

#[test]
fn postgres_journal_without_tls_on_the_server() {
    let Some(cluster) = Cluster::start("PostgreSQL without TLS") else { return };
    let ca = ca("slotpartner test CA");
    let files = TempDir::new("slotpartner-pg-notls");
    let ca_pem = files.path().join("ca.pem");
    std::fs::write(&ca_pem, &ca.pem).unwrap();
    let port = cluster.port();

    for query in ["sslmode=require".to_owned(), format!("sslmode=verify-full&sslrootcert={}", ca_pem.display())] {
        refused(&url("127.0.0.1", port, "no_tls", &query), 1, &["does not offer TLS", "sslmode=prefer"]);
    }

    // prefer falls back to plain text, as libpq's does.
    let case = "prefer_plain";
    let prefer = url("127.0.0.1", port, case, "sslmode=prefer");
    deliver(&prefer, 2).unwrap_or_else(|e| panic!("{prefer}: {e}"));
    assert_eq!(over_tls(&cluster, case), Some(false));
}

#[test]
fn tls_parameters_are_checked_before_connecting() {
    // Nothing listens on port 9 of loopback: each refusal comes from the URL alone.
    for (query, needles) in [
        ("sslmode=verify-ca", &["sslmode=verify-ca needs sslrootcert=FILE"][..]),
        ("sslmode=require&sslrootcert=system", &["sslrootcert=system allows only sslmode=verify-full"][..]),
        ("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", &["sslrootcert: cannot read /nonexistent/ca.pem"][..]),
        ("sslmode=verify-fll", &["sslmode=\"verify-fll\" is not one of"][..]),
        ("sslcert=client.pem", &["sslcert is not supported"][..]),
    ] {
        let url = url("127.0.0.1", 9, "refused", query);
        let error = Journal::open(&url, &options()).err().unwrap_or_else(|| panic!("{url} was accepted"));
        assert_eq!(error.kind, ErrorKind::InvalidArgument, "{url}: {error}");
        assert_eq!(error.field, "journal_url");
        for needle in needles {
            assert!(error.message.contains(needle), "{url}: {needle:?} is not in: {}", error.message);
        }
        assert!(!error.message.contains("s3cret"), "{}", error.message);
    }
}
