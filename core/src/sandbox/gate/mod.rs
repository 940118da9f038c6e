//! The gate: what Landlock cannot decide, `dsh-exec` decides.
//!
//! In confining modes the child loads a seccomp filter
//! ([`super::seccomp::gate_filter`]) that turns a small set of system calls
//! into user notifications (seccomp_unotify(2)): `connect`, `sendto` with an
//! address, `sendmsg`, `sendmmsg` ([`net`]), and every change of file
//! metadata ([`fs`]); under `--network loopback` and `allow=HOSTS`
//! ([`super::seccomp::gated_ip_calls`], in any mode) also `bind` and
//! `listen`, and the socket calls those policies refuse. The listener descriptor comes back to the supervision
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
pub(crate) mod table;
pub(crate) mod task;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::libc;

use self::task::Task;
use crate::proctree::Tree;
use crate::sys::notif::{Abi, Notification};

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
    /// A Unix socket (pathname or abstract) the run does not hold, and not
    /// one of `--allow-unix-socket`.
    OutsideSocket,
    /// A change of a socket's owner (it would change the uid the network
    /// stack attributes the socket's traffic to).
    SocketOwner,
    /// A network socket under `--network deny`, or an address other than
    /// loopback under `loopback` and `allow-list`.
    Network,
    /// DNS to a resolver on loopback under `allow-list`, where the proxy
    /// resolves names.
    Dns,
    /// A connection to an `--allow-unix-socket` server under `loopback` or
    /// `allow-list` on a kernel that cannot refuse the descriptors the
    /// server could pass in (no `SO_PASSRIGHTS`, Linux 6.16).
    PassedRights,
}

impl Refusal {
    /// Whether this is a refusal of the network policy.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            Refusal::Network | Refusal::Dns | Refusal::PassedRights
        )
    }
}

/// How a Unix socket file may be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Not at all.
    No,
    /// It is one of `--allow-unix-socket`, held by a server outside the run.
    Listed,
    /// A process of the run holds the socket bound to it.
    Run,
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
    /// How many times the same call on the same path was refused (1 or
    /// more): a command that retries is one entry, not a hundred.
    pub count: u64,
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
    /// Whether any of them, kept or only counted, was a network socket.
    pub network: bool,
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
    /// The inode itself, held open (`O_PATH`) for the life of the run: a
    /// protected file the run replaces is not freed, so its inode number
    /// cannot be given to a new file the run then makes (which `id` would
    /// take for the protected one).
    pub(crate) _pin: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
}

