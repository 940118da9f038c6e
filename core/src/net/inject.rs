//! Credentials the allow-list proxy puts into requests, so that the
//! command never holds them (`--credential`, `--inject`,
//! `--credential-env`).
//!
//! - A **credential** (`--credential NAME=env:VAR|file:PATH|fd:N`) is read
//!   by `dsh-exec` when the run is resolved and kept in memory that is
//!   zeroed when dropped ([`Secrets`]: no `Debug`, `Display` or `Serialize`
//!   shows a value). An `env:` source is taken out of the command's
//!   environment and wiped from `dsh-exec`'s own (as the scrub does).
//! - An **injection rule** (`--inject HOST[:PORT][/PREFIX]=SCHEME:NAME`)
//!   says where a credential goes: requests to HOST on PORT (443 when
//!   absent) whose path is PREFIX or below it get the credential in the
//!   field SCHEME names, replacing whatever the command sent there.
//! - A **phantom** (`--credential-env NAME=VAR`) is what the command sees
//!   in VAR: `dsh-exec-phantom-NAME-` and 32 random hex digits, new for
//!   each run. Only the real value is ever sent where a rule says; a
//!   request that carries a phantom anywhere else is refused and
//!   reported (the command tried to send the credential elsewhere).
//!
//! The proxy sees requests to injection hosts in the clear by ending
//! their TLS itself (`mitm.rs`); a plain `http://` request is judged the
//! same way, but only a rule that names its port explicitly matches it.

use std::ffi::OsString;
use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use zeroize::Zeroizing;

use super::rules::{HostPattern, HostRule};

/// The variables an injecting proxy sets to its CA files: a bundle in
/// each but `NODE_EXTRA_CA_CERTS` (which Node.js adds to its own roots),
/// the run's CA there.
pub const CA_VARS: [&str; 12] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
    "AWS_CA_BUNDLE",
    "NIX_SSL_CERT_FILE",
    "HTTPLIB2_CA_CERTS",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "NODE_EXTRA_CA_CERTS",
];

/// The longest credential value: 16 KiB (a JWT with many claims fits).
pub const SECRET_MAX: usize = 16 * 1024;

/// The prefix of every phantom value.
pub const PHANTOM_PREFIX: &str = "dsh-exec-phantom-";

/// The port of an injection rule that names none: 443 (https).
pub const DEFAULT_INJECT_PORT: u16 = 443;

/// Where a credential's value is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `env:VAR`: dsh-exec's own environment variable VAR.
    Env(String),
    /// `file:PATH`: the contents of a file (one final newline dropped).
    File(PathBuf),
    /// `fd:N`: what descriptor N holds until end of file; it is closed
    /// after.
    Fd(i32),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Env(v) => write!(f, "env:{v}"),
            Source::File(p) => write!(f, "file:{}", p.display()),
            Source::Fd(n) => write!(f, "fd:{n}"),
        }
    }
}

/// Whether `name` is a credential's name: 1 to 64 letters, digits, `_`
/// and `-`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One `--credential NAME=SOURCE`: a name and where its value comes from
/// (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The name rules and phantoms refer to.
    pub name: String,
    /// Where the value is read.
    pub source: Source,
}

/// `NAME=REST` split at the first `=`, NAME checked ([`valid_name`]).
/// Errors with why: `usage` when there is no `=`, or what a name must be.
fn split_named<'a>(s: &'a str, usage: &str) -> Result<(&'a str, &'a str), String> {
    let (name, rest) = s.split_once('=').ok_or_else(|| usage.to_string())?;
    if !valid_name(name) {
        return Err("the name must be 1 to 64 letters, digits, '_' and '-'".into());
    }
    Ok((name, rest))
}

impl FromStr for Credential {
    type Err = String;

    /// Parses `NAME=env:VAR`, `NAME=file:PATH` or `NAME=fd:N`.
    ///
    /// Errors with a one-line message naming the entry.
    fn from_str(s: &str) -> Result<Credential, String> {
        let bad = |why: &str| format!("invalid --credential '{s}': {why}");
        let (name, source) = split_named(s, "write NAME=env:VAR, NAME=file:PATH or NAME=fd:N")
            .map_err(|why| bad(&why))?;
        let source = match source.split_once(':') {
            Some(("env", var)) if !var.is_empty() && !var.contains(['=', '\0']) => {
                Source::Env(var.into())
            }
            Some(("file", path)) if !path.is_empty() && !path.contains('\0') => {
                Source::File(path.into())
            }
            Some(("fd", n)) => match n.parse::<i32>() {
                Ok(n) if n >= 0 && n != 1 && n != 2 => Source::Fd(n),
                _ => return Err(bad("fd: takes a descriptor number other than 1 and 2")),
            },
            _ => {
                return Err(bad(
                    "the source must be env:VAR, file:PATH or fd:N (never the value itself)",
                ));
            }
        };
        Ok(Credential {
            name: name.into(),
            source,
        })
    }
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.source)
    }
}

/// Where a rule puts its credential in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    /// `bearer`: `Authorization: Bearer VALUE` (RFC 6750 2.1).
    Bearer,
    /// `basic:USER`: `Authorization: Basic BASE64(USER:VALUE)` (RFC 7617).
    Basic(String),
    /// `header:NAME`: the value as it is, in the field NAME.
    Header(String),
    /// `query:PARAM`: the value, percent-encoded, as the query parameter
    /// PARAM.
    Query(String),
}

