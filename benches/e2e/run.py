#!/usr/bin/env python3
"""make bench-e2e: a partner's callback endpoint end to end, the library against the
integration a careful team writes by hand, on loopback.

PHP: nginx in front of PHP-FPM (one pool of 4 static workers, opcache, the binding preloaded as
bindings/php/README.md's "Preloading (production)" says) serving benches/e2e/library.php (the
example bindings/php/examples/callback.php with its journal and a ledger table in the journal's
database) and benches/e2e/handwritten.php (json_decode, one PDO transaction with an idempotency
row and the credit). Python: gunicorn (4 sync workers each) serving benches/e2e/library_wsgi.py
(slotpartner.wsgi.application, the credit staged into the same ledger) and
benches/e2e/handwritten_wsgi.py. Each on SQLite (one WAL file per integration, synchronous FULL)
and on PostgreSQL (a throw-away cluster on 127.0.0.1, one database per integration).

The load is `slotpartner-sandbox send --burst` (seeded refunds and payouts, repeats byte for
byte, every reply checked, --latency for the rate and the latency): for each
backend and concurrency, rounds alternate between the two integrations (the order swapped each
round), each round the same new events to both. A wrong reply, a request without a reply, or a
ledger that does not hold exactly one row per delivered event fails the run (exit 1).

Where the time goes, printed after the table: on PostgreSQL the statements and commits a request
with each statement's mean planning and execution time on the server (pg_stat_statements); for
every integration the CPU a request by program (user and system time of every process on the
machine read from /proc around each measured burst, so the web server, the workers, the database
and the load generator each get their share) and the disk flushes a request (/proc/diskstats:
the fsyncs that reached the disk, the durable commits' cost that CPU time does not show); on
PostgreSQL the server's time a request (pg_stat_statements' planning and execution time); on
SQLite, after the timed rounds, a round of 200 new events under `strace -c` attached to the
workers: the WAL frames written (pwrite64) and the syncs a delivery.

Environment: E2E_EVENTS (new events a round, 3000), E2E_REPEAT (share repeated, 0.02),
E2E_ROUNDS (3), E2E_CONCURRENCY (1,4,16), E2E_STACKS (php,python), E2E_BACKENDS
(sqlite,postgres), E2E_WARMUP (events before the first round, 300), E2E_KEEP=1 keeps the work
folder, E2E_STATEMENT_CACHE (the library's statement_cache_size on PostgreSQL, 64: the bench's
connections are direct, and docs/deployment.md has a direct connection keep the journal's
statements prepared; 0 sends them unnamed, as behind a pooler in transaction mode),
E2E_STEPS=1 also prints a PHP-FPM worker's CPU a request by step of the script
(benches/e2e/steps.php: a getrusage() a step and one appended line a request, so the measured
rounds then run a little slower than without). Missing packages (nginx, PHP-FPM with SQLite and
PostgreSQL PDO, gunicorn, psycopg) are installed with apt-get as root, saying so; elsewhere the
run stops naming them.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "benches" / "e2e"
SANDBOX = ROOT / "target" / "release" / "slotpartner-sandbox"
TOKEN = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
SEED = 20261126
PG_USER = "postgres"
SYSTEM_PYTHON = "/usr/bin/python3"  # the interpreter Debian's gunicorn and psycopg belong to


class Failed(Exception):
    pass


class Interrupted(BaseException):
    pass


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value else default


def env_list(name: str, default: str) -> list[str]:
    return [v.strip() for v in (os.environ.get(name) or default).split(",") if v.strip()]


EVENTS = env_int("E2E_EVENTS", 3000)
ROUNDS = env_int("E2E_ROUNDS", 3)
WARMUP = env_int("E2E_WARMUP", 300)
REPEAT = float(os.environ.get("E2E_REPEAT") or 0.02)
STEPS = os.environ.get("E2E_STEPS") == "1"
CONCURRENCY = [int(c) for c in env_list("E2E_CONCURRENCY", "1,4,16")]
STACKS = env_list("E2E_STACKS", "php,python")
BACKENDS = env_list("E2E_BACKENDS", "sqlite,postgres")
STATEMENT_CACHE = env_int("E2E_STATEMENT_CACHE", 64)


def say(line: str = "") -> None:
    print(line, flush=True)


_GIVEN_PORTS: set[int] = set()


def free_port() -> int:
    """A free loopback port, bound then released, that no earlier call of this process gave: the
    kernel may hand a released port out again, and two servers given one port answer for each
    other."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


