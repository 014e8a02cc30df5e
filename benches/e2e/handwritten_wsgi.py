"""handwritten_wsgi: the callback endpoint a careful Python team writes by hand for the same
contract (partner-interface.md), the peer of benches/e2e/library_wsgi.py in make bench-e2e.

The source against a list, the token with hmac.compare_digest (UUIDs without regard to case),
at most 64 KiB, strict UTF-8, json.loads refusing duplicate keys (object_pairs_hook), NaN and
Infinity, nesting beyond 32 levels; the library's field checks for refunds, payouts and balance
queries (JSON integers, not booleans, identifiers 0 to 2^63-1, amounts 0 to 2^53-1, identifiers
non-empty, at most 256 bytes, without control characters, the currency three uppercase letters,
one player identifier at least, null as absent); then, in ONE transaction on the process's
connection (sqlite3 or psycopg, statements prepared by the driver), an idempotency row keyed by
kind and transactionId with a digest of the decisive fields, the index and the reply (INSERT ...
ON CONFLICT DO NOTHING) and the credit when it is new; a repeat gets the stored reply, other
content 409. The library's replies and statuses.

Not done that the library does: lone surrogate escapes are accepted, no gap bookkeeping beyond
the stored index.

Environment: SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES (addresses, comma-separated), E2E_DB
(``sqlite:PATH`` or a libpq connection string).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import sys
import threading
from typing import Any

TOKEN = os.environ.get("SLOTPARTNER_TOKEN", "").lower().encode()
SOURCES = frozenset(s.strip() for s in os.environ.get("SLOTPARTNER_SOURCES", "").split(","))
DB = os.environ.get("E2E_DB", "")
SQLITE = DB.startswith("sqlite:")
MAX_BODY = 65536
MAX_DEPTH = 32
MAX_IDENTIFIER = 256
MAX_ID = 2**63 - 1
MAX_AMOUNT = 2**53 - 1
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
CURRENCY = re.compile("[A-Z]{3}")
P = "?" if SQLITE else "%s"
CLAIM = f"INSERT INTO callbacks (kind, transaction_id, content_hash, event_index, reply) VALUES ({P}, {P}, {P}, {P}, {P}) ON CONFLICT DO NOTHING"
CREDIT = f"INSERT INTO credits (kind, transaction_id, player, amount) VALUES ({P}, {P}, {P}, {P})"
STORED = f"SELECT content_hash, reply FROM callbacks WHERE kind = {P} AND transaction_id = {P}"
JSON_TYPE = ("Content-Type", "application/json; charset=utf-8")
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 405: "Method Not Allowed",
           409: "Conflict", 413: "Content Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
_local = threading.local()


class Invalid(Exception):
    pass


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def error(status: int, code: str, field: str, message: str) -> tuple[int, bytes]:
    return status, dumps({"error": {"code": code, "field": field, "message": message}})


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("duplicate key")
    return value


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def depth(value: Any) -> int:
    """Nesting levels of containers, the top-level object being 1."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


