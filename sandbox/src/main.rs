//! Command line of `slotpartner-sandbox`: hand-parsed `serve` and `send`.

#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;

use slotpartner_sandbox::burst::{self, BurstOptions, EventMix, EventSet};
use slotpartner_sandbox::send::{self, Edit, EventKind, SendOptions};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerError, run_server, url_for};

fn usage() -> String {
    format!(
        "slotpartner-sandbox {version}: local stand-in of the slot-machine game service

USAGE:
  slotpartner-sandbox serve [--listen ADDR] [--http-listen ADDR] [--token UUID]
                            [--ca-out FILE] [--ready-file FILE] [--exit-on-stdin-eof]
                            [--events-count N [--events-seed S] [--events-index I]
                             [--events-kind mixed|refund|payout]]
  slotpartner-sandbox send --url URL [--token UUID] [--ca-file PEM] [--index N] [--count N]
                           [--set FIELD=VALUE]... [--unset FIELD]... [--body-file FILE]
                           [--expect-success true|false] [--expect-http CODE]
                           [--header NAME:VALUE]... [--print-body]
                           refund|payout|balance|raw
  slotpartner-sandbox send --url URL --burst N [--token UUID] [--ca-file PEM] [--index I]
                           [--seed S] [--lose P] [--repeat P] [--reorder P]
                           [--concurrency K] [--report-json FILE] [--quiet] [--latency]
                           [--expect-success true|false]
                           mixed|refund|payout
  slotpartner-sandbox --help | --version

serve: HTTPS action address POST {{base_url}}/rest/action (getGames, getEvent, echo)
  with a fresh CA and localhost certificate; prints 'listening https://127.0.0.1:PORT'
  (and 'listening-http http://127.0.0.1:PORT' with --http-listen) when ready.
  --listen ADDR        HTTPS address, loopback only (default 127.0.0.1:0 = free port)
  --http-listen ADDR   plain HTTP listener answering every request with 401
  --token UUID         accepted X-Service-Token (default {DEFAULT_TOKEN})
  --ca-out FILE        write the CA certificate (PEM) there
  --ready-file FILE    write the https base URL there once ready (atomically)
  --exit-on-stdin-eof  exit when standard input reaches end of file
  --events-count N     getEvent knows N events: those 'send --burst' builds with the
                       same --events-seed (default 1), --events-kind (default mixed)
                       and first --events-index (default 1); without it none
  getEvent {{\"action\":\"getEvent\",\"index\":I}}: 200 {{\"event\":{{...}}}} or 404 notFound.
  Fault prefixes before /rest/action: /fault/status/CODE, /fault/malformed,
  /fault/notjson, /fault/slow/MS, /fault/redirect, /fault/big, /fault/close.

send: POST callback events to a partner URL and judge each reply; prints
  'index=N event=NAME http=STATUS body=BODY verdict=ok|UNEXPECTED: REASON'.
  --url URL            https:// (verified), or http:// to loopback hosts only
  --token UUID         X-Service-Token value (default {DEFAULT_TOKEN}; '' omits it)
  --ca-file PEM        trust these root certificates (else the Mozilla roots)
  --index N            event index of the first event (default 1)
  --count N            send N events with consecutive indexes (default 1)
  --set FIELD=VALUE    set a top-level field; VALUE is JSON if it parses, else a string
  --unset FIELD        remove a top-level field
  --body-file FILE     raw: the bytes to send
  --expect-success B   refund/payout: 'success' must be B; balance: B = empty errorMessage
  --expect-http CODE   raw: the HTTP status must be CODE (without it, only 2xx is ok)
  --header NAME:VALUE  send this header too, with every request (repeatable; one named
                       Content-Type or X-Service-Token replaces that header)
  --print-body         print 'sent index=N event=NAME bytes=LEN body=BODY' before each reply line
  Exit status: 0 all verdicts ok, 1 otherwise, 2 usage error.

send --burst N: N refund/payout events with indexes I..I+N-1 (transactionId
  {tx_base} + index), delivered by a seeded schedule; every reply is judged and a
  repeat must get the byte-identical reply of the first delivery. Lines
  'index=N event=NAME delivery=D http=STATUS body=BODY verdict=...', then 'summary ...'.
  --seed S             events and schedule; same seed, same run (default 1)
  --lose P             share of events never delivered (0..1, default 0)
  --repeat P           share of delivered events sent again, byte-identical (default 0)
  --reorder P          share of delivered events swapped with a later one (default 0)
  --concurrency K      send over K connections at once (1..{max_k}, default 1)
  --report-json FILE   write the report (lost/repeated indexes, totals) as JSON
  --quiet              print only failed deliveries and the summary
  --latency            time every request: the rate and the latency percentiles (p50, p90,
                       p99, max) on one more summary line and in --report-json
  mixed|refund|payout  both kinds (each index either, by the seed) or one
  Exit status: 0 every check passed, 1 otherwise, 2 usage error.
",
        version = env!("CARGO_PKG_VERSION"),
        tx_base = burst::TRANSACTION_BASE,
        max_k = burst::MAX_CONCURRENCY,
    )
}

fn main() -> ExitCode {
    let mut args = Args::new(std::env::args().skip(1).collect());
    let result = match args.items.first().map(String::as_str) {
        None => Err(Failure::Usage("missing subcommand".into())),
        Some("-h" | "--help" | "help") => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some("-V" | "--version") => {
            println!("slotpartner-sandbox {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some("serve") => {
            args.pos = 1;
            serve(args)
        }
        Some("send") => {
            args.pos = 1;
            send_cmd(args)
        }
        Some(other) => Err(Failure::Usage(format!("unknown subcommand '{other}'"))),
    };
    match result {
        Ok(code) => code,
        Err(Failure::Usage(msg)) => {
            eprintln!("error: {msg}\n(see slotpartner-sandbox --help)");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    Usage(String),
    Runtime(String),
}

fn usage_err<T>(msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::Usage(msg.into()))
}

/// A tiny argument cursor: `--name value`, `--name=value`, positionals.
struct Args {
    items: Vec<String>,
    pos: usize,
}

enum Arg {
    Opt(String, Option<String>),
    Pos(String),
    Help,
}

impl Args {
    fn new(items: Vec<String>) -> Args {
        Args { items, pos: 0 }
    }

    fn next(&mut self) -> Option<Arg> {
        let item = self.items.get(self.pos)?.clone();
        self.pos += 1;
        Some(match item.as_str() {
            "-h" | "--help" => Arg::Help,
            s if s.starts_with("--") => match s.split_once('=') {
                Some((name, value)) => Arg::Opt(name.to_string(), Some(value.to_string())),
                None => Arg::Opt(s.to_string(), None),
            },
            _ => Arg::Pos(item),
        })
    }

    fn value(&mut self, name: &str, inline: Option<String>) -> Result<String, Failure> {
        if let Some(v) = inline {
            return Ok(v);
        }
        let v = self.items.get(self.pos).cloned();
        self.pos += 1;
        v.ok_or_else(|| Failure::Usage(format!("{name} needs a value")))
    }
}

fn parse_addr(flag: &str, s: &str) -> Result<SocketAddr, Failure> {
    let addr = match s.strip_prefix("localhost:") {
        Some(port) => port.parse::<u16>().ok().map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p))),
        None => s.parse().ok(),
    };
    let addr = addr.ok_or_else(|| Failure::Usage(format!("{flag}: '{s}' is not an address like 127.0.0.1:8443")))?;
    if !addr.ip().is_loopback() {
        return usage_err(format!(
            "{flag}: {addr} is not a loopback address; the sandbox listens only on 127.0.0.0/8 or ::1"
        ));
    }
    Ok(addr)
}

fn parse_num<T: std::str::FromStr>(flag: &str, s: &str) -> Result<T, Failure> {
    s.parse().map_err(|_| Failure::Usage(format!("{flag}: '{s}' is not a valid number")))
}

/// Writes `contents` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), Failure> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, contents).and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::Runtime(format!("cannot write {}: {e}", path.display()))
    })
}

