//! Throw-away certificate authority and `localhost` server certificate,
//! generated at every start, and the rustls server configuration using them.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Common name of the generated CA certificate.
pub const CA_COMMON_NAME: &str = "slotpartner-sandbox CA";

/// Names the server certificate is valid for.
pub const SERVER_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

const DAY: Duration = Duration::from_secs(86_400);

/// The generated certificates.
pub struct Certificates {
    /// PEM of the CA certificate: the trust root a client needs.
    pub ca_pem: String,
    /// DER of the CA certificate.
    pub ca_der: CertificateDer<'static>,
    /// rustls server configuration presenting the server certificate (and the CA).
    pub server_config: Arc<rustls::ServerConfig>,
}

/// Generates a fresh CA and a server certificate for localhost signed by it.
pub fn generate() -> Result<Certificates, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    let now = rcgen::date_time_ymd(1970, 1, 1)
        + SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| err("clock before 1970", &e))?;

    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA parameters", &e))?;
    ca_params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca_params.not_before = now - DAY;
    ca_params.not_after = now + 5 * 365 * DAY;
    let ca_key = KeyPair::generate().map_err(|e| err("CA key", &e))?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| err("CA certificate", &e))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let names: Vec<String> = SERVER_NAMES.iter().map(|s| s.to_string()).collect();
    let mut params = CertificateParams::new(names).map_err(|e| err("server parameters", &e))?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // Short enough for clients that cap server certificate lifetimes.
    params.not_before = now - DAY;
    params.not_after = now + 365 * DAY;
    let key = KeyPair::generate().map_err(|e| err("server key", &e))?;
    let cert = params.signed_by(&key, &issuer).map_err(|e| err("server certificate", &e))?;

    let chain = vec![cert.der().clone(), ca_cert.der().clone()];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("TLS versions", &e))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| err("TLS server configuration", &e))?;
    // Only HTTP/1.1 is served; tell ALPN-capable clients so they do not try h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];

    Ok(Certificates { ca_pem: ca_cert.pem(), ca_der: ca_cert.der().clone(), server_config: Arc::new(config) })
}
