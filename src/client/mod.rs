//! The blocking HTTPS client for the service's action address, `POST {base_url}/rest/action`.
//!
//! One `Client` is shared by any number of threads; it keeps connections alive between calls.
//! Every request carries `X-Service-Token`; redirects are not followed; answers are bounded in
//! size; a proxy is used only when configured (never taken from the environment). `games` reads
//! the `getGames` answer; `locale` checks and normalises locales; `tls` tells what a failed
//! handshake was about and what to do.

pub(crate) mod fetch;
pub(crate) mod games;
pub(crate) mod locale;
mod tls;

pub use fetch::FetchSettings;
pub use games::Game;
pub use tls::TlsProblem;

use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

use crate::callback::auth;
use crate::callback::json::{checked_name, excerpt, excerpt_of, quoted};
use crate::error::{Cause, Error, ErrorKind, Result};

/// Where the client finds the certificate authorities it trusts, besides any extra ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustRoots {
    /// Mozilla's root certificates, bundled in the library (the default).
    Bundled,
    /// The operating system's certificate store.
    System,
    /// Only the extra certificates added to the configuration.
    ExtraOnly,
}

/// A client's settings. Defaults: connect time-out 5 s, overall time-out 15 s, 2 retries of
/// `getGames` and of fetching a lost event with a 200 ms back-off that doubles, bundled roots, no
/// proxy, answers up to 8 MiB, strict games (every field of spec 2.1 required), lost events
/// fetched with `{"action":"getEvent","index":N}` and found under `event` in the answer.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    base_url: String,
    token: String,
    connect_timeout: Duration,
    timeout: Duration,
    retries: u32,
    retry_backoff: Duration,
    roots: TrustRoots,
    extra_roots: Vec<Certificate<'static>>,
    proxy: Option<String>,
    max_response_bytes: u64,
    lenient_games: bool,
    fetch: FetchSettings,
}