fn default_events() -> EventSet {
    EventSet { seed: 1, mix: EventMix::Mixed, first_index: 1, count: 0 }
}

fn parse_mix(flag: &str, s: &str) -> Result<EventMix, Failure> {
    EventMix::parse(s).ok_or_else(|| Failure::Usage(format!("{flag}: '{s}' is not mixed, refund or payout")))
}

fn parse_share(flag: &str, s: &str) -> Result<f64, Failure> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => usage_err(format!("{flag}: '{s}' is not a share between 0 and 1 (e.g. 0.02)")),
    }
}

fn serve(mut args: Args) -> Result<ExitCode, Failure> {
    let mut config = ServerConfig::default();
    let (mut ca_out, mut ready_file, mut exit_on_eof) = (None::<PathBuf>, None::<PathBuf>, false);
    let (mut events, mut events_count) = (default_events(), None::<u64>);
    while let Some(arg) = args.next() {
        match arg {
            Arg::Help => {
                print!("{}", usage());
                return Ok(ExitCode::SUCCESS);
            }
            Arg::Opt(name, inline) => match name.as_str() {
                "--listen" => config.listen = parse_addr(&name, &args.value(&name, inline)?)?,
                "--http-listen" => config.http_listen = Some(parse_addr(&name, &args.value(&name, inline)?)?),
                "--token" => {
                    let token = args.value(&name, inline)?;
                    if !slotpartner_sandbox::is_uuid(&token) {
                        return usage_err(format!("--token: '{token}' is not a UUID"));
                    }
                    config.token = token;
                }
                "--ca-out" => ca_out = Some(args.value(&name, inline)?.into()),
                "--ready-file" => ready_file = Some(args.value(&name, inline)?.into()),
                "--exit-on-stdin-eof" if inline.is_none() => exit_on_eof = true,
                "--events-count" => events_count = Some(parse_num(&name, &args.value(&name, inline)?)?),
                "--events-seed" => events.seed = parse_num(&name, &args.value(&name, inline)?)?,
                "--events-index" => events.first_index = parse_num(&name, &args.value(&name, inline)?)?,
                "--events-kind" => events.mix = parse_mix(&name, &args.value(&name, inline)?)?,
                _ => return usage_err(format!("serve: unknown option '{name}'")),
            },
            Arg::Pos(p) => return usage_err(format!("serve: unexpected argument '{p}'")),
        }
    }
    match events_count {
        Some(count) => {
            events.count = count;
            events.validate().map_err(|e| Failure::Usage(format!("--events-count/--events-index: {e}")))?;
            config.events = Some(events);
        }
        None if events != default_events() => {
            return usage_err("--events-seed, --events-index and --events-kind need --events-count N");
        }
        None => {}
    }

    let handle = run_server(config).map_err(|e| match e {
        ServerError::NotLoopback(_) => Failure::Usage(e.to_string()),
        _ => Failure::Runtime(e.to_string()),
    })?;
    if let Some(path) = &ca_out {
        write_atomically(path, handle.ca_pem().as_bytes())?;
    }
    if let Some(path) = &ready_file {
        write_atomically(path, handle.base_url().as_bytes())?;
    }
    let mut ready = format!("listening {}\n", url_for("https", handle.https_addr()));
    if let Some(url) = handle.http_base_url() {
        ready.push_str(&format!("listening-http {url}\n"));
    }
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(ready.as_bytes())
        .and_then(|_| stdout.flush())
        .map_err(|e| Failure::Runtime(format!("cannot write to stdout: {e}")))?;
    drop(stdout);

    if exit_on_eof {
        let mut stdin = io::stdin();
        let mut buf = [0u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        eprintln!("standard input closed; exiting");
        handle.shutdown();
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        thread::park();
    }
}

fn send_cmd(mut args: Args) -> Result<ExitCode, Failure> {
    let mut opts = SendOptions::new("", EventKind::Raw);
    let (mut url, mut kind) = (None, None::<String>);
    let mut count_given = false;
    // Burst mode: --burst N and its options.
    let (mut burst_count, mut burst_only) = (None::<u64>, None::<String>);
    let mut bopts = BurstOptions::new("", 1);
    let mut report_json = None::<PathBuf>;
    while let Some(arg) = args.next() {
        match arg {
            Arg::Help => {
                print!("{}", usage());
                return Ok(ExitCode::SUCCESS);
            }
            Arg::Opt(name, None) if name == "--quiet" => {
                bopts.quiet = true;
                burst_only = Some(name);
            }
            Arg::Opt(name, None) if name == "--latency" => {
                bopts.latency = true;
                burst_only = Some(name);
            }
            Arg::Opt(name, None) if name == "--print-body" => opts.print_body = true,
            Arg::Opt(name, inline) => {
                let value = args.value(&name, inline)?;
                match name.as_str() {
                    "--url" => url = Some(value),
                    "--token" => opts.token = value,
                    "--ca-file" => opts.ca_file = Some(value.into()),
                    "--index" => opts.index = parse_num(&name, &value)?,
                    "--count" => {
                        opts.count = parse_num(&name, &value)?;
                        count_given = true;
                    }
                    "--set" => opts.edits.push(send::parse_set(&value).map_err(Failure::Usage)?),
                    "--unset" => opts.edits.push(Edit::Unset(value)),
                    "--header" => opts.headers.push(send::parse_header(&value).map_err(Failure::Usage)?),
                    "--body-file" => opts.body_file = Some(value.into()),
                    "--expect-success" => {
                        opts.expect_success = Some(match value.as_str() {
                            "true" => true,
                            "false" => false,
                            _ => return usage_err("--expect-success takes true or false"),
                        })
                    }
                    "--expect-http" => opts.expect_http = Some(parse_num(&name, &value)?),
                    "--burst" => burst_count = Some(parse_num(&name, &value)?),
                    "--seed" | "--lose" | "--repeat" | "--reorder" | "--concurrency" | "--report-json" => {
                        match name.as_str() {
                            "--seed" => bopts.seed = parse_num(&name, &value)?,
                            "--lose" => bopts.shares.lose = parse_share(&name, &value)?,
                            "--repeat" => bopts.shares.repeat = parse_share(&name, &value)?,
                            "--reorder" => bopts.shares.reorder = parse_share(&name, &value)?,
                            "--concurrency" => bopts.concurrency = parse_num(&name, &value)?,
                            _ => report_json = Some(value.into()),
                        }
                        burst_only = Some(name);
                    }
                    _ => return usage_err(format!("send: unknown option '{name}'")),
                }
            }
            Arg::Pos(p) if kind.is_none() => kind = Some(p),
            Arg::Pos(p) => return usage_err(format!("send: unexpected argument '{p}'")),
        }
    }
    let url = url.ok_or_else(|| Failure::Usage("send needs --url URL".into()))?;
    if let Some(count) = burst_count {
        return burst_cmd(url, count, opts, count_given, kind, bopts, report_json);
    }
    if let Some(flag) = burst_only {
        return usage_err(format!("{flag} applies to --burst N only"));
    }
    let kind = kind.ok_or_else(|| Failure::Usage("send needs an event kind: refund, payout, balance or raw".into()))?;
    opts.url = url;
    opts.kind = EventKind::parse(&kind)
        .ok_or_else(|| Failure::Usage(format!("send: unknown event kind '{kind}' (refund, payout, balance or raw)")))?;
    opts.validate().map_err(Failure::Usage)?;
    let all_ok = send::run(&opts, &mut io::stdout().lock()).map_err(Failure::Usage)?;
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `send --burst N`: the shared options come from `single`.
fn burst_cmd(
    url: String,
    count: u64,
    single: SendOptions,
    count_given: bool,
    kind: Option<String>,
    mut opts: BurstOptions,
    report_json: Option<PathBuf>,
) -> Result<ExitCode, Failure> {
    if count_given {
        return usage_err("--count does not apply to --burst (its value is the count)");
    }
    if !single.edits.is_empty() || single.body_file.is_some() || single.expect_http.is_some() {
        return usage_err(
            "--set, --unset, --body-file and --expect-http do not apply to --burst (its events are fixed by the seed, so that serve's getEvent returns them unchanged)",
        );
    }
    if !single.headers.is_empty() || single.print_body {
        return usage_err("--header and --print-body do not apply to --burst");
    }
    let kind = kind.ok_or_else(|| Failure::Usage("send --burst needs a kind: mixed, refund or payout".into()))?;
    opts.mix = EventMix::parse(&kind).ok_or_else(|| {
        Failure::Usage(format!("send --burst: the kind must be mixed, refund or payout, not '{kind}'"))
    })?;
    opts.url = url;
    opts.count = count;
    opts.token = single.token;
    opts.ca_file = single.ca_file;
    opts.first_index = single.index;
    opts.expect_success = single.expect_success;
    opts.validate().map_err(Failure::Usage)?;
    let report = burst::run(&opts, &mut io::stdout().lock()).map_err(Failure::Usage)?;
    if let Some(path) = &report_json {
        write_atomically(path, report.to_json().as_bytes())?;
    }
    Ok(if report.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
