//! The process-tree sweep: every process a run started, also those that left
//! its process group (`setsid`, double fork).
//!
//! `killpg` reaches only the command's process group. A descendant that
//! called setsid(2) has left it, and one whose parent died is reparented,
//! normally to init, where no ancestry leads back to the run. With
//! [`become_subreaper`] (prctl(2), `PR_SET_CHILD_SUBREAPER`) such orphans are
//! reparented to this process instead, so the run's tree is exactly this
//! process's descendants, minus the children it already had before the run
//! ([`Tree::before_spawn`]) and their descendants.
//!
//! The tree is read from `/proc/PID/task/TID/children` (proc(5)), a walk over
//! the run's processes only. A process is signalled through a pidfd
//! (pidfd_open(2), pidfd_send_signal(2)) after checking that the pid still
//! names the process that was seen (same start time): a pid that was reused
//! meanwhile is never signalled.
//!
//! Within one process that runs several executions at once, each run's
//! sweep also covers the others' processes started after it; the `dsh-exec`
//! binary runs one.

use std::collections::HashSet;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use nix::libc;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::phases::Processes;
use crate::result::Signal as SignalName;

/// Makes orphaned descendants of this process its children rather than
/// init's, so the sweep can find them. Process-wide; the binary calls it at
/// start-up.
pub(crate) fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// One process as seen by a walk: its pid and start time (clock ticks since
/// boot, field 22 of proc_pid_stat(5)), which together name it uniquely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The process id.
    pub(crate) pid: i32,
    /// Its start time, in clock ticks since boot.
    pub(crate) start_time: u64,
    /// Its process group when seen.
    pub(crate) pgrp: i32,
}

/// `(state, start_time)` of a process, from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    stat_full(pid).map(|(state, _, start)| (state, start))
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since
/// boot) when it runs and is not a zombie: with the pid, it names the
/// process uniquely.
pub(crate) fn live_start_time(pid: i32) -> Option<u64> {
    match stat_full(pid)? {
        ('Z' | 'X', _, _) => None,
        (_, _, start) => Some(start),
    }
}

/// `(state, process group, start_time)` of a process, from `/proc/PID/stat`.
fn stat_full(pid: i32) -> Option<(char, i32, u64)> {
    let mut buf = Vec::with_capacity(512);
    if !read_proc(&format!("/proc/{pid}/stat"), &mut buf) {
        return None;
    }
    let text = std::str::from_utf8(&buf[buf.iter().rposition(|&b| b == b')')? + 1..]).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split
    // after its last ')'. Then field 3 is the state, field 5 the process
    // group, field 22 the start time.
    let mut fields = text.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    let start_time = fields.nth(16)?.parse().ok()?;
    Some((state, pgrp, start_time))
}

