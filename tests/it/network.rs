//! Network policies: `--network loopback` (the gate judges every address)
//! and `--network allow=HOSTS` (the run's proxy). Traffic goes only to
//! loopback, or to TEST-NET addresses inside a network namespace a test
//! made for itself (root only; skipped with the reason otherwise).
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// The sandbox modes a network policy is tried in: none (full-access) and
/// a confining one.
const MODES: [&[&str]; 2] = [&[], &["-s", "workspace-write"]];

/// A process the test started, killed and reaped when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `python3 -m http.server` on 127.0.0.1 serving `dir`, and its port.
fn http_server(dir: &Path) -> (Started, u16) {
    let mut child = Command::new("python3")
        .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 http.server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
    let port = line
        .split_whitespace()
        .nth(5)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (Started(child), port)
}

/// Whether this process may make network and mount namespaces (root with
/// CAP_SYS_ADMIN, and `unshare` and `ip` on PATH).
fn can_make_namespaces() -> bool {
    let tool = |name: &str| {
        Command::new(name)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    has_sys_admin() && tool("unshare") && tool("ip")
}

fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

#[test]
fn loopback_serves_and_fetches_a_server_started_inside_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello over loopback\n").unwrap();
    // python3 -u writes the line in pieces: wait for the port and what
    // follows it.
    // The log is a new file each run (removed after it): reading an
    // earlier run's before the redirection truncated it named a dead port.
    let script = "log=$(mktemp); python3 -u -m http.server 0 --bind 127.0.0.1 > \"$log\" 2>&1 &
        for i in $(seq 200); do
            port=$(sed -n 's/.* port \\([0-9][0-9]*\\) (.*/\\1/p' \"$log\" 2>/dev/null)
            [ -n \"$port\" ] && break; sleep 0.05
        done
        curl -sS http://127.0.0.1:$port/hello.txt
        kill %1; rm -f \"$log\"";
    for mode in MODES {
        Test::new()
            .arg("-C")
            .arg(dir.path())
            .args(["--network", "loopback"])
            .args(mode)
            .args(["--", script])
            .run()
            .expect_stdout("hello over loopback\n[exit code: 0]\n")
            .expect_status(0);
    }
}

#[test]
fn loopback_reaches_listeners_outside_the_run_over_ipv4_and_ipv6() {
    for mode in MODES {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = TcpListener::bind(addr) else {
                skip(&format!("{addr} cannot be bound here"));
                continue;
            };
            let port = listener.local_addr().unwrap().port();
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                s.write_all(b"from outside\n").unwrap();
            });
            let host = addr.rsplit_once(':').unwrap().0.trim_matches(['[', ']']);
            let script = format!(
                "python3 -c 'import socket; s = socket.create_connection((\"{host}\", {port})); \
                 print(s.recv(100).decode(), end=\"\")'"
            );
            Test::new()
                .args(["--network", "loopback"])
                .args(mode)
                .args(["--", &script])
                .run()
                .expect_stdout("from outside\n[exit code: 0]\n");
            server.join().unwrap();
        }
    }
}

/// Binds the unspecified addresses, sends from an unbound UDP socket, and
/// asks for raw and SCTP sockets: printed one per line.
const BINDS_AND_SOCKETS: &str = r#"
import socket
def show(what, f):
    try:
        print(what, f())
    except OSError as e:
        print(what, "errno", e.errno)
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen()
print("tcp4", s.getsockname()[0])
s6 = socket.socket(socket.AF_INET6); s6.bind(("::", 0)); s6.listen()
print("tcp6 dual-stack", s6.getsockname()[0])
o = socket.socket(socket.AF_INET6); o.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
o.bind(("::", 0)); print("tcp6 only", o.getsockname()[0])
l = socket.socket(); l.listen(); print("listen unbound", l.getsockname()[0])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", ("127.0.0.1", 9))
print("udp autobind", u.getsockname()[0])
show("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
show("sctp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))
show("bind 192.0.2.9", lambda: socket.socket().bind(("192.0.2.9", 0)))
show("join", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).setsockopt(
    socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton("239.1.2.3") + bytes(4)))
"#;

#[test]
fn loopback_narrows_wildcard_binds_and_refuses_raw_and_sctp_sockets() {
    for mode in MODES {
        let out = Test::new()
            .args(["--network", "loopback", "--json", "-e", "SCRIPT"])
            .args(mode)
            .args(["--", "python3 -c \"$SCRIPT\""])
            .env("SCRIPT", BINDS_AND_SOCKETS)
            .run();
        let v = out.json();
        assert_eq!(
            v["stdout"]["text"],
            "tcp4 127.0.0.1\ntcp6 dual-stack ::ffff:127.0.0.1\ntcp6 only ::1\n\
             listen unbound 127.0.0.1\nudp autobind 127.0.0.1\nraw errno 13\nsctp errno 13\n\
             bind 192.0.2.9 errno 13\njoin errno 1\n",
            "{mode:?}: {}",
            v["stderr"]["text"]
        );
        assert_eq!(v["sandbox"]["network"], "loopback");
        assert_eq!(v["sandbox"]["network_enforcement"], "gate");
        assert_eq!(v["sandbox"]["network_denied"], true);
        let denied: Vec<String> = v["sandbox"]["denials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d["op"].as_str().unwrap(),
                    d["path"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            denied,
            [
                "socket AF_INET SOCK_RAW",
                "socket AF_INET protocol 132",
                "bind 192.0.2.9:0"
            ]
        );
    }
}

/// A Python script run inside the test's network namespace, against the
/// listener on 192.0.2.2:PORT (TCP and UDP): each attack prints one line.
const ATTACKS: &str = r#"
import ctypes, os, socket, sys, threading
port = int(sys.argv[1]); sock_path = sys.argv[2] if len(sys.argv) > 2 else None
libc = ctypes.CDLL(None, use_errno=True)
def sin(ip, p):
    return socket.AF_INET.to_bytes(2, sys.byteorder) + p.to_bytes(2, "big") + socket.inet_aton(ip) + bytes(8)

# 1. A plain connect.
try:
    socket.create_connection(("192.0.2.2", port), timeout=5); print("connect: reached")
except OSError as e:
    print("connect: errno", e.errno)

# 2. A thread rewrites the address while connect waits on the gate.
local = socket.socket(); local.bind(("127.0.0.1", port)); local.listen(512)
def drain():
    while True:
        c, _ = local.accept(); c.close()
threading.Thread(target=drain, daemon=True).start()
buf = ctypes.create_string_buffer(sin("127.0.0.1", port), 16)
stop = False
def flip():
    a, b = sin("127.0.0.1", port), sin("192.0.2.2", port)
    while not stop:
        ctypes.memmove(buf, b, 16); ctypes.memmove(buf, a, 16)
t = threading.Thread(target=flip); t.start()
outside = 0
for i in range(300):
    s = socket.socket()
    if libc.connect(s.fileno(), buf, 16) == 0 and s.getpeername()[0] != "127.0.0.1":
        outside += 1
    s.close()
stop = True; t.join()
print("race: outside", outside)

# 3. sendmmsg: a loopback message, then one to 192.0.2.2.
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint32)]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
data = ctypes.create_string_buffer(b"LEAK", 4)
iov = iovec(ctypes.cast(data, ctypes.c_void_p), 4)
names = [ctypes.create_string_buffer(sin(ip, port), 16) for ip in ("127.0.0.1", "192.0.2.2")]
msgs = (mmsghdr * 2)()
for m, n in zip(msgs, names):
    m.hdr = msghdr(ctypes.cast(n, ctypes.c_void_p), 16, ctypes.cast(ctypes.pointer(iov), ctypes.c_void_p), 1, None, 0, 0)