def tail(path: pathlib.Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------
# What the run needs


def php_version() -> str | None:
    php = shutil.which("php")
    if not php:
        return None
    done = subprocess.run([php, "-r", "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION;"], capture_output=True, text=True)
    return done.stdout.strip() or None


def missing_packages() -> list[str]:
    wanted: list[str] = []
    if "sqlite" in BACKENDS and not shutil.which("strace"):
        wanted.append("strace")   # the writes and syncs a delivery on SQLite (write_calls)
    version = php_version()
    if "php" in STACKS:
        if not shutil.which("nginx") and not pathlib.Path("/usr/sbin/nginx").exists():
            wanted.append("nginx")
        prefix = f"php{version}" if version else "php"
        if not (version and pathlib.Path(f"/usr/sbin/php-fpm{version}").exists()):
            wanted.append(f"{prefix}-fpm")
        modules = subprocess.run(["php", "-m"], capture_output=True, text=True).stdout.split() if version else []
        if "pdo_sqlite" not in modules:
            wanted.append(f"{prefix}-sqlite3")
        if "postgres" in BACKENDS and "pdo_pgsql" not in modules:
            wanted.append(f"{prefix}-pgsql")
    if "python" in STACKS:
        probe = lambda module: subprocess.run([SYSTEM_PYTHON, "-c", f"import {module}"], capture_output=True).returncode == 0
        if not os.path.exists(SYSTEM_PYTHON) or not probe("gunicorn"):
            wanted.append("gunicorn")
        if "postgres" in BACKENDS and not probe("psycopg"):
            wanted.append("python3-psycopg")
    return wanted


def install(packages: list[str]) -> None:
    """apt-get install as root, without starting the packages' services (policy-rc.d)."""
    if not packages:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Failed("missing: %s (apt-get install -y --no-install-recommends %s)" % (", ".join(packages), " ".join(packages)))
    say("bench-e2e: installing %s (apt-get install -y --no-install-recommends; their services are not started)" % " ".join(packages))
    policy = pathlib.Path("/usr/sbin/policy-rc.d")
    placed = False
    if not policy.exists():
        policy.write_text("#!/bin/sh\n# make bench-e2e: no service starts while it installs packages\nexit 101\n")
        policy.chmod(0o755)
        placed = True
    try:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for attempt in (1, 2):
            done = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode == 0:
                return
            if attempt == 1:
                subprocess.run(["apt-get", "update"], env=env, stdin=subprocess.DEVNULL, capture_output=True)
        raise Failed("apt-get install %s failed:\n%s" % (" ".join(packages), (done.stdout + done.stderr)[-2000:]))
    finally:
        if placed:
            policy.unlink()


# ------------------------------------------------------------------------------------------------
# Processes: every server started here is stopped when the run ends, however it ends


def user_prefix() -> list[str]:
    """Runs a program as `nobody` when we are root (PostgreSQL refuses root); [] otherwise."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    raise Failed("running as root and neither setpriv nor runuser can drop to nobody")


def give(path: pathlib.Path) -> None:
    """Hands a folder to the servers' user."""
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)


SESSIONS: dict[int, str] = {}   # session id (a server's pid) -> the server's name, its first word


class Servers:
    def __init__(self, work: pathlib.Path) -> None:
        self.work = work
        self.procs: list[tuple[str, subprocess.Popen, int]] = []
        self.pg: tuple[pathlib.Path, pathlib.Path] | None = None

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, stop_signal: int = signal.SIGTERM) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "ab")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=self.work,
                                start_new_session=True)
        log.close()
        self.procs.append((name, proc, stop_signal))
        SESSIONS[proc.pid] = name.split("-")[0]   # its own session: by it, cpu_by_program tells gunicorn from python3
        return proc

    def stop(self, name: str) -> None:
        for entry in [e for e in self.procs if e[0] == name]:
            self.procs.remove(entry)
            self._stop(*entry)

    @staticmethod
    def _stop(name: str, proc: subprocess.Popen, stop_signal: int) -> None:
        if proc.poll() is None:
            try:
                proc.send_signal(stop_signal)
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        # Anything left of it (workers), by its own process group, which start() created.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            say(f"bench-e2e: {name} (pid {proc.pid}) did not stop")

    def stop_all(self) -> None:
        while self.procs:
            self._stop(*self.procs.pop())
        if self.pg:
            bin_dir, data = self.pg
            self.pg = None
            subprocess.run(user_prefix() + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)


