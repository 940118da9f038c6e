//! The child's side of a spawn: what runs between clone(2) and execve(2).
//!
//! The child runs on its own small stack in the parent's memory
//! (`CLONE_VM | CLONE_VFORK`, see [`super::spawn`]) while the parent is
//! suspended, so it may make only system calls: no allocation, no locks, no
//! panics (vfork(2), signal-safety(7)). Everything it reads is in
//! [`ChildArgs`], built by the parent. Each step below is one small `unsafe
//! fn`; a failed step is reported through [`ChildArgs::failed_step`] and
//! `errno`, then the child calls `_exit(127)`.
//!
//! In order:
//! 1. every signal's disposition back to SIG_DFL ([`reset_signal_dispositions`]),
//!    then into the run's cgroups ([`join_cgroups`]);
//! 2. a new session, or for an interactive run the terminal's foreground
//!    process group ([`enter_session`]);
//! 3. the parent-death signal ([`set_parent_death_signal`]);
//! 4. confinement ([`confine`]): no-new-privileges, the mount namespace of
//!    protected paths ([`enter_mount_namespace`]), capabilities dropped,
//!    Landlock, seccomp; last the gate's filter ([`load_gate`]), whose
//!    listener descriptor the parent must receive;
//! 5. the working directory ([`change_dir`]), after the mounts, so that it
//!    is seen through them;
//! 6. the descriptors the child gets, as 0, 1, 2, ... ([`install_fds`]);
//! 7. every other descriptor closed ([`close_others`]), an empty signal mask
//!    ([`clear_signal_mask`]), then execve(2).
//!
//! With a gate, the child is cloned with `CLONE_FILES`: it shares the
//! parent's descriptor table until the gate's filter has returned its
//! listener, which so lands in the parent's table too; the child then
//! takes a private copy of the table (unshare(2), `CLONE_FILES`) and closes
//! the listener there, so the command never holds it (with it, it could
//! answer its own notifications). Until then the child touches no
//! descriptor of the shared table, which is why the descriptors are
//! installed after confinement.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::libc::{self, c_char, c_int, c_void};

/// How many descriptors a child can be given (0, 1, 2 and one more).
pub(crate) const MAX_CHILD_FDS: usize = 4;

/// How many cgroups a child can join (one per hierarchy: the unified one,
/// v1 memory, v1 pids, v1 cpuacct).
pub(crate) const MAX_CGROUPS: usize = 4;

/// How many seccomp filters a confinement can carry.
pub(crate) const MAX_FILTERS: usize = 3;

/// How many writable roots a read-only mount tree can carry (outermost
/// ones: a root inside another is part of its clone).
pub(crate) const MAX_TREE_ROOTS: usize = 64;

/// The step of the child setup that failed, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Step {
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
    Gate,
    UnshareFiles,
    MountNamespace,
    BindMount,
    HideMount,
    Devpts,
    ProcMount,
    LandlockRule,
    WritableRoot,
    ReadOnlyTree,
    Terminal,
    ShmMount,
    Rlimit,
    JoinCgroup,
    RlimitCpu,
    ControllingTty,
    WorkdirChanged,
    Overlay,
}

impl Step {
    /// The step recorded as `n` by [`fail`].
    pub(crate) fn from_i32(n: i32) -> Step {
        match n {
            1 => Step::Setsid,
            2 => Step::Pdeathsig,
            3 => Step::ParentGone,
            4 => Step::Dup2,
            5 => Step::Chdir,
            6 => Step::Sigmask,
            7 => Step::Exec,
            8 => Step::NoNewPrivs,
            9 => Step::CapBounding,
            10 => Step::CapAmbient,
            11 => Step::Capset,
            12 => Step::Landlock,
            13 => Step::Seccomp,
            14 => Step::Setpgid,
            15 => Step::Tcsetpgrp,
            16 => Step::IpcNamespace,
            17 => Step::Gate,
            18 => Step::UnshareFiles,
            19 => Step::MountNamespace,
            20 => Step::BindMount,
            21 => Step::Devpts,
            22 => Step::ProcMount,
            23 => Step::LandlockRule,
            24 => Step::WritableRoot,
            25 => Step::ReadOnlyTree,
            26 => Step::Terminal,
            27 => Step::ShmMount,
            28 => Step::Rlimit,
            29 => Step::JoinCgroup,
            30 => Step::RlimitCpu,
            31 => Step::ControllingTty,
            32 => Step::WorkdirChanged,
            33 => Step::Overlay,
            _ => Step::None,
        }
    }

    /// The system call behind the step, for the error message.
    pub(crate) fn describe(self) -> &'static str {
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
            Step::Gate => "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)",
            Step::UnshareFiles => "unshare(CLONE_FILES)",
            Step::MountNamespace => "unshare(CLONE_NEWNS)",
            Step::BindMount => "mount(MS_BIND) of a protected path",
            Step::HideMount => "mount over a path on the read deny list",
            Step::Devpts => "mount(devpts, newinstance)",
            Step::ProcMount => "mount(proc)",
            Step::LandlockRule => "landlock_add_rule",
            Step::WritableRoot => "open_tree/move_mount of a writable root",
            Step::ReadOnlyTree => "mount_setattr(MOUNT_ATTR_RDONLY)",
            Step::Terminal => "re-opening the terminal in the mount namespace",
            Step::ShmMount => "mount(tmpfs, /dev/shm)",
            Step::Rlimit => "setrlimit(RLIMIT_FSIZE)",
            Step::JoinCgroup => "joining the run's cgroup (write to cgroup.procs or tasks)",
            Step::RlimitCpu => "setrlimit(RLIMIT_CPU)",
            Step::ControllingTty => "ioctl(TIOCSCTTY) of the pseudo-terminal",
            Step::Overlay => "move_mount of a transaction's overlay over its writable root",
            Step::WorkdirChanged => {
                "chdir: the working directory is no longer the one checked (replaced meanwhile)"
            }
        }
    }

    /// True for the confinement steps: their failure is a sandbox runner
    /// failure (the command never ran), not a spawn failure.
    pub(crate) fn is_confinement(self) -> bool {
        match self {
            Step::NoNewPrivs
            | Step::CapBounding
            | Step::CapAmbient
            | Step::Capset
            | Step::Landlock
            | Step::Seccomp
            | Step::IpcNamespace
            | Step::Gate
            | Step::UnshareFiles
            | Step::MountNamespace
            | Step::BindMount
            | Step::HideMount
            | Step::Devpts
            | Step::ProcMount
            | Step::LandlockRule
            | Step::WritableRoot
            | Step::ReadOnlyTree
            | Step::Terminal
            | Step::ShmMount
            | Step::Overlay => true,
            Step::None
            | Step::Setsid
            | Step::Pdeathsig
            | Step::ParentGone
            | Step::Dup2
            | Step::Chdir
            | Step::WorkdirChanged
            | Step::Sigmask
            | Step::Exec
            | Step::Setpgid
            | Step::Tcsetpgrp
            | Step::Rlimit
            | Step::JoinCgroup
            | Step::RlimitCpu
            | Step::ControllingTty => false,
        }
    }
}