r = libc.sendmmsg(u.fileno(), msgs, 2, 0)
print("sendmmsg:", "errno %d" % ctypes.get_errno() if r < 0 else "sent %d" % r)

# 4. A socket of the host, connected to 192.0.2.2, passed in by a server outside.
if sock_path:
    c = socket.socket(socket.AF_UNIX); c.connect(sock_path)
    msg, anc, flags, _ = c.recvmsg(16, socket.CMSG_SPACE(4))
    fds = [int.from_bytes(d[:4], sys.byteorder) for (l, k, d) in anc if k == socket.SCM_RIGHTS]
    for fd in fds:
        os.write(fd, b"LEAK")
    print("passed fd:", len(fds), "received;", msg.decode())
"#;

/// Runs in the test's network namespace: the listener that counts what
/// reaches 192.0.2.2, and a server on a Unix socket that passes a TCP
/// socket connected to it to whoever connects.
const NAMESPACE: &str = r#"
import os, socket, sys, threading, time
port, log, unix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
got = {"tcp": 0, "udp": 0, "bytes": b""}
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("192.0.2.2", port)); t.listen(64)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("192.0.2.2", port))
def tcp():
    while True:
        c, _ = t.accept(); got["tcp"] += 1
        c.settimeout(0.5)
        try:
            got["bytes"] += c.recv(100)
        except OSError:
            pass
def udp():
    while True:
        got["bytes"] += u.recv(100); got["udp"] += 1
def passer():
    s = socket.socket(socket.AF_UNIX); s.bind(unix); s.listen(4)
    while True:
        c, _ = s.accept()
        host = socket.create_connection(("192.0.2.2", port))
        try:
            c.sendmsg([b"here"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, host.fileno().to_bytes(4, sys.byteorder))])
        except OSError as e:
            c.sendall(b"sendmsg errno %d" % e.errno)
        c.close()
for f in (tcp, udp, passer):
    threading.Thread(target=f, daemon=True).start()
open(log + ".ready", "w").close()
while not os.path.exists(log + ".stop"):
    time.sleep(0.05)
time.sleep(0.6)
open(log, "w").write("tcp %d udp %d leaked %s\n" % (got["tcp"], got["udp"], b"LEAK" in got["bytes"]))
"#;

/// Runs `body` (bash) in a new network namespace with 192.0.2.2 on a veth
/// pair and the [`NAMESPACE`] listener on `port`; returns the listener's
/// count line and what `body` printed.
fn in_test_namespace(dir: &Path, port: u16, body: &str) -> (String, String) {
    let log = dir.join("listener.log");
    let unix = dir.join("passer.sock");
    std::fs::write(dir.join("ns.py"), NAMESPACE).unwrap();
    std::fs::write(dir.join("attacks.py"), ATTACKS).unwrap();
    let script = format!(
        "set -e
        ip link set lo up
        ip link add v0 type veth peer name v1
        ip addr add 192.0.2.1/24 dev v0; ip addr add 192.0.2.2/24 dev v1
        ip link set v0 up; ip link set v1 up
        python3 {ns} {port} {log} {unix} & listener=$!
        trap 'kill $listener 2>/dev/null; wait' EXIT
        for i in $(seq 200); do [ -e {log}.ready ] && break; sleep 0.05; done
        set +e
        {body}
        touch {log}.stop; wait $listener",
        ns = dir.join("ns.py").display(),
        log = log.display(),
        unix = unix.display(),
    );
    let out = Command::new("unshare")
        .args(["--net", "bash", "-c", &script])
        .env("DSH", bin())
        .env("ATTACKS", dir.join("attacks.py"))
        .env("SOCK", &unix)
        .env("PORT", port.to_string())
        .env("HOME", "/nonexistent-home")
        .current_dir(dir)
        .output()
        .unwrap();
    let counts = std::fs::read_to_string(&log).unwrap_or_default();
    (counts, stdout(&out) + &stderr(&out))
}

#[test]
fn a_listener_beyond_loopback_is_reachable_without_the_gate_and_not_with_it() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a network namespace");
    }
    let dir = tempfile::tempdir().unwrap();
    let port = 18461;
    // Unconfined: the listener is there, and a connection reaches it.
    let (counts, printed) = in_test_namespace(
        dir.path(),
        port,
        "$DSH -- 'exec 3<>/dev/tcp/192.0.2.2/'$PORT' && echo reached >&3 && echo reached'",
    );
    assert_eq!(counts, "tcp 1 udp 0 leaked False\n", "{printed}");
    assert!(printed.contains("reached\n[exit code: 0]"), "{printed}");
}

#[test]
fn loopback_refuses_at_once_a_connect_a_race_a_sendmmsg_and_a_passed_socket() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a network namespace");
    }
    let dir = tempfile::tempdir().unwrap();
    let port = 18462;
    let (counts, printed) = in_test_namespace(
        dir.path(),
        port,
        "start=$(date +%s%N)
        $DSH -s workspace-write --network loopback --allow-unix-socket \"$SOCK\" \
            -- python3 \"$ATTACKS\" $PORT \"$SOCK\"
        echo took $(( ($(date +%s%N) - start) / 1000000 ))ms",
    );
    // The one connection is the passing server's own, made outside the run.
    assert_eq!(counts, "tcp 1 udp 0 leaked False\n", "{printed}");
    for line in [
        "connect: errno 13\n",
        "race: outside 0\n",
        // Every message is judged before any is sent: none goes.
        "sendmmsg: errno 13\n",
        "passed fd: 0 received; sendmsg errno 1\n",
    ] {
        assert!(printed.contains(line), "{line:?} not in:\n{printed}");
    }
    assert!(printed.contains("[sandbox: network denied: connect(192.0.2.2:"));
    // At once: no connect waited on a packet (generous: the race loop
    // makes 300 connects through the gate).
    let took: u64 = printed
        .lines()
        .find_map(|l| l.strip_prefix("took ")?.strip_suffix("ms")?.parse().ok())
        .unwrap();
    assert!(took < 20_000, "{took} ms:\n{printed}");
}

