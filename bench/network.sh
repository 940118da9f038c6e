#!/usr/bin/env bash
# Benchmark of the network policies: what the gate adds to each connect,
# and what the allow-list proxy costs a bulk transfer, beside the same
# work done directly, measured in the same run. Prints a markdown table;
# no pass/fail. Loopback traffic only.
#
#   bash bench/network.sh                     # builds the release binary
#   DSH_EXEC_BIN=/path/to/dsh-exec bash bench/network.sh
#   NET_BENCH_CONNECTS=2000 NET_BENCH_ROUNDS=3 NET_BENCH_MIB=1024 NET_BENCH_REQUESTS=300 bash bench/network.sh
#
# The credential rows (docs/credentials.md) time HTTPS through the proxy to
# a local TLS upstream with a CA of its own (made with openssl): small
# requests on one kept-alive client connection, and a MIB MiB download,
# once through a plain CONNECT tunnel (TLS end to end) and once with an
# --inject rule (TLS ended at the proxy, the credential put in, a new
# upstream connection per request with the session resumed). Targets:
# +2 ms per request at most, and 1.5x the tunnel's wall time for the
# download.
#
# The client and the upstream are the same small python3 programs in every
# row (1 MiB writes, sendall/recv_into), so rows differ only by the path the
# bytes take: a direct loopback connection, or a CONNECT tunnel through the
# run's proxy (two more socket hops and one copy per direction in
# dsh-exec). Rows are run round-robin, and the median of the rounds is
# shown.
set -euo pipefail

CONNECTS=${NET_BENCH_CONNECTS:-2000}
REQUESTS=${NET_BENCH_REQUESTS:-300}
ROUNDS=${NET_BENCH_ROUNDS:-3}
MIB=${NET_BENCH_MIB:-1024}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-netbench.XXXXXX")
SERVER_PID=
TLS_PID=
trap '[[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null; [[ -n $TLS_PID ]] && kill "$TLS_PID" 2>/dev/null; rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP

if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
BIN=$(realpath "$BIN")

# The upstream: a sink that reads each connection to its end and answers
# with the byte count (one thread per connection), and a listener that
# accepts and closes, for the connect figures.
cat >"$BENCH_TMP/upstream.py" <<'EOF'
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(1024)
# A second listener for the connect figures: accept and close, nothing else.
k = socket.socket(); k.bind(("127.0.0.1", 0)); k.listen(1024)
def closer():
    while True:
        k.accept()[0].close()
threading.Thread(target=closer, daemon=True).start()
print(s.getsockname()[1], k.getsockname()[1], flush=True)
def serve(c):
    buf = bytearray(1 << 20); n = 0
    while (k := c.recv_into(buf)):
        n += k
    c.sendall(b"%d\n" % n); c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF

# The client: `bulk direct|proxy PORT MIB` sends MIB MiB and prints the
# seconds; `connects PORT N` makes N connections (connect, close) and
# prints the microseconds per connect.
cat >"$BENCH_TMP/client.py" <<'EOF'
import base64, os, socket, sys, time, urllib.parse
what, port = sys.argv[1], int(sys.argv[2])
def open_conn(via):
    if via == "direct":
        return socket.create_connection(("127.0.0.1", port))
    u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode())
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"CONNECT localhost:%d HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (port, auth))
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return s
if what == "connects":
    n = int(sys.argv[3]); t = time.perf_counter()
    for _ in range(n):
        socket.create_connection(("127.0.0.1", port)).close()
    print("%.1f" % ((time.perf_counter() - t) / n * 1e6))
else:
    mib = int(sys.argv[3]); chunk = b"\0" * (1 << 20)
    t = time.perf_counter(); s = open_conn(what)
    for _ in range(mib):
        s.sendall(chunk)
    s.shutdown(socket.SHUT_WR)
    got = int(s.makefile().readline())
    assert got == mib << 20, got
    print("%.3f" % (time.perf_counter() - t))