def wait_http(url: str, proc: subprocess.Popen, log: pathlib.Path, seconds: float = 20) -> None:
    """Until something answers HTTP at url (any status)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Failed(f"{log.name}: the server exited ({proc.returncode}):\n{tail(log)}")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise Failed(f"{url}: nothing answers after {seconds} s:\n{tail(log)}")


# ------------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_bin() -> pathlib.Path | None:
    found = []
    for entry in pathlib.Path("/usr/lib/postgresql").glob("*/bin"):
        version = entry.parent.name.split(".")[0]
        if version.isdigit() and (entry / "initdb").exists() and (entry / "pg_ctl").exists():
            found.append((int(version), entry))
    return max(found)[1] if found else None


def start_postgres(servers: Servers, work: pathlib.Path) -> int:
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise Failed("no PostgreSQL server (initdb, pg_ctl under /usr/lib/postgresql/*/bin: apt-get install postgresql)")
    folder = work / "postgres"
    folder.mkdir()
    give(folder)
    data, log, port = folder / "data", folder / "log", free_port()
    prefix = user_prefix()

    def run(*argv: str) -> None:
        done = subprocess.run(prefix + list(argv), cwd=folder, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise Failed("%s failed: %s%s\n%s" % (argv[0], done.stdout, done.stderr, tail(log)))

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", PG_USER, "-E", "UTF8", "--no-sync")
    options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=100 "
               "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_utility=on -c pg_stat_statements.track_planning=on")
    servers.pg = (bin_dir, data)
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, "start")
    psql(port, "postgres", "CREATE EXTENSION pg_stat_statements")
    for db in ("php_library", "php_handwritten", "py_library", "py_handwritten"):
        psql(port, "postgres", f"CREATE DATABASE {db}")
    return port


def psql(port: int, db: str, sql: str) -> str:
    done = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
                           "-U", PG_USER, "-d", db, "-c", sql], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise Failed(f"psql {db}: {sql}: {done.stderr}")
    return done.stdout.strip()


def pg_counters(port: int, dbs: list[str]) -> dict[str, tuple[int, int]]:
    """(statements, commits) so far in each of `dbs`: pg_stat_statements' calls (BEGIN and COMMIT
    included) and pg_stat_database's xact_commit. An idle backend publishes its counts up to 10 s
    (PGSTAT_IDLE_INTERVAL) after its last transaction, so this waits 11 s first."""
    time.sleep(11)
    counters = {}
    for db in dbs:
        calls = psql(port, "postgres", "SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements s JOIN pg_database d "
                                       f"ON d.oid = s.dbid WHERE d.datname = '{db}'")
        commits = psql(port, "postgres", f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{db}'")
        counters[db] = (int(calls), int(commits))
    return counters


def pg_statements(port: int, db: str, requests: int) -> list[str]:
    """The statements of `db` by calls, per request, with the server's mean time planning and
    executing one (pg_stat_statements, pg_stat_statements.track_planning on), for the report."""
    rows = psql(port, "postgres", "SELECT calls, round((total_plan_time * 1000 / calls)::numeric) || '+' || round((total_exec_time * 1000 / calls)::numeric), "
                                  "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements s "
                                  f"JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '{db}' ORDER BY calls DESC LIMIT 8")
    shown = []
    for line in rows.splitlines():
        calls, mean_us, query = line.split("|", 2)
        if int(calls) * 50 >= requests:   # at least one request in fifty
            shown.append(f"      {int(calls) / requests:5.2f}  {mean_us:>9} µs  {query[:100]}")
    return shown


# ------------------------------------------------------------------------------------------------
# The integrations


class Target:
    """One integration on one backend: its URL, its ledger's DSN, what its ledger must hold."""

    def __init__(self, stack: str, side: str, backend: str, url: str, totals_dsn: str, pg_db: str | None) -> None:
        self.stack, self.side, self.backend, self.url = stack, side, backend, url
        self.totals_dsn, self.pg_db = totals_dsn, pg_db
        self.rows = self.money = 0
        self.requests = 0
        self.cpu: dict[str, float] = {}   # CPU seconds by program during this target's measured bursts
        self.cpu_requests = 0
        self.flushes: int | None = 0   # disk flushes (fsyncs that reached a disk) during them
        self.steps: pathlib.Path | None = None   # with E2E_STEPS=1, the file its PHP script's steps go to
        self.server_us: float | None = None   # PostgreSQL: the server's time a request (planning and executing)
        self.syscalls: dict[str, float] | None = None   # SQLite: the workers' write and sync calls a request

    @property
    def name(self) -> str:
        return f"{self.stack} {self.side} {self.backend}"


def as_user(argv: list[str], what: str) -> str:
    done = subprocess.run(user_prefix() + argv, capture_output=True, text=True, cwd="/", timeout=120)
    if done.returncode != 0:
        raise Failed(f"{what}: {done.stdout}{done.stderr}")
    return done.stdout


