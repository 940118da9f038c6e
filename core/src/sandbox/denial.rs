//! What a confined run was refused, exactly where it can be known.
//!
//! Two sources, and the result says which each denial came from:
//! - **the gate** ([`super::gate`]): every call it refuses is known
//!   exactly: the operation, the path or socket, the errno; and under
//!   `--network deny`, every network socket refused;
//! - **the output** ([`from_output`]): a write Landlock or the read-only
//!   mount tree refused is never seen by `dsh-exec`, only its message. A
//!   message counts only when the command failed, it says what a refused
//!   write says (`Read-only file system`, `Permission denied`, `EACCES`,
//!   `EROFS`, `Operation not permitted`, sqlite's `attempt to write a
//!   readonly database`), and it names a path the sandbox is the cause
//!   for: outside every writable root (and writable by `dsh-exec`'s user,
//!   or the sandbox is not why), or a protected path. A path inside a
//!   writable root is never the sandbox's doing; neither is a shell that
//!   could not run a file without an execute bit. A `Read-only file
//!   system` with no path counts too: outside the sandbox's mounts it is
//!   rare.
//!
//! Each file denial carries a hint where one helps: `--allow-caches` for a
//! package cache, `--writable-root DIR` for a directory in the home,
//! `--sandbox workspace-write` for the workspace in `read-only`.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Mode, Network};

/// Output substrings (compared in lower case) that show a refused write.
pub const DENIAL_MARKERS: [&str; 8] = [
    "read-only file system",
    "permission denied",
    "operation not permitted",
    "eacces",
    "erofs",
    "eperm",
    "attempt to write a readonly database",
    "device or resource busy",
];

/// The most denials a result lists; the rest are counted.
pub const MAX_DENIALS: usize = 100;

/// One refusal, as the result reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DenialFact {
    /// What was refused: `write` (from the output), `chmod`, `chown`,
    /// `utime`, `xattr`, `connect`, `sendto`, `sendmsg`, `sendmmsg`,
    /// `socket`, `socketpair`.
    pub op: String,
    /// The path (as named; `@name` for an abstract socket), or the address
    /// family of a network socket (`AF_INET`); absent when not known.
    #[serde(default)]
    pub path: Option<String>,
    /// The errno the command got, by name (`EACCES`, `EROFS`, `EPERM`, ...).
    pub errno: String,
    /// `gate` (known exactly) or `output` (read from the command's output).
    pub source: String,
    /// True for a network socket refused under `--network deny`.
    #[serde(default)]
    pub network: bool,
    /// What would allow it, when something would: a flag to add.
    #[serde(default)]
    pub hint: Option<String>,
    /// How many times this same refusal happened (1 or more).
    #[serde(default = "one")]
    pub count: u64,
}

fn one() -> u64 {
    1
}

/// What judging a path needs to know about the run.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The mode.
    pub mode: Option<Mode>,
    /// The working directory (relative paths in messages are taken from it).
    pub workdir: PathBuf,
    /// The writable roots, real paths.
    pub writable: Vec<PathBuf>,
    /// The protected paths (existing and not), real paths.
    pub protected: Vec<PathBuf>,
    /// Those of them that `--allow-write` could lift: the protected files
    /// of editors and agents.
    pub liftable: Vec<PathBuf>,
    /// The package caches `--allow-caches` would grant.
    pub caches: Vec<PathBuf>,
    /// The caller's home.
    pub home: Option<PathBuf>,
    /// The run has the read-only mount tree: a write it refuses outside
    /// `/dev`, `/proc` and `/sys` fails with EROFS (the mount is checked
    /// before Landlock: mnt_want_write(9) comes first in every path-based
    /// write), so a message with another errno is not the sandbox's.
    /// Without it, Landlock refuses with EACCES (or EXDEV for a rename),
    /// never EROFS.
    pub read_only_tree: bool,
    /// The read deny list's entries that exist (real paths), and the
    /// `--allow-read` exceptions inside them.
    pub read_denied: Vec<PathBuf>,
    pub read_exceptions: Vec<PathBuf>,
    /// Under `--read-root`: every path reads are granted on (empty: `/`).
    pub read_roots: Vec<PathBuf>,
    /// `dsh-exec`'s own state directory (jobs, spill files), on the deny
    /// list: a refusal there gets no hint, since lifting it would open
    /// every run's output to the command.
    pub state_dir: Option<PathBuf>,
    /// The files of `--credential NAME=file:PATH` (real paths), on the
    /// deny list: a refusal there gets no hint either.
    pub secret_files: Vec<PathBuf>,
    /// The mode whose default the network policy is, when no flag or
    /// configuration named one ([`super::Policy::network_default_of`]): a
    /// network refusal's hint says so.
    pub network_default_of: Option<Mode>,
}

/// The directory of the home a refused write to `path` (inside `home`)
/// would need: the first one below the home (`~/src`), or one under
/// `~/.cache` (`~/.cache/x`); `None` for a file directly in the home and
/// for every other dot directory. Those hold a tool's configuration or
/// state (`~/.config/git`, `~/.config/systemd`, `~/.ssh`, `~/.cargo/env`,
/// `~/.local/bin`), which programs obey or run later: granting one is a
/// decision no hint should make for the caller (the package caches, which
/// are safe to grant, have `--allow-caches`).
fn home_dir_for(home: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(home).ok()?;
    let mut parts = rel.components();
    let first = parts.next()?;
    let name = first.as_os_str().to_str().unwrap_or("");
    let mut dir = home.join(first);
    if name == ".cache" {
        dir.push(parts.next()?);
    } else if name.starts_with('.') {
        return None;
    }
    if parts.next().is_none() && !dir.is_dir() {
        return None; // a file directly in the home
    }
    Some(dir)
}