impl ClientConfig {
    /// A configuration for the service at `base_url` (`https://` only: the token would travel in
    /// clear, and the service answers plain HTTP with 401) with the partner `token` (a UUID).
    pub fn new(base_url: &str, token: &str) -> Result<ClientConfig> {
        let base_url = base_url.trim_end_matches('/');
        let Some(rest) = base_url.strip_prefix("https://") else {
            let problem =
                format!("must start with https:// (the token must not travel in clear), got {}", quoted(base_url));
            return Err(Error::field(ErrorKind::InvalidArgument, "base_url", problem));
        };
        if rest.is_empty() || base_url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "base_url",
                format!("is not a URL: {}", quoted(base_url)),
            ));
        }
        base_url
            .parse::<ureq::http::Uri>()
            .map_err(|e| Error::field(ErrorKind::InvalidArgument, "base_url", format!("is not a URL ({e})")))?;
        auth::validate_token("token", token)?;
        Ok(ClientConfig {
            base_url: base_url.to_owned(),
            token: token.to_owned(),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            retries: 2,
            retry_backoff: Duration::from_millis(200),
            roots: TrustRoots::Bundled,
            extra_roots: Vec::new(),
            proxy: None,
            max_response_bytes: 8 * 1024 * 1024,
            lenient_games: false,
            fetch: FetchSettings::default(),
        })
    }

    /// Time allowed to open the connection (TCP and TLS). At least 1 ms.
    pub fn set_connect_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.connect_timeout = positive("connect_timeout", timeout)?;
        Ok(())
    }

    /// Time allowed for a whole call, answer included. At least 1 ms.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.timeout = positive("timeout", timeout)?;
        Ok(())
    }

    /// How many times `getGames` is tried again after a connection failure, a time-out or a 5xx
    /// answer, waiting `backoff`, then twice as long each time. The generic call is never retried:
    /// it may not be safe to repeat.
    pub fn set_retries(&mut self, retries: u32, backoff: Duration) -> Result<()> {
        if retries > 10 {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "retries",
                format!("expected at most 10, got {retries}"),
            ));
        }
        self.retries = retries;
        self.retry_backoff = backoff;
        Ok(())
    }

    /// Which roots to trust besides the extra certificates.
    pub fn set_trust_roots(&mut self, roots: TrustRoots) {
        self.roots = roots;
    }

    /// Trusts the CA certificates in `pem` (one or more `BEGIN CERTIFICATE` blocks) as well.
    pub fn add_ca_pem(&mut self, pem: &[u8]) -> Result<()> {
        let mut added = 0;
        for item in ureq::tls::parse_pem(pem) {
            match item {
                Ok(PemItem::Certificate(cert)) => {
                    self.extra_roots.push(cert);
                    added += 1;
                }
                Ok(_) => {}
                Err(e) => {
                    return Err(Error::field(ErrorKind::InvalidArgument, "ca_pem", format!("is not valid PEM ({e})")));
                }
            }
        }
        if added == 0 {
            return Err(Error::field(ErrorKind::InvalidArgument, "ca_pem", "holds no certificate"));
        }
        Ok(())
    }

    /// Trusts the CA certificates in the PEM file at `path` as well.
    pub fn add_ca_file(&mut self, path: &str) -> Result<()> {
        let pem = std::fs::read(path)
            .map_err(|e| Error::field(ErrorKind::InvalidArgument, "ca_file", format!("cannot read {path}: {e}")))?;
        self.add_ca_pem(&pem)
            .map_err(|e| Error::field(ErrorKind::InvalidArgument, "ca_file", format!("{path}: {}", e.message)))
    }

    /// Sends requests through the proxy at `url` (`http://host:port`, `socks5://host:port`, with
    /// optional `user:password@`); `None` for a direct connection (the default). The environment
    /// (`HTTPS_PROXY` and the like) is never consulted.
    pub fn set_proxy(&mut self, url: Option<&str>) -> Result<()> {
        if let Some(url) = url {
            ureq::Proxy::new(url).map_err(|e| Error::field(ErrorKind::InvalidArgument, "proxy", format!("{e}")))?;
        }
        self.proxy = url.map(str::to_owned);
        Ok(())
    }

    /// The largest answer body accepted, in bytes (at least 1 KiB).
    pub fn set_max_response_bytes(&mut self, bytes: u64) -> Result<()> {
        if bytes < 1024 {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "max_response_bytes",
                format!("expected at least 1024, got {bytes}"),
            ));
        }
        self.max_response_bytes = bytes;
        Ok(())
    }

    /// With `lenient`, a game missing a field of spec 2.1 gets the field's empty value instead of
    /// failing the call (the spec does not show which fields are required).
    pub fn set_lenient_games(&mut self, lenient: bool) {
        self.lenient_games = lenient;
    }

    /// The operation that fetches a lost event (default `getEvent`; the spec does not show it).
    pub fn set_fetch_action(&mut self, action: &str) -> Result<()> {
        self.fetch.action = checked_name("fetch_action", action)?.to_owned();
        Ok(())
    }

    /// The parameter carrying the lost event's index (default `index`).
    pub fn set_fetch_index_param(&mut self, name: &str) -> Result<()> {
        self.fetch.index_param = checked_name("fetch_index_param", name)?.to_owned();
        Ok(())
    }

    /// The key of the answer holding the fetched event (default `event`); empty when the answer
    /// is the event itself.
    pub fn set_fetch_event_key(&mut self, key: &str) -> Result<()> {
        self.fetch.event_key =
            if key.is_empty() { String::new() } else { checked_name("fetch_event_key", key)?.to_owned() };
        Ok(())
    }
}

fn positive(field: &str, timeout: Duration) -> Result<Duration> {
    if timeout < Duration::from_millis(1) {
        return Err(Error::field(ErrorKind::InvalidArgument, field, "must be at least 1 ms"));
    }
    Ok(timeout)
}