impl Scheme {
    /// The header field this scheme sets, in lower case; `None` for a
    /// query parameter.
    pub fn field(&self) -> Option<String> {
        match self {
            Scheme::Bearer | Scheme::Basic(_) => Some("authorization".into()),
            Scheme::Header(h) => Some(h.to_ascii_lowercase()),
            Scheme::Query(_) => None,
        }
    }
}

/// Whether `name` is a token (RFC 9110 5.6.2), as field names are.
fn token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Fields a rule may not set: those that frame or route the message, and
/// the proxy's own.
const NOT_INJECTABLE: [&str; 9] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// One `--inject HOST[:PORT][/PREFIX]=SCHEME:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectRule {
    /// The host and its one port ([`DEFAULT_INJECT_PORT`] when none is
    /// written).
    pub host: HostRule,
    /// The path prefix (`/` when none is written): the rule covers this
    /// path and everything below it, whole segments only.
    pub prefix: String,
    /// Where the value goes.
    pub scheme: Scheme,
    /// The credential's name.
    pub credential: String,
}

impl InjectRule {
    /// Whether this rule covers `path` (the request target's path, without
    /// its query), whole segments only: `/a` covers `/a` and `/a/b`, not
    /// `/ab`. The prefix `/` covers every path of the host; a longer one
    /// covers no path that [`climbs`] (a server could read it as one
    /// outside the prefix).
    pub fn covers(&self, path: &str) -> bool {
        if !path.starts_with('/') {
            return false;
        }
        if self.prefix == "/" {
            return true;
        }
        if climbs(path) {
            return false;
        }
        let p = self.prefix.trim_end_matches('/');
        path == p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/'))
    }

    /// Whether the rule's host holds `host` (normalized) on `port`.
    pub fn holds(&self, host: &str, port: u16) -> bool {
        self.host.matches(host, port)
    }
}

/// Decodes `%XX` escapes (invalid ones stay as they are), bytewise.
fn percent_decoded(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if s[i] == b'%'
            && i + 2 < s.len()
            && let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// Whether some server could read `path` as one outside a prefix it
/// starts with. Judged by what a path may hold, not by the tricks known to
/// climb: the path, its `%XX` escapes decoded once, must hold only ASCII
/// letters, digits and `-._~!$&'()*+,=:@/` (RFC 3986 3.3's path
/// characters less `;`, which Tomcat and Jetty read as parameters, so
/// `..;` is `..` to them). A `%` that is not an escape, or that an escape
/// yields (`%252e`, for a server that decodes twice), a backslash, a
/// control character or any byte past ASCII (overlong UTF-8, fullwidth
/// dots that NFKC makes `.`) makes a path one that climbs; so does a
/// segment of dots alone (`.`, `..`, `...`), after decoding (`%2e%2e`).
/// An encoded slash (`group%2Fproject`) is a slash then.
pub fn climbs(path: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,=:@/".contains(&b);
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            decoded.push(bytes[i]);
            i += 1;
            continue;
        }
        match (
            bytes.get(i + 1).and_then(|b| hex(*b)),
            bytes.get(i + 2).and_then(|b| hex(*b)),
        ) {
            (Some(h), Some(l)) => decoded.push((h * 16 + l) as u8),
            _ => return true,
        }
        i += 3;
    }
    if !decoded.iter().all(|b| allowed(*b)) {
        return true;
    }
    decoded
        .split(|b| *b == b'/')
        .any(|seg| !seg.is_empty() && seg.iter().all(|b| *b == b'.'))
}

/// Whether `path` has no dot segment (`.`, `..`), no empty segment and
/// no percent-encoded `.`, `/` or `\`: how a rule's own prefix must be
/// written.
pub fn plain_path(path: &str) -> bool {
    if !path.starts_with('/') {
        return false;
    }
    let lower = path.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c", "\\"]
        .iter()
        .any(|e| lower.contains(e))
    {
        return false;
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    let last = segments.len() - 1;
    segments
        .iter()
        .enumerate()
        .all(|(i, s)| *s != "." && *s != ".." && (!s.is_empty() || i == last))
}

impl FromStr for InjectRule {
    type Err = String;

    /// Parses `HOST[:PORT][/PREFIX]=bearer:NAME`, `...=basic:USER:NAME`,
    /// `...=header:FIELD:NAME` or `...=query:PARAM:NAME`.
    ///
    /// Errors with a one-line message naming the entry.
    fn from_str(s: &str) -> Result<InjectRule, String> {
        let bad = |why: &str| format!("invalid --inject '{s}': {why}");
        if s.contains("://") {
            return Err(bad(
                "a host, not a URL: write api.example.org/v1=bearer:NAME, not https://...",
            ));
        }
        let (target, how) = s.rsplit_once('=').ok_or_else(|| {
            bad("write HOST[:PORT][/PREFIX]=SCHEME:NAME, as api.example.org=bearer:API")
        })?;
        let (authority, prefix) = match target.find('/') {
            Some(i) => (&target[..i], &target[i..]),
            None => (target, "/"),
        };
        if prefix.contains(['?', '#', '\0']) || !plain_path(prefix) {
            return Err(bad(
                "the path prefix must be a plain path: no ?, #, dot segments or encoded / and .",
            ));
        }
        let mut host: HostRule = authority
            .parse()
            .map_err(|e: String| bad(e.rsplit(": ").next().unwrap_or("bad host")))?;
        host.port.get_or_insert(DEFAULT_INJECT_PORT);
        let parts: Vec<&str> = how.split(':').collect();
        let (scheme, name) = match parts[..] {
            ["bearer", name] => (Scheme::Bearer, name),
            ["basic", user, name]
                if !user.is_empty() && !user.bytes().any(|b| b < 0x20 || b == 0x7f) =>
            {
                (Scheme::Basic(user.into()), name)
            }
            ["header", field, name] if token(field) => {
                if NOT_INJECTABLE.iter().any(|f| field.eq_ignore_ascii_case(f)) {
                    return Err(bad(&format!(
                        "the field {field} frames or routes the request"
                    )));
                }
                (Scheme::Header(field.into()), name)
            }
            ["query", param, name]
                if !param.is_empty()
                    && param
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) =>
            {
                (Scheme::Query(param.into()), name)
            }
            _ => {
                return Err(bad(
                    "the scheme must be bearer:NAME, basic:USER:NAME, header:FIELD:NAME or \
                     query:PARAM:NAME",
                ));
            }
        };
        if !valid_name(name) {
            return Err(bad(
                "the credential name must be 1 to 64 letters, digits, '_' and '-'",
            ));
        }
        Ok(InjectRule {
            host,
            prefix: prefix.into(),
            scheme,
            credential: name.into(),
        })
    }
}

