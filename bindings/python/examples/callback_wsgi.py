#!/usr/bin/env python3
"""callback_wsgi: the service's callback endpoint on the standard library's wsgiref.

    SLOTPARTNER_TOKEN=<uuid> [SLOTPARTNER_SOURCES=production] python3 callback_wsgi.py HOST:PORT

The Python twin of examples/c/callback_cgi.c, configured and answering exactly like it:

Configuration (environment):
  SLOTPARTNER_TOKEN    the partner token the service sends in X-Service-Token (a UUID)
  SLOTPARTNER_SOURCES  staging, production, any, or a comma-separated list of addresses and
                       CIDR ranges (default: production)
  SLOTPARTNER_TRUSTED_PROXIES  proxies whose X-Forwarded-For is believed (default: none)
  SLOTPARTNER_STRICT_INDEX     1 to refuse an event whose index is not a non-negative integer
                               (default: handle it with no index)
  SLOTPARTNER_JOURNAL  a delivery journal (sqlite:PATH, or postgres://... across hosts): each
                       refund and payout is handled once, a repeated delivery is answered with
                       the first reply byte for byte, and a refused one is recorded as seen
  SLOTPARTNER_WALLET   a directory standing in for the partner's ledger: one file per credited
                       transaction, created only if absent, so a transactionId is never
                       credited twice (the unique key exactly-once needs across a crash)
Unknown events are refused, bodies are limited to 64 KiB. A configuration that is refused is
logged at start-up and answered 500 with the error's JSON body; without SLOTPARTNER_TOKEN the log
line reads ``configuration: token: must be a str, not None (is SLOTPARTNER_TOKEN set?)``.

Answers: 405 (with ``Allow: POST``) for a method other than POST; 400 for a Content-Length that
is not a number or a body shorter than it; 401 for a missing or wrong token; 403 for a source
not allowed; 413 for a body over the limit; 400 with a JSON error body for a body that is not
JSON, not an object, or names an unknown event; 200 with the event's wrapper, success false
and the field-naming errorMessage for a known event with invalid fields; 200 with success true
for a valid event (a balance of 100000 EUR minor units, 0 coins); a refused balance query is
answered 500 with a body that states no balance. Replies are sent with the status the event
gives (``event.reply_http_status``). The demo business logic accepts every valid event (but
knows no player called "unknown-player") and logs one line per event to stderr, and one for
its index; replace handle_event() with yours.

With SLOTPARTNER_JOURNAL set, every valid event is claimed first (``event.begin()``): a repeated
delivery is answered 200 with the stored reply and runs nothing (logged "repeated delivery
answered from the journal"); a new one runs the logic, then ``event.finish()`` stores its reply;
a conflict (same transactionId, other content) is answered 409, a busy claim or a journal that
fails 503, each with the library's answer. When the ledger (SLOTPARTNER_WALLET) fails, the claim
is abandoned and the answer is 503 with ``Retry-After: 5``, so that the service delivers again.
Without it, the answers are the ones above, unchanged. The source and token are checked
(``Receiver.authenticate``) before anything touches the journal: a request refused there is
answered 401 or 403 as without a journal and never makes it connect. The journal is opened when
the first request that passed needs it; while it cannot be opened (its server down), each such
request is answered 503 with a body that names nothing of it (its URL is in the log line only),
and the next one tries again.

Prints ``listening http://HOST:PORT`` once it accepts requests (port 0 picks a free port). The
server handles each request on its own thread; they share one Receiver. X-Forwarded-For is
passed to handle() as the bytes received; the receiver reads it only when the peer is one of
SLOTPARTNER_TRUSTED_PROXIES (a TLS-terminating proxy in front of this server).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

try:
    import slotpartner
except ImportError:  # run from a checkout: the package is next to this directory
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import slotpartner

MAX_BODY_BYTES = 65536
DRAIN_BYTES = 1 << 20
JSON = ("Content-Type", "application/json; charset=utf-8")
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    503: "Service Unavailable",
}
METHOD_NOT_ALLOWED = b'{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}'
BAD_LENGTH = (
    b'{"error":{"code":"bad_request","field":"CONTENT_LENGTH",'
    b'"message":"CONTENT_LENGTH is invalid or the body is shorter"}}'
)
NO_ERROR = b'{"error":{"code":"internal_error","field":"","message":"no error recorded"}}'
LEDGER_DOWN = (
    b'{"error":{"code":"ledger_unavailable","field":"",'
    b'"message":"the ledger is unavailable; deliver again later"}}'
)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def log(line: str) -> None:
    sys.stderr.write(f"callback_wsgi: {line}\n")
    sys.stderr.flush()


class LedgerDown(Exception):
    """The demo ledger failed (a transient failure of the partner's own store)."""


def credit(wallet: str | None, kind: str, transaction_id: int, amount: int) -> None:
    """The demo ledger: credits ``amount`` for ``kind``/``transaction_id`` once. The file is
    created only if absent (``O_EXCL``), the ledger's unique key: a second credit of the same
    transaction, such as a delivery run again after its worker died between the credit and
    ``finish()``, finds it and changes nothing. Raises LedgerDown when the ledger fails."""
    if not wallet:
        return
    path = os.path.join(wallet, f"{kind}-{transaction_id}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # credited before: the unique key refuses a second credit
    except OSError as error:
        raise LedgerDown(str(error)) from error
    try:
        os.write(fd, f"{amount}\n".encode())
        os.fsync(fd)
    except OSError as error:
        os.close(fd)
        os.unlink(path)
        raise LedgerDown(str(error)) from error
    os.close(fd)


def handle_event(event: slotpartner.Event, wallet: str | None = None) -> bytes:
    """The demo business logic: accept every valid event, credit it, log it, and build its
    reply. Raises LedgerDown when the ledger (``wallet``) fails."""
    if isinstance(event, slotpartner.BuyRefund):
        player = event.player_partner_identifier or event.player_identifier
        log(f"refund transaction {event.transaction_id} of purchase {event.buy_transaction_id} for player {player}")
        credit(wallet, "refund", event.transaction_id, 0)
        return event.reply()
    if isinstance(event, slotpartner.JackpotPayout):
        player = event.player_partner_identifier or event.player_identifier
        size = "major" if event.is_primary else "minor"
        log(
            f"payout {event.money_won} {event.currency_iso4217} (minor units) of {size} jackpot "
            f"{event.jackpot_identifier} for player {player}"
        )
        credit(wallet, "payout", event.transaction_id, event.money_won)
        return event.reply()
    if isinstance(event, slotpartner.BalanceQuery):
        player = event.player_partner_identifier or event.player_identifier
        log(f"balance query for player {player}")
        if player == "unknown-player":
            # No balance is stated; sent with event.reply_http_status (500 by default).
            return event.reply(False, "player unknown-player is not known")
        return event.reply_balance(100000)
    # Not reached: the receiver refuses unknown events.
    return event.reply(False, "unsupported event")


def log_index(event: slotpartner.Event) -> None:
    """The index, as the log shows it: the number, or why there is none."""
    if event.index is not None:
        log(f"index {event.index}")
    elif event.index_unreadable:
        log(f"index unreadable ({event.extra.get('index', '?')}), handled without one")


def header_bytes(environ: Mapping[str, Any], name: str) -> bytes | None:
    """A request header as the bytes that were sent (WSGI gives header values as latin-1 text),
    None when absent."""
    value = environ.get(name)
    return value.encode("latin-1") if value is not None else None


_LENGTH = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")


def content_length(text: str | None) -> int | None:
    """CONTENT_LENGTH read as callback_cgi reads it (strtoull, base 10, the whole text, no
    leading '-'); None when it is invalid. Absent or empty means 0."""
    if not text:
        return 0
    match = _LENGTH.fullmatch(text)
    if text[0] == "-" or match is None:
        return None
    value = int(match.group(2))
    if value >= 2**64:
        return None
    return (2**64 - value) % 2**64 if match.group(1) == "-" else value


def read_body(environ: Mapping[str, Any]) -> bytes | None:
    """At most MAX_BODY_BYTES + 1 bytes, so that an oversized body is refused without being
    read whole; None when the request is bad (length invalid, body shorter)."""
    length = content_length(environ.get("CONTENT_LENGTH"))
    if length is None:
        return None
    wanted = min(length, MAX_BODY_BYTES + 1)
    stream = environ["wsgi.input"]
    chunks = []
    got = 0
    while got < wanted:
        chunk = stream.read(wanted - got)
        if not chunk:
            return None  # shorter than CONTENT_LENGTH
        chunks.append(chunk)
        got += len(chunk)
    if length > wanted:
        discard(stream, min(length - wanted, DRAIN_BYTES))
    return b"".join(chunks)


def discard(stream: Any, count: int) -> None:
    """Reads and drops the unread rest of an oversized body (up to DRAIN_BYTES): closing a
    connection with unread data resets it, and the client would lose the 413 answer."""
    while count > 0:
        chunk = stream.read(min(count, 65536))
        if not chunk:
            return
        count -= len(chunk)


def make_app(
    config: Mapping[str, str], *, claim_at_finish: bool | None = None
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI application, configured from ``config`` (SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES,
    SLOTPARTNER_TRUSTED_PROXIES, SLOTPARTNER_STRICT_INDEX, SLOTPARTNER_JOURNAL,
    SLOTPARTNER_WALLET). ``claim_at_finish`` is passed to the journal (``Journal(...,
    claim_at_finish=...)``; None keeps the library's default, False): True only when everything
    the logic does is staged on the event or absorbed by the ledger's unique transactionId."""
    configuration_error: slotpartner.SlotPartnerError | None = None
    configuration_problem = ""  # its message for the log, with a hint when SLOTPARTNER_TOKEN is unset
    journal_url = config.get("SLOTPARTNER_JOURNAL") or None
    wallet = config.get("SLOTPARTNER_WALLET") or None

    def make_receiver(journal: slotpartner.Journal | None = None) -> slotpartner.Receiver:
        return slotpartner.Receiver(
            config.get("SLOTPARTNER_TOKEN"),
            sources=config.get("SLOTPARTNER_SOURCES", "production"),
            trusted_proxies=config.get("SLOTPARTNER_TRUSTED_PROXIES", ""),
            strict_index=config.get("SLOTPARTNER_STRICT_INDEX") == "1",
            max_body_bytes=MAX_BODY_BYTES,
            reject_unknown_events=True,
            journal=journal,
        )

    # The receiver without a journal checks every request's source and token first (and, without
    # SLOTPARTNER_JOURNAL, handles it): a request refused there never reaches the journal.
    receiver: slotpartner.Receiver | None = None
    try:
        receiver = make_receiver()
    except slotpartner.SlotPartnerError as error:
        configuration_error = error
        if error.field == "token" and config.get("SLOTPARTNER_TOKEN") is None:
            configuration_problem = f"{error.message} (is SLOTPARTNER_TOKEN set?)"
        else:
            configuration_problem = error.message
        log(f"configuration: {configuration_problem}")
    # With SLOTPARTNER_JOURNAL, the receiver with the journal, made when the first request that
    # passed those checks needs it; while the journal cannot be opened, each such request is
    # answered 503 and the next one tries again.
    journaled: list[slotpartner.Receiver] = []
    journaled_lock = threading.Lock()

    def journaled_receiver() -> slotpartner.Receiver:
        """The receiver with the journal, opened on first use (raises JournalError, 503, when the
        journal cannot be opened)."""
        with journaled_lock:
            if not journaled:
                assert journal_url is not None
                # Opened once per process; the receiver keeps it open, so it is closed right away.
                with slotpartner.Journal(journal_url, claim_at_finish=claim_at_finish) as journal:
                    journaled.append(make_receiver(journal))
            return journaled[0]

    def respond(
        start_response: StartResponse, status: int, body: bytes, allow: bool = False, retry_after: bool = False
    ) -> list[bytes]:
        headers = [("Allow", "POST")] if allow else []
        headers += [("Retry-After", "5")] if retry_after else []
        headers += [JSON, ("Content-Length", str(len(body)))]
        start_response(f"{status} {REASONS.get(status, 'Internal Server Error')}", headers)
        return [body]

    def respond_error(start_response: StartResponse, error: slotpartner.SlotPartnerError) -> list[bytes]:
        """Answers with what the library says the failure deserves (status and JSON body)."""
        if error.http_status is None or error.response_body is None:
            return respond(start_response, 500, NO_ERROR)
        return respond(start_response, error.http_status, error.response_body)

    def application(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return respond(start_response, 405, METHOD_NOT_ALLOWED, allow=True)
        if receiver is None:
            assert configuration_error is not None
            log(f"configuration: {configuration_problem}")
            return respond_error(start_response, configuration_error)
        body = read_body(environ)
        if body is None:
            return respond(start_response, 400, BAD_LENGTH)
        token = header_bytes(environ, "HTTP_X_SERVICE_TOKEN")
        remote_addr = environ.get("REMOTE_ADDR")
        forwarded_for = header_bytes(environ, "HTTP_X_FORWARDED_FOR")
        handler = receiver
        try:
            # Source and token first: a request refused here (401, 403) never reaches the journal.
            receiver.authenticate(token, remote_addr, forwarded_for)
            if journal_url is not None:
                try:
                    handler = journaled_receiver()
                except slotpartner.SlotPartnerError as error:
                    log(f"journal: {error.message}")  # the URL is for the log only
                    return respond_error(start_response, error)  # 503: the service delivers again
            event = handler.handle(token, remote_addr, body, forwarded_for)
        except slotpartner.SlotPartnerError as error:
            log(f"refused: {error.message}")
            return respond_error(start_response, error)
        with event:  # frees the library's event (and releases an unfinished claim) at the end
            return answer_event(start_response, event)

    def answer_event(start_response: StartResponse, event: slotpartner.Event) -> list[bytes]:
        """Handles a valid event: with a journal, claims it first (a repeat is answered with the
        stored reply, running nothing), and stores the reply once the ledger has the credit."""
        if journal_url is not None:
            try:
                claim = event.begin()
            except slotpartner.SlotPartnerError as error:
                log(f"journal: {error.message}")
                return respond_error(start_response, error)  # 409 conflict, 503 busy or journal down
            if claim.outcome is slotpartner.Outcome.DONE:
                log("repeated delivery answered from the journal")
                assert claim.reply is not None
                return respond(start_response, 200, claim.reply)
            if claim.attempt > 1:
                log(f"attempt {claim.attempt}")
        try:
            reply = handle_event(event, wallet)
        except slotpartner.SlotPartnerError as error:
            log(f"reply: {error.message}")
            return respond_error(start_response, error)
        except LedgerDown as down:
            log(f"ledger: {down}")
            if journal_url is not None:
                # A transient failure: release the claim so that the next delivery runs again.
                try:
                    event.abandon()
                except slotpartner.SlotPartnerError as error:
                    log(f"journal abandon: {error.message}")  # the claim ends with its lease
            return respond(start_response, 503, LEDGER_DOWN, retry_after=True)
        if journal_url is not None:
            try:
                event.finish()
            except slotpartner.SlotPartnerError as error:
                # ClaimLostError: the credit is made; the next delivery finds it in the ledger.
                log(f"journal finish: {error.message}")
        log_index(event)
        return respond(start_response, event.reply_http_status, reply)

    return application


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class ThreadingWSGIServer6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


class QuietHandler(WSGIRequestHandler):
    """No access log: stderr holds one line per event, like callback_cgi."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(argv: list[str]) -> int:
    if len(argv) != 2 or ":" not in argv[1]:
        sys.stderr.write("usage: callback_wsgi.py HOST:PORT\n")
        return 2
    host, _, port = argv[1].rpartition(":")
    host = host.strip("[]")
    server_class = ThreadingWSGIServer6 if ":" in host else ThreadingWSGIServer
    app = make_app(os.environ)
    with make_server(host, int(port), app, server_class, QuietHandler) as server:
        shown = f"[{host}]" if ":" in host else host
        print(f"listening http://{shown}:{server.server_port}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
