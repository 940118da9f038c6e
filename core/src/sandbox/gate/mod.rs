//! The gate: what Landlock cannot decide, `dsh-exec` decides.
//!
//! In confining modes the child loads a seccomp filter
//! ([`super::seccomp::gate_filter`]) that turns a small set of system calls
//! into user notifications (seccomp_unotify(2)): `connect`, `sendto` with an
//! address, `sendmsg`, `sendmmsg` ([`net`]), and every change of file
//! metadata ([`fs`]). The listener descriptor comes back to the supervision
//! loop, which answers each notification here: the arguments are read once
//! into this process ([`notif`]), the target is resolved as the task would
//! resolve it and pinned ([`task`]), the pinned target is judged against
//! the policy ([`GatePolicy`]), and the operation is then performed by this
//! process on that same target, or refused with the errno a kernel would
//! give. The gate never lets a call continue after looking at memory the
//! task can still change.
//!
//! Reads and `openat` are never trapped: the gate costs nothing on the hot
//! path. A refusal is recorded ([`Denial`]) with the operation, the path
//! and the errno, for the run's facts.

pub(crate) mod fs;
pub(crate) mod net;
pub(crate) mod notif;
pub(crate) mod task;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::libc;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use self::notif::{Abi, Notification};
use self::task::Task;
use crate::exec::proctree::Tree;

/// `setxattrat` and `removexattrat` (Linux 6.13, the same number on every
/// architecture), which the libc crate may not name yet.
pub(crate) const SYS_SETXATTRAT: i64 = 463;
pub(crate) const SYS_REMOVEXATTRAT: i64 = 466;

/// Why the gate refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The target lies outside every writable root.
    OutsideRoots,
    /// The target is a protected path inside a writable root.
    Protected,
    /// A set-user-ID bit, which is never granted.
    SetUid,
    /// A set-group-ID bit on a file other than a directory.
    SetGidFile,
    /// An extended attribute outside `user.*` and the POSIX ACLs.
    XattrNamespace,
    /// A Unix socket outside the writable roots and `--allow-unix-socket`,
    /// or an abstract socket the run does not hold.
    OutsideSocket,
}

/// One call the gate refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The operation: `chmod`, `chown`, `utime`, `xattr`, `connect`,
    /// `sendto`, `sendmsg`, `sendmmsg`.
    pub op: &'static str,
    /// The path the call named (as given, or the file's real path for a
    /// descriptor; `@name` for an abstract socket).
    pub path: Option<PathBuf>,
    /// The errno the call got, e.g. `libc::EACCES`.
    pub errno: i32,
    /// Why.
    pub why: Refusal,
}

/// The most denials kept per run; the rest are only counted.
pub const MAX_DENIALS: usize = 100;

/// The denials of a run: the first [`MAX_DENIALS`], and how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Denials {
    /// The first ones, in order.
    pub kept: Vec<Denial>,
    /// How many more there were.
    pub more: u64,
}

/// A path whose inode stays unchangeable inside a writable root.
#[derive(Debug, Clone)]
pub(crate) struct ProtectedPath {
    /// Its real path.
    pub(crate) path: PathBuf,
    /// (device, inode).
    pub(crate) id: (u64, u64),
    /// A directory: everything under it is protected too.
    pub(crate) dir: bool,
}

/// What the gate allows: the run's writable roots, protected paths, the
/// Unix sockets named with `--allow-unix-socket`, and the run's own
/// processes (for abstract sockets).
#[derive(Debug)]
pub(crate) struct GatePolicy {
    pub(crate) writable: Vec<PathBuf>,
    pub(crate) protected: Vec<ProtectedPath>,
    /// (device, inode) of each allowed socket, with its path for messages.
    pub(crate) sockets: Vec<((u64, u64), PathBuf)>,
    pub(crate) tree: Tree,
    denials: Mutex<Denials>,
}

impl GatePolicy {
    /// The policy of a run.
    pub(crate) fn new(
        writable: Vec<PathBuf>,
        protected: Vec<ProtectedPath>,
        sockets: Vec<((u64, u64), PathBuf)>,
        tree: Tree,
    ) -> GatePolicy {
        GatePolicy {
            writable,
            protected,
            sockets,
            tree,
            denials: Mutex::new(Denials::default()),
        }
    }

    /// Records a refusal.
    pub(crate) fn record(&self, op: &'static str, path: Option<PathBuf>, errno: i32, why: Refusal) {
        if let Ok(mut d) = self.denials.lock() {
            if d.kept.len() < MAX_DENIALS {
                d.kept.push(Denial {
                    op,
                    path,
                    errno,
                    why,
                });
            } else {
                d.more += 1;
            }
        }
    }

    /// The refusals so far.
    pub(crate) fn denials(&self) -> Denials {
        self.denials.lock().map(|d| d.clone()).unwrap_or_default()
    }

    fn under_writable(&self, real: &Path) -> bool {
        self.writable.iter().any(|root| real.starts_with(root))
    }