#[test]
fn the_confining_modes_refuse_egress_by_default_and_network_allow_opens_it() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a network namespace");
    }
    let dir = tempfile::tempdir().unwrap();
    let port = 18466;
    // No --network: the listener on 192.0.2.2 is there (the last run,
    // with --network allow, reaches it), and the confining modes do not.
    let (counts, printed) = in_test_namespace(
        dir.path(),
        port,
        "connect='exec 3<>/dev/tcp/192.0.2.2/'$PORT' && echo reached >&3 && echo reached'
        $DSH -s read-only --json -- \"$connect\" > read-only.json
        $DSH -s workspace-write -- \"$connect\" > workspace-write.txt
        $DSH -s workspace-write --network allow -- \"$connect\" > allowed.txt",
    );
    assert_eq!(counts, "tcp 1 udp 0 leaked False\n", "{printed}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    // Refused at once (no packet, no wait on a route), told, and hinted.
    let v: serde_json::Value = serde_json::from_str(&read("read-only.json")).unwrap();
    assert_eq!(v["exit_code"], 1, "{v}");
    assert!(v["duration_ms"].as_u64().unwrap() < 5000, "{v}");
    assert_eq!(v["sandbox"]["network"], "loopback");
    assert_eq!(v["sandbox"]["network_enforcement"], "gate");
    assert_eq!(v["sandbox"]["network_denied"], true);
    assert_eq!(
        v["sandbox"]["denials"],
        json!([{"op": "connect", "path": format!("192.0.2.2:{port}"), "errno": "EACCES",
                "source": "gate", "network": true, "count": 1,
                "hint": "--network allow=192.0.2.2 (HTTP and HTTPS, through a proxy) or \
                         --network allow (read-only defaults to --network loopback)"}])
    );
    let text = read("workspace-write.txt");
    assert!(
        text.ends_with(&format!(
            "[sandbox: network denied: connect(192.0.2.2:{port}); try --network allow=192.0.2.2 \
             (HTTP and HTTPS, through a proxy) or --network allow (workspace-write defaults to \
             --network loopback)]\n[exit code: 1]\n"
        )),
        "{text}"
    );
    assert_eq!(read("allowed.txt"), "reached\n[exit code: 0]\n");
}

#[test]
fn curl_of_a_name_under_the_default_is_refused_at_the_name_server_with_a_hint() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a network namespace");
    }
    if !Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skip("needs curl");
    }
    // A network namespace with loopback alone, and a mount namespace whose
    // resolver is 192.0.2.53 (no route to it: nothing could leave anyway).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("resolv.conf"), "nameserver 192.0.2.53\n").unwrap();
    std::fs::write(dir.path().join("nsswitch.conf"), "hosts: files dns\n").unwrap();
    let curl = "curl -sS -m 10 https://example.com";
    let out = Command::new("unshare")
        .args(["--net", "--mount", "bash", "-c"])
        .arg(format!(
            "set -e; mount --bind resolv.conf /etc/resolv.conf
            mount --bind nsswitch.conf /etc/nsswitch.conf; ip link set lo up
            \"$DSH\" -s workspace-write --json -- '{curl}' > curl.json || true
            \"$DSH\" -s workspace-write -- '{curl}' > curl.txt || true"
        ))
        .env("DSH", bin())
        .env("HOME", "/nonexistent-home")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let printed = stdout(&out) + &stderr(&out);
    let hint = "--network allow=HOST for the name looked up (HTTP and HTTPS, through a proxy \
                that resolves names itself) or --network allow (workspace-write defaults to \
                --network loopback)";
    let v: serde_json::Value =
        serde_json::from_str(&read("curl.json")).unwrap_or_else(|e| panic!("{e}: {printed}"));
    assert_eq!(v["exit_code"], 6, "{v}");
    assert_eq!(v["sandbox"]["network_denied"], true, "{v}");
    let first = &v["sandbox"]["denials"][0];
    let count = first["count"].as_u64().unwrap();
    assert_eq!(
        first,
        &json!({"op": "connect", "path": "192.0.2.53:53", "errno": "EACCES", "source": "gate",
                "network": true, "hint": hint, "count": count}),
        "{v}"
    );
    // The text run's notice, the same but for how many times the
    // resolver tried (its own run).
    let text = read("curl.txt");
    let lines: Vec<&str> = text.lines().collect();
    let (notice, marker) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    let times = notice
        .strip_prefix("[sandbox: network denied: connect(192.0.2.53:53)")
        .and_then(|rest| rest.strip_suffix(&format!("; try {hint}]")))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        times.is_empty() || (times.starts_with(" (") && times.ends_with(" times)")),
        "{text}"
    );
    assert_eq!(marker, "[exit code: 6]", "{text}");
    assert!(
        text.starts_with("[stderr]\ncurl: (6) Could not resolve host: example.com\n"),
        "{text}"
    );
}

#[test]
fn the_confining_modes_default_to_loopback_and_reach_a_server_on_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in listener.incoming().map_while(Result::ok) {
            let _ = c.write_all(b"hello from loopback\n");
        }
    });
    let ws = tempfile::tempdir().unwrap();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && head -n1 <&3 && \
         echo \"$DSH_SANDBOX_MODE $DSH_SANDBOX_NETWORK\""
    );
    for (mode, network, enforcement) in [
        ("read-only", "loopback", "gate"),
        ("workspace-write", "loopback", "gate"),
        ("full-access", "allow", "none"),
    ] {
        let v = Test::new()
            .arg("-C")
            .arg(ws.path())
            .args(["--json", "-s", mode, "--", &script])
            .run()
            .json();
        assert_eq!(
            v["stdout"]["text"],
            format!("hello from loopback\n{mode} {network}\n"),
            "{mode}: {v}"
        );
        assert_eq!(v["sandbox"]["network"], network, "{mode}");
        assert_eq!(v["sandbox"]["network_enforcement"], enforcement, "{mode}");
        assert_eq!(v["sandbox"]["network_denied"], false, "{mode}");
        assert_eq!(v["sandbox"]["denials"], json!([]), "{mode}");
    }
}