/// What would allow a network call the gate refused under `network`:
/// `op` is the call, `target` its address (`192.0.2.2:80`) or socket kind.
/// Under `deny`, loopback or a host list; under `loopback` and `allow=`,
/// the proxy for HTTP and HTTPS or all of the network, since no list lets
/// a direct connection or a raw socket through. `default_of` is the mode
/// whose default the policy is (no flag or configuration named one): the
/// hint then says so, since the caller asked for no network policy at all.
pub fn network_hint(
    network: Network,
    op: &str,
    target: Option<&str>,
    default_of: Option<Mode>,
) -> Option<String> {
    let hint = flags_for_network(network, op, target)?;
    Some(match default_of {
        Some(mode) => format!("{hint} ({mode} defaults to --network {network})"),
        None => hint,
    })
}

/// The flags of [`network_hint`].
fn flags_for_network(network: Network, op: &str, target: Option<&str>) -> Option<String> {
    let socket_kind = op == "socket" || op == "socketpair";
    // Only an IPv4 or IPv6 socket of a kind the gated policies keep
    // (stream, datagram) is let through by anything short of `allow`.
    let ip = target.is_some_and(|t| t == "AF_INET" || t == "AF_INET6");
    match network {
        Network::Allow => None,
        Network::Deny if socket_kind && !ip => Some("--network allow".into()),
        Network::Deny => Some("--network loopback (local servers) or --network allow=HOST".into()),
        Network::Loopback if socket_kind => Some("--network allow".into()),
        // A name server (often the first refusal of `curl https://...`):
        // allowing it through the proxy would do nothing, since the proxy
        // resolves the names it is asked for itself.
        Network::Loopback if is_dns(target) => Some(
            "--network allow=HOST for the name looked up (HTTP and HTTPS, through a proxy \
             that resolves names itself) or --network allow"
                .into(),
        ),
        Network::Loopback => {
            let host = target
                .and_then(|t| t.rsplit_once(':').map(|(h, _)| h))
                .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
                .filter(|h| !h.is_empty())
                .unwrap_or("HOST");
            Some(format!(
                "--network allow={host} (HTTP and HTTPS, through a proxy) or --network allow"
            ))
        }
        Network::AllowList if socket_kind => Some("--network allow".into()),
        Network::AllowList => Some(
            "the proxy in HTTPS_PROXY and HTTP_PROXY (for the hosts of --network allow=), or \
             --network allow"
                .into(),
        ),
    }
}

/// Whether a refused call's target (`10.0.0.2:53`, `[2001:db8::53]:53`)
/// is a name server's port.
fn is_dns(target: Option<&str>) -> bool {
    target
        .and_then(|t| t.rsplit_once(':'))
        .is_some_and(|(_, port)| port == "53")
}

/// The name of an errno, for a denial.
pub fn errno_name(errno: i32) -> String {
    use nix::libc;
    match errno {
        libc::EACCES => "EACCES".into(),
        libc::EPERM => "EPERM".into(),
        libc::EROFS => "EROFS".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EXDEV => "EXDEV".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EAGAIN => "EAGAIN".into(),
        libc::ECONNREFUSED => "ECONNREFUSED".into(),
        other => format!("errno {other}"),
    }
}

/// `path` without `.` and `..` components, taken from `base` when
/// relative (lexically: a refused path may not exist).
fn normalize(base: &Path, path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// `path` as the command's kernel resolved it, as far as `dsh-exec` can
/// tell: taken from `cwd` (the run's working directory) when relative;
/// `/proc/self/cwd` and `/proc/thread-self/cwd` (which name the caller's own
/// directory: proc(5)) as `cwd`, `/proc/self/root` as `/`; then walked one
/// component at a time as path_resolution(7) does: `..` from the directory
/// reached (not from the name written), each symlink followed where it
/// stands, a dangling one too (a write through it creates its target),
/// at most 40 of them (ELOOP). What does not exist is kept as written,
/// with `.` and `..` taken lexically.
pub(crate) fn resolve_as_child(cwd: &Path, path: &Path) -> PathBuf {
    use std::collections::VecDeque;
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut todo: VecDeque<std::ffi::OsString> = VecDeque::new();
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        cwd.to_path_buf()
    };
    let mut rest = path;
    for (proc, to) in [
        (&b"/proc/self/cwd"[..], cwd),
        (b"/proc/thread-self/cwd", cwd),
        (b"/proc/self/root", Path::new("/")),
        (b"/proc/thread-self/root", Path::new("/")),
    ] {
        if bytes.starts_with(proc) && matches!(bytes.get(proc.len()), None | Some(b'/')) {
            at = to.to_path_buf();
            rest = path.strip_prefix(path_of(proc)).unwrap_or(Path::new(""));
            break;
        }
    }
    todo.extend(rest.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_os_string()),
        Component::ParentDir => Some("..".into()),
        _ => None,
    }));
    let mut links = 0;
    let mut exists = true;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        if exists {
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() && links < 40 => {
                    links += 1;
                    let Ok(target) = std::fs::read_link(&next) else {
                        at = next;
                        continue;
                    };
                    if target.is_absolute() {
                        at = PathBuf::from("/");
                    }
                    for c in target.components().rev() {
                        match c {
                            Component::Normal(n) => todo.push_front(n.to_os_string()),
                            Component::ParentDir => todo.push_front("..".into()),
                            _ => {}
                        }
                    }
                    continue;
                }
                Ok(_) => {}
                Err(_) => exists = false,
            }
        }
        at = next;
    }
    at
}

/// Whether the file system holding `path` (or its nearest existing
/// ancestor) is mounted read-only here (statvfs(3) `ST_RDONLY`): a write
/// there fails with EROFS sandbox or not.
fn on_read_only_mount(path: &Path) -> bool {
    path.ancestors()
        .find_map(|a| nix::sys::statvfs::statvfs(a).ok())
        .is_some_and(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

/// `Path::new` for bytes.
fn path_of(b: &[u8]) -> &Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(b))
}