impl fmt::Display for InjectRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.host)?;
        if self.prefix != "/" {
            f.write_str(&self.prefix)?;
        }
        match &self.scheme {
            Scheme::Bearer => write!(f, "=bearer:{}", self.credential),
            Scheme::Basic(u) => write!(f, "=basic:{u}:{}", self.credential),
            Scheme::Header(h) => write!(f, "=header:{h}:{}", self.credential),
            Scheme::Query(p) => write!(f, "=query:{p}:{}", self.credential),
        }
    }
}

/// One `--credential-env NAME=VAR`: the command's variable VAR holds the
/// phantom of credential NAME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhantomVar {
    /// The credential's name.
    pub credential: String,
    /// The variable.
    pub var: String,
}

impl FromStr for PhantomVar {
    type Err = String;

    /// Parses `NAME=VAR`.
    fn from_str(s: &str) -> Result<PhantomVar, String> {
        let bad = |why: &str| format!("invalid --credential-env '{s}': {why}");
        let (name, var) =
            split_named(s, "write NAME=VAR, as API=OPENAI_API_KEY").map_err(|why| bad(&why))?;
        if var.is_empty() || var.contains(['=', '\0']) {
            return Err(bad("VAR must be a variable name"));
        }
        Ok(PhantomVar {
            credential: name.into(),
            var: var.into(),
        })
    }
}

impl fmt::Display for PhantomVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.credential, self.var)
    }
}

macro_rules! serde_as_text {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
        impl schemars::JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                "String".into()
            }
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                String::json_schema(g)
            }
        }
    )*};
}
serde_as_text!(Credential, InjectRule, PhantomVar);

/// The credential declarations of a run: what the spec, `explain` and
/// the job handoff carry (names, sources and rules, never a value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Injection {
    /// `--credential` entries, in the order given.
    #[serde(default)]
    pub credentials: Vec<Credential>,
    /// `--inject` rules, in the order given.
    #[serde(default)]
    pub inject: Vec<InjectRule>,
    /// `--credential-env` entries.
    #[serde(default)]
    pub phantom_env: Vec<PhantomVar>,
    /// `--upstream-ca` files: certificates (PEM) trusted for upstream
    /// TLS beside the system's roots.
    #[serde(default)]
    pub upstream_ca: Vec<PathBuf>,
}

impl Injection {
    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.credentials.is_empty()
            && self.inject.is_empty()
            && self.phantom_env.is_empty()
            && self.upstream_ca.is_empty()
    }

    /// Checks the declarations against each other and against the
    /// allow-list `allow` (`None`: no allow-list policy).
    ///
    /// Errors with the one-line usage error: a credential without a rule
    /// or a rule without a credential, a name declared twice, a rule's
    /// host not on the allow-list, any of it without an allow-list.
    pub fn check(&self, allow: Option<&[HostRule]>) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        let Some(allow) = allow.filter(|a| !a.is_empty()) else {
            return Err(
                "--credential, --inject, --credential-env and --upstream-ca need --network \
                 allow=HOSTS: a credential is injected by the allow-list proxy, and over open \
                 egress it would protect nothing"
                    .into(),
            );
        };
        for (i, c) in self.credentials.iter().enumerate() {
            if self.credentials[..i].iter().any(|o| o.name == c.name) {
                return Err(format!("--credential {} is declared twice", c.name));
            }
            if !self.inject.iter().any(|r| r.credential == c.name) {
                return Err(format!(
                    "--credential {} has no --inject rule: say where it goes \
                     (HOST=bearer:{})",
                    c.name, c.name
                ));
            }
        }
        let declared = |n: &str| self.credentials.iter().any(|c| c.name == n);
        for r in &self.inject {
            if !declared(&r.credential) {
                return Err(format!(
                    "--inject {r}: no --credential {} is declared",
                    r.credential
                ));
            }
            if !allow.iter().any(|a| covers(a, &r.host)) {
                return Err(format!(
                    "--inject {r}: {} is not on the --network allow= list",
                    r.host
                ));
            }
        }
        for p in &self.phantom_env {
            if !declared(&p.credential) {
                return Err(format!(
                    "--credential-env {p}: no --credential {} is declared",
                    p.credential
                ));
            }
        }
        if self.credentials.is_empty() {
            return Err("--upstream-ca needs a --credential and its --inject rule".into());
        }
        Ok(())
    }
}

