//! `slotpartner-sandbox`: a local stand-in of the slot-machine game service.
//!
//! [`run_server`] starts the HTTPS action address (and optionally the plain
//! HTTP listener that always answers 401) in the background; the [`send`]
//! module posts callback events to a partner URL and judges the replies, and
//! [`burst`] sends many of them with losses, repeats and reordering, built
//! deterministically by index so that the server can answer `getEvent`.

#![forbid(unsafe_code)]

pub mod actions;
pub mod burst;
pub mod catalogue;
pub mod http;
pub mod send;
pub mod tls;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;

/// Turns off the request log on standard error for the whole process (for test suites that run
/// the sandbox in-process).
pub fn quiet_logs() {
    http::QUIET.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Partner token accepted when none is configured.
pub const DEFAULT_TOKEN: &str = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";

/// What to serve.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// HTTPS listen address (loopback only; port 0 picks a free port).
    pub listen: SocketAddr,
    /// Optional plain HTTP listener that answers every request with 401.
    pub http_listen: Option<SocketAddr>,
    /// The accepted `X-Service-Token` value.
    pub token: String,
    /// The events `getEvent` answers by index (those of a `send --burst` with
    /// the same seed, kind and range); `None`: every index is unknown.
    pub events: Option<burst::EventSet>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            http_listen: None,
            token: DEFAULT_TOKEN.to_string(),
            events: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug)]
pub enum ServerError {
    /// A listen address outside 127.0.0.0/8 and ::1.
    NotLoopback(SocketAddr),
    /// Certificate generation failed.
    Tls(String),
    /// Binding or starting a listener failed.
    Io(SocketAddr, std::io::Error),
    /// The `events` range is invalid.
    Events(String),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::NotLoopback(a) => {
                write!(f, "{a} is not a loopback address; the sandbox listens only on 127.0.0.0/8 or ::1")
            }
            ServerError::Tls(e) => write!(f, "certificate generation failed: {e}"),
            ServerError::Io(a, e) => write!(f, "cannot listen on {a}: {e}"),
            ServerError::Events(e) => write!(f, "events: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

/// A running sandbox; dropping it (or [`ServerHandle::shutdown`]) stops the
/// listeners.
pub struct ServerHandle {
    https: http::ListenerHandle,
    http: Option<http::ListenerHandle>,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
}

impl ServerHandle {
    /// The bound HTTPS address.
    pub fn https_addr(&self) -> SocketAddr {
        self.https.addr()
    }

    /// `https://127.0.0.1:PORT` (the `{base_url}` of the spec).
    pub fn base_url(&self) -> String {
        url_for("https", self.https.addr())
    }

    /// The bound plain HTTP address, if any.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(|h| h.addr())
    }

    /// `http://127.0.0.1:PORT`, if the plain listener runs.
    pub fn http_base_url(&self) -> Option<String> {
        self.http_addr().map(|a| url_for("http", a))
    }

    /// PEM of the generated CA certificate that signed the server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// DER of the generated CA certificate.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// Stops accepting connections.
    pub fn shutdown(self) {
        self.https.stop();
        if let Some(h) = &self.http {
            h.stop();
        }
    }
}

/// `scheme://host:port` for a socket address (IPv6 in brackets).
pub fn url_for(scheme: &str, addr: SocketAddr) -> String {
    format!("{scheme}://{addr}")
}

/// Starts the sandbox in background threads.
pub fn run_server(config: ServerConfig) -> Result<ServerHandle, ServerError> {
    for addr in std::iter::once(config.listen).chain(config.http_listen) {
        if !addr.ip().is_loopback() {
            return Err(ServerError::NotLoopback(addr));
        }
    }
    if let Some(events) = &config.events {
        events.validate().map_err(ServerError::Events)?;
    }
    let certs = tls::generate().map_err(ServerError::Tls)?;
    let bind = |addr| TcpListener::bind(addr).map_err(|e| ServerError::Io(addr, e));
    let https_listener = bind(config.listen)?;
    let http_listener = config.http_listen.map(bind).transpose()?;

    let (token, events) = (config.token.clone(), config.events);
    let handler: http::Handler = Arc::new(move |req| actions::handle_with(req, &token, events.as_ref()));
    let https = http::spawn(https_listener, Some(Arc::clone(&certs.server_config)), "https", handler)
        .map_err(|e| ServerError::Io(config.listen, e))?;
    let http = match http_listener {
        Some(listener) => {
            let addr = listener.local_addr().map_err(|e| ServerError::Io(config.listen, e))?;
            let handler: http::Handler = Arc::new(actions::handle_plain);
            Some(http::spawn(listener, None, "http", handler).map_err(|e| ServerError::Io(addr, e))?)
        }
        None => None,
    };
    Ok(ServerHandle { https, http, ca_pem: certs.ca_pem, ca_der: certs.ca_der })
}

/// Whether `s` is a UUID in its 8-4-4-4-12 hexadecimal text form.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_form() {
        assert!(is_uuid(DEFAULT_TOKEN));
        assert!(!is_uuid("6f1c2a3e8b7d4c5e9f102a3b4c5d6e7f"));
        assert!(!is_uuid("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7g"));
    }

    #[test]
    fn refuses_non_loopback() {
        let config = ServerConfig { listen: "0.0.0.0:0".parse().unwrap(), ..ServerConfig::default() };
        assert!(matches!(run_server(config), Err(ServerError::NotLoopback(_))));
    }

    #[test]
    fn url_forms() {
        assert_eq!(url_for("https", "127.0.0.1:8443".parse().unwrap()), "https://127.0.0.1:8443");
        assert_eq!(url_for("https", "[::1]:8443".parse().unwrap()), "https://[::1]:8443");
    }
}
