"""Client against slotpartner-sandbox serve (HTTPS on loopback, started by the test)."""

from __future__ import annotations

import copy
import unittest

from support import OTHER_TOKEN, TOKEN, Sandbox

from slotpartner import Client, ConfigurationError, Game, ServiceError, TransportError

sandbox: Sandbox


def setUpModule() -> None:
    global sandbox
    sandbox = Sandbox()


def tearDownModule() -> None:
    sandbox.stop()


class GetGamesTest(unittest.TestCase):
    client: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = Client(sandbox.base_url, TOKEN, ca_file=sandbox.ca_file)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()

    def test_all_games(self) -> None:
        games = self.client.get_games("en-US")
        self.assertEqual([g.game_id for g in games], list(range(1001, 1008)))
        first = games[0]
        self.assertIsInstance(first, Game)
        self.assertEqual(first.name, "Pharaoh's Fortune")
        self.assertEqual(
            first.rules_json,
            ['{"key":"paylines","value":"20"}', '{"key":"reels","value":"5x3"}', '{"key":"rtp","value":"96.10"}'],
        )
        # Native values, decoded once on first read.
        self.assertEqual(
            first.rules,
            [{"key": "paylines", "value": "20"}, {"key": "reels", "value": "5x3"}, {"key": "rtp", "value": "96.10"}],
        )
        self.assertIs(first.rules, first.rules)
        self.assertEqual(first.game_type, "SlotMachine")
        self.assertEqual((first.min_players, first.max_players), (0, 0))
        self.assertIs(first.supports_tournament, True)
        self.assertEqual(first.categories, ["egypt", "classic", "featured"])
        self.assertEqual(first.categories_json, ['"egypt"', '"classic"', '"featured"'])
        self.assertEqual(first.image_square, "https://cdn.sandbox.invalid/games/pharaohs-fortune/square.png")
        self.assertEqual(first.image_background, "https://cdn.sandbox.invalid/games/pharaohs-fortune/background.jpg")
        self.assertEqual(first.image_logo, "https://cdn.sandbox.invalid/games/pharaohs-fortune/logo.png")
        self.assertEqual(
            first.description_short, 'Five reels, twenty paylines and the "Eye of Horus" wild that expands on every win.'
        )
        self.assertTrue(first.description_long.startswith("<p>Descend into the tomb"))
        self.assertEqual(first.extra, {})
        by_id = {g.game_id: g for g in games}
        self.assertIsNone(by_id[1003].categories)  # "categories": null
        self.assertIsNone(by_id[1003].categories_json)
        self.assertEqual(by_id[1002].rules, [])
        self.assertEqual(by_id[1005].rules, [])
        self.assertIn("€250,000", by_id[1007].description_short)
        self.assertIs(by_id[1002].supports_tournament, False)

    def test_one_game_in_two_locales(self) -> None:
        english = self.client.get_games("en-US", 1003)
        german = self.client.get_games("de_DE", 1003)  # sent as de-DE
        self.assertEqual([g.game_id for g in english], [1003])
        self.assertEqual([g.game_id for g in german], [1003])
        self.assertEqual(english[0].description_short, "Find the four-leaf clover and let the leprechaun double your win.")
        self.assertTrue(german[0].description_short.startswith("Finden Sie das vierblättrige Kleeblatt"))
        self.assertIn("Höchstgewinn", german[0].description_long)
        self.assertEqual(english[0].name, german[0].name)
        self.assertIsNone(german[0].categories)

    def test_unknown_game(self) -> None:
        self.assertEqual(self.client.get_games("en-US", 99999), [])

    def test_bad_arguments(self) -> None:
        with self.assertRaises(ConfigurationError) as caught:
            self.client.get_games("english")
        self.assertEqual(caught.exception.field, "locale")
        with self.assertRaises(ConfigurationError) as caught:
            self.client.get_games("en-US", -1)
        self.assertEqual(caught.exception.field, "game_id")

    def test_echo(self) -> None:
        params = {"gameId": 7, "nested": {"list": [1, "é", None, True]}, "text": 'quote " and \\'}
        self.assertEqual(self.client.call("echo", params), {"echo": {"action": "echo", **params}})
        self.assertEqual(self.client.call("echo"), {"echo": {"action": "echo"}})

    def test_call_errors(self) -> None:
        with self.assertRaises(ServiceError) as caught:
            self.client.call("noSuchAction", {})
        self.assertEqual(caught.exception.status, 20)
        self.assertIn("HTTP 400", caught.exception.message)
        with self.assertRaises(ConfigurationError) as caught:
            self.client.call("echo", {"action": "x"})
        self.assertEqual(caught.exception.field, "params")
        with self.assertRaises(ConfigurationError) as caught:
            self.client.call("echo", {"x": float("nan")})
        self.assertEqual(caught.exception.field, "params")