/// Checks that each `--upstream-ca` file can be read and holds at least
/// one PEM certificate.
///
/// Errors with a one-line usage error naming the file.
pub fn check_upstream_ca(files: &[PathBuf]) -> Result<(), String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    for path in files {
        let bad = |why: String| format!("--upstream-ca {}: {why}", path.display());
        let mut n = 0;
        for c in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
            c.map_err(|e| bad(e.to_string()))?;
            n += 1;
        }
        if n == 0 {
            return Err(bad("no PEM certificate in it".into()));
        }
    }
    Ok(())
}

/// Whether the allow-list entry `allow` lets through every destination
/// of `rule` (a host and one port).
fn covers(allow: &HostRule, rule: &HostRule) -> bool {
    let port = rule.port.unwrap_or(DEFAULT_INJECT_PORT);
    let port_ok = match allow.port {
        Some(p) => p == port,
        None => super::rules::DEFAULT_PORTS.contains(&port),
    };
    port_ok
        && match (&allow.host, &rule.host) {
            (a, r) if a == r => true,
            (HostPattern::Below(s), HostPattern::Below(r)) => r.ends_with(&format!(".{s}")),
            (HostPattern::Below(s), HostPattern::Name(n)) => n.ends_with(&format!(".{s}")),
            _ => false,
        }
}

/// One credential's value and its phantom. The value is zeroed when
/// dropped; nothing prints it.
pub struct Secret {
    name: String,
    value: Zeroizing<Vec<u8>>,
    phantom: String,
}

impl Secret {
    /// The credential's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The phantom the command sees.
    pub fn phantom(&self) -> &str {
        &self.phantom
    }

    /// The value, for the proxy alone.
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }
}

impl Clone for Secret {
    fn clone(&self) -> Secret {
        Secret {
            name: self.name.clone(),
            value: self.value.clone(),
            phantom: self.phantom.clone(),
        }
    }
}

/// The values of a run's credentials, read when it was resolved.
#[derive(Clone, Default)]
pub struct Secrets(Vec<Secret>);

impl fmt::Debug for Secrets {
    /// The names alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|s| &s.name))
            .finish()
    }
}

impl PartialEq for Secrets {
    /// Names and phantoms; values are never compared.
    fn eq(&self, other: &Secrets) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| a.name == b.name && a.phantom == b.phantom)
    }
}

impl Eq for Secrets {}

/// Reads at most `SECRET_MAX + 2` bytes from `r` into zeroed-on-drop
/// memory.
fn read_bounded(mut r: impl Read) -> std::io::Result<Zeroizing<Vec<u8>>> {
    let mut buf = Zeroizing::new(Vec::with_capacity(SECRET_MAX + 2));
    let mut chunk = Zeroizing::new([0u8; 4096]);
    loop {
        let n = r.read(&mut chunk[..])?;
        if n == 0 || buf.len() > SECRET_MAX + 1 {
            return Ok(buf);
        }
        let room = (SECRET_MAX + 2 - buf.len()).min(n);
        buf.extend_from_slice(&chunk[..room]);
    }
}

impl Secrets {
    /// Reads every credential's value (`env` is dsh-exec's own
    /// environment) and makes a phantom for each.
    ///
    /// Errors with a one-line usage error that names the credential and
    /// its source (never a value): a variable not set, a file or
    /// descriptor that cannot be read, a value that is empty, longer than
    /// [`SECRET_MAX`], or holds a control character (which could end a
    /// header field early).
    pub fn load(creds: &[Credential], env: &[(OsString, OsString)]) -> Result<Secrets, String> {
        let mut out = Vec::new();
        for c in creds {
            let bad = |why: String| format!("--credential {}: {why}", c);
            let mut value = match &c.source {
                Source::Env(var) => {
                    let v = env
                        .iter()
                        .rev()
                        .find(|(k, _)| k == var.as_str())
                        .ok_or_else(|| bad(format!("the variable {var} is not set")))?;
                    if v.1.is_empty() {
                        return Err(bad(format!("the variable {var} is empty")));
                    }
                    Zeroizing::new(std::os::unix::ffi::OsStrExt::as_bytes(v.1.as_os_str()).to_vec())
                }
                Source::File(path) => {
                    use std::os::unix::fs::MetadataExt;
                    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
                    // The read deny list hides this path; another hard
                    // link to the same file would stay readable.
                    let links = f.metadata().map_err(|e| bad(e.to_string()))?.nlink();
                    if links > 1 {
                        return Err(bad(format!(
                            "the file has {links} hard links; the command could read it \
                             through another: copy it to a file of its own"
                        )));
                    }
                    read_bounded(f).map_err(|e| bad(e.to_string()))?
                }
                Source::Fd(n) => {
                    let fd = crate::sys::take_inherited_fd(*n)
                        .ok_or_else(|| bad(format!("descriptor {n} is not open")))?;
                    read_bounded(std::fs::File::from(fd)).map_err(|e| bad(e.to_string()))?
                }
            };
            if value.ends_with(b"\n") {
                value.pop();
                if value.ends_with(b"\r") {
                    value.pop();
                }
            }
            if value.is_empty() {
                return Err(bad("the value is empty".into()));
            }
            if value.len() > SECRET_MAX {
                return Err(bad(format!("the value is longer than {SECRET_MAX} bytes")));
            }
            if value.iter().any(|b| *b < 0x20 || *b == 0x7f) {
                return Err(bad(
                    "the value holds a control character (a line break?), which no header \
                     field may carry"
                        .into(),
                ));
            }
            let mut random = [0u8; 16];
            crate::sys::random_bytes(&mut random)
                .map_err(|e| bad(format!("no random bytes for its phantom: {e}")))?;
            let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
            out.push(Secret {
                name: c.name.clone(),
                phantom: format!("{PHANTOM_PREFIX}{}-{hex}", c.name.to_ascii_lowercase()),
                value,
            });
        }
        Ok(Secrets(out))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The credentials, in the order declared.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.0.iter()
    }