/// Reads a whole file of `/proc` into `out` with read(2) alone: std's
/// `read_to_end` first asks fstat(2) for a size, which proc files report as
/// 0, a system call per read for nothing on the sweep's hot path. False
/// when the file cannot be opened or read (the process is gone).
fn read_proc(path: &str, out: &mut Vec<u8>) -> bool {
    use std::io::Read;
    out.clear();
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut chunk = [0u8; 512];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The children of every thread of `pid`.
fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut list = Vec::with_capacity(512);
    for task in tasks.flatten() {
        let tid = task.file_name();
        let path = format!("/proc/{pid}/task/{}/children", tid.to_string_lossy());
        if read_proc(&path, &mut list) {
            out.extend(
                list.split(|b| b.is_ascii_whitespace())
                    .filter_map(|p| std::str::from_utf8(p).ok()?.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The most walks [`Tree::freeze`] makes (a fork bomb faster than the
/// walk is bounded by the limits, not by this).
const FREEZE_PASSES: usize = 1000;

/// The run's process tree, rooted at this process.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    root: i32,
    preexisting: HashSet<i32>,
}

impl Tree {
    /// Records this process's children before the command is spawned: they
    /// and their descendants are never swept or reaped.
    pub(crate) fn before_spawn() -> Tree {
        let root = std::process::id() as i32;
        Tree {
            root,
            preexisting: children(root).into_iter().collect(),
        }
    }

    /// The run's processes that are alive (not zombies), found by a walk.
    pub(crate) fn live(&self) -> Vec<Seen> {
        let mut found = Vec::new();
        let mut queue: Vec<i32> = children(self.root)
            .into_iter()
            .filter(|p| !self.preexisting.contains(p))
            .collect();
        let mut visited = HashSet::new();
        while let Some(pid) = queue.pop() {
            if !visited.insert(pid) {
                continue;
            }
            let Some((state, pgrp, start_time)) = stat_full(pid) else {
                continue;
            };
            if state != 'Z' && state != 'X' {
                found.push(Seen {
                    pid,
                    start_time,
                    pgrp,
                });
            }
            queue.extend(children(pid));
        }
        found
    }

    /// Stops the whole tree (SIGSTOP to every process found, walk again,
    /// until two walks in a row find nothing new) and returns the stopped
    /// processes. A stopped process cannot fork, so this converges even on
    /// a "hopper" that forks, lets its parent exit and does so again: such
    /// a process is between two places for a moment, and a single walk can
    /// miss it; the next walk finds it reparented here (we are its
    /// subreaper), and stops it. At most [`FREEZE_PASSES`] walks.
    pub(crate) fn freeze(&self) -> Vec<Seen> {
        let mut frozen: Vec<Seen> = Vec::new();
        let mut quiet = 0;
        for _ in 0..FREEZE_PASSES {
            let new: Vec<Seen> = self
                .live()
                .into_iter()
                .filter(|p| !frozen.contains(p))
                .collect();
            if new.is_empty() {
                quiet += 1;
                if quiet == 2 {
                    break;
                }
                continue;
            }
            quiet = 0;
            frozen.extend(new.into_iter().filter(|p| signal_one(*p, Signal::SIGSTOP)));
        }
        frozen
    }

    /// True when two walks in a row find no process: one walk can miss a
    /// process that is being reparented (see [`Tree::freeze`]).
    pub(crate) fn is_empty(&self) -> bool {
        self.live().is_empty() && self.live().is_empty()
    }

    /// Sends `sig` to each process that is still the one seen. Returns how
    /// many were signalled.
    pub(crate) fn signal(&self, procs: &[Seen], sig: Signal) -> usize {
        procs.iter().filter(|p| signal_one(**p, sig)).count()
    }

    /// CPU time of the run's processes, in clock ticks (sysconf
    /// `_SC_CLK_TCK`): utime + stime + cutime + cstime (fields 14 to 17 of
    /// proc_pid_stat(5)) of every process of the tree, zombies included.
    /// A process reaped by a parent in the tree is in that parent's
    /// cutime/cstime; one reaped here is in this process's
    /// `RUSAGE_CHILDREN`, which the caller adds. The children of a process
    /// that ignores SIGCHLD are counted nowhere once reaped.
    pub(crate) fn cpu_ticks(&self) -> u64 {
        let mut total = 0u64;
        let mut queue: Vec<i32> = children(self.root)
            .into_iter()
            .filter(|p| !self.preexisting.contains(p))
            .collect();
        let mut visited = HashSet::new();
        let mut buf = Vec::with_capacity(512);
        while let Some(pid) = queue.pop() {
            if !visited.insert(pid) {
                continue;
            }
            if read_proc(&format!("/proc/{pid}/stat"), &mut buf)
                && let Some(at) = buf.iter().rposition(|&b| b == b')')
                && let Ok(text) = std::str::from_utf8(&buf[at + 1..])
            {
                // After the name: field 3 is the state; 14..=17 the times.
                total += text
                    .split_ascii_whitespace()
                    .skip(11)
                    .take(4)
                    .filter_map(|f| f.parse::<u64>().ok())
                    .sum::<u64>();
            }
            queue.extend(children(pid));
        }
        total
    }

    /// Reaps the run's children that have exited (orphans reparented here),
    /// except `keep` (the direct child, reaped last by its owner). Only
    /// named pids are waited for, never "any child".
    pub(crate) fn reap_orphans(&self, keep: i32) {
        for pid in children(self.root) {
            if pid != keep && !self.preexisting.contains(&pid) {
                let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

/// Signals `p` through a pidfd, if its pid still names the process seen and
/// its command line (`/proc/PID/cmdline`, read once the pidfd pins it)
/// passes `check`.
pub(crate) fn signal_verified(p: Seen, sig: Signal, check: impl Fn(&[u8]) -> bool) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is a fresh descriptor that we own from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let same = stat(p.pid).is_some_and(|(_, t)| t == p.start_time)
        && std::fs::read(format!("/proc/{}/cmdline", p.pid)).is_ok_and(|c| check(&c));
    // The pidfd still names the process checked: a reused pid would have
    // another start time, and the pidfd would not follow it.
    same && send_through(&fd, sig)
}

fn send_through(fd: &OwnedFd, sig: Signal) -> bool {
    // SAFETY: plain system call on a descriptor we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            std::os::fd::AsRawFd::as_raw_fd(fd),
            sig as i32,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

/// Signals `p` through a pidfd, if its pid still names the process seen.
pub(crate) fn signal_one(p: Seen, sig: Signal) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p.pid, 0) };
    if fd < 0 {
        // No pidfd support (Linux < 5.3): fall back to kill(2) after the
        // same identity check; the window for pid reuse is then tiny.
        return stat(p.pid).is_some_and(|(_, t)| t == p.start_time)
            && nix::sys::signal::kill(Pid::from_raw(p.pid), sig).is_ok();
    }
    // SAFETY: `fd` is a fresh descriptor that we own from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // The pidfd pins the process: if the start time still matches now, the
    // signal reaches the process that was seen, even if it exits meanwhile.
    if stat(p.pid).is_none_or(|(_, t)| t != p.start_time) {
        return false;
    }
    send_through(&fd, sig)
}

/// How the direct child ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(SignalName),
}

/// How `pid` ended, if it has, leaving it a zombie (waitid(2) with
/// `WEXITED | WNOHANG | WNOWAIT`). Read from the raw `siginfo_t`, so that a
/// death by any signal, real-time ones included, is understood.
fn exited_status(pid: Pid) -> io::Result<Option<Exit>> {
    // SAFETY: waitid fills the zeroed siginfo_t we own.
    let info = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid.as_raw() as libc::id_t, &mut info, flags) == -1 {
            return Err(io::Error::last_os_error());
        }
        info
    };
    // SAFETY: the fields of a SIGCHLD siginfo_t filled by waitid.
    let (si_pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if si_pid == 0 {
        return Ok(None);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => Some(Exit::Code(status)),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(Exit::Signal(SignalName::from_number(status))),
        _ => None,
    })
}

/// Makes this process's group the terminal's foreground group again after
/// an interactive run. From a background group tcsetpgrp(3) raises SIGTTOU,
/// which is blocked around the call.
fn take_back_terminal() {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok() {
        let _ = nix::unistd::tcsetpgrp(io::stdin(), nix::unistd::getpgrp());
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
}

/// The command's processes: the direct child (`bash`, the leader of its
/// process group) and the tree it starts.
///
/// The direct child's exit is observed with `waitid(WNOWAIT)`, which leaves
/// it a zombie until [`CommandProcs::release`]: its pid, and so the
/// process-group id, cannot be reused by an unrelated process while
/// `dsh-exec` may still signal the group (kill(2), waitid(2)).
pub(crate) struct CommandProcs {
    pid: Pid,
    tree: Tree,
    exit: Option<Exit>,
    reaped: bool,
    /// The command has the terminal (its process group is the foreground one).
    interactive: bool,
    /// The first signal of the escalation (`--signal`; SIGTERM).
    first: Signal,
    /// The run's v2 cgroup, whose `cgroup.kill` ends the whole tree.
    cgroup: Option<std::path::PathBuf>,
}

impl CommandProcs {
    /// The processes of the command started as `pid`; `tree` was recorded
    /// before the spawn.
    pub(crate) fn new(pid: i32, tree: Tree, interactive: bool) -> CommandProcs {
        CommandProcs {
            pid: Pid::from_raw(pid),
            tree,
            exit: None,
            reaped: false,
            interactive,
            first: Signal::SIGTERM,
            cgroup: None,
        }
    }

    /// The same, with the run's v2 cgroup, whose `cgroup.kill` (Linux
    /// 5.14) SIGKILLs every process in it at once, forks in flight
    /// included, before the sweep.
    pub(crate) fn in_cgroup(mut self, dir: Option<std::path::PathBuf>) -> CommandProcs {
        self.cgroup = dir;
        self
    }

    /// The run's tree.
    pub(crate) fn tree(&self) -> &Tree {
        &self.tree
    }

    fn kill_cgroup(&self) {
        if let Some(dir) = &self.cgroup {
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        }
    }

    /// The same, with `first` as the escalation's first signal (a
    /// signal nix does not name stays SIGTERM).
    pub(crate) fn first_signal(mut self, first: crate::result::Signal) -> CommandProcs {
        if let Ok(sig) = Signal::try_from(first.number()) {
            self.first = sig;
        }
        self
    }

    /// The direct child's pid, also its process-group id.
    pub(crate) fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// How the direct child ended, once it has.
    pub(crate) fn exit(&self) -> Option<Exit> {
        self.exit
    }

    /// Reads the direct child's status if it changed (after SIGCHLD, or a
    /// change that predates the signal registration), and reaps exited
    /// orphans.
    ///
    /// Errors when waitid(2) fails: the outcome can no longer be known.
    pub(crate) fn poll_exit(&mut self) -> io::Result<()> {
        if self.exit.is_none() {
            self.exit = exited_status(self.pid)?;
        }
        self.tree.reap_orphans(self.pid.as_raw());
        Ok(())
    }

    /// Kills whatever is left (nothing, after a finished run), reaps the
    /// orphans and then the direct child, once. While the direct child is
    /// unreaped its pid cannot be reused, so the group id still names ours.
    pub(crate) fn release(&mut self, finished: bool) {
        if self.reaped {
            return;
        }
        let _ = killpg(self.pid, Signal::SIGKILL);
        if !finished {
            self.kill_cgroup();
            // Dropped mid-run: a finished run has just found its tree empty.
            self.tree.signal(&self.tree.live(), Signal::SIGKILL);
        }
        self.tree.reap_orphans(self.pid.as_raw());
        let _ = waitpid(self.pid, None);
        self.reaped = true;
        if self.interactive {
            take_back_terminal();
        }
    }
}

impl Processes for CommandProcs {
    fn exited(&self) -> bool {
        self.exit.is_some()
    }

    fn all_gone(&mut self) -> bool {
        self.tree.is_empty()
    }

    /// SIGTERM to the group and to every process of the tree outside it,
    /// with the tree stopped meanwhile, so that none is missed; then SIGCONT
    /// to all, so that each sees it (and a process that was stopped before
    /// does too). Members of the group get it from killpg only, one SIGTERM
    /// each (a second could run a TERM trap twice).
    fn terminate(&mut self) {
        let frozen = self.tree.freeze();
        let _ = killpg(self.pid, self.first);
        let outside: Vec<_> = frozen
            .iter()
            .copied()
            .filter(|p| p.pgrp != self.pid.as_raw())
            .collect();
        self.tree.signal(&outside, self.first);
        let _ = killpg(self.pid, Signal::SIGCONT);
        self.tree.signal(&frozen, Signal::SIGCONT);
    }

    /// SIGKILL to the group and to every process of the tree, stopped first
    /// so that none is missed (again on each poll while killing).
    fn kill(&mut self) {
        self.kill_cgroup();
        let frozen = self.tree.freeze();
        let _ = killpg(self.pid, Signal::SIGKILL);
        self.tree.signal(&frozen, Signal::SIGKILL);
    }
}

impl Drop for CommandProcs {
    /// A run dropped before its end (a cancelled future) still kills the
    /// group and reaps the child: nothing is left running.
    fn drop(&mut self) {
        self.release(false);
    }
}
