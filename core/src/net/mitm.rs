//! TLS ended at the proxy, for the hosts of `--inject` rules alone, so
//! that it can put the credential into each request (`inject.rs`).
//!
//! - **The run's CA** is made in memory when the proxy starts (rcgen,
//!   ECDSA P-256): its key is never written anywhere. Its certificate, and
//!   a bundle of it with the system's roots, are written 0644 into a
//!   directory of the run (removed at its end) and named by the variables
//!   clients read ([`Injector::env`]).
//! - **A leaf per host**, made at the first connection to it and kept for
//!   the run: its one subject name is the `CONNECT` target. A client's
//!   SNI that names another host ends the handshake (reason `SNI ... is
//!   not the CONNECT target`).
//! - **Each request** inside the connection is read and judged on its own
//!   (`Host` must be the target; the injection rule; a phantom anywhere
//!   else is refused) and sent on a new upstream connection, verified by
//!   rustls against the system's roots (rustls-native-certs) and the
//!   `--upstream-ca` files, ALPN `http/1.1` on both sides (no HTTP/2: one
//!   framing to judge). Sessions are resumed, so a new upstream
//!   connection costs one round trip more, not a full handshake.
//! - **Responses** go back as they come, but for header fields that hold
//!   a secret (an API that echoes it), whose values are replaced by
//!   `[redacted by dsh-exec]`. Redirects are the client's to follow: each
//!   next request is judged as any other, so a credential never follows
//!   one to another host.
//!
//! What this relies on: RFC 8446 (a client that does not trust the CA
//! aborts the handshake, so nothing it sends is read before it accepted
//! the run's certificate), RFC 6066 3 (SNI), RFC 7301 (ALPN), RFC 9112
//! (HTTP/1.1 framing, `http1.rs`).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};
use zeroize::Zeroizing;

use super::http1::{Body, Chunked, request_body, response_body};
use super::inject::{self, InjectRule, Secrets};
use super::proxy::{self, HEAD_MAX, HEAD_TIMEOUT, Shared};
use super::rules::normalize;

/// What replaces the value of a response field that holds a secret.
pub const REDACTED: &str = "[redacted by dsh-exec]";

/// The credentials of a run, its rules, and its TLS state.
pub(crate) struct Injector {
    pub(crate) rules: Vec<InjectRule>,
    pub(crate) secrets: Secrets,
    needles: Vec<Zeroizing<Vec<u8>>>,
    provider: Arc<CryptoProvider>,
    ca: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    leaves: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    upstream: Arc<ClientConfig>,
    /// The directory of `ca.pem`, `bundle.pem` and the bundles made for
    /// the command's own CA variables; removed on drop.
    dir: PathBuf,
    /// The run's CA certificate, PEM.
    ca_pem: String,
    /// The phantom variables of `--credential-env`: (variable, phantom).
    phantom_env: Vec<(String, String)>,
}

impl Drop for Injector {
    fn drop(&mut self) {
        self.remove_files();
    }
}