/// Whether this process's user could write `path` (or create it in its
/// longest existing ancestor), as access(2) judges: when not, the sandbox
/// is not why a write there failed.
fn caller_could_write(path: &Path) -> bool {
    let mut at = Some(path);
    while let Some(p) = at {
        if p.exists() {
            return nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
        }
        at = p.parent();
    }
    false
}

/// Whether this process's user could make the metadata change `op`
/// (`chmod`, `chown`, `utime`, `xattr`, as the gate names them) to `path`
/// outside any sandbox: root can; anyone else only on a file it owns
/// (chmod(2), chown(2), setxattr(2) of `user.*` names: EPERM otherwise),
/// or for `utime` also on a file it may write (utimensat(2): setting both
/// times to now needs write permission only). A path that cannot be
/// looked at counts as changeable (the hint is kept).
pub(crate) fn this_user_may_change(op: &str, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid();
    if me.is_root() {
        return true;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return true;
    };
    meta.uid() == me.as_raw()
        || (op == "utime" && nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok())
}

impl Context {
    fn under_writable(&self, p: &Path) -> bool {
        self.writable.iter().any(|r| p.starts_with(r))
    }

    fn protected(&self, p: &Path) -> bool {
        self.protected.iter().any(|x| p.starts_with(x))
    }

    /// What would allow a write to `path` (real), if a flag would.
    pub fn hint(&self, path: &Path) -> Option<String> {
        if self.protected(path) {
            // A file of an editor or agent, unless something else keeps
            // it protected too (dsh-exec's own, a --protect).
            let mut covering = self.protected.iter().filter(|x| path.starts_with(x));
            if covering.all(|x| self.liftable.contains(x)) {
                return self
                    .liftable
                    .iter()
                    .find(|x| path.starts_with(x))
                    .map(|x| format!("--allow-write {}", x.display()));
            }
            return None;
        }
        if let Some(cache) = self.caches.iter().find(|c| path.starts_with(c)) {
            return Some(format!(
                "--allow-caches (or --writable-root {})",
                cache.display()
            ));
        }
        if self.mode == Some(Mode::ReadOnly)
            && (path.starts_with(&self.workdir) || path == self.workdir)
        {
            return Some("--sandbox workspace-write".into());
        }
        let dir = match self.home.as_ref().filter(|h| path.starts_with(h)) {
            Some(home) => home_dir_for(home, path)?,
            // Elsewhere the directory the write lands in; never the root,
            // nor the kernel's file systems, which no root would make
            // writable.
            None => {
                let dir = path.parent()?;
                let kernel = ["/proc", "/sys", "/dev"].iter().any(|k| dir.starts_with(k));
                if dir == Path::new("/") || kernel {
                    return None;
                }
                dir.to_path_buf()
            }
        };
        Some(match self.mode {
            Some(Mode::ReadOnly) => {
                format!(
                    "--sandbox workspace-write --writable-root {}",
                    dir.display()
                )
            }
            _ => format!("--writable-root {}", dir.display()),
        })
    }

    /// A refused read of `path` (real), when it lies under an entry of the
    /// read deny list (Landlock refuses it with EACCES, whether or not the
    /// run failed).
    ///
    /// With a mount namespace a denied directory is hidden under an empty
    /// tmpfs, and a read in it fails with ENOENT: a read counts then when
    /// the file is there to `dsh-exec` (outside the run's mounts).
    fn judge_read(&self, p: &Path, errno: &str) -> Option<DenialFact> {
        let hidden_there = errno == "ENOENT"
            && std::fs::symlink_metadata(p).is_ok()
            && self.read_denied.iter().any(|d| p.starts_with(d) && p != d);
        if !(errno == "EACCES" || hidden_there)
            || self.read_exceptions.iter().any(|x| p.starts_with(x))
        {
            return None;
        }
        let hint = match self.read_denied.iter().find(|d| p.starts_with(d)) {
            Some(entry)
                if self.state_dir.as_deref() == Some(entry)
                    || self.secret_files.iter().any(|f| f == entry) =>
            {
                None
            }
            // Lifting all of /dev would open the raw disks: name the device.
            Some(entry) if entry == Path::new("/dev") => {
                Some(format!("--allow-read {}", p.display()))
            }
            Some(entry) => Some(format!("--allow-read {}", entry.display())),
            None if !self.read_roots.is_empty()
                && !self.read_roots.iter().any(|r| p.starts_with(r))
                && !self.under_writable(p) =>
            {
                let dir = if p.is_dir() {
                    p
                } else {
                    p.parent().unwrap_or(p)
                };
                Some(format!("--read-root {}", dir.display()))
            }
            None => return None,
        };
        Some(DenialFact {
            op: "read".into(),
            path: Some(p.to_string_lossy().into_owned()),
            errno: errno.into(),
            source: "output".into(),
            network: false,
            hint,
            count: 1,
        })
    }

