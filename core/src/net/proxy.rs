//! The allow-list proxy of `--network allow=HOSTS`: an HTTP/HTTPS proxy
//! that `dsh-exec` runs for the length of one run (or one job's
//! supervisor), on a loopback port, in its own threads.
//!
//! The command is pointed at it with the proxy variables, and the gate lets
//! it reach loopback and nothing else, so every connection off the host is
//! one the proxy made. For each request the proxy:
//! 1. reads the request head (httparse; at most [`HEAD_MAX`] bytes, within
//!    [`HEAD_TIMEOUT`]): `CONNECT host:port`, or a plain request with an
//!    absolute `http://` URI;
//! 2. finds a rule of the allow-list that holds the host and port
//!    ([`super::rules`]), else answers 403;
//! 3. resolves the name itself (getaddrinfo(3)) and drops every address of
//!    a special class ([`super::addr::special_class`]: loopback, private,
//!    link-local, documentation, cloud metadata, ...: RFC 6890; an IPv6
//!    address that carries an IPv4 address, as 6to4, Teredo, NAT64 and
//!    ISATAP do, is of that address's class) unless a rule names the host
//!    or that address exactly: a name under a wildcard cannot be rebound
//!    to an address inside the host or its network (DNS rebinding);
//! 4. connects to one of the addresses it kept, the very ones it judged
//!    (never a name resolved again), and then:
//!    - for `CONNECT`, relays bytes both ways unchanged: the tunnel
//!      carries TLS end to end (no interception), and every byte after
//!      the `CONNECT` head is the tunnel's;
//!    - for a plain request, carries that one request and its response,
//!      then closes the client connection: the request goes on in origin
//!      form (`GET /path`) with `Host` set to the target judged (whatever
//!      the client sent: a server may serve several names), its `Proxy-*`
//!      and hop-by-hop headers dropped, with `Connection: close`, and with
//!      exactly the body its head frames (`http1.rs`: framing it
//!      cannot tell for sure is refused with 400); the response goes back
//!      with `Connection: close` and `Proxy-Connection: close`. What the
//!      client sends after its request's end (a next request, for any
//!      host) is read and dropped, never sent on: an upstream that ignores
//!      `Connection: close` and keeps the connection open still gets one
//!      request per judgement.
//!
//! Refusals are recorded ([`NetworkStats`]) and answered with a one-line
//! body naming the rule. Relaying moves bytes with splice(2) where the
//! kernel allows it, else through a 64 KiB buffer per direction
//! (read(2)/write(2)); a chunked body goes through the buffer, read as it
//! passes.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::addr::{METADATA, Special, classify, embedded_ipv4};
use super::http1::{Body, Chunked, request_body, response_body};
use super::rules::{HostRule, normalize, parse_addr};

/// The largest request head the proxy reads: 64 KiB.
pub const HEAD_MAX: usize = 64 * 1024;

/// How long a client may take to send its request head: 30 s.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the proxy waits for one upstream address to accept: 10 s.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most client connections served at once: 256. Past it a client gets
/// 503 at once, so that a command cannot make `dsh-exec` start threads
/// without bound.
pub const MAX_CONNECTIONS: usize = 256;

/// The most refusals kept in a result; the rest are only counted.
pub const MAX_NETWORK_DENIALS: usize = 100;

/// The reason of a refusal of a host no rule holds.
const NOT_LISTED: &str = "not in the --network allow= list";

/// The user name in the proxy URL.
const USER: &str = "dsh-exec";

/// 16 random bytes (getrandom(2)) as 32 hex digits.
fn random_token() -> io::Result<String> {
    let mut b = [0u8; 16];
    crate::sys::random_bytes(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Standard base64 with padding (RFC 4648 4), for the one credential the
/// proxy compares.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The addresses of this host's interfaces (getifaddrs(3)), but loopback.
fn own_addresses() -> Vec<IpAddr> {
    let mut out = crate::sys::sock::interface_addresses();
    out.retain(|a| !a.is_loopback());
    out
}

/// The relay buffer per direction: 64 KiB.
const RELAY_BUF: usize = 64 * 1024;

/// One request the proxy refused.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct NetworkDenial {
    /// The host asked for (a name, or an address literal).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Why, in one line: `not in the --network allow= list`, `resolves
    /// to 127.0.0.1, a loopback address: ...`.
    pub reason: String,
    /// How many times the same host, port and reason were refused (1 or
    /// more): a tool that retries is one entry.
    pub count: u64,
}

/// What the proxy saw during a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkStats {
    /// The first [`MAX_NETWORK_DENIALS`] refusals, in order.
    pub denials: Vec<NetworkDenial>,
    /// How many more there were.
    pub denials_more: u64,
    /// Requests let through, by host (lower case).
    pub allowed: BTreeMap<String, u64>,
    /// Requests a credential was put into: by credential name, then by
    /// host, how many (`--inject`; never a value).
    pub credentials_used: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests to a host an `--inject` rule names that no rule covered
    /// (another path, a `TRACE`, plain `http://`), which went on without a
    /// credential: by host, how many.
    pub credentials_missed: BTreeMap<String, u64>,
}

impl NetworkStats {
    /// Counts a request to `host` that `used` a credential, or `missed`
    /// one.
    pub(super) fn injected(&mut self, host: &str, used: Option<&str>, missed: bool) {
        if let Some(name) = used {
            *self
                .credentials_used
                .entry(name.to_string())
                .or_default()
                .entry(host.to_string())
                .or_insert(0) += 1;
        }
        if missed {
            *self.credentials_missed.entry(host.to_string()).or_insert(0) += 1;
        }
    }

    pub(super) fn deny(&mut self, host: &str, port: u16, reason: String) {
        // A host is at most 253 bytes (RFC 1035 2.3.4); what the command
        // sent may be any length.
        let host = if host.len() > 253 {
            let mut end = 253;
            while !host.is_char_boundary(end) {
                end -= 1;
            }
            &format!("{}...", &host[..end])
        } else {
            host
        };
        if let Some(same) = self
            .denials
            .iter_mut()
            .find(|d| d.host == host && d.port == port && d.reason == reason)
        {
            same.count += 1;
        } else if self.denials.len() < MAX_NETWORK_DENIALS {
            self.denials.push(NetworkDenial {
                host: host.to_string(),
                port,
                reason,
                count: 1,
            });
        } else {
            self.denials_more += 1;
        }
    }
}