def php_setup(work: pathlib.Path, servers: Servers, pg_port: int | None) -> list[Target]:
    version = php_version()
    fpm = pathlib.Path(f"/usr/sbin/php-fpm{version}")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    root = os.geteuid() == 0
    folder = work / "php"
    folder.mkdir()
    give(folder)
    sock = folder / "fpm.sock"
    ini = [
        "opcache.enable=1",
        "opcache.enable_cli=0",
        "opcache.validate_timestamps=0",
        f"opcache.preload={ROOT / 'bindings/php/preload.php'}",
        "ffi.enable=preload",
        "memory_limit=128M",
        "display_errors=0",
        "log_errors=1",
        f"error_log={folder / 'php-errors.log'}",
    ]
    if root:
        # The master runs as root: preloading runs as opcache.preload_user, where FFI::load()
        # refuses, so the scope comes from ffi.preload with the header the binding's tool writes.
        header = work / "slotpartner-preload.h"
        subprocess.run(["php", str(ROOT / "bindings/php/bin/slotpartner-preload-header"), str(header)], check=True,
                       capture_output=True)
        header.chmod(0o644)
        ini += ["opcache.preload_user=nobody", f"ffi.preload={header}"]
    (work / "php.ini").write_text("\n".join(ini) + "\n")
    pool = [
        "[global]", f"pid = {work / 'php-fpm.pid'}", f"error_log = {work / 'php-fpm-errors.log'}", "daemonize = no",
        "[bench]", f"listen = {sock}", "listen.mode = 0660", "pm = static", "pm.max_children = 4",
        "pm.max_requests = 0", "clear_env = yes",
    ]
    if root:
        pool += ["user = nobody", "group = nogroup", "listen.owner = nobody", "listen.group = nogroup"]
    (work / "php-fpm.conf").write_text("\n".join(pool) + "\n")

    # The databases: one journal file (with the ledger table) for the library, one file for the
    # hand-written integration; on PostgreSQL a database each.
    sqlite_dir = folder / "sqlite"
    sqlite_dir.mkdir()
    give(sqlite_dir)
    lib_file, hand_file = sqlite_dir / "library.db", sqlite_dir / "handwritten.db"
    params: dict[str, dict[str, str]] = {}
    targets: list[Target] = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    if "sqlite" in BACKENDS:
        as_user(["php", str(HERE / "db.php"), "library", f"sqlite:{lib_file}", f"sqlite:{lib_file}"], "php db.php library")
        as_user(["php", str(HERE / "db.php"), "handwritten", f"sqlite:{hand_file}"], "php db.php handwritten")
        params["/sqlite/library"] = {"SCRIPT_FILENAME": str(HERE / "library.php"), "SLOTPARTNER_JOURNAL": f"sqlite:{lib_file}"}
        params["/sqlite/handwritten"] = {"SCRIPT_FILENAME": str(HERE / "handwritten.php"), "E2E_DB_DSN": f"sqlite:{hand_file}"}
        targets += [Target("php", "library", "sqlite", base + "/sqlite/library", f"sqlite:{lib_file}", None),
                    Target("php", "handwritten", "sqlite", base + "/sqlite/handwritten", f"sqlite:{hand_file}", None)]
    if pg_port is not None:
        dsn = lambda db: f"pgsql:host=127.0.0.1;port={pg_port};dbname={db}"
        journal = f"postgres://{PG_USER}@127.0.0.1:{pg_port}/php_library?sslmode=disable&statement_cache_size={STATEMENT_CACHE}"
        as_user(["php", str(HERE / "db.php"), "library", journal, dsn("php_library"), PG_USER], "php db.php library (postgres)")
        as_user(["php", str(HERE / "db.php"), "handwritten", dsn("php_handwritten"), PG_USER], "php db.php handwritten (postgres)")
        params["/postgres/library"] = {"SCRIPT_FILENAME": str(HERE / "library.php"), "SLOTPARTNER_JOURNAL": journal}
        params["/postgres/handwritten"] = {"SCRIPT_FILENAME": str(HERE / "handwritten.php"),
                                           "E2E_DB_DSN": dsn("php_handwritten"), "E2E_DB_USER": PG_USER}
        targets += [Target("php", "library", "postgres", base + "/postgres/library", dsn("php_library"), "php_library"),
                    Target("php", "handwritten", "postgres", base + "/postgres/handwritten", dsn("php_handwritten"), "php_handwritten")]

    if STEPS:
        steps = folder / "steps"
        steps.mkdir()
        give(steps)
        for t in targets:
            t.steps = steps / f"{t.backend}-{t.side}.log"
            params[f"/{t.backend}/{t.side}"]["E2E_STEPS"] = str(t.steps)
    locations = []
    for path, values in params.items():
        values = dict(values, SLOTPARTNER_TOKEN=TOKEN, SLOTPARTNER_SOURCES="127.0.0.1")
        lines = "".join(f"            fastcgi_param {k} \"{v}\";\n" for k, v in values.items())
        locations.append(f"        location = {path} {{\n            include /etc/nginx/fastcgi_params;\n{lines}"
                         f"            fastcgi_pass unix:{sock};\n        }}\n")
    temp = folder / "nginx-temp"
    temp.mkdir()
    give(temp)
    conf = f"""{'user nobody nogroup;' if root else ''}
worker_processes 1;
daemon off;
pid {work / 'nginx.pid'};
error_log {work / 'nginx-errors.log'} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path {temp}/body;
    fastcgi_temp_path {temp}/fastcgi;
    proxy_temp_path {temp}/proxy;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 64k;
{''.join(locations)}    }}
}}
"""
    (work / "nginx.conf").write_text(conf)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    fpm_proc = servers.start("php-fpm", [str(fpm), "-F", "-y", str(work / "php-fpm.conf"), "-c", str(work / "php.ini")],
                             env=env, stop_signal=signal.SIGQUIT)
    deadline = time.monotonic() + 20
    while not sock.exists():
        if fpm_proc.poll() is not None or time.monotonic() > deadline:
            raise Failed("php-fpm did not start:\n" + tail(work / "php-fpm.log") + "\n" + tail(work / "php-fpm-errors.log"))
        time.sleep(0.1)
    nginx_proc = servers.start("nginx", [nginx, "-p", str(work), "-e", str(work / "nginx-errors.log"), "-c", str(work / "nginx.conf")],
                               env=env, stop_signal=signal.SIGQUIT)
    wait_http(base, nginx_proc, work / "nginx-errors.log")
    return targets


def python_setup(work: pathlib.Path, servers: Servers, pg_port: int | None) -> list[Target]:
    folder = work / "python"
    folder.mkdir()
    give(folder)
    sqlite_dir = folder / "sqlite"
    sqlite_dir.mkdir()
    give(sqlite_dir)
    targets: list[Target] = []
    base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                "HOME": str(folder), "SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "127.0.0.1"}
    backends = []
    if "sqlite" in BACKENDS:
        lib_file, hand_file = sqlite_dir / "library.db", sqlite_dir / "handwritten.db"
        as_user(["php", str(HERE / "db.php"), "library", f"sqlite:{lib_file}", f"sqlite:{lib_file}"], "db.php library")
        as_user(["php", str(HERE / "db.php"), "handwritten", f"sqlite:{hand_file}"], "db.php handwritten")
        backends.append(("sqlite", {"SLOTPARTNER_JOURNAL": f"sqlite:{lib_file}"},
                         {"E2E_DB": f"sqlite:{hand_file}"}, f"sqlite:{lib_file}", f"sqlite:{hand_file}", None))
    if pg_port is not None:
        dsn = lambda db: f"pgsql:host=127.0.0.1;port={pg_port};dbname={db}"
        conninfo = lambda db: f"host=127.0.0.1 port={pg_port} dbname={db} user={PG_USER} sslmode=disable"
        journal = f"postgres://{PG_USER}@127.0.0.1:{pg_port}/py_library?sslmode=disable&statement_cache_size={STATEMENT_CACHE}"
        as_user(["php", str(HERE / "db.php"), "library", journal, dsn("py_library"), PG_USER], "db.php library (postgres)")
        as_user(["php", str(HERE / "db.php"), "handwritten", dsn("py_handwritten"), PG_USER], "db.php handwritten (postgres)")
        backends.append(("postgres", {"SLOTPARTNER_JOURNAL": journal},
                         {"E2E_DB": conninfo("py_handwritten")}, dsn("py_library"), dsn("py_handwritten"), "py_"))
    for backend, lib_env, hand_env, lib_dsn, hand_dsn, pg in backends:
        for side, module, extra, totals in (("library", "library_wsgi", lib_env, lib_dsn), ("handwritten", "handwritten_wsgi", hand_env, hand_dsn)):
            port = free_port()
            name = f"gunicorn-{side}-{backend}"
            proc = servers.start(name, user_prefix() + [SYSTEM_PYTHON, "-m", "gunicorn", "--workers", "4", "--worker-class", "sync",
                                                        "--bind", f"127.0.0.1:{port}", "--chdir", str(HERE), "--access-logfile", "-",
                                                        "--error-logfile", "-", "--log-level", "warning", f"{module}:application"],
                                 env=dict(base_env, **extra))
            wait_http(f"http://127.0.0.1:{port}/", proc, work / f"{name}.log")
            targets.append(Target("python", side, backend, f"http://127.0.0.1:{port}/callback", totals,
                                  (pg + side) if pg else None))
    return targets