    /// The one named `name`.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.0.iter().find(|s| s.name == name)
    }

    /// The names and values as the job handoff carries them after the
    /// spec: for each, the name, the phantom and the value, each as a
    /// 4-byte big-endian length and its bytes. Zeroed when dropped.
    pub(crate) fn to_wire(&self) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(Vec::new());
        for s in &self.0 {
            for part in [s.name.as_bytes(), s.phantom.as_bytes(), &s.value[..]] {
                out.extend_from_slice(&(part.len() as u32).to_be_bytes());
                out.extend_from_slice(part);
            }
        }
        out
    }

    /// The inverse of [`Secrets::to_wire`]; `None` when `wire` is not
    /// such a list.
    pub(crate) fn from_wire(mut wire: &[u8]) -> Option<Secrets> {
        let take = |w: &mut &[u8]| -> Option<Zeroizing<Vec<u8>>> {
            let n = u32::from_be_bytes(w.get(..4)?.try_into().ok()?) as usize;
            let part = Zeroizing::new(w.get(4..4 + n)?.to_vec());
            *w = &w[4 + n..];
            Some(part)
        };
        let mut out = Vec::new();
        while !wire.is_empty() {
            let name = String::from_utf8(take(&mut wire)?.to_vec()).ok()?;
            let phantom = String::from_utf8(take(&mut wire)?.to_vec()).ok()?;
            let value = take(&mut wire)?;
            out.push(Secret {
                name,
                value,
                phantom,
            });
        }
        Some(Secrets(out))
    }
}

/// The reason of a refusal of a request that carries a phantom to a host
/// no rule of its credential names (an attempt to send the credential
/// elsewhere).
pub const PHANTOM_UNLISTED: &str = "phantom to unlisted host";

/// The reason of a refusal of a request that carries a phantom to an
/// injection host, on a path no rule of its credential covers.
pub const NO_RULE: &str = "no injection rule";

/// The reason of a refusal of a TLS connection to an injection host whose
/// client did not accept the run's certificate (it pins certificates or
/// ignores the CA variables).
pub const TLS_PINNED: &str = "tls pinned";

/// What becomes of one request: its target (the query may have changed),
/// the field it loses and the one it gains (the credential), and which
/// credential was used.
pub(crate) struct Injected {
    /// The request target, origin form.
    pub target: String,
    /// A header field (lower case) every instance of which is dropped.
    pub drop_field: Option<String>,
    /// The field added: its name and value (zeroed when dropped).
    pub add: Option<(String, Zeroizing<Vec<u8>>)>,
    /// The credential put in, by name.
    pub used: Option<String>,
    /// A request to a host some rule names that no rule covered (another
    /// path, a method or a plain `http://` that never gets one): it goes
    /// on without a credential.
    pub missed: bool,
}

/// Whether `hay` holds `needle`.
fn holds(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The credentials whose phantoms a request carries: in its target, in
/// any field value, or inside a field's `Basic` credentials (base64).
fn carried<'a>(secrets: &'a Secrets, target: &str, fields: &[(&str, &[u8])]) -> Vec<&'a str> {
    use base64::Engine;
    let decoded: Vec<Vec<u8>> = fields
        .iter()
        .filter_map(|(_, v)| {
            let v = std::str::from_utf8(v).ok()?.trim();
            let (scheme, b64) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then(|| {
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()
            })?
        })
        .collect();
    secrets
        .iter()
        .filter(|s| {
            let p = s.phantom.as_bytes();
            holds(target.as_bytes(), p)
                || fields.iter().any(|(_, v)| holds(v, p))
                || decoded.iter().any(|d| holds(d, p))
        })
        .map(|s| s.name.as_str())
        .collect()
}

