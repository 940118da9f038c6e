//! A transaction's layers: each writable root the caller named (the
//! workspace root and every `--writable-root`) runs on an overlay whose
//! lower layer is the root itself and whose upper layer is private to
//! `dsh-exec`, so the command's writes land beside the real tree instead
//! of in it. What the upper layer holds afterwards is the transaction's
//! change set (`crate::transaction`).
//!
//! Layout, under the state directory (0700 at every level):
//! `transactions/ID/meta.json` and `transactions/ID/N/{upper,work}`, one
//! `N` per root, in the order of `meta.json`'s `roots`.
//!
//! The temp directory, package caches and `/dev/shm` are scratch and stay
//! as they are: their writes are not part of a transaction.
//!
//! Fails closed: where an overlay cannot be made (no CAP_SYS_ADMIN for a
//! mount namespace, no read-only mount tree, a kernel without overlayfs or
//! the new mount API, an upper file system without whiteouts), the run
//! does not start (`SANDBOX_UNAVAILABLE` with the reason).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use std::fmt;
use std::str::FromStr;

use super::{Policy, Roots};
use crate::error::{Error, SandboxProblem};

/// What happens to a transaction when its run ends (`--on-exit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnExit {
    /// Apply the changes to the real roots (`dsh-exec commit ID`).
    Commit,
    /// Throw the changes away (`dsh-exec discard ID`).
    Discard,
    /// Leave the transaction pending for a later `commit` or `discard`.
    Keep,
}

impl OnExit {
    /// Every value, as the command line names them.
    pub const ALL: [OnExit; 3] = [OnExit::Commit, OnExit::Discard, OnExit::Keep];

    /// The value's name as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExit::Commit => "commit",
            OnExit::Discard => "discard",
            OnExit::Keep => "keep",
        }
    }
}

named_values!(OnExit, "--on-exit value", "commit, discard or keep");

/// A run's transaction as resolved: it happens, and what happens after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionPolicy {
    /// Where `--transaction` came from (a flag, the configuration file's
    /// `transaction = true`, or a library caller).
    pub origin: crate::origin::Origin,
    /// `--on-exit` (default `keep`) and its origin.
    pub on_exit: crate::origin::Sourced<OnExit>,
}

/// One root as a transaction records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LayerMeta {
    /// The root's real path.
    #[serde(with = "crate::serde_paths::exact_path")]
    pub root: PathBuf,
    /// The root's (device, inode) when the run started: `commit` applies
    /// the layer only to that very directory.
    pub root_id: (u64, u64),
    /// The upper layer's directory.
    #[serde(with = "crate::serde_paths::exact_path")]
    pub upper: PathBuf,
}

/// A transaction's layers as mounted for one run.
#[derive(Debug)]
pub struct Overlays {
    /// The transaction id, `t` and 8 characters of `[a-z0-9]`.
    pub id: String,
    /// `STATE/transactions/ID`.
    pub dir: PathBuf,
    /// When the layers were made (CLOCK_REALTIME, seconds and
    /// nanoseconds): a real path whose ctime is at or after it was changed
    /// by someone else while the transaction ran (`commit` refuses it).
    pub started: (i64, i64),
    /// One per overlaid root, outermost first.
    pub layers: Vec<LayerMeta>,
    /// The detached mounts, in the order of `layers`.
    pub(crate) mounts: Vec<OwnedFd>,
    /// Set when the run ended and the transaction was recorded; a
    /// transaction whose run never started is removed when dropped.
    pub(crate) finished: bool,
}