class FailuresTest(unittest.TestCase):
    def test_wrong_token(self) -> None:
        with Client(sandbox.base_url, OTHER_TOKEN, ca_file=sandbox.ca_file) as client:
            with self.assertRaises(ServiceError) as caught:
                client.get_games("en-US")
        error = caught.exception
        self.assertEqual((error.status, error.status_name), (20, "SP_ERR_HTTP_STATUS"))
        self.assertIn("HTTP 401", error.message)
        self.assertEqual(error.field, "getGames")

    def test_untrusted_certificate(self) -> None:
        with Client(sandbox.base_url, TOKEN, retries=0) as client, self.assertRaises(TransportError) as caught:
            client.get_games("en-US")
        self.assertEqual(caught.exception.status_name, "SP_ERR_TLS")

    def test_trust_settings(self) -> None:
        with Client(sandbox.base_url, TOKEN, ca_pem=sandbox.ca_pem, trust_roots="extra-only") as client:
            self.assertEqual(len(client.get_games("en-US")), 7)
        with Client(sandbox.base_url, TOKEN, ca_pem=sandbox.ca_pem.encode(), trust_roots="system") as client:
            self.assertEqual(len(client.get_games("en-US", 1001)), 1)

    def test_service_faults(self) -> None:
        url = sandbox.base_url
        with Client(url + "/fault/status/503", TOKEN, ca_file=sandbox.ca_file, retries=1, retry_backoff=0.01) as c:
            with self.assertRaises(ServiceError) as caught:
                c.get_games("en-US")
            self.assertIn("HTTP 503", caught.exception.message)
        with Client(url + "/fault/malformed", TOKEN, ca_file=sandbox.ca_file) as c:
            with self.assertRaises(ServiceError) as caught:
                c.get_games("en-US")
            self.assertEqual((caught.exception.status, caught.exception.field), (21, "getGames.games[0].gameId"))
        with Client(url + "/fault/slow/5000", TOKEN, ca_file=sandbox.ca_file, timeout=0.3, retries=0) as c:
            with self.assertRaises(TransportError) as caught:
                c.get_games("en-US")
            self.assertEqual(caught.exception.status_name, "SP_ERR_TIMEOUT")
        with Client(url + "/fault/big", TOKEN, ca_file=sandbox.ca_file, max_response_bytes=4096) as c:
            with self.assertRaises(TransportError) as caught:
                c.get_games("en-US")
            self.assertEqual(caught.exception.status_name, "SP_ERR_RESPONSE_TOO_LARGE")
        with Client("https://127.0.0.1:1", TOKEN, ca_file=sandbox.ca_file, retries=0) as c:
            with self.assertRaises(TransportError) as caught:
                c.get_games("en-US")
            self.assertEqual(caught.exception.status_name, "SP_ERR_CONNECT")

    def test_configuration_refused(self) -> None:
        url = sandbox.base_url
        cases = [
            (dict(base_url=url.replace("https:", "http:")), "base_url"),
            (dict(token="not-a-uuid"), "token"),
            (dict(ca_file="/nonexistent/ca.pem"), "ca_file"),
            (dict(ca_pem="not a certificate"), "ca_pem"),
            (dict(proxy="ftp://proxy"), "proxy"),
            (dict(retries=11), "retries"),
            (dict(retries=-1), "retries"),
            (dict(max_response_bytes=10), "max_response_bytes"),
            (dict(timeout=0), "timeout"),
            (dict(connect_timeout=float("inf")), "connect_timeout"),
            (dict(trust_roots="everything"), "trust_roots"),
        ]
        for settings, field in cases:
            arguments = dict(base_url=url, token=TOKEN)
            arguments.update(settings)
            with self.assertRaises(ConfigurationError, msg=repr(settings)) as caught:
                Client(**arguments)  # type: ignore[arg-type]
            self.assertEqual(caught.exception.field, field, repr(settings))

    def test_closed_client(self) -> None:
        client = Client(sandbox.base_url, TOKEN, ca_file=sandbox.ca_file)
        self.assertIs(copy.copy(client), client)  # shared, never a second owner
        client.close()
        client.close()
        with self.assertRaises(ConfigurationError) as caught:
            client.get_games("en-US")
        self.assertEqual(caught.exception.field, "client")


if __name__ == "__main__":
    unittest.main()
