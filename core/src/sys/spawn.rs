//! The parent's side of a spawn: a program started as the leader of a new
//! session, with the descriptors it is given, confined as asked.
//!
//! The child is created with `clone(CLONE_VM | CLONE_VFORK)`, the technique
//! of glibc's posix_spawn(3): it runs on its own small stack in the parent's
//! memory until it calls execve(2), while the parent is suspended. Nothing is
//! copied, which makes starting a command about 0.4 ms cheaper than fork(2)
//! (measured with `bench/run.sh`). Everything the child needs (argv, envp,
//! paths, descriptors, filters) is built here beforehand; the child's steps
//! are in [`super::child`].
//!
//! The same path starts the command (`bash -c -- SCRIPT`, with pipes) and a
//! background job's supervisor (`dsh-exec __supervise ...`, with the
//! descriptors the launcher hands it).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::libc::{self, c_char, c_void};

use super::child::{
    ChildArgs, ChildConfine, ChildMount, ChildMounts, ChildOverlay, ChildRoot, MAX_CGROUPS,
    MAX_CHILD_FDS, MAX_FILTERS, MAX_TREE_ROOTS, Step, child_main,
};

/// Stack of the child between clone and execve: it runs a few small functions.
const CHILD_STACK_BYTES: usize = 64 * 1024;

/// The child's mount namespace (see `child::enter_mount_namespace`).
#[derive(Debug, Default)]
pub(crate) struct MountPlan {
    /// Paths to bind-mount over themselves, outermost first, and whether
    /// read-only.
    pub(crate) binds: Vec<(CString, bool)>,
    /// Entries of the read deny list inside writable roots, hidden under a
    /// mount after the binds: the path, and whether it is a directory.
    pub(crate) hides: Vec<(CString, bool)>,
    /// A private devpts instance, granted to Landlock with `pts_access`.
    pub(crate) private_devpts: bool,
    pub(crate) pts_access: u64,
    /// A fresh proc (the child leads a new PID namespace).
    pub(crate) fresh_proc: bool,
    /// A private tmpfs over `/dev/shm`, granted to Landlock with
    /// `shm_access` (0: none).
    pub(crate) shm_access: u64,
    /// Every mount read-only but these writable roots (outermost ones, at
    /// most [`MAX_TREE_ROOTS`]): real path, and the (device, inode) the
    /// parent's descriptor had. `None`: no read-only tree.
    pub(crate) tree_roots: Option<Vec<(CString, u64, u64)>>,
    /// Transactions' overlays (with a read-only tree only), outermost
    /// first: the root's real path, the (device, inode) of the root the
    /// parent opened, and the detached overlay mount's descriptor, which
    /// the caller keeps open until the spawn returns.
    pub(crate) overlays: Vec<(CString, u64, u64, std::os::fd::RawFd)>,
    /// Under `-i` with a read-only tree: the terminal's path and device
    /// number, and which of 0, 1, 2 are it (bits), to re-open in the
    /// namespace.
    pub(crate) terminal: Option<(CString, u64, u8)>,
}

/// What the child applies to itself before execve; built by the parent.
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    /// Drop capabilities: all but `keep_capabilities`.
    pub(crate) drop_capabilities: bool,
    /// Capabilities kept when dropping (one bit each).
    pub(crate) keep_capabilities: u64,
    /// A private System V IPC namespace (needs CAP_SYS_ADMIN).
    pub(crate) ipc_namespace: bool,
    /// A mount namespace to enter (needs CAP_SYS_ADMIN).
    pub(crate) mounts: Option<MountPlan>,
    /// A Landlock ruleset to enforce.
    pub(crate) ruleset: Option<OwnedFd>,
    /// Seccomp filters to load, in order (at most [`MAX_FILTERS`]).
    pub(crate) filters: Vec<Vec<libc::sock_filter>>,
    /// The gate's filter, loaded last; its listener comes back in
    /// [`Spawned::listener`].
    pub(crate) gate: Option<Vec<libc::sock_filter>>,
}