/// Shared between the proxy's threads.
pub(super) struct Shared {
    rules: Vec<HostRule>,
    /// The credentials and their rules (`--credential`, `--inject`), and
    /// the TLS state of the hosts whose TLS the proxy ends.
    injector: Option<Arc<super::mitm::Injector>>,
    /// `Basic BASE64(dsh-exec:TOKEN)`: what a client of this run sends in
    /// `Proxy-Authorization` (the credentials are in the proxy URL the
    /// command gets).
    credentials: String,
    /// The proxy URL with its credentials.
    url: String,
    /// The addresses of this host's interfaces, refused as special.
    own_addrs: Vec<IpAddr>,
    /// The run's processes, once it is spawned: only a connection whose
    /// client socket one of them holds is served.
    tree: Mutex<Option<crate::proctree::Tree>>,
    /// This proxy's port.
    port: u16,
    pub(super) stats: Mutex<NetworkStats>,
    stop: AtomicBool,
    live: AtomicUsize,
    /// The client and upstream sockets of live connections, shut down when
    /// the proxy stops (raw descriptors, each removed by its connection
    /// before it closes them).
    sockets: Mutex<Vec<i32>>,
}

/// A running proxy. Dropping it stops it: no new connection is accepted,
/// and every live one is shut down.
pub struct Proxy {
    addr: SocketAddr,
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proxy({})", self.addr)
    }
}

impl Proxy {
    /// Binds 127.0.0.1 on a port the kernel picks and starts accepting.
    /// With `injection` (declarations and their values), it makes the
    /// run's CA and its files under `temp` (see `mitm.rs`).
    ///
    /// Errors when the socket cannot be bound, the thread cannot start, or
    /// the CA or its files cannot be made.
    pub(crate) fn start(
        rules: Vec<HostRule>,
        injection: Option<(&super::inject::Injection, super::inject::Secrets)>,
        temp: &std::path::Path,
    ) -> io::Result<Proxy> {
        let injector = match injection {
            Some((decl, secrets)) if !secrets.is_empty() => {
                Some(Arc::new(super::mitm::Injector::new(decl, secrets, temp)?))
            }
            _ => None,
        };
        let listener = Arc::new(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?);
        let addr = listener.local_addr()?;
        let token = random_token()?;
        let shared = Arc::new(Shared {
            credentials: format!("Basic {}", base64(format!("{USER}:{token}").as_bytes())),
            url: format!("http://{USER}:{token}@{addr}"),
            own_addrs: own_addresses(),
            tree: Mutex::new(None),
            port: addr.port(),
            rules,
            injector,
            stats: Mutex::new(NetworkStats::default()),
            stop: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            sockets: Mutex::new(Vec::new()),
        });
        let (l, s) = (listener.clone(), shared.clone());
        std::thread::Builder::new()
            .name("network-proxy".into())
            .spawn(move || accept_loop(&l, &s))?;
        Ok(Proxy {
            addr,
            listener,
            shared,
        })
    }

