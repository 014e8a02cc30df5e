//! TLS to the PostgreSQL server, with libpq's URL parameters `sslmode` and `sslrootcert`, over
//! rustls (the ring provider) through `tokio-postgres-rustls`.
//!
//! The client's own URL parser (tokio-postgres') knows `sslmode=disable|prefer|require` and refuses
//! `verify-ca`, `verify-full` and `sslrootcert`: both parameters are taken out of the URL here,
//! interpreted as libpq does, and the rest of the URL goes to that parser.
//!
//! | `sslmode`              | without `sslrootcert`                         | `sslrootcert=FILE`     |
//! |------------------------|-----------------------------------------------|------------------------|
//! | `disable`              | plain                                         | plain                  |
//! | `prefer` (the default) | TLS if the server offers it, unchecked; plain | the same               |
//! | `require`              | TLS, the certificate unchecked                | TLS, the chain checked |
//! | `verify-ca`            | refused: it names no CA to check against      | TLS, the chain checked |
//! | `verify-full`          | TLS, chain and host name, the system's roots  | TLS, chain and host    |
//!
//! `sslrootcert=system` (libpq 16) trusts the system's roots and allows only `verify-full`, its
//! default. Where libpq reads `~/.postgresql/root.crt` when `sslrootcert` is absent, `verify-full`
//! here trusts the system's roots (`rustls-native-certs`: the OS store, or `SSL_CERT_FILE` /
//! `SSL_CERT_DIR`), and `require` stays unchecked. Connections over a Unix socket never use TLS
//! (the server offers none there), as with libpq.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::Config;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, ErrorKind, Result};

