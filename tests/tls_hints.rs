//! A TLS failure says what to do: real TLS servers on loopback present wrong certificates (a CA
//! certificate as their own, a certificate for another name, an expired one, one from a CA the
//! client does not trust) or no TLS at all, and the client's error keeps `ErrorKind::Tls` (or the
//! kind it had) while its message names the cause and the remedy. The error also carries its
//! cause (`Cause::Tls`, `Cause::HttpStatus`), for a caller that words its own advice.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use slotpartner::client::{Client, ClientConfig, TlsProblem, TrustRoots};
use slotpartner::error::Cause;
use slotpartner::{Error, ErrorKind};
use slotpartner_sandbox::DEFAULT_TOKEN;
use slotpartner_sandbox::http::{self, Handler, ListenerHandle, Response};

const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// A certificate authority that signs the test's leaf certificates.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
}

fn ca(name: &str) -> Ca {
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca { pem: cert.pem(), der: cert.der().clone(), issuer: Issuer::new(params, key) }
}

/// A server certificate for `names` signed by `ca`, valid from `not_before` to `not_after` (years
/// from now, negative in the past).
fn leaf(ca: &Ca, names: &[&str], years: (i64, i64)) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, names[0]);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let now = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
    let at = |years: i64| {
        let shift = YEAR * years.unsigned_abs() as u32;
        if years < 0 { now - shift } else { now + shift }
    };
    params.not_before = at(years.0);
    params.not_after = at(years.1);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (vec![cert.der().clone(), ca.der.clone()], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
}

/// A TLS server on loopback presenting `chain`, answering every request with an empty game list.
fn tls_server(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> ListenerHandle {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    serve(Some(Arc::new(config)))
}

fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> ListenerHandle {
    slotpartner_sandbox::quiet_logs();
    let handler: Handler = Arc::new(|_| Response::json(200, &json!({"games": []})));
    http::spawn(TcpListener::bind("127.0.0.1:0").unwrap(), tls, "tls-hints", handler).unwrap()
}

/// `getGames` against `server` under the name `host`, trusting only `ca_pem`.
fn get_games(server: &ListenerHandle, host: &str, ca_pem: &str) -> Result<usize, Error> {
    let mut config = ClientConfig::new(&format!("https://{host}:{}", server.addr().port()), DEFAULT_TOKEN)?;
    config.set_trust_roots(TrustRoots::ExtraOnly);
    config.add_ca_pem(ca_pem.as_bytes())?;
    config.set_retries(0, Duration::ZERO)?;
    config.set_timeout(Duration::from_secs(10))?;
    Client::new(config)?.get_games("en-US", None).map(|games| games.len())
}

/// The failure names `cause` and gives `hint`, and carries `problem` with the transport's words:
/// the message is those words followed by the problem's hint.
fn assert_tls_hint(result: Result<usize, Error>, cause: &str, hint: &str, problem: TlsProblem) {
    let err = result.expect_err("the handshake must fail");
    assert_eq!(err.kind, ErrorKind::Tls, "{err}");
    assert!(err.message.contains(cause), "the cause {cause:?} is kept: {err}");
    assert!(err.message.contains(hint), "the hint {hint:?} is given: {err}");
    let Some(Cause::Tls { problem: carried, detail }) = err.cause.as_deref() else { panic!("no TLS cause: {err:?}") };
    assert_eq!(*carried, problem, "{err}");
    assert_eq!(err.message, format!("getGames: {detail}. {}", problem.hint()));
    assert!(!err.message.contains("sp_"), "no C function in a message every binding shows: {err}");
}

#[test]
fn a_correct_server_is_reached() {
    let ca = ca("tls-hints CA");
    let (chain, key) = leaf(&ca, &["localhost", "127.0.0.1"], (-1, 1));
    let server = tls_server(chain, key);
    assert_eq!(get_games(&server, "127.0.0.1", &ca.pem).unwrap(), 0);
    assert_eq!(get_games(&server, "localhost", &ca.pem).unwrap(), 0);
}

#[test]
fn a_ca_certificate_presented_as_the_servers_own_says_to_sign_a_leaf() {
    let ca = ca("tls-hints CA as server");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ca.issuer.key().serialize_der()));
    let server = tls_server(vec![ca.der.clone()], key);
    assert_tls_hint(
        get_games(&server, "127.0.0.1", &ca.pem),
        "CaUsedAsEndEntity",
        "The server presents a CA certificate as its own: sign a leaf certificate",
        TlsProblem::CaUsedAsEndEntity,
    );
}

