//! The client against the sandbox over real HTTPS on loopback, and against deliberately broken
//! servers on loopback.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use slotpartner::ErrorKind;
use slotpartner::client::{Client, ClientConfig, TrustRoots};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerHandle, run_server};

fn sandbox() -> ServerHandle {
    slotpartner_sandbox::quiet_logs();
    run_server(ServerConfig::default()).expect("sandbox starts")
}

fn config(server: &ServerHandle, path: &str) -> ClientConfig {
    let mut config = ClientConfig::new(&format!("{}{path}", server.base_url()), DEFAULT_TOKEN).unwrap();
    config.add_ca_pem(server.ca_pem().as_bytes()).unwrap();
    config.set_retries(0, Duration::ZERO).unwrap();
    config
}

fn client(server: &ServerHandle) -> Client {
    Client::new(config(server, "")).unwrap()
}

#[test]
fn get_games_lists_every_game_with_every_field() {
    let server = sandbox();
    let games = client(&server).get_games("en-US", None).unwrap();
    assert!(games.len() >= 6, "{} games", games.len());
    for game in &games {
        assert_eq!(game.game_type, "SlotMachine");
        assert_eq!((game.min_players, game.max_players), (0, 0));
        assert!(!game.name.is_empty() && game.image_logo.starts_with("https://"), "{game:?}");
        assert!(!game.description_short.is_empty() && !game.description_long.is_empty());
    }
    assert!(games.iter().any(|g| g.categories.is_none()), "one game has null categories");
    assert!(games.iter().any(|g| !g.rules.is_empty()), "one game has rules");
    let mut ids: Vec<i64> = games.iter().map(|g| g.game_id).collect();
    ids.dedup();
    assert_eq!(ids.len(), games.len(), "game ids are distinct");
}

#[test]
fn game_id_selects_one_game() {
    let server = sandbox();
    let client = client(&server);
    let all = client.get_games("en-US", None).unwrap();
    let wanted = &all[2];
    let one = client.get_games("en-US", Some(wanted.game_id)).unwrap();
    assert_eq!(one, vec![wanted.clone()]);
    assert!(client.get_games("en-US", Some(987_654_321)).unwrap().is_empty());
}

#[test]
fn locales_change_descriptions_and_underscore_form_is_accepted() {
    let server = sandbox();
    let client = client(&server);
    let english = client.get_games("en-US", None).unwrap();
    let german = client.get_games("de_DE", None).unwrap();
    assert_eq!(english.len(), german.len());
    assert_eq!(english[0].game_id, german[0].game_id);
    assert_ne!(english[0].description_short, german[0].description_short);
}

#[test]
fn bad_locale_is_refused_before_any_request() {
    let server = sandbox();
    let err = client(&server).get_games("english", None).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "locale"));
}

#[test]
fn wrong_token_gives_http_401() {
    let server = sandbox();
    let mut config = ClientConfig::new(&server.base_url(), "0b7e3c55-1a2b-4c3d-8e9f-000000000001").unwrap();
    config.add_ca_pem(server.ca_pem().as_bytes()).unwrap();
    let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::HttpStatus);
    assert!(err.message.contains("HTTP 401") && err.message.contains("unauthorized"), "{}", err.message);
}

#[test]
fn plain_http_base_url_is_refused_without_a_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let err = ClientConfig::new(&url, DEFAULT_TOKEN).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "base_url"));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(listener.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock, "nothing connected");
}

#[test]
fn untrusted_certificate_is_refused() {
    let server = sandbox();
    for roots in [TrustRoots::Bundled, TrustRoots::System] {
        let mut config = ClientConfig::new(&server.base_url(), DEFAULT_TOKEN).unwrap();
        config.set_trust_roots(roots);
        config.set_retries(0, Duration::ZERO).unwrap();
        let Ok(client) = Client::new(config) else { continue }; // no system store on this machine
        let err = client.get_games("en-US", None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Tls, "{roots:?}: {err}");
    }
}

#[test]
fn a_server_that_never_answers_times_out_near_the_configured_value() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let mut config = ClientConfig::new(&format!("https://{addr}"), DEFAULT_TOKEN).unwrap();
    config.set_timeout(Duration::from_millis(600)).unwrap();
    config.set_retries(0, Duration::ZERO).unwrap();
    let started = Instant::now();
    let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(elapsed >= Duration::from_millis(550) && elapsed < Duration::from_millis(3000), "{elapsed:?}");
    drop(held.join());
}

#[test]
fn connection_failures_are_retried_with_backoff() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream); // close at once: the TLS handshake fails
        }
    });
    let mut config = ClientConfig::new(&format!("https://{addr}"), DEFAULT_TOKEN).unwrap();
    config.set_retries(2, Duration::from_millis(100)).unwrap();
    let started = Instant::now();
    let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Connect, "{err}");
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "one try and two retries");
    assert!(started.elapsed() >= Duration::from_millis(300), "waited 100 ms then 200 ms");
}

#[test]
fn a_500_answer_is_an_http_status_error_with_the_body() {
    let server = sandbox();
    let err = Client::new(config(&server, "/fault/status/500")).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::HttpStatus);
    assert!(err.message.contains("HTTP 500") && err.message.contains('{'), "{}", err.message);
}

