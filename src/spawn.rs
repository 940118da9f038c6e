//! The low-level spawn: `bash -c SCRIPT` as the leader of a new session.
//!
//! The child is created with `clone(CLONE_VM | CLONE_VFORK)`, the technique
//! of glibc's posix_spawn(3): it runs on its own small stack in the parent's
//! memory until it calls execve(2), while the parent is suspended. Nothing is
//! copied, which makes starting a command about 0.4 ms cheaper than fork(2)
//! (measured with `bench/run.sh`). Everything the child needs (argv, envp,
//! paths, descriptors) is built in the parent beforehand; the child makes
//! only system calls, never allocates, and reports a failed step through
//! shared memory before `_exit(127)`.
//!
//! In the child, in order:
//! 1. every signal's disposition back to SIG_DFL, with the raw
//!    rt_sigaction(2) system call (all signals are blocked by
//!    the parent around the clone, so no handler of the parent runs here);
//! 2. setsid(2): new session, new process group, no controlling terminal;
//! 3. prctl(PR_SET_PDEATHSIG, SIGKILL), then a check that the parent is still
//!    the one that spawned it (prctl(2): the signal fires only for a death
//!    after the call);
//! 4. dup2 of the three pipe ends onto 0, 1 and 2;
//! 5. chdir(2) to the working directory;
//! 6. with a [`Confinement`]: no-new-privileges (prctl(2)); for a confining
//!    mode, every capability dropped (bounding set, ambient set, then
//!    effective, permitted and inheritable with capset(2), so even root ends
//!    with none: capabilities(7)); landlock_restrict_self(2) with the ruleset
//!    built by the parent; the seccomp filter (seccomp(2));
//! 7. every descriptor above 2 closed, an empty signal mask, then execve(2).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc::{self, c_char, c_int, c_void};

/// Stack of the child between clone and execve: it runs one small function.
const CHILD_STACK_BYTES: usize = 64 * 1024;

/// What to start.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    /// Absolute path of `bash`.
    pub shell: &'a Path,
    /// The script for `bash -c`.
    pub script: &'a str,
    /// The working directory.
    pub workdir: &'a Path,
    /// The complete child environment.
    pub env: &'a [(OsString, OsString)],
    /// Confinement to apply before execve, if any.
    pub confine: Option<&'a Confinement>,
    /// Attach the command to this process's terminal instead of pipes: it
    /// keeps stdin, stdout and stderr, stays in this session, and becomes
    /// the terminal's foreground process group (setpgid(2), tcsetpgrp(3)).
    pub interactive: bool,
    /// Start the command as the init of a new PID namespace
    /// (`CLONE_NEWPID`, pid_namespaces(7)), so that the kernel kills the
    /// whole tree when it ends, even if this process is killed with
    /// SIGKILL. Needs CAP_SYS_ADMIN; used for background jobs when held.
    pub pid_namespace: bool,
}

/// How many seccomp filters a [`Confinement`] can carry.
pub const MAX_FILTERS: usize = 3;

/// What the child applies to itself before execve; built by the parent.
#[derive(Debug, Default)]
pub struct Confinement {
    /// Drop every capability (confining modes).
    pub drop_capabilities: bool,
    /// A Landlock ruleset to enforce.
    pub ruleset: Option<OwnedFd>,
    /// Seccomp filters to load, in order (at most [`MAX_FILTERS`]).
    pub seccomp: Vec<Vec<libc::sock_filter>>,
}

/// A started child: its pid (also its process-group id, and its session id
/// unless interactive) and the parent's ends of its three pipes, all
/// close-on-exec (`None` for an interactive child, which has the terminal).
#[derive(Debug)]
pub struct Spawned {
    /// The child's pid.
    pub pid: i32,
    /// Write end of the child's stdin.
    pub stdin: Option<OwnedFd>,
    /// Read end of the child's stdout.
    pub stdout: Option<OwnedFd>,
    /// Read end of the child's stderr.
    pub stderr: Option<OwnedFd>,
}

/// The step of the child setup that failed, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
enum Step {
    None = 0,
    Setsid,
    Pdeathsig,
    ParentGone,
    Dup2,
    Chdir,
    Sigmask,
    Exec,
    NoNewPrivs,
    CapBounding,
    CapAmbient,
    Capset,
    Landlock,
    Seccomp,
    Setpgid,
    Tcsetpgrp,
    IpcNamespace,
}

