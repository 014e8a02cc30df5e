//! Real HTTPS requests against an in-process sandbox.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerHandle, run_server};
use ureq::tls::{Certificate, RootCerts, TlsConfig};

fn start() -> ServerHandle {
    run_server(ServerConfig { http_listen: Some("127.0.0.1:0".parse().unwrap()), ..ServerConfig::default() })
        .expect("server starts")
}

fn agent(server: &ServerHandle) -> ureq::Agent {
    let ca = Certificate::from_der(server.ca_der().as_ref()).to_owned();
    ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(RootCerts::new_with_certs(&[ca])).build())
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .new_agent()
}

struct Reply {
    status: u16,
    content_type: String,
    headers: ureq::http::HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn post_to(agent: &ureq::Agent, url: &str, token: Option<&str>, body: &Value) -> Reply {
    let mut req = agent.post(url).header("Content-Type", "application/json; charset=utf-8");
    if let Some(t) = token {
        req = req.header("X-Service-Token", t);
    }
    let mut resp = req.send(body.to_string()).expect("request completes");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let content_type = headers.get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let body = resp.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
    Reply { status, content_type, headers, body }
}

fn post(server: &ServerHandle, path: &str, body: &Value) -> Reply {
    let url = format!("{}{path}", server.base_url());
    post_to(&agent(server), &url, Some(DEFAULT_TOKEN), body)
}

fn get_games(locale: &str) -> Value {
    json!({"action": "getGames", "localeISO639_ISO3166": locale})
}

fn assert_error(reply: &Reply, status: u16, code: &str) -> String {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.content_type, "application/json; charset=utf-8");
    let v = reply.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    v["error"]["message"].as_str().expect("message").to_string()
}