    fn protected(&self, real: &Path, id: (u64, u64)) -> bool {
        self.protected
            .iter()
            .any(|p| p.id == id || (p.dir && real.starts_with(&p.path)))
    }

    /// Whether the metadata of the inode at `real` (device and inode `id`)
    /// may change.
    pub(crate) fn may_change(&self, real: &Path, id: (u64, u64)) -> Result<(), Refusal> {
        if !self.under_writable(real) {
            return Err(Refusal::OutsideRoots);
        }
        if self.protected(real, id) {
            return Err(Refusal::Protected);
        }
        Ok(())
    }

    /// Whether the socket file at `real` (device and inode `id`) may be
    /// reached.
    pub(crate) fn socket_allowed(&self, real: &Path, id: (u64, u64)) -> bool {
        self.sockets.iter().any(|(s, _)| *s == id)
            || (self.under_writable(real) && !self.protected(real, id))
    }

    /// Whether a process of the run holds a socket bound to the abstract
    /// name `name` (its first byte the NUL), as the network namespace of
    /// task `tid` lists them (`/proc/TID/net/unix`, where the name shows
    /// with `@` for each NUL).
    pub(crate) fn abstract_held_by_run(&self, tid: i32, name: &[u8]) -> bool {
        let shown: String = name
            .iter()
            .map(|b| if *b == 0 { '@' } else { *b as char })
            .collect();
        let Ok(table) = std::fs::read_to_string(format!("/proc/{tid}/net/unix")) else {
            return false;
        };
        let inodes: Vec<String> = table
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 8 && f[7..].join(" ") == shown).then(|| f[6].to_string())
            })
            .collect();
        if inodes.is_empty() {
            return false;
        }
        self.tree.live().iter().any(|p| {
            std::fs::read_dir(format!("/proc/{}/fd", p.pid))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .any(|link| {
                    let link = link.to_string_lossy();
                    inodes.iter().any(|i| link == format!("socket:[{i}]"))
                })
        })
    }

    /// A check for the peer of a connected abstract socket: false when the
    /// peer is a live process outside the run.
    pub(crate) fn peer_check(&self) -> impl Fn(i32) -> bool + Send + 'static {
        let tree = self.tree.clone();
        move |pid| {
            let live = crate::exec::proctree::live_start_time(pid).is_some();
            !live || tree.live().iter().any(|p| p.pid == pid)
        }
    }
}

/// What a handler decided.
pub(crate) enum Outcome {
    /// Answer now: the return value or the errno.
    Done(Result<i64, i32>),
    /// Perform this on a blocking thread, then answer with its result.
    Blocking(Box<dyn FnOnce() -> Result<i64, i32> + Send>),
}

/// The gate of one run: the listener and the policy.
pub(crate) struct Gate {
    listener: AsyncFd<Arc<OwnedFd>>,
    abi: Arc<Abi>,
    policy: Arc<GatePolicy>,
    open: bool,
}

impl Gate {
    /// The gate answering on `listener` (the descriptor the child's filter
    /// returned) with `policy`.
    ///
    /// Errors when the kernel has no user notifications or the descriptor
    /// cannot be registered with the runtime.
    pub(crate) fn new(listener: OwnedFd, policy: GatePolicy) -> io::Result<Gate> {
        let listener = Arc::new(listener);
        // SAFETY: the Arc owns the descriptor for as long as the AsyncFd
        // (and every blocking answer) holds it: it stays open and the same.
        let listener = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Gate {
            listener,
            abi: Arc::new(Abi::new()?),
            policy: Arc::new(policy),
            open: true,
        })
    }

    /// Waits for notifications and answers every pending one; pending
    /// forever once no task uses the filter any more.
    pub(crate) async fn serve(&mut self) {
        if !self.open {
            return std::future::pending().await;
        }
        let Ok(mut guard) = self.listener.readable().await else {
            self.open = false;
            return;
        };
        loop {
            match self.abi.recv(guard.get_inner()) {
                Ok(Some(n)) => self.answer(n),
                Ok(None) => break,
                Err(_) => {
                    self.open = false;
                    break;
                }
            }
        }
        guard.clear_ready();
    }

    fn answer(&self, n: Notification) {
        let fd = self.listener.get_ref().as_raw_fd();
        let task = Task::new(&n, fd);
        let outcome = fs::handle(&task, n.nr, &n.args, &self.policy)
            .or_else(|| net::handle(&task, n.nr, &n.args, &self.policy))
            .unwrap_or(Outcome::Done(Err(libc::ENOSYS)));
        match outcome {
            Outcome::Done(result) => self.abi.answer(fd, n.id, result),
            Outcome::Blocking(work) => {
                let (abi, listener) = (self.abi.clone(), self.listener.get_ref().clone());
                tokio::task::spawn_blocking(move || {
                    let result = work();
                    abi.answer(listener.as_raw_fd(), n.id, result);
                });
            }
        }
    }

    /// The refusals so far.
    pub(crate) fn denials(&self) -> Denials {
        self.policy.denials()
    }
}