/// Child-side view of a confinement: raw values only.
pub(crate) struct ChildConfine {
    pub(crate) enabled: bool,
    pub(crate) drop_capabilities: bool,
    /// Capabilities kept (one bit each): see `sandbox::prepare`.
    pub(crate) keep_capabilities: u64,
    /// A private System V IPC namespace (the confining modes).
    pub(crate) ipc_namespace: bool,
    /// The capability sets to set with capset(2): this process's, masked
    /// with `keep_capabilities` (effective, permitted, inheritable; low
    /// then high halves, as `__user_cap_data_struct[2]`).
    pub(crate) cap_data: [u32; 6],
    /// Whether this process holds capabilities worth dropping from the
    /// bounding set (needs CAP_SETPCAP; an unprivileged caller has none).
    pub(crate) privileged: bool,
    pub(crate) cap_last: c_int,
    /// A mount namespace: protected paths bind-mounted over themselves,
    /// a private devpts, a fresh /proc.
    pub(crate) mounts: ChildMounts,
    pub(crate) ruleset_fd: c_int,
    pub(crate) filters: [libc::sock_fprog; MAX_FILTERS],
    pub(crate) filter_count: usize,
    /// The gate's filter (`len` 0: no gate); the child shares the parent's
    /// descriptor table when there is one.
    pub(crate) gate: libc::sock_fprog,
}

/// One mount over a path: the path bind-mounted over itself (read-only
/// where asked), or, `hide` set, the path hidden: an empty read-only tmpfs
/// over a directory, `/dev/null` bound read-only over a file (`hide_dir`
/// says which).
pub(crate) struct ChildMount {
    pub(crate) path: *const c_char,
    /// The (device, inode) the parent found at `path` (lstat): the child
    /// mounts on that very file or refuses ([`pinned_mount`]).
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) read_only: bool,
    pub(crate) hide: bool,
    pub(crate) hide_dir: bool,
}

/// One writable root as the parent opened it: its real path and the
/// (device, inode) its descriptor had.
pub(crate) struct ChildRoot {
    pub(crate) path: *const c_char,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// A transaction's overlay (`sys::overlay::mount`, detached in the
/// parent): the writable root's real path, the (device, inode) the
/// parent's descriptor of it had, and the mount's descriptor, attached
/// over the root after the read-only tree is made.
pub(crate) struct ChildOverlay {
    pub(crate) path: *const c_char,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mount_fd: c_int,
}

/// The child's mount namespace plan (all false / empty: no namespace).
pub(crate) struct ChildMounts {
    pub(crate) enabled: bool,
    /// Every mount read-only but the writable roots (`roots`, outermost
    /// ones, at most [`MAX_TREE_ROOTS`]): see [`read_only_tree`].
    pub(crate) read_only_tree: bool,
    pub(crate) roots: *const ChildRoot,
    pub(crate) root_count: usize,
    /// Transactions' overlays, outermost first, attached over their roots
    /// after the read-only tree ([`attach_overlays`]).
    pub(crate) overlays: *const ChildOverlay,
    pub(crate) overlay_count: usize,
    /// Under `-i` with a read-only tree: the terminal's path, its device
    /// number, and which of 0, 1, 2 are it (bits), re-opened in the
    /// namespace ([`reopen_terminal`]); null: nothing to re-open.
    pub(crate) tty: *const c_char,
    pub(crate) tty_rdev: u64,
    pub(crate) tty_fds: u8,
    pub(crate) binds: *const ChildMount,
    pub(crate) bind_count: usize,
    /// A new devpts instance over `/dev/pts` (and its ptmx over
    /// `/dev/ptmx`), granted to Landlock with `pts_access`: the command's
    /// terminals only, none of the host's.
    pub(crate) private_devpts: bool,
    pub(crate) pts_access: u64,
    /// A proc mounted for the new PID namespace the child leads.
    pub(crate) fresh_proc: bool,
    /// A private tmpfs over `/dev/shm`, granted with these Landlock rights
    /// (0: none).
    pub(crate) shm_access: u64,
}

/// Everything the child reads, prepared by the parent. The child writes only
/// `failed_step` and `errno`.
pub(crate) struct ChildArgs {
    pub(crate) path: *const c_char,
    pub(crate) argv: *const *const c_char,
    pub(crate) envp: *const *const c_char,
    pub(crate) workdir: *const c_char,
    /// The (device, inode) the working directory had when it was checked
    /// and opened; `None`: not checked.
    pub(crate) workdir_id: Option<(u64, u64)>,
    /// Source descriptors of the child's 0, 1, ... (`fd_count` of them);
    /// each is at least [`MAX_CHILD_FDS`], so dup2 never clobbers one that
    /// is still needed and always clears close-on-exec.
    pub(crate) fds: [c_int; MAX_CHILD_FDS],
    pub(crate) fd_count: usize,
    /// The pid `getppid()` must return after the parent-death signal is set
    /// (0 in a new PID namespace, where the parent is outside it); `-1` for
    /// no parent-death signal.
    pub(crate) parent: libc::pid_t,
    pub(crate) sigrtmax: c_int,
    pub(crate) interactive: bool,
    /// RLIMIT_FSIZE to set, in bytes (`--file-size-max`); `None`: as inherited.
    pub(crate) file_size_max: Option<u64>,
    /// RLIMIT_CPU to set, in seconds (the CPU limit's backstop); `None`:
    /// as inherited.
    pub(crate) cpu_rlimit: Option<u64>,
    /// `cgroup.procs` descriptors of the run's cgroups (`cgroup_count` of
    /// them), which the child writes itself into first.
    pub(crate) cgroups: [c_int; MAX_CGROUPS],
    pub(crate) cgroup_count: usize,
    /// The first of `cgroups` to join: 1 when clone3 started the child in
    /// the cgroup of `cgroups[0]` already, else 0. Set by the parent
    /// before each clone attempt.
    pub(crate) cgroup_first: std::sync::atomic::AtomicUsize,
    /// A cgroup that cannot be joined fails the spawn; otherwise
    /// (`--limits best-effort`) the child notes it in `cgroup_failed` (bit
    /// i for `cgroups[i]`) and goes on.
    pub(crate) cgroups_required: bool,
    pub(crate) cgroup_failed: std::sync::atomic::AtomicU32,
    /// Descriptor 0 is a pseudo-terminal's slave that becomes the child's
    /// controlling terminal (`--pty`).
    pub(crate) controlling_tty: bool,
    pub(crate) confine: ChildConfine,
    pub(crate) failed_step: AtomicI32,
    pub(crate) errno: AtomicI32,
    /// The gate's listener, written by the child: a descriptor number in
    /// the parent's table (-1: none).
    pub(crate) listener: AtomicI32,
}

/// Records the failed step and the current errno, then ends the child.
///
/// # Safety
/// Only in the child, which must not return into the parent's frames.
unsafe fn fail(a: &ChildArgs, step: Step) -> ! {
    // SAFETY: errno is a thread-local of the parent's thread, read only.
    let e = unsafe { *libc::__errno_location() };
    a.errno.store(e, Ordering::SeqCst);
    a.failed_step.store(step as i32, Ordering::SeqCst);
    // SAFETY: _exit ends only this child, running no atexit handlers.
    unsafe { libc::_exit(127) }
}

/// Step 1: every signal's disposition back to SIG_DFL, with the raw
/// rt_sigaction(2) system call: glibc's sigaction(3) refuses the two
/// real-time signals it reserves (32 and 33), which a caller may have
/// ignored. All signals are blocked by the parent around the clone, so no
/// handler of the parent runs here meanwhile.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn reset_signal_dispositions(a: &ChildArgs) {
    let default_action = [0u64; 4];
    for sig in 1..=a.sigrtmax {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            // SAFETY: a struct sigaction of zeros is SIG_DFL with no flags;
            // 8 is the kernel's sigset size.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    sig,
                    default_action.as_ptr(),
                    std::ptr::null_mut::<c_void>(),
                    8usize,
                );
            }
        }
    }
}