    /// A file denial of `path` (as the message named it), if the sandbox is
    /// why it was refused.
    fn judge(&self, path: &str, errno: &str) -> Option<DenialFact> {
        let named = Path::new(path);
        let p = resolve_as_child(&self.workdir, named);
        if let Some(read) = self.judge_read(&p, errno) {
            return Some(read);
        }
        let protected = self.protected(&p);
        // A relative path the read-only tree refused that, taken from the
        // run's workdir, lies in a writable root: the command had changed
        // directory (`cd ../outside && touch f`), and the path is not where
        // it looks. EROFS in a writable root on a writable mount is the
        // tree's all the same: the denial is told, as written, with no
        // hint (which directory to lift is not known).
        // (`/proc/self/cwd/...` is relative to the directory too.)
        let from_cwd = named.is_relative()
            || ["/proc/self/cwd", "/proc/thread-self/cwd"]
                .iter()
                .any(|c| named.starts_with(c));
        // EROFS in a writable root on a writable mount (above); or the same
        // for a protected path (a mount point under the read-only tree,
        // EBUSY to a rename over it) named relative to a directory the
        // command changed to (`cd super && git submodule update`:
        // `.git/config`), told as written when a protected path ends with
        // it.
        if self.read_only_tree
            && from_cwd
            && !protected
            && ((errno == "EROFS" && self.under_writable(&p) && !on_read_only_mount(&p))
                || (errno == "EBUSY"
                    && named.is_relative()
                    && self.protected.iter().any(|x| x.ends_with(named))))
        {
            return Some(DenialFact {
                op: "write".into(),
                path: Some(path.to_string()),
                errno: errno.into(),
                source: "output".into(),
                network: false,
                hint: None,
                count: 1,
            });
        }
        if !protected && (self.under_writable(&p) || !caller_could_write(&p)) {
            return None;
        }
        let pseudo = ["/dev", "/proc", "/sys"].iter().any(|d| p.starts_with(d));
        let possible = match (self.read_only_tree && !pseudo, errno) {
            // A protected path is a mount point there: renaming over it is
            // EBUSY.
            (true, "EBUSY") => protected,
            (true, e) => e == "EROFS" || e == "ENOENT",
            // Landlock refuses with EACCES; EPERM on a device is a
            // capability (CAP_SYSLOG for /dev/kmsg), not the sandbox.
            (false, e) => e != "EROFS" && e != "EBUSY" && !(pseudo && e == "EPERM"),
        };
        // A write lands in a directory that exists (or makes the file that
        // is there): `refs/heads/x` of git's `cannot lock ref` is no file.
        let lands = p.exists() || p.parent().is_some_and(Path::is_dir);
        if !possible || !(lands || protected) {
            return None;
        }
        Some(DenialFact {
            op: "write".into(),
            path: Some(p.to_string_lossy().into_owned()),
            errno: errno.into(),
            source: "output".into(),
            network: false,
            hint: self.hint(&p),
            count: 1,
        })
    }
}

/// The errno a refusal message names.
fn errno_in(lower: &str) -> &'static str {
    if lower.contains("read-only file system") || lower.contains("erofs") {
        "EROFS"
    } else if lower.contains("device or resource busy") || lower.contains("ebusy") {
        "EBUSY"
    } else if lower.contains("operation not permitted") || lower.contains("eperm") {
        "EPERM"
    } else {
        "EACCES"
    }
}

/// The paths a line names: quoted ('...', "...", ‘...’, `...`), or
/// bare words that look like paths (start with `/`, `./`, `../` or `~/`),
/// colons and trailing punctuation trimmed.
fn paths_in(line: &str) -> Vec<String> {
    // tar names the member first, then what it could not do to it:
    // `tar: src: Cannot mkdir: Read-only file system`, `tar: l: Cannot
    // create symlink to 'a': ...` (the quoted word is the link's target).
    let fields: Vec<&str> = line.trim_start().split(": ").collect();
    if fields.len() >= 3
        && matches!(fields[0], "tar" | "bsdtar" | "gtar")
        && fields[2].to_ascii_lowercase().starts_with("cannot ")
        && !fields[1].is_empty()
    {
        return vec![fields[1].to_string()];
    }
    let mut found = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(a) = rest.find(open) {
            let after = &rest[a + open.len_utf8()..];
            let Some(b) = after.find(close) else { break };
            let inner = &after[..b];
            // A quoted word is taken as a path ('f' in "cannot touch 'f'"),
            // but not an errno's name (npm's `code: 'EACCES'`).
            let errno_name = inner.len() > 1
                && inner.starts_with('E')
                && inner[1..]
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            if !inner.is_empty() && !inner.contains(char::is_whitespace) && !errno_name {
                found.push(inner.to_string());
            }
            rest = &after[b + close.len_utf8()..];
        }
    }
    // `prog: ...`: the program's name is no path (`/usr/bin/ld: cannot open
    // output file m: Read-only file system`).
    let fields: Vec<&str> = line.split(": ").collect();
    let marker_at = fields.iter().position(|f| {
        let f = f.to_lowercase();
        DENIAL_MARKERS.iter().any(|m| f.starts_with(m))
    });
    // `PATH: Read-only file system` (git init): the first field is the path.
    let program = fields
        .first()
        .filter(|f| fields.len() > 1 && !f.contains(char::is_whitespace) && marker_at != Some(1))
        .copied();
    if found.is_empty() {
        // The field just before the refusal names the file: `bash: line 1:
        // out.txt: Read-only file system`, `tar: x.tar: Cannot open: ...`,
        // or ends with it: `cannot open output file m: ...`.
        let lower: Vec<String> = fields.iter().map(|f| f.to_lowercase()).collect();
        if let Some(at) = lower
            .iter()
            .position(|f| DENIAL_MARKERS.iter().any(|m| f.starts_with(m)))
        {
            let first = if program.is_some() { 1 } else { 0 };
            let before = fields[first.min(at)..at]
                .iter()
                .rev()
                .map(|f| f.trim())
                .find(|f| {
                    !f.is_empty()
                        && !f.eq_ignore_ascii_case("cannot open")
                        && !f.starts_with("line ")
                });
            if let Some(f) = before {
                let word = if f.contains(char::is_whitespace) {
                    let l = f.to_lowercase();
                    let verbs = [
                        "cannot",
                        "can't",
                        "could not",
                        "couldn't",
                        "failed to",
                        "unable to",
                    ];
                    let last = f.rsplit(char::is_whitespace).next().unwrap_or("");
                    // The last word names a file when the phrase says so
                    // (`output file m`, `mkdir r`) or it looks like one
                    // (`m.o`, `a/b`): not `failed to create pseudo-terminal`.
                    let names_a_file = ["file", "directory", "mkdir", "folder"]
                        .iter()
                        .any(|w| l.contains(w))
                        || last.contains(['.', '/']);
                    (verbs.iter().any(|v| l.starts_with(v)) && names_a_file).then_some(last)
                } else {
                    Some(f)
                };
                if let Some(w) = word.filter(|w| !w.is_empty()) {
                    found.push(w.trim_end_matches([',', ';', '.']).to_string());
                }
            }
        }
    }
    if found.is_empty() {
        for word in line.split(|c: char| c.is_whitespace() || c == ',' || c == '=') {
            let w = word
                .trim_end_matches([':', ',', ';', '.', ')'])
                .trim_start_matches('(');
            let pathlike = w.starts_with('/')
                || w.starts_with("./")
                || w.starts_with("../")
                || w.starts_with("~/");
            if pathlike && Some(w) != program {
                found.push(w.to_string());
            }
        }
    }
    found
}