/// Judges one request to `host` (normalized) on `port` with this
/// `target` (origin form) and these fields, against the rules: the
/// credential of the rule that covers it (the longest prefix) goes in,
/// and a phantom that goes anywhere else is refused.
///
/// Errors with the reason of a refusal ([`PHANTOM_UNLISTED`],
/// [`NO_RULE`], each with the credential's name).
///
/// Only a request inside TLS the proxy ended (`tls`) gets a credential: on
/// plain `http://` anyone on the way would read it. Nor does a `TRACE` or
/// `TRACK` (RFC 9110 9.3.8: the server echoes the request, credential
/// and all), or a target with a fragment (never sent by a client).
#[allow(clippy::too_many_arguments)]
pub(crate) fn judge(
    rules: &[InjectRule],
    secrets: &Secrets,
    method: &str,
    host: &str,
    port: u16,
    target: &str,
    fields: &[(&str, &[u8])],
    tls: bool,
) -> Result<Injected, String> {
    let carried = carried(secrets, target, fields);
    let injectable = tls
        && !method.eq_ignore_ascii_case("TRACE")
        && !method.eq_ignore_ascii_case("TRACK")
        && !target.contains('#');
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let for_host: Vec<&InjectRule> = rules.iter().filter(|r| r.holds(host, port)).collect();
    let rule = for_host
        .iter()
        .filter(|r| injectable && r.covers(path))
        .max_by_key(|r| r.prefix.len());
    let unchanged = || Injected {
        target: target.to_string(),
        drop_field: None,
        add: None,
        used: None,
        missed: !for_host.is_empty(),
    };
    let Some(rule) = rule else {
        return match carried.first() {
            None => Ok(unchanged()),
            Some(name) if for_host.iter().any(|r| r.credential == *name) => {
                Err(format!("{NO_RULE}: {name}"))
            }
            Some(name) => Err(format!("{PHANTOM_UNLISTED}: {name}")),
        };
    };
    if let Some(other) = carried.iter().find(|n| **n != rule.credential) {
        let why = if for_host.iter().any(|r| r.credential == *other) {
            NO_RULE
        } else {
            PHANTOM_UNLISTED
        };
        return Err(format!("{why}: {other}"));
    }
    let secret = secrets
        .get(&rule.credential)
        .ok_or_else(|| format!("{NO_RULE}: {} has no value", rule.credential))?;
    let value = secret.value();
    let mut out = Injected {
        missed: false,
        target: target.to_string(),
        drop_field: rule.scheme.field(),
        add: None,
        used: Some(rule.credential.clone()),
    };
    match &rule.scheme {
        Scheme::Bearer => {
            let mut v = Zeroizing::new(b"Bearer ".to_vec());
            v.extend_from_slice(value);
            out.add = Some(("Authorization".into(), v));
        }
        Scheme::Basic(user) => {
            use base64::Engine;
            let mut pair = Zeroizing::new(format!("{user}:").into_bytes());
            pair.extend_from_slice(value);
            let mut v = Zeroizing::new(b"Basic ".to_vec());
            v.extend_from_slice(
                Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(&pair[..]))
                    .as_bytes(),
            );
            out.add = Some(("Authorization".into(), v));
        }
        Scheme::Header(field) => {
            out.add = Some((field.clone(), Zeroizing::new(value.to_vec())));
        }
        Scheme::Query(param) => {
            let mut q: Vec<&str> = query
                .unwrap_or("")
                .split('&')
                .filter(|kv| {
                    // The command's own parameter of that name goes, in
                    // any case or encoding: the upstream takes one value.
                    let name = kv.split('=').next().unwrap_or_default();
                    let name = percent_decoded(name.as_bytes());
                    !kv.is_empty() && !name.eq_ignore_ascii_case(param.as_bytes())
                })
                .collect();
            let pair = Zeroizing::new(format!("{param}={}", &*percent_encode(value)));
            q.push(&pair);
            out.target = format!("{path}?{}", q.join("&"));
        }
    }
    Ok(out)
}

/// The byte strings whose presence in a response's header field gets the
/// field redacted: each value as it is, percent-encoded, and in base64
/// inside the `Basic` credentials of every rule that sends it so.
pub(crate) fn needles(rules: &[InjectRule], secrets: &Secrets) -> Vec<Zeroizing<Vec<u8>>> {
    use base64::Engine;
    let mut out = Vec::new();
    for s in secrets.iter() {
        out.push(Zeroizing::new(s.value().to_vec()));
        let enc = percent_encode(s.value());
        if enc.as_bytes() != s.value() {
            out.push(Zeroizing::new(enc.as_bytes().to_vec()));
        }
        for engine in [
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            out.push(Zeroizing::new(engine.encode(s.value()).into_bytes()));
        }
        for r in rules.iter().filter(|r| r.credential == s.name) {
            if let Scheme::Basic(user) = &r.scheme {
                let mut pair = Zeroizing::new(format!("{user}:").into_bytes());
                pair.extend_from_slice(s.value());
                out.push(Zeroizing::new(
                    base64::engine::general_purpose::STANDARD
                        .encode(&pair[..])
                        .into_bytes(),
                ));
            }
        }
    }
    out
}

/// Whether a response field's value holds a secret (see [`needles`]).
pub(crate) fn redacts(needles: &[Zeroizing<Vec<u8>>], value: &[u8]) -> bool {
    needles.iter().any(|n| holds(value, n))
}