/// The child's descriptors 0, 1, 2 (and more).
pub(crate) enum ChildFds<'a> {
    /// New pipes for stdin, stdout and stderr; the parent's ends are
    /// returned in [`Spawned`].
    Pipes,
    /// A new pipe for stdin (its write end returned in [`Spawned`]); these
    /// two descriptors become stdout and stderr.
    Outputs([BorrowedFd<'a>; 2]),
    /// The child keeps this process's 0, 1 and 2: an interactive run, which
    /// is also made the terminal's foreground process group.
    Terminal,
    /// These become the child's 0, 1, 2, ... in order (at most
    /// [`MAX_CHILD_FDS`]).
    Given(&'a [BorrowedFd<'a>]),
}

/// What to start.
pub(crate) struct Program<'a> {
    /// Absolute path of the executable.
    pub(crate) path: &'a Path,
    /// Its argument vector, `argv[0]` included.
    pub(crate) argv: &'a [&'a [u8]],
    /// The complete environment.
    pub(crate) env: &'a [(OsString, OsString)],
    /// The working directory.
    pub(crate) workdir: &'a Path,
    /// The (device, inode) the working directory had when checked: the
    /// child refuses to start in another one.
    pub(crate) workdir_id: Option<(u64, u64)>,
    /// Its descriptors.
    pub(crate) fds: ChildFds<'a>,
    /// SIGKILL it when this process dies (the command: yes; a job's
    /// supervisor, which must outlive its launcher: no).
    pub(crate) parent_death: bool,
    /// Start it as the init of a new PID namespace (`CLONE_NEWPID`,
    /// pid_namespaces(7)), so that the kernel kills its whole tree when it
    /// ends, even if this process is killed with SIGKILL. Needs
    /// CAP_SYS_ADMIN.
    pub(crate) pid_namespace: bool,
    /// Confinement to apply before execve, if any.
    pub(crate) confine: Option<&'a Confinement>,
    /// RLIMIT_FSIZE for the command, in bytes (`--file-size-max`).
    pub(crate) file_size_max: Option<u64>,
    /// RLIMIT_CPU for the command, in seconds (the CPU limit's backstop).
    pub(crate) cpu_rlimit: Option<u64>,
    /// `cgroup.procs` descriptors of the run's cgroups, at most
    /// [`MAX_CGROUPS`]; the child joins them first.
    pub(crate) cgroups: &'a [i32],
    /// A cgroup the child cannot join fails the spawn (else it is noted
    /// in [`Spawned::cgroup_failed`]).
    pub(crate) cgroups_required: bool,
    /// A cgroup v2 directory to start the child in (clone3
    /// `CLONE_INTO_CGROUP`); `cgroups[0]` must then be its `cgroup.procs`,
    /// which the child writes only where clone3 is refused.
    pub(crate) cgroup_dir: Option<i32>,
    /// The first of [`ChildFds::Given`] is a pseudo-terminal's slave that
    /// becomes the child's controlling terminal (`--pty`).
    pub(crate) controlling_tty: bool,
}

/// A started child: its pid (also its process-group id, and its session id
/// unless interactive) and, with [`ChildFds::Pipes`], the parent's ends of
/// its three pipes, all close-on-exec.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// The child's pid.
    pub(crate) pid: i32,
    /// Write end of the child's stdin.
    pub(crate) stdin: Option<OwnedFd>,
    /// Read end of the child's stdout.
    pub(crate) stdout: Option<OwnedFd>,
    /// Read end of the child's stderr.
    pub(crate) stderr: Option<OwnedFd>,
    /// The gate's listener, when the confinement has a gate.
    pub(crate) listener: Option<OwnedFd>,
    /// Bit i set: the child could not join `Program::cgroups[i]`.
    pub(crate) cgroup_failed: u32,
}

/// A failed spawn.
#[derive(Debug)]
pub(crate) struct SpawnError {
    /// True when a confinement step failed: the command never ran.
    pub(crate) confinement: bool,
    /// True when joining the run's cgroups failed: the command never ran.
    pub(crate) cgroup: bool,
    /// The failure, naming the step.
    pub(crate) error: io::Error,
}