#[test]
fn the_allow_list_bypassed_is_loopback_only() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a network namespace");
    }
    let dir = tempfile::tempdir().unwrap();
    let port = 18463;
    let (counts, printed) = in_test_namespace(
        dir.path(),
        port,
        "$DSH --network allow=192.0.2.2:$PORT -- \
            'curl -sS --noproxy \"*\" -m 5 http://192.0.2.2:'$PORT'/ ; echo curl $?'",
    );
    assert_eq!(counts, "tcp 0 udp 0 leaked False\n", "{printed}");
    assert!(printed.contains("curl 7\n"), "{printed}");
    assert!(printed.contains("[sandbox: network denied: connect(192.0.2.2:"));
}

/// A directory with `hello.txt` served over HTTP on 127.0.0.1.
fn upstream() -> (tempfile::TempDir, Started, u16) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello through the proxy\n").unwrap();
    let (server, port) = http_server(dir.path());
    (dir, server, port)
}

#[test]
fn the_allow_list_proxy_fetches_a_listed_host_and_refuses_the_rest() {
    let (_dir, _server, port) = upstream();
    for mode in MODES {
        let script = format!(
            "curl -sS --noproxy '' http://localhost:{port}/hello.txt
            curl -sS --noproxy '' -w ' %{{http_code}}\\n' http://example.org/
            curl -sS --noproxy '' -w ' %{{http_code}}\\n' http://127.0.0.1:{port}/hello.txt
            curl -sS --noproxy '' -w ' %{{http_code}}\\n' -o /dev/null https://example.org/ 2>&1
            curl -sS --noproxy '' -x \"http://${{HTTPS_PROXY##*@}}\" -w ' %{{http_code}}\\n' \
                http://localhost:{port}/hello.txt"
        );
        let out = Test::new()
            .args(["--json", "--network"])
            .arg(format!("allow=localhost:{port}"))
            .args(mode)
            .args(["--", &script])
            .run();
        let v = out.json();
        assert_eq!(
            v["stdout"]["text"].as_str().unwrap(),
            format!(
                "hello through the proxy\n\
                 dsh-exec: example.org:80 refused: not in the --network allow= list: localhost:{port}\n 403\n\
                 dsh-exec: 127.0.0.1:{port} refused: not in the --network allow= list: localhost:{port}\n 403\n\
                 curl: (56) CONNECT tunnel failed, response 403\n 000\n\
                 dsh-exec: this proxy serves one dsh-exec run only\n 407\n"
            ),
            "{mode:?}"
        );
        let sb = &v["sandbox"];
        assert_eq!(sb["network"], "allow-list");
        assert_eq!(sb["network_allow"], json!([format!("localhost:{port}")]));
        assert_eq!(sb["network_allowed"], json!({"localhost": 1}));
        let reason = "not in the --network allow= list";
        assert_eq!(
            sb["network_denials"],
            json!([
                {"host": "example.org", "port": 80, "reason": reason, "count": 1},
                {"host": "127.0.0.1", "port": port, "reason": reason, "count": 1},
                {"host": "example.org", "port": 443, "reason": reason, "count": 1},
            ])
        );
        assert_eq!(sb["network_denied"], true);
        let proxy = sb["network_proxy"].as_str().unwrap();
        assert!(proxy.starts_with("127.0.0.1:"), "{proxy}");
    }
}

#[test]
fn the_proxy_refuses_a_wildcard_name_that_resolves_to_loopback() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN and unshare for a private /etc/hosts");
    }
    let (dir, _server, port) = upstream();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1 localhost\n127.0.0.1 a.rebind.test\n127.0.0.1 b.rebind.test\n",
    )
    .unwrap();
    let fetch = |rule: String, name: &str| {
        let script = format!(
            "mount --bind {} /etc/hosts && exec \"$DSH\" --json --network allow={rule} -- \
             'curl -sS --noproxy \"\" -w \" %{{http_code}}\" http://{name}:{port}/hello.txt'",
            hosts.display()
        );
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "bash", "-c", &script])
            .env("DSH", bin())
            .env("HOME", "/nonexistent-home")
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)))
    };
    let v = fetch(format!("*.rebind.test:{port}"), "a.rebind.test");
    let reason = "resolves to 127.0.0.1, a loopback address: only a host or address listed \
                  exactly may reach it (DNS rebinding)";
    assert_eq!(
        v["stdout"]["text"].as_str().unwrap(),
        format!("dsh-exec: a.rebind.test:{port} refused: {reason}\n 403")
    );
    assert_eq!(
        v["sandbox"]["network_denials"],
        json!([{"host": "a.rebind.test", "port": port, "reason": reason, "count": 1}])
    );
    // Listed exactly, the same name may.
    let v = fetch(format!("b.rebind.test:{port}"), "b.rebind.test");
    assert_eq!(
        v["stdout"]["text"].as_str().unwrap(),
        "hello through the proxy\n 200"
    );
}

/// A client that talks to the proxy by hand: each request head it sends
/// (its own connection each), and the status line and body it got back.
const RAW_REQUESTS: &str = r#"
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = b"Proxy-Authorization: Basic " + base64.b64encode(("%s:%s" % (proxy.username, proxy.password)).encode())
port = sys.argv[1].encode()
def ask(name, head):
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(head.replace(b"PORT", port).replace(b"AUTH", auth) + b"\r\n\r\n")
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    status, _, rest = got.partition(b"\r\n")
    print("%s: %s: %s" % (name, status.decode(), rest.partition(b"\r\n\r\n")[2].decode().strip()))
ask("other host", b"GET http://localhost:PORT/ HTTP/1.1\r\nHost: other.example\r\nAUTH")
ask("two hosts", b"GET http://localhost:PORT/ HTTP/1.1\r\nHost: localhost:PORT\r\nhost: other.example\r\nAUTH")
ask("no host", b"GET http://localhost:PORT/ HTTP/1.1\r\nAUTH")
ask("no host, 1.0", b"GET http://localhost:PORT/ HTTP/1.0\r\nAUTH")
ask("connect", b"CONNECT other.example:443 HTTP/1.1\r\nHost: localhost:PORT\r\nAUTH")
"#;

/// A server on 127.0.0.1 that answers every request with the Host lines
/// it got (`(none)` without one) and records them, until the flag is set.
fn host_echo(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::thread::JoinHandle<Vec<String>>, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let hosts: Vec<&str> = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .filter(|(k, _)| k.eq_ignore_ascii_case("host"))
                .map(|(_, v)| v.trim())
                .collect();
            let body = if hosts.is_empty() {
                "(none)".to_string()
            } else {
                hosts.join(" + ")
            };
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            seen.push(body);
        }
        seen
    });
    (server, port)
}