/// libpq's `sslmode`, but `allow` (plain first), which the client cannot do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Mode> {
        Ok(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            "allow" => {
                return Err(url_error(
                    "sslmode=allow (plain first, TLS only when the server insists) is not supported: use \
                     sslmode=prefer, or sslmode=verify-full where the traffic leaves the host",
                ));
            }
            other => {
                return Err(url_error(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// Where the trusted certificate authorities come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// `sslrootcert` absent.
    Unset,
    /// `sslrootcert=system`.
    System,
    /// `sslrootcert=PATH`: a PEM file of one or more CA certificates.
    File(String),
}

/// What is checked of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    Nothing,
    /// Signed by a trusted CA, valid now, for TLS servers; any host name.
    Chain,
    /// `Chain`, and it names the host the URL connects to.
    ChainAndName,
}

/// The TLS settings of one journal URL, and the connector that applies them.
pub(crate) struct Tls {
    mode: Mode,
    check: Check,
    roots: Roots,
    connector: MakeRustlsConnect,
}

fn url_error(problem: impl std::fmt::Display) -> Error {
    Error::field(ErrorKind::InvalidArgument, "journal_url", problem)
}

/// The TLS settings of the URL's `sslmode` and `sslrootcert` (`url::Own`), as libpq reads them.
pub(crate) fn from_params(sslmode: Option<&str>, sslrootcert: Option<&str>) -> Result<Tls> {
    Tls::new(sslmode, sslrootcert)
}

impl Tls {
    fn new(sslmode: Option<&str>, sslrootcert: Option<&str>) -> Result<Tls> {
        let roots = match sslrootcert {
            None | Some("") => Roots::Unset,
            Some("system") => Roots::System,
            Some(path) => Roots::File(path.to_owned()),
        };
        let mode = match sslmode {
            Some(value) => Mode::parse(value)?,
            None if roots == Roots::System => Mode::VerifyFull,
            None => Mode::Prefer,
        };
        let check = match (mode, &roots) {
            (_, Roots::System) if mode != Mode::VerifyFull => {
                return Err(url_error(format!(
                    "sslrootcert=system allows only sslmode=verify-full (its default), not sslmode={}: anyone can \
                     get a certificate from a public CA for a name of their own, so only the host name check \
                     makes those roots mean something",
                    mode.name()
                )));
            }
            (Mode::VerifyCa, Roots::Unset) => {
                return Err(url_error(
                    "sslmode=verify-ca needs sslrootcert=FILE, the certificate of the CA that signs the \
                     server's certificate: checking a chain against the system's public roots would accept any \
                     certificate they signed, for any host (use sslmode=verify-full for those)",
                ));
            }
            (Mode::Disable | Mode::Prefer, _) | (Mode::Require, Roots::Unset) => Check::Nothing,
            (Mode::Require | Mode::VerifyCa, _) => Check::Chain,
            (Mode::VerifyFull, _) => Check::ChainAndName,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::new(ErrorKind::Journal, format!("TLS to PostgreSQL: {e}")))?;
        let mut config = match check {
            Check::Nothing => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unchecked(provider.signature_verification_algorithms)))
                .with_no_client_auth(),
            Check::Chain => {
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(load_roots(&roots)?), provider)
                    .build()
                    .map_err(|e| url_error(format!("sslrootcert: {e}")))?;
                builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(webpki))).with_no_client_auth()
            }
            Check::ChainAndName => builder.with_root_certificates(load_roots(&roots)?).with_no_client_auth(),
        };
        // What libpq 17 sends, and PostgreSQL 17's direct TLS negotiation requires.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Tls { mode, check, roots, connector: MakeRustlsConnect::new(config) })
    }

    /// Sets `config`'s `sslmode` to what the client does: TLS or not, and whether it is required.
    pub(crate) fn configure(&self, config: &mut Config) {
        let only_sockets =
            !config.get_hosts().is_empty() && config.get_hosts().iter().all(|h| !matches!(h, Host::Tcp(_)));
        config.ssl_mode(match self.mode {
            _ if only_sockets => SslMode::Disable,
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        });
    }

    /// The connector to hand to `Config::connect` (with `sslmode=disable` it is never used).
    pub(crate) fn connector(&self) -> MakeRustlsConnect {
        self.connector.clone()
    }

    #[cfg(test)]
    pub(crate) fn check(&self) -> Check {
        self.check
    }

    /// What a failure to connect means and which URL parameter changes it, when TLS caused it.
    pub(crate) fn explain(&self, e: &tokio_postgres::Error) -> Option<String> {
        let mode = self.mode.name();
        // tokio-postgres' words when the server answers its TLS request with a no.
        if std::error::Error::source(e).is_some_and(|cause| cause.to_string() == "server does not support TLS") {
            return Some(format!(
                "the server does not offer TLS, which sslmode={mode} requires: turn on ssl in the server's \
                 postgresql.conf (with ssl_cert_file and ssl_key_file), or, only where the traffic never leaves a \
                 private network, set sslmode=prefer (plain text when the server offers no TLS) or sslmode=disable"
            ));
        }
        let tls = rustls_error(e)?;
        let trusted = match &self.roots {
            Roots::File(path) => format!("the CA certificates in sslrootcert ({path})"),
            Roots::System | Roots::Unset => {
                "this system's trusted roots (sslrootcert is not set, or is `system`)".to_owned()
            }
        };
        let rustls::Error::InvalidCertificate(cert) = tls else {
            return Some(match tls {
                rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
                    "the TLS handshake failed ({tls}): is this the PostgreSQL server? (TLS settings: sslmode={mode})"
                ),
                _ => {
                    format!("the TLS handshake failed ({tls}); TLS is set by the URL's sslmode={mode} and sslrootcert")
                }
            });
        };
        Some(match cert {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "the server's certificate is not signed by {trusted}: set sslrootcert to a PEM file holding the \
                 certificate of the CA that signs it (a managed service publishes its CA), or, only on a private \
                 network, sslmode=require without sslrootcert to encrypt without checking who answers"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                let names = match cert {
                    CertificateError::NotValidForNameContext { expected, presented } => format!(
                        " (it names {}, the URL connects to {})",
                        if presented.is_empty() {
                            "no host".to_owned()
                        } else {
                            presented.iter().map(|name| bare_name(name)).collect::<Vec<_>>().join(", ")
                        },
                        expected.to_str()
                    ),
                    _ => String::new(),
                };
                format!(
                    "the server's certificate does not name the host this URL connects to{names}: put a name the \
                     certificate names in the URL (a certificate names a host name or an IP address, not both \
                     alike), give the server a certificate for this name, or set sslmode=verify-ca to check the \
                     chain alone (any host that CA signed for would then pass)"
                )
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired (or this machine's clock is wrong): the server needs a new one"
                    .to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet: check this machine's clock (and the server's)".to_owned()
            }
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                "the server's certificate is not for TLS servers: its extended key usage must include serverAuth"
                    .to_owned()
            }
            other => {
                let what = match self.check {
                    Check::ChainAndName => "its chain and host name are",
                    Check::Chain | Check::Nothing => "its chain is",
                };
                format!(
                    "the server's certificate is refused ({other:?}): {what} checked against {trusted}, as \
                     sslmode={mode} and sslrootcert ask"
                )
            }
        })
    }
}

/// `localhost` of rustls' `DnsName("localhost")` (and `127.0.0.1` of `IpAddress(127.0.0.1)`).
fn bare_name(presented: &str) -> &str {
    match presented.split_once('(') {
        Some((_, inner)) => inner.trim_end_matches(')').trim_matches('"'),
        None => presented,
    }
}

/// The rustls error inside a failed connection's causes: `tokio-rustls` wraps it in an I/O error,
/// whose `source()` skips it, hence the `get_ref`.
fn rustls_error(e: &tokio_postgres::Error) -> Option<&rustls::Error> {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(tls) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        cause = c.source();
    }
    None
}