impl From<io::Error> for SpawnError {
    fn from(error: io::Error) -> Self {
        SpawnError {
            confinement: false,
            cgroup: false,
            error,
        }
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
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// A close-on-exec duplicate numbered [`MAX_CHILD_FDS`] or more, so that
/// installing the child's descriptors (dup2 onto 0, 1, ...) never clobbers a
/// source still needed, and always clears close-on-exec on the copy.
fn above_targets(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let n = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(MAX_CHILD_FDS as i32))?;
    // SAFETY: F_DUPFD_CLOEXEC returned a fresh descriptor nobody else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(n) })
}

/// `fd` itself when it is already numbered above the targets (the usual
/// case for a fresh pipe), else such a duplicate.
fn owned_above_targets(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() >= MAX_CHILD_FDS as i32 {
        return Ok(fd);
    }
    above_targets(fd.as_fd())
}

/// The highest capability number of this kernel (`/proc/sys/kernel/cap_last_cap`).
fn cap_last() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

fn child_mounts(
    plan: Option<&MountPlan>,
    entries: &[ChildMount],
    roots: &[ChildRoot],
    overlays: &[ChildOverlay],
) -> ChildMounts {
    match plan {
        None => ChildMounts {
            enabled: false,
            read_only_tree: false,
            roots: std::ptr::null(),
            root_count: 0,
            overlays: std::ptr::null(),
            overlay_count: 0,
            tty: std::ptr::null(),
            tty_rdev: 0,
            tty_fds: 0,
            binds: std::ptr::null(),
            bind_count: 0,
            private_devpts: false,
            pts_access: 0,
            fresh_proc: false,
            shm_access: 0,
        },
        Some(p) => ChildMounts {
            enabled: true,
            read_only_tree: p.tree_roots.is_some(),
            roots: roots.as_ptr(),
            root_count: roots.len().min(MAX_TREE_ROOTS),
            overlays: overlays.as_ptr(),
            overlay_count: overlays.len(),
            tty: p
                .terminal
                .as_ref()
                .map_or(std::ptr::null(), |(path, _, _)| path.as_ptr()),
            tty_rdev: p.terminal.as_ref().map_or(0, |(_, rdev, _)| *rdev),
            tty_fds: p.terminal.as_ref().map_or(0, |(_, _, fds)| *fds),
            binds: entries.as_ptr(),
            bind_count: entries.len(),
            private_devpts: p.private_devpts,
            pts_access: p.pts_access,
            fresh_proc: p.fresh_proc,
            shm_access: p.shm_access,
        },
    }
}

fn child_confine(
    confine: Option<&Confinement>,
    mounts: &[ChildMount],
    roots: &[ChildRoot],
    overlays: &[ChildOverlay],
) -> ChildConfine {
    let none = libc::sock_fprog {
        len: 0,
        filter: std::ptr::null_mut(),
    };
    let Some(c) = confine else {
        return ChildConfine {
            enabled: false,
            drop_capabilities: false,
            keep_capabilities: 0,
            ipc_namespace: false,
            cap_data: [0; 6],
            mounts: child_mounts(None, mounts, roots, overlays),
            privileged: false,
            cap_last: 0,
            ruleset_fd: -1,
            filters: [none; MAX_FILTERS],
            filter_count: 0,
            gate: none,
        };
    };
    ChildConfine {
        enabled: true,
        drop_capabilities: c.drop_capabilities,
        keep_capabilities: c.keep_capabilities,
        ipc_namespace: c.ipc_namespace,
        cap_data: super::caps::masked(c.keep_capabilities),
        mounts: child_mounts(c.mounts.as_ref(), mounts, roots, overlays),
        // Dropping from the bounding set needs CAP_SETPCAP; without it the
        // bounding set stays, which no-new-privileges makes harmless.
        privileged: c.drop_capabilities && crate::sys::caps::holds(crate::sys::caps::CAP_SETPCAP),
        cap_last: cap_last(),
        ruleset_fd: c.ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
        filters: std::array::from_fn(|i| match c.filters.get(i) {
            Some(prog) => libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            },
            None => none,
        }),
        filter_count: c.filters.len().min(MAX_FILTERS),
        gate: match &c.gate {
            Some(prog) => libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            },
            None => none,
        },
    }
}