#[test]
fn a_malformed_games_body_names_the_field() {
    let server = sandbox();
    let err = Client::new(config(&server, "/fault/malformed")).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::BadResponse, "getGames.games[0].gameId"));
    let err = Client::new(config(&server, "/fault/notjson")).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!((err.kind, err.field.as_str()), (ErrorKind::BadResponse, "getGames"));
}

#[test]
fn redirects_are_not_followed() {
    let server = sandbox();
    let err = Client::new(config(&server, "/fault/redirect")).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::HttpStatus);
    assert!(err.message.contains("HTTP 302"), "{}", err.message);
}

#[test]
fn answers_over_the_limit_are_refused() {
    let server = sandbox();
    let mut config = config(&server, "/fault/big");
    config.set_max_response_bytes(1024 * 1024).unwrap();
    let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ResponseTooLarge, "{err}");
}

#[test]
fn the_generic_call_sends_any_action_with_its_parameters() {
    let server = sandbox();
    let client = client(&server);
    let answer = client.call("echo", r#"{"eventIndex":41,"note":"\"quoted\" é"}"#).unwrap();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let echoed = &answer["echo"];
    assert_eq!(echoed["action"], "echo");
    assert_eq!(echoed["eventIndex"], 41);
    assert_eq!(echoed["note"], "\"quoted\" é");
    let err = client.call("noSuchAction", "{}").unwrap_err();
    assert_eq!(err.kind, ErrorKind::HttpStatus);
    assert!(err.message.contains("HTTP 400") && err.message.contains("unknownAction"), "{}", err.message);
    assert_eq!(client.call("echo", "[1]").unwrap_err().field, "params");
    assert_eq!(client.call("echo", r#"{"action":"x"}"#).unwrap_err().field, "params");
    assert_eq!(client.call("", "{}").unwrap_err().field, "action");
}

#[test]
fn many_threads_share_one_client() {
    let server = sandbox();
    let client = client(&server);
    let expected = client.get_games("en-US", None).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let (client, expected) = (&client, &expected);
            scope.spawn(move || {
                for i in 0..10 {
                    let locale = if (t + i) % 2 == 0 { "en-US" } else { "de-DE" };
                    let games = client.get_games(locale, None).unwrap();
                    assert_eq!(games.len(), expected.len());
                }
            });
        }
    });
}

#[test]
fn configuration_is_validated() {
    assert_eq!(ClientConfig::new("https://example.test", "not-a-uuid").unwrap_err().field, "token");
    assert_eq!(ClientConfig::new("https://", DEFAULT_TOKEN).unwrap_err().field, "base_url");
    let mut config = ClientConfig::new("https://example.test/", DEFAULT_TOKEN).unwrap();
    assert_eq!(config.add_ca_pem(b"not pem").unwrap_err().field, "ca_pem");
    assert_eq!(config.add_ca_file("/no/such/file.pem").unwrap_err().field, "ca_file");
    assert_eq!(config.set_timeout(Duration::ZERO).unwrap_err().field, "timeout");
    assert_eq!(config.set_proxy(Some("::not a proxy::")).unwrap_err().field, "proxy");
    config.set_trust_roots(TrustRoots::ExtraOnly);
    assert_eq!(Client::new(config).unwrap_err().field, "trust_roots", "no root at all is refused");
}

#[test]
fn a_configured_proxy_is_used_and_the_environment_is_not() {
    let server = sandbox();
    // A port with nothing behind it: a client that goes through it cannot connect.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut through_dead_proxy = config(&server, "");
    through_dead_proxy.set_proxy(Some(&format!("http://{dead}"))).unwrap();
    let err = Client::new(through_dead_proxy).unwrap().get_games("en-US", None).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Connect, "{err}");

    // The same dead proxy in the environment changes nothing. A child process gets it, so that
    // this test does not change its own environment.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "proxy_from_environment_is_ignored_in_a_child", "--include-ignored"])
        .env("SLOTPARTNER_TEST_CHILD", "1")
        .env("HTTPS_PROXY", format!("http://{dead}"))
        .env("https_proxy", format!("http://{dead}"))
        .env("ALL_PROXY", format!("http://{dead}"))
        .status()
        .unwrap();
    assert!(status.success());
}

/// Run by the test above in a child process whose environment names a dead proxy.
#[test]
#[ignore = "run by a_configured_proxy_is_used_and_the_environment_is_not"]
fn proxy_from_environment_is_ignored_in_a_child() {
    if std::env::var_os("SLOTPARTNER_TEST_CHILD").is_none() {
        return;
    }
    assert!(std::env::var_os("HTTPS_PROXY").is_some());
    let server = sandbox();
    assert!(!client(&server).get_games("en-US", None).unwrap().is_empty());
}

#[test]
fn only_5xx_answers_are_retried() {
    let server = sandbox();
    let timed = |path: &str| {
        let mut config = config(&server, path);
        config.set_retries(2, Duration::from_millis(300)).unwrap();
        let started = Instant::now();
        let err = Client::new(config).unwrap().get_games("en-US", None).unwrap_err();
        assert_eq!(err.kind, ErrorKind::HttpStatus);
        started.elapsed()
    };
    assert!(timed("/fault/status/503") >= Duration::from_millis(900), "waited 300 ms then 600 ms");
    assert!(timed("/fault/status/404") < Duration::from_millis(300), "a 404 is not tried again");
}