/// Whether `line` is a shell's "cannot run this" (`bash: ./x: Permission
/// denied` for a file in the working directory without an execute bit):
/// an exec failure, not the sandbox's (Landlock allows executing
/// everywhere). The same words follow a refused redirection into such a
/// file; in the working directory that one goes unreported (where the
/// read-only tree refuses it, it says `Read-only file system` instead).
fn shell_exec_failure(ctx: &Context, line: &str, path: &str, errno: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let shell = ["bash:", "sh:", "zsh:", "dash:"]
        .iter()
        .any(|s| line.trim_start().starts_with(s));
    let p = normalize(&ctx.workdir, Path::new(path));
    shell
        && errno == "EACCES"
        && p.starts_with(&ctx.workdir)
        && std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 == 0)
}

/// The denials a failed confined run's output shows (see the module
/// documentation). Nothing for a run that did not fail, or in
/// `full-access`.
pub fn from_output(ctx: &Context, failed: bool, stdout: &str, stderr: &str) -> Vec<DenialFact> {
    let mut found: Vec<DenialFact> = Vec::new();
    if !ctx.mode.is_some_and(Mode::confines) {
        return found;
    }
    for text in [stderr, stdout] {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let lower = line.to_lowercase();
            if lower.contains("mkdir")
                && (lower.contains("enoent") || lower.contains("no such file or directory"))
            {
                // Node's recursive mkdir reports a refused mkdir as ENOENT
                // (`ENOENT: no such file or directory, mkdir '/root/.npm'`).
                // A directory that is absent in a parent that exists cannot
                // fail so on its own.
                for path in paths_in(line) {
                    let p = normalize(&ctx.workdir, Path::new(&path));
                    let absent_in_existing = !p.exists() && p.parent().is_some_and(Path::is_dir);
                    // /proc and /sys make no directories for anyone.
                    let pseudo = ["/proc", "/sys"].iter().any(|d| p.starts_with(d));
                    if absent_in_existing
                        && !pseudo
                        && let Some(d) = ctx.judge(&path, "ENOENT")
                        && !found.iter().any(|f| f.path == d.path)
                    {
                        found.push(d);
                    }
                }
                continue;
            }
            // npm says only this when its cache cannot be written (`npm
            // pack`, `npm install x.tgz`): `Log files were not written due
            // to an error writing to the directory: /root/.npm/_logs`. The
            // refusal is the tier's own errno for a write.
            const NPM_LOGS: &str = "error writing to the directory: ";
            if let Some(at) = lower.find(NPM_LOGS) {
                let path = line[at + NPM_LOGS.len()..].trim();
                let errno = if ctx.read_only_tree {
                    "EROFS"
                } else {
                    "EACCES"
                };
                if path.starts_with('/')
                    && let Some(mut d) = ctx.judge(path, errno)
                    && !found.iter().any(|f| f.path == d.path)
                {
                    d.op = "write".into();
                    found.push(d);
                }
                continue;
            }
            // sqlite says only this when it cannot open (or create) a
            // database: `Error: unable to open database "PATH": unable to
            // open database file`. The refusal is the tier's errno.
            if lower.contains("unable to open database") {
                let errno = if ctx.read_only_tree {
                    "EROFS"
                } else {
                    "EACCES"
                };
                for path in paths_in(line) {
                    // The errno is assumed, not read: a path in a writable
                    // root failed for another reason (a missing directory).
                    let p = resolve_as_child(&ctx.workdir, Path::new(&path));
                    if ctx.under_writable(&p) && !ctx.protected(&p) {
                        continue;
                    }
                    if let Some(d) = ctx.judge(&path, errno)
                        && !found.iter().any(|f| f.path == d.path)
                    {
                        found.push(d);
                    }
                }
                continue;
            }
            if lower.contains("no such file or directory") || lower.contains("enoent") {
                // A file in a directory of the read deny list, hidden by a
                // mount: the command sees nothing there.
                for path in paths_in(line) {
                    let path = match (path.strip_prefix("~/"), &ctx.home) {
                        (Some(rest), Some(home)) => home.join(rest),
                        _ => PathBuf::from(path),
                    };
                    let p = resolve_as_child(&ctx.workdir, &path);
                    if let Some(d) = ctx.judge_read(&p, "ENOENT")
                        && !found.iter().any(|f| f.path == d.path)
                    {
                        found.push(d);
                    }
                }
                continue;
            }
            if !DENIAL_MARKERS.iter().any(|m| lower.contains(m)) {
                continue;
            }
            let errno = errno_in(&lower);
            let mut paths = paths_in(line);
            if paths.is_empty() {
                // npm and others print the path on a line of its own
                // nearby: `npm error path /root/.npm/_cacache/tmp/x`.
                let near = lines[i.saturating_sub(5)..(i + 6).min(lines.len())].iter();
                paths = near
                    .filter_map(|l| {
                        let l = l.trim();
                        let at = l.find(" path ")?;
                        Some(l[at + 6..].trim().to_string())
                    })
                    .filter(|p| p.starts_with('/'))
                    .collect();
            }
            if paths.is_empty() && errno == "EROFS" {
                found.push(DenialFact {
                    op: "write".into(),
                    path: None,
                    errno: errno.into(),
                    source: "output".into(),
                    network: false,
                    hint: None,
                    count: 1,
                });
                continue;
            }
            for path in paths {
                // bash's own names for a socket (bash(1), REDIRECTION):
                // never a file, and the network fact covers the refusal.
                if path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/") {
                    continue;
                }
                if shell_exec_failure(ctx, line, &path, errno) {
                    continue;
                }
                let path = match (path.strip_prefix("~/"), &ctx.home) {
                    (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
                    _ => path,
                };
                let Some(mut d) = ctx.judge(&path, errno) else {
                    continue;
                };
                // A refused write to a denied path is a write, not a read.
                let writes = [
                    "cannot create",
                    "cannot touch",
                    "cannot remove",
                    "cannot move",
                    "cannot mkdir",
                    "cannot write",
                    "failed to create",
                    "could not create",
                    "could not write",
                    "could not lock",
                    "for writing",
                ];
                if d.op == "read" && writes.iter().any(|w| lower.contains(w)) {
                    d.op = "write".into();
                    d.hint = None;
                }
                // coreutils name a metadata change (chmod, chown, touch).
                if d.op == "write" {
                    d.op = if lower.contains("changing permissions") {
                        "chmod"
                    } else if lower.contains("changing ownership") {
                        "chown"
                    } else if lower.contains("setting times") {
                        "utime"
                    } else {
                        "write"
                    }
                    .into();
                }
                // One denial per path and kind: a read and then a removal
                // of the same file are two.
                if let Some(same) = found.iter_mut().find(|f| f.path == d.path && f.op == d.op) {
                    same.count += 1;
                    continue;
                }
                found.push(d);
            }
        }
    }
    // A refused write is only believed of a run that failed; a read of a
    // denied entry is named exactly enough to stand on its own.
    found.retain(|d| failed || d.op == "read");
    // An EROFS line that names no path (Node's `code: 'EROFS'` beside its
    // message) adds nothing to one that does.
    if found.iter().any(|d| d.errno == "EROFS" && d.path.is_some()) {
        found.retain(|d| !(d.errno == "EROFS" && d.path.is_none()));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(mode: Mode) -> Context {
        Context {
            mode: Some(mode),
            workdir: PathBuf::from("/nonexistent-ws"),
            writable: vec![PathBuf::from("/nonexistent-ws"), PathBuf::from("/tmp")],
            protected: vec![PathBuf::from("/nonexistent-ws/.git/config")],
            liftable: vec![],
            caches: vec![PathBuf::from("/root/.npm")],
            home: Some(PathBuf::from("/root")),
            read_only_tree: false,
            read_denied: vec![],
            read_exceptions: vec![],
            read_roots: vec![],
            state_dir: None,
            secret_files: vec![],
            network_default_of: None,
        }
    }

    #[test]
    fn a_read_then_a_removal_of_a_file_in_the_state_dir_are_two_denials_without_a_hint() {
        let state = tempfile::tempdir().unwrap();
        let state = std::fs::canonicalize(state.path()).unwrap();
        let spill = state.join("spill/dsh-exec-ab12cd34/stdout");
        let mut c = ctx(Mode::WorkspaceWrite);
        c.read_denied = vec![state.clone()];
        c.state_dir = Some(state.clone());
        let lines = format!(
            "cat: {p}: Permission denied\nrm: cannot remove '{p}': Permission denied\n",
            p = spill.display()
        );
        let out = from_output(&c, true, "", &lines);
        let ops: Vec<(&str, Option<&str>)> = out
            .iter()
            .map(|d| (d.op.as_str(), d.hint.as_deref()))
            .collect();
        assert_eq!(ops, [("read", None), ("write", None)], "{out:?}");
    }

    #[test]
    fn npm_s_log_directory_message_is_a_write_denial_with_the_cache_hint() {
        let mut c = ctx(Mode::WorkspaceWrite);
        c.read_only_tree = true;
        let line = "npm error Log files were not written due to an error writing to the directory: /root/.npm/_logs\n";
        let out = from_output(&c, true, "", line);
        let got: Vec<(&str, Option<&str>, &str)> = out
            .iter()
            .map(|d| (d.op.as_str(), d.hint.as_deref(), d.errno.as_str()))
            .collect();
        assert_eq!(
            got,
            [(
                "write",
                Some("--allow-caches (or --writable-root /root/.npm)"),
                "EROFS"
            )],
            "{out:?}"
        );
    }

    #[test]
    fn node_s_pathless_erofs_line_adds_nothing_to_its_message() {
        let mut c = ctx(Mode::ReadOnly);
        c.read_only_tree = true;
        let text = "Error: EROFS: read-only file system, open '/etc/x.conf'\n    errno: -30,\n    code: 'EROFS',\n    syscall: 'open',\n";
        let out = from_output(&c, true, "", text);
        let got: Vec<Option<&str>> = out.iter().map(|d| d.path.as_deref()).collect();
        assert_eq!(got, [Some("/etc/x.conf")], "{out:?}");
        // Alone, the pathless line still tells a refusal.
        let out = from_output(&c, true, "", "    code: 'EROFS',\n");
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].path, None);
    }

    #[test]
    fn a_directory_proc_or_sys_cannot_make_is_no_denial() {
        let c = ctx(Mode::WorkspaceWrite);
        let line = "mkdir: cannot create directory ‘/proc/x’: No such file or directory\n";
        assert!(from_output(&c, true, "", line).is_empty());
    }

    #[test]
    fn bash_socket_paths_are_not_files() {
        let mut c = ctx(Mode::ReadOnly);
        c.read_denied = vec![PathBuf::from("/dev")];
        let line =
            "bash: connect: Permission denied\nbash: /dev/tcp/127.0.0.1/80: Permission denied\n";
        assert!(from_output(&c, true, "", line).is_empty());
    }

    #[test]
    fn a_refused_read_of_a_denied_entry_is_a_read_denial_even_in_a_run_that_succeeded() {
        let home = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        let ssh = home.join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        let mut c = ctx(Mode::ReadOnly);
        c.read_denied = vec![ssh.clone()];
        let line = format!("cat: {}/id_rsa: Permission denied\n", ssh.display());
        let out = from_output(&c, false, "", &line);
        assert_eq!(
            out,
            vec![DenialFact {
                op: "read".into(),
                path: Some(format!("{}/id_rsa", ssh.display())),
                errno: "EACCES".into(),
                source: "output".into(),
                network: false,
                hint: Some(format!("--allow-read {}", ssh.display())),
                count: 1,
            }]
        );
        c.read_exceptions = vec![ssh.join("id_rsa")];
        assert!(from_output(&c, false, "", &line).is_empty());
    }

    #[test]
    fn the_file_of_a_message_is_found_where_tools_put_it() {
        for (line, path) in [
            ("bash: line 1: out.txt: Read-only file system", "out.txt"),
            ("tar: x.tar: Cannot open: Read-only file system", "x.tar"),
            (
                "/usr/bin/ld: cannot open output file m: Read-only file system",
                "m",
            ),
            (
                "flock: cannot open lock file lk: Read-only file system",
                "lk",
            ),
            (
                "Fatal error: can't create m.o: Read-only file system",
                "m.o",
            ),
            ("fatal: cannot mkdir r: Read-only file system", "r"),
            (
                "error: could not lock config file .git/config: Read-only file system",
                ".git/config",
            ),
            (
                "cat: /root/.ssh/id_rsa: Permission denied",
                "/root/.ssh/id_rsa",
            ),
            (
                "npm error code: 'EACCES', path '/root/.npm/x'",
                "/root/.npm/x",
            ),
            ("tar: src: Cannot mkdir: Read-only file system", "src"),
            (
                "tar: src/l: Cannot create symlink to ‘a’: Permission denied",
                "src/l",
            ),
        ] {
            let want: Vec<String> = [path]
                .iter()
                .filter(|p| !p.is_empty())
                .map(|p| p.to_string())
                .collect();
            assert_eq!(paths_in(line), want, "{line}");
        }
        {
            let (line, path) = ("/tmp/ws/.git: Read-only file system", "/tmp/ws/.git");
            assert_eq!(paths_in(line), vec![path.to_string()], "{line}");
        }
    }

    #[test]
    fn an_errno_the_sandbox_cannot_give_is_not_a_denial() {
        // With the read-only tree a refused write is EROFS; without it,
        // Landlock's EACCES.
        let mut c = ctx(Mode::ReadOnly);
        let eacces = "cp: cannot create '/etc/x': Permission denied\n";
        let erofs = "cp: cannot create '/etc/x': Read-only file system\n";
        assert_eq!(from_output(&c, true, "", eacces).len(), 1);
        assert!(from_output(&c, true, "", erofs).is_empty());
        c.read_only_tree = true;
        assert!(from_output(&c, true, "", eacces).is_empty());
        assert_eq!(from_output(&c, true, "", erofs).len(), 1);
    }

    #[test]
    fn a_printed_permission_denied_with_no_path_is_not_a_denial() {
        let c = ctx(Mode::WorkspaceWrite);
        assert!(from_output(&c, true, "Permission denied\n", "").is_empty());
        assert!(
            from_output(
                &c,
                false,
                "",
                "touch: cannot touch '/etc/x': Permission denied"
            )
            .is_empty()
        );
        assert!(
            from_output(
                &ctx(Mode::FullAccess),
                true,
                "",
                "touch: cannot touch '/etc/x': Read-only file system"
            )
            .is_empty()
        );
    }

    #[test]
    fn a_file_the_shell_cannot_run_is_not_a_denial() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::write(ws.join("build.sh"), "echo hi\n").unwrap();
        let mut c = ctx(Mode::ReadOnly);
        c.workdir = ws.clone();
        c.writable.clear();
        let out = from_output(
            &c,
            true,
            "",
            "bash: line 1: ./build.sh: Permission denied\n",
        );
        assert!(out.is_empty(), "{out:?}");
        // A write refused there is one.
        let out = from_output(&c, true, "", "touch: cannot touch 'f': Permission denied\n");
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].hint.as_deref(), Some("--sandbox workspace-write"));
    }

    #[test]
    fn a_path_inside_a_writable_root_is_not_the_sandbox() {
        let c = ctx(Mode::WorkspaceWrite);
        let out = from_output(
            &c,
            true,
            "",
            "cp: cannot create regular file '/tmp/x/y': Permission denied\n",
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn outside_and_protected_paths_are_denials_with_their_errno() {
        // Outside every root, in a directory this user can write.
        let outside = tempfile::tempdir().unwrap();
        let outside = std::fs::canonicalize(outside.path()).unwrap();
        let mut c = ctx(Mode::WorkspaceWrite);
        c.writable.retain(|w| !outside.starts_with(w));
        c.read_only_tree = true;
        let x = outside.join("x");
        let out = from_output(
            &c,
            true,
            "",
            &format!(
                "touch: cannot touch '{}': Read-only file system\n\
                 error: could not lock config file /nonexistent-ws/.git/config: Read-only file system\n",
                x.display()
            ),
        );
        let paths: Vec<_> = out
            .iter()
            .map(|d| (d.path.clone().unwrap(), d.errno.clone()))
            .collect();
        assert_eq!(
            paths,
            vec![
                (x.to_string_lossy().into_owned(), "EROFS".to_string()),
                (
                    "/nonexistent-ws/.git/config".to_string(),
                    "EROFS".to_string()
                )
            ]
        );
    }

    #[test]
    fn npm_s_path_line_is_found_and_a_cache_gets_its_hint() {
        let home = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        let npm = home.join(".npm");
        std::fs::create_dir_all(npm.join("_cacache/tmp")).unwrap();
        let mut c = ctx(Mode::WorkspaceWrite);
        c.writable.retain(|w| !home.starts_with(w));
        c.home = Some(home.clone());
        c.caches = vec![npm.clone()];
        let stderr = format!(
            "npm error code EACCES\nnpm error syscall mkdtemp\n\
             npm error path {}/_cacache/tmp/jn915J\nnpm error errno -13\n",
            npm.display()
        );
        let out = from_output(&c, true, "", &stderr);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(
            out[0].path.as_deref(),
            Some(npm.join("_cacache/tmp/jn915J").to_str().unwrap())
        );
        assert_eq!(
            out[0].hint,
            Some(format!(
                "--allow-caches (or --writable-root {})",
                npm.display()
            ))
        );
    }

    #[test]
    fn each_network_refusal_names_the_policy_that_would_allow_it() {
        use super::Network;
        let deny = network_hint(Network::Deny, "socket", Some("AF_INET6"), None);
        assert_eq!(
            deny.as_deref(),
            Some("--network loopback (local servers) or --network allow=HOST")
        );
        // Only all of the network lets a packet or netlink socket through.
        for (net, family) in [
            (Network::Deny, "AF_PACKET"),
            (Network::Deny, "AF_NETLINK"),
            (Network::Loopback, "AF_INET SOCK_RAW"),
            (Network::AllowList, "AF_VSOCK"),
        ] {
            assert_eq!(
                network_hint(net, "socket", Some(family), None).as_deref(),
                Some("--network allow"),
                "{net:?} {family}"
            );
        }
        assert_eq!(
            network_hint(
                Network::Loopback,
                "connect",
                Some("[2001:db8::1]:443"),
                None
            )
            .as_deref(),
            Some(
                "--network allow=2001:db8::1 (HTTP and HTTPS, through a proxy) or --network allow"
            )
        );
        assert_eq!(
            network_hint(Network::Allow, "connect", Some("x:1"), None),
            None
        );
        // A name server: the host to allow is the name looked up.
        for server in ["10.255.255.53:53", "[2001:db8::53]:53"] {
            assert_eq!(
                network_hint(Network::Loopback, "connect", Some(server), None).as_deref(),
                Some(
                    "--network allow=HOST for the name looked up (HTTP and HTTPS, through a \
                     proxy that resolves names itself) or --network allow"
                ),
                "{server}"
            );
        }
        // The mode's default, asked for by nobody, says so.
        assert_eq!(
            network_hint(
                Network::Loopback,
                "connect",
                Some("192.0.2.1:80"),
                Some(Mode::ReadOnly)
            )
            .as_deref(),
            Some(
                "--network allow=192.0.2.1 (HTTP and HTTPS, through a proxy) or --network allow \
                 (read-only defaults to --network loopback)"
            )
        );
        assert_eq!(
            network_hint(
                Network::Loopback,
                "socket",
                Some("AF_INET SOCK_RAW"),
                Some(Mode::WorkspaceWrite)
            )
            .as_deref(),
            Some("--network allow (workspace-write defaults to --network loopback)")
        );
    }

    #[test]
    fn a_write_to_a_protected_editor_or_agent_file_is_hinted_at_its_entry() {
        let ctx = Context {
            mode: Some(Mode::WorkspaceWrite),
            workdir: "/ws".into(),
            writable: vec!["/ws".into()],
            protected: vec![
                "/ws/.vscode".into(),
                "/ws/.claude".into(),
                "/ws/.git/config".into(),
                "/ws/.claude/own.toml".into(),
            ],
            liftable: vec!["/ws/.vscode".into(), "/ws/.claude".into()],
            ..Context::default()
        };
        assert_eq!(
            ctx.hint(Path::new("/ws/.vscode/tasks.json")).as_deref(),
            Some("--allow-write /ws/.vscode")
        );
        assert_eq!(ctx.hint(Path::new("/ws/.git/config")), None);
        // Kept by another rule too (a --protect, dsh-exec's own): no hint.
        assert_eq!(ctx.hint(Path::new("/ws/.claude/own.toml")), None);
    }

    #[test]
    fn a_write_outside_the_home_is_hinted_at_its_directory_but_never_the_root() {
        let ctx = Context {
            mode: Some(Mode::WorkspaceWrite),
            workdir: "/home/u/ws".into(),
            home: Some("/home/u".into()),
            ..Context::default()
        };
        assert_eq!(
            ctx.hint(Path::new("/etc/x.conf")).as_deref(),
            Some("--writable-root /etc")
        );
        assert_eq!(ctx.hint(Path::new("/x")), None);
        assert_eq!(ctx.hint(Path::new("/proc/sys/x")), None);
        // In the home: a plain directory or a cache, never a dot directory
        // that programs obey or run later.
        assert_eq!(
            ctx.hint(Path::new("/home/u/src/a/b")).as_deref(),
            Some("--writable-root /home/u/src")
        );
        assert_eq!(
            ctx.hint(Path::new("/home/u/.cache/pip/x")).as_deref(),
            Some("--writable-root /home/u/.cache/pip")
        );
        for sensitive in [
            "/home/u/.config/git/config",
            "/home/u/.config/systemd/user/x.service",
            "/home/u/.ssh/authorized_keys",
            "/home/u/.cargo/env",
            "/home/u/.local/bin/x",
        ] {
            assert_eq!(ctx.hint(Path::new(sensitive)), None, "{sensitive}");
        }
        let ro = Context {
            mode: Some(Mode::ReadOnly),
            ..ctx
        };
        assert_eq!(
            ro.hint(Path::new("/srv/data/f")).as_deref(),
            Some("--sandbox workspace-write --writable-root /srv/data")
        );
    }
}
