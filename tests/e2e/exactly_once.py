#!/usr/bin/env python3
"""End to end: every event credited exactly once, every repeat answered byte for byte, every
skipped index reported missing, with a SQLite journal on one host and a PostgreSQL journal shared
by workers as if on several hosts.

    tests/e2e/exactly_once.py [--events N] [--pg-events N] [--backend sqlite|postgres|both]

For each backend: scripts/cgi_gateway.py serves target/examples/callback_cgi on loopback, one CGI
process per request and one connection thread per client connection, so the sandbox's four
connections keep four worker processes busy at once. Each worker opens the journal
(SLOTPARTNER_JOURNAL) and credits a demo wallet (SLOTPARTNER_WALLET: one file per transaction,
created with O_EXCL, the ledger's unique key on transactionId). Then

    slotpartner-sandbox send --burst N --seed 7 --lose 0.02 --repeat 0.01 --reorder 0.05 \\
        --concurrency 4 mixed --report-json FILE

and the checks:
  - eight processes opening a fresh journal at once all succeed (the first requests after a
    deployment create its tables; on SQLite sixty fresh files, since the race is one of timing);
  - send exits 0 with the report's `ok`: every delivery got a well-formed success reply and
    every repeat got the byte-identical reply of the first (send compares them);
  - the wallet holds exactly one file per delivered refund and payout (the transactionIds the
    report lists, no other) and the payouts' amounts add up to the report's
    delivered_money_total;
  - journal_status (examples/c) counts every delivered event handled once, every repeat
    replayed, nothing in progress, conflicting or refused, and lists exactly the lost indexes
    as missing (those between the lowest and highest delivered: a journal without a
    configured first index cannot know of a loss before the first event it saw or after the
    last);
  - the gateway ran at least four worker processes at once (its closing log line);
  - lost events recovered with the operator command: `slotpartner recover` against a sandbox
    serving the burst's events first with every fetch failing (exit 1, nothing credited), then
    healthy (exit 0); `slotpartner journal gaps` prints nothing; every index of the burst is
    credited exactly once and the payouts add up to the sandbox's total of all it sent.

PostgreSQL: a throw-away cluster is started here (initdb and pg_ctl from
/usr/lib/postgresql/*/bin, as `nobody` when run as root, since PostgreSQL refuses root; a free
port on 127.0.0.1; a temporary folder) and stopped on exit. The CGI processes stand in for
workers on separate hosts: each has its own connection. Without the binaries the run prints a
SKIP line (.ci/run installs the Debian package `postgresql`). Both runs use 10,000 events by
default (--events, --pg-events): the 10,000-event bursts took about 20 s on SQLite and 47 s on
PostgreSQL on the 2-core build machine (each delivery is a new CGI process; on PostgreSQL each
also opens a new connection), about 80 s in all.

Needs `make examples sandbox`. Prints one line per check and closes with
`exactly_once: N passed, N failed`; exits 1 when a check failed.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CGI = ROOT / "target/examples/callback_cgi"
STATUS = ROOT / "target/examples/journal_status"
SANDBOX = ROOT / "target/release/slotpartner-sandbox"
OPERATOR = ROOT / "target/release/slotpartner"
GATEWAY = ROOT / "scripts/cgi_gateway.py"
TOKEN = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
SEND_TIMEOUT = 300  # seconds: a bound, far above the expected run time

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % name, flush=True)
    else:
        failed += 1
        print("FAIL %s%s" % (name, ": " + detail if detail else ""), flush=True)
    return ok


def wait_for_file(path, seconds, process=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size > 0:
            return True
        if process is not None and process.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def tail(path, lines=20):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------
# A throw-away PostgreSQL cluster


def postgres_bin():
    found = []
    for entry in pathlib.Path("/usr/lib/postgresql").glob("*/bin"):
        version = entry.parent.name.split(".")[0]
        if version.isdigit() and (entry / "initdb").exists() and (entry / "pg_ctl").exists():
            found.append((int(version), entry))
    return max(found)[1] if found else None


def unprivileged_prefix():
    """The command prefix that runs a program as `nobody` when we are root; [] otherwise; None
    when root cannot drop privileges here."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
    return None


_GIVEN_PORTS: set[int] = set()


def free_port():
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


