"""One worker process of a pre-forked server for examples/callback_wsgi.py.

    python3 wsgi_worker.py FD

Serves the example's ``application`` (configured from the environment: SLOTPARTNER_TOKEN,
SLOTPARTNER_JOURNAL, SLOTPARTNER_LEDGER...) with a threading wsgiref server on the listening
socket it inherited as file descriptor FD, as the worker processes of a web server (gunicorn,
uwsgi) share one socket: whichever worker is free accepts the next connection. ``WsgiWorkers`` in
test_recovery.py starts several of them. Prints ``ready PID`` once it serves, and runs until
terminated.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "callback_wsgi.py"


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def main(argv: list[str]) -> int:
    spec = importlib.util.spec_from_file_location("callback_wsgi", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    listener = socket.socket(fileno=int(argv[1]))
    # Non-blocking: every worker wakes for a new connection, one accepts it, the others go back
    # to waiting (socketserver ignores their failed accept) instead of blocking in accept().
    listener.setblocking(False)
    server = ThreadingWSGIServer(listener.getsockname(), QuietHandler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.server_name, server.server_port = listener.getsockname()[:2]
    server.setup_environ()
    server.set_app(example.application)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"ready {os.getpid()}", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