    /// Where it listens: 127.0.0.1 and its port.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy variables for the command: `http://dsh-exec:TOKEN@127.0.0.1:PORT`
    /// in `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and their lower-case
    /// forms, and loopback in `NO_PROXY`/`no_proxy` (the gate lets loopback
    /// through directly). The token is this run's: another process on the
    /// host, another run's command among them, gets 407 without it.
    ///
    /// With credentials, also the CA variables (see `mitm::Injector::env`;
    /// `current` is the command's environment so far, whose CA files are
    /// kept in the bundles) and the phantoms.
    pub fn env(
        &self,
        current: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> Vec<(String, String)> {
        let url = self.shared.url.clone();
        let mut env: Vec<(String, String)> = [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ]
        .into_iter()
        .map(|k| (k.to_string(), url.clone()))
        .collect();
        // Loopback goes direct, but for an injection host (a local test
        // server), whose requests must pass the proxy to get their
        // credential.
        let direct: Vec<&str> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .filter(|h| {
                !self.shared.injector.as_ref().is_some_and(|i| {
                    i.rules
                        .iter()
                        .any(|r| r.host.names_exactly(h) || r.host.matches(h, 443))
                })
            })
            .collect();
        for k in ["NO_PROXY", "no_proxy"] {
            env.push((k.into(), direct.join(",")));
        }
        if let Some(inj) = &self.shared.injector {
            env.extend(inj.env(current));
        }
        env
    }

    /// Serves the processes of `tree` from now on (none before).
    pub(crate) fn admit(&self, tree: crate::proctree::Tree) {
        if let Ok(mut t) = self.shared.tree.lock() {
            *t = Some(tree);
        }
    }

    /// What it saw so far.
    pub fn stats(&self) -> NetworkStats {
        self.shared
            .stats
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(inj) = &self.shared.injector {
            inj.remove_files();
        }
        // A listening socket shut down wakes its accept(2) with EINVAL. A
        // descriptor in `sockets` is removed by its connection before it
        // is closed.
        crate::sys::sock::shutdown(self.listener.as_raw_fd());
        if let Ok(socks) = self.shared.sockets.lock() {
            for fd in socks.iter() {
                crate::sys::sock::shutdown(*fd);
            }
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let conn = listener.accept();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok((client, peer)) = conn else {
            // EMFILE and the like: wait a little rather than spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        // Another process of the host, another run's command among them
        // (which may read this run's environment where it keeps
        // CAP_SYS_PTRACE), is turned away before it can hold a slot.
        if !from_the_run(shared, peer) {
            let _ = (&client).write_all(&response(407, "this proxy serves one dsh-exec run only"));
            continue;
        }
        if shared.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            let _ = (&client).write_all(&response(503, "too many proxy connections at once"));
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("network-proxy-conn".into())
            .spawn(move || {
                let guard = Registered::new(&s, &client);
                serve(client, &s);
                drop(guard);
                s.live.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Whether the client at `peer` (a loopback address and port) is a socket
/// that a process of the run holds: its inode found in /proc/net/tcp and
/// tcp6 (proc(5): the entry whose local port is the client's and remote
/// port this proxy's), then among the run's open descriptors.
fn from_the_run(shared: &Shared, peer: SocketAddr) -> bool {
    let Ok(tree) = shared.tree.lock() else {
        return false;
    };
    let Some(tree) = tree.as_ref() else {
        return false;
    };
    let (local, remote) = (
        format!(":{:04X}", peer.port()),
        format!(":{:04X}", shared.port),
    );
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9
                && f[1].ends_with(&local)
                && f[2].ends_with(&remote)
                && let Ok(inode) = f[9].parse::<u64>()
            {
                inodes.push(inode);
            }
        }
    }
    crate::proctree::tree_holds(tree, &inodes)
}

/// Compares two byte strings in time that depends on their lengths alone.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// A socket registered for shutdown at stop, unregistered when dropped.
pub(super) struct Registered<'a> {
    shared: &'a Shared,
    fd: i32,
}

impl<'a> Registered<'a> {
    pub(super) fn new(shared: &'a Shared, sock: &TcpStream) -> Registered<'a> {
        let fd = sock.as_raw_fd();
        if let Ok(mut s) = shared.sockets.lock() {
            s.push(fd);
        }
        // Stopped while this registered: shut it down now.
        if shared.stop.load(Ordering::SeqCst) {
            let _ = sock.shutdown(Shutdown::Both);
        }
        Registered { shared, fd }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.shared.sockets.lock() {
            s.retain(|fd| *fd != self.fd);
        }
    }
}

/// A response with a one-line plain-text body.
pub(super) fn response(status: u16, line: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        407 => "Proxy Authentication Required",
        403 => "Forbidden",
        421 => "Misdirected Request",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("dsh-exec: {line}\n");
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\nX-Dsh-Exec-Proxy: refused\r\n{}\r\n{body}",
        body.len(),
        if status == 407 {
            "Proxy-Authenticate: Basic realm=\"dsh-exec\"\r\n"
        } else {
            ""
        }
    )
    .into_bytes()
}

/// A request head as read: what it asks for, and what to send upstream.
struct Head {
    /// The host as asked (normalized) and the port.
    host: String,
    port: u16,
    /// `CONNECT`: a tunnel.
    tunnel: bool,
    /// For a plain request: the head to send upstream (it may hold a
    /// credential: zeroed when dropped).
    upstream_head: zeroize::Zeroizing<Vec<u8>>,
    /// Bytes read past the head (the start of a body, or of the tunnel).
    rest: Vec<u8>,
    /// For a plain request: how long its body is.
    body: Body,
    /// A `HEAD` request (its response has no body).
    head_request: bool,
    /// It carried this run's credentials.
    authorized: bool,
    /// Why the injection rules refuse it (`inject::judge`).
    refusal: Option<String>,
    /// The credential put into it.
    used: Option<String>,
    /// It went to a host a rule names, uncovered (see `inject::Injected`).
    missed: bool,
}

/// Splits an authority (`host:port`, `[v6]:port`, `host`) into the host
/// (normalized) and the port (`default` when absent).
fn authority(auth: &str, default: Option<u16>) -> Option<(String, u16)> {
    if auth.contains('@') || auth.is_empty() {
        return None;
    }
    let (host, port) = if let Some(rest) = auth.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return None,
        };
        (h.to_string(), port)
    } else {
        match auth.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (normalize(h), Some(p)),
            Some(_) => return None,
            None => (normalize(auth), None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        None => default?,
    };
    if host.is_empty() {
        return None;
    }
    Some((host, port))
}

/// The Host field of a request to `host` (normalized, or an address)
/// and `port`: `[v6]` for an IPv6 address, and the port unless it is
/// http's default, 80 (RFC 9110 4.2.1, 7.2).
fn host_field(host: &str, port: u16) -> String {
    let host = match parse_addr(host) {
        Some(IpAddr::V6(a)) => format!("[{a}]"),
        _ if host.contains(':') => format!("[{host}]"),
        _ => host.to_string(),
    };
    if port == 80 {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// Header fields a proxy does not pass on, whatever `Connection` says
/// (RFC 9110 7.6.1: Connection, Proxy-Connection, Keep-Alive, TE,
/// Upgrade; Trailer, of RFC 7230's list; and the proxy's own credentials
/// and challenge). Transfer-Encoding is in RFC 9110's list for proxies
/// that re-frame a body; this one passes each body on as it came, so the
/// field goes with it.
pub(super) fn hop_by_hop(name: &str) -> bool {
    [
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

/// The field names a message's `Connection` fields list (RFC 9110 7.6.1:
/// comma-separated connection options, each naming a field meant for the
/// next hop alone), in lower case.
pub(super) fn connection_options(headers: &[httparse::Header]) -> Vec<String> {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| h.value.split(|b| *b == b','))
        .map(|o| String::from_utf8_lossy(o).trim().to_ascii_lowercase())
        .filter(|o| !o.is_empty())
        .collect()
}

/// Whether `name` frames a message's body: Content-Length or
/// Transfer-Encoding.
pub(super) fn frames_body(name: &str) -> bool {
    name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
}

/// Reads and parses the request head, or answers the client's error.
fn read_head(
    client: &mut TcpStream,
    credentials: &str,
    injector: Option<&super::mitm::Injector>,
) -> Result<Head, (u16, String)> {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(0) => return Err((400, "the connection closed before a request".into())),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err((400, "no complete request head in time".into())),
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let _ = client.set_read_timeout(None);
                let mut head = head_of(&req, buf[len..].to_vec(), injector)?;
                head.authorized = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("proxy-authorization")
                        && same_bytes(h.value, credentials.as_bytes())
                });
                return Ok(head);
            }
            Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => continue,
            Ok(httparse::Status::Partial) => {
                return Err((400, format!("a request head longer than {HEAD_MAX} bytes")));
            }
            Err(e) => return Err((400, format!("not an HTTP request ({e})"))),
        }
    }
}

fn head_of(
    req: &httparse::Request,
    rest: Vec<u8>,
    injector: Option<&super::mitm::Injector>,
) -> Result<Head, (u16, String)> {
    let method = req.method.unwrap_or("");
    let target = req.path.unwrap_or("");
    if method.eq_ignore_ascii_case("CONNECT") {
        // The target is what is judged and dialed; the request's own
        // headers, Host among them, go nowhere, and what the tunnel
        // carries is the client's (TLS end to end: nothing to rewrite).
        let (host, port) = authority(target, None)
            .ok_or_else(|| (400, format!("CONNECT needs host:port, not '{target}'")))?;
        return Ok(Head {
            host,
            port,
            tunnel: true,
            upstream_head: Default::default(),
            rest,
            body: Body::Empty,
            head_request: false,
            authorized: false,
            refusal: None,
            used: None,
            missed: false,
        });
    }
    let after_scheme = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
        .ok_or_else(|| {
            (
                400,
                format!(
                    "a proxy request needs an absolute http:// URI or CONNECT (https), not '{target}'"
                ),
            )
        })?;
    let end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    let (auth, path) = after_scheme.split_at(end);
    let (host, port) =
        authority(auth, Some(80)).ok_or_else(|| (400, format!("a bad host in '{target}'")))?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    // Host names the server's virtual host, and a server behind the listed
    // address may serve others: what goes upstream is the target judged.
    // A proxy that gets the absolute form ignores the Host it was sent and
    // sends the target's authority instead (RFC 9112 3.2.2, RFC 9110 7.2);
    // several Host lines, or none in HTTP/1.1, are answered 400, as a
    // server must (RFC 9112 3.2).
    let hosts = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .count();
    let version = req.version.unwrap_or(1).min(1);
    if hosts > 1 {
        return Err((
            400,
            format!("a request with {hosts} Host headers: send one (RFC 9112 3.2)"),
        ));
    }
    if hosts == 0 && version == 1 {
        return Err((
            400,
            "an HTTP/1.1 request without a Host header (RFC 9112 3.2)".into(),
        ));
    }
    // One request per connection: its body must end where the upstream
    // will think it ends (see `http1`).
    let body = request_body(version, req.headers).map_err(|e| (400, e))?;
    // The injection rules: a phantom going where its credential does not,
    // or the credential going where a rule says.
    let (mut refusal, mut injected) = (None, None);
    if let Some(inj) = injector {
        let pairs: Vec<(&str, &[u8])> = req.headers.iter().map(|h| (h.name, h.value)).collect();
        // Plain http://: never a credential (`tls` false); a phantom is
        // judged all the same.
        match super::inject::judge(
            &inj.rules,
            &inj.secrets,
            method,
            &host,
            port,
            &path,
            &pairs,
            false,
        ) {
            Ok(i) => injected = Some(i),
            Err(reason) => refusal = Some(reason),
        }
    }
    let path = injected
        .as_ref()
        .map_or(path.as_str(), |i| i.target.as_str());
    let drop_field = injected.as_ref().and_then(|i| i.drop_field.as_deref());
    let mut head = zeroize::Zeroizing::new(
        format!(
            "{method} {path} HTTP/1.{version}\r\nHost: {}\r\n",
            host_field(&host, port)
        )
        .into_bytes(),
    );
    // The fields `Connection` names are the client's hop's alone (RFC 9110
    // 7.6.1), but for those that frame the body, which the upstream needs
    // to find its end: a request that names one is refused.
    let listed = connection_options(req.headers);
    if let Some(f) = listed.iter().find(|f| frames_body(f)) {
        return Err((
            400,
            format!("a Connection field naming {f}, which frames the body (RFC 9110 7.6.1)"),
        ));
    }
    for h in req.headers.iter() {
        if hop_by_hop(h.name)
            || h.name.eq_ignore_ascii_case("host")
            || listed.iter().any(|f| h.name.eq_ignore_ascii_case(f))
            || drop_field.is_some_and(|f| h.name.eq_ignore_ascii_case(f))
        {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    if let Some((name, value)) = injected.as_ref().and_then(|i| i.add.as_ref()) {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    let missed = injected.as_ref().is_some_and(|i| i.missed);
    let used = injected.and_then(|i| i.used);
    Ok(Head {
        host,
        port,
        tunnel: false,
        upstream_head: head,
        rest,
        body,
        head_request: method == "HEAD",
        authorized: false,
        refusal,
        used,
        missed,
    })
}

/// The rules' verdict on `host:port`: the addresses the proxy may connect
/// to, or the refusal (status, line for the client, reason for the result).
fn decide(
    rules: &[HostRule],
    own: &[IpAddr],
    host: &str,
    port: u16,
) -> Result<Vec<SocketAddr>, (u16, String)> {
    let matching: Vec<&HostRule> = rules.iter().filter(|r| r.matches(host, port)).collect();
    if matching.is_empty() {
        let other_port = rules.iter().any(|r| {
            (HostRule {
                port: Some(port),
                ..r.clone()
            })
            .matches(host, port)
        });
        if other_port {
            return Err((
                403,
                format!(
                    "{NOT_LISTED} for port {port} (a host without :PORT allows ports 80 and 443)"
                ),
            ));
        }
        return Err((403, NOT_LISTED.into()));
    }
    let exact = matching.iter().any(|r| r.names_exactly(host));
    let resolved: Vec<SocketAddr> = match parse_addr(host) {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => match (host, port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err((502, format!("cannot resolve {host}: {e}"))),
        },
    };
    keep(rules, own, host, exact, resolved)
}

/// The addresses `host` resolved to that the rules let the proxy reach
/// (`exact`: a rule names the host itself), or the refusal.
fn keep(
    rules: &[HostRule],
    own: &[IpAddr],
    host: &str,
    exact: bool,
    resolved: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, (u16, String)> {
    let mut refused = None;
    let kept: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|a| {
            let ip = super::addr::unmapped(a.ip());
            // The address, or an IPv4 address it carries (6to4, Teredo,
            // NAT64, ISATAP, ...), judged as that address would be.
            let class = classify(ip).or_else(|| {
                let inside = super::addr::ipv4_inside(ip);
                own.iter()
                    .map(|o| super::addr::unmapped(*o))
                    .find(|o| *o == ip || matches!(o, IpAddr::V4(v4) if inside.contains(v4)))
                    .map(|o| Special {
                        class: "an address of this host",
                        via: match (o, ip) {
                            (IpAddr::V4(v4), IpAddr::V6(six)) => embedded_ipv4(six)
                                .into_iter()
                                .find(|(_, inner)| *inner == v4),
                            _ => None,
                        },
                    })
            });
            let listed = rules
                .iter()
                .any(|r| r.names_addr(a.ip()) || r.names_addr(ip));
            match class {
                None => true,
                // A metadata service only by its address: a name, listed
                // or not, may be its owner's to point anywhere.
                Some(c) if c.class == METADATA && !listed => {
                    refused.get_or_insert((a.ip(), c));
                    false
                }
                Some(_) if exact || listed => true,
                Some(c) => {
                    refused.get_or_insert((a.ip(), c));
                    false
                }
            }
        })
        .collect();
    if kept.is_empty() {
        return Err(match refused {
            Some((ip, c)) => (
                403,
                format!(
                    "resolves to {ip}{}, {}: only a host or address listed exactly may \
                     reach it (DNS rebinding)",
                    match c.via {
                        Some((form, v4)) => format!(" ({form} of {v4})"),
                        None => String::new(),
                    },
                    c.class
                ),
            ),
            None => (502, format!("{host} has no address")),
        });
    }
    Ok(kept)
}

pub(super) fn connect_any(addrs: &[SocketAddr]) -> Result<TcpStream, (u16, String)> {
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some((*a, e)),
        }
    }
    Err(match last {
        Some((a, e)) if e.kind() == io::ErrorKind::TimedOut => {
            (504, format!("{a} did not answer in time"))
        }
        Some((a, e)) => (502, format!("cannot connect to {a}: {e}")),
        None => (502, "no address to connect to".into()),
    })
}

/// Answers the client with a refusal and ends its connection: what it
/// sent past the request head is read and dropped for a while, so that
/// the close does not answer it with a reset that could cut the answer
/// short.
fn refuse(client: &TcpStream, status: u16, line: &str) {
    let mut c = client;
    if c.write_all(&response(status, line)).is_ok() {
        let _ = client.shutdown(Shutdown::Write);
        drain(client, Some(std::time::Instant::now() + LINGER));
    }
}

fn serve(mut client: TcpStream, shared: &Shared) {
    let injector = shared.injector.as_deref();
    let head = match read_head(&mut client, &shared.credentials, injector) {
        Ok(h) => h,
        Err((status, line)) => return refuse(&client, status, &line),
    };
    if !head.authorized {
        return refuse(&client, 407, "this proxy serves one dsh-exec run only");
    }
    let shown = match parse_addr(&head.host) {
        Some(IpAddr::V6(a)) => format!("[{a}]:{}", head.port),
        _ => format!("{}:{}", head.host, head.port),
    };
    // A phantom going elsewhere is told as such, listed host or not.
    if let Some(reason) = &head.refusal {
        if let Ok(mut s) = shared.stats.lock() {
            s.deny(&head.host, head.port, reason.clone());
        }
        return refuse(&client, 403, &format!("{shown} refused: {reason}"));
    }
    let addrs = match decide(&shared.rules, &shared.own_addrs, &head.host, head.port) {
        Ok(a) => a,
        Err((status, reason)) => {
            if status == 403
                && let Ok(mut s) = shared.stats.lock()
            {
                s.deny(&head.host, head.port, reason.clone());
            }
            let line = if status == 403 && reason.starts_with(NOT_LISTED) {
                let mut list: Vec<String> =
                    shared.rules.iter().take(8).map(|r| r.to_string()).collect();
                if shared.rules.len() > 8 {
                    list.push(format!("... ({} hosts)", shared.rules.len()));
                }
                format!("{shown} refused: {reason}: {}", list.join(","))
            } else {
                format!("{shown} refused: {reason}")
            };
            return refuse(&client, status, &line);
        }
    };
    if head.tunnel
        && let Some(inj) = injector.filter(|i| i.intercepts(&head.host, head.port))
    {
        if let Ok(mut s) = shared.stats.lock() {
            *s.allowed.entry(head.host.clone()).or_insert(0) += 1;
        }
        let _ = client.set_nodelay(true);
        return super::mitm::serve(
            client, head.rest, &head.host, head.port, &addrs, shared, inj,
        );
    }
    let mut upstream = match connect_any(&addrs) {
        Ok(u) => u,
        Err((status, line)) => return refuse(&client, status, &line),
    };
    if let Ok(mut s) = shared.stats.lock() {
        let key = parse_addr(&head.host).map_or_else(|| head.host.clone(), |ip| ip.to_string());
        *s.allowed.entry(key.clone()).or_insert(0) += 1;
        s.injected(&key, head.used.as_deref(), head.missed);
    }
    let _guard = Registered::new(shared, &upstream);
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    for sock in [&client, &upstream] {
        socket_buffers(sock);
    }
    if head.tunnel {
        // What follows the CONNECT's head is the tunnel's first bytes.
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_ok()
            && (head.rest.is_empty() || upstream.write_all(&head.rest).is_ok())
        {
            relay(client, upstream);
        }
    } else if upstream.write_all(&head.upstream_head).is_ok() {
        exchange(client, upstream, head, injector);
    }
}

/// How long a client may keep its connection open after its response has
/// been sent, while the proxy reads and drops what it sends: 2 s.
const LINGER: Duration = Duration::from_secs(2);

/// Carries one plain request and its response, then closes both
/// connections. The request's body goes on as its head frames it, and not
/// a byte more: whatever the client sends after it (a next request, for
/// any host) is read and dropped, so a client that reuses the connection
/// reaches nothing unjudged, whatever the upstream makes of `Connection:
/// close` (see [`super::http1`]). Interim (1xx) responses go back as
/// they come, then one final response, which says `Connection: close`.
fn exchange(
    client: TcpStream,
    upstream: TcpStream,
    head: Head,
    injector: Option<&super::mitm::Injector>,
) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let refused = Arc::new(Mutex::new(None));
    let (done, ended) = std::sync::mpsc::channel();
    let (r2, rest, body) = (refused.clone(), head.rest, head.body);
    let sender = std::thread::Builder::new()
        .name("network-proxy-request".into())
        .spawn(move || {
            send_body(&rest, &c2, &u2, body, &r2);
            drain(&c2, None);
            let _ = done.send(());
        });
    let Ok(sender) = sender else {
        return;
    };
    relay_response(&upstream, &client, head.head_request, &refused, injector);
    // The client has its response, and the upstream has been heard out.
    // The client's socket is read until the client closes it, for a
    // while: a close with unread bytes would answer them with a reset,
    // which could cut the response short (RFC 9112 9.6).
    let _ = client.shutdown(Shutdown::Write);
    let _ = upstream.shutdown(Shutdown::Both);
    if ended.recv_timeout(LINGER).is_err() {
        let _ = client.shutdown(Shutdown::Both);
    }
    let _ = sender.join();
}

/// Sends a request's body to the upstream as `body` frames it: the bytes
/// read with the head first, then the client's. A body that breaks its
/// framing is not sent on past the break: the upstream connection is shut
/// down and the reason left in `refused`, for the client's 400.
fn send_body(
    first: &[u8],
    client: &TcpStream,
    upstream: &TcpStream,
    body: Body,
    refused: &Mutex<Option<String>>,
) {
    match copy_body(first, client, upstream, body, Chunked::request()) {
        Ok(()) | Err(Ended::Broken) => {}
        // The client stopped before its body ended: so does the request.
        Err(Ended::Early) => {
            let _ = upstream.shutdown(Shutdown::Write);
        }
        Err(Ended::Framing(why)) => {
            if let Ok(mut r) = refused.lock() {
                *r = Some(why);
            }
            let _ = upstream.shutdown(Shutdown::Both);
        }
    }
}

/// Reads and drops what the client sends, until it closes its end, the
/// proxy shuts the socket down, or `until`.
fn drain(mut client: &TcpStream, until: Option<std::time::Instant>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        if let Some(t) = until {
            match t.checked_duration_since(std::time::Instant::now()) {
                Some(left) if !left.is_zero() => {
                    let _ = client.set_read_timeout(Some(left));
                }
                _ => return,
            }
        }
        match client.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The most header fields of a response head: 256.
const RESPONSE_FIELDS: usize = 256;

/// Relays the upstream's answer to one request: interim (1xx) heads as
/// they are, then the final head with the upstream's connection fields
/// replaced by `Connection: close` and `Proxy-Connection: close` (the
/// client connection ends with this response), then its body as framed.
/// When no final head comes, the client gets 400 (its body broke its
/// framing: `refused`) or 502.
fn relay_response(
    upstream: &TcpStream,
    mut client: &TcpStream,
    head_request: bool,
    refused: &Mutex<Option<String>>,
    injector: Option<&super::mitm::Injector>,
) {
    let mut buf = Vec::new();
    loop {
        let (len, status, out, body) =
            match response_head(upstream, &mut buf, head_request, injector) {
                Ok(h) => h,
                Err(why) => {
                    let reply = match refused.lock().ok().and_then(|mut r| r.take()) {
                        Some(r) => response(400, &r),
                        None => response(502, &why),
                    };
                    let _ = client.write_all(&reply);
                    return;
                }
            };
        if status == 101 {
            // Upgrade never goes upstream (a hop-by-hop field).
            let _ = client.write_all(&response(
                502,
                "the upstream switched protocols, which no request through the proxy asks for",
            ));
            return;
        }
        if (100..200).contains(&status) {
            // An interim head as it came, but for a field holding a
            // secret (see `response_head`).
            let head = if injector.is_some() {
                &out
            } else {
                &buf[..len]
            };
            if client.write_all(head).is_err() {
                return;
            }
            buf.drain(..len);
            continue;
        }
        if client.write_all(&out).is_ok() {
            match injector {
                // Trailer fields are header fields too: re-framed, with
                // those holding a secret redacted.
                Some(inj) if body == Body::Chunked => {
                    let mut rest = buf[len..].to_vec();
                    let (mut from, mut to) = (upstream, client);
                    let _ = super::mitm::copy_chunked_redacted(&mut rest, &mut from, &mut to, inj);
                }
                _ => {
                    let _ = copy_body(&buf[len..], upstream, client, body, Chunked::response());
                }
            }
        }
        return;
    }
}

/// Reads the upstream's next response head into `buf` (which may hold
/// bytes already read): its length, its status, the head to send the
/// client, and how its body is framed; or why there is none.
fn response_head(
    mut upstream: &TcpStream,
    buf: &mut Vec<u8>,
    head_request: bool,
    injector: Option<&super::mitm::Injector>,
) -> Result<(usize, u16, Vec<u8>, Body), String> {
    read_response_head(&mut upstream, buf, |resp, len| {
        let status = resp.code.unwrap_or(0);
        let body = response_body(head_request, status, resp.headers)?;
        let reason = resp.reason.unwrap_or("");
        let reason = match injector {
            Some(i) if i.redacts(reason.as_bytes()) => super::mitm::REDACTED,
            _ => reason,
        };
        let mut out =
            format!("HTTP/1.{} {status} {reason}\r\n", resp.version.unwrap_or(1)).into_bytes();
        // The fields `Connection` names are the upstream's hop's
        // alone (RFC 9110 7.6.1), but for those that frame the
        // body, which goes on as they frame it.
        let listed = connection_options(resp.headers);
        for h in resp.headers.iter() {
            // Transfer-Encoding frames the body it came with:
            // a Content-Length beside it goes (RFC 9112 6.3).
            if hop_by_hop(h.name)
                || (body == Body::Chunked && h.name.eq_ignore_ascii_case("content-length"))
                || (!frames_body(h.name) && listed.iter().any(|f| h.name.eq_ignore_ascii_case(f)))
            {
                continue;
            }
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            if injector.is_some_and(|i| i.redacts(h.value)) {
                out.extend_from_slice(super::mitm::REDACTED.as_bytes());
            } else {
                out.extend_from_slice(h.value);
            }
            out.extend_from_slice(b"\r\n");
        }
        if (100..200).contains(&status) {
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(b"Connection: close\r\nProxy-Connection: close\r\n\r\n");
        }
        Ok((len, status, out, body))
    })
}

/// Reads `upstream` into `buf` (which may hold bytes already) until it
/// holds a whole response head (at most [`HEAD_MAX`] bytes, at most
/// [`RESPONSE_FIELDS`] fields), then gives the parsed head and its length
/// to `take`; or says why there is none.
pub(super) fn read_response_head<R: Read, T>(
    upstream: &mut R,
    buf: &mut Vec<u8>,
    mut take: impl FnMut(&httparse::Response, usize) -> Result<T, String>,
) -> Result<T, String> {
    let mut chunk = [0u8; 8192];
    loop {
        if !buf.is_empty() {
            let mut fields = vec![httparse::EMPTY_HEADER; RESPONSE_FIELDS];
            let mut resp = httparse::Response::new(&mut fields);
            match resp.parse(buf) {
                Ok(httparse::Status::Complete(len)) => return take(&resp, len),
                Ok(httparse::Status::Partial) if buf.len() < HEAD_MAX => {}
                Ok(httparse::Status::Partial) => {
                    return Err(format!(
                        "the upstream's response head is longer than {HEAD_MAX} bytes"
                    ));
                }
                Err(e) => return Err(format!("the upstream's response is not HTTP ({e})")),
            }
        }
        match upstream.read(&mut chunk) {
            Ok(0) => return Err("the upstream closed the connection without a response".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("the upstream's response failed: {e}")),
        }
    }
}

/// Why a body was not copied whole.
enum Ended {
    /// The sender closed before the body's end.
    Early,
    /// A read or a write failed.
    Broken,
    /// The body broke its framing (the reason); nothing past the break
    /// was passed on.
    Framing(String),
}

/// Copies one body framed as `body` from `from` to `to`: first what of
/// `first` (bytes read with the head) belongs to it, then from `from`,
/// never reading past its end but for chunked, whose bytes past the end
/// are dropped. `chunked` reads a chunked body.
fn copy_body(
    first: &[u8],
    mut from: &TcpStream,
    mut to: &TcpStream,
    body: Body,
    mut chunked: Chunked,
) -> Result<(), Ended> {
    let n = match body {
        Body::Empty => return Ok(()),
        Body::Length(n) => Some(n),
        Body::UntilClose => None,
        Body::Chunked => {
            let mut pass = |data: &[u8]| match chunked.feed(data) {
                Ok(k) => match to.write_all(&data[..k]) {
                    Ok(()) => Ok(chunked.done()),
                    Err(_) => Err(Ended::Broken),
                },
                Err((_, why)) => Err(Ended::Framing(why)),
            };
            if pass(first)? {
                return Ok(());
            }
            let mut buf = vec![0u8; RELAY_BUF];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) => return Err(Ended::Early),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return Err(Ended::Broken),
                };
                if pass(&buf[..n])? {
                    return Ok(());
                }
            }
        }
    };
    let k = n.map_or(first.len(), |n| (first.len() as u64).min(n) as usize);
    to.write_all(&first[..k]).map_err(|_| Ended::Broken)?;
    copy_upto(from, to, n.map(|n| n - k as u64))
}