class Cluster:
    """initdb + pg_ctl start in `folder`; stop() is called on every exit path."""

    def __init__(self, bin_dir, prefix, folder):
        self.bin, self.prefix, self.folder = bin_dir, prefix, folder
        self.data = folder / "data"
        self.log = folder / "log"
        self.port = free_port()
        self.started = False

    def run(self, tool, *args):
        done = subprocess.run(self.prefix + [str(self.bin / tool), *args], cwd=self.folder,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError("%s failed: %s%s\n%s" % (tool, done.stdout, done.stderr, tail(self.log)))

    def start(self):
        if self.prefix:
            import pwd
            nobody = pwd.getpwnam("nobody")
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
        self.run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        options = "-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=50" % (self.port, self.folder)
        self.started = True
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30", "-o", options, "start")

    def url(self):
        return "postgres://postgres@127.0.0.1:%d/postgres" % self.port

    def stop(self):
        if self.started:
            self.started = False
            subprocess.run(self.prefix + [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                                          "-w", "stop"], cwd=self.folder, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60, check=False)


# ------------------------------------------------------------------------------------------------
# One run


def parse_status(text):
    counts, missing = {}, []
    for line in text.splitlines():
        m = re.fullmatch(r"missing index (\d+)", line)
        if m:
            missing.append((int(m[1]), int(m[1])))
            continue
        m = re.fullmatch(r"missing indexes (\d+)-(\d+)", line)
        if m:
            missing.append((int(m[1]), int(m[2])))
            continue
        name, _, value = line.partition(": ")
        if value:
            counts[name] = None if value == "none" else int(value)
    return counts, missing


def ranges(indexes):
    out = []
    for i in sorted(indexes):
        if out and out[-1][1] + 1 == i:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def first_open(label, urls, processes=8):
    """For each of `urls`, a fresh journal: `processes` workers open it at once (journal_status
    each), as the first requests after a deployment do. Each must succeed. The race is a matter of
    timing, so SQLite gets several fresh files (rounds); the last URL is the burst's journal."""
    # A shell starts them: closer together than one Popen after another, so the race shows.
    script = 'for _ in $(seq "$2"); do { "$0" "$1" > /dev/null || echo "exit status $?" >&2; } & done; wait'
    errors = []
    for url in urls:
        try:
            done = subprocess.run(["sh", "-c", script, str(STATUS), url, str(processes)], capture_output=True,
                                  text=True, timeout=60)
            errors += [line for line in done.stderr.splitlines() if not line.startswith("exit status")]
        except subprocess.TimeoutExpired:
            errors.append("%s: not opened within 60 s" % url)
    rounds = " (%d fresh journals)" % len(urls) if len(urls) > 1 else ""
    check("%s: %d processes open a fresh journal at once%s" % (label, processes, rounds), not errors,
          "%d failed, e.g. %s" % (len(errors), "; ".join(sorted(set(errors))[:2])))


def run_burst(label, journal_url, events, work, fresh_journals=()):
    """The burst against the gateway with `journal_url`; every check is named after `label`."""
    first_open(label, list(fresh_journals) + [journal_url])
    wallet = work / "wallet"
    wallet.mkdir()
    env = dict(os.environ, SLOTPARTNER_JOURNAL=journal_url, SLOTPARTNER_WALLET=str(wallet),
               SLOTPARTNER_TOKEN=TOKEN, SLOTPARTNER_SOURCES="127.0.0.1,::1")
    ready = work / "endpoint"
    gateway_log = work / "gateway.log"
    with open(gateway_log, "wb") as log:
        command = [sys.executable, str(GATEWAY), "127.0.0.1:0", str(CGI), "--ready-file", str(ready), "--stats"]
        gateway = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    try:
        if not check("%s: gateway ready" % label, wait_for_file(ready, 20, gateway), tail(gateway_log)):
            return
        report_file = work / "report.json"
        send = [str(SANDBOX), "send", "--url", ready.read_text() + "/callback", "--token", TOKEN,
                "--burst", str(events), "--seed", "7", "--lose", "0.02", "--repeat", "0.01", "--reorder", "0.05",
                "--concurrency", "4", "--report-json", str(report_file), "--quiet", "mixed"]
        started = time.monotonic()
        try:
            done = subprocess.run(send, capture_output=True, text=True, timeout=SEND_TIMEOUT)
        except subprocess.TimeoutExpired:
            check("%s: send finished within %d s" % (label, SEND_TIMEOUT), False)
            return
        seconds = time.monotonic() - started
        print("%s: %d events, %s deliveries in %.1f s (%.0f deliveries/s)" % (
            label, events, _field(report_file, "deliveries"), seconds,
            (_field(report_file, "deliveries") or 0) / seconds), flush=True)
        failures = "\n".join(done.stdout.splitlines()[-12:]) + done.stderr
        check("%s: send exits 0 (each reply well formed, each repeat byte-identical)" % label,
              done.returncode == 0, "exit %d\n%s\n%s" % (done.returncode, failures, tail(gateway_log)))
        report = json.loads(report_file.read_text())
        check("%s: report ok, no repeat mismatch" % label,
              report["ok"] and report["repeat_mismatches"] == 0 and report["request_failures"] == 0,
              json.dumps(report["failures"][:5]))
        check("%s: the burst lost, repeated and reordered some" % label,
              report["lost"] > 0 and report["repeated"] > 0 and report["reordered"] > 0,
              "lost %d repeated %d reordered %d" % (report["lost"], report["repeated"], report["reordered"]))
        check_wallet(label, wallet, report)
        check_journal(label, journal_url, report)
        recover(label, journal_url, events, ready.read_text() + "/callback", wallet, report, work)
    finally:
        gateway.terminate()
        try:
            gateway.wait(10)
        except subprocess.TimeoutExpired:
            gateway.kill()
            gateway.wait()
    # The gateway's closing line: were four workers busy at once?
    most = re.findall(r"peak concurrency (\d+) programs", gateway_log.read_text(errors="replace"))
    check("%s: the gateway ran 4 worker processes at once" % label, most and int(most[-1]) >= 4,
          "its log says %s" % (most or "nothing"))


def recover(label, journal_url, events, callback_url, wallet, report, work):
    """`slotpartner recover` against a sandbox that serves the burst's events (getEvent): a run
    whose every fetch fails leaves the gaps and credits nothing, the next run closes them, and
    every index of the burst ends credited exactly once."""
    ready, ca = work / "service", work / "ca.pem"
    serve = [str(SANDBOX), "serve", "--listen", "127.0.0.1:0", "--token", TOKEN, "--ca-out", str(ca),
             "--ready-file", str(ready), "--events-count", str(events), "--events-seed", "7",
             "--events-kind", "mixed", "--exit-on-stdin-eof"]
    service = subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not check("%s: the service serves the burst's events" % label, wait_for_file(ready, 20, service)):
            return
        base = ready.read_text()
        # The burst's gaps were found missing a moment ago: take them however young (the
        # default --min-age leaves gaps younger than a minute for the next run).
        env = dict(os.environ, SLOTPARTNER_JOURNAL=journal_url, SLOTPARTNER_TOKEN=TOKEN,
                   SLOTPARTNER_CA_FILE=str(ca), SLOTPARTNER_CALLBACK_URL=callback_url,
                   SLOTPARTNER_MIN_AGE="0s")

        def operator(*args):
            return subprocess.run([str(OPERATOR), *args], env=env, capture_output=True, text=True, timeout=SEND_TIMEOUT)

        before = len(list(wallet.iterdir()))
        failing = operator("recover", "--base-url", base + "/fault/status/500", "--retries", "0", "--json")
        summary = json.loads(failing.stdout or "{}")
        check("%s: recover with a failing service exits 1, names each failure, credits nothing" % label,
              failing.returncode == 1 and len(list(wallet.iterdir())) == before and summary.get("recovered") == 0,
              "exit %d: %s %s" % (failing.returncode, failing.stdout[-400:], failing.stderr[-400:]))
        started = time.monotonic()
        healthy = operator("recover", "--base-url", base)
        print("%s: recover took %.1f s: %s" % (label, time.monotonic() - started,
                                               " ".join(healthy.stdout.splitlines()[-3:])), flush=True)
        check("%s: a second recover closes every gap (exit 0)" % label, healthy.returncode == 0,
              "exit %d: %s %s" % (healthy.returncode, healthy.stdout[-600:], healthy.stderr[-400:]))
        gaps = operator("journal", "gaps")
        check("%s: slotpartner journal gaps prints nothing and exits 0" % label,
              gaps.returncode == 0 and gaps.stdout.strip() == "", "exit %d: %s" % (gaps.returncode, gaps.stdout[:200]))
        first = report["first_index"]
        wanted = {900000000 + i for i in range(first, first + events)}
        credited, money, twice = {}, 0, []
        for entry in wallet.iterdir():
            kind, _, number = entry.name.partition("-")
            if int(number) in credited:
                twice.append(number)
            credited[int(number)] = kind
            if kind == "payout":
                money += int(entry.read_text())
        check("%s: every index %d..%d credited exactly once after recovery" % (label, first, first + events - 1),
              set(credited) == wanted and not twice,
              "missing %s, extra %s" % (sorted(wanted - set(credited))[:10], sorted(set(credited) - wanted)[:10]))
        check("%s: wallet total %d equals the sandbox's total of all it sent, lost ones included (%d)" % (
            label, money, report["sent_money_total"]), money == report["sent_money_total"])
    finally:
        service.stdin.close()
        try:
            service.wait(10)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


def _field(report_file, name):
    try:
        return json.loads(report_file.read_text())[name]
    except (OSError, ValueError, KeyError):
        return None


def check_wallet(label, wallet, report):
    refunds, payouts, money, unreadable = set(), set(), 0, []
    for entry in wallet.iterdir():
        kind, _, number = entry.name.partition("-")
        if kind == "refund":
            refunds.add(int(number))
        elif kind == "payout":
            payouts.add(int(number))
            try:
                money += int(entry.read_text())
            except ValueError:
                unreadable.append(entry.name)
        else:
            unreadable.append(entry.name)
    want_refunds = set(report["delivered_refund_transaction_ids"])
    want_payouts = set(report["delivered_payout_transaction_ids"])

    def differ(got, want):
        return "missing %s, extra %s" % (sorted(want - got)[:10], sorted(got - want)[:10])

    check("%s: wallet has one credit per delivered refund (%d)" % (label, len(want_refunds)),
          refunds == want_refunds and len(want_refunds) == report["delivered_refunds"],
          differ(refunds, want_refunds))
    check("%s: wallet has one credit per delivered payout (%d)" % (label, len(want_payouts)),
          payouts == want_payouts and len(want_payouts) == report["delivered_payouts"],
          differ(payouts, want_payouts))
    check("%s: wallet total %d equals delivered_money_total %d" % (label, money, report["delivered_money_total"]),
          money == report["delivered_money_total"] and not unreadable, "unreadable: %s" % unreadable[:5])


def check_journal(label, journal_url, report):
    done = subprocess.run([str(STATUS), journal_url], capture_output=True, text=True, timeout=60)
    counts, missing = parse_status(done.stdout)
    lost = report["lost_indexes"]
    delivered = [i for i in range(report["first_index"], report["last_index"] + 1) if i not in set(lost)]
    low, high = min(delivered), max(delivered)
    inside = [i for i in lost if low < i < high]
    if len(inside) != len(lost):
        print("%s: note: lost indexes outside %d..%d are not gaps the journal can see: %s" % (
            label, low, high, [i for i in lost if not low < i < high]), flush=True)
    check("%s: journal_status exits %d" % (label, 1 if inside else 0), done.returncode == (1 if inside else 0),
          "exit %d: %s%s" % (done.returncode, done.stdout[-500:], done.stderr))
    check("%s: exactly the %d lost indexes are missing" % (label, len(inside)),
          missing == ranges(inside) and counts.get("missing") == len(inside),
          "journal says %s, the sandbox lost %s" % (missing[:10], ranges(inside)[:10]))
    want = {"handled": report["delivered"], "replayed": report["deliveries"] - report["delivered"],
            "conflicts": 0, "refused": 0, "in progress": 0, "first index": low, "highest index": high}
    got = {name: counts.get(name) for name in want}
    check("%s: journal counts handled %d, replayed %d, none in progress" % (
        label, want["handled"], want["replayed"]), got == want, "journal says %s, expected %s" % (got, want))


# ------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10000, help="events of the SQLite burst")
    parser.add_argument("--pg-events", type=int, default=10000, help="events of the PostgreSQL burst")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    for needed in (CGI, STATUS, SANDBOX, OPERATOR):
        if not needed.exists():
            sys.exit("exactly_once: %s is missing: run `make examples sandbox cli` first" % needed)
    # SIGTERM and SIGINT unwind through the finally blocks, which stop what was started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = pathlib.Path(tempfile.mkdtemp(prefix="slotpartner-e2e-"))
    work.chmod(0o711)  # the PostgreSQL cluster below it runs as nobody
    started = time.monotonic()
    try:
        if args.backend in ("sqlite", "both"):
            folder = work / "sqlite"
            folder.mkdir()
            fresh = ["sqlite:%s" % (folder / ("fresh-%d.db" % n)) for n in range(59)]
            run_burst("sqlite", "sqlite:%s" % (folder / "journal.db"), args.events, folder, fresh)
        if args.backend in ("postgres", "both"):
            run_postgres(work, args.pg_events)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("exactly_once: %d passed, %d failed (%.0f s)" % (passed, failed, time.monotonic() - started))
    sys.exit(1 if failed else 0)


def run_postgres(work, events):
    bin_dir = postgres_bin()
    if bin_dir is None:
        print("SKIP postgres: no initdb and pg_ctl under /usr/lib/postgresql/*/bin (Debian package `postgresql`)")
        return
    prefix = unprivileged_prefix()
    if prefix is None:
        print("SKIP postgres: running as root and neither runuser nor setpriv can run PostgreSQL as nobody")
        return
    folder = work / "postgres"
    folder.mkdir()
    folder.chmod(0o711)  # whatever the umask: nobody passes through to the cluster's folder
    (folder / "cluster").mkdir()
    cluster = Cluster(bin_dir, prefix, folder / "cluster")
    try:
        try:
            cluster.start()
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            check("postgres: throw-away cluster started", False, str(e))
            return
        run_burst("postgres", cluster.url(), events, folder)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