impl Drop for Overlays {
    fn drop(&mut self) {
        self.mounts.clear();
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The transactions directory under `state_dir`.
pub fn transactions_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("transactions")
}

/// True for a well-formed transaction id (`[a-z0-9]+`), so that no id can
/// name a path outside the transactions directory.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

fn unavailable(why: String) -> Error {
    Error::SandboxUnavailable(SandboxProblem::Policy(why))
}

/// The roots a transaction overlays: those the caller named, real paths,
/// none inside another.
fn overlaid(roots: &Roots) -> Vec<&super::Root> {
    let named: Vec<&super::Root> = roots.writable.iter().filter(|r| r.named).collect();
    named
        .iter()
        .filter(|r| {
            !named
                .iter()
                .any(|o| o.path != r.path && r.path.starts_with(&o.path))
        })
        .copied()
        .collect()
}

/// Whether a run of `policy` with its roots opened as `roots` can be a
/// transaction here (`explain`): `Ok` with the roots it would overlay, or
/// the reason it cannot (the same the run would fail with).
pub fn availability(policy: &Policy, roots: &Roots) -> Result<Vec<PathBuf>, String> {
    if !super::read_only_tree_available() {
        return Err(
            "needs a mount namespace and a read-only mount tree (root, or CAP_SYS_ADMIN, and \
             Linux 5.12)"
                .into(),
        );
    }
    let known = std::fs::read_to_string("/proc/filesystems")
        .map(|f| {
            f.lines()
                .any(|l| l.split_whitespace().last() == Some("overlay"))
        })
        .unwrap_or(false);
    if !known {
        return Err("the kernel has no overlay file system (/proc/filesystems)".into());
    }
    let overlaid = overlaid(roots);
    if overlaid.is_empty() {
        return Err("no writable root to run on an overlay".into());
    }
    let state = std::fs::canonicalize(&policy.state_dir).unwrap_or(policy.state_dir.clone());
    if let Some(r) = overlaid.iter().find(|r| state.starts_with(&r.path)) {
        return Err(format!(
            "the state directory {} lies inside the writable root {}",
            state.display(),
            r.path.display()
        ));
    }
    Ok(overlaid.iter().map(|r| r.path.clone()).collect())
}

/// Makes the transaction's directory and one detached overlay per named
/// writable root (`sys::overlay::mount`). `read_only_tree`: whether the
/// run gets the read-only mount tree the overlays are attached in.
///
/// # Errors
/// `SANDBOX_UNAVAILABLE` with the reason: no mount namespace, no named
/// root, the state directory inside a root (the upper layer would lie in
/// its own lower layer), the kernel's refusal of the overlay.
pub(crate) fn make(
    policy: &Policy,
    roots: &Roots,
    read_only_tree: bool,
) -> Result<Overlays, Error> {
    if !read_only_tree {
        return Err(unavailable(
            "--transaction needs a mount namespace and a read-only mount tree (root, or \
             CAP_SYS_ADMIN, and Linux 5.12): the command would otherwise write the real tree"
                .into(),
        ));
    }
    let overlaid = overlaid(roots);
    if overlaid.is_empty() {
        return Err(unavailable(
            "--transaction: no writable root to run on an overlay (the workspace root and \
             every --writable-root are missing)"
                .into(),
        ));
    }
    let state = std::fs::canonicalize(&policy.state_dir).unwrap_or(policy.state_dir.clone());
    if let Some(r) = overlaid.iter().find(|r| state.starts_with(&r.path)) {
        return Err(unavailable(format!(
            "--transaction: the state directory {} lies inside the writable root {}, where \
             the transaction's upper layer cannot be kept; set XDG_STATE_HOME elsewhere",
            state.display(),
            r.path.display()
        )));
    }
    let parent = transactions_dir(&policy.state_dir);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .map_err(|e| unavailable(format!("{}: {e}", parent.display())))?;
    let (id, dir) = new_dir(&parent)?;
    let guard = RemoveOnError(Some(dir.clone()));
    let started = crate::sys::fs::realtime_coarse_now();
    let mut layers = Vec::new();
    let mut mounts = Vec::new();
    for (n, root) in overlaid.iter().enumerate() {
        let base = dir.join(n.to_string());
        let (upper, work) = (base.join("upper"), base.join("work"));
        for d in [&base, &upper, &work] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(d)
                .map_err(|e| unavailable(format!("{}: {e}", d.display())))?;
        }
        let open = |p: &Path| {
            std::fs::File::open(p)
                .map(OwnedFd::from)
                .map_err(|e| unavailable(format!("{}: {e}", p.display())))
        };
        let lower = crate::sys::fs::reopen_dir(&root.fd)
            .map_err(|e| unavailable(format!("{}: {e}", root.path.display())))?;
        let (upper_fd, work_fd) = (open(&upper)?, open(&work)?);
        // The overlay's root directory shows the upper layer's owner, mode
        // and times: the root's own, so the command sees its directory as
        // it is.
        let st = crate::sys::fs::fstat(&root.fd.as_fd())
            .map_err(|e| unavailable(format!("{}: errno {e}", root.path.display())))?;
        nix::unistd::fchown(
            &upper_fd,
            Some(nix::unistd::Uid::from_raw(st.st_uid)),
            Some(nix::unistd::Gid::from_raw(st.st_gid)),
        )
        .and_then(|()| {
            nix::sys::stat::fchmod(
                &upper_fd,
                nix::sys::stat::Mode::from_bits_retain(st.st_mode & 0o7777),
            )
        })
        .map_err(|e| unavailable(format!("{}: {e}", upper.display())))?;
        // And its extended attributes (POSIX ACLs among them), as a
        // copy-up would give: a root without them would read as changed,
        // and a commit would strip them.
        for (name, value) in crate::sys::fs::xattrs(&lower) {
            if !name.as_bytes().starts_with(b"trusted.overlay.") {
                crate::sys::fs::set_xattr(&upper_fd, &name, &value)
                    .map_err(|e| unavailable(format!("{}: {e}", upper.display())))?;
            }
        }
        let _ = crate::sys::fs::set_times(
            &upper_fd,
            (st.st_atime, st.st_atime_nsec),
            (st.st_mtime, st.st_mtime_nsec),
        );
        let mount = crate::sys::overlay::mount(&lower, &upper_fd, &work_fd).map_err(|e| {
            unavailable(format!(
                "--transaction: no overlay over {} (upper layer in {}): {e}",
                root.path.display(),
                upper.display()
            ))
        })?;
        let st = crate::sys::fs::fstat(&root.fd.as_fd())
            .map_err(|e| unavailable(format!("{}: errno {e}", root.path.display())))?;
        layers.push(LayerMeta {
            root: root.path.clone(),
            root_id: (st.st_dev, st.st_ino),
            upper,
        });
        mounts.push(mount);
    }
    guard.keep();
    Ok(Overlays {
        id,
        dir,
        started,
        layers,
        mounts,
        finished: false,
    })
}