/// Step 2: setsid(2), a new session and process group with no controlling
/// terminal; or, interactive, a new process group made the terminal's
/// foreground group (setpgid(2), tcsetpgrp(3); signals are still blocked, so
/// SIGTTOU cannot stop the child here).
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn enter_session(a: &ChildArgs) -> Result<(), Step> {
    // SAFETY: plain system calls on this process.
    unsafe {
        if a.interactive {
            if libc::setpgid(0, 0) == -1 {
                return Err(Step::Setpgid);
            }
            if libc::tcsetpgrp(0, libc::getpid()) == -1 {
                return Err(Step::Tcsetpgrp);
            }
        } else if libc::setsid() == -1 {
            return Err(Step::Setsid);
        }
    }
    Ok(())
}

/// Step 3: SIGKILL when the parent dies, then a check that the parent is
/// still the one that spawned us: prctl(2) says the signal fires only for a
/// death after the call.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn set_parent_death_signal(a: &ChildArgs) -> Result<(), Step> {
    if a.parent < 0 {
        return Ok(());
    }
    // SAFETY: prctl with integer arguments; getppid takes none.
    unsafe {
        let sig = libc::SIGKILL as libc::c_ulong;
        if libc::prctl(libc::PR_SET_PDEATHSIG, sig, 0, 0, 0) == -1 {
            return Err(Step::Pdeathsig);
        }
        if libc::getppid() != a.parent {
            return Err(Step::ParentGone);
        }
    }
    Ok(())
}

/// Step 6: the child's descriptors 0, 1, ... from their sources (dup2(2)
/// clears close-on-exec on the copy).
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn install_fds(a: &ChildArgs) -> Result<(), Step> {
    for (target, fd) in a.fds[..a.fd_count].iter().enumerate() {
        // SAFETY: dup2 of a descriptor the parent keeps open.
        if *fd != target as c_int && unsafe { libc::dup2(*fd, target as c_int) } == -1 {
            return Err(Step::Dup2);
        }
    }
    // `--pty`: the slave on 0 becomes the controlling terminal of the new
    // session this child leads (tty_ioctl(4), TIOCSCTTY; the session has
    // none yet, so no privilege is needed), and its foreground process
    // group is this child's.
    // SAFETY: ioctl on this child's own descriptor 0.
    if a.controlling_tty && unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } == -1 {
        return Err(Step::ControllingTty);
    }
    Ok(())
}

