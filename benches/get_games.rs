//! getGames calls per second against the sandbox on loopback, one client reusing its
//! connection, next to curl making the same calls over one kept-alive connection (the peer).
//! Prints both rates and the ratio. Needs `curl` on the PATH for the peer.
//!
//! Run: `make bench` (or `cargo bench --bench get_games`).

use std::process::{Command, Stdio};
use std::time::Instant;

use slotpartner::client::{Client, ClientConfig};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, run_server};

const CALLS: usize = 400;
const BODY: &str = r#"{"action":"getGames","localeISO639_ISO3166":"en-US"}"#;

fn main() {
    slotpartner_sandbox::quiet_logs();
    let server = run_server(ServerConfig::default()).expect("sandbox starts");
    let ca = std::env::temp_dir().join(format!("slotpartner-bench-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, server.ca_pem()).unwrap();

    let mut config = ClientConfig::new(&server.base_url(), DEFAULT_TOKEN).unwrap();
    config.add_ca_pem(server.ca_pem().as_bytes()).unwrap();
    let client = Client::new(config).unwrap();
    let games = client.get_games("en-US", None).unwrap().len();
    let started = Instant::now();
    for _ in 0..CALLS {
        assert_eq!(client.get_games("en-US", None).unwrap().len(), games);
    }
    let ours = CALLS as f64 / started.elapsed().as_secs_f64();

    let url = format!("{}/rest/action", server.base_url());
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--fail", "--cacert"]).arg(&ca);
    curl.args(["-H", &format!("X-Service-Token: {DEFAULT_TOKEN}"), "-H", "Content-Type: application/json"]);
    curl.args(["--data", BODY]);
    curl.args(std::iter::repeat_n(url.as_str(), CALLS));
    let started = Instant::now();
    let peer = curl.stdout(Stdio::null()).status();
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&ca);

    println!("getGames over HTTPS on loopback, {CALLS} sequential calls on one kept-alive connection");
    println!("{:<28} {:>10.0} calls/s", "slotpartner (parse + types)", ours);
    match peer {
        Ok(status) if status.success() => {
            let theirs = CALLS as f64 / elapsed.as_secs_f64();
            println!("{:<28} {:>10.0} calls/s", "curl (transfer only)", theirs);
            println!("ratio slotpartner/curl: {:.2}x the rate", ours / theirs);
        }
        other => println!("curl (the peer) did not run: {other:?}"),
    }
    server.shutdown();
}
