"""Arguments of the wrong type are refused naming the argument, with the answer the library
gives a bad argument (HTTP 500, an ``invalid_argument`` body): never converted with
``bytes()``/``int()`` (an int token would allocate that many bytes), never truncated (an amount
of 12.7), never a bare TypeError, UnicodeEncodeError or ctypes.ArgumentError."""

from __future__ import annotations

import json
import resource
import unittest
from decimal import Decimal

from support import TOKEN

from slotpartner import Client, ConfigurationError, Receiver, reply_balance, reply_result
from slotpartner.errors import MISCONFIGURED


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


class ArgumentTypes(unittest.TestCase):
    def assert_refused(self, field: str, call, expected: str | None = None) -> ConfigurationError:
        with self.assertRaises(ConfigurationError) as caught:
            call()
        error = caught.exception
        self.assertEqual(error.field, field)
        self.assertTrue(str(error).startswith(field + ": "), str(error))
        if expected is not None:
            self.assertIn(expected, str(error))
        self.assertEqual(error.http_status, 500)
        # The answer says nothing of the setting (the caller may be anyone); the error does.
        body = json.loads(error.response_body)
        self.assertEqual(body["error"], {"code": "invalid_argument", "field": "", "message": MISCONFIGURED})
        return error

    def test_a_result_reply_takes_success_as_a_bool_only(self) -> None:
        # "false" is truthy: taken as a success it would tell the service money moved.
        for value in ("false", "0", 0, 1, None):
            self.assert_refused("success", lambda v=value: reply_result("refund", v, "declined"), "must be a bool")
        self.assertEqual(json.loads(reply_result("refund", False, "declined"))["refund"]["success"], False)
        self.assertEqual(json.loads(reply_result("payout", True))["payout"]["success"], True)

    def test_headers_of_another_type_are_refused_without_allocating(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.assert_refused("X-Service-Token", lambda: receiver.handle(300_000_000, "127.0.0.1", b"{}"), "not int")
        self.assertLess(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, 100_000)  # KiB
        for value in (12.5, Unprintable(), object()):
            self.assert_refused("X-Service-Token", lambda v=value: receiver.handle(v, "127.0.0.1", b"{}"))
            self.assert_refused("remote_addr", lambda v=value: receiver.handle(TOKEN, v, b"{}"))
            self.assert_refused("X-Forwarded-For", lambda v=value: receiver.handle(TOKEN, "127.0.0.1", b"{}", v))
            self.assert_refused("X-Service-Token", lambda v=value: receiver.authenticate(v, "127.0.0.1"))
            self.assert_refused("remote_addr", lambda v=value: receiver.authenticate(TOKEN, v))
        self.assert_refused("remote_addr", lambda: receiver.handle(TOKEN, 5, b"{}"), "not int")
        self.assert_refused("body", lambda: receiver.handle(TOKEN, "127.0.0.1", 10))
        # bytes-like values still work
        receiver.authenticate(bytearray(TOKEN.encode()), memoryview(b"127.0.0.1"))

    def test_unencodable_strings_are_refused_naming_the_field(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        self.assert_refused("X-Service-Token", lambda: receiver.handle("\ud800", "127.0.0.1", b"{}"), "UTF-8")
        self.assert_refused("remote_addr", lambda: receiver.authenticate(TOKEN, "\ud800"), "UTF-8")
        self.assert_refused("X-Forwarded-For", lambda: receiver.handle(TOKEN, "127.0.0.1", b"{}", "\ud800"), "UTF-8")
        self.assert_refused("currency", lambda: reply_balance(1, "\ud800"), "UTF-8")
        self.assert_refused("token", lambda: Receiver("\ud800"), "UTF-8")

    def test_amounts_must_be_ints(self) -> None:
        for value in (None, "100", 12.7, Decimal("12.50"), True, False):
            self.assert_refused("money", lambda v=value: reply_balance(v), "must be an int")
            self.assert_refused("coins", lambda v=value: reply_balance(1, "EUR", v), "must be an int")
        event = Receiver(TOKEN, sources="any").parse(b'{"action":"getPlayerBalance","playerIdentifier":"p"}')
        self.assert_refused("money", lambda: event.reply_balance(12.7), "must be an int")
        self.assert_refused("money", lambda: event.reply_balance(True), "must be an int")
        self.assertEqual(json.loads(reply_balance(1299))["playerBalance"]["money"], 1299)

    def test_integer_settings_must_be_ints(self) -> None:
        self.assert_refused("max_body_bytes", lambda: Receiver(TOKEN, max_body_bytes="x"), "must be an int")
        self.assert_refused("max_depth", lambda: Receiver(TOKEN, max_depth=2.5), "must be an int")
        self.assert_refused(
            "balance_failure_http_status", lambda: Receiver(TOKEN, balance_failure_http_status="500"), "must be an int"
        )
        client = Client("https://127.0.0.1:1", TOKEN)
        try:
            self.assert_refused("game_id", lambda: client.get_games("en-US", "5"), "must be an int")
        finally:
            client.close()
        self.assert_refused("retries", lambda: Client("https://127.0.0.1:1", TOKEN, retries="2"), "must be an int")
        self.assert_refused("ca_pem", lambda: Client("https://127.0.0.1:1", TOKEN, ca_pem=5), "not int")

    def test_every_argument_error_carries_the_library_answer(self) -> None:
        self.assert_refused("token", lambda: Receiver(5))
        self.assert_refused("token", lambda: Receiver(None))
        self.assert_refused("max_body_bytes", lambda: Receiver(TOKEN, max_body_bytes=-1))
        self.assert_refused("token", lambda: Receiver(["a,b"]))


if __name__ == "__main__":
    unittest.main()