#[test]
fn get_games_returns_every_field() {
    let server = start();
    let reply = post(&server, "/rest/action", &get_games("en-US"));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "application/json; charset=utf-8");
    let v = reply.json();
    assert_eq!(v.as_object().unwrap().len(), 1);
    let games = v["games"].as_array().unwrap();
    assert!(games.len() >= 6);
    let mut null_categories = 0;
    for g in games {
        let g = g.as_object().unwrap();
        let mut keys: Vec<&str> = g.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "categories",
                "descriptionLong",
                "descriptionShort",
                "gameId",
                "gameType",
                "imageBackground",
                "imageLogo",
                "imageSquare",
                "maxPlayers",
                "minPlayers",
                "name",
                "rules",
                "supportsTournament"
            ]
        );
        assert!(g["gameId"].is_i64());
        assert!(g["name"].is_string());
        assert!(g["rules"].is_array());
        assert_eq!(g["gameType"], "SlotMachine");
        assert_eq!(g["minPlayers"], 0);
        assert_eq!(g["maxPlayers"], 0);
        assert!(g["supportsTournament"].is_boolean());
        match &g["categories"] {
            Value::Null => null_categories += 1,
            Value::Array(c) => assert!(c.iter().all(Value::is_string)),
            other => panic!("categories {other}"),
        }
        for image in ["imageSquare", "imageBackground", "imageLogo"] {
            assert!(g[image].as_str().unwrap().starts_with("https://cdn.sandbox.invalid/"));
        }
        assert!(g["descriptionLong"].as_str().unwrap().starts_with('<'));
    }
    assert!(null_categories >= 1);
    assert!(reply.body.contains(r#"\"Eye of Horus\""#), "escaped quotes");
    assert!(
        reply.body.starts_with(r#"{"games":[{"gameId":1001,"name":"Pharaoh's Fortune","rules":["#),
        "fields in spec order: {}",
        &reply.body[..80]
    );
}

#[test]
fn get_games_by_id_and_locale() {
    let server = start();
    let mut body = get_games("de-DE");
    body["gameId"] = json!(1003);
    let de = post(&server, "/rest/action", &body).json();
    let de_games = de["games"].as_array().unwrap();
    assert_eq!(de_games.len(), 1);
    assert_eq!(de_games[0]["gameId"], 1003);
    assert!(de_games[0]["descriptionShort"].as_str().unwrap().contains("Glück"));

    body["localeISO639_ISO3166"] = json!("en-US");
    let en = post(&server, "/rest/action", &body).json();
    assert_ne!(en["games"][0]["descriptionShort"], de_games[0]["descriptionShort"]);
    assert_ne!(en["games"][0]["descriptionLong"], de_games[0]["descriptionLong"]);
    assert_eq!(en["games"][0]["name"], de_games[0]["name"]);

    body["localeISO639_ISO3166"] = json!("fr-FR");
    let fr = post(&server, "/rest/action", &body).json();
    assert_eq!(fr, en, "other locales fall back to en-US");

    body["gameId"] = json!(999_999);
    let none = post(&server, "/rest/action", &body);
    assert_eq!(none.status, 200);
    assert_eq!(none.json(), json!({"games": []}));
}

#[test]
fn bad_requests() {
    let server = start();
    for locale in [json!("en_US"), json!("EN-us"), json!(5), json!("english")] {
        let body = json!({"action": "getGames", "localeISO639_ISO3166": locale});
        let msg = assert_error(&post(&server, "/rest/action", &body), 400, "badRequest");
        assert!(msg.contains("localeISO639_ISO3166"), "{msg}");
    }
    let msg = assert_error(&post(&server, "/rest/action", &json!({"action": "getGames"})), 400, "badRequest");
    assert!(msg.contains("localeISO639_ISO3166"), "{msg}");
    let mut body = get_games("en-US");
    body["gameId"] = json!(1.5);
    let msg = assert_error(&post(&server, "/rest/action", &body), 400, "badRequest");
    assert!(msg.contains("gameId"), "{msg}");
    assert_error(&post(&server, "/rest/action", &json!({"noAction": 1})), 400, "badRequest");
    assert_error(&post(&server, "/rest/action", &json!("getGames")), 400, "badRequest");
    let msg = assert_error(&post(&server, "/rest/action", &json!({"action": "spin"})), 400, "unknownAction");
    assert_eq!(msg, "unknown action 'spin'");
}

#[test]
fn token_is_checked() {
    let server = start();
    let url = format!("{}/rest/action", server.base_url());
    let agent = agent(&server);
    let wrong = post_to(&agent, &url, Some("00000000-0000-0000-0000-000000000000"), &get_games("en-US"));
    assert_error(&wrong, 401, "unauthorized");
    let missing = post_to(&agent, &url, None, &get_games("en-US"));
    assert_error(&missing, 401, "unauthorized");
    // Also on fault routes.
    let url = format!("{}/fault/status/500/rest/action", server.base_url());
    assert_error(&post_to(&agent, &url, None, &json!({})), 401, "unauthorized");
}

#[test]
fn plain_http_is_refused() {
    let server = start();
    let url = format!("{}/rest/action", server.http_base_url().unwrap());
    let agent = ureq::Agent::config_builder().http_status_as_error(false).proxy(None).build().new_agent();
    let reply = post_to(&agent, &url, Some(DEFAULT_TOKEN), &get_games("en-US"));
    let msg = assert_error(&reply, 401, "unauthorized");
    assert_eq!(msg, "plain HTTP is not accepted; use HTTPS");
}

#[test]
fn echo_returns_the_request() {
    let server = start();
    let body = json!({"action": "echo", "n": 1, "s": "Grüße \"quoted\" €", "a": [true, null]});
    let reply = post(&server, "/rest/action", &body);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), json!({ "echo": body }));
    // The request text comes back as sent (key order included).
    let url = format!("{}/rest/action", server.base_url());
    let mut resp = agent(&server)
        .post(&url)
        .header("X-Service-Token", DEFAULT_TOKEN)
        .send(r#"{"z":1, "action":"echo", "a":2.50}"#)
        .unwrap();
    let text = resp.body_mut().read_to_string().unwrap();
    assert_eq!(text, r#"{"echo":{"z":1, "action":"echo", "a":2.50}}"#);
}

#[test]
fn routes_and_methods() {
    let server = start();
    assert_error(&post(&server, "/rest/other", &get_games("en-US")), 404, "notFound");
    let mut resp = agent(&server)
        .get(format!("{}/rest/action", server.base_url()))
        .header("X-Service-Token", DEFAULT_TOKEN)
        .call()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(resp.headers().get("allow").unwrap(), "POST");
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["error"]["code"], "methodNotAllowed");
}

#[test]
fn fault_prefixes() {
    let server = start();
    let body = get_games("en-US");

    let msg = assert_error(&post(&server, "/fault/status/500/rest/action", &body), 500, "injectedFault");
    assert!(msg.contains("500"));
    assert_eq!(post(&server, "/fault/status/503/rest/action", &body).status, 503);

    let malformed = post(&server, "/fault/malformed/rest/action", &body);
    assert_eq!(malformed.status, 200);
    assert_eq!(malformed.json(), json!({"games": [{"gameId": "not-a-number"}]}));

    let notjson = post(&server, "/fault/notjson/rest/action", &body);
    assert_eq!(notjson.status, 200);
    assert!(notjson.content_type.starts_with("text/html"));
    assert_eq!(notjson.body, "<html>oops</html>");

    let started = Instant::now();
    let slow = post(&server, "/fault/slow/300/rest/action", &body);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(slow.status, 200);
    assert!(slow.json()["games"].as_array().unwrap().len() >= 6);

    let redirect = post(&server, "/fault/redirect/rest/action", &body);
    assert_eq!(redirect.status, 302);
    assert_eq!(redirect.headers.get("location").unwrap(), "/rest/action");

    let big = post(&server, "/fault/big/rest/action", &body);
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 32 * 1024 * 1024);
    let v = big.json();
    assert_eq!(v["games"], json!([]));

    let url = format!("{}/fault/close/rest/action", server.base_url());
    let closed = agent(&server).post(&url).header("X-Service-Token", DEFAULT_TOKEN).send(body.to_string());
    assert!(closed.is_err(), "connection closed without an answer");
}

