"""Nothing leaks: resident memory stays flat over 100,000 callbacks, whichever way each ends."""

from __future__ import annotations

import gc
import unittest
from typing import Callable

from support import TOKEN, fixture, rss_bytes

from slotpartner import BalanceQuery, Receiver, SlotPartnerError

MIB = 1 << 20
LIMIT = 4 * MIB


class MemoryTest(unittest.TestCase):
    receiver = Receiver(TOKEN, sources="any")
    refund, payout, balance = fixture("refund"), fixture("payout"), fixture("balance")

    def growth(self, cycle: Callable[[int], None], cycles: int, warm_up: int = 10_000) -> int:
        for i in range(warm_up):
            cycle(i)
        gc.collect()
        before = rss_bytes()
        for i in range(cycles):
            cycle(i)
        gc.collect()
        return rss_bytes() - before

    def test_parse_and_reply(self) -> None:
        def cycle(i: int) -> None:
            body = (self.refund, self.payout, self.balance)[i % 3]
            event = self.receiver.parse(body)
            if isinstance(event, BalanceQuery):
                event.reply_balance(i)
            else:
                event.reply()

        grown = self.growth(cycle, 100_000)
        self.assertLess(grown, LIMIT, f"resident memory grew by {grown / MIB:.1f} MiB over 100,000 callbacks")

    def test_handle_without_reply(self) -> None:
        # The event is dropped unanswered: __del__ frees it.
        grown = self.growth(lambda i: self.receiver.handle(TOKEN, "127.0.0.1", self.payout), 100_000)
        self.assertLess(grown, LIMIT, f"grew by {grown / MIB:.1f} MiB")

    def test_context_manager_and_rebuilt_replies(self) -> None:
        def cycle(i: int) -> None:
            with self.receiver.parse(self.refund) as event:
                pass
            event.reply(False, "rebuilt after close")

        grown = self.growth(cycle, 50_000)
        self.assertLess(grown, LIMIT, f"grew by {grown / MIB:.1f} MiB")

    def test_refusals(self) -> None:
        bodies = [fixture("invalid_money_float"), fixture("not_json"), b"x" * 70000]

        def cycle(i: int) -> None:
            try:
                self.receiver.handle(None if i % 4 == 0 else TOKEN, "127.0.0.1", bodies[i % 3])
            except SlotPartnerError as error:
                assert error.response_body

        grown = self.growth(cycle, 50_000)
        self.assertLess(grown, LIMIT, f"grew by {grown / MIB:.1f} MiB")


if __name__ == "__main__":
    unittest.main()
