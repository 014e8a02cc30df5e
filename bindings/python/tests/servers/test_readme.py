"""The README's endpoint snippets, run as written: each Python block of "The endpoint" opening
with ``# NAME.py`` is written to NAME.py in a temporary directory, on a SQLite journal with the
ledger's table beside it, and driven: the endpoint as a WSGI and as an ASGI application, the
Flask, Django and FastAPI snippets through their frameworks' test clients. Each must credit a
payout once (a repeat answered byte for byte), answer a balance query, and refuse a wrong token.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from typing import Any

from support import BINDING, TOKEN, fixture

README = BINDING / "README.md"
BLOCK = re.compile(r"```python\n# (\w+)\.py\b.*?\n(.*?)```", re.S)
LEDGER = ("CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, player TEXT NOT NULL,"
          " amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))")  # fmt: skip
OUTSIDE = ("import json, sqlite3, sys; db = sqlite3.connect(sys.argv[1]); print(json.dumps(db.execute(sys.argv[2]).fetchall()));"
           " db.commit()")
PAYOUT = b'{"payout":{"success":true,"errorMessage":""}}'


def snippets() -> dict[str, str]:
    return {name: f"# {name}.py\n{code}" for name, code in BLOCK.findall(README.read_text())}


class ReadmeSnippetsTest(unittest.TestCase):
    folder: tempfile.TemporaryDirectory[str]
    db: str

    @classmethod
    def setUpClass(cls) -> None:
        import slotpartner

        cls.folder = tempfile.TemporaryDirectory(prefix="sp-readme-")
        cls.db = f"{cls.folder.name}/journal.db"
        slotpartner.Journal(f"sqlite:{cls.db}").close()  # the journal first: it wants a file of its own
        cls.outside(LEDGER)
        found = snippets()
        assert {"endpoint", "endpoint_asgi", "flask_app", "django_views", "fastapi_app"} <= set(found), sorted(found)
        for name, code in found.items():
            with open(f"{cls.folder.name}/{name}.py", "w", encoding="utf-8") as f:
                f.write(code)
        os.environ.update(SLOTPARTNER_TOKEN=TOKEN, SLOTPARTNER_SOURCES="any", SLOTPARTNER_JOURNAL=f"sqlite:{cls.db}")
        sys.path.insert(0, cls.folder.name)

    @classmethod
    def tearDownClass(cls) -> None:
        sys.path.remove(cls.folder.name)
        for name in ("endpoint", "endpoint_asgi", "flask_app", "django_views", "fastapi_app"):
            sys.modules.pop(name, None)
        for name in ("SLOTPARTNER_TOKEN", "SLOTPARTNER_SOURCES", "SLOTPARTNER_JOURNAL"):
            os.environ.pop(name, None)
        cls.folder.cleanup()

    @classmethod
    def outside(cls, sql: str) -> list[Any]:
        """``sql`` on the journal's file from another process (not a second SQLite in this one)."""
        done = subprocess.run([sys.executable, "-c", OUTSIDE, cls.db, sql], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        rows: list[Any] = json.loads(done.stdout)
        return rows

    def credited(self, transaction_id: int) -> list[Any]:
        return self.outside(f"SELECT kind, amount FROM credits WHERE transaction_id = {transaction_id}")

    def check(self, post: Any, transaction_id: int) -> None:
        """``post(body, token)`` -> (status, body): a payout credited once, its repeat answered
        alike, a balance query, a wrong token."""
        body = fixture("payout").replace(b'"transactionId":900002', b'"transactionId":%d' % transaction_id)
        self.assertEqual(post(body, TOKEN), (200, PAYOUT))
        self.assertEqual(post(body, TOKEN), (200, PAYOUT))
        self.assertEqual(self.credited(transaction_id), [["jackpotPayout", 150000]])
        status, answer = post(fixture("balance"), TOKEN)
        self.assertEqual((status, json.loads(answer)["playerBalance"]["money"]), (200, 100000))
        self.assertEqual(post(body, "0b7e3c55-1a2b-4c3d-8e9f-000000000001")[0], 401)

    def test_the_endpoint_as_wsgi(self) -> None:
        app = importlib.import_module("endpoint").application

        def post(body: bytes, token: str) -> tuple[int, bytes]:
            seen: dict[str, str] = {}
            environ = {"REQUEST_METHOD": "POST", "REMOTE_ADDR": "127.0.0.1", "HTTP_X_SERVICE_TOKEN": token,
                       "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}  # fmt: skip
            answer = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
            return int(seen["status"].split()[0]), answer

        self.check(post, 1)

    def test_the_endpoint_as_asgi(self) -> None:
        app = importlib.import_module("endpoint_asgi").application

        def post(body: bytes, token: str) -> tuple[int, bytes]:
            sent: list[dict[str, Any]] = []
            incoming = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive() -> dict[str, Any]:
                return incoming.pop(0)

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            scope = {"type": "http", "method": "POST", "client": ("127.0.0.1", 4000),
                     "headers": [(b"x-service-token", token.encode())]}  # fmt: skip
            asyncio.run(app(scope, receive, send))
            return sent[0]["status"], sent[1]["body"]

        self.check(post, 2)

    def test_flask(self) -> None:
        client = importlib.import_module("flask_app").app.test_client()

        def post(body: bytes, token: str) -> tuple[int, bytes]:
            answer = client.post("/callback", data=body, headers={"X-Service-Token": token})
            return answer.status_code, answer.data

        self.check(post, 3)
        self.assertEqual(client.get("/callback").status_code, 405)

    def test_django(self) -> None:
        import django
        from django.conf import settings
        from django.urls import path

        views = importlib.import_module("django_views")
        urls = type(sys)("readme_django_urls")
        urls.urlpatterns = [path("callback", views.callback)]  # type: ignore[attr-defined]
        sys.modules["readme_django_urls"] = urls
        if not settings.configured:
            settings.configure(ROOT_URLCONF="readme_django_urls", ALLOWED_HOSTS=["testserver"], USE_TZ=True)
            django.setup()
        from django.test import Client

        client = Client()

        def post(body: bytes, token: str) -> tuple[int, bytes]:
            answer = client.post("/callback", data=body, content_type="application/json", HTTP_X_SERVICE_TOKEN=token)
            return answer.status_code, answer.content

        self.check(post, 4)

    def test_fastapi(self) -> None:
        from fastapi.testclient import TestClient

        with TestClient(importlib.import_module("fastapi_app").app) as client:

            def post(body: bytes, token: str) -> tuple[int, bytes]:
                answer = client.post("/callback", content=body, headers={"X-Service-Token": token})
                return answer.status_code, answer.content

            self.check(post, 5)


if __name__ == "__main__":
    unittest.main()
