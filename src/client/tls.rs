//! What a failed TLS handshake was about, when its cause is one a partner can act on: the
//! problem (for a caller that words its own advice) and the library's own advice.

use rustls::CertificateError as Cert;

/// The cause of a TLS failure that has a remedy. A client error carries it in
/// [`Cause::Tls`](crate::error::Cause::Tls); [`TlsProblem::of`] reads it from the error of any
/// HTTPS request made with this library's `ureq` and `rustls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlsProblem {
    /// The server's certificate is not signed by a certificate authority the client trusts.
    UnknownIssuer,
    /// The server's certificate has expired (or this machine's clock is wrong).
    Expired,
    /// The server's certificate is not valid yet.
    NotValidYet,
    /// The certificate does not name the host the client asked for.
    NotValidForName,
    /// The certificate is not for TLS servers (no `serverAuth` extended key usage).
    InvalidPurpose,
    /// The certificate was revoked.
    Revoked,
    /// A certificate of the chain is not signed by its issuer.
    BadSignature,
    /// The server presents a CA certificate as its own.
    CaUsedAsEndEntity,
    /// The chain uses a leaf certificate as a CA.
    EndEntityUsedAsCa,
    /// What answered is not a TLS server (a plain HTTP server answers `https://` like this).
    NotTls,
}

impl TlsProblem {
    /// The problem inside `error`: a `rustls::Error`, a `ureq::Error` or an `std::io::Error`
    /// holding one (as the handshake wraps it), or anything whose sources lead to one. `None`
    /// when there is none, or its cause has no remedy to give.
    pub fn of(error: &(dyn std::error::Error + 'static)) -> Option<TlsProblem> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(tls) = error.downcast_ref::<rustls::Error>() {
                return TlsProblem::of_rustls(tls);
            }
            next = match (error.downcast_ref::<ureq::Error>(), error.downcast_ref::<std::io::Error>()) {
                (Some(ureq::Error::Rustls(tls)), _) => return TlsProblem::of_rustls(tls),
                (Some(ureq::Error::Io(io)), _) | (None, Some(io)) => {
                    // `io::Error::source` skips the error it wraps: read it directly.
                    io.get_ref().map(|inner| inner as &(dyn std::error::Error + 'static))
                }
                _ => error.source(),
            };
        }
        None
    }

    fn of_rustls(error: &rustls::Error) -> Option<TlsProblem> {
        let rustls::Error::InvalidCertificate(cert) = error else {
            return matches!(error, rustls::Error::InvalidMessage(_)).then_some(TlsProblem::NotTls);
        };
        Some(match cert {
            Cert::UnknownIssuer => TlsProblem::UnknownIssuer,
            Cert::Expired | Cert::ExpiredContext { .. } => TlsProblem::Expired,
            Cert::NotValidYet | Cert::NotValidYetContext { .. } => TlsProblem::NotValidYet,
            Cert::NotValidForName | Cert::NotValidForNameContext { .. } => TlsProblem::NotValidForName,
            Cert::InvalidPurpose | Cert::InvalidPurposeContext { .. } => TlsProblem::InvalidPurpose,
            Cert::Revoked => TlsProblem::Revoked,
            Cert::BadSignature => TlsProblem::BadSignature,
            Cert::Other(other) => {
                // rustls passes webpki's other errors through as `Other`, of a type this crate
                // does not depend on: its debug text names the webpki variant.
                let detail = format!("{other:?}");
                if detail.contains("CaUsedAsEndEntity") {
                    TlsProblem::CaUsedAsEndEntity
                } else if detail.contains("EndEntityUsedAsCa") {
                    TlsProblem::EndEntityUsedAsCa
                } else {
                    return None;
                }
            }
            _ => return None,
        })
    }

    /// What to do about it, in the client configuration's terms (`ca_file`, `ca_pem`,
    /// `base_url`): the sentence a client error's message ends with.
    pub fn hint(self) -> &'static str {
        match self {
            TlsProblem::UnknownIssuer => {
                "The server's certificate is not signed by a certificate authority this client trusts: add that CA \
                 with ca_file / ca_pem"
            }
            TlsProblem::Expired => {
                "The server's certificate has expired (or this machine's clock is wrong): the server must renew it"
            }
            TlsProblem::NotValidYet => {
                "The server's certificate is not valid yet: check this machine's clock (and the server's)"
            }
            TlsProblem::NotValidForName => {
                "The certificate does not name this host: use a host name the certificate names in base_url, or \
                 give the server a certificate that names this host"
            }
            TlsProblem::InvalidPurpose => {
                "The server's certificate is not for TLS servers: its extended key usage must include serverAuth"
            }
            TlsProblem::Revoked => "The server's certificate was revoked: the server needs a new one",
            TlsProblem::BadSignature => {
                "The server's certificate chain does not verify: a certificate is not signed by its issuer"
            }
            TlsProblem::CaUsedAsEndEntity => {
                "The server presents a CA certificate as its own: sign a leaf certificate for the server's name \
                 with that CA and serve it (followed by the CA)"
            }
            TlsProblem::EndEntityUsedAsCa => {
                "The server's chain uses a leaf certificate as a CA: serve the leaf signed by a real CA"
            }
            TlsProblem::NotTls => {
                "Is a TLS server listening at this address? (a plain HTTP server answers https:// like this)"
            }
        }
    }
}