# ------------------------------------------------------------------------------------------------
# The same answers: a few deliveries of every kind to both integrations before the load


def case_bodies() -> list[tuple[str, bytes | None, dict[str, str], bool]]:
    """(what, body or None for a GET, extra headers, bodies must match byte for byte)."""
    refund = {"event": "gameSessionBuyRefund", "index": 99_000_001, "gameSessionIdentifier": "9b7c1d2e-aaaa-4bbb-8ccc-123456789abc",
              "playerIdentifier": "svc-player-1", "playerPartnerIdentifier": "partner-user-1", "transactionId": 123_000_001,
              "buyTransactionId": 124_000_001, "gameSessionId": 5_500_001, "partnerGameRequestIdentifier": "pgr-1",
              "gameId": 1001, "isMobile": False}
    payout = {"event": "jackpotPayout", "index": 99_000_002, "jackpotIdentifier": "jp-minor", "playerIdentifier": "svc-player-2",
              "currencyISO4217": "EUR", "moneyWon": 1500, "coinsWon": 0, "isMoney": True, "epochReleasedMillis": 1_718_064_000_000,
              "isPrimary": False, "transactionId": 123_000_002, "buyTransactionId": 124_000_002,
              "partnerGameRequestIdentifier": "pgr-2", "gameSessionId": 5_500_002, "gameId": 1002}
    body = lambda d, **changes: json.dumps(dict(d, **changes)).encode()
    return [
        ("refund", body(refund), {}, True),
        ("refund again", body(refund), {}, True),
        ("payout", body(payout), {}, True),
        ("payout again, isMobile added (not decisive)", body(payout, isMobile=True), {}, True),
        ("payout again, other moneyWon", body(payout, moneyWon=1501), {}, False),
        ("balance query", b'{"action":"getPlayerBalance","playerIdentifier":"svc-player-1"}', {}, True),
        ("balance query, unknown player", b'{"action":"getPlayerBalance","playerPartnerIdentifier":"unknown-player"}', {}, True),
        ("balance query, no player", b'{"action":"getPlayerBalance"}', {}, False),
        ("payout, moneyWon 1500.5", body(payout, transactionId=123_000_003, moneyWon=1500.5), {}, False),
        ("refund, transactionId a string", body(refund, transactionId="123000004"), {}, False),
        ("refund, transactionId 2^64", body(refund).replace(b"123000001", b"18446744073709551616"), {}, False),
        ("payout, currency eur", body(payout, transactionId=123_000_005, currencyISO4217="eur"), {}, False),
        ("refund, no player", body({k: v for k, v in refund.items() if not k.startswith("player")}), {}, False),
        ("not JSON", b'{"event":', {}, False),
        ("an array", b"[1]", {}, False),
        ("unknown event", b'{"event":"gameSessionStart","index":1}', {}, False),
        ("no token", body(refund), {"X-Service-Token": ""}, False),
        ("wrong token", body(refund), {"X-Service-Token": "00000000-0000-4000-8000-000000000000"}, False),
        ("upper-case token", body(refund), {"X-Service-Token": TOKEN.upper()}, True),
        ("too large", b'{"event":"jackpotPayout","x":"' + b"x" * 70000 + b'"}', {}, False),
        ("GET", None, {}, True),
    ]


def ask(url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    sent = {"Content-Type": "application/json; charset=utf-8", "X-Service-Token": TOKEN, **headers}
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                     headers={k: v for k, v in sent.items() if v})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def same_answers(lib: "Target", hand: "Target") -> None:
    """Both integrations answer each case with the same status (and, where the library's words are
    not at stake, the same body); a refusal inside the event's wrapper must say success false."""
    for what, body, headers, exact in case_bodies():
        (ls, lb), (hs, hb) = ask(lib.url, body, headers), ask(hand.url, body, headers)
        same = ls == hs and (lb == hb if exact else lb[:12] == hb[:12])
        if not same:
            raise Failed(f"{lib.stack} {lib.backend}: {what}: the library answers {ls} {lb[:200]!r}, "
                         f"the hand-written integration {hs} {hb[:200]!r}")
    for t in (lib, hand):   # the refund (no amount) and the payout of 1500 were credited
        t.rows += 2
        t.money += 1500
    say(f"  {lib.stack} {lib.backend}: the same answers to {len(case_bodies())} deliveries (repeats, a conflict, refusals)")


