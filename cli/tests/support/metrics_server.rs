//! `slotpartner metrics --listen 127.0.0.1:0` as a process, for the tests of the listener: scrapes
//! and raw requests sent to it.

#![allow(dead_code)]

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::BIN;

/// `slotpartner metrics --listen 127.0.0.1:0` running; killed when dropped.
pub struct MetricsServer {
    child: Child,
    pub addr: String,
}

impl MetricsServer {
    pub fn start(journal: &str) -> MetricsServer {
        let mut child = Command::new(BIN)
            .args(["metrics", "--listen", "127.0.0.1:0", "--journal", journal])
            .env_remove("SLOTPARTNER_JOURNAL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line.trim_end().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).to_owned();
        // The rest of stderr is drained, so that the server never blocks writing to it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        MetricsServer { child, addr }
    }

    /// Sends `request` as it is; the status, the head and the body of the answer.
    pub fn ask(&self, request: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{answer:?}"));
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_owned(), body.to_owned())
    }

    pub fn get(&self, path: &str) -> (u16, String, String) {
        self.ask(&format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/plain\r\n\r\n", self.addr))
    }

    /// A scrape of `/metrics` as Prometheus makes it, given `within` to be answered in full: how
    /// long it took, or what went wrong (refused, closed without an answer, not a 200, too slow).
    pub fn scrape_within(&self, within: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let mut stream = TcpStream::connect(&self.addr).map_err(|e| format!("connect: {e}"))?;
        stream.set_read_timeout(Some(within)).unwrap();
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\nAccept: text/plain\r\n\r\n", self.addr);
        stream.write_all(request.as_bytes()).map_err(|e| format!("send: {e}"))?;
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("after {:?} and {} bytes: {e}", started.elapsed(), answer.len())),
            }
            if started.elapsed() > within {
                break;
            }
        }
        let took = started.elapsed();
        let answer = String::from_utf8_lossy(&answer);
        if !answer.starts_with("HTTP/1.1 200 ") || !answer.contains("slotpartner_journal_up{") {
            return Err(format!("after {took:?}, not a scrape's answer: {answer:?}"));
        }
        if took > within {
            return Err(format!("answered in {took:?}"));
        }
        Ok(took)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