/// Step 4b, under `-i` with a read-only tree: the terminal re-opened by
/// its path in the new namespace, over each of 0, 1, 2 that was it. The
/// inherited descriptors were opened through the host's mounts, which are
/// writable: through them a command could change the terminal's owner or
/// mode (fchown(2), fchmod(2)) and hand it to someone else. The re-opened
/// one goes through this namespace's read-only `/dev/pts`. The device
/// number must be the one the parent saw.
///
/// # Safety
/// Only in the child between clone and execve, after the gate's filter (the
/// descriptor table is this child's own by then).
unsafe fn reopen_terminal(a: &ChildArgs) -> Result<(), Step> {
    let m = &a.confine.mounts;
    if m.tty.is_null() {
        return Ok(());
    }
    // SAFETY: open, fstat, dup2 and close on this child's own table, with
    // the parent's C string.
    unsafe {
        let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
        let fd = libc::open(m.tty, flags);
        if fd < 0 {
            return Err(Step::Terminal);
        }
        let mut st: libc::stat = std::mem::zeroed();
        let same = libc::fstat(fd, &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFCHR
            && st.st_rdev == m.tty_rdev;
        if !same {
            libc::close(fd);
            *libc::__errno_location() = libc::ESTALE;
            return Err(Step::Terminal);
        }
        for target in 0..3 {
            if m.tty_fds & (1 << target) != 0 && libc::dup2(fd, target) == -1 {
                libc::close(fd);
                return Err(Step::Terminal);
            }
        }
        libc::close(fd);
    }
    Ok(())
}

/// Step 5: chdir(2) to the working directory.
///
/// # Safety
/// Only in the child between clone and execve; `a.workdir` is a C string.
///
/// The path is walked again here, in the child's mount namespace (where the
/// protected paths are bound and the tree may be read-only: a descriptor
/// opened before would name the mount outside it). So the directory reached
/// is compared with the one the parent checked (`workdir_id`): a path
/// swapped meanwhile (a symlink out of the workspace, made by another run)
/// fails the step instead of starting the command elsewhere. Once entered,
/// the working directory is a reference to that directory, whatever
/// happens to its path (path_resolution(7)).
unsafe fn change_dir(a: &ChildArgs) -> Result<(), Step> {
    // SAFETY: the parent's C string outlives the child's use of it; stat
    // fills the zeroed struct we own.
    unsafe {
        if libc::chdir(a.workdir) == -1 {
            return Err(Step::Chdir);
        }
        if let Some((dev, ino)) = a.workdir_id {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::stat(c".".as_ptr(), &mut st) == -1 || (st.st_dev, st.st_ino) != (dev, ino) {
                return Err(Step::WorkdirChanged);
            }
        }
    }
    Ok(())
}

/// Step 0: the child moves itself into the run's cgroups (write(2) of `0`
/// to each descriptor the parent opened: v2 `cgroup.procs`, "the writing
/// process", cgroup-v2.rst; v1 `tasks`, the writing thread, which is the
/// whole child: see `limits::cgroup`), before anything else, so that
/// nothing of the command ever runs outside them.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn join_cgroups(a: &ChildArgs) -> Result<(), Step> {
    let first = a.cgroup_first.load(Ordering::SeqCst).min(a.cgroup_count);
    for (i, fd) in a.cgroups[..a.cgroup_count].iter().enumerate().skip(first) {
        // SAFETY: writes one byte from a static string to a descriptor the
        // parent keeps open until the spawn returns.
        let n = unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) };
        if n != 1 {
            if a.cgroups_required {
                return Err(Step::JoinCgroup);
            }
            a.cgroup_failed.fetch_or(1 << i, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// The CPU limit's backstop: setrlimit(2) `RLIMIT_CPU`, soft and hard.
/// Past the soft limit the kernel sends SIGXCPU each second, and SIGKILL
/// at the hard one (setrlimit(2)); the soft limit's default action ends
/// the process.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn limit_cpu(a: &ChildArgs) -> Result<(), Step> {
    let Some(secs) = a.cpu_rlimit else {
        return Ok(());
    };
    let lim = libc::rlimit {
        rlim_cur: secs as libc::rlim_t,
        rlim_max: secs as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_CPU, &lim) } == -1 {
        return Err(Step::RlimitCpu);
    }
    Ok(())
}

/// `--file-size-max`: setrlimit(2) `RLIMIT_FSIZE`, soft and hard, so that
/// the command cannot raise it again. A write past it fails (EFBIG) after
/// the kernel sends SIGXFSZ, whose default action ends the writer
/// (setrlimit(2), signal(7)). Files already open are bound as well; the
/// spill files are written by `dsh-exec`, not bound.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn limit_file_size(a: &ChildArgs) -> Result<(), Step> {
    let Some(max) = a.file_size_max else {
        return Ok(());
    };
    let lim = libc::rlimit {
        rlim_cur: max as libc::rlim_t,
        rlim_max: max as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) } == -1 {
        return Err(Step::Rlimit);
    }
    Ok(())
}

/// Drops the capabilities the confinement does not keep: from the bounding
/// set (when privileged), the ambient set, then effective, permitted and
/// inheritable with capset(2), so that even root ends with none in the
/// confining modes (capabilities(7)). A privileged caller's confined
/// command also gets a private System V IPC namespace first, so shared
/// memory, queues and semaphores outside cannot be reached (unshare(2)
/// needs CAP_SYS_ADMIN; an unprivileged caller reaches only its own anyway).
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn drop_capabilities(c: &ChildConfine) -> Result<(), Step> {
    // SAFETY: unshare, prctl and capset with plain integer arguments and
    // pointers to the arrays on this stack or in the parent's ChildArgs.
    unsafe {
        if c.privileged && c.ipc_namespace && libc::unshare(libc::CLONE_NEWIPC) == -1 {
            return Err(Step::IpcNamespace);
        }
        if c.privileged {
            for cap in 0..=c.cap_last {
                if c.keep_capabilities & (1u64 << cap) != 0 {
                    continue;
                }
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) == -1 {
                    return Err(Step::CapBounding);
                }
            }
        }
        let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
        if libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0) == -1
            && *libc::__errno_location() != libc::EINVAL
        {
            return Err(Step::CapAmbient);
        }
        // struct __user_cap_header_struct / __user_cap_data_struct
        // (capget(2)), version 3: two 32-bit halves.
        let header: [u32; 2] = [0x2008_0522, 0];
        if libc::syscall(libc::SYS_capset, header.as_ptr(), c.cap_data.as_ptr()) == -1 {
            return Err(Step::Capset);
        }
    }
    Ok(())
}

/// `struct landlock_path_beneath_attr` (packed): the rights and the
/// directory they are granted beneath.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Grants `access` beneath `path` in the ruleset `ruleset_fd`
/// (landlock_add_rule(2)), for what exists only in the child's namespace.
///
/// # Safety
/// Only in the child between clone and execve; `path` is a C string.
unsafe fn grant(ruleset_fd: c_int, path: &[u8], access: u64) -> Result<(), Step> {
    const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;
    // SAFETY: open, landlock_add_rule and close with a NUL-terminated path
    // literal and an attribute struct on this stack.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(Step::LandlockRule);
        }
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd,
        };
        let rc = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset_fd,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0,
        );
        libc::close(fd);
        if rc == -1 {
            return Err(Step::LandlockRule);
        }
    }
    Ok(())
}

/// `struct open_how` (openat2(2)).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `struct mount_attr` (mount_setattr(2)).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// mount_setattr(2) of `dfd`/`path` with `flags`, setting the attributes
/// `set`: whether it succeeded (errno says why not).
///
/// # Safety
/// `path` is a C string; a system call only, fit for the child between
/// clone and execve.
unsafe fn mount_setattr(dfd: c_int, path: *const libc::c_char, flags: c_int, set: u64) -> bool {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let size = std::mem::size_of::<MountAttr>();
    // SAFETY: the caller's C string, and a struct on this stack of the
    // size given.
    unsafe { libc::syscall(libc::SYS_mount_setattr, dfd, path, flags, &attr, size) != -1 }
}