/// Removes the CA directories (`dsh-exec-ca-NS-PID-START-ID`) in `temp`
/// that a `dsh-exec` of PID namespace `ns`, now gone, left (killed by
/// SIGKILL: no drop ran), and only this user's. A `dsh-exec` of another
/// PID namespace is not judged: its pids mean nothing here.
fn prune_stale_ca_dirs(temp: &Path, ns: u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    let uid = nix::unistd::geteuid().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((their_ns, pid, start)) = name
            .to_str()
            .and_then(|n| n.strip_prefix("dsh-exec-ca-"))
            .and_then(crate::proctree::owner_in_name)
        else {
            continue;
        };
        let mine = e
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if their_ns == ns && mine && crate::proctree::live_start_time(pid) != Some(start) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// DER as PEM (RFC 7468).
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn tls_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Injector {
    /// Makes the run's CA, the upstream TLS configuration and the CA files
    /// in a new directory under `temp`.
    ///
    /// Errors when a certificate cannot be made, an `--upstream-ca` file
    /// holds no certificate, or the files cannot be written.
    pub(crate) fn new(
        decl: &inject::Injection,
        secrets: Secrets,
        temp: &Path,
    ) -> io::Result<Injector> {
        // ring: it builds with the C compiler alone. Its provider has no
        // post-quantum key exchange (hence the deprecation); the upstream
        // hop gets the classical suites a ring build offers.
        //
        // AES-128-GCM first, on both hops: the proxy decrypts and encrypts
        // every byte of a response, and AES-128 costs about 70% of what
        // AES-256 costs (10 rounds for 14) for the same security margin
        // the peers' TLS needs here (RFC 8446 9.1 makes AES-128-GCM the
        // suite every TLS 1.3 peer must have).
        #[allow(deprecated)]
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites.sort_by_key(|s| {
            !matches!(
                s.suite(),
                rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                    | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                    | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            )
        });
        // Key exchange with X25519 and P-256 only. Every TLS 1.3 peer must
        // have P-256 (RFC 8446 9.1); ring's P-384 is its generic bignum code,
        // and an upstream that asked for it once (OpenSSL servers may
        // prefer it; rustls then offers it first on every resumption) cost
        // two P-384 operations, most of 4 ms, on each request.
        provider.kx_groups.retain(|g| {
            matches!(
                g.name(),
                rustls::NamedGroup::X25519 | rustls::NamedGroup::secp256r1
            )
        });
        let provider = Arc::new(provider);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(tls_err)?;
        let mut params = rcgen::CertificateParams::default();
        let mut id = [0u8; 8];
        crate::sys::random_bytes(&mut id)?;
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("dsh-exec run CA {id}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let now = std::time::SystemTime::now();
        params.not_before = (now - std::time::Duration::from_secs(3600)).into();
        params.not_after = (now + std::time::Duration::from_secs(7 * 86400)).into();
        let cert = params.self_signed(&key).map_err(tls_err)?;
        let ca_der = cert.der().clone();
        let ca = rcgen::Issuer::new(params, key);

        let mut roots = rustls::RootCertStore::empty();
        let mut system_pem = String::new();
        for c in rustls_native_certs::load_native_certs().certs {
            if roots.add(c.clone()).is_ok() {
                system_pem.push_str(&pem("CERTIFICATE", &c));
            }
        }
        // The --upstream-ca certificates go into the command's bundle too:
        // a host without a rule is reached through a tunnel, TLS end to end.
        let mut upstream_pem = String::new();
        for path in &decl.upstream_ca {
            use rustls::pki_types::pem::PemObject;
            let mut n = 0;
            for c in CertificateDer::pem_file_iter(path)
                .map_err(|e| io::Error::other(format!("--upstream-ca {}: {e}", path.display())))?
            {
                let c = c.map_err(|e| {
                    io::Error::other(format!("--upstream-ca {}: {e}", path.display()))
                })?;
                upstream_pem.push_str(&pem("CERTIFICATE", &c));
                roots.add(c).map_err(|e| {
                    io::Error::other(format!("--upstream-ca {}: {e}", path.display()))
                })?;
                n += 1;
            }
            if n == 0 {
                return Err(io::Error::other(format!(
                    "--upstream-ca {}: no certificate in it",
                    path.display()
                )));
            }
        }
        let mut upstream = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];

        // Named by this process (PID namespace, pid, start time), so that
        // a later run removes what a dsh-exec killed by SIGKILL left.
        let me = std::process::id() as i32;
        let ns = crate::proctree::pid_namespace();
        let start = crate::proctree::live_start_time(me).unwrap_or(0);
        prune_stale_ca_dirs(temp, ns);
        let dir = temp.join(format!("dsh-exec-ca-{ns}-{me}-{start}-{id}"));
        {
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            std::fs::DirBuilder::new().mode(0o755).create(&dir)?;
            let write = |name: &str, text: &str| -> io::Result<()> {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o644)
                    .open(dir.join(name))?;
                f.write_all(text.as_bytes())
            };
            let ca_pem = pem("CERTIFICATE", &ca_der);
            let done = write("ca.pem", &ca_pem)
                .and_then(|_| write("bundle.pem", &format!("{system_pem}{upstream_pem}{ca_pem}")));
            if let Err(e) = done {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        }
        let phantom_env = decl
            .phantom_env
            .iter()
            .filter_map(|p| {
                secrets
                    .get(&p.credential)
                    .map(|s| (p.var.clone(), s.phantom().to_string()))
            })
            .collect();
        Ok(Injector {
            ca_pem: pem("CERTIFICATE", &ca_der),
            needles: inject::needles(&decl.inject, &secrets),
            rules: decl.inject.clone(),
            secrets,
            provider,
            ca,
            ca_der,
            leaves: Mutex::new(HashMap::new()),
            upstream: Arc::new(upstream),
            dir,
            phantom_env,
        })
    }

    /// Removes the CA files (the proxy stops; a connection's thread may
    /// still hold this injector for a while).
    pub(crate) fn remove_files(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// The variables the command gets: each of [`inject::CA_VARS`], and
    /// the phantoms. A CA variable the command's environment (`current`)
    /// already points at a readable file gets a bundle of its own: that
    /// file and the run's CA, so that the client trusts what it trusted,
    /// and the run's CA besides. Otherwise: `bundle.pem` (the system's
    /// roots, the `--upstream-ca` certificates, the run's CA), and for
    /// `NODE_EXTRA_CA_CERTS` the run's CA alone.
    pub(crate) fn env(
        &self,
        current: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> Vec<(String, String)> {
        use std::io::Read as _;
        let mut out = Vec::new();
        for var in inject::CA_VARS {
            let theirs = current
                .iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| PathBuf::from(v))
                .filter(|p| p.is_absolute() && p.is_file())
                .and_then(|p| {
                    let mut text = String::new();
                    std::fs::File::open(&p)
                        .ok()?
                        .take(16 << 20)
                        .read_to_string(&mut text)
                        .ok()?;
                    Some(text)
                });
            let path = match theirs {
                Some(text) => {
                    let path = self.dir.join(format!("{var}.pem"));
                    use std::os::unix::fs::OpenOptionsExt;
                    let written = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o644)
                        .open(&path)
                        .and_then(|mut f| {
                            f.write_all(text.as_bytes())?;
                            f.write_all(b"\n")?;
                            f.write_all(self.ca_pem.as_bytes())
                        });
                    match written {
                        Ok(()) => path,
                        Err(_) => self.dir.join("bundle.pem"),
                    }
                }
                None if var == "NODE_EXTRA_CA_CERTS" => self.dir.join("ca.pem"),
                None => self.dir.join("bundle.pem"),
            };
            out.push((var.to_string(), path.display().to_string()));
        }
        out.extend(self.phantom_env.iter().cloned());
        out
    }

    /// Whether a CONNECT to `host:port` is ended here (an injection rule
    /// holds it).
    pub(crate) fn intercepts(&self, host: &str, port: u16) -> bool {
        self.rules.iter().any(|r| r.holds(host, port))
    }

    /// Whether a response field's value holds a secret.
    pub(crate) fn redacts(&self, value: &[u8]) -> bool {
        inject::redacts(&self.needles, value)
    }

    /// The leaf certificate and key for `host`, made once per run.
    fn leaf(&self, host: &str) -> io::Result<Arc<CertifiedKey>> {
        if let Some(k) = self.leaves.lock().ok().and_then(|l| l.get(host).cloned()) {
            return Ok(k);
        }
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(tls_err)?;
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()]).map_err(tls_err)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host.to_string());
        let now = std::time::SystemTime::now();
        params.not_before = (now - std::time::Duration::from_secs(3600)).into();
        params.not_after = (now + std::time::Duration::from_secs(7 * 86400)).into();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.ca).map_err(tls_err)?;
        let der = Zeroizing::new(key.serialize_der());
        let signing = self
            .provider
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.to_vec())))
            .map_err(tls_err)?;
        let k = Arc::new(CertifiedKey::new(
            vec![cert.der().clone(), self.ca_der.clone()],
            signing,
        ));
        if let Ok(mut l) = self.leaves.lock() {
            l.insert(host.to_string(), k.clone());
        }
        Ok(k)
    }
}

