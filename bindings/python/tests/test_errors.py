"""The exception hierarchy: one class per group of status codes, names from the library."""

from __future__ import annotations

import re
import unittest

from support import HEADER

import slotpartner
from slotpartner import (
    AuthenticationError,
    BusyError,
    ClaimLostError,
    ConfigurationError,
    ConflictError,
    JournalError,
    ServiceError,
    SlotPartnerError,
    TransportError,
    ValidationError,
)
from slotpartner.errors import error_class


def header_statuses() -> dict[int, str]:
    body = re.search(r"typedef enum sp_status \{(.*?)\} sp_status;", HEADER.read_text(), re.S)
    assert body is not None
    return {int(value): name for name, value in re.findall(r"(SP_\w+) = (\d+)", body.group(1))}


class ErrorsTest(unittest.TestCase):
    def test_every_status_maps_to_its_class(self) -> None:
        statuses = header_statuses()
        self.assertEqual(sorted(statuses), list(range(27)), "a status was added: map it in errors.error_class")
        expected = {1: ConfigurationError, 2: SlotPartnerError}
        expected.update({code: ValidationError for code in range(3, 14)})
        expected.update({code: AuthenticationError for code in range(14, 17)})
        expected.update({code: TransportError for code in (17, 18, 19, 22)})
        expected.update({code: ServiceError for code in (20, 21)})
        # The delivery journal's codes, each its own class.
        expected.update({23: ConflictError, 24: JournalError, 25: ClaimLostError, 26: BusyError})
        for code in range(1, 27):
            self.assertIs(error_class(code), expected[code], statuses[code])
        self.assertIs(error_class(99), SlotPartnerError)

    def test_status_names_come_from_the_library(self) -> None:
        for code, name in header_statuses().items():
            self.assertEqual(slotpartner.status_name(code), name)
            self.assertEqual(SlotPartnerError(code, "", "m").status_name, name)
        self.assertEqual(slotpartner.status_name(1000), "SP_ERR_INVALID_ARGUMENT")
        self.assertEqual(slotpartner.status_name(2**40), "SP_ERR_INVALID_ARGUMENT")

    def test_attributes(self) -> None:
        error = ValidationError(10, "jackpotPayout.moneyWon", "jackpotPayout.moneyWon: bad", http_status=200,
                                response_body=b"{}")  # fmt: skip
        self.assertIsInstance(error, SlotPartnerError)
        self.assertIsInstance(error, Exception)
        self.assertEqual(str(error), "jackpotPayout.moneyWon: bad")
        self.assertEqual((error.status, error.field, error.http_status, error.response_body), (10, error.field, 200, b"{}"))
        self.assertIn("SP_ERR_WRONG_TYPE", repr(error))
        plain = ConfigurationError(1, "x", "x: y")
        self.assertIsNone(plain.http_status)
        self.assertIsNone(plain.response_body)

    def test_last_error_is_read_right_after_the_failure(self) -> None:
        receiver = slotpartner.Receiver("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f", sources="any")
        with self.assertRaises(ValidationError) as first:
            receiver.parse(b"[]")
        receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p"}')  # success clears it
        self.assertEqual(first.exception.status, 8)
        self.assertEqual(first.exception.response_body,
                         b'{"error":{"code":"not_an_object","field":"","message":"body: the top level is not a JSON object"}}')  # fmt: skip


if __name__ == "__main__":
    unittest.main()