/// A client of the service. Cheap to share: clone it or put it behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    action_url: String,
    token: String,
    retries: u32,
    retry_backoff: Duration,
    max_response_bytes: u64,
    lenient_games: bool,
    fetch: FetchSettings,
}

/// The `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("slotpartner/", env!("CARGO_PKG_VERSION"));

impl Client {
    /// Builds a client; fails when the trust roots cannot be loaded.
    pub fn new(config: ClientConfig) -> Result<Client> {
        let mut roots: Vec<Certificate<'static>> = match config.roots {
            TrustRoots::Bundled => webpki_root_certs::TLS_SERVER_ROOT_CERTS
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                .collect(),
            TrustRoots::System => system_roots()?,
            TrustRoots::ExtraOnly => Vec::new(),
        };
        roots.extend(config.extra_roots.iter().cloned());
        if roots.is_empty() {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "trust_roots",
                "no certificate authority is trusted: add a CA certificate, or trust bundled or system roots",
            ));
        }
        let proxy = match &config.proxy {
            Some(url) => Some(
                ureq::Proxy::new(url).map_err(|e| Error::field(ErrorKind::InvalidArgument, "proxy", format!("{e}")))?,
            ),
            None => None,
        };
        let tls =
            TlsConfig::builder().provider(TlsProvider::Rustls).root_certs(RootCerts::Specific(Arc::new(roots))).build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .https_only(true)
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(proxy)
            .user_agent(USER_AGENT)
            .timeout_connect(Some(config.connect_timeout))
            .timeout_global(Some(config.timeout))
            .tls_config(tls)
            .build()
            .into();
        Ok(Client {
            agent,
            action_url: format!("{}/rest/action", config.base_url),
            token: config.token,
            retries: config.retries,
            retry_backoff: config.retry_backoff,
            max_response_bytes: config.max_response_bytes,
            lenient_games: config.lenient_games,
            fetch: config.fetch,
        })
    }

    /// `getGames` in `locale` (`en-US`; `en_US` is sent as `en-US`), for one game when `game_id`
    /// is given. Retried as configured.
    pub fn get_games(&self, locale: &str, game_id: Option<i64>) -> Result<Vec<Game>> {
        let locale = locale::normalize("locale", locale)?;
        let mut body = format!(r#"{{"action":"getGames","localeISO639_ISO3166":{}"#, quoted(&locale));
        if let Some(id) = game_id {
            if id < 0 {
                return Err(Error::field(
                    ErrorKind::InvalidArgument,
                    "game_id",
                    format!("expected a non-negative integer, got {id}"),
                ));
            }
            body.push_str(&format!(r#","gameId":{id}"#));
        }
        body.push('}');
        let answer = self.post_retried("getGames", &body).map_err(|failed| failed.error)?;
        games::parse_games(&answer, self.lenient_games)
    }

    /// Fetches the lost event at `index` again (`FetchSettings` say how) and returns its raw JSON
    /// text, to be read like a delivered body; `None` when the service answers 404 (it knows no
    /// such event). Retried like `getGames`: asking again changes nothing at the service.
    pub fn fetch_event(&self, index: i64) -> Result<Option<String>> {
        let body = self.fetch.request(index)?;
        match self.post_retried(&self.fetch.action, &body) {
            Ok(answer) => Ok(Some(self.fetch.event_text(&answer)?.to_owned())),
            Err(failed) if failed.http_status == Some(404) => Ok(None),
            Err(failed) => Err(failed.error),
        }
    }

    /// The settings `fetch_event` follows.
    pub fn fetch_settings(&self) -> &FetchSettings {
        &self.fetch
    }

    /// `post`, tried again after a connection failure, a time-out or a 5xx, as configured.
    fn post_retried(&self, action: &str, body: &str) -> std::result::Result<String, FailedPost> {
        let mut wait = self.retry_backoff;
        let mut attempt = 0;
        loop {
            match self.post(action, body) {
                Err(failed) if attempt < self.retries && failed.is_retryable() => {
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Any action with `params`, a JSON object of its parameters (`{}` for none), sent as
    /// `{"action":<action>, ...params}`. Returns the answer body, which must be JSON. Not retried.
    pub fn call(&self, action: &str, params: &str) -> Result<String> {
        checked_name("action", action)?;
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(params)
            .map_err(|e| Error::field(ErrorKind::InvalidArgument, "params", format!("expected a JSON object ({e})")))?;
        if object.contains_key("action") {
            return Err(Error::field(
                ErrorKind::InvalidArgument,
                "params",
                "must not hold \"action\": pass it as the action",
            ));
        }
        let mut body = serde_json::Map::new();
        body.insert("action".to_owned(), serde_json::Value::String(action.to_owned()));
        body.extend(object);
        let body = serde_json::Value::Object(body).to_string();
        let answer = self.post(action, &body).map_err(|failed| failed.error)?;
        serde_json::from_str::<serde::de::IgnoredAny>(&answer).map_err(|e| {
            Error::field(
                ErrorKind::BadResponse,
                action,
                format!("the response is not JSON ({e}): {}", excerpt(&answer)),
            )
        })?;
        Ok(answer)
    }

    /// One POST to the action address; the answer body when the status is 200.
    fn post(&self, action: &str, body: &str) -> std::result::Result<String, FailedPost> {
        let response = self
            .agent
            .post(&self.action_url)
            .header("X-Service-Token", &self.token)
            .header("Content-Type", "application/json; charset=utf-8")
            .header("Accept", "application/json")
            .send(body)
            .map_err(|e| FailedPost { error: transport_error(action, e), http_status: None })?;
        let status = response.status().as_u16();
        let mut response = response;
        let text = response
            .body_mut()
            .with_config()
            .limit(self.max_response_bytes)
            .read_to_string()
            .map_err(|e| transport_error(action, e));
        if status != 200 {
            let start = text.as_deref().map(|t| excerpt_of(t.trim(), 200)).unwrap_or_default();
            let problem = format!("the service answered HTTP {status}: {start}");
            return Err(FailedPost {
                error: Error::field(ErrorKind::HttpStatus, action, problem).with_cause(Cause::HttpStatus(status)),
                http_status: Some(status),
            });
        }
        text.map_err(|error| FailedPost { error, http_status: None })
    }
}

fn system_roots() -> Result<Vec<Certificate<'static>>> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let problem = format!("no certificate found in the system store ({:?})", found.errors.first());
        return Err(Error::field(ErrorKind::InvalidArgument, "trust_roots", problem));
    }
    Ok(found.certs.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect())
}

/// A failed POST, with the HTTP status when the service answered.
struct FailedPost {
    error: Error,
    http_status: Option<u16>,
}

impl FailedPost {
    /// Whether a failed `getGames` is worth trying again: no connection, a time-out, or a 5xx.
    fn is_retryable(&self) -> bool {
        matches!(self.error.kind, ErrorKind::Connect | ErrorKind::Timeout) || self.http_status.is_some_and(|s| s >= 500)
    }
}

fn transport_error(action: &str, error: ureq::Error) -> Error {
    let kind = match &error {
        ureq::Error::Timeout(_) => ErrorKind::Timeout,
        ureq::Error::Io(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
            ErrorKind::Timeout
        }
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::Pem(_) => ErrorKind::Tls,
        ureq::Error::Io(e) if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) => ErrorKind::Tls,
        ureq::Error::BodyExceedsLimit(_) => ErrorKind::ResponseTooLarge,
        ureq::Error::Protocol(_) | ureq::Error::LargeResponseHeader(..) => ErrorKind::BadResponse,
        _ => ErrorKind::Connect,
    };
    let detail = error.to_string();
    match TlsProblem::of(&error) {
        Some(problem) => Error::field(kind, action, format!("{detail}. {}", problem.hint()))
            .with_cause(Cause::Tls { problem, detail }),
        None => Error::field(kind, action, detail),
    }
}