/// Serves the leaf of one host, and notes a client hello whose SNI names
/// another.
#[derive(Debug)]
struct OneHost {
    host: String,
    key: Arc<CertifiedKey>,
    other_sni: Mutex<Option<String>>,
}

impl ResolvesServerCert for OneHost {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match hello.server_name() {
            Some(sni) if normalize(sni) != self.host => {
                if let Ok(mut o) = self.other_sni.lock() {
                    *o = Some(sni.to_string());
                }
                None
            }
            _ => Some(self.key.clone()),
        }
    }
}

/// How much one read(2) of a socket under TLS asks for: 256 KiB. rustls
/// asks its transport for 4 KiB at a time (its deframer's read size);
/// served from this buffer, a bulk transfer costs one system call per
/// 256 KiB instead of one per 4 KiB. A read returns what the socket has,
/// so nothing waits for the buffer to fill.
const SOCKET_READ: usize = 256 * 1024;

/// A socket under TLS, read through a buffer of [`SOCKET_READ`] bytes
/// that may start with bytes read before (the client's, past its CONNECT
/// head).
struct Buffered {
    buf: Vec<u8>,
    at: usize,
    sock: TcpStream,
}

impl Buffered {
    fn new(sock: TcpStream, first: Vec<u8>) -> Buffered {
        Buffered {
            buf: first,
            at: 0,
            sock,
        }
    }
}