#[test]
fn the_proxy_sends_the_target_it_judged_as_host_and_refuses_an_ambiguous_one() {
    // A server behind a listed address may serve other names (virtual
    // hosts): the Host it gets is the listed target, whatever the client
    // wrote, and a request with several or (in HTTP/1.1) none gets 400.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (server, port) = host_echo(stop.clone());
    let out = Test::new()
        .args(["--network"])
        .arg(format!("allow=localhost:{port}"))
        .args(["-e", "SCRIPT", "--"])
        .arg(format!("python3 -c \"$SCRIPT\" {port}"))
        .env("SCRIPT", RAW_REQUESTS)
        .run();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = server.join().unwrap();
    assert_eq!(
        out.stdout,
        format!(
            "other host: HTTP/1.1 200 OK: localhost:{port}\n\
             two hosts: HTTP/1.1 400 Bad Request: dsh-exec: a request with 2 Host headers: \
             send one (RFC 9112 3.2)\n\
             no host: HTTP/1.1 400 Bad Request: dsh-exec: an HTTP/1.1 request without a Host \
             header (RFC 9112 3.2)\n\
             no host, 1.0: HTTP/1.1 200 OK: localhost:{port}\n\
             connect: HTTP/1.1 403 Forbidden: dsh-exec: other.example:443 refused: not in the \
             --network allow= list: localhost:{port}\n\
             [sandbox: network denied: proxy refused other.example:443 (not in the --network \
             allow= list)]\n\
             [exit code: 0]\n"
        ),
        "{}",
        out.stderr
    );
    // Only the two unambiguous requests reached the server.
    assert_eq!(
        seen,
        [format!("localhost:{port}"), format!("localhost:{port}")]
    );
}

/// A server on 127.0.0.1 that keeps every connection open, whatever the
/// request says (`Connection: close` too), and answers each request with
/// its method, path and body, `Content-Length` framed; it prints its port,
/// then one JSON line per request it got.
const KEEP_ALIVE_SERVER: &str = r#"
import http.server, json
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        print(json.dumps({"request": "%s %s" % (self.command, self.path),
                          "host": self.headers.get("Host"),
                          "authorization": self.headers.get("Authorization"),
                          "body": body.decode(),
                          "fields": sorted(k.lower() for k in self.headers.keys())}), flush=True)
        out = ("%s %s %s" % (self.command, self.path, body.decode())).strip().encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        if self.path == "/hop":
            self.send_header("Connection", "X-Server-Hop")
            self.send_header("X-Server-Hop", "for the proxy alone")
            self.send_header("Keep-Alive", "timeout=5")
            self.send_header("X-Server-Kept", "kept")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)
        self.close_connection = False
    do_GET = do_POST = do_HEAD = answer
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A [`KEEP_ALIVE_SERVER`], its port, and the reader of its lines.
fn keep_alive_server() -> (Started, u16, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new("python3")
        .args(["-c", KEEP_ALIVE_SERVER])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let port = line.trim().parse().expect("a port");
    (Started(child), port, out)
}

/// Stops the server and returns the requests it got.
fn requests_seen(
    server: Started,
    mut out: BufReader<std::process::ChildStdout>,
) -> Vec<serde_json::Value> {
    drop(server);
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_proxy_connection_kept_alive_by_the_upstream_carries_no_second_request() {
    // The upstream keeps the connection open whatever the proxy asks; a
    // client that reuses its proxy connection for another host must meet
    // the list again, not reach the first host unjudged with the second
    // host's credentials and the proxy token.
    let (server, port, out) = keep_alive_server();
    let via = "--noproxy '' -x \"$HTTP_PROXY\"";
    let script = format!(
        "curl -sS {via} -H 'Authorization: Bearer for-a' http://localhost:{port}/first \
         --next -sS {via} -H 'Authorization: Bearer for-b' -w ' %{{http_code}}\\n' \
         http://notlisted.invalid:{port}/second"
    );
    let v = Test::new()
        .args(["--json", "--network"])
        .arg(format!("allow=localhost:{port}"))
        .args(["--", &script])
        .run()
        .json();
    let seen = requests_seen(server, out);
    assert_eq!(
        v["stdout"]["text"].as_str().unwrap(),
        format!(
            "GET /first\n\
             dsh-exec: notlisted.invalid:{port} refused: not in the --network allow= list: \
             localhost:{port}\n 403\n"
        ),
        "{v}"
    );
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["request"], "GET /first");
    assert_eq!(seen[0]["authorization"], "Bearer for-a");
    assert_eq!(v["sandbox"]["network_allowed"], json!({"localhost": 1}));
    assert_eq!(
        v["sandbox"]["network_denials"],
        json!([{"host": "notlisted.invalid", "port": port,
                "reason": "not in the --network allow= list", "count": 1}])
    );
}

/// A client that talks to the proxy by hand: each case its own
/// connection, all bytes in one send, a request for a host off the list
/// after most; it prints the status line, the `Connection` and
/// `Proxy-Connection` fields, the body, and whether the proxy closed the
/// connection (or kept it open for 10 s).
const ONE_REQUEST_PER_CONNECTION: &str = r#"
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = b"Proxy-Authorization: Basic " + base64.b64encode(("%s:%s" % (proxy.username, proxy.password)).encode())
port = sys.argv[1].encode()
NEXT = b"GET http://notlisted.invalid:PORT/smuggled HTTP/1.1\r\nHost: notlisted.invalid:PORT\r\nAUTH\r\n\r\n"
def ask(name, raw):
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.settimeout(10)
    s.sendall(raw.replace(b"PORT", port).replace(b"AUTH", auth))
    got, end = b"", "closed"
    try:
        while chunk := s.recv(65536):
            got += chunk
    except socket.timeout:
        end = "kept open"
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    print("%s: %s [%s, %s] %s %s" % (name, lines[0], fields.get("Connection"),
          fields.get("Proxy-Connection"), body.decode().strip() or "-", end))
def post(path, fields, body):
    return (b"POST http://localhost:PORT/" + path + b" HTTP/1.1\r\nHost: localhost:PORT\r\n"
            + fields + b"AUTH\r\n\r\n" + body + NEXT)
ask("pipelined", b"GET http://localhost:PORT/a HTTP/1.1\r\nHost: localhost:PORT\r\nAUTH\r\n\r\n" + NEXT)
ask("length", post(b"length", b"Content-Length: 5\r\n", b"hello"))
ask("chunked", post(b"chunked", b"Transfer-Encoding: chunked\r\n",
                    b"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"))
