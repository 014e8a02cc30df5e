"""One Receiver and one Client shared by many threads."""

from __future__ import annotations

import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from support import TOKEN, Sandbox, fixture, wait_for

from slotpartner import BalanceQuery, Client, ConfigurationError, JackpotPayout, Receiver, ValidationError

THREADS = 8


def run_in_threads(work: Callable[[int], None], threads: int = THREADS) -> None:
    """Runs work(0..threads-1) at once and re-raises the first failure."""
    barrier = threading.Barrier(threads)

    def start(n: int) -> None:
        barrier.wait()
        work(n)

    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(start, n) for n in range(threads)]:
            future.result()


class SharedReceiverTest(unittest.TestCase):
    def test_events_errors_and_replies_stay_per_thread(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        payout = fixture("payout")
        balance = fixture("balance")
        invalid = {
            "jackpotPayout.moneyWon": fixture("invalid_money_float"),
            "gameSessionBuyRefund.transactionId": fixture("invalid_string_id"),
            "getPlayerBalance.playerIdentifier": fixture("invalid_no_player"),
        }

        def work(n: int) -> None:
            for i in range(3000):
                step = (n + i) % 5
                if step == 0:
                    event = receiver.handle(TOKEN, "127.0.0.1", payout.replace(b'"index":42', b'"index":%d' % i))
                    assert isinstance(event, JackpotPayout) and event.index == i and event.money_won == 150000
                    assert event.reply() == b'{"payout":{"success":true,"errorMessage":""}}'
                elif step == 1:
                    event = receiver.parse(balance)
                    assert isinstance(event, BalanceQuery)
                    want = b'{"playerBalance":{"money":%d,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}' % (n * 10000 + i)
                    assert event.reply_balance(n * 10000 + i) == want
                else:
                    field = list(invalid)[step - 2]
                    try:
                        receiver.handle(TOKEN, "127.0.0.1", invalid[field])
                    except ValidationError as error:
                        # The last error is the calling thread's: another thread's failure never shows.
                        assert error.field == field, (error.field, field)
                        # A balance query refused for its fields is answered 500, the others 200.
                        want_http = 500 if field.startswith("getPlayerBalance.") else 200
                        assert error.http_status == want_http, (error.http_status, field)
                        assert error.response_body and field.encode() in error.response_body
                    else:
                        raise AssertionError("an invalid body was accepted")

        run_in_threads(work)


class SharedClientTest(unittest.TestCase):
    sandbox: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sandbox.stop()

    def test_calls_from_many_threads(self) -> None:
        with Client(self.sandbox.base_url, TOKEN, ca_file=self.sandbox.ca_file) as client:

            def work(n: int) -> None:
                for i in range(15):
                    game_id = 1001 + (n + i) % 7
                    games = client.get_games("de-DE" if i % 2 else "en-US", game_id)
                    assert [g.game_id for g in games] == [game_id]
                    assert client.call("echo", {"thread": n, "i": i}) == {"echo": {"action": "echo", "thread": n, "i": i}}

            run_in_threads(work)

    def test_close_waits_for_calls_in_progress(self) -> None:
        client = Client(self.sandbox.base_url + "/fault/slow/400", TOKEN, ca_file=self.sandbox.ca_file, retries=0)
        started = threading.Barrier(THREADS + 1)
        results: list[object] = []

        def work(n: int) -> None:
            started.wait()
            try:
                results.append(len(client.get_games("en-US", 1001)))
            except ConfigurationError as error:  # close() came first: refused, never a crash
                results.append(error.field)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        started.wait()
        wait_for(lambda: client._active == THREADS, what="every call in flight")
        begin = time.monotonic()
        client.close()
        waited = time.monotonic() - begin
        for thread in threads:
            thread.join()
        self.assertEqual(results.count(1), THREADS, results)  # every call in flight completed
        self.assertGreater(waited, 0.05)  # close() waited for them (each takes 400 ms)
        with self.assertRaises(ConfigurationError):
            client.get_games("en-US")


if __name__ == "__main__":
    unittest.main()