impl Step {
    fn from_i32(n: i32) -> Step {
        [
            Step::None,
            Step::Setsid,
            Step::Pdeathsig,
            Step::ParentGone,
            Step::Dup2,
            Step::Chdir,
            Step::Sigmask,
            Step::Exec,
            Step::NoNewPrivs,
            Step::CapBounding,
            Step::CapAmbient,
            Step::Capset,
            Step::Landlock,
            Step::Seccomp,
            Step::Setpgid,
            Step::Tcsetpgrp,
            Step::IpcNamespace,
        ]
        .get(n as usize)
        .copied()
        .unwrap_or(Step::None)
    }

    fn describe(self) -> &'static str {
        match self {
            Step::None => "spawn",
            Step::Setsid => "setsid",
            Step::Pdeathsig => "prctl(PR_SET_PDEATHSIG)",
            Step::ParentGone => "parent exited during spawn",
            Step::Dup2 => "dup2",
            Step::Chdir => "chdir",
            Step::Sigmask => "sigprocmask",
            Step::Exec => "execve",
            Step::NoNewPrivs => "prctl(PR_SET_NO_NEW_PRIVS)",
            Step::CapBounding => "prctl(PR_CAPBSET_DROP)",
            Step::CapAmbient => "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
            Step::Capset => "capset",
            Step::Landlock => "landlock_restrict_self",
            Step::Seccomp => "seccomp(SECCOMP_SET_MODE_FILTER)",
            Step::Setpgid => "setpgid",
            Step::Tcsetpgrp => "tcsetpgrp",
            Step::IpcNamespace => "unshare(CLONE_NEWIPC)",
        }
    }

    /// True for the confinement steps: their failure is a runner failure.
    fn is_confinement(self) -> bool {
        (Step::NoNewPrivs as i32..=Step::Seccomp as i32).contains(&(self as i32))
            || self == Step::IpcNamespace
    }
}

/// A failed spawn; `confinement` is true when restricting the child failed
/// (the command never ran).
#[derive(Debug)]
pub struct SpawnError {
    /// True when a confinement step failed: the command never ran.
    pub confinement: bool,
    /// The failure, naming the step.
    pub error: io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl From<io::Error> for SpawnError {
    fn from(error: io::Error) -> Self {
        SpawnError {
            confinement: false,
            error,
        }
    }
}

/// Child-side view of a [`Confinement`]: raw values only.
struct ChildConfine {
    enabled: bool,
    drop_capabilities: bool,
    /// Whether this process holds capabilities worth dropping from the
    /// bounding set (needs CAP_SETPCAP; an unprivileged caller has none).
    privileged: bool,
    cap_last: c_int,
    ruleset_fd: c_int,
    filters: [libc::sock_fprog; MAX_FILTERS],
    filter_count: usize,
}

/// Everything the child reads, prepared by the parent. The child writes only
/// `failed_step` and `errno`.
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    workdir: *const c_char,
    /// Child-side pipe ends for fds 0, 1, 2; each is at least 3, so dup2 never
    /// clobbers one that is still needed and always clears close-on-exec.
    fds: [c_int; 3],
    parent: libc::pid_t,
    sigrtmax: c_int,
    interactive: bool,
    confine: ChildConfine,
    failed_step: AtomicI32,
    errno: AtomicI32,
}