ask("head", b"HEAD http://localhost:PORT/h HTTP/1.1\r\nHost: localhost:PORT\r\nAUTH\r\n\r\n" + NEXT)
ask("both", post(b"both", b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"))
ask("gzip", post(b"gzip", b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"))
ask("two lengths", post(b"two", b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"))
ask("http/1.0", b"POST http://localhost:PORT/old HTTP/1.0\r\nTransfer-Encoding: chunked\r\nAUTH\r\n\r\n0\r\n\r\n" + NEXT)
ask("extension", post(b"extension", b"Transfer-Encoding: chunked\r\n", b"5;a=b\r\nhello\r\n0\r\n\r\n"))
"#;

#[test]
fn the_proxy_passes_on_one_request_per_connection_and_refuses_framing_it_cannot_tell() {
    let (server, port, out) = keep_alive_server();
    let v = Test::new()
        .args(["--json", "--network"])
        .arg(format!("allow=localhost:{port}"))
        .args(["-e", "SCRIPT", "--"])
        .arg(format!("python3 -c \"$SCRIPT\" {port}"))
        .env("SCRIPT", ONE_REQUEST_PER_CONNECTION)
        .run()
        .json();
    let seen = requests_seen(server, out);
    let bad = "HTTP/1.1 400 Bad Request [close, None] dsh-exec:";
    assert_eq!(
        v["stdout"]["text"].as_str().unwrap(),
        format!(
            "pipelined: HTTP/1.1 200 OK [close, close] GET /a closed\n\
             length: HTTP/1.1 200 OK [close, close] POST /length hello closed\n\
             chunked: HTTP/1.1 200 OK [close, close] POST /chunked hello world closed\n\
             head: HTTP/1.1 200 OK [close, close] - closed\n\
             both: {bad} a request with both Transfer-Encoding and Content-Length: send one \
             (RFC 9112 6.3) closed\n\
             gzip: {bad} a request with Transfer-Encoding 'gzip, chunked': the proxy takes \
             'chunked' alone (RFC 9112 6.3) closed\n\
             two lengths: {bad} a request with 2 Content-Length fields: send one (RFC 9112 6.3) \
             closed\n\
             http/1.0: {bad} an HTTP/1.0 request with Transfer-Encoding (RFC 9112 6.1) closed\n\
             extension: {bad} a chunk extension in a request (RFC 9112 7.1.1) closed\n"
        ),
        "{v}"
    );
    // Nothing after a request's end reached the server; the refused
    // framings reached it not at all, but for the head of the one whose
    // body broke its framing, which the server could not complete.
    let got: Vec<(&str, &str)> = seen
        .iter()
        .map(|r| (r["request"].as_str().unwrap(), r["body"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("GET /a", ""),
            ("POST /length", "hello"),
            ("POST /chunked", "hello world"),
            ("HEAD /h", ""),
        ]
    );
    assert_eq!(v["sandbox"]["network_allowed"], json!({"localhost": 5}));
    assert_eq!(v["sandbox"].get("network_denials"), None, "{v}");
}

/// A client that sends the proxy hop-by-hop fields by hand: it prints the
/// status line and the names of the fields that came back.
const HOP_BY_HOP: &str = r#"
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = b"Proxy-Authorization: Basic " + base64.b64encode(("%s:%s" % (proxy.username, proxy.password)).encode())
port = sys.argv[1].encode()
def ask(name, raw):
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(raw.replace(b"PORT", port).replace(b"AUTH", auth))
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    lines = got.partition(b"\r\n\r\n")[0].decode().split("\r\n")
    names = sorted(l.split(":")[0].lower() for l in lines[1:])
    print("%s: %s: %s" % (name, lines[0], " ".join(names)))
ask("hop", b"GET http://localhost:PORT/hop HTTP/1.1\r\nHost: localhost:PORT\r\n"
    b"Connection: keep-alive, X-Hop-Secret\r\nX-Hop-Secret: s3cret\r\nKeep-Alive: timeout=5\r\n"
    b"Proxy-Connection: keep-alive\r\nTE: trailers\r\nUpgrade: h2c\r\nX-End-To-End: kept\r\n"
    b"AUTH\r\n\r\n")
ask("framing", b"POST http://localhost:PORT/framing HTTP/1.1\r\nHost: localhost:PORT\r\n"
    b"Connection: Content-Length\r\nContent-Length: 5\r\nAUTH\r\n\r\nhello")
"#;

#[test]
fn the_proxy_drops_hop_by_hop_fields_and_those_connection_names_both_ways() {
    // RFC 9110 7.6.1: the standard hop-by-hop fields and those the
    // Connection field names are for the next hop alone; the proxy token
    // never goes upstream. A request whose Connection names a field that
    // frames its body is refused: dropping it would unframe the body.
    let (server, port, out) = keep_alive_server();
    let v = Test::new()
        .args(["--json", "--network"])
        .arg(format!("allow=localhost:{port}"))
        .args(["-e", "SCRIPT", "--"])
        .arg(format!("python3 -c \"$SCRIPT\" {port}"))
        .env("SCRIPT", HOP_BY_HOP)
        .run()
        .json();
    let seen = requests_seen(server, out);
    assert_eq!(
        v["stdout"]["text"].as_str().unwrap(),
        "hop: HTTP/1.1 200 OK: connection content-length date proxy-connection server \
         x-server-kept\n\
         framing: HTTP/1.1 400 Bad Request: connection content-length content-type \
         x-dsh-exec-proxy\n",
        "{v}"
    );
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["request"], "GET /hop");
    assert_eq!(
        seen[0]["fields"],
        json!(["connection", "host", "x-end-to-end"])
    );
}

#[test]
fn the_proxy_refuses_a_wildcard_name_that_resolves_to_an_ipv6_form_of_a_special_address() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a private /etc/hosts");
    }
    // In a network namespace of its own with loopback alone, so that
    // nothing leaves the host whatever the proxy does.
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1 localhost\n\
         2002:7f00:1::1 six.embedded.test\n\
         2001:0:5db8:d70e::f5ff:fffe teredo.embedded.test\n\
         2001:db8::200:5efe:c0a8:101 isatap.embedded.test\n\
         2002:a9fe:a9fe::1 metadata.embedded.test\n",
    )
    .unwrap();
    let port = 18464;
    let allow = format!("allow=*.embedded.test:{port},metadata.embedded.test:{port}");
    let names = ["six", "teredo", "isatap", "metadata"];
    let mut script: Vec<String> = names
        .iter()
        .map(|n| {
            format!(
                "curl -sS --noproxy '' -w ' %{{http_code}}\\n' http://{n}.embedded.test:{port}/"
            )
        })
        .collect();
    script.push(format!(
        "curl -sS --noproxy '' -w ' %{{http_code}}\\n' http://[2002:7f00:1::1]:{port}/"
    ));
    let out = Command::new("unshare")
        .args(["--mount", "--net", "--propagation", "private", "bash", "-c"])
        .arg(format!(
            "ip link set lo up && mount --bind {} /etc/hosts && \
             exec \"$DSH\" --json --network \"$ALLOW\" -- \"$SCRIPT\"",
            hosts.display()
        ))
        .env("DSH", bin())
        .env("ALLOW", &allow)
        .env("SCRIPT", script.join("\n"))
        .env("HOME", "/nonexistent-home")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    let rebinding = "only a host or address listed exactly may reach it (DNS rebinding)";
    let reasons = [
        "resolves to 2002:7f00:1::1 (6to4 of 127.0.0.1), a loopback address",
        "resolves to 2001:0:5db8:d70e::f5ff:fffe (Teredo client of 10.0.0.1), a private address",
        "resolves to 2001:db8::200:5efe:c0a8:101 (ISATAP of 192.168.1.1), a private address",
        // Listed exactly by name, and still: metadata only by its address.
        "resolves to 2002:a9fe:a9fe::1 (6to4 of 169.254.169.254), a cloud metadata address",
    ]
    .map(|r| format!("{r}: {rebinding}"));
    let mut want = String::new();
    for (n, r) in names.iter().zip(&reasons) {
        want += &format!("dsh-exec: {n}.embedded.test:{port} refused: {r}\n 403\n");
    }
    // An address literal is judged by the list alone: only a rule naming
    // it exactly holds it (and then it is the user's to reach).
    want += &format!(
        "dsh-exec: [2002:7f00:1::1]:{port} refused: not in the --network allow= list: \
         *.embedded.test:{port},metadata.embedded.test:{port}\n 403\n"
    );
    assert_eq!(v["stdout"]["text"].as_str().unwrap(), want, "{v}");
    let mut denials: Vec<serde_json::Value> = names
        .iter()
        .zip(&reasons)
        .map(|(n, r)| {
            json!({"host": format!("{n}.embedded.test"), "port": port, "reason": r, "count": 1})
        })
        .collect();
    denials.push(json!({"host": "2002:7f00:1::1", "port": port,
        "reason": "not in the --network allow= list", "count": 1}));
    assert_eq!(v["sandbox"]["network_denials"], json!(denials));
    assert_eq!(v["sandbox"].get("network_allowed"), None, "{v}");
}

#[test]
fn the_proxy_refuses_names_that_resolve_to_documentation_benchmarking_and_metadata_addresses() {
    if !can_make_namespaces() {
        return skip("needs root with CAP_SYS_ADMIN, unshare and ip for a private /etc/hosts");
    }
    // RFC 6890's special-purpose ranges and other clouds' metadata
    // services, reached by name: in a network namespace with loopback
    // alone, so that nothing leaves the host whatever the proxy does.
    let dir = tempfile::tempdir().unwrap();
    let names = [
        ("bench", "198.18.0.1", "a benchmarking address"),
        ("doc", "203.0.113.7", "a documentation address"),
        ("doc6", "2001:db8::7", "a documentation address"),
        (
            "ietf",
            "192.0.0.8",
            "a multicast, broadcast or reserved address",
        ),
        ("alibaba", "100.100.100.200", "a cloud metadata address"),
        ("gcp", "fd20:ce::254", "a cloud metadata address"),
        ("azure", "168.63.129.16", "a cloud metadata address"),
    ];
    let mut hosts = String::from("127.0.0.1 localhost\n");
    for (n, ip, _) in names {
        hosts += &format!("{ip} {n}.special.test\n");
    }
    std::fs::write(dir.path().join("hosts"), hosts).unwrap();
    let port = 18465;
    // The metadata names are listed exactly too: only an address rule
    // reaches a metadata service.
    let allow = format!(
        "allow=*.special.test:{port},alibaba.special.test:{port},gcp.special.test:{port},\
         azure.special.test:{port}"
    );
    let script: Vec<String> = names
        .iter()
        .map(|(n, _, _)| {
            format!("curl -sS --noproxy '' -w ' %{{http_code}}\\n' http://{n}.special.test:{port}/")
        })
        .collect();
    let out = Command::new("unshare")
        .args(["--mount", "--net", "--propagation", "private", "bash", "-c"])
        .arg(format!(
            "ip link set lo up && mount --bind {} /etc/hosts && \
             exec \"$DSH\" --json --network \"$ALLOW\" -- \"$SCRIPT\"",
            dir.path().join("hosts").display()
        ))
        .env("DSH", bin())
        .env("ALLOW", &allow)
        .env("SCRIPT", script.join("\n"))
        .env("HOME", "/nonexistent-home")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    let mut want = String::new();
    for (n, ip, class) in names {
        want += &format!(
            "dsh-exec: {n}.special.test:{port} refused: resolves to {ip}, {class}: only a host \
             or address listed exactly may reach it (DNS rebinding)\n 403\n"
        );
    }
    assert_eq!(v["stdout"]["text"].as_str().unwrap(), want, "{v}");
    assert_eq!(
        v["sandbox"]["network_denials"].as_array().unwrap().len(),
        names.len(),
        "{v}"
    );
    assert_eq!(v["sandbox"].get("network_allowed"), None, "{v}");
}

/// A client for the proxy: CONNECT to `localhost:PORT`, then 10 MiB of
/// seeded random bytes each way; prints the digests of what it sent and
/// what came back.
const TUNNEL: &str = r#"
import base64, hashlib, os, random, socket, sys, threading, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
auth = base64.b64encode(("%s:%s" % (proxy.username, proxy.password)).encode())
s = socket.create_connection((proxy.hostname, proxy.port))
s.sendall(b"CONNECT localhost:%s HTTP/1.1\r\nHost: localhost\r\nProxy-Authorization: Basic %s\r\n\r\n"
          % (sys.argv[1].encode(), auth))
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
data = random.Random(7).randbytes(10 << 20)
t = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR))); t.start()
back = hashlib.sha256(); n = 0
while chunk := s.recv(1 << 16):
    back.update(chunk); n += len(chunk)
