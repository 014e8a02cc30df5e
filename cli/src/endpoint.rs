//! The partner's own callback endpoint, reached as the service reaches it: `recover` delivers
//! the lost events there, `check` sends it a balance query. And the two servers the command
//! talks to, for the advice a failure calls for ([`Peer`]).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use slotpartner::client::TlsProblem;
use slotpartner::error::Cause;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

use crate::Fail;
use crate::output::quoted;

/// The most bytes of the endpoint's answer read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// The endpoint's URL, the partner token it expects and the agent that posts to it.
pub struct Endpoint {
    pub url: String,
    /// Whether `url` is `https://` (`http://` is allowed to a loopback host only).
    pub https: bool,
    token: String,
    agent: ureq::Agent,
}

impl Endpoint {
    /// An endpoint at `url` (checked by [`check_url`]), trusting the bundled roots and those of
    /// `ca_file`; every request gives up after `timeout`. `command` names the caller in the
    /// User-Agent (`slotpartner-recover/0.1.0`).
    pub fn new(
        url: &str,
        ca_file: Option<&Path>,
        token: &str,
        timeout: Duration,
        command: &str,
    ) -> Result<Endpoint, Fail> {
        let https = check_url(url)?;
        let roots = roots(ca_file)?;
        let tls =
            TlsConfig::builder().provider(TlsProvider::Rustls).root_certs(RootCerts::Specific(Arc::new(roots))).build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent(format!("slotpartner-{command}/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(timeout))
            .tls_config(tls)
            .build()
            .into();
        Ok(Endpoint { url: url.to_owned(), https, token: token.to_owned(), agent })
    }
}

/// What the endpoint answered, its body read apart from its status: an answer whose body cannot
/// be read (over 64 KiB, not UTF-8, never ending within the time-out) still tells its status.
pub struct Answer {
    pub status: u16,
    /// The `Date` header, when it sent one.
    pub date: Option<String>,
    /// The `Location` header, when it sent one (a redirect).
    pub location: Option<String>,
    /// The body as text, at most 64 KiB of it; or why it could not be read.
    pub text: Result<String, String>,
}

impl Endpoint {
    /// POSTs `body` as the service would (its token in `X-Service-Token`, JSON in UTF-8),
    /// failing only when no answer came; a body that cannot be read is told in [`Answer::text`].
    pub fn post(&self, body: &str) -> Result<Answer, ureq::Error> {
        let mut response = self
            .agent
            .post(&self.url)
            .header("X-Service-Token", &self.token)
            .header("Content-Type", "application/json; charset=utf-8")
            .send(body)?;
        let status = response.status().as_u16();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (date, location) = (header("date"), header("location"));
        let text = match response.body_mut().with_config().limit(MAX_ANSWER_BYTES).read_to_vec() {
            Ok(bytes) => String::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned()),
            Err(ureq::Error::BodyExceedsLimit(_)) => Err(format!("over {} KiB", MAX_ANSWER_BYTES / 1024)),
            Err(ureq::Error::Timeout(_)) => Err("it did not end within --timeout".to_owned()),
            Err(e) => Err(e.to_string()),
        };
        Ok(Answer { status, date, location, text })
    }
}

/// A URL as the command shows it: without its user and password (`user:password@`), each query
/// value replaced by `...` (`?key=...`), without its fragment: a URL may carry a secret there,
/// and output is copied into tickets and logs. Text that is not a URL is shown up to its
/// authority's end, so that nothing after it leaks either.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.find('/') {
        Some(at) => before_query.split_at(at),
        None => (before_query, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let mut shown = format!("{scheme}{host}{path}");
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}=..."),
                None if pair.is_empty() => String::new(),
                None => "...".to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// `https://` anywhere, `http://` only to a loopback host (the token must not travel in
/// clear); whether it is `https://`.
pub fn check_url(url: &str) -> Result<bool, Fail> {
    let bad = |problem: String| Err(Fail(format!("--callback-url: {problem}")));
    let uri: ureq::http::Uri = match url.parse() {
        Ok(uri) => uri,
        Err(e) => return bad(format!("{} is not a URL ({e})", quoted(&shown_url(url)))),
    };
    let Some(host) = uri.host() else { return bad(format!("{} names no host", quoted(&shown_url(url)))) };
    match uri.scheme_str() {
        Some("https") => Ok(true),
        Some("http") => {
            let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>();
            if host.eq_ignore_ascii_case("localhost") || ip.is_ok_and(|ip| ip.to_canonical().is_loopback()) {
                Ok(false)
            } else {
                bad(format!(
                    "http:// only to a loopback host (the token would travel in clear), got {}",
                    quoted(&shown_url(url))
                ))
            }
        }
        _ => bad(format!("expected https:// (or http:// to a loopback host), got {}", quoted(&shown_url(url)))),
    }
}

/// The bundled roots and those of `ca_file`.
fn roots(ca_file: Option<&Path>) -> Result<Vec<Certificate<'static>>, Fail> {
    let mut roots: Vec<Certificate<'static>> =
        webpki_root_certs::TLS_SERVER_ROOT_CERTS.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect();
    if let Some(path) = ca_file {
        let shown = path.display();
        let pem = std::fs::read(path).map_err(|e| Fail(format!("--callback-ca-file: cannot read {shown}: {e}")))?;
        let before = roots.len();
        for item in ureq::tls::parse_pem(&pem) {
            match item {
                Ok(PemItem::Certificate(cert)) => roots.push(cert.to_owned()),
                Ok(_) => {}
                Err(e) => return Err(Fail(format!("--callback-ca-file: {shown} is not valid PEM ({e})"))),
            }
        }
        if roots.len() == before {
            return Err(Fail(format!("--callback-ca-file: {shown} holds no certificate")));
        }
    }
    Ok(roots)
}