/// openat2(2) `RESOLVE_NO_MAGICLINKS`, `RESOLVE_NO_SYMLINKS`.
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `AT_RECURSIVE` (open_tree(2), mount_setattr(2)).
const AT_RECURSIVE: c_int = 0x8000;
/// open_tree(2) `OPEN_TREE_CLONE`.
const OPEN_TREE_CLONE: c_int = 1;
/// move_mount(2) `MOVE_MOUNT_F_EMPTY_PATH`, `MOVE_MOUNT_T_EMPTY_PATH`.
const MOVE_MOUNT_F_EMPTY_PATH: c_int = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: c_int = 0x40;
/// mount_setattr(2) `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 1;
/// mount_setattr(2) `MOUNT_ATTR_NODEV` (linux/mount.h): device files on
/// the mount cannot be opened (EACCES, fs/namei.c `may_open_dev`).
const MOUNT_ATTR_NODEV: u64 = 4;

/// Why [`pinned_mount`] did not mount.
enum Fallback {
    /// The kernel has no open_tree(2): mount by path.
    ByPath,
    /// The path is gone (ENOENT): removed since the plan, by someone else
    /// (the command has not started): nothing left to protect or hide.
    Gone,
    /// A failure: the step that failed (errno set).
    No(Step),
}

/// One protected or hidden path mounted on the very file the parent found
/// there, with no path resolved twice: the path is opened
/// (`O_PATH`, openat2(2) `RESOLVE_NO_SYMLINKS`: no symlink anywhere on the
/// way) and its (device, inode) compared with the parent's (`ESTALE` when
/// they differ); then the mount is built detached and attached onto that
/// descriptor (open_tree(2) `OPEN_TREE_CLONE` of itself, or of `/dev/null`
/// for a hidden file, mount_setattr(2) `MOUNT_ATTR_RDONLY` where read-only,
/// move_mount(2) `MOVE_MOUNT_T_EMPTY_PATH` onto the descriptor; a hidden
/// directory gets a tmpfs mounted on `/proc/self/fd/N`, which names the
/// descriptor's own file: proc(5)). Linux 5.2 for open_tree and
/// move_mount, 5.12 for mount_setattr; before 5.12 the read-only flag is
/// set by a remount of the attached mount, reached through the tree's own
/// descriptor.
///
/// # Safety
/// Only in the child between clone and execve, in its new mount namespace.
unsafe fn pinned_mount(b: &ChildMount) -> Result<(), Fallback> {
    let fail = if b.hide {
        Step::HideMount
    } else {
        Step::BindMount
    };
    let mut fds: [c_int; 2] = [-1, -1];
    // SAFETY: openat2, fstat, open_tree, mount_setattr, move_mount and
    // mount with the parent's C strings, structs and a buffer on this
    // stack, and descriptors opened here (closed before returning: with a
    // gate the descriptor table is the parent's).
    let result = unsafe {
        let steps = |fds: &mut [c_int; 2]| -> Result<(), Fallback> {
            let how = OpenHow {
                flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
                mode: 0,
                resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
            };
            let size = std::mem::size_of::<OpenHow>();
            let fd = libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, b.path, &how, size);
            if fd < 0 {
                return Err(if *libc::__errno_location() == libc::ENOENT {
                    Fallback::Gone
                } else {
                    Fallback::No(fail)
                });
            }
            fds[0] = fd as c_int;
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fds[0], &mut st) == -1 {
                return Err(Fallback::No(fail));
            }
            if (st.st_dev, st.st_ino) != (b.dev, b.ino) {
                *libc::__errno_location() = libc::ESTALE;
                return Err(Fallback::No(fail));
            }
            if b.hide && b.hide_dir {
                let mut buf = [0u8; 32];
                let target = fd_path(&mut buf, fds[0]);
                let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                let opts = c"size=4k,mode=0500";
                let tmpfs = c"tmpfs".as_ptr();
                if libc::mount(tmpfs, target, tmpfs, flags, opts.as_ptr().cast()) == -1 {
                    return Err(Fallback::No(fail));
                }
                return Ok(());
            }
            let clone = OPEN_TREE_CLONE | libc::O_CLOEXEC;
            let tree = if b.hide {
                libc::syscall(
                    libc::SYS_open_tree,
                    libc::AT_FDCWD,
                    c"/dev/null".as_ptr(),
                    clone,
                )
            } else {
                let flags = clone | AT_RECURSIVE | libc::AT_EMPTY_PATH;
                libc::syscall(libc::SYS_open_tree, fds[0], c"".as_ptr(), flags)
            };
            if tree < 0 {
                return Err(if *libc::__errno_location() == libc::ENOSYS {
                    Fallback::ByPath
                } else {
                    Fallback::No(fail)
                });
            }
            fds[1] = tree as c_int;
            let read_only = b.read_only || b.hide;
            let mut remount = false;
            if read_only {
                let flags = libc::AT_EMPTY_PATH | AT_RECURSIVE;
                if !mount_setattr(fds[1], c"".as_ptr(), flags, MOUNT_ATTR_RDONLY) {
                    if *libc::__errno_location() != libc::ENOSYS {
                        return Err(Fallback::No(fail));
                    }
                    remount = true;
                }
            }
            let empty = c"".as_ptr();
            let flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
            if libc::syscall(libc::SYS_move_mount, fds[1], empty, fds[0], empty, flags) == -1 {
                return Err(Fallback::No(fail));
            }
            if remount {
                let mut buf = [0u8; 32];
                let attached = fd_path(&mut buf, fds[1]);
                let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                let none = std::ptr::null::<c_char>();
                if libc::mount(none, attached, none, ro, std::ptr::null()) == -1 {
                    return Err(Fallback::No(fail));
                }
            }
            Ok(())
        };
        steps(&mut fds)
    };
    // SAFETY: errno of this thread, and close of descriptors opened above.
    unsafe {
        let errno = *libc::__errno_location();
        for fd in fds {
            if fd >= 0 {
                libc::close(fd);
            }
        }
        *libc::__errno_location() = errno;
    }
    result
}