t.join()
print(n, hashlib.sha256(data).hexdigest() == back.hexdigest(), back.hexdigest())
"#;

#[test]
fn a_connect_tunnel_carries_ten_mebibytes_each_way_unchanged() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The upstream echoes every byte and digests what it got.
    listener.set_nonblocking(true).unwrap();
    let echo = std::thread::spawn(move || {
        let mut s = poll_until(Duration::from_secs(30), || listener.accept().ok())
            .expect("the tunnel reached the upstream")
            .0;
        s.set_nonblocking(false).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut all = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            w.write_all(&buf[..n]).unwrap();
        }
        w.shutdown(std::net::Shutdown::Write).unwrap();
        all
    });
    let out = Test::new()
        .args(["--network"])
        .arg(format!("allow=localhost:{port}"))
        .args(["-e", "SCRIPT", "--"])
        .arg(format!("python3 -c \"$SCRIPT\" {port}"))
        .env("SCRIPT", TUNNEL)
        .run();
    let received = echo.join().unwrap();
    assert_eq!(received.len(), 10 << 20);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0], "HTTP/1.1 200 Connection established",
        "{}",
        out.stdout
    );
    assert!(
        lines[1].starts_with(&format!("{} True ", 10 << 20)),
        "{}",
        out.stdout
    );
    assert_eq!(lines.last(), Some(&"[exit code: 0]"));
}