class Fields:
    def __init__(self, body: dict[str, Any], event: str) -> None:
        self.body, self.event = body, event

    def value(self, name: str, required: bool) -> Any:
        value = self.body.get(name)
        if value is None and required:
            raise Invalid(f"{self.event}.{name}: required field is missing")
        return value

    def id(self, name: str, top: int = MAX_ID) -> int:
        value = self.value(name, True)
        if type(value) is not int or value < 0:
            raise Invalid(f"{self.event}.{name}: expected a non-negative integer, got {json.dumps(value)}")
        if value > top:
            raise Invalid(f"{self.event}.{name}: out of range, got {value}")
        return value

    def boolean(self, name: str, required: bool = True) -> bool | None:
        value = self.value(name, required)
        if value is not None and type(value) is not bool:
            raise Invalid(f"{self.event}.{name}: expected a boolean, got {json.dumps(value)}")
        return value

    def text(self, name: str, required: bool = True) -> str | None:
        value = self.value(name, required)
        if value is None:
            return None
        if type(value) is not str:
            raise Invalid(f"{self.event}.{name}: expected a string, got {json.dumps(value)}")
        if not value or len(value.encode()) > MAX_IDENTIFIER or CONTROL.search(value):
            raise Invalid(f"{self.event}.{name}: expected a non-empty string of at most {MAX_IDENTIFIER} bytes without control characters")
        return value

    def currency(self, name: str) -> str:
        value = self.text(name)
        if not CURRENCY.fullmatch(value):
            raise Invalid(f"{self.event}.{name}: expected three uppercase letters (ISO 4217), got {json.dumps(value)}")
        return value

    def players(self) -> list[str | None]:
        players = [self.text("playerIdentifier", False), self.text("playerPartnerIdentifier", False)]
        if players == [None, None]:
            raise Invalid(f"{self.event}.playerIdentifier: required field is missing (one of playerIdentifier and playerPartnerIdentifier must be present)")
        return players

    def index(self) -> int | None:
        value = self.body.get("index")
        return value if type(value) is int and 0 <= value <= MAX_ID else None


def connection() -> Any:
    db = getattr(_local, "db", None)
    if db is None:
        if SQLITE:
            import sqlite3

            db = sqlite3.connect(DB[len("sqlite:"):], timeout=5, isolation_level=None)
            db.execute("PRAGMA synchronous = FULL")
        else:
            import psycopg

            db = psycopg.connect(DB, autocommit=True)
        _local.db = db
    return db


def once(kind: str, event: str, transaction_id: int, index: int | None, digest: str, player: str, amount: int,
         reply: bytes) -> tuple[int, bytes]:
    """The idempotency row and the credit in one transaction; a repeat gets the stored reply."""
    db = connection()
    if SQLITE:
        db.execute("BEGIN IMMEDIATE")
        try:
            answer = claim_and_credit(db, kind, event, transaction_id, index, digest, player, amount, reply)
        except BaseException:
            try:
                db.execute("ROLLBACK")
            except Exception:
                _local.db = None
            raise
        db.execute("COMMIT")
        return answer
    with db.transaction():  # BEGIN ... COMMIT, or ROLLBACK on an exception
        return claim_and_credit(db, kind, event, transaction_id, index, digest, player, amount, reply)


def claim_and_credit(db: Any, kind: str, event: str, transaction_id: int, index: int | None, digest: str, player: str,
                     amount: int, reply: bytes) -> tuple[int, bytes]:
    cursor = db.execute(CLAIM, (kind, transaction_id, digest, index, reply.decode()))
    if cursor.rowcount == 1:
        db.execute(CREDIT, (kind, transaction_id, player, amount))
        return 200, reply
    stored_digest, stored_reply = db.execute(STORED, (kind, transaction_id)).fetchone()
    if hmac.compare_digest(stored_digest, digest):
        return 200, stored_reply.encode()
    return error(409, "conflict", f"{event}.transactionId",
                 f"{event}.transactionId: transactionId {transaction_id} was delivered before with other content")