/// What the gate allows: the run's writable roots, protected paths, the
/// Unix sockets named with `--allow-unix-socket`, and the run's own
/// processes (for abstract sockets).
#[derive(Debug)]
pub(crate) struct GatePolicy {
    /// The network policy: under `loopback` and `allow-list` the gate
    /// judges every IPv4/IPv6 address ([`net`]).
    pub(crate) network: crate::sandbox::Network,
    /// Whether Unix sockets are confined (the confining modes): in
    /// `full-access` the gate sees them only for the network policy and
    /// lets every one through.
    pub(crate) unix_confined: bool,
    /// The capabilities the gate's threads keep ([`GATE_CAPABILITIES`],
    /// and in `full-access` those the command keeps, which pidfd_getfd(2)
    /// needs of the caller).
    pub(crate) capabilities: u64,
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
            network: crate::sandbox::Network::Allow,
            unix_confined: true,
            capabilities: GATE_CAPABILITIES,
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
            d.network |= why.is_network();
            if let Some(same) = d
                .kept
                .iter_mut()
                .find(|k| k.op == op && k.path == path && k.errno == errno && k.why == why)
            {
                same.count += 1;
            } else if d.kept.len() < MAX_DENIALS {
                d.kept.push(Denial {
                    op,
                    path,
                    errno,
                    why,
                    count: 1,
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

    pub(crate) fn under_writable(&self, real: &Path) -> bool {
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

    /// Whether the socket file with device and inode `id` may be reached:
    /// it is one of `--allow-unix-socket`, or a process of the run holds
    /// the socket bound to it (sock_diag(7): the socket behind the file,
    /// whoever made the file, and wherever it lies: a socket an outside
    /// server listens on in a writable root such as /tmp is not the run's).
    pub(crate) fn socket_file_reachable(&self, id: (u64, u64)) -> Reach {
        let held = || match crate::sys::sockdiag::bound_unix_sockets() {
            Ok(all) => self.run_holds(&crate::sys::sockdiag::bound_to_file(&all, id)),
            Err(_) => false,
        };
        if self.sockets.iter().any(|(s, _)| *s == id) {
            // Listed: the run's own socket bound there takes descriptors
            // as ever (only asked for under the gated network policies).
            if self.network.gated() && held() {
                return Reach::Run;
            }
            return Reach::Listed;
        }
        if held() { Reach::Run } else { Reach::No }
    }

    /// Whether a process of the run holds a socket bound to the abstract
    /// name `name` (its first byte the NUL), compared byte for byte with
    /// what the kernel lists (sock_diag(7)), in dsh-exec's network
    /// namespace, which is the command's (it cannot make another: no user
    /// namespaces, no CAP_SYS_ADMIN).
    pub(crate) fn abstract_held_by_run(&self, name: &[u8]) -> bool {
        match crate::sys::sockdiag::bound_unix_sockets() {
            Ok(all) => self.run_holds(&crate::sys::sockdiag::bound_to_name(&all, name)),
            Err(_) => false,
        }
    }

    /// Whether a live process of the run has one of the sockets `inodes`
    /// open (`/proc/PID/fd/N` reading `socket:[INODE]`).
    fn run_holds(&self, inodes: &[u32]) -> bool {
        let inodes: Vec<u64> = inodes.iter().map(|i| u64::from(*i)).collect();
        crate::proctree::tree_holds(&self.tree, &inodes)
    }

    /// A check for the peer of a connected abstract socket: false when the
    /// peer is a live process outside the run. `dsh-exec` itself counts as
    /// the run's: under `loopback` and an allow-list the gate makes
    /// listen(2) on the run's behalf (`net::listen`), so the kernel names
    /// this process as the listener of the run's own sockets
    /// (unix(7), `SO_PEERCRED`: the credentials of the listen call).
    /// `dsh-exec` listens on no abstract socket of its own.
    pub(crate) fn peer_check(&self) -> impl Fn(i32) -> bool + Send + 'static {
        let tree = self.tree.clone();
        let own = std::process::id() as i32;
        move |pid| {
            let live = crate::proctree::live_start_time(pid).is_some();
            !live || pid == own || tree.live().iter().any(|p| p.pid == pid)
        }
    }
}

/// What a handler decided.
pub(crate) enum Outcome {
    /// Answer now: the return value or the errno.
    Done(Result<i64, i32>),
    /// Perform this on a blocking thread, then answer with its result.
    Blocking(Box<dyn FnOnce() -> Result<i64, i32> + Send>),
    /// Let the kernel carry out the call as the task made it
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Only for a call whose verdict
    /// reads no memory of the task: the kernel reads its arguments again.
    Continue,
}

/// How long the gate's thread waits in poll(2) before it looks whether
/// its run has ended: 100 ms (it also ends at once when the last task using
/// the filter is gone: POLLHUP).
const GATE_POLL: libc::c_int = 100;

/// The gate of one run: a thread of its own that waits on the listener
/// (poll(2), not the runtime's epoll, so that the synchronous wake-up
/// applies), answers each notification, and hands calls that may block to
/// a thread each.
pub(crate) struct Gate {
    policy: Arc<GatePolicy>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Gate {
    /// Starts the gate answering on `listener` (the descriptor the child's
    /// filter returned) with `policy`.
    ///
    /// Errors when the kernel has no user notifications or the thread
    /// cannot be started.
    pub(crate) fn start(listener: OwnedFd, policy: GatePolicy) -> io::Result<Gate> {
        let abi = Arc::new(Abi::new()?);
        let listener = Arc::new(listener);
        crate::sys::notif::sync_wake_up(listener.as_raw_fd());
        let policy = Arc::new(policy);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (p, s) = (policy.clone(), stop.clone());
        let keep = policy.capabilities;
        std::thread::Builder::new()
            .name("sandbox-gate".into())
            .spawn(move || {
                crate::sys::caps::limit_thread(keep);
                serve(&listener, &abi, &p, &s)
            })?;
        Ok(Gate { policy, stop })
    }

    /// The refusals so far.
    pub(crate) fn denials(&self) -> Denials {
        self.policy.denials()
    }
}

impl Drop for Gate {
    /// Tells the gate's thread that the run is over; it ends within
    /// [`GATE_POLL`] (or at once, when the last task is gone).
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The capabilities the gate's thread keeps, of those dsh-exec holds:
/// CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER and
/// CAP_FSETID (capabilities(7)), for the metadata changes it makes on the
/// task's behalf inside the writable roots (files of any owner, as root).
/// A superset of what a confined command keeps, as ptrace(2)'s access check
/// requires for reading its memory and taking its descriptors. Every other
/// one goes: what the gate does for a task (connect, send with ancillary
/// data, chown a socket) must not get further with dsh-exec's privileges
/// (CAP_NET_ADMIN's SO_MARK, CAP_NET_RAW, ...) than the task's own would.
pub(crate) const GATE_CAPABILITIES: u64 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4);

/// The gate's thread: waits, drains, answers, until the run is over.
fn serve(
    listener: &Arc<OwnedFd>,
    abi: &Arc<Abi>,
    policy: &Arc<GatePolicy>,
    stop: &std::sync::atomic::AtomicBool,
) {
    let fd = listener.as_raw_fd();
    // Started from this thread, the pool's threads inherit its limited
    // capabilities (capset(2) acts on the calling thread; clone(2) copies).
    let pool = Arc::new(CallPool::default());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let (n, revents) = crate::sys::poll_one(fd, libc::POLLIN, GATE_POLL);
        if n <= 0 {
            continue;
        }
        if revents & libc::POLLIN == 0 {
            // POLLHUP: every task using the filter is gone.
            return;
        }
        let mut first = true;
        loop {
            let next = if first {
                abi.recv_ready(listener)
            } else {
                abi.recv(listener)
            };
            first = false;
            match next {
                Ok(Some(n)) => answer(n, listener, abi, policy, &pool),
                Ok(None) => break,
                // Every task using the filter is gone.
                Err(_) => return,
            }
        }
    }
}

fn answer(
    n: Notification,
    listener: &Arc<OwnedFd>,
    abi: &Arc<Abi>,
    policy: &Arc<GatePolicy>,
    pool: &Arc<CallPool>,
) {
    let fd = listener.as_raw_fd();
    let task = Task::new(&n, fd);
    let outcome = match table::lookup(n.nr) {
        Some(trap) => {
            (trap.handler)(&task, trap, &n.args, policy).unwrap_or_else(|e| Outcome::Done(Err(e)))
        }
        None => Outcome::Done(Err(libc::ENOSYS)),
    };
    match outcome {
        Outcome::Done(result) => abi.answer(fd, n.id, result),
        Outcome::Continue => abi.continue_call(fd, n.id),
        Outcome::Blocking(work) => {
            let (call_abi, call_listener) = (abi.clone(), listener.clone());
            let submitted = pool.submit(Box::new(move || {
                let result = work();
                call_abi.answer(call_listener.as_raw_fd(), n.id, result);
            }));
            if submitted.is_err() {
                abi.answer(fd, n.id, Err(libc::EAGAIN));
            }
        }
    }
}

/// A call the gate carries out off its own thread.
type Call = Box<dyn FnOnce() + Send>;

/// The threads that carry out the calls that may block (a connect, a
/// send): a thread is started only when none is idle, and an idle one ends
/// after [`CALL_IDLE`]. Starting a thread per call cost about as much as
/// the rest of a gated `connect` together.
#[derive(Default)]
struct CallPool {
    state: Mutex<PoolState>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct PoolState {
    /// Calls handed to an idle thread and not yet taken.
    queue: std::collections::VecDeque<Call>,
    /// Threads waiting for a call, less those a queued call is meant for.
    idle: usize,
    /// Call threads alive.
    threads: usize,
}

/// The most call threads a gate runs at once: 256. A command that blocks
/// more gated calls at once than that gets EAGAIN for the rest, rather
/// than making `dsh-exec` start threads without bound.
const MAX_CALL_THREADS: usize = 256;

/// How long a call thread waits for the next call before it ends: 2 s.
const CALL_IDLE: std::time::Duration = std::time::Duration::from_secs(2);

impl CallPool {
    /// Runs `call` on an idle thread, or on a new one.
    ///
    /// Errors when no idle thread is there and none can be started.
    fn submit(self: &Arc<Self>, call: Call) -> io::Result<()> {
        if let Ok(mut st) = self.state.lock()
            && st.idle > 0
        {
            st.idle -= 1;
            st.queue.push_back(call);
            self.ready.notify_one();
            return Ok(());
        }
        match self.state.lock() {
            Ok(mut st) if st.threads < MAX_CALL_THREADS => st.threads += 1,
            // As a kernel short of memory would answer a send: try again.
            _ => return Err(io::Error::from_raw_os_error(libc::EAGAIN)),
        }
        let pool = self.clone();
        std::thread::Builder::new()
            .name("sandbox-gate-call".into())
            .spawn(move || {
                call();
                pool.work();
                if let Ok(mut st) = pool.state.lock() {
                    st.threads -= 1;
                }
            })
            .map(|_| ())
            .inspect_err(|_| {
                if let Ok(mut st) = self.state.lock() {
                    st.threads -= 1;
                }
            })
    }

    /// An idle thread's loop: take queued calls until none comes for
    /// [`CALL_IDLE`].
    fn work(&self) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        loop {
            st.idle += 1;
            let deadline = std::time::Instant::now() + CALL_IDLE;
            loop {
                if let Some(call) = st.queue.pop_front() {
                    // The submitter took this thread off `idle` already.
                    drop(st);
                    call();
                    st = match self.state.lock() {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    break;
                }
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    st.idle -= 1;
                    return;
                }
                st = match self.ready.wait_timeout(st, left) {
                    Ok((s, _)) => s,
                    Err(_) => return,
                };
            }
        }
    }
}