fn load_roots(roots: &Roots) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let pem = std::fs::read(path).map_err(|e| url_error(format!("sslrootcert: cannot read {path}: {e}")))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| url_error(format!("sslrootcert: {path} is not valid PEM ({e})")))?;
                store
                    .add(cert)
                    .map_err(|e| url_error(format!("sslrootcert: {path}: a certificate is unusable ({e})")))?;
            }
            if store.is_empty() {
                return Err(url_error(format!("sslrootcert: {path} holds no certificate")));
            }
        }
        Roots::System | Roots::Unset => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(url_error(format!(
                    "sslmode=verify-full without sslrootcert trusts the system's roots, and none was found ({}): \
                     set sslrootcert to the PEM file of the CA that signs the server's certificate",
                    found.errors.first().map_or_else(|| "an empty store".to_owned(), ToString::to_string)
                )));
            }
        }
    }
    Ok(store)
}

/// `verify-ca` (and `require` with `sslrootcert`): webpki's whole check but the host name, which
/// it makes last, after the chain.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without `sslrootcert`: encryption without knowing who answers, as
/// libpq's. The handshake's signatures are still checked against the presented certificate.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL without the parameters the journal takes, and the TLS settings they make.
    fn from_url(url: &str) -> Result<(String, Tls)> {
        let own = super::super::url::take_ours(url)?;
        Ok((own.rest, from_params(own.sslmode.as_deref(), own.sslrootcert.as_deref())?))
    }

    #[test]
    fn the_url_left_parses_and_the_mode_is_set() {
        let refused = from_url("postgres://u:secret@db.example:6432/app?sslmode=verify-ca&sslrootcert=system")
            .err()
            .expect("verify-ca with the system's roots")
            .message;
        assert!(refused.contains("sslrootcert=system allows only sslmode=verify-full"), "{refused}");
        assert!(!refused.contains("secret"), "{refused}");

        let (url, tls) = from_url("postgres://u@db.example/app?sslmode=require&connect_timeout=3").unwrap();
        let mut config: Config = url.parse().unwrap();
        tls.configure(&mut config);
        assert_eq!(config.get_ssl_mode(), SslMode::Require);
        assert_eq!(tls.check(), Check::Nothing);
        assert_eq!(config.get_connect_timeout(), Some(&std::time::Duration::from_secs(3)));

        let (url, tls) = from_url("postgres://u@db.example/app").unwrap();
        let mut config: Config = url.parse().unwrap();
        tls.configure(&mut config);
        assert_eq!(config.get_ssl_mode(), SslMode::Prefer, "libpq's default");

        let (url, tls) = from_url("postgres://u@%2Frun%2Fpostgresql/app?sslmode=verify-full").unwrap();
        let mut config: Config = url.parse().unwrap();
        tls.configure(&mut config);
        assert_eq!(config.get_ssl_mode(), SslMode::Disable, "no TLS over a Unix socket");
    }

    #[test]
    fn modes_and_roots_combine_as_in_libpq() {
        let tls = |query: &str| from_url(&format!("postgres://u@h/db?{query}")).map(|(_, tls)| tls);
        assert_eq!(tls("sslmode=disable").unwrap().check(), Check::Nothing);
        assert_eq!(tls("sslmode=prefer").unwrap().check(), Check::Nothing);
        assert_eq!(tls("sslmode=require").unwrap().check(), Check::Nothing);
        assert_eq!(tls("sslmode=verify-full&sslrootcert=system").unwrap().check(), Check::ChainAndName);
        assert_eq!(tls("sslrootcert=system").unwrap().check(), Check::ChainAndName, "system's default mode");
        for refused in ["sslmode=require&sslrootcert=system", "sslmode=prefer&sslrootcert=system"] {
            let e = tls(refused).err().expect(refused);
            assert!(e.message.contains("sslmode=verify-full"), "{}", e.message);
        }
        let e = tls("sslmode=verify-ca").err().expect("verify-ca without a CA");
        assert!(e.message.contains("sslrootcert=FILE"), "{}", e.message);
        let e = tls("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem").err().expect("a missing file");
        assert!(e.message.contains("sslrootcert") && e.message.contains("/nonexistent/ca.pem"), "{}", e.message);
        let e = tls("sslmode=required").err().expect("a misspelt mode");
        assert!(e.message.contains("sslmode=\"required\""), "{}", e.message);
        let e = tls("sslmode=allow").err().expect("allow");
        assert!(e.message.contains("sslmode=prefer"), "{}", e.message);
        let e = tls("sslcert=client.pem").err().expect("a client certificate");
        assert!(e.message.contains("sslcert is not supported"), "{}", e.message);
    }

    #[test]
    fn presented_names_lose_their_wrapping() {
        assert_eq!(bare_name("DnsName(\"localhost\")"), "localhost");
        assert_eq!(bare_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(bare_name("db.example"), "db.example");
    }
}