/// A directory removed when dropped, unless kept.
struct RemoveOnError(Option<PathBuf>);

impl RemoveOnError {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnError {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn new_dir(parent: &Path) -> Result<(String, PathBuf), Error> {
    for _ in 0..16 {
        let id = format!("t{}", &crate::capture::random_suffix()[..8]);
        let dir = parent.join(&id);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(unavailable(format!("{}: {e}", dir.display()))),
        }
    }
    Err(unavailable(format!(
        "{}: no free transaction id",
        parent.display()
    )))
}

impl Overlays {
    /// The layer whose root holds `path` (a real path), and `path`
    /// relative to that root.
    pub(crate) fn layer_of<'a>(&self, path: &'a Path) -> Option<(usize, &'a Path)> {
        self.layers
            .iter()
            .enumerate()
            .filter_map(|(i, l)| path.strip_prefix(&l.root).ok().map(|rel| (i, rel)))
            .max_by_key(|(_, rel)| std::cmp::Reverse(rel.components().count()))
    }

    /// The (device, inode) the command sees at `path` (a real path inside
    /// an overlaid root), looked up through the overlay's mount.
    pub(crate) fn id_seen(&self, path: &Path) -> Option<(u64, u64)> {
        let (i, rel) = self.layer_of(path)?;
        let mount = self.mounts.get(i)?;
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let st = crate::sys::fs::stat_at(std::os::fd::AsRawFd::as_raw_fd(mount), rel.as_os_str())
            .ok()?;
        Some((st.st_dev, st.st_ino))
    }

    /// Closes the mounts: the overlays go once no process of the run is
    /// left in them.
    pub(crate) fn unmount(&mut self) {
        self.mounts.clear();
    }
}