/// `struct clone_args` of clone3(2) (linux/sched.h), up to `cgroup`
/// (`CLONE_ARGS_SIZE_VER2`, Linux 5.7).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (linux/sched.h, Linux 5.7): the child starts in the
/// cgroup v2 directory `clone_args.cgroup` names.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// clone3(2) with `flags`, the child on the stack `[stack, stack + size)`
/// running `child_main(arg)` and then exit(2) with its return value; the
/// parent gets the child's pid or `-errno`.
///
/// clone3 has no libc wrapper that runs a function on the new stack, so
/// the child's first instructions are written here: the kernel starts it
/// at the instruction after `syscall` with the stack pointer at `stack +
/// size` (16-byte aligned, so the call below meets the ABI) and every
/// other register as the parent had it, which is how it finds `arg` and
/// the function in r12 and r13.
///
/// # Safety
/// As [`clone_vfork`]; `cl` must describe a valid stack.
#[cfg(target_arch = "x86_64")]
unsafe fn raw_clone3(cl: &CloneArgs, arg: *mut c_void) -> i64 {
    let ret: i64;
    // SAFETY: the caller's contract; the child never returns into Rust
    // frames of the parent (it calls child_main, then exits).
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, 60",
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") cl as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") child_main as extern "C" fn(*mut c_void) -> libc::c_int,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    ret
}

/// Starts the child that runs [`child_main`] with `args`, sharing this
/// process's memory and suspending it until the child execs or exits
/// (`CLONE_VM | CLONE_VFORK`), optionally as the init of a new PID
/// namespace and sharing the descriptor table (`CLONE_FILES`, for the
/// gate's listener).
///
/// With `cgroup` (a cgroup v2 directory), the child is started in it with
/// clone3(2) `CLONE_INTO_CGROUP`: it takes the cgroup lock for reading
/// only, where moving a process afterwards (a write to `cgroup.procs`)
/// takes `cgroup_threadgroup_rwsem` for writing and so waits for an RCU
/// grace period, 5 to 20 ms on an idle machine. Where the kernel refuses clone3 (older than 5.7, or a seccomp policy
/// that answers ENOSYS, as container runtimes do) it falls back to
/// clone(2), and the child must join the cgroup itself.
///
/// # Safety
/// `args` and every pointer in it must stay valid until this returns (the
/// parent is suspended until the child execs or exits, so stack values of
/// the caller are enough).
unsafe fn clone_vfork(
    args: &ChildArgs,
    new_pid_namespace: bool,
    share_files: bool,
    cgroup: Option<libc::c_int>,
) -> io::Result<i32> {
    // Allocated, not initialized: the child writes its frames before
    // reading them, as on any stack.
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK_BYTES);
    // SAFETY: the pointer stays inside the allocation; the stack grows down
    // from its end, aligned to 16 bytes as the x86-64 and AArch64 ABIs require.
    let stack_top = unsafe {
        let top = stack.as_mut_ptr().add(CHILD_STACK_BYTES);
        top.sub(top as usize % 16)
    };
    let flags = libc::CLONE_VM
        | libc::CLONE_VFORK
        | if new_pid_namespace {
            libc::CLONE_NEWPID
        } else {
            0
        }
        | if share_files { libc::CLONE_FILES } else { 0 };
    // SAFETY: every signal is blocked around clone so that no handler of
    // this process runs in the child, and the mask is restored right after;
    // `args` and `stack` outlive the child's use of them (CLONE_VFORK).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let arg = args as *const ChildArgs as *mut c_void;
        #[cfg(target_arch = "x86_64")]
        if let Some(dir) = cgroup {
            let base = stack.as_mut_ptr() as u64;
            let cl = CloneArgs {
                flags: flags as u64 | CLONE_INTO_CGROUP,
                exit_signal: libc::SIGCHLD as u64,
                stack: base,
                stack_size: stack_top as u64 - base,
                cgroup: dir as u64,
                ..CloneArgs::default()
            };
            args.cgroup_first.store(1, Ordering::SeqCst);
            let pid = raw_clone3(&cl, arg);
            args.cgroup_first.store(0, Ordering::SeqCst);
            if pid > 0 {
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                return Ok(pid as i32);
            }
            let errno = -pid as i32;
            if ![
                libc::ENOSYS,
                libc::EINVAL,
                libc::E2BIG,
                libc::EPERM,
                libc::EOPNOTSUPP,
            ]
            .contains(&errno)
            {
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = cgroup;
        let pid = libc::clone(
            child_main,
            stack_top as *mut c_void,
            flags | libc::SIGCHLD,
            arg,
        );
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid == -1 {
            return Err(clone_error);
        }
        Ok(pid)
    }
}