EOF

# The TLS upstream of the credential rows: HTTP/1.1 kept alive; /small
# answers 2 bytes, /big MIB MiB (one 1 MiB buffer sent again and again).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$BENCH_TMP/ca.key" -out "$BENCH_TMP/ca.pem" -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$BENCH_TMP/leaf.key" -out "$BENCH_TMP/leaf.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$BENCH_TMP/ext"
openssl x509 -req -in "$BENCH_TMP/leaf.csr" -CA "$BENCH_TMP/ca.pem" -CAkey "$BENCH_TMP/ca.key" \
  -CAcreateserial -days 2 -extfile "$BENCH_TMP/ext" -out "$BENCH_TMP/leaf.pem" 2>/dev/null
cat >"$BENCH_TMP/tls_upstream.py" <<'EOF'
import http.server, ssl, sys
MIB = int(sys.argv[2]); CHUNK = b"\0" * (1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as servers do: no 40 ms wait per answer
    def log_message(self, *a): pass
    def do_GET(self):
        big = self.path == "/big"
        self.send_response(200)
        self.send_header("Content-Length", str(MIB << 20 if big else 2))
        self.end_headers()
        if big:
            for _ in range(MIB):
                self.wfile.write(CHUNK)
        else:
            self.wfile.write(b"ok")
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1] + "/leaf.pem", sys.argv[1] + "/leaf.key")
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
# The TLS client: `small PORT N CAFILE` makes N GETs on one connection
# through the proxy and prints ms per request (after a first one, not
# counted: the handshakes); `big PORT MIB CAFILE` downloads and prints
# seconds.
cat >"$BENCH_TMP/tls_client.py" <<'EOF'
import base64, http.client, os, ssl, sys, time, urllib.parse
what, port, n, ca = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
ctx = ssl.create_default_context(cafile=ca)
c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx)
c.set_tunnel("localhost", port, headers={"Proxy-Authorization": "Basic " + auth})
def get(path):
    c.request("GET", path, headers={"Authorization": "Bearer " + os.environ.get("K_TOKEN", "none")})
    r = c.getresponse(); buf = bytearray(1 << 20); got = 0
    while (k := r.readinto(buf)):
        got += k
    return got
get("/small")
t = time.perf_counter()
if what == "small":
    for _ in range(n):
        assert get("/small") == 2
    print("%.3f" % ((time.perf_counter() - t) / n * 1e3))
else:
    assert get("/big") == n << 20
    print("%.3f" % (time.perf_counter() - t))
EOF
python3 -u "$BENCH_TMP/tls_upstream.py" "$BENCH_TMP" "$MIB" >"$BENCH_TMP/tls_port" &
TLS_PID=$!
for _ in $(seq 100); do [[ -s $BENCH_TMP/tls_port ]] && break; sleep 0.05; done
read -r TPORT <"$BENCH_TMP/tls_port"

python3 -u "$BENCH_TMP/upstream.py" >"$BENCH_TMP/port" &
SERVER_PID=$!
for _ in $(seq 100); do [[ -s $BENCH_TMP/port ]] && break; sleep 0.05; done
read -r PORT CPORT <"$BENCH_TMP/port"