type RawResponse = (u16, Vec<(String, String)>, Vec<u8>);

/// A raw TLS connection, to check the HTTP/1.1 framing itself.
struct RawTls(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl RawTls {
    fn connect(server: &ServerHandle) -> RawTls {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(server.ca_der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = "localhost".try_into().unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let sock = TcpStream::connect(server.https_addr()).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        RawTls(rustls::StreamOwned::new(conn, sock))
    }

    fn send(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).unwrap();
        self.0.flush().unwrap();
    }

    /// Reads one response: (status, headers, body); `None` at end of stream.
    fn read_response(&mut self, buf: &mut Vec<u8>) -> Option<RawResponse> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(n) = resp.parse(buf).unwrap() {
                let status = resp.code.unwrap();
                let headers: Vec<(String, String)> = resp
                    .headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).to_string()))
                    .collect();
                let len: usize =
                    headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
                while buf.len() < n + len {
                    self.fill(buf)?;
                }
                let body = buf[n..n + len].to_vec();
                buf.drain(..n + len);
                return Some((status, headers, body));
            }
            self.fill(buf)?;
        }
    }

    fn fill(&mut self, buf: &mut Vec<u8>) -> Option<()> {
        let mut chunk = [0u8; 8192];
        match self.0.read(&mut chunk) {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Some(())
            }
        }
    }
}

fn request(path: &str, body: &str, extra: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nX-Service-Token: {DEFAULT_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn keep_alive_pipelining_and_close() {
    let server = start();
    let mut tls = RawTls::connect(&server);
    let mut buf = Vec::new();
    let echo = r#"{"action":"echo","i":1}"#;
    // Two requests in one write (pipelined), then a third on the same connection.
    let mut both = request("/rest/action", echo, "");
    both.extend(request("/fault/status/418/rest/action", "{}", ""));
    tls.send(&both);
    let (s1, h1, b1) = tls.read_response(&mut buf).unwrap();
    assert_eq!(s1, 200);
    assert!(h1.contains(&("connection".into(), "keep-alive".into())));
    assert_eq!(serde_json::from_slice::<Value>(&b1).unwrap()["echo"]["i"], 1);
    let (s2, _, _) = tls.read_response(&mut buf).unwrap();
    assert_eq!(s2, 418);
    tls.send(&request("/rest/action", echo, "Connection: close\r\n"));
    let (s3, h3, _) = tls.read_response(&mut buf).unwrap();
    assert_eq!(s3, 200);
    assert!(h3.contains(&("connection".into(), "close".into())));
    assert!(tls.read_response(&mut buf).is_none(), "server closes after Connection: close");
}

#[test]
fn framing_errors() {
    let server = start();

    let mut tls = RawTls::connect(&server);
    let mut buf = Vec::new();
    tls.send(
        format!(
            "POST /rest/action HTTP/1.1\r\nHost: localhost\r\nX-Service-Token: {DEFAULT_TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n"
        )
        .as_bytes(),
    );
    let (status, _, body) = tls.read_response(&mut buf).unwrap();
    assert_eq!(status, 411);
    assert!(serde_json::from_slice::<Value>(&body).is_ok());

    let mut tls = RawTls::connect(&server);
    let mut buf = Vec::new();
    tls.send(
        format!(
            "POST /rest/action HTTP/1.1\r\nHost: localhost\r\nX-Service-Token: {DEFAULT_TOKEN}\r\nContent-Length: {}\r\n\r\n",
            2 * 1024 * 1024
        )
        .as_bytes(),
    );
    let (status, _, body) = tls.read_response(&mut buf).unwrap();
    assert_eq!(status, 413);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["error"]["code"], "payloadTooLarge");

    let mut tls = RawTls::connect(&server);
    let mut buf = Vec::new();
    tls.send(b"NOT HTTP AT ALL\r\n\r\n");
    let (status, _, _) = tls.read_response(&mut buf).unwrap();
    assert_eq!(status, 400);

    // Expect: 100-continue gets the interim answer before the body is sent.
    let mut tls = RawTls::connect(&server);
    let mut buf = Vec::new();
    let body = r#"{"action":"echo"}"#;
    let mut head = request("/rest/action", "", "Expect: 100-continue\r\n");
    let text = String::from_utf8(head.clone()).unwrap();
    head = text.replace("Content-Length: 0", &format!("Content-Length: {}", body.len())).into_bytes();
    tls.send(&head);
    let (status, _, _) = tls.read_response(&mut buf).unwrap();
    assert_eq!(status, 100);
    tls.send(body.as_bytes());
    let (status, _, _) = tls.read_response(&mut buf).unwrap();
    assert_eq!(status, 200);
}

#[test]
fn untrusted_clients_fail_the_handshake() {
    let server = start();
    let other = run_server(ServerConfig::default()).unwrap();
    // An agent trusting another sandbox's CA must not accept this one.
    let url = format!("{}/rest/action", server.base_url());
    let result = agent(&other).post(&url).header("X-Service-Token", DEFAULT_TOKEN).send(get_games("en-US").to_string());
    assert!(result.is_err());
}