/// The start of a text, on one line.
pub fn excerpt(text: &str) -> String {
    let line = crate::one_line(text);
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// The two servers the command talks to, for the options a failure calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Service,
    Endpoint,
}

impl Peer {
    /// What to do about a TLS `problem` with this server, in the command's options and
    /// variables where the library's advice names its configuration; the library's otherwise.
    pub fn tls_hint(self, problem: TlsProblem) -> &'static str {
        match (self, problem) {
            (Peer::Service, TlsProblem::UnknownIssuer) => {
                "The service's certificate is not signed by a certificate authority this command trusts: give \
                 that CA's certificate with --ca-file PEM (or SLOTPARTNER_CA_FILE)"
            }
            (Peer::Endpoint, TlsProblem::UnknownIssuer) => {
                "The callback endpoint's certificate is not signed by a certificate authority this command \
                 trusts: give that CA's certificate with --callback-ca-file PEM (or SLOTPARTNER_CALLBACK_CA_FILE)"
            }
            (Peer::Service, TlsProblem::NotValidForName) => {
                "The service's certificate does not name this host: use a host name it names in --base-url (or \
                 SLOTPARTNER_BASE_URL)"
            }
            (Peer::Endpoint, TlsProblem::NotValidForName) => {
                "The callback endpoint's certificate does not name this host: use a host name it names in \
                 --callback-url (or SLOTPARTNER_CALLBACK_URL), or give the endpoint a certificate that names it"
            }
            (_, problem) => problem.hint(),
        }
    }

    /// Why a command stops when this server answered HTTP 401.
    pub fn token_refused(self) -> &'static str {
        match self {
            Peer::Service => "the service refused the token (HTTP 401): check --token (or SLOTPARTNER_TOKEN)",
            Peer::Endpoint => {
                "the callback endpoint refused the token (HTTP 401): the endpoint's partner token must be the \
                 same as this command's --token (or SLOTPARTNER_TOKEN)"
            }
        }
    }
}

/// A failure of the library (a call to the service, a journal), its TLS advice in the
/// command's terms (see [`Peer::tls_hint`]): the library's client talks to the service only.
pub fn library_error_text(error: &slotpartner::Error) -> String {
    match error.cause.as_deref() {
        Some(Cause::Tls { problem, detail }) => {
            format!("{}: {detail}. {}", error.field, Peer::Service.tls_hint(*problem))
        }
        _ => error.message.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::{check_url, shown_url};

    #[test]
    fn shown_urls_keep_no_secret() {
        for (url, shown) in [
            ("https://partner.example/callback", "https://partner.example/callback"),
            ("http://partner:CBSECRET@127.0.0.1:18200/cb?key=QSECRET", "http://127.0.0.1:18200/cb?key=..."),
            ("https://a:b@c@host/p?x=1&y&z=2#frag", "https://host/p?x=...&...&z=..."),
            ("https://user@host?k=v", "https://host?k=..."),
            ("not a url?secret=1", "not a url?secret=..."),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }

    #[test]
    fn callback_urls() {
        for (good, https) in [
            ("https://partner.example/callback", true),
            ("http://127.0.0.1:8080/cb", false),
            ("http://localhost/cb", false),
            ("http://[::1]:9/cb", false),
            ("http://127.5.6.7/cb", false),
        ] {
            assert_eq!(check_url(good).ok(), Some(https), "{good}");
        }
        for bad in ["http://partner.example/cb", "http://10.0.0.1/cb", "ftp://127.0.0.1/", "not a url", "/callback"] {
            let error = check_url(bad).unwrap_err();
            assert!(error.0.starts_with("--callback-url: "), "{bad}: {}", error.0);
        }
        // A refused URL is shown without its secrets.
        let error = check_url("http://partner:CBSECRET@10.0.0.1/cb?key=QSECRET").unwrap_err();
        assert!(!error.0.contains("SECRET") && error.0.contains("10.0.0.1/cb?key=..."), "{}", error.0);
    }
}
