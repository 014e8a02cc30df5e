//! getGames calls per second against the sandbox on loopback, one client reusing its
//! connection, next to curl making the same calls over one kept-alive connection (the peer).
//! Prints both rates and the ratio. Needs `curl` on the PATH for the peer.
//!
//! Run: `make bench` (or `cargo bench --bench get_games`).

use std::process::{Command, Stdio};
use std::time::Instant;

use slotpartner::client::{Client, ClientConfig};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, run_server};

const CALLS: usize = 200;
const ROUNDS: usize = 9;
const BODY: &str = r#"{"action":"getGames","localeISO639_ISO3166":"en-US"}"#;

/// Calls per second of `CALLS` sequential getGames through one client.
fn ours(client: &Client, games: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..CALLS {
        assert_eq!(client.get_games("en-US", None).unwrap().len(), games);
    }
    CALLS as f64 / started.elapsed().as_secs_f64()
}

/// Calls per second of `CALLS` sequential getGames by one curl process on one connection, or
/// why curl did not run.
fn curl(url: &str, ca: &std::path::Path) -> Result<f64, String> {
    let mut curl = Command::new("curl");
    curl.args(["-sS", "--fail", "--cacert"]).arg(ca);
    curl.args(["-H", &format!("X-Service-Token: {DEFAULT_TOKEN}"), "-H", "Content-Type: application/json"]);
    curl.args(["--data", BODY]);
    curl.args(std::iter::repeat_n(url, CALLS));
    let started = Instant::now();
    match curl.stdout(Stdio::null()).status() {
        Ok(status) if status.success() => Ok(CALLS as f64 / started.elapsed().as_secs_f64()),
        other => Err(format!("{other:?}")),
    }
}

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    slotpartner_sandbox::quiet_logs();
    let server = run_server(ServerConfig::default()).expect("sandbox starts");
    let ca = std::env::temp_dir().join(format!("slotpartner-bench-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, server.ca_pem()).unwrap();
    let mut config = ClientConfig::new(&server.base_url(), DEFAULT_TOKEN).unwrap();
    config.add_ca_pem(server.ca_pem().as_bytes()).unwrap();
    let client = Client::new(config).unwrap();
    let games = client.get_games("en-US", None).unwrap().len();
    let url = format!("{}/rest/action", server.base_url());

    println!("getGames over HTTPS on loopback: {ROUNDS} alternating rounds of {CALLS} sequential calls,");
    println!("each side on one kept-alive connection (curl: one process per round); medians");
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        mine.push(ours(&client, games));
        match curl(&url, &ca) {
            Ok(rate) => theirs.push(rate),
            Err(why) => {
                println!("curl (the peer) did not run: {why}");
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&ca);
    let ours = median(mine);
    println!("{:<28} {:>10.0} calls/s {:>8.1} µs a call", "slotpartner (parse + types)", ours, 1e6 / ours);
    if !theirs.is_empty() {
        let theirs = median(theirs);
        println!("{:<28} {:>10.0} calls/s {:>8.1} µs a call", "curl (transfer only)", theirs, 1e6 / theirs);
        println!("time a call, slotpartner/curl: {:.2}x", theirs / ours);
    }
    server.shutdown();
}