/// Copies `from` to `to`: `limit` bytes (an early end of file is
/// [`Ended::Early`]), or all until end of file when `None`; with splice(2)
/// where the kernel allows it, else through a buffer.
fn copy_upto(mut from: &TcpStream, mut to: &TcpStream, limit: Option<u64>) -> Result<(), Ended> {
    let mut left = limit;
    match splice_upto(from, to, left) {
        Ok(moved) => {
            return match left {
                Some(l) if moved < l => Err(Ended::Early),
                _ => Ok(()),
            };
        }
        Err((moved, nix::libc::EINVAL)) => left = left.map(|l| l - moved),
        Err(_) => return Err(Ended::Broken),
    }
    let mut buf = vec![0u8; RELAY_BUF];
    loop {
        let want = match left {
            Some(0) => return Ok(()),
            Some(l) => l.min(RELAY_BUF as u64) as usize,
            None => RELAY_BUF,
        };
        match from.read(&mut buf[..want]) {
            Ok(0) if left.is_none() => return Ok(()),
            Ok(0) => return Err(Ended::Early),
            Ok(n) => {
                to.write_all(&buf[..n]).map_err(|_| Ended::Broken)?;
                left = left.map(|l| l - n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Ended::Broken),
        }
    }
}

/// Copies bytes both ways until each side has ended its half: one thread
/// per direction, each passing on the end of its stream as a half-close.
fn relay(client: TcpStream, upstream: TcpStream) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let back = std::thread::Builder::new()
        .name("network-proxy-relay".into())
        .spawn(move || pipe(u2, c2));
    pipe(client, upstream);
    if let Ok(t) = back {
        let _ = t.join();
    }
}