# One figure of a row, run through dsh-exec with ARGS (a bash array name).
figure() {
  local -n args=$1
  shift
  local script=$BENCH_TMP/client.py
  if [[ $1 == *.py ]]; then script=$1; shift; fi
  "$BIN" "${args[@]}" -- python3 "$script" "$@" | head -n1
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

unconfined=()
loopback=(--network loopback)
confined=(-s workspace-write --network loopback)
allowlist=(--network "allow=localhost:$PORT")
tunnel=(--network "allow=localhost:$TPORT")
inject=(--network "allow=localhost:$TPORT" --credential K=env:BENCH_TOKEN
  --inject "localhost:$TPORT=bearer:K" --credential-env K=K_TOKEN --upstream-ca "$BENCH_TMP/ca.pem")
export BENCH_TOKEN=bench-secret

declare -A got
for _ in $(seq "$ROUNDS"); do
  got[c_unconfined]+="$(figure unconfined connects "$CPORT" "$CONNECTS") "
  got[c_loopback]+="$(figure loopback connects "$CPORT" "$CONNECTS") "
  got[c_confined]+="$(figure confined connects "$CPORT" "$CONNECTS") "
  got[b_direct]+="$(figure unconfined direct "$PORT" "$MIB") "
  got[b_loopback]+="$(figure loopback direct "$PORT" "$MIB") "
  got[b_proxy]+="$(figure allowlist proxy "$PORT" "$MIB") "
  got[r_tunnel]+="$(figure tunnel "$BENCH_TMP/tls_client.py" small "$TPORT" "$REQUESTS" "$BENCH_TMP/ca.pem") "
  got[r_inject]+="$("$BIN" "${inject[@]}" -- bash -c 'python3 "$1" small "$2" "$3" "$SSL_CERT_FILE"' _ "$BENCH_TMP/tls_client.py" "$TPORT" "$REQUESTS" | head -n1) "
  got[d_tunnel]+="$(figure tunnel "$BENCH_TMP/tls_client.py" big "$TPORT" "$MIB" "$BENCH_TMP/ca.pem") "
  got[d_inject]+="$("$BIN" "${inject[@]}" -- bash -c 'python3 "$1" big "$2" "$3" "$SSL_CERT_FILE"' _ "$BENCH_TMP/tls_client.py" "$TPORT" "$MIB" | head -n1) "
done
med() { tr ' ' '\n' <<<"${got[$1]}" | grep . | median; }

echo "# dsh-exec network benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), kernel: $(uname -r), nproc: $(nproc)"
echo "- binary: $BIN; rounds: $ROUNDS (median shown); connects per round: $CONNECTS; bulk: $MIB MiB"
echo
echo "| measure | run as | figure |"
echo "|---|---|---|"
printf '| connect + close, µs each | unconfined | %s |\n' "$(med c_unconfined)"
printf '| connect + close, µs each | --network loopback | %s |\n' "$(med c_loopback)"
printf '| connect + close, µs each | -s workspace-write --network loopback | %s |\n' "$(med c_confined)"
printf '| %d MiB upload, seconds | direct, unconfined | %s |\n' "$MIB" "$(med b_direct)"
printf '| %d MiB upload, seconds | direct, --network loopback | %s |\n' "$MIB" "$(med b_loopback)"
printf '| %d MiB upload, seconds | CONNECT tunnel, --network allow= | %s |\n' "$MIB" "$(med b_proxy)"
printf '| HTTPS GET on a kept-alive connection, ms each | CONNECT tunnel, --network allow= | %s |\n' "$(med r_tunnel)"
printf '| HTTPS GET on a kept-alive connection, ms each | --inject (TLS ended at the proxy) | %s |\n' "$(med r_inject)"
printf '| %d MiB HTTPS download, seconds | CONNECT tunnel, --network allow= | %s |\n' "$MIB" "$(med d_tunnel)"
printf '| %d MiB HTTPS download, seconds | --inject (TLS ended at the proxy) | %s |\n' "$MIB" "$(med d_inject)"
awk -v t="$(med r_tunnel)" -v i="$(med r_inject)" -v dt="$(med d_tunnel)" -v di="$(med d_inject)" \
  'BEGIN { printf "\n--inject adds %.2f ms per request (target: at most 2); download --inject / tunnel: %.2fx (target: at most 1.5x)\n", i - t, di / dt }'
awk -v d="$(med b_direct)" -v p="$(med b_proxy)" -v c="$(med c_unconfined)" -v g="$(med c_loopback)" \
  'BEGIN { printf "\ntunnel / direct wall time: %.2fx; the gate adds %.1f µs per connect\n", p / d, g - c }'
