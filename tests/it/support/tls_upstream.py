"""An HTTPS upstream for the credential tests (tests/it/credentials.rs).

usage: tls_upstream.py CERT KEY PORTFILE LOG EXPECTED [ROOT]

Serves HTTP/1.1 over TLS on 127.0.0.1 (a port of its own, written to
PORTFILE when it listens). Every request is appended to LOG as one JSON
line (method, path, headers). EXPECTED is a file holding the one
Authorization value that counts as authorized.

- /api/...: 200 with {"authorized": BOOL, "path": PATH}, and the request's
  Authorization echoed in the X-Echo response field (as some APIs echo
  tokens); with ?redirect=URL, 302 to URL instead.
- /git/...: git's smart HTTP (git http-backend, ROOT/git the project root),
  401 without the expected Authorization.
- /echo: a raw answer that echoes the Authorization everywhere a header
  can hold it: a 103 interim head (reason phrase and a field), the final
  head's reason phrase and a field, a chunk extension, a trailer field.
- /split: a bodiless 200, then, 50 ms later, a second 200 head nobody
  asked for, whose 400-byte body would swallow the next answer's head
  (a response split through an echoed header, its tail arriving late).
- /early: 401 at once, the request's body left unread; /paste: its body
  echoed (a smuggled request would reach it).
- /simple/... and /files/...: files under ROOT, 401 without it.

With TLS_UPSTREAM_PLAIN=1 in its environment it speaks plain HTTP.
"""

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.parse

CERT, KEY, PORTFILE, LOG, EXPECTED = sys.argv[1:6]
ROOT = sys.argv[6] if len(sys.argv) > 6 else None
with open(EXPECTED) as f:
    EXPECTED_AUTH = f.read().strip()
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, body, ctype="application/octet-stream", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        if self.path == "/early":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.body()
        with LOCK, open(LOG, "a") as log:
            log.write(json.dumps({"method": self.command, "path": self.path,
                                  "headers": dict(self.headers.items())}) + "\n")
        auth = self.headers.get("Authorization", "")
        authorized = auth == EXPECTED_AUTH
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/split":
            import time
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            self.wfile.flush()
            time.sleep(0.05)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n")
            self.wfile.flush()
            return
        if url.path == "/paste":
            return self.send(200, b"PASTED:" + body, "text/plain")
        if url.path == "/echo":
            a = auth.encode()
            self.wfile.write(b"HTTP/1.1 103 " + a + b"\r\nX-Early: " + a + b"\r\n\r\n"
                             b"HTTP/1.1 200 " + a + b"\r\nTransfer-Encoding: chunked\r\n"
                             b"X-A: " + a + b"\r\n\r\n5;e=" + a + b"\r\nhello\r\n0\r\n"
                             b"X-Trailer: " + a + b"\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        if url.path.startswith("/api/"):
            q = urllib.parse.parse_qs(url.query)
            if "redirect" in q:
                return self.send(302, b"", extra=[("Location", q["redirect"][0])])
            out = json.dumps({"authorized": authorized, "path": url.path}).encode()
            return self.send(200, out, "application/json", [("X-Echo", auth)])
        if not authorized:
            return self.send(401, b"no\n", "text/plain",
                             [("WWW-Authenticate", 'Basic realm="test"')])
        if url.path.startswith("/git/"):
            return self.git(url, body)
        path = os.path.realpath(os.path.join(ROOT, url.path.lstrip("/")))
        if not path.startswith(os.path.realpath(ROOT) + "/"):
            return self.send(404, b"")
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path):
            return self.send(404, b"")
        with open(path, "rb") as f:
            data = f.read()
        ctype = "text/html" if path.endswith(".html") else "application/octet-stream"
        return self.send(200, data, ctype)

    def git(self, url, body):
        env = dict(os.environ, GIT_PROJECT_ROOT=os.path.join(ROOT, "git"),
                   GIT_HTTP_EXPORT_ALL="1", REMOTE_USER="test",
                   PATH_INFO=url.path[len("/git"):], QUERY_STRING=url.query,
                   REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)))
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True).stdout
        head, _, data = out.partition(b"\r\n\r\n")
        status, extra, ctype = 200, [], "application/octet-stream"
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k.lower() == "content-type":
                ctype = v.strip()
            elif k:
                extra.append((k, v.strip()))
        return self.send(status, data, ctype, extra)

    do_GET = do_POST = do_HEAD = do_PUT = do_TRACE = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if os.environ.get("TLS_UPSTREAM_PLAIN") != "1":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(CERT, KEY)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