#[test]
fn a_background_job_gets_the_same_allow_list_and_its_proxy() {
    let (_dir, _server, port) = upstream();
    let runtime = crate::jobs::runtime_dir();
    let job = |args: &[&str]| -> (String, i32) {
        let mut c = dsh();
        crate::jobs::with_runtime(&mut c, runtime.path());
        let out = c.args(args).output().unwrap();
        (stdout(&out), code(&out))
    };
    let allow = format!("allow=localhost:{port}");
    let script = format!(
        "curl -sS --noproxy '' http://localhost:{port}/hello.txt; \
         curl -sS --noproxy '' -w ' %{{http_code}}\\n' -o /dev/null http://example.org/"
    );
    let (id, status) = job(&["--background", "--network", &allow, "--", &script]);
    assert_eq!(status, 0, "{id}");
    let (out, status) = job(&["job", "wait", "--json", id.trim()]);
    assert_eq!(status, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["stdout"]["text"], "hello through the proxy\n 403\n",
        "{v}"
    );
    assert_eq!(v["sandbox"]["network_allowed"], json!({"localhost": 1}));
    assert_eq!(
        v["sandbox"]["network_denials"][0]["host"],
        json!("example.org")
    );
}

#[test]
fn explain_names_the_hosts_the_proxy_and_the_mechanism() {
    let (text, status) = run(&[
        "explain",
        "--network",
        "allow=pypi.org,*.pythonhosted.org:443",
        "--",
        "true",
    ]);
    assert_eq!(status, 0, "{text}");
    for needle in [
        "network           allow-list                                        (flag)\n",
        "allow-hosts       pypi.org                                          (ports 80 and 443)\n",
        "                  *.pythonhosted.org:443                            (this port)\n",
        "proxy             http://dsh-exec:TOKEN@127.0.0.1:PORT",
        "net-mechanism     as loopback, plus an HTTP/HTTPS proxy",
        "DSH_SANDBOX_NETWORK=allow-list",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
    let (text, _) = run(&["explain", "--json", "--network", "loopback", "--", "true"]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let sandbox = &v["sandbox"];
    assert_eq!(sandbox["network"]["value"], "loopback");
    assert!(
        sandbox["network_mechanism"]
            .as_str()
            .unwrap()
            .starts_with("gate (seccomp user notification)"),
        "{sandbox}"
    );
}

#[test]
fn loopback_in_full_access_cannot_ptrace_a_process_outside_the_run() {
    // A process of the same user outside the run could make any connection
    // for it; the Landlock domain of the abstract-socket scope (ABI 6)
    // keeps ptrace(2) inside the run.
    let abi = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    if !abi.contains("landlock") {
        return skip("Landlock is not enabled");
    }
    let mut outside = Started(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = outside.0.id();
    let script = format!(
        "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
         print(libc.ptrace(16, {pid}, 0, 0), ctypes.get_errno())'"
    );
    Test::new()
        .args(["--network", "loopback", "--", &script])
        .run()
        .expect_stdout("-1 1\n[exit code: 0]\n");
    let _ = outside.0.kill();
}

#[test]
fn another_run_cannot_use_this_run_s_proxy_even_with_its_credentials() {
    let (dir, _server, port) = upstream();
    let url_file = dir.path().join("proxy-url");
    // The allow-list run writes its proxy URL (credentials and all) where
    // the other run finds it, then waits for the other run to be done.
    let done = dir.path().join("done");
    let owner = format!(
        "echo \"$HTTPS_PROXY\" > {url}; for i in $(seq 300); do [ -e {done} ] && break; sleep 0.05; done",
        url = url_file.display(),
        done = done.display()
    );
    let mut victim = Command::new(bin());
    known_env(&mut victim)
        .args([
            "--network",
            &format!("allow=localhost:{port}"),
            "--",
            &owner,
        ])
        .stdout(Stdio::null());
    let victim = Started(victim.spawn().unwrap());
    let url = poll_until(Duration::from_secs(15), || {
        std::fs::read_to_string(&url_file)
            .ok()
            .filter(|u| u.ends_with('\n'))
    })
    .expect("the allow-list run wrote its proxy URL");
    let thief = format!(
        "curl -sS --noproxy '' -x '{}' -w ' %{{http_code}}\\n' http://localhost:{port}/hello.txt",
        url.trim()
    );
    let out = Test::new()
        .args(["--network", "loopback", "--", &thief])
        .run();
    std::fs::write(&done, "").unwrap();
    drop(victim);
    assert_eq!(
        out.stdout,
        "dsh-exec: this proxy serves one dsh-exec run only\n 407\n[exit code: 0]\n"
    );
}

#[test]
fn an_abstract_socket_the_command_listens_on_is_reached_under_loopback() {
    // Under loopback the gate makes listen(2) for the command, so the
    // kernel names dsh-exec as the listener: that is the run's own.
    for mode in ["read-only", "workspace-write"] {
        let out = Test::new()
            .args(["-s", mode, "--network", "loopback", "--"])
            .arg(format!(
                "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind(b\"\\0dsh-exec-it-{}\"); s.listen(1); \
                 c=socket.socket(socket.AF_UNIX); c.connect(b\"\\0dsh-exec-it-{}\"); print(\"connected\")'",
                std::process::id(),
                std::process::id()
            ))
            .run();
        assert_eq!(
            out.stdout, "connected\n[exit code: 0]\n",
            "{mode}: {}",
            out.stderr
        );
    }
}
