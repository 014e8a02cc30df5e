//! PgBouncer in transaction pooling mode in front of a throw-away PostgreSQL cluster, for the
//! tests that run the journal behind a pooler (`tests/journal.rs`, `tests/exactly_once.rs`):
//! Debian's `/usr/sbin/pgbouncer`, run as the cluster's user (`nobody` when the caller is root;
//! PgBouncer refuses root), on a free port of 127.0.0.1, with its configuration, log and pid
//! file in a temporary folder; stopped (by the pid it wrote) and the folder removed by `Drop`,
//! also when a test panics, before the cluster it owns is stopped. Included with `#[path]` beside
//! `cluster.rs` (`mod cluster;` at the including crate's root).
//!
//! The pool is small on purpose (`default_pool_size = 2`): several client connections share each
//! server connection, as a PHP-FPM fleet's do, so that whatever one client leaves on a server
//! connection (a named statement, a session setting) meets the next client there.
#![allow(dead_code)] // each includer uses part of it

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, TempDir, free_port, give_to_runner};

const PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// PgBouncer in front of its own cluster; stopped, then the cluster, when dropped.
pub struct PgBouncer {
    /// The PgBouncer process, by the pid it wrote (it daemonizes, as `pg_ctl` does).
    pid: Option<u32>,
    port: u16,
    dir: TempDir,
    cluster: Cluster,
}

impl PgBouncer {
    /// Starts a cluster and PgBouncer in front of it, or prints a SKIP line (naming `what` is
    /// skipped and why) and returns `None` when PgBouncer (Debian package `pgbouncer`) or
    /// PostgreSQL is not installed or cannot be run unprivileged.
    pub fn start(what: &str) -> Option<PgBouncer> {
        if !Path::new(PGBOUNCER).exists() {
            println!("SKIP {what}: no {PGBOUNCER} (Debian package `pgbouncer`)");
            return None;
        }
        let cluster = Cluster::start(what)?;
        let dir = TempDir::new("slotpartner-pgbouncer");
        give_to_runner(cluster.runner(), &dir.0);
        let port = free_port();
        let folder = dir.0.clone();
        let at = move |name: &str| folder.join(name).display().to_string();
        // Trust on loopback, as the cluster does: the user must still be listed in auth_file.
        std::fs::write(at("users.txt"), "\"postgres\" \"\"\n").expect("write PgBouncer's auth_file");
        let config = format!(
            "[databases]
; every database the client names, on the cluster, as the same user
* = host=127.0.0.1 port={server}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
; no Unix socket in /tmp
unix_socket_dir =
auth_type = trust
auth_file = {users}
logfile = {log}
pidfile = {pid}
pool_mode = transaction
; two server connections a database: client connections share them
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
; the conformance suite keeps a few client connections for each of its ~50 databases
max_client_conn = 1000
; and the cluster allows 100 connections: idle ones of other databases are closed for a new one
max_user_connections = 40
; a restarted cluster is connected to again at once, not after 15 s
server_login_retry = 1
; tokio-postgres sends only user, database, client_encoding and application_name, which
; PgBouncer carries; none is ignored
ignore_startup_parameters =
",
            server = cluster.port(),
            users = at("users.txt"),
            log = at("pgbouncer.log"),
            pid = at("pgbouncer.pid"),
        );
        std::fs::write(at("pgbouncer.ini"), config).expect("write pgbouncer.ini");
        let mut bouncer = PgBouncer { pid: None, port, dir, cluster };
        let mut command = match bouncer.cluster.runner().split_first() {
            Some((runner, args)) => {
                let mut command = Command::new(runner);
                command.args(args).arg(PGBOUNCER);
                command
            }
            None => Command::new(PGBOUNCER),
        };
        let output = command
            .args(["-d", &at("pgbouncer.ini")])
            .current_dir(&bouncer.dir.0)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{PGBOUNCER}: {e}"));
        let started = Instant::now();
        while bouncer.pid.is_none() && started.elapsed() < Duration::from_secs(10) {
            bouncer.pid = std::fs::read_to_string(at("pgbouncer.pid")).ok().and_then(|pid| pid.trim().parse().ok());
            std::thread::sleep(Duration::from_millis(20));
        }
        if !output.status.success() || bouncer.pid.is_none() {
            panic!(
                "{PGBOUNCER} did not start: {}\n{}\n{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                bouncer.log()
            );
        }
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "PgBouncer never listened:\n{}", bouncer.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(bouncer)
    }

    /// The cluster behind it, to create databases, restart, or reach directly.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The port PgBouncer listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` through PgBouncer.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name` on the cluster and answers its URL through PgBouncer: one pool of
    /// its own (a database a journal), as a schema in the URL would not reach the server.
    pub fn create_database(&self, name: &str) -> String {
        self.cluster.create_database(name);
        self.url(name)
    }

    /// The URL `url` (through PgBouncer) names, straight to the cluster: for what a test does
    /// behind the journal's back, with a client that prepares named statements.
    pub fn direct(&self, url: &str) -> String {
        let through = format!("127.0.0.1:{}/", self.port);
        assert!(url.contains(&through), "{url} does not go through PgBouncer");
        url.replacen(&through, &format!("127.0.0.1:{}/", self.cluster.port()), 1)
    }

    /// PgBouncer's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let Some(pid) = self.pid else { return };
        // Gone, or a zombie its new parent (init, after `-d`) has not reaped yet.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, state)| !state.starts_with('Z')))
        };
        // SIGINT: PgBouncer's safe shutdown would wait for clients; SIGTERM ends it at once.
        let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).stderr(Stdio::null()).status();
        let started = Instant::now();
        while alive() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive() {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}