def handle(body: dict[str, Any]) -> tuple[int, bytes]:
    name = body.get("event")
    if name is None and body.get("action") == "getPlayerBalance":
        try:
            service, partner = Fields(body, "getPlayerBalance").players()
        except Invalid as e:
            return 500, dumps({"playerBalance": {"errorMessage": str(e)}})
        if (partner or service) == "unknown-player":
            return 500, b'{"playerBalance":{"errorMessage":"player unknown-player is not known"}}'
        return 200, b'{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}'
    name = name if name is not None else body.get("action")
    if type(name) is not str:
        return error(400, "missing_field", "event", "event: required field is missing")
    f = Fields(body, name)
    if name == "gameSessionBuyRefund":
        kind, amount = "refund", 0
        try:
            transaction_id = f.id("transactionId")
            decisive = [f.text("gameSessionIdentifier"), *f.players(), transaction_id, f.id("buyTransactionId"),
                        f.id("gameSessionId"), f.text("partnerGameRequestIdentifier")]
            f.id("gameId")
            f.boolean("isMobile")
            f.text("bonusCode", False)
        except Invalid as e:
            return 200, dumps({"refund": {"success": False, "errorMessage": str(e)}})
        reply = b'{"refund":{"success":true,"errorMessage":""}}'
    elif name == "jackpotPayout":
        kind = "payout"
        try:
            transaction_id = f.id("transactionId")
            amount = f.id("moneyWon", MAX_AMOUNT)
            decisive = [f.text("jackpotIdentifier"), *f.players(), f.currency("currencyISO4217"), amount,
                        f.id("coinsWon", MAX_AMOUNT), f.boolean("isMoney"), f.boolean("isPrimary"), transaction_id,
                        f.id("buyTransactionId"), f.text("partnerGameRequestIdentifier"), f.id("gameSessionId")]
            f.id("epochReleasedMillis")
            f.id("gameId")
            f.text("bonusCode", False)
            f.boolean("isMobile", False)
        except Invalid as e:
            return 200, dumps({"payout": {"success": False, "errorMessage": str(e)}})
        reply = b'{"payout":{"success":true,"errorMessage":""}}'
    else:
        return error(400, "unknown_event", "event", f"event: unknown event {json.dumps(name)}")
    player = decisive[2] or decisive[1]
    digest = hashlib.sha256(dumps(decisive)).hexdigest()
    return once(kind, name, transaction_id, f.index(), digest, player, amount, reply)


def answer(environ: dict[str, Any]) -> tuple[int, bytes]:
    if environ.get("REQUEST_METHOD") != "POST":
        return 405, b'{"error":{"code":"method_not_allowed","field":"","message":"only POST is accepted"}}'
    remote = environ.get("REMOTE_ADDR", "")
    if remote not in SOURCES:
        return error(403, "forbidden_source", "remote_addr", f"remote_addr: {remote} is not an allowed source")
    token = environ.get("HTTP_X_SERVICE_TOKEN")
    if token is None:
        return error(401, "missing_token", "X-Service-Token", "X-Service-Token: header is missing")
    if not hmac.compare_digest(token.encode("latin-1").lower(), TOKEN):
        return error(401, "wrong_token", "X-Service-Token", "X-Service-Token: the token is not valid")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = -1
    if length < 0:
        return error(400, "bad_request", "CONTENT_LENGTH", "CONTENT_LENGTH is invalid or the body is shorter")
    if length > MAX_BODY:
        return error(413, "body_too_large", "", f"body: more than the limit of {MAX_BODY} bytes")
    raw = environ["wsgi.input"].read(length)
    if len(raw) < length:
        return error(400, "bad_request", "CONTENT_LENGTH", "CONTENT_LENGTH is invalid or the body is shorter")
    try:
        body = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys, parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError) as e:
        return error(400, "invalid_json", "", f"body: invalid JSON: {e}")
    if type(body) is not dict:
        return error(400, "not_an_object", "", "body: the top level is not a JSON object")
    if depth(body) > MAX_DEPTH:
        return error(400, "too_deep", "", f"body: nested deeper than {MAX_DEPTH} levels")
    try:
        return handle(body)
    except Exception as e:  # sqlite3.Error, psycopg.Error: the database failed
        sys.stderr.write(f"handwritten_wsgi: database: {e}\n")
        _local.db = None
        return 503, b'{"error":{"code":"journal","field":"","message":"the partner is temporarily unavailable; deliver again later"}}'


def application(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    status, body = answer(environ)
    headers = [("Allow", "POST")] if status == 405 else []
    start_response(f"{status} {REASONS.get(status, 'Error')}", headers + [JSON_TYPE, ("Content-Length", str(len(body)))])
    return [body]