/// Percent-encodes `v` for a query value (RFC 3986 2.3: unreserved
/// characters stay).
pub(crate) fn percent_encode(v: &[u8]) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::with_capacity(v.len() * 3));
    for b in v {
        if b.is_ascii_alphanumeric() || b"-._~".contains(b) {
            out.push(*b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_print_as_written() {
        for (text, shown) in [
            ("api.example.org=bearer:GH", "api.example.org:443=bearer:GH"),
            (
                "Example.org:8443/v1/repos=basic:me:GH",
                "example.org:8443/v1/repos=basic:me:GH",
            ),
            (
                "[::1]:9/x=header:X-Api-Key:K",
                "[::1]:9/x=header:X-Api-Key:K",
            ),
            ("*.example.org=query:key:K", "*.example.org:443=query:key:K"),
        ] {
            let r: InjectRule = text.parse().unwrap();
            assert_eq!(r.to_string(), shown);
            assert_eq!(r.to_string().parse::<InjectRule>().unwrap(), r);
        }
        for bad in [
            "api.example.org",
            "api.example.org=bearer",
            "api.example.org=token:K",
            "api.example.org=header:Host:K",
            "api.example.org=header:Content-Length:K",
            "api.example.org=header:Bad Name:K",
            "api.example.org=query:a&b:K",
            "api.example.org/a/../b=bearer:K",
            "api.example.org/a%2fb=bearer:K",
            "api.example.org/a?x=bearer:K",
            "https://api.example.org=bearer:K",
            "api.example.org=bearer:K K",
        ] {
            assert!(bad.parse::<InjectRule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn prefixes_cover_whole_segments_and_never_a_path_that_could_climb_out() {
        let r: InjectRule = "a.org/repos/me=bearer:K".parse().unwrap();
        assert!(r.covers("/repos/me"));
        assert!(r.covers("/repos/me/"));
        assert!(r.covers("/repos/me/x"));
        assert!(r.covers("/repos/me/group%2Fproject"));
        assert!(r.covers("/repos/me/compare/a...b@x"));
        assert!(r.covers("/repos/me/%40scope%2Fpkg"));
        assert!(!r.covers("/repos/me/x%2F..%2F..%2Fother"));
        assert!(!r.covers("/repos/meow"));
        assert!(!r.covers("/repos"));
        for climbing in [
            "/repos/me/../other",
            "/repos/me/./x",
            "/repos/me/%2e%2e/other",
            "/repos/me/%2E./other",
            "/repos/me/%252e%252e/other",
            "/repos/me/%25252e%25252e/other",
            "/repos/me/..;/other",
            "/repos/me/..;x=1/other",
            "/repos/me/.../other",
            "/repos/me/%c0%ae%c0%ae/other",
            "/repos/me/..\\other",
            "/repos/me/..%5cother",
            "/repos/me/..%255cother",
            "/repos/me/%u002e%u002e/other",
            "/repos/me/%ef%bc%8e%ef%bc%8e/other",
            "/repos/me/%e2%80%a4%e2%80%a4/other",
            "/repos/me/.%00./other",
            "/repos/me/..%09/other",
            "/repos/me/x;y",
            "/repos/me/caf%C3%A9",
            "/repos/me/100%",
            "/repos/me/%2e",
        ] {
            assert!(!r.covers(climbing), "{climbing}");
        }
        // The prefix / is the whole host: nothing to climb out of.
        let all: InjectRule = "a.org=bearer:K".parse().unwrap();
        assert!(all.covers("/"));
        assert!(all.covers("/x/y"));
        assert!(all.covers("/x/../y"));
        assert!(!all.covers("*"));
    }

    #[test]
    fn credentials_parse_sources_never_values() {
        assert_eq!(
            "GH=env:GITHUB_TOKEN".parse::<Credential>().unwrap().source,
            Source::Env("GITHUB_TOKEN".into())
        );
        assert_eq!(
            "GH=fd:3".parse::<Credential>().unwrap().source,
            Source::Fd(3)
        );
        for bad in [
            "GH",
            "GH=ghp_abc",
            "GH=fd:1",
            "GH=fd:x",
            "=env:X",
            "G H=env:X",
            "GH=env:",
        ] {
            assert!(bad.parse::<Credential>().is_err(), "{bad}");
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn values_are_checked_and_never_shown() {
        let c = |s: &str| vec![s.parse::<Credential>().unwrap()];
        let s = Secrets::load(&c("GH=env:T"), &env(&[("T", "s3cret\n")])).unwrap();
        assert_eq!(s.get("GH").unwrap().value(), b"s3cret");
        assert!(
            s.get("GH")
                .unwrap()
                .phantom()
                .starts_with("dsh-exec-phantom-gh-")
        );
        assert_eq!(format!("{s:?}"), "[\"GH\"]");
        for (e, why) in [
            (env(&[]), "the variable T is not set"),
            (env(&[("T", "")]), "the variable T is empty"),
            (env(&[("T", "\n")]), "the value is empty"),
            (env(&[("T", "a\r\nX-Evil: 1")]), "control character"),
        ] {
            let err = Secrets::load(&c("GH=env:T"), &e).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        let wire = s.to_wire();
        assert_eq!(Secrets::from_wire(&wire).unwrap(), s);
        assert_eq!(
            Secrets::from_wire(&wire)
                .unwrap()
                .get("GH")
                .unwrap()
                .value(),
            b"s3cret"
        );
        assert!(Secrets::from_wire(&wire[..wire.len() - 1]).is_none());
    }

    #[test]
    fn declarations_are_checked_against_each_other_and_the_allow_list() {
        let decl = |creds: &[&str], rules: &[&str]| Injection {
            credentials: creds.iter().map(|c| c.parse().unwrap()).collect(),
            inject: rules.iter().map(|c| c.parse().unwrap()).collect(),
            ..Injection::default()
        };
        let allow: Vec<HostRule> =
            super::super::rules::parse_list("*.example.org,b.org:8443").unwrap();
        assert!(
            decl(&["K=env:T"], &["a.example.org=bearer:K"])
                .check(Some(&allow))
                .is_ok()
        );
        assert!(
            decl(&["K=env:T"], &["b.org:8443=bearer:K"])
                .check(Some(&allow))
                .is_ok()
        );
        for (d, why) in [
            (
                decl(&["K=env:T"], &["b.org=bearer:K"]),
                "not on the --network allow=",
            ),
            (
                decl(&["K=env:T"], &["c.org=bearer:K"]),
                "not on the --network allow=",
            ),
            (decl(&["K=env:T"], &[]), "has no --inject rule"),
            (decl(&[], &["a.example.org=bearer:K"]), "no --credential K"),
            (
                decl(&["K=env:T", "K=env:U"], &["a.example.org=bearer:K"]),
                "twice",
            ),
        ] {
            let err = d.check(Some(&allow)).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        let ok = decl(&["K=env:T"], &["a.example.org=bearer:K"]);
        assert!(
            ok.check(None)
                .unwrap_err()
                .contains("need --network allow=")
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(&*percent_encode(b"a b/+~"), "a%20b%2F%2B~");
    }

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        let creds: Vec<Credential> = pairs
            .iter()
            .map(|(n, _)| format!("{n}=env:V_{n}").parse().unwrap())
            .collect();
        let e: Vec<(OsString, OsString)> = pairs
            .iter()
            .map(|(n, v)| (format!("V_{n}").into(), (*v).into()))
            .collect();
        Secrets::load(&creds, &e).unwrap()
    }

    #[test]
    fn the_rule_s_credential_goes_in_and_a_phantom_goes_nowhere_else() {
        let s = secrets(&[("GH", "real-gh"), ("NPM", "real npm")]);
        let rules: Vec<InjectRule> = [
            "api.gh.test/repos=bearer:GH",
            "api.gh.test/repos/x=basic:me:GH",
            "reg.test:8080=query:token:NPM",
        ]
        .iter()
        .map(|r| r.parse().unwrap())
        .collect();
        let gh = s.get("GH").unwrap().phantom().to_string();
        let npm = s.get("NPM").unwrap().phantom().to_string();
        let auth = format!("Bearer {gh}");
        // Covered: the real value in, whatever the command sent there.
        let i = judge(
            &rules,
            &s,
            "GET",
            "api.gh.test",
            443,
            "/repos/a",
            &[("Authorization", auth.as_bytes())],
            true,
        )
        .ok()
        .unwrap();
        assert_eq!(i.drop_field.as_deref(), Some("authorization"));
        assert_eq!(
            i.add.as_ref().map(|(k, v)| (k.as_str(), v.to_vec())),
            Some(("Authorization", b"Bearer real-gh".to_vec()))
        );
        // The longest prefix wins.
        let i = judge(
            &rules,
            &s,
            "GET",
            "api.gh.test",
            443,
            "/repos/x/y",
            &[],
            true,
        )
        .ok()
        .unwrap();
        assert_eq!(
            i.add.unwrap().1.to_vec(),
            b"Basic bWU6cmVhbC1naA==".to_vec()
        );
        // Query: replaced, encoded.
        let i = judge(
            &rules,
            &s,
            "GET",
            "reg.test",
            8080,
            &format!("/p?a=1&token={npm}&b=2"),
            &[],
            true,
        )
        .ok()
        .unwrap();
        assert_eq!(i.target, "/p?a=1&b=2&token=real%20npm");
        let i = judge(
            &rules,
            &s,
            "GET",
            "reg.test",
            8080,
            "/p?TOKEN=mine&t%6Fken=mine&x=1",
            &[],
            true,
        )
        .ok()
        .unwrap();
        assert_eq!(i.target, "/p?x=1&token=real%20npm");
        assert_eq!(i.drop_field, None);
        // Not the rule's port: nothing in, and a phantom is refused.
        let i = judge(&rules, &s, "GET", "reg.test", 443, "/p", &[], true)
            .ok()
            .unwrap();
        assert!(i.add.is_none() && i.used.is_none());
        // A phantom to another host, in any form.
        let basic = {
            use base64::Engine;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("x:{gh}"))
            )
        };
        for (host, target, fields) in [
            (
                "evil.test",
                "/".to_string(),
                vec![("Authorization", auth.as_bytes())],
            ),
            ("evil.test", format!("/?k={gh}"), vec![]),
            (
                "evil.test",
                "/".to_string(),
                vec![("Authorization", basic.as_bytes())],
            ),
            (
                "evil.test",
                "/".to_string(),
                vec![("X-Anything", gh.as_bytes())],
            ),
        ] {
            let err = judge(&rules, &s, "GET", host, 443, &target, &fields, true)
                .err()
                .unwrap();
            assert_eq!(err, "phantom to unlisted host: GH");
        }
        for (target, field, expected) in [
            // The right host, a path no rule covers.
            (
                "/user",
                ("Authorization", auth.as_bytes()),
                "no injection rule: GH",
            ),
            (
                "/repos/../user",
                ("Authorization", auth.as_bytes()),
                "no injection rule: GH",
            ),
            // Another credential's phantom to a host of this one.
            (
                "/repos/a",
                ("X-Npm", npm.as_bytes()),
                "phantom to unlisted host: NPM",
            ),
        ] {
            let err = judge(
                &rules,
                &s,
                "GET",
                "api.gh.test",
                443,
                target,
                &[field],
                true,
            )
            .err()
            .unwrap();
            assert_eq!(err, expected, "{target}");
        }
        // Never on plain http, never in a TRACE, never with a fragment:
        // the phantom is then refused, and without one nothing goes in.
        for (method, target, tls) in [
            ("GET", "/repos/a", false),
            ("TRACE", "/repos/a", true),
            ("track", "/repos/a", true),
            ("GET", "/repos/a#x", true),
        ] {
            let err = judge(
                &rules,
                &s,
                method,
                "api.gh.test",
                443,
                target,
                &[("Authorization", auth.as_bytes())],
                tls,
            )
            .err()
            .unwrap();
            assert_eq!(err, "no injection rule: GH", "{method} {target} {tls}");
            let i = judge(&rules, &s, method, "api.gh.test", 443, target, &[], tls)
                .ok()
                .unwrap();
            assert!(i.add.is_none() && i.used.is_none());
        }
        // No phantom and no rule: unchanged.
        assert!(judge(&rules, &s, "GET", "api.gh.test", 443, "/user", &[], true).is_ok());
    }

    #[test]
    fn response_fields_holding_a_secret_in_any_form_are_found() {
        let s = secrets(&[("GH", "re al")]);
        let rules: Vec<InjectRule> = vec!["a.test=basic:me:GH".parse().unwrap()];
        let n = needles(&rules, &s);
        assert!(redacts(&n, b"token=re al"));
        assert!(redacts(&n, b"x re%20al"));
        assert!(redacts(&n, b"Basic bWU6cmUgYWw="));
        assert!(!redacts(&n, b"real"));
    }
}