/// `/proc/self/fd/N` for `fd`, NUL-terminated in `buf`, without
/// allocating (the child may not).
fn fd_path(buf: &mut [u8; 32], fd: c_int) -> *const c_char {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (fd.max(0) as u32, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for k in 0..len {
        buf[PREFIX.len() + k] = digits[len - 1 - k];
    }
    buf[PREFIX.len() + len] = 0;
    buf.as_ptr().cast()
}

/// Every mount of the namespace read-only, but the writable roots: each
/// root is re-opened here (openat2(2) with `RESOLVE_NO_SYMLINKS`, checked
/// to be the (device, inode) the parent opened, so a root swapped since
/// fails the run) and cloned with its submounts as they are
/// (open_tree(2), `OPEN_TREE_CLONE | AT_RECURSIVE`); then the whole tree is
/// made read-only (mount_setattr(2), `MOUNT_ATTR_RDONLY`, `AT_RECURSIVE`:
/// Linux 5.12); then each clone, made `MOUNT_ATTR_NODEV` with its
/// submounts, is attached over its root (move_mount(2)).
///
/// What it relies on from the kernel: a read-only mount refuses every
/// change to the inodes reached through it with EROFS, whoever asks and
/// with whatever capability: writing, creating, removing, renaming,
/// truncating, and each metadata change (chmod, chown, utimes, xattrs:
/// they all take `mnt_want_write`, fs/namespace.c); an open descriptor
/// keeps the mount it was opened through, so every descriptor the command
/// opens from here on is bound by it. Device files stay usable (their
/// writes go to the driver, not the file system), but for those under a
/// writable root: a `nodev` mount refuses to open any device file with
/// EACCES (fs/namei.c, `may_open_dev`).
///
/// # Safety
/// Only in the child, in its new mount namespace, between clone and
/// execve.
unsafe fn read_only_tree(m: &ChildMounts) -> Result<(), Step> {
    let n = m.root_count.min(MAX_TREE_ROOTS);
    // (re-opened root, its clone); -1 when not open. Every descriptor
    // opened here is closed before returning, also on failure: with a
    // gate the table is the parent's.
    let mut fds = [[-1 as c_int; 2]; MAX_TREE_ROOTS];
    // SAFETY: openat2, fstat, open_tree, mount_setattr and move_mount with
    // the parent's C strings, structs on this stack, and descriptors
    // opened here.
    let steps = |fds: &mut [[c_int; 2]]| -> Result<(), Step> {
        unsafe {
            for (i, pair) in fds.iter_mut().enumerate() {
                let r = &*m.roots.add(i);
                let how = OpenHow {
                    flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                    mode: 0,
                    resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
                };
                let size = std::mem::size_of::<OpenHow>();
                let fd = libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, r.path, &how, size);
                if fd < 0 {
                    return Err(Step::WritableRoot);
                }
                pair[0] = fd as c_int;
                let mut st: libc::stat = std::mem::zeroed();
                if libc::fstat(pair[0], &mut st) == -1 {
                    return Err(Step::WritableRoot);
                }
                if st.st_dev != r.dev || st.st_ino != r.ino {
                    *libc::__errno_location() = libc::ESTALE;
                    return Err(Step::WritableRoot);
                }
                let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC | AT_RECURSIVE | libc::AT_EMPTY_PATH;
                let tree = libc::syscall(libc::SYS_open_tree, pair[0], c"".as_ptr(), flags);
                if tree < 0 {
                    return Err(Step::WritableRoot);
                }
                pair[1] = tree as c_int;
                // No device node is opened through a writable root: one
                // made before the run (a root-extracted rootfs in the
                // workspace, a bind of /dev) would otherwise reach its
                // driver for writing, which Landlock's write right allows.
                let flags = AT_RECURSIVE | libc::AT_EMPTY_PATH;
                if !mount_setattr(pair[1], c"".as_ptr(), flags, MOUNT_ATTR_NODEV) {
                    return Err(Step::WritableRoot);
                }
            }
            if !mount_setattr(
                libc::AT_FDCWD,
                c"/".as_ptr(),
                AT_RECURSIVE,
                MOUNT_ATTR_RDONLY,
            ) {
                return Err(Step::ReadOnlyTree);
            }
            for pair in fds.iter() {
                let flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
                let empty = c"".as_ptr();
                let rc = libc::syscall(libc::SYS_move_mount, pair[1], empty, pair[0], empty, flags);
                if rc == -1 {
                    return Err(Step::WritableRoot);
                }
            }
        }
        Ok(())
    };
    let result = steps(&mut fds[..n]);
    // SAFETY: errno of this thread, and close of descriptors opened above.
    unsafe {
        let errno = *libc::__errno_location();
        for fd in fds[..n].iter().flatten() {
            if *fd >= 0 {
                libc::close(*fd);
            }
        }
        *libc::__errno_location() = errno;
    }
    result
}

/// Each transaction's overlay attached over its writable root: the root
/// re-opened here as in [`read_only_tree`] (no symlink followed, the very
/// directory the parent opened, else ESTALE), then move_mount(2) of the
/// parent's detached mount onto it. Outermost first, so an inner root's
/// path is reached through the overlay of an outer one only when the
/// parent made it so. The parent's mount descriptors are not closed here
/// (with a gate the descriptor table is the parent's).
///
/// What it relies on from the kernel: move_mount(2) attaches a detached
/// mount (one fsmount(2) made) into the caller's mount namespace; a mount
/// over a directory hides what is beneath it from every path walk in the
/// namespace, so the command reaches the root's files only through the
/// overlay, whose writes land in the upper layer (overlayfs.rst).
///
/// # Safety
/// Only in the child, in its new mount namespace, between clone and
/// execve.
unsafe fn attach_overlays(m: &ChildMounts) -> Result<(), Step> {
    for i in 0..m.overlay_count {
        // SAFETY: the parent's array of `overlay_count` entries, C strings
        // and structs on this stack; the descriptor opened here is closed
        // before the next one.
        unsafe {
            let o = &*m.overlays.add(i);
            let how = OpenHow {
                flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
                mode: 0,
                resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
            };
            let size = std::mem::size_of::<OpenHow>();
            let fd = libc::syscall(libc::SYS_openat2, libc::AT_FDCWD, o.path, &how, size);
            if fd < 0 {
                return Err(Step::Overlay);
            }
            let fd = fd as c_int;
            let mut st: libc::stat = std::mem::zeroed();
            let same = libc::fstat(fd, &mut st) == 0 && st.st_dev == o.dev && st.st_ino == o.ino;
            let flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH;
            let empty = c"".as_ptr();
            let rc = if same {
                libc::syscall(libc::SYS_move_mount, o.mount_fd, empty, fd, empty, flags)
            } else {
                *libc::__errno_location() = libc::ESTALE;
                -1
            };
            let errno = *libc::__errno_location();
            libc::close(fd);
            if rc == -1 {
                *libc::__errno_location() = errno;
                return Err(Step::Overlay);
            }
        }
    }
    Ok(())
}

