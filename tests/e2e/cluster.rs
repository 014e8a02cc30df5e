//! A throw-away PostgreSQL cluster for tests and benchmarks, shared by `tests/journal.rs`,
//! `tests/exactly_once.rs` and `benches/journal.rs` (`#[path]` includes it; it is no test target
//! of its own): `initdb` and `pg_ctl` from `/usr/lib/postgresql/*/bin`, run as
//! `nobody` when the caller is root (PostgreSQL refuses root), a temporary folder, a free port on
//! 127.0.0.1, stopped and removed by `Drop`, also when a test panics.
#![allow(dead_code)] // each includer uses part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Whether `tool` is in one of the usual system folders.
pub fn have_tool(tool: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"].iter().any(|d| Path::new(d).join(tool).exists())
}

/// The prefix that runs a command as `nobody` when we are root (empty when we are not); `None`
/// when root has no tool to drop privileges with.
pub fn unprivileged_prefix() -> Option<Vec<&'static str>> {
    if !is_root() {
        Some(Vec::new())
    } else if have_tool("runuser") {
        Some(vec!["runuser", "-u", "nobody", "--"])
    } else if have_tool("setpriv") {
        Some(vec!["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
    } else {
        None
    }
}

/// Hands `path` to the unprivileged user `runner` runs commands as (`nobody` when it is not
/// empty), so that a server run as that user may write there; nothing to do otherwise.
pub fn give_to_runner(runner: &[&str], path: &Path) {
    if runner.is_empty() {
        return;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id").args([flag, "nobody"]).output().expect("id");
        String::from_utf8_lossy(&out.stdout).trim().parse().expect("nobody's id")
    };
    std::os::unix::fs::chown(path, Some(id("-u")), Some(id("-g")))
        .unwrap_or_else(|e| panic!("chown {} to nobody: {e}", path.display()));
}

/// A free loopback port, bound then released, that no earlier call of this test process gave:
/// the kernel may hand a released port out again, and two servers of the process given one port
/// would answer for each other.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// The newest `/usr/lib/postgresql/*/bin` that has `initdb` and `pg_ctl`.
pub fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.split('.').next()?.parse().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A cluster in a temporary folder owned by the unprivileged user, listening on loopback;
/// stopped and removed when dropped.
pub struct Cluster {
    bin: PathBuf,
    runner: Vec<&'static str>,
    dir: TempDir,
    port: u16,
    /// The language the server's messages are translated to (gettext's `LANGUAGE`), when asked
    /// (`start_speaking`).
    language: Option<&'static str>,
}

impl Cluster {
    /// Starts a cluster, or prints a SKIP line (naming `what` is skipped and why) and returns
    /// `None` when PostgreSQL is not installed or cannot be run unprivileged.
    pub fn start(what: &str) -> Option<Cluster> {
        Cluster::start_in(what, None)
    }

    /// As `start`, the server's messages translated to `language` (`de`, `fr`: gettext's
    /// `LANGUAGE` in the server's environment), as a server set up in that language's locale
    /// (`lc_messages`) sends them. The translation needs the server's `lc_messages` not to be `C`
    /// (`initdb` takes it from the environment's locale) and PostgreSQL's translations installed:
    /// `speaks` tells whether it took.
    pub fn start_speaking(what: &str, language: &'static str) -> Option<Cluster> {
        Cluster::start_in(what, Some(language))
    }

    /// Whether the server's error messages come translated (see `start_speaking`): a cast it
    /// refuses is not answered in English.
    pub fn speaks(&self) -> bool {
        let refused = self.client().batch_execute("SELECT CAST('x' AS integer)").expect_err("not an integer");
        refused.as_db_error().is_some_and(|db| !db.message().starts_with("invalid input syntax"))
    }

    fn start_in(what: &str, language: Option<&'static str>) -> Option<Cluster> {
        let Some(bin) = postgres_bin() else {
            println!("SKIP {what}: no initdb and pg_ctl under /usr/lib/postgresql/*/bin (Debian package `postgresql`)");
            return None;
        };
        let Some(runner) = unprivileged_prefix() else {
            println!("SKIP {what}: running as root and neither runuser nor setpriv can run PostgreSQL as nobody");
            return None;
        };
        let dir = TempDir::new("slotpartner-pg");
        give_to_runner(&runner, &dir.0);
        let cluster = Cluster { bin, runner, dir, port: free_port(), language };
        let data = cluster.dir.0.join("data");
        cluster
            .run("initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"]);
        let server_options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=100",
            cluster.port,
            cluster.dir.0.display()
        );
        let log = cluster.dir.0.join("log");
        let data = data.to_str().unwrap();
        let log = log.to_str().unwrap();
        cluster.run("pg_ctl", &["-D", data, "-l", log, "-w", "-t", "30", "-o", &server_options, "start"]);
        Some(cluster)
    }

    fn command(&self, tool: &str) -> Command {
        let tool = self.bin.join(tool);
        let mut command = match self.runner.split_first() {
            Some((runner, args)) => {
                let mut command = Command::new(runner);
                command.args(args).arg(tool);
                command
            }
            None => Command::new(tool),
        };
        command.current_dir(&self.dir.0).stdin(Stdio::null());
        if let Some(language) = self.language {
            command.env("LANGUAGE", language);
        }
        command
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let output = self.command(tool).args(args).output().unwrap_or_else(|e| panic!("{tool}: {e}"));
        if !output.status.success() {
            let log = std::fs::read_to_string(self.dir.0.join("log")).unwrap_or_default();
            panic!(
                "{tool} failed: {}\n{}\n{log}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    /// Restarts the server as an operator would (`pg_ctl restart -m fast`, with the options it
    /// was started with): every open connection is terminated (SQLSTATE 57P01), and connections
    /// are refused until the server is up again, which this waits for.
    pub fn restart(&self) {
        let data = self.dir.0.join("data");
        let log = self.dir.0.join("log");
        self.run(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-m", "fast", "-w", "-t", "60", "restart"],
        );
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Turns TLS on and restarts the server: `ssl = on`, with `cert_pem` (the server's certificate,
    /// then the chain up to its CA) and `key_pem` as `ssl_cert_file` and `ssl_key_file`, written
    /// into the cluster's folder as the server's user's files, the key 0600 (PostgreSQL refuses a
    /// key that others may read). Clients may still connect without TLS (`host` lines of the
    /// default `pg_hba.conf`), `Cluster::client` among them.
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) {
        use std::os::unix::fs::PermissionsExt;
        let cert = self.dir.0.join("server.crt");
        let key = self.dir.0.join("server.key");
        std::fs::write(&cert, cert_pem).expect("write the server certificate");
        std::fs::write(&key, key_pem).expect("write the server key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod the server key");
        for file in [&cert, &key] {
            give_to_runner(&self.runner, file);
        }
        let mut client = self.client();
        // One statement per query: ALTER SYSTEM refuses to run inside a transaction block, and a
        // query of several statements is one.
        for statement in [
            format!("ALTER SYSTEM SET ssl_cert_file = '{}'", cert.display()),
            format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()),
            "ALTER SYSTEM SET ssl = on".to_owned(),
        ] {
            client.batch_execute(&statement).unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
        drop(client);
        self.restart();
    }

    /// The superuser's URL of the `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url(), postgres::NoTls).expect("connect to the test cluster")
    }

    /// The superuser's URL of database `name`.
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name`, for a journal of its own where a URL cannot name a schema (behind
    /// a pooler, which passes no `options` on): answers its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.client().batch_execute(&format!("CREATE DATABASE {name}")).expect("create a database");
        self.database_url(name)
    }

    /// The command prefix that runs a server as this cluster's user (see `unprivileged_prefix`).
    pub fn runner(&self) -> &[&'static str] {
        &self.runner
    }

    /// A URL whose tables live in schema `name` of their own (created here), so that one
    /// cluster serves several journals.
    pub fn schema_url(&self, name: &str) -> String {
        self.client().batch_execute(&format!("CREATE SCHEMA {name}")).expect("create a schema");
        format!("{}?options=-csearch_path%3D{name}", self.url())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.0.join("data");
        let _ = self.command("pg_ctl").args(["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]).output();
    }
}