#[test]
fn a_certificate_for_another_name_says_it_does_not_name_this_host() {
    let ca = ca("tls-hints CA");
    let (chain, key) = leaf(&ca, &["service.example"], (-1, 1));
    let server = tls_server(chain, key);
    for host in ["127.0.0.1", "localhost"] {
        assert_tls_hint(
            get_games(&server, host, &ca.pem),
            "not valid for name",
            "The certificate does not name this host",
            TlsProblem::NotValidForName,
        );
    }
}

#[test]
fn an_untrusted_issuer_says_to_add_the_ca() {
    let (ca, other) = (ca("tls-hints CA"), ca("another CA"));
    let (chain, key) = leaf(&ca, &["127.0.0.1"], (-1, 1));
    let server = tls_server(chain, key);
    assert_tls_hint(
        get_games(&server, "127.0.0.1", &other.pem),
        "UnknownIssuer",
        "add that CA with ca_file / ca_pem",
        TlsProblem::UnknownIssuer,
    );
    assert!(get_games(&server, "127.0.0.1", &ca.pem).is_ok());
}

#[test]
fn an_expired_or_future_certificate_says_so() {
    let ca = ca("tls-hints CA");
    let (chain, key) = leaf(&ca, &["127.0.0.1"], (-3, -1));
    let server = tls_server(chain, key);
    assert_tls_hint(
        get_games(&server, "127.0.0.1", &ca.pem),
        "expired",
        "The server's certificate has expired",
        TlsProblem::Expired,
    );
    let (chain, key) = leaf(&ca, &["127.0.0.1"], (1, 2));
    let server = tls_server(chain, key);
    assert_tls_hint(
        get_games(&server, "127.0.0.1", &ca.pem),
        "not valid yet",
        "is not valid yet: check this machine's clock",
        TlsProblem::NotValidYet,
    );
}

#[test]
fn plain_http_at_an_https_address_asks_whether_tls_listens_there() {
    let server = serve(None);
    let ca = ca("tls-hints CA");
    let err = get_games(&server, "127.0.0.1", &ca.pem).expect_err("no TLS there");
    assert_eq!(err.kind, ErrorKind::Tls, "{err}");
    assert!(err.message.contains("Is a TLS server listening at this address?"), "{err}");
    assert!(matches!(err.cause.as_deref(), Some(Cause::Tls { problem: TlsProblem::NotTls, .. })), "{err:?}");
}

#[test]
fn the_problem_is_read_from_a_request_of_the_callers_own() {
    // A caller posting with its own ureq agent (as the operator command does to a partner's
    // endpoint) reads the same problem from its error.
    let (ca, other) = (ca("tls-hints CA"), ca("another CA"));
    let (chain, key) = leaf(&ca, &["127.0.0.1"], (-1, 1));
    let server = tls_server(chain, key);
    let roots = vec![ureq::tls::Certificate::from_der(other.der.as_ref()).to_owned()];
    let tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder().tls_config(tls).build().into();
    let error = agent.post(format!("https://127.0.0.1:{}/", server.addr().port())).send("{}").unwrap_err();
    assert_eq!(TlsProblem::of(&error), Some(TlsProblem::UnknownIssuer), "{error}");
    let not_tls = std::io::Error::other("connection reset");
    assert_eq!(TlsProblem::of(&not_tls), None);
}

#[test]
fn a_refused_token_carries_the_http_status() {
    slotpartner_sandbox::quiet_logs();
    let service = slotpartner_sandbox::run_server(slotpartner_sandbox::ServerConfig::default()).unwrap();
    let mut config = ClientConfig::new(&service.base_url(), "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f").unwrap();
    config.add_ca_pem(service.ca_pem().as_bytes()).unwrap();
    config.set_retries(0, Duration::ZERO).unwrap();
    let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::HttpStatus, "{err}");
    assert_eq!(err.cause.as_deref(), Some(&Cause::HttpStatus(401)), "{err}");
    assert!(err.message.contains("HTTP 401"), "{err}");
}