/// Under `-i` with a read-only tree: `/dev/pts` shows the command's own
/// terminal only, so that it can neither read nor write another terminal
/// of the user's (reads are allowed everywhere else): a small tmpfs over
/// `/dev/pts` holding one empty file, the terminal's node bind-mounted on
/// it (taken with `O_PATH` before the tmpfs hid it). A terminal outside
/// `/dev/pts` (a console) is left as it is.
///
/// # Safety
/// Only in the child, in its new mount namespace, between clone and
/// execve; `m.tty` is a C string.
unsafe fn own_terminal_only(m: &ChildMounts) -> Result<(), Step> {
    // SAFETY: open, mount and close with the parent's C string and literals.
    unsafe {
        let prefix = b"/dev/pts/";
        let path = std::ffi::CStr::from_ptr(m.tty).to_bytes();
        if !path.starts_with(prefix) || path[prefix.len()..].contains(&b'/') {
            return Ok(());
        }
        let node = libc::open(m.tty, libc::O_PATH | libc::O_CLOEXEC);
        if node < 0 {
            return Err(Step::Terminal);
        }
        let none = std::ptr::null::<c_char>();
        let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
        let done = libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            c"mode=0755,size=16k".as_ptr().cast(),
        ) == 0
            && {
                let fd = libc::open(
                    m.tty,
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o600,
                );
                fd >= 0 && libc::close(fd) == 0
            }
            && {
                let mut buf = [0u8; 32];
                let source = fd_path(&mut buf, node);
                libc::mount(source, m.tty, none, libc::MS_BIND, std::ptr::null()) == 0
            };
        let errno = *libc::__errno_location();
        libc::close(node);
        if !done {
            *libc::__errno_location() = errno;
            return Err(Step::Terminal);
        }
    }
    Ok(())
}

/// The mount namespace (needs CAP_SYS_ADMIN, so before the capabilities
/// go; and before Landlock, which forbids changing mounts): a new
/// namespace; with a read-only tree, its mounts private (mount changes on
/// the host do not arrive: a mount appearing mid-run would be writable),
/// otherwise slaves of the host's (host changes still arrive, ours never
/// leave: mount_namespaces(7)); the read-only tree ([`read_only_tree`]);
/// each protected path bind-mounted over itself, outermost first,
/// read-only where asked (remounting the bind); a new devpts instance; a
/// fresh proc.
///
/// Each protected or hidden path is opened here and compared with the
/// file the parent found there, and the mount is made on that descriptor
/// ([`pinned_mount`]): a path swapped meanwhile by someone outside the run
/// (a symlink to elsewhere) fails the step instead of binding one file
/// over another or leaving the protected one writable.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn enter_mount_namespace(c: &ChildConfine) -> Result<(), Step> {
    let m = &c.mounts;
    if !m.enabled {
        return Ok(());
    }
    let none = std::ptr::null::<c_char>();
    // SAFETY: unshare and mount with the parent's C strings and literals.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) == -1 {
            return Err(Step::MountNamespace);
        }
        let root = c"/".as_ptr();
        let propagation = if m.read_only_tree {
            libc::MS_PRIVATE
        } else {
            libc::MS_SLAVE
        };
        if libc::mount(
            none,
            root,
            none,
            libc::MS_REC | propagation,
            std::ptr::null(),
        ) == -1
        {
            return Err(Step::MountNamespace);
        }
        if m.read_only_tree {
            read_only_tree(m)?;
            attach_overlays(m)?;
        }
        for i in 0..m.bind_count {
            let b = &*m.binds.add(i);
            match pinned_mount(b) {
                Ok(()) | Err(Fallback::Gone) => continue,
                Err(Fallback::No(step)) => return Err(step),
                // A kernel before open_tree(2) (5.2): by path, as the
                // parent named it (see the function's documentation).
                Err(Fallback::ByPath) => {}
            }
            if b.hide {
                // An entry of the read deny list: hidden under a mount
                // (which also keeps it from being renamed, EBUSY, or
                // hard-linked, EXDEV).
                let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
                let hidden = if b.hide_dir {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        b.path,
                        c"tmpfs".as_ptr(),
                        flags,
                        c"size=4k,mode=0500".as_ptr().cast(),
                    ) == 0
                } else {
                    let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                    libc::mount(
                        c"/dev/null".as_ptr(),
                        b.path,
                        none,
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) == 0
                        && libc::mount(none, b.path, none, ro, std::ptr::null()) == 0
                };
                if !hidden {
                    return Err(Step::HideMount);
                }
                continue;
            }
            if libc::mount(
                b.path,
                b.path,
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) == -1
            {
                return Err(Step::BindMount);
            }
            let ro = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
            if b.read_only && libc::mount(none, b.path, none, ro, std::ptr::null()) == -1 {
                return Err(Step::BindMount);
            }
        }
        if !m.tty.is_null() {
            own_terminal_only(m)?;
        }
        if m.shm_access != 0 {
            // POSIX shared memory and semaphores (Python's multiprocessing)
            // live here: the command's own, none of the host's. A system
            // without /dev/shm gets none.
            let shm = c"/dev/shm".as_ptr();
            let flags = libc::MS_NOSUID | libc::MS_NODEV;
            let opts = c"mode=1777";
            if libc::mount(
                c"tmpfs".as_ptr(),
                shm,
                c"tmpfs".as_ptr(),
                flags,
                opts.as_ptr().cast(),
            ) == 0
            {
                if c.ruleset_fd >= 0 {
                    grant(c.ruleset_fd, b"/dev/shm\0", m.shm_access)?;
                }
            } else if *libc::__errno_location() != libc::ENOENT {
                return Err(Step::ShmMount);
            }
        }
        if m.private_devpts {
            let pts = c"/dev/pts".as_ptr();
            let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
            let opts = c"newinstance,ptmxmode=0666,mode=0620";
            if libc::mount(
                c"devpts".as_ptr(),
                pts,
                c"devpts".as_ptr(),
                flags,
                opts.as_ptr().cast(),
            ) == -1
            {
                return Err(Step::Devpts);
            }
            let ptmx = c"/dev/ptmx".as_ptr();
            if libc::mount(
                c"/dev/pts/ptmx".as_ptr(),
                ptmx,
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) == -1
            {
                return Err(Step::Devpts);
            }
            if c.ruleset_fd >= 0 {
                grant(c.ruleset_fd, b"/dev/pts\0", m.pts_access)?;
                grant(c.ruleset_fd, b"/dev/ptmx\0", m.pts_access)?;
            }
        }
        if m.fresh_proc {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                flags,
                std::ptr::null(),
            ) == -1
            {
                return Err(Step::ProcMount);
            }
        }
    }
    Ok(())
}