/// Runs in the child, in the parent's memory, until execve. Only system calls.
extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` points to the parent's ChildArgs, alive and unchanged
    // while the parent is suspended by CLONE_VFORK.
    let a = unsafe { &*(arg as *const ChildArgs) };
    let fail = |step: Step| -> c_int {
        // SAFETY: errno is a thread-local of the parent's thread, read only.
        let e = unsafe { *libc::__errno_location() };
        a.errno.store(e, Ordering::SeqCst);
        a.failed_step.store(step as i32, Ordering::SeqCst);
        // SAFETY: _exit ends only this child.
        unsafe { libc::_exit(127) }
    };
    // SAFETY: plain system calls on this child process.
    unsafe {
        // The raw system call: glibc's signal(3) refuses the two real-time
        // signals it reserves (32 and 33), which a caller may have ignored.
        let default_action = [0u64; 4];
        for sig in 1..=a.sigrtmax {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    default_action.as_ptr(),
                    std::ptr::null_mut::<c_void>(),
                    8usize,
                );
            }
        }
        if a.interactive {
            // Signals are still blocked, so SIGTTOU cannot stop us here.
            if libc::setpgid(0, 0) == -1 {
                return fail(Step::Setpgid);
            }
            if libc::tcsetpgrp(0, libc::getpid()) == -1 {
                return fail(Step::Tcsetpgrp);
            }
        } else if libc::setsid() == -1 {
            return fail(Step::Setsid);
        }
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) == -1
        {
            return fail(Step::Pdeathsig);
        }
        if libc::getppid() != a.parent {
            return fail(Step::ParentGone);
        }
        for (target, fd) in a.fds.iter().enumerate() {
            if *fd != target as c_int && libc::dup2(*fd, target as c_int) == -1 {
                return fail(Step::Dup2);
            }
        }
        if libc::chdir(a.workdir) == -1 {
            return fail(Step::Chdir);
        }
        let c = &a.confine;
        if c.enabled {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) == -1 {
                return fail(Step::NoNewPrivs);
            }
            if c.drop_capabilities {
                // A private System V IPC namespace, so that shared memory,
                // queues and semaphores outside cannot be reached (needs
                // CAP_SYS_ADMIN; an unprivileged caller reaches only its own).
                if c.privileged && libc::unshare(libc::CLONE_NEWIPC) == -1 {
                    return fail(Step::IpcNamespace);
                }
                if c.privileged {
                    for cap in 0..=c.cap_last {
                        if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) == -1 {
                            return fail(Step::CapBounding);
                        }
                    }
                }
                let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
                if libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0) == -1
                    && *libc::__errno_location() != libc::EINVAL
                {
                    return fail(Step::CapAmbient);
                }
                // struct __user_cap_header_struct / __user_cap_data_struct
                // (capget(2)), version 3: two 32-bit halves, all zero.
                let header: [u32; 2] = [0x2008_0522, 0];
                let data = [0u32; 6];
                if libc::syscall(libc::SYS_capset, header.as_ptr(), data.as_ptr()) == -1 {
                    return fail(Step::Capset);
                }
            }
            if c.ruleset_fd >= 0
                && libc::syscall(libc::SYS_landlock_restrict_self, c.ruleset_fd, 0) == -1
            {
                return fail(Step::Landlock);
            }
            for filter in &c.filters[..c.filter_count] {
                if libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                    filter as *const libc::sock_fprog as libc::c_ulong,
                    0,
                    0,
                ) == -1
                {
                    return fail(Step::Seccomp);
                }
            }
        }
        // Only 0, 1 and 2 reach the command: descriptors this process
        // inherited without close-on-exec are not passed on (close_range(2),
        // Linux 5.9; older kernels keep them).
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) == -1 {
            return fail(Step::Sigmask);
        }
        libc::execve(a.path, a.argv, a.envp);
        fail(Step::Exec)
    }
}

fn cstring(bytes: &[u8], what: &str) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    Ok((r, w))
}

/// A close-on-exec duplicate numbered 3 or more (fds 0 to 2 may be free when
/// this process was started with them closed).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor that we then own.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if n == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `n` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// The highest capability number of this kernel (`/proc/sys/kernel/cap_last_cap`).
fn cap_last() -> c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// True when this process may drop capabilities from the bounding set:
/// it holds CAP_SETPCAP (bit 8 of `CapEff` in `/proc/self/status`,
/// capabilities(7)). Without it the bounding set stays as it is, which
/// no-new-privileges makes harmless.
fn holds_capabilities() -> bool {
    const CAP_SETPCAP: u32 = 8;
    effective_capabilities().is_none_or(|caps| caps & (1 << CAP_SETPCAP) != 0)
}

/// This process's effective capability set (`CapEff` of `/proc/self/status`,
/// proc(5)), one bit per capability number.
pub fn effective_capabilities() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
}

fn child_confine(confine: Option<&Confinement>) -> ChildConfine {
    let none = libc::sock_fprog {
        len: 0,
        filter: std::ptr::null_mut(),
    };
    match confine {
        None => ChildConfine {
            enabled: false,
            drop_capabilities: false,
            privileged: false,
            cap_last: 0,
            ruleset_fd: -1,
            filters: [none; MAX_FILTERS],
            filter_count: 0,
        },
        Some(c) => ChildConfine {
            enabled: true,
            drop_capabilities: c.drop_capabilities,
            privileged: c.drop_capabilities && holds_capabilities(),
            cap_last: cap_last(),
            ruleset_fd: c.ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
            filters: std::array::from_fn(|i| match c.seccomp.get(i) {
                Some(prog) => libc::sock_fprog {
                    len: prog.len() as u16,
                    filter: prog.as_ptr() as *mut libc::sock_filter,
                },
                None => none,
            }),
            filter_count: c.seccomp.len().min(MAX_FILTERS),
        },
    }
}

/// Starts `bash -c SCRIPT` as described in the module documentation.
///
/// Errors when a string holds a NUL byte, pipes cannot be created, clone(2)
/// fails, or a child setup step fails (the message names the step; the child
/// is reaped before returning). A failed confinement step is marked as such:
/// the command never ran.
pub fn spawn(req: &SpawnRequest) -> Result<Spawned, SpawnError> {
    let path = cstring(req.shell.as_os_str().as_bytes(), "the shell path")?;
    // `--` ends bash's options, so a script such as `-x` is a command.
    let argv = [
        cstring(b"bash", "argv")?,
        cstring(b"-c", "argv")?,
        cstring(b"--", "argv")?,
        cstring(req.script.as_bytes(), "the command")?,
    ];
    let env: Vec<CString> = req
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(OsStr::as_bytes(v));
            cstring(&kv, "an environment entry")
        })
        .collect::<io::Result<_>>()?;
    let workdir = cstring(req.workdir.as_os_str().as_bytes(), "the working directory")?;
    let argv_ptrs: Vec<*const c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let env_ptrs: Vec<*const c_char> = env
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    // (parent end, child end) of each pipe; an interactive child keeps 0-2.
    let pipes = if req.interactive {
        None
    } else {
        let (in_r, in_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        Some((
            [in_w, out_r, err_r],
            [above_stdio(in_r)?, above_stdio(out_w)?, above_stdio(err_w)?],
        ))
    };
    let fds = match &pipes {
        Some((_, child)) => [
            child[0].as_raw_fd(),
            child[1].as_raw_fd(),
            child[2].as_raw_fd(),
        ],
        None => [0, 1, 2],
    };

    let args = ChildArgs {
        path: path.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        workdir: workdir.as_ptr(),
        fds,
        // In a new PID namespace the parent is outside it: getppid(2) is 0.
        parent: if req.pid_namespace {
            0
        } else {
            nix::unistd::getpid().as_raw()
        },
        sigrtmax: libc::SIGRTMAX(),
        interactive: req.interactive,
        confine: child_confine(req.confine),
        failed_step: AtomicI32::new(Step::None as i32),
        errno: AtomicI32::new(0),
    };
    // Allocated, not initialized: the child writes its frames before
    // reading them, as on any stack.
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK_BYTES);
    // SAFETY: the pointer stays inside the allocation; the stack grows down
    // from its end, aligned to 16 bytes as the x86-64 and AArch64 ABIs require.
    let stack_top = unsafe {
        let top = stack.as_mut_ptr().add(CHILD_STACK_BYTES);
        top.sub(top as usize % 16)
    };

    // SAFETY: the signal mask is restored right after clone; `args`,
    // `stack` and every string outlive the child's use of them, because
    // CLONE_VFORK suspends this thread until the child has exec'd or exited.
    let (pid, clone_error) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child_main,
            stack_top as *mut c_void,
            libc::CLONE_VM
                | libc::CLONE_VFORK
                | libc::SIGCHLD
                | if req.pid_namespace {
                    libc::CLONE_NEWPID
                } else {
                    0
                },
            &args as *const ChildArgs as *mut c_void,
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (pid, clone_error)
    };
    let parent_ends = pipes.map(|(parent, _child)| parent);
    drop(stack);
    if pid == -1 {
        return Err(clone_error.into());
    }
    let step = Step::from_i32(args.failed_step.load(Ordering::SeqCst));
    if step != Step::None {
        let errno = args.errno.load(Ordering::SeqCst);
        // The child has already called _exit: reap it.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let cause = io::Error::from_raw_os_error(errno);
        return Err(SpawnError {
            confinement: step.is_confinement(),
            error: io::Error::new(cause.kind(), format!("{}: {cause}", step.describe())),
        });
    }
    let [stdin, stdout, stderr] = match parent_ends {
        Some([i, o, e]) => [Some(i), Some(o), Some(e)],
        None => [None, None, None],
    };
    Ok(Spawned {
        pid,
        stdin,
        stdout,
        stderr,
    })
}