/// Sets 4 MiB receive and send buffers on a relayed socket (socket(7):
/// the kernel doubles the value, within net.core.[rw]mem_max): fewer
/// wake-ups per byte relayed.
fn socket_buffers(sock: &TcpStream) {
    for opt in [nix::libc::SO_RCVBUF, nix::libc::SO_SNDBUF] {
        let _ = crate::sys::sock::set_int(sock, nix::libc::SOL_SOCKET, opt, 4 << 20);
    }
}

/// How much one splice(2) moves at most, and the pipe's size: 1 MiB.
const SPLICE_CHUNK: usize = 1 << 20;

/// Moves `from` to `to` through a pipe with splice(2), without copying
/// the bytes through this process, until end of file or `limit` bytes:
/// `Ok(moved)` then; `Err((moved, errno))` when a side failed, with
/// `EINVAL` only where splice cannot be used on these sockets (what is
/// left may then be copied through a buffer).
fn splice_upto(from: &TcpStream, to: &TcpStream, limit: Option<u64>) -> Result<u64, (u64, i32)> {
    use nix::fcntl::{FcntlArg, SpliceFFlags, fcntl, splice};
    use nix::libc;
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| (0, e as i32))?;
    // A smaller pipe works too.
    let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(SPLICE_CHUNK as libc::c_int));
    // No SPLICE_F_MORE: on the socket it is MSG_MORE (splice(2), tcp(7)
    // TCP_CORK), which holds a partial segment back for up to 200 ms
    // waiting for more; a request and its answer through a tunnel then
    // wait that long each way.
    let flags = SpliceFFlags::SPLICE_F_MOVE;
    let mut moved = 0u64;
    loop {
        let want = match limit {
            Some(l) if l == moved => return Ok(moved),
            Some(l) => (l - moved).min(SPLICE_CHUNK as u64) as usize,
            None => SPLICE_CHUNK,
        };
        let n = match splice(from, None, &w, None, want, flags) {
            Ok(0) => return Ok(moved),
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err((moved, e as i32)),
        };
        let mut left = n;
        while left > 0 {
            match splice(&r, None, to, None, left, flags) {
                Ok(0) => {
                    // Not expected with bytes in the pipe; answered as the
                    // errno says, as for a failure.
                    return Err((
                        moved,
                        match nix::errno::Errno::last_raw() {
                            libc::EINVAL => libc::EPIPE,
                            e => e,
                        },
                    ));
                }
                Ok(m) => left -= m,
                Err(nix::errno::Errno::EINTR) => continue,
                // Bytes are in the pipe: not a case for the fallback.
                Err(nix::errno::Errno::EINVAL) => return Err((moved, libc::EPIPE)),
                Err(e) => return Err((moved, e as i32)),
            }
        }
        moved += n as u64;
    }
}

