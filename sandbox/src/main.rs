//! Command line of `slotpartner-sandbox`: hand-parsed `serve` and `send`.

#![forbid(unsafe_code)]

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;

use slotpartner_sandbox::send::{self, Edit, EventKind, SendOptions};
use slotpartner_sandbox::{DEFAULT_TOKEN, ServerConfig, ServerError, run_server, url_for};

fn usage() -> String {
    format!(
        "slotpartner-sandbox {version}: local stand-in of the slot-machine game service

USAGE:
  slotpartner-sandbox serve [--listen ADDR] [--http-listen ADDR] [--token UUID]
                            [--ca-out FILE] [--ready-file FILE] [--exit-on-stdin-eof]
  slotpartner-sandbox send --url URL [--token UUID] [--ca-file PEM] [--index N] [--count N]
                           [--set FIELD=VALUE]... [--unset FIELD]... [--body-file FILE]
                           [--expect-success true|false] [--expect-http CODE]
                           refund|payout|balance|raw
  slotpartner-sandbox --help | --version

serve: HTTPS action address POST {{base_url}}/rest/action (getGames, echo) with a
  fresh CA and localhost certificate; prints 'listening https://127.0.0.1:PORT'
  (and 'listening-http http://127.0.0.1:PORT' with --http-listen) when ready.
  --listen ADDR        HTTPS address, loopback only (default 127.0.0.1:0 = free port)
  --http-listen ADDR   plain HTTP listener answering every request with 401
  --token UUID         accepted X-Service-Token (default {DEFAULT_TOKEN})
  --ca-out FILE        write the CA certificate (PEM) there
  --ready-file FILE    write the https base URL there once ready (atomically)
  --exit-on-stdin-eof  exit when standard input reaches end of file
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
  --expect-http CODE   raw: the HTTP status must be CODE
  Exit status: 0 all verdicts ok, 1 otherwise, 2 usage error.
",
        version = env!("CARGO_PKG_VERSION")
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

fn serve(mut args: Args) -> Result<ExitCode, Failure> {
    let mut config = ServerConfig::default();
    let (mut ca_out, mut ready_file, mut exit_on_eof) = (None::<PathBuf>, None::<PathBuf>, false);
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
                _ => return usage_err(format!("serve: unknown option '{name}'")),
            },
            Arg::Pos(p) => return usage_err(format!("serve: unexpected argument '{p}'")),
        }
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
    let (mut url, mut kind) = (None, None);
    while let Some(arg) = args.next() {
        match arg {
            Arg::Help => {
                print!("{}", usage());
                return Ok(ExitCode::SUCCESS);
            }
            Arg::Opt(name, inline) => {
                let value = args.value(&name, inline)?;
                match name.as_str() {
                    "--url" => url = Some(value),
                    "--token" => opts.token = value,
                    "--ca-file" => opts.ca_file = Some(value.into()),
                    "--index" => opts.index = parse_num(&name, &value)?,
                    "--count" => opts.count = parse_num(&name, &value)?,
                    "--set" => opts.edits.push(send::parse_set(&value).map_err(Failure::Usage)?),
                    "--unset" => opts.edits.push(Edit::Unset(value)),
                    "--body-file" => opts.body_file = Some(value.into()),
                    "--expect-success" => {
                        opts.expect_success = Some(match value.as_str() {
                            "true" => true,
                            "false" => false,
                            _ => return usage_err("--expect-success takes true or false"),
                        })
                    }
                    "--expect-http" => opts.expect_http = Some(parse_num(&name, &value)?),
                    _ => return usage_err(format!("send: unknown option '{name}'")),
                }
            }
            Arg::Pos(p) if kind.is_none() => {
                kind = Some(EventKind::parse(&p).ok_or_else(|| {
                    Failure::Usage(format!("send: unknown event kind '{p}' (refund, payout, balance or raw)"))
                })?)
            }
            Arg::Pos(p) => return usage_err(format!("send: unexpected argument '{p}'")),
        }
    }
    opts.url = url.ok_or_else(|| Failure::Usage("send needs --url URL".into()))?;
    opts.kind =
        kind.ok_or_else(|| Failure::Usage("send needs an event kind: refund, payout, balance or raw".into()))?;
    opts.validate().map_err(Failure::Usage)?;
    let all_ok = send::run(&opts, &mut io::stdout().lock()).map_err(Failure::Usage)?;
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