# ------------------------------------------------------------------------------------------------
# Load


class Indexes:
    """Hands out fresh index ranges: every round's events are new to every integration."""

    def __init__(self) -> None:
        self.next = 1

    def take(self, count: int) -> int:
        first = self.next
        self.next += count
        return first


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def program(comm: str, session: int) -> str:
    """The part of the stack a process belongs to, by its command name or its server's session
    (gunicorn's workers are python3)."""
    if SESSIONS.get(session) == "gunicorn":
        return "gunicorn"
    if comm == "postgres":
        return "PostgreSQL"
    if comm.startswith("php-fpm"):
        return "PHP-FPM"
    if comm == "nginx":
        return "nginx"
    if comm.startswith("python") or comm.startswith("slotpartner-san"):
        return "load"   # this script, and through its reaped children the sandbox's burst
    return "other"


def processes():
    """Every process on the machine now: (pid, the program it belongs to (`program`), the fields
    of /proc/PID/stat after its command name)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = pathlib.Path(entry.path, "stat").read_text()
        except OSError:
            continue
        comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        yield int(entry.name), program(comm, int(fields[3])), fields


def cpu_by_program() -> dict[str, float]:
    """CPU seconds (user and system) every process on the machine has used so far, by program:
    each process's own and its reaped children's, so that every tick counts once (a backend
    that exited is in the postmaster's, the burst in this script's)."""
    totals: dict[str, float] = {}
    for _, name, fields in processes():
        ticks = sum(int(f) for f in fields[11:15])   # utime, stime, cutime, cstime
        totals[name] = totals.get(name, 0.0) + ticks / CLOCK_TICKS
    return totals


def device_flushes() -> int | None:
    """Flush requests the machine's disks have completed so far (/proc/diskstats, whole disks
    only): every fsync that reaches a disk with a write cache is one. None where not counted."""
    disks = {entry.name for entry in os.scandir("/sys/block")} if os.path.isdir("/sys/block") else set()
    total, seen = 0, False
    try:
        lines = pathlib.Path("/proc/diskstats").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 20 and fields[2] in disks and not fields[2].startswith(("loop", "ram")):
            total += int(fields[18])
            seen = True
    return total if seen else None


def burst(target: Target, first: int, count: int, concurrency: int, work: pathlib.Path, measured: bool = False) -> dict:
    report = work / "burst.json"
    argv = [str(SANDBOX), "send", "--url", target.url, "--token", TOKEN, "--burst", str(count), "--index", str(first),
            "--seed", str(SEED), "--repeat", str(REPEAT), "--concurrency", str(concurrency), "--expect-success", "true",
            "--quiet", "--latency", "--report-json", str(report), "mixed"]
    cpu_before, flushes_before = (cpu_by_program(), device_flushes()) if measured else ({}, None)
    done = subprocess.run(argv, capture_output=True, text=True)
    if measured:
        for name, seconds in cpu_by_program().items():
            target.cpu[name] = target.cpu.get(name, 0.0) + seconds - cpu_before.get(name, 0.0)
        flushes_after = device_flushes()
        if flushes_before is not None and flushes_after is not None and target.flushes is not None:
            target.flushes += flushes_after - flushes_before
        else:
            target.flushes = None
    try:
        result = json.loads(report.read_text())
        report.unlink()
    except (OSError, ValueError):
        result = {}
    if done.returncode != 0 or not result.get("ok"):
        shown = "\n".join(done.stdout.splitlines()[:10] + ["..."] + done.stdout.splitlines()[-3:])
        raise Failed(f"{target.name}: a reply failed its check (concurrency {concurrency}, indexes {first}..{first + count - 1}):\n"
                     f"{shown}{done.stderr}")
    target.rows += result["delivered"]
    target.money += result["delivered_money_total"]
    target.requests += result["deliveries"]
    if measured:
        target.cpu_requests += result["deliveries"]
    return result


SYSCALLS = "pwrite64,pwritev,write,writev,fsync,fdatasync"
SYSCALL_EVENTS = 200   # the deliveries of the counted round (not timed: strace slows them)


def worker_pids(stack: str) -> list[int]:
    """The processes that run the integrations' code: PHP-FPM's workers, or gunicorn's."""
    wanted = "PHP-FPM" if stack == "php" else "gunicorn"
    return [pid for pid, name, _ in processes() if name == wanted]


def write_calls(target: Target, indexes: Indexes, work: pathlib.Path) -> None:
    """The write and sync system calls a delivery makes in the workers (strace -c over a burst of
    SYSCALL_EVENTS new events, after the timed rounds): on SQLite, the WAL frames written
    (pwrite64) and the syncs (fsync, fdatasync) a delivery, as a hand-written transaction is
    judged by the same count. Socket writes (the reply to the web server) are the `write` calls."""
    pids = worker_pids(target.stack)
    if not pids or not shutil.which("strace"):
        return
    summary = work / "strace.txt"
    argv = ["strace", "-c", "-f", "-e", f"trace={SYSCALLS}", "-o", str(summary)]
    for pid in pids:
        argv += ["-p", str(pid)]
    tracer = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)   # attached to every worker before the first request
        result = burst(target, indexes.take(SYSCALL_EVENTS), SYSCALL_EVENTS, 4, work)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=30)
    calls: dict[str, int] = {}
    for line in summary.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] in SYSCALLS.split(",") and fields[3].isdigit():
            calls[fields[-1]] = int(fields[3])
    target.syscalls = {name: calls.get(name, 0) / max(result["deliveries"], 1) for name in SYSCALLS.split(",")}
    shown = ", ".join(f"{name} {count:.2f}" for name, count in target.syscalls.items() if count)
    say(f"  {target.name}: a delivery's system calls in the workers (strace -c, {result['deliveries']} deliveries): {shown}")