/// Copies `from` to `to` until end of file or an error, then half-closes
/// `to` (and shuts `from` on an error, so the other direction ends too):
/// with splice(2) where the kernel allows it, else through a buffer.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    match splice_upto(&from, &to, None) {
        Ok(_) => {
            let _ = to.shutdown(Shutdown::Write);
            return;
        }
        Err((_, nix::libc::EINVAL)) => {}
        Err(_) => {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let mut buf = vec![0u8; RELAY_BUF];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &str) -> Vec<HostRule> {
        super::super::rules::parse_list(list).unwrap()
    }

    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(
            authority("Example.org:443", None),
            Some(("example.org".into(), 443))
        );
        assert_eq!(authority("[::1]:80", None), Some(("::1".into(), 80)));
        assert_eq!(authority("a.org", Some(80)), Some(("a.org".into(), 80)));
        assert_eq!(authority("a.org", None), None);
        assert_eq!(authority("u@a.org:80", None), None);
        assert_eq!(authority("a.org:0", None), None);
        assert_eq!(authority("::1:80", None), None);
    }

    #[test]
    fn plain_requests_go_upstream_in_origin_form_without_proxy_headers() {
        let raw = b"GET http://a.org:8080/x?y HTTP/1.1\r\nHost: a.org:8080\r\n\
            Proxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
            Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\nAccept: */*\r\n\r\nBODY";
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(raw).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        let head = head_of(&req, raw[n..].to_vec(), None).ok().unwrap();
        assert_eq!(
            (head.host.as_str(), head.port, head.tunnel),
            ("a.org", 8080, false)
        );
        assert_eq!(
            String::from_utf8(head.upstream_head.to_vec()).unwrap(),
            "GET /x?y HTTP/1.1\r\nHost: a.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(head.rest, b"BODY");
        // A field that frames the body is not the client's hop's to drop.
        let framing = parsed(
            b"POST http://a.org/ HTTP/1.1\r\nHost: a.org\r\nConnection: close, Content-Length\r\n\
            Content-Length: 1\r\n\r\nx",
        );
        assert_eq!(framing.err().unwrap().0, 400);
    }

    fn parsed(raw: &[u8]) -> Result<Head, (u16, String)> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let n = match req.parse(raw).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("partial"),
        };
        head_of(&req, raw[n..].to_vec(), None)
    }

    #[test]
    fn host_is_the_target_s_authority_and_one_host_line_is_required() {
        let upstream = |raw: &[u8]| {
            String::from_utf8(parsed(raw).ok().unwrap().upstream_head.to_vec()).unwrap()
        };
        // Another host, in any case: replaced, and sent first.
        assert_eq!(
            upstream(b"GET http://A.org./x HTTP/1.1\r\nAccept: */*\r\nhOsT: other.example\r\n\r\n"),
            "GET /x HTTP/1.1\r\nHost: a.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            upstream(b"GET http://[::FFFF:7f00:1]:8080/ HTTP/1.1\r\nHost: x\r\n\r\n"),
            "GET / HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:8080\r\nConnection: close\r\n\r\n"
        );
        // HTTP/1.0 may leave it out: it is added.
        assert_eq!(
            upstream(b"GET http://a.org:81/ HTTP/1.0\r\n\r\n"),
            "GET / HTTP/1.0\r\nHost: a.org:81\r\nConnection: close\r\n\r\n"
        );
        for raw in [
            &b"GET http://a.org/ HTTP/1.1\r\nHost: a.org\r\nHost: b.org\r\n\r\n"[..],
            b"GET http://a.org/ HTTP/1.0\r\nHost: a.org\r\nhost: a.org\r\n\r\n",
            b"GET http://a.org/ HTTP/1.1\r\nAccept: */*\r\n\r\n",
        ] {
            assert_eq!(parsed(raw).err().unwrap().0, 400);
        }
        // CONNECT: the target alone counts.
        let h = parsed(b"CONNECT a.org:443 HTTP/1.1\r\nHost: b.org:443\r\n\r\n")
            .ok()
            .unwrap();
        assert_eq!((h.host.as_str(), h.port, h.tunnel), ("a.org", 443, true));
    }

    #[test]
    fn a_wildcard_never_reaches_a_special_address_and_an_exact_rule_may() {
        let r = rules("*.localhost:9,localhost:9,127.0.0.2:9");
        // Not listed at all.
        assert_eq!(decide(&r, &[], "example.org", 443).unwrap_err().0, 403);
        // An address literal listed exactly.
        assert!(decide(&r, &[], "127.0.0.2", 9).is_ok());
        // Not listed: loopback by literal.
        assert_eq!(decide(&r, &[], "127.0.0.3", 9).unwrap_err().0, 403);
        // Listed exactly by name (resolves through /etc/hosts).
        assert!(decide(&r, &[], "localhost", 9).is_ok());
        // An address of this host is special too.
        let own = ["192.0.2.1".parse().unwrap()];
        let r = rules("*.wild.test:9,192.0.2.1:10");
        assert!(decide(&r, &own, "192.0.2.1", 10).is_ok());
        let r = rules("192.0.2.1:9");
        assert!(decide(&r, &own, "192.0.2.1", 9).is_ok());
        // Metadata only by its address, never by a name.
        let r = rules("169.254.169.254:80");
        assert!(decide(&r, &[], "169.254.169.254", 80).is_ok());
    }

    #[test]
    fn an_address_carrying_a_special_ipv4_address_is_judged_as_that_address() {
        let at = |ip: &str| vec![SocketAddr::new(ip.parse().unwrap(), 80)];
        let r = rules("*.wild.test,exact.test");
        let own: [IpAddr; 1] = ["1.2.3.4".parse().unwrap()];
        for (ip, why) in [
            ("2002:7f00:1::1", "(6to4 of 127.0.0.1), a loopback address"),
            (
                "2001:0:5db8:d70e::f5ff:fffe",
                "(Teredo client of 10.0.0.1), a private address",
            ),
            (
                "2001:db8::200:5efe:a9fe:a9fe",
                "(ISATAP of 169.254.169.254), a cloud metadata address",
            ),
            (
                "64:ff9b::c0a8:1",
                "(NAT64 of 192.168.0.1), a private address",
            ),
            (
                "::7f00:1",
                "(IPv4-compatible of 127.0.0.1), a loopback address",
            ),
            (
                "2002:102:304::1",
                "(6to4 of 1.2.3.4), an address of this host",
            ),
        ] {
            let (status, line) = keep(&r, &own, "a.wild.test", false, at(ip)).unwrap_err();
            assert_eq!(status, 403);
            assert!(
                line.starts_with(&format!("resolves to {ip} {why}:")),
                "{line}"
            );
        }
        // A public address inside: through.
        assert!(keep(&r, &own, "a.wild.test", false, at("2002:5db8:d70e::1")).is_ok());
        // A name listed exactly may reach a special address, as it may
        // the IPv4 address itself; a metadata one only by its address.
        assert!(keep(&r, &own, "exact.test", true, at("2002:7f00:1::1")).is_ok());
        assert!(keep(&r, &own, "exact.test", true, at("2002:a9fe:a9fe::")).is_err());
        // The address listed exactly, and not as its IPv4 address.
        let r = rules("[2002:7f00:1::1]:80,127.0.0.1:80");
        assert!(decide(&r, &own, "2002:7f00:1::1", 80).is_ok());
        assert!(keep(&r, &own, "a.wild.test", false, at("2002:7f00:1::1")).is_ok());
        assert!(keep(&r, &own, "a.wild.test", false, at("2002:7f00:2::1")).is_err());
    }
}