impl Read for Buffered {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() {
            self.buf.resize(SOCKET_READ, 0);
            let n = match self.sock.read(&mut self.buf) {
                Ok(n) => n,
                Err(e) => {
                    self.buf.clear();
                    self.at = 0;
                    return Err(e);
                }
            };
            self.buf.truncate(n);
            self.at = 0;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = (self.buf.len() - self.at).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Buffered {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// Records a refusal of `host:port`.
fn deny(shared: &Shared, host: &str, port: u16, reason: String) {
    if let Ok(mut s) = shared.stats.lock() {
        s.deny(host, port, reason);
    }
}

/// Serves a CONNECT to an injection host: ends the client's TLS with the
/// host's leaf, then reads, judges and carries its requests one by one,
/// each on a new upstream connection to one of `addrs` (judged already).
pub(super) fn serve(
    mut client: TcpStream,
    rest: Vec<u8>,
    host: &str,
    port: u16,
    addrs: &[SocketAddr],
    shared: &Shared,
    inj: &Injector,
) {
    let key = match inj.leaf(host) {
        Ok(k) => k,
        Err(e) => {
            let _ = client.write_all(&proxy::response(502, &format!("no certificate: {e}")));
            return;
        }
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let resolver = Arc::new(OneHost {
        host: host.to_string(),
        key,
        other_sni: Mutex::new(None),
    });
    let config = ServerConfig::builder_with_provider(inj.provider.clone())
        .with_safe_default_protocol_versions()
        .map(|b| b.with_no_client_auth().with_cert_resolver(resolver.clone()));
    let Ok(mut config) = config else {
        return;
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // The provider's order (AES-128-GCM first), not the client's.
    config.ignore_client_order = true;
    let Ok(mut conn) = ServerConnection::new(Arc::new(config)) else {
        return;
    };
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let mut sock = Buffered::new(client, rest);
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            let other = resolver.other_sni.lock().ok().and_then(|o| o.clone());
            let reason = match other {
                Some(sni) => format!("SNI {sni} is not the CONNECT target"),
                None if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
                {
                    format!("no TLS handshake within {} s", HEAD_TIMEOUT.as_secs())
                }
                None => format!(
                    "{}: the client did not accept the run's certificate ({e})",
                    inject::TLS_PINNED
                ),
            };
            deny(shared, host, port, reason);
            return;
        }
    }
    let mut tls = StreamOwned::new(conn, sock);
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let step = one_request(&mut tls, &mut pending, (host, port, addrs), shared, inj);
        match step {
            Ok(true) => continue,
            Ok(false) => break,
            Err((status, line)) => {
                let _ = tls.write_all(&proxy::response(status, &line));
                break;
            }
        }
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// Reads a request head from `from` into `pending` (which may hold bytes
/// already): `Ok(None)` at a clean end before any byte.
fn read_head<R: Read>(from: &mut R, pending: &mut Vec<u8>) -> Result<Option<usize>, (u16, String)> {
    let mut chunk = [0u8; 8192];
    loop {
        if !pending.is_empty() {
            let mut fields = [httparse::EMPTY_HEADER; 128];
            let mut req = httparse::Request::new(&mut fields);
            match req.parse(pending) {
                Ok(httparse::Status::Complete(n)) => return Ok(Some(n)),
                Ok(httparse::Status::Partial) if pending.len() < HEAD_MAX => {}
                Ok(httparse::Status::Partial) => {
                    return Err((400, format!("a request head longer than {HEAD_MAX} bytes")));
                }
                Err(e) => return Err((400, format!("not an HTTP/1.1 request ({e})"))),
            }
        }
        match from.read(&mut chunk) {
            Ok(0) if pending.is_empty() => return Ok(None),
            Ok(0) => return Err((400, "the connection closed inside a request head".into())),
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && pending.is_empty() => {
                return Ok(None);
            }
            Err(_) if pending.is_empty() => return Ok(None),
            Err(e) => return Err((400, format!("no complete request head ({e})"))),
        }
    }
}

/// The upstream's TLS stream.
type Upstream = StreamOwned<ClientConnection, Buffered>;

/// Carries one request of a connection and its response, on an upstream
/// connection of its own: `Ok(true)` when the client connection may carry
/// another.
///
/// One request per upstream connection, as on the plain path: bytes an
/// upstream leaves unread (a body it answered before reading) or sends
/// past its answer (a response split through a header it echoes, its tail
/// arriving a little later) die with the connection, never read as the
/// next request or response. Keeping the connection while "nothing waits
/// on it" is no guard: the command chooses when its next request comes,
/// and a tail in flight is invisible until it lands. TLS sessions are
/// resumed, so a new connection costs a round trip and a key exchange,
/// not a certificate check.
fn one_request(
    tls: &mut StreamOwned<ServerConnection, Buffered>,
    pending: &mut Vec<u8>,
    (host, port, addrs): (&str, u16, &[SocketAddr]),
    shared: &Shared,
    inj: &Injector,
) -> Result<bool, (u16, String)> {
    let Some(len) = read_head(tls, pending)? else {
        return Ok(false);
    };
    let head: Vec<u8> = pending.drain(..len).collect();
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut fields);
    if !matches!(req.parse(&head), Ok(httparse::Status::Complete(_))) {
        return Err((400, "not an HTTP/1.1 request".into()));
    }
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("").to_string();
    let version = req.version.unwrap_or(1).min(1);
    if !target.starts_with('/') {
        return Err((
            400,
            format!(
                "a request inside the tunnel needs an origin-form target (/path), not '{target}'"
            ),
        ));
    }
    // Host names the virtual host the upstream serves: it must be the
    // target the tunnel was judged for, once (RFC 9112 3.2).
    let hosts: Vec<&[u8]> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .map(|h| h.value)
        .collect();
    let host_ok = match &hosts[..] {
        [one] => std::str::from_utf8(one).is_ok_and(|v| {
            let v = v.trim();
            let (name, p) = match v.rsplit_once(':') {
                Some((n, p)) if !n.contains(':') || n.ends_with(']') => (n, p.parse::<u16>().ok()),
                _ => (v, Some(443)),
            };
            normalize(name.trim_start_matches('[').trim_end_matches(']')) == host
                && p.is_some_and(|p| p == port || (p == 443 && !v.contains(':')))
        }),
        [] => version == 0,
        _ => false,
    };
    if !host_ok {
        let mut shown = String::from_utf8_lossy(hosts.first().copied().unwrap_or(b"")).into_owned();
        if shown.len() > 80 {
            let mut end = 80;
            while !shown.is_char_boundary(end) {
                end -= 1;
            }
            shown.truncate(end);
            shown.push_str("...");
        }
        deny(
            shared,
            host,
            port,
            format!("Host header '{shown}' is not the CONNECT target"),
        );
        return Err((421, format!("the Host header must be {host}")));
    }
    let body = request_body(version, req.headers).map_err(|e| (400, e))?;
    let listed = proxy::connection_options(req.headers);
    if let Some(f) = listed.iter().find(|f| proxy::frames_body(f)) {
        return Err((
            400,
            format!("a Connection field naming {f}, which frames the body (RFC 9110 7.6.1)"),
        ));
    }
    let close = version == 0 || listed.iter().any(|o| o == "close");
    let expect = req.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("expect") && h.value.eq_ignore_ascii_case(b"100-continue")
    });
    if target.contains('#') {
        return Err((400, "a request target with a fragment (#)".into()));
    }
    let pairs: Vec<(&str, &[u8])> = req.headers.iter().map(|h| (h.name, h.value)).collect();
    let injected = inject::judge(
        &inj.rules,
        &inj.secrets,
        &method,
        host,
        port,
        &target,
        &pairs,
        true,
    )
    .map_err(|reason| {
        deny(shared, host, port, reason.clone());
        (403, format!("{host}:{port} refused: {reason}"))
    })?;
    let mut up_head =
        Zeroizing::new(format!("{method} {} HTTP/1.{version}\r\n", injected.target).into_bytes());
    for h in req.headers.iter() {
        if proxy::hop_by_hop(h.name)
            || h.name.eq_ignore_ascii_case("expect") && expect
            || listed.iter().any(|f| h.name.eq_ignore_ascii_case(f))
            || injected
                .drop_field
                .as_deref()
                .is_some_and(|f| h.name.eq_ignore_ascii_case(f))
        {
            continue;
        }
        up_head.extend_from_slice(h.name.as_bytes());
        up_head.extend_from_slice(b": ");
        up_head.extend_from_slice(h.value);
        up_head.extend_from_slice(b"\r\n");
    }
    if version == 0 && hosts.is_empty() {
        up_head.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    if let Some((name, value)) = &injected.add {
        up_head.extend_from_slice(name.as_bytes());
        up_head.extend_from_slice(b": ");
        up_head.extend_from_slice(value);
        up_head.extend_from_slice(b"\r\n");
    }
    // One request per upstream connection (see above).
    up_head.extend_from_slice(b"Connection: close\r\n\r\n");
    if let Ok(mut s) = shared.stats.lock() {
        s.injected(host, injected.used.as_deref(), injected.missed);
    }
    let mut upstream = connect(host, addrs, inj).inspect_err(|(_, why)| {
        // Told in the result, not only in the body of the 502 the client
        // may not show (pip: "no matching distribution").
        deny(shared, host, port, format!("upstream: {why}"));
    })?;
    let _guard = proxy::Registered::new(shared, &upstream.get_ref().sock);
    upstream
        .write_all(&up_head)
        .and_then(|_| upstream.flush())
        .map_err(|e| (502, format!("the upstream failed: {e}")))?;
    drop(up_head);
    if expect {
        tls.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(|_| (400, "the client went away".to_string()))?;
    }
    match copy_body(pending, tls, &mut upstream, body, Chunked::request()) {
        Ok(()) => {}
        Err(Ended::Framing(why)) => return Err((400, why)),
        Err(_) => return Ok(false),
    }
    let _ = upstream.flush();
    let mut buf = Vec::new();
    // The response: interim heads as they come, then the final one.
    loop {
        let (len, status, out, rbody) =
            response_head(&mut upstream, &mut buf, method == "HEAD", close, inj)
                .map_err(|why| (502, why))?;
        if status == 101 {
            return Err((
                502,
                "the upstream switched protocols, which no request here asks for".into(),
            ));
        }
        if (100..200).contains(&status) {
            tls.write_all(&out)
                .map_err(|_| (400, "the client went away".to_string()))?;
            buf.drain(..len);
            continue;
        }
        if tls.write_all(&out).is_err() {
            return Ok(false);
        }
        buf.drain(..len);
        let ends_with_close = rbody == Body::UntilClose;
        let copied = if rbody == Body::Chunked {
            copy_chunked_redacted(&mut buf, &mut upstream, tls, inj)
        } else {
            copy_body(&mut buf, &mut upstream, tls, rbody, Chunked::response())
        };
        let _ = tls.flush();
        return Ok(copied.is_ok() && !close && !ends_with_close);
    }
}

/// A verified TLS connection to the upstream, at one of `addrs`.
fn connect(host: &str, addrs: &[SocketAddr], inj: &Injector) -> Result<Upstream, (u16, String)> {
    let sock = proxy::connect_any(addrs)?;
    let _ = sock.set_nodelay(true);
    let name = match super::rules::parse_addr(host) {
        Some(ip) => ServerName::IpAddress(ip.into()),
        None => ServerName::try_from(host.to_string())
            .map_err(|e| (502, format!("{host} is not a TLS server name: {e}")))?,
    };
    let conn = ClientConnection::new(inj.upstream.clone(), name)
        .map_err(|e| (502, format!("upstream TLS: {e}")))?;
    let mut up = StreamOwned::new(conn, Buffered::new(sock, Vec::new()));
    while up.conn.is_handshaking() {
        let StreamOwned { conn, sock } = &mut up;
        conn.complete_io(sock).map_err(|e| {
            (
                502,
                format!(
                    "the upstream's TLS failed ({e}); a private CA is trusted with --upstream-ca"
                ),
            )
        })?;
    }
    Ok(up)
}

/// Reads the upstream's next response head into `buf`: its length, its
/// status, the head for the client (fields holding a secret redacted;
/// `Connection: close` when `close` or the body runs until close), its
/// and its body's framing.
fn response_head<R: Read>(
    upstream: &mut R,
    buf: &mut Vec<u8>,
    head_request: bool,
    close: bool,
    inj: &Injector,
) -> Result<(usize, u16, Vec<u8>, Body), String> {
    proxy::read_response_head(upstream, buf, |resp, len| {
        let status = resp.code.unwrap_or(0);
        let body = response_body(head_request, status, resp.headers)?;
        let reason = resp.reason.unwrap_or("");
        let reason = if inj.redacts(reason.as_bytes()) {
            REDACTED
        } else {
            reason
        };
        let mut out = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
        let listed = proxy::connection_options(resp.headers);
        for h in resp.headers.iter() {
            if proxy::hop_by_hop(h.name)
                || (body == Body::Chunked && h.name.eq_ignore_ascii_case("content-length"))
                || (!proxy::frames_body(h.name)
                    && listed.iter().any(|f| h.name.eq_ignore_ascii_case(f)))
            {
                continue;
            }
            if inj.redacts(h.name.as_bytes()) {
                out.extend_from_slice(b"X-Dsh-Exec-Redacted: ");
                out.extend_from_slice(REDACTED.as_bytes());
                out.extend_from_slice(b"\r\n");
                continue;
            }
            out.extend_from_slice(h.name.as_bytes());
            out.extend_from_slice(b": ");
            if inj.redacts(h.value) {
                out.extend_from_slice(REDACTED.as_bytes());
            } else {
                out.extend_from_slice(h.value);
            }
            out.extend_from_slice(b"\r\n");
        }
        if (100..200).contains(&status) {
            out.extend_from_slice(b"\r\n");
        } else if close || body == Body::UntilClose {
            out.extend_from_slice(b"Connection: close\r\n\r\n");
        } else {
            out.extend_from_slice(b"\r\n");
        }
        Ok((len, status, out, body))
    })
}

/// Why a body was not copied whole.
pub(super) enum Ended {
    /// The sender ended before the body did, or a side failed.
    Broken,
    /// The body broke its framing (the reason).
    Framing(String),
}

/// The relay buffer: 64 KiB.
const BUF: usize = 64 * 1024;

/// Copies one body framed as `body` from `from` to `to`: first from
/// `pending` (bytes read already; what is past the body's end stays
/// there), then from `from`, never past the body's end.
fn copy_body<R: Read, W: Write>(
    pending: &mut Vec<u8>,
    from: &mut R,
    to: &mut W,
    body: Body,
    mut chunked: Chunked,
) -> Result<(), Ended> {
    let mut buf = vec![0u8; BUF];
    match body {
        Body::Empty => Ok(()),
        Body::Chunked => {
            let mut pass = |data: &[u8], to: &mut W| match chunked.feed(data) {
                Ok(k) => to
                    .write_all(&data[..k])
                    .map(|_| (k, chunked.done()))
                    .map_err(|_| Ended::Broken),
                Err((_, why)) => Err(Ended::Framing(why)),
            };
            if !pending.is_empty() {
                let (k, done) = pass(pending, to)?;
                pending.drain(..k);
                if done {
                    return Ok(());
                }
            }
            loop {
                let n = read_some(from, &mut buf)?;
                if n == 0 {
                    return Err(Ended::Broken);
                }
                let (k, done) = pass(&buf[..n], to)?;
                if done {
                    pending.extend_from_slice(&buf[k..n]);
                    return Ok(());
                }
            }
        }
        Body::Length(n) => copy_exact(pending, from, to, n, &mut buf),
        Body::UntilClose => {
            to.write_all(pending).map_err(|_| Ended::Broken)?;
            pending.clear();
            loop {
                let got = read_some(from, &mut buf)?;
                if got == 0 {
                    return Ok(());
                }
                to.write_all(&buf[..got]).map_err(|_| Ended::Broken)?;
            }
        }
    }
}

/// Copies exactly `n` bytes to `to`: first from `pending` (what was read
/// already; the rest of it stays there), then from `from` through `buf`,
/// never reading past the `n`th byte. An early end is [`Ended::Broken`].
fn copy_exact<R: Read, W: Write>(
    pending: &mut Vec<u8>,
    from: &mut R,
    to: &mut W,
    n: u64,
    buf: &mut [u8],
) -> Result<(), Ended> {
    let k = (pending.len() as u64).min(n) as usize;
    to.write_all(&pending[..k]).map_err(|_| Ended::Broken)?;
    pending.drain(..k);
    let mut left = n - k as u64;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let got = read_some(from, &mut buf[..want])?;
        if got == 0 {
            return Err(Ended::Broken);
        }
        to.write_all(&buf[..got]).map_err(|_| Ended::Broken)?;
        left -= got as u64;
    }
    Ok(())
}

/// One read; an end of the peer's TLS without close_notify counts as the
/// end of the stream (many servers close so).
fn read_some<R: Read>(from: &mut R, buf: &mut [u8]) -> Result<usize, Ended> {
    loop {
        match from.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(_) => return Err(Ended::Broken),
        }
    }
}