def check_ledger(target: Target) -> None:
    """Exactly one ledger row per delivered event, and the money of the payouts delivered."""
    argv = ["php", str(HERE / "db.php"), "totals", target.totals_dsn] + ([PG_USER] if target.pg_db else [])
    rows, money, _, _ = (int(v) for v in as_user(argv, f"{target.name}: ledger totals").split())
    if (rows, money) != (target.rows, target.money):
        raise Failed(f"{target.name}: the ledger holds {rows} credits for {money}, the events delivered were "
                     f"{target.rows} for {target.money}")
    say(f"  ledger {target.name}: {rows} credits, {money} EUR minor units: one per delivered event")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def measure(stack: str, targets: list[Target], work: pathlib.Path, indexes: Indexes, pg_port: int | None) -> list[dict]:
    rows = []
    for backend in BACKENDS:
        pair = [t for t in targets if t.backend == backend]
        if len(pair) != 2:
            continue
        lib, hand = pair
        same_answers(lib, hand)
        first = indexes.take(WARMUP)
        for t in pair:   # persistent connections, opcache, the journal's pool: warm before measuring
            burst(t, first, WARMUP, 4, work)
        if lib.pg_db:
            psql(pg_port, "postgres", "SELECT pg_stat_statements_reset()")
        for t in pair:
            if t.steps is not None and t.steps.exists():
                t.steps.write_text("")   # the measured rounds only
        before = pg_counters(pg_port, [t.pg_db for t in pair]) if lib.pg_db else {}
        requests_before = {t.side: t.requests for t in pair}
        for concurrency in CONCURRENCY:
            results: dict[str, list[dict]] = {"library": [], "handwritten": []}
            for r in range(ROUNDS):
                first = indexes.take(EVENTS)
                for t in (pair if r % 2 == 0 else pair[::-1]):
                    results[t.side].append(burst(t, first, EVENTS, concurrency, work, measured=True)["latency"])
            row = {"stack": stack, "backend": backend, "concurrency": concurrency}
            for side, lats in results.items():
                row[side] = {"per_second": median([l["per_second"] for l in lats]),
                             "best": max(l["per_second"] for l in lats),
                             "p50_ms": median([l["p50_us"] for l in lats]) / 1000,
                             "p99_ms": median([l["p99_us"] for l in lats]) / 1000}
            say("  %-6s %-8s c=%-2d library %7.0f/s p50 %6.2f ms p99 %7.2f ms | hand-written %7.0f/s p50 %6.2f ms p99 %7.2f ms | ratio %.2f"
                % (stack, backend, concurrency, row["library"]["per_second"], row["library"]["p50_ms"], row["library"]["p99_ms"],
                   row["handwritten"]["per_second"], row["handwritten"]["p50_ms"], row["handwritten"]["p99_ms"],
                   row["library"]["per_second"] / max(row["handwritten"]["per_second"], 1e-9)))
            rows.append(row)
        if before:
            after = pg_counters(pg_port, [t.pg_db for t in pair])
            for t in pair:
                n = t.requests - requests_before[t.side]
                t.per_request = ((after[t.pg_db][0] - before[t.pg_db][0]) / n, (after[t.pg_db][1] - before[t.pg_db][1]) / n)
                say(f"  {t.name}: {t.per_request[0]:.2f} statements and {t.per_request[1]:.2f} commits a request "
                    f"(pg_stat_statements, pg_stat_database over {n} requests); by statement:")
                for line in pg_statements(pg_port, t.pg_db, n):
                    say(line)
                total_ms = float(psql(pg_port, "postgres", "SELECT COALESCE(SUM(total_exec_time + total_plan_time), 0) "
                                      "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                                      f"WHERE d.datname = '{t.pg_db}'") or 0)
                t.server_us = total_ms * 1000 / n
                say(f"  {t.name}: {t.server_us:.0f} µs of the server's time a request (planning and executing, pg_stat_statements)")
        if backend == "sqlite":
            for t in pair:
                write_calls(t, indexes, work)
        for t in pair:
            check_ledger(t)
            if t.steps is not None:
                say(steps_line(t))
    return rows


def steps_line(t: Target) -> str:
    """A PHP-FPM worker's CPU a request by step of `t`'s script, the means over the measured
    requests (a step a request skipped, such as a repeat's logic, counts 0), from its
    E2E_STEPS file."""
    totals: dict[str, float] = {}
    requests = 0
    for line in (t.steps.read_text().splitlines() if t.steps and t.steps.exists() else []):
        requests += 1
        for item in line.split():
            name, _, micros = item.partition("=")
            totals[name] = totals.get(name, 0.0) + float(micros)
    if not requests:
        return f"  {t.name}: no steps recorded"
    shown = " ".join(f"{name} {micros / requests:.0f}" for name, micros in totals.items())
    return (f"  {t.name}: PHP-FPM worker CPU a request by step, µs (E2E_STEPS, {requests} requests): "
            f"{shown}; sum {sum(totals.values()) / requests:.0f}")


def table(rows: list[dict], stats: list[Target]) -> None:
    say()
    say(f"End to end, {EVENTS} new events a round with {REPEAT:.0%} repeated, {ROUNDS} rounds alternating, medians "
        f"(callbacks a second; latency of one callback):")
    say()
    say("| stack | backend | connections | library | p50 | p99 | hand-written | p50 | p99 | library / hand-written |")
    say("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        lib, hand = row["library"], row["handwritten"]
        server = "PHP-FPM" if row["stack"] == "php" else "gunicorn"
        backend = "SQLite" if row["backend"] == "sqlite" else "PostgreSQL"
        say(f"| {server} | {backend} | {row['concurrency']} | {lib['per_second']:,.0f}/s | {lib['p50_ms']:.2f} ms | {lib['p99_ms']:.2f} ms "
            f"| {hand['per_second']:,.0f}/s | {hand['p50_ms']:.2f} ms | {hand['p99_ms']:.2f} ms "
            f"| {lib['per_second'] / max(hand['per_second'], 1e-9):.2f}× |")
    per_request = [t for t in stats if getattr(t, "per_request", None)]
    if per_request:
        say()
        say("PostgreSQL, a request (new events and repeats, all rounds): statements (BEGIN and COMMIT included), "
            "commits, and the server's time planning and executing them")
        for t in per_request:
            server = "" if t.server_us is None else f", {t.server_us:.0f} µs of server time"
            say(f"  {t.stack:6} {t.side:11} {t.per_request[0]:.2f} statements, {t.per_request[1]:.2f} commits{server}")
    traced = [t for t in stats if t.syscalls]
    if traced:
        say()
        say(f"SQLite, a delivery ({SYSCALL_EVENTS} new events, {REPEAT:.0%} repeated, after the timed rounds): the "
            "workers' write and sync calls (strace -c): pwrite64 is a WAL frame (a page) written, fsync/fdatasync a sync")
        for t in traced:
            c = t.syscalls
            say(f"  {t.stack:6} {t.side:11} pwrite64 {c['pwrite64'] + c['pwritev']:.2f}, fsync+fdatasync "
                f"{c['fsync'] + c['fdatasync']:.2f}, write {c['write'] + c['writev']:.2f}")
    measured = [t for t in stats if t.cpu_requests]
    if measured:
        say()
        say("CPU a request, by program (µs of user and system time over the measured rounds, every process on the "
            "machine; load is the sandbox's burst, other is the rest of the machine):")
        names = ["PHP-FPM", "gunicorn", "nginx", "PostgreSQL", "load", "other"]
        shown = [n for n in names if any(t.cpu.get(n, 0.0) > 0 for t in measured)]
        say("| stack | backend | integration | " + " | ".join(shown) + " | total | disk flushes a request |")
        say("|---|---|---|" + "---:|" * (len(shown) + 2))
        for t in measured:
            cells = [t.cpu.get(n, 0.0) * 1e6 / t.cpu_requests for n in shown]
            flushes = "not counted" if t.flushes is None else f"{t.flushes / t.cpu_requests:.2f}"
            say(f"| {t.stack} | {t.backend} | {t.side} | " + " | ".join(f"{c:,.0f}" for c in cells)
                + f" | {sum(cells):,.0f} | {flushes} |")
        say()
        say("Disk flushes: flush requests the machine's disks completed (/proc/diskstats), every fsync that reached "
            "a disk with a write cache, other processes' included: a durable commit is at least one.")
    say()
    say("By configuration, SQLite in WAL mode with synchronous FULL syncs the log once a durable commit. The "
        "library's journal is opened with claim_at_finish: a new delivery is written by its finish alone, with the "
        "staged ledger credit, in one transaction synced once (a repeat is read); the hand-written transaction "
        "commits once.")


def main() -> int:
    if not SANDBOX.exists():
        raise Failed(f"{SANDBOX} is missing: make sandbox")
    install(missing_packages())
    work = pathlib.Path(tempfile.mkdtemp(prefix="slotpartner-bench-e2e-"))
    work.chmod(0o711)
    servers = Servers(work)
    say(f"bench-e2e: work folder {work}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}")
    rows: list[dict] = []
    targets: list[Target] = []
    try:
        pg_port = start_postgres(servers, work) if "postgres" in BACKENDS else None
        indexes = Indexes()
        if "php" in STACKS:
            say("bench-e2e: PHP-FPM (4 static workers, opcache, preloaded binding) behind nginx")
            php = php_setup(work, servers, pg_port)
            targets += php
            rows += measure("php", php, work, indexes, pg_port)
            servers.stop("nginx")
            servers.stop("php-fpm")
        if "python" in STACKS:
            say("bench-e2e: gunicorn (4 sync workers per application)")
            py = python_setup(work, servers, pg_port)
            targets += py
            rows += measure("python", py, work, indexes, pg_port)
        table(rows, targets)
        say(f"bench-e2e: load average {os.getloadavg()[0]:.2f} at the end")
        return 0
    finally:
        servers.stop_all()
        if os.environ.get("E2E_KEEP") == "1":
            say(f"bench-e2e: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


if __name__ == "__main__":
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        sys.exit(main())
    except Failed as e:
        print(f"bench-e2e: FAILED: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except Interrupted as e:
        print(f"bench-e2e: interrupted ({e}); servers stopped", file=sys.stderr, flush=True)
        sys.exit(130)