/// Step 4: no-new-privileges (prctl(2); required before an unprivileged
/// seccomp filter, and keeps setuid binaries from regaining anything),
/// capabilities dropped in confining modes, landlock_restrict_self(2) with
/// the parent's ruleset, then each seccomp filter (seccomp(2)), last, so
/// the filters never see the setup's own calls.
///
/// # Safety
/// Only in the child between clone and execve; the filters point into the
/// parent's memory, alive while it is suspended.
unsafe fn confine(a: &ChildArgs) -> Result<(), Step> {
    let c = &a.confine;
    if !c.enabled {
        return Ok(());
    }
    // SAFETY: prctl, landlock_restrict_self and seccomp with integer
    // arguments and pointers to the parent's filter programs.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) == -1 {
            return Err(Step::NoNewPrivs);
        }
        enter_mount_namespace(c)?;
        if c.drop_capabilities {
            drop_capabilities(c)?;
        }
        if c.ruleset_fd >= 0
            && libc::syscall(libc::SYS_landlock_restrict_self, c.ruleset_fd, 0) == -1
        {
            return Err(Step::Landlock);
        }
        for filter in &c.filters[..c.filter_count] {
            let mode = libc::SECCOMP_MODE_FILTER as libc::c_ulong;
            let prog = filter as *const libc::sock_fprog as libc::c_ulong;
            if libc::prctl(libc::PR_SET_SECCOMP, mode, prog, 0, 0) == -1 {
                return Err(Step::Seccomp);
            }
        }
        if c.gate.len > 0 {
            load_gate(a)?;
        }
    }
    Ok(())
}

/// Step 4, last: the gate's filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER`
/// (seccomp(2), Linux 5.0), whose listener lands in the descriptor table
/// shared with the parent; then a private table, in which the listener is
/// closed. From here on the gated calls block until the parent answers, so
/// the child makes none of them before execve.
///
/// # Safety
/// Only in a child cloned with `CLONE_FILES`, between clone and execve.
unsafe fn load_gate(a: &ChildArgs) -> Result<(), Step> {
    let prog = &a.confine.gate as *const libc::sock_fprog;
    // SAFETY: seccomp with the parent's program; unshare and close on this
    // child's own descriptor table once it is private.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            prog,
        );
        if fd < 0 {
            return Err(Step::Gate);
        }
        a.listener.store(fd as c_int, Ordering::SeqCst);
        if libc::unshare(libc::CLONE_FILES) == -1 {
            return Err(Step::UnshareFiles);
        }
        libc::close(fd as c_int);
    }
    Ok(())
}

/// Step 7a: only the installed descriptors reach the program: everything
/// this process inherited without close-on-exec is closed (close_range(2),
/// Linux 5.9; older kernels keep them).
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn close_others(a: &ChildArgs) {
    // SAFETY: closes descriptors of the child's own table (private: cloned
    // without CLONE_FILES, or unshared after the gate).
    unsafe {
        libc::syscall(libc::SYS_close_range, a.fd_count as u32, u32::MAX, 0u32);
    }
}

/// Step 7b: an empty signal mask for the program (the parent blocked all
/// signals around the clone).
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn clear_signal_mask() -> Result<(), Step> {
    // SAFETY: a sigset_t on this stack, emptied before use.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) == -1 {
            return Err(Step::Sigmask);
        }
    }
    Ok(())
}

/// The steps in order; returns only when one failed.
///
/// # Safety
/// Only in the child between clone and execve.
unsafe fn setup_and_exec(a: &ChildArgs) -> Step {
    // SAFETY: each step is called in the child, in the documented order.
    unsafe {
        reset_signal_dispositions(a);
        let steps = join_cgroups(a)
            .and_then(|()| enter_session(a))
            .and_then(|()| set_parent_death_signal(a))
            .and_then(|()| confine(a))
            .and_then(|()| reopen_terminal(a))
            .and_then(|()| change_dir(a))
            .and_then(|()| limit_file_size(a))
            .and_then(|()| limit_cpu(a))
            .and_then(|()| install_fds(a));
        if let Err(step) = steps {
            return step;
        }
        close_others(a);
        if let Err(step) = clear_signal_mask() {
            return step;
        }
        libc::execve(a.path, a.argv, a.envp);
    }
    Step::Exec
}

/// The entry point clone(2) runs in the child; `arg` is the parent's
/// [`ChildArgs`].
pub(crate) extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` points to the parent's ChildArgs, alive and unchanged
    // while the parent is suspended by CLONE_VFORK.
    let a = unsafe { &*(arg as *const ChildArgs) };
    // SAFETY: this is the child between clone and execve.
    unsafe {
        let step = setup_and_exec(a);
        fail(a, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptors_proc_path_is_spelled_without_allocating() {
        for (fd, want) in [
            (0, &b"/proc/self/fd/0\0"[..]),
            (7, b"/proc/self/fd/7\0"),
            (1234567890, b"/proc/self/fd/1234567890\0"),
        ] {
            let mut buf = [0u8; 32];
            let p = fd_path(&mut buf, fd);
            // SAFETY: fd_path NUL-terminates inside buf.
            let got = unsafe { std::ffi::CStr::from_ptr(p) };
            assert_eq!(got.to_bytes_with_nul(), want);
        }
    }
}