/// The longest chunk-size line of a re-framed response: 4 KiB.
const SIZE_LINE_MAX: usize = 4096;

/// The most bytes of a response's trailer fields: 64 KiB.
const TRAILERS_MAX: usize = 64 * 1024;

/// Reads from `pending` (bytes read already), then `from`, up to the next
/// CRLF (at most `max` bytes before it); the line without its CRLF.
fn read_line<R: Read>(pending: &mut Vec<u8>, from: &mut R, max: usize) -> Result<Vec<u8>, Ended> {
    let mut buf = [0u8; 8192];
    loop {
        if let Some(at) = pending.windows(2).position(|w| w == b"\r\n") {
            let line = pending[..at].to_vec();
            pending.drain(..at + 2);
            return Ok(line);
        }
        if pending.len() > max {
            return Err(Ended::Framing("a chunk line too long".into()));
        }
        let n = read_some(from, &mut buf)?;
        if n == 0 {
            return Err(Ended::Broken);
        }
        pending.extend_from_slice(&buf[..n]);
    }
}

/// Copies a chunked response body (RFC 9112 7.1) from `pending`, then
/// `from`, to `to`, framed anew: the same data in the same chunks, without
/// chunk extensions, with the trailer fields whose value holds a secret
/// redacted (a trailer is a header field an echoing API may use as well).
/// Bytes past the body's end stay in `pending`.
pub(super) fn copy_chunked_redacted<R: Read, W: Write>(
    pending: &mut Vec<u8>,
    from: &mut R,
    to: &mut W,
    inj: &Injector,
) -> Result<(), Ended> {
    let mut buf = vec![0u8; BUF];
    loop {
        let line = read_line(pending, from, SIZE_LINE_MAX)?;
        let digits = line.split(|b| *b == b';').next().unwrap_or_default();
        if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(Ended::Framing("a chunk size that is not hex digits".into()));
        }
        let size = u64::from_str_radix(std::str::from_utf8(digits).unwrap_or("0"), 16)
            .map_err(|_| Ended::Framing("a bad chunk size".into()))?;
        to.write_all(format!("{size:x}\r\n").as_bytes())
            .map_err(|_| Ended::Broken)?;
        if size == 0 {
            break;
        }
        copy_exact(pending, from, to, size, &mut buf)?;
        if !read_line(pending, from, 0)?.is_empty() {
            return Err(Ended::Framing("chunk data longer than its size".into()));
        }
        to.write_all(b"\r\n").map_err(|_| Ended::Broken)?;
    }
    let mut trailers = 0;
    loop {
        let line = read_line(pending, from, TRAILERS_MAX)?;
        trailers += line.len() + 2;
        if trailers > TRAILERS_MAX {
            return Err(Ended::Framing("trailer fields longer than 64 KiB".into()));
        }
        if line.is_empty() {
            return to.write_all(b"\r\n").map_err(|_| Ended::Broken);
        }
        match line.iter().position(|b| *b == b':') {
            Some(at) if inj.redacts(&line[..at]) => {
                to.write_all(b"X-Dsh-Exec-Redacted: ")
                    .and_then(|_| to.write_all(REDACTED.as_bytes()))
                    .map_err(|_| Ended::Broken)?;
            }
            Some(at) if inj.redacts(&line[at + 1..]) => {
                to.write_all(&line[..at]).map_err(|_| Ended::Broken)?;
                to.write_all(b": ").map_err(|_| Ended::Broken)?;
                to.write_all(REDACTED.as_bytes())
                    .map_err(|_| Ended::Broken)?;
            }
            Some(_) => to.write_all(&line).map_err(|_| Ended::Broken)?,
            None => return Err(Ended::Framing("a trailer line that is not a field".into())),
        }
        to.write_all(b"\r\n").map_err(|_| Ended::Broken)?;
    }
}