/// Starts `program` as described in the module documentation.
///
/// Errors when a string holds a NUL byte, pipes cannot be created, clone(2)
/// fails, or a child setup step fails (the message names the step; the child
/// is reaped before returning). A failed confinement step is marked as such:
/// the program never ran.
pub(crate) fn spawn(program: &Program) -> Result<Spawned, SpawnError> {
    let path = cstring(program.path.as_os_str().as_bytes(), "the program path")?;
    let argv: Vec<CString> = program
        .argv
        .iter()
        .map(|a| cstring(a, "an argument"))
        .collect::<io::Result<_>>()?;
    let env: Vec<CString> = program
        .env
        .iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(OsStr::as_bytes(v));
            cstring(&kv, "an environment entry")
        })
        .collect::<io::Result<_>>()?;
    let workdir = cstring(
        program.workdir.as_os_str().as_bytes(),
        "the working directory",
    )?;
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

    // The child's sources (kept open until it has exec'd) and, for pipes,
    // the parent's ends.
    let mut sources: Vec<OwnedFd> = Vec::new();
    let mut parent_ends = None;
    let mut stdin_end = None;
    match &program.fds {
        ChildFds::Pipes => {
            let (in_r, in_w) = pipe()?;
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            for fd in [in_r, out_w, err_w] {
                sources.push(owned_above_targets(fd)?);
            }
            parent_ends = Some([in_w, out_r, err_r]);
        }
        ChildFds::Outputs([out, err]) => {
            let (in_r, in_w) = pipe()?;
            sources.push(owned_above_targets(in_r)?);
            sources.push(above_targets(*out)?);
            sources.push(above_targets(*err)?);
            stdin_end = Some(in_w);
        }
        ChildFds::Terminal => {}
        ChildFds::Given(fds) => {
            if fds.len() > MAX_CHILD_FDS {
                return Err(
                    io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors").into(),
                );
            }
            for fd in fds.iter() {
                sources.push(above_targets(*fd)?);
            }
        }
    }
    let mut fds = [0; MAX_CHILD_FDS];
    let fd_count = match &program.fds {
        ChildFds::Terminal => {
            fds[..3].copy_from_slice(&[0, 1, 2]);
            3
        }
        _ => {
            for (slot, fd) in fds.iter_mut().zip(&sources) {
                *slot = fd.as_raw_fd();
            }
            sources.len()
        }
    };

    // The bind mounts as the child reads them: pointers into the
    // confinement's strings, which outlive the spawn, and the file each
    // path names now (lstat(2)): the child mounts on that file or refuses.
    // (0, 0) when there is none: no file has inode 0, so the child refuses.
    let found_at = |p: &std::ffi::CString| {
        std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(p.as_bytes()))
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            })
            .unwrap_or((0, 0))
    };
    let mount_entries: Vec<ChildMount> = program
        .confine
        .and_then(|c| c.mounts.as_ref())
        .map(|m| {
            m.binds
                .iter()
                .map(|(p, ro)| ChildMount {
                    path: p.as_ptr(),
                    dev: found_at(p).0,
                    ino: found_at(p).1,
                    read_only: *ro,
                    hide: false,
                    hide_dir: false,
                })
                .chain(m.hides.iter().map(|(p, dir)| ChildMount {
                    path: p.as_ptr(),
                    dev: found_at(p).0,
                    ino: found_at(p).1,
                    read_only: true,
                    hide: true,
                    hide_dir: *dir,
                }))
                .collect()
        })
        .unwrap_or_default();
    let tree_roots: Vec<ChildRoot> = program
        .confine
        .and_then(|c| c.mounts.as_ref())
        .and_then(|m| m.tree_roots.as_ref())
        .map(|roots| {
            roots
                .iter()
                .map(|(p, dev, ino)| ChildRoot {
                    path: p.as_ptr(),
                    dev: *dev,
                    ino: *ino,
                })
                .collect()
        })
        .unwrap_or_default();
    let overlays: Vec<ChildOverlay> = program
        .confine
        .and_then(|c| c.mounts.as_ref())
        .map(|m| {
            m.overlays
                .iter()
                .map(|(p, dev, ino, fd)| ChildOverlay {
                    path: p.as_ptr(),
                    dev: *dev,
                    ino: *ino,
                    mount_fd: *fd,
                })
                .collect()
        })
        .unwrap_or_default();
    if program.cgroups.len() > MAX_CGROUPS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many cgroups").into());
    }
    let mut cgroups = [-1; MAX_CGROUPS];
    cgroups[..program.cgroups.len()].copy_from_slice(program.cgroups);
    if tree_roots.len() > MAX_TREE_ROOTS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("more than {MAX_TREE_ROOTS} separate writable roots"),
        )
        .into());
    }
    let args = ChildArgs {
        path: path.as_ptr(),
        argv: argv_ptrs.as_ptr(),
        envp: env_ptrs.as_ptr(),
        workdir: workdir.as_ptr(),
        workdir_id: program.workdir_id,
        fds,
        fd_count,
        parent: match (program.parent_death, program.pid_namespace) {
            (false, _) => -1,
            // In a new PID namespace the parent is outside it: getppid(2) is 0.
            (true, true) => 0,
            (true, false) => nix::unistd::getpid().as_raw(),
        },
        sigrtmax: libc::SIGRTMAX(),
        interactive: matches!(program.fds, ChildFds::Terminal),
        file_size_max: program.file_size_max,
        cpu_rlimit: program.cpu_rlimit,
        cgroups,
        cgroup_count: program.cgroups.len(),
        cgroups_required: program.cgroups_required,
        cgroup_failed: std::sync::atomic::AtomicU32::new(0),
        cgroup_first: std::sync::atomic::AtomicUsize::new(0),
        controlling_tty: program.controlling_tty,
        confine: child_confine(program.confine, &mount_entries, &tree_roots, &overlays),
        failed_step: AtomicI32::new(Step::None as i32),
        errno: AtomicI32::new(0),
        listener: AtomicI32::new(-1),
    };
    let gated = args.confine.gate.len > 0;
    if program.cgroup_dir.is_some() && program.cgroups.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cgroup_dir without its cgroup.procs",
        )
        .into());
    }
    // SAFETY: `args` and everything it points to live on until the end of
    // this function. The child joins every cgroup but the one clone3
    // started it in.
    let pid = unsafe { clone_vfork(&args, program.pid_namespace, gated, program.cgroup_dir) }?;
    drop(sources);
    let listener = match args.listener.load(Ordering::SeqCst) {
        -1 => None,
        // SAFETY: the child's filter put this descriptor into our table,
        // and nothing else here knows of it.
        fd => Some(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }),
    };
    let step = Step::from_i32(args.failed_step.load(Ordering::SeqCst));
    if step != Step::None {
        let errno = args.errno.load(Ordering::SeqCst);
        // The child has already called _exit: reap it.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let cause = io::Error::from_raw_os_error(errno);
        return Err(SpawnError {
            confinement: step.is_confinement(),
            cgroup: step == Step::JoinCgroup,
            error: io::Error::new(cause.kind(), format!("{}: {cause}", step.describe())),
        });
    }
    let [stdin, stdout, stderr] = match parent_ends {
        Some([i, o, e]) => [Some(i), Some(o), Some(e)],
        None => [stdin_end, None, None],
    };
    Ok(Spawned {
        pid,
        stdin,
        stdout,
        stderr,
        listener,
        cgroup_failed: args.cgroup_failed.load(Ordering::SeqCst),
    })
}
