#!/usr/bin/env python3
"""An HTTP server on loopback that runs one CGI program (RFC 3875) per request.

    cgi_gateway.py HOST:PORT PROGRAM [--ready-file FILE] [--stats]

Python's own CGI handler passes only a few request headers; this one passes every header as
HTTP_<NAME>, as web servers do, so that X-Service-Token reaches the program as
HTTP_X_SERVICE_TOKEN. SLOTPARTNER_* variables of its own environment are passed on. Port 0 picks
a free port; the bound http:// URL is printed and, with --ready-file, written to FILE. With
--stats, on SIGTERM or SIGINT it prints to stderr how many requests it ran and how many programs
ran at most at once.
Requests are served concurrently: one thread per connection (ThreadingHTTPServer), each running
its own CGI process, so K client connections keep K worker processes busy at once, as a web
server's workers would. Accepted sockets get TCP_NODELAY and each response leaves in one write:
with Nagle's algorithm against the client's delayed ACK, small keep-alive responses would wait
about 40 ms each.
Standard library only; for the demo and the tests, never for production.
"""
import http.server
import ipaddress
import os
import socket
import signal
import subprocess
import sys
import threading


def cgi_environment(handler, body_length):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GATEWAY_INTERFACE": "CGI/1.1",
        "SERVER_PROTOCOL": handler.request_version,
        "SERVER_SOFTWARE": "slotpartner-cgi-gateway",
        "SERVER_NAME": handler.server.server_address[0],
        "SERVER_PORT": str(handler.server.server_address[1]),
        "REQUEST_METHOD": handler.command,
        "SCRIPT_NAME": "",
        "PATH_INFO": handler.path.split("?", 1)[0],
        "QUERY_STRING": handler.path.split("?", 1)[1] if "?" in handler.path else "",
        "REMOTE_ADDR": handler.client_address[0],
        "CONTENT_LENGTH": str(body_length) if body_length else "",
        "CONTENT_TYPE": handler.headers.get("Content-Type", ""),
    }
    for name, value in handler.headers.items():
        if name.lower() not in ("content-length", "content-type"):
            env["HTTP_" + name.upper().replace("-", "_")] = value
    for name, value in os.environ.items():
        if name.startswith(("SLOTPARTNER_", "ASAN_", "UBSAN_")):
            env[name] = value
    return env


class Stats:
    """Requests run, and the most CGI processes running at once."""
    lock = threading.Lock()
    running = 0
    most = 0
    requests = 0

    @classmethod
    def started(cls):
        with cls.lock:
            cls.running += 1
            cls.requests += 1
            cls.most = max(cls.most, cls.running)

    @classmethod
    def ended(cls):
        with cls.lock:
            cls.running -= 1


class Gateway(http.server.BaseHTTPRequestHandler):
    program = ""
    protocol_version = "HTTP/1.1"
    # A buffered wfile: head and body go out together when the server flushes after the request.
    wbufsize = 1 << 16

    def setup(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle_expect_100(self):
        ok = super().handle_expect_100()
        self.wfile.flush()  # the client waits for the interim answer before sending the body
        return ok

    def run_program(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        Stats.started()
        try:
            done = subprocess.run([self.program], input=body, env=cgi_environment(self, length),
                                  capture_output=True, timeout=30, check=False)
        finally:
            Stats.ended()
        sys.stderr.buffer.write(done.stderr)
        sys.stderr.flush()
        head, _, payload = done.stdout.replace(b"\r\n", b"\n").partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 or not head:
            status, headers, payload = 502, [("Content-Type", "text/plain")], b"CGI program failed\n"
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = run_program

    def log_message(self, *args):  # the program's own log lines are enough
        pass


def main(argv):
    usage = "usage: cgi_gateway.py HOST:PORT PROGRAM [--ready-file FILE] [--stats]"
    if len(argv) < 3:
        sys.exit(usage)
    options, ready_file, stats = argv[3:], None, False
    while options:
        if options[0] == "--ready-file" and len(options) >= 2:
            ready_file, options = options[1], options[2:]
        elif options[0] == "--stats":
            stats, options = True, options[1:]
        else:
            sys.exit(usage)
    host, _, port = argv[1].rpartition(":")
    if not ipaddress.ip_address(host).is_loopback:
        sys.exit("cgi_gateway.py listens on loopback only")
    Gateway.program = os.path.abspath(argv[2])
    server = http.server.ThreadingHTTPServer((host, int(port)), Gateway)
    url = "http://%s:%d" % server.server_address[:2]
    if ready_file:
        with open(ready_file + ".tmp", "w") as ready:
            ready.write(url)
        os.replace(ready_file + ".tmp", ready_file)
    print("listening " + url, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if stats:
            sys.stderr.write("cgi_gateway: %d requests, peak concurrency %d programs\n" % (Stats.requests, Stats.most))
            sys.stderr.flush()


if __name__ == "__main__":
    main(sys.argv)
