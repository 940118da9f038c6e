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
use std::os::fd::{FromRawFd, OwnedFd};

use nix::libc;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// Makes orphaned descendants of this process its children rather than
/// init's, so the sweep can find them. Process-wide; the binary calls it at
/// start-up.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// One process as seen by a walk: its pid and start time (clock ticks since
/// boot, field 22 of proc_pid_stat(5)), which together name it uniquely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The process id.
    pub pid: i32,
    /// Its start time, in clock ticks since boot.
    pub start_time: u64,
    /// Its process group when seen.
    pub pgrp: i32,
}

/// `(state, start_time)` of a process, from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    stat_full(pid).map(|(state, _, start)| (state, start))
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since
/// boot) when it runs and is not a zombie: with the pid, it names the
/// process uniquely.
pub fn live_start_time(pid: i32) -> Option<u64> {
    match stat_full(pid)? {
        ('Z' | 'X', _, _) => None,
        (_, _, start) => Some(start),
    }
}

/// `(state, process group, start_time)` of a process, from `/proc/PID/stat`.
fn stat_full(pid: i32) -> Option<(char, i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split
    // after its last ')'. Then field 3 is the state, field 5 the process
    // group, field 22 the start time.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    let start_time = fields.nth(16)?.parse().ok()?;
    Some((state, pgrp, start_time))
}

/// The children of every thread of `pid`.
fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// The run's process tree, rooted at this process.
#[derive(Debug, Clone)]
pub struct Tree {
    root: i32,
    preexisting: HashSet<i32>,
}

impl Tree {
    /// Records this process's children before the command is spawned: they
    /// and their descendants are never swept or reaped.
    pub fn before_spawn() -> Tree {
        let root = std::process::id() as i32;
        Tree {
            root,
            preexisting: children(root).into_iter().collect(),
        }
    }

    /// The run's processes that are alive (not zombies), found by a walk.
    pub fn live(&self) -> Vec<Seen> {
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

    /// Sends `sig` to each process that is still the one seen. Returns how
    /// many were signalled.
    pub fn signal(&self, procs: &[Seen], sig: Signal) -> usize {
        procs.iter().filter(|p| signal_one(**p, sig)).count()
    }

    /// Reaps the run's children that have exited (orphans reparented here),
    /// except `keep` (the direct child, reaped last by its owner). Only
    /// named pids are waited for, never "any child".
    pub fn reap_orphans(&self, keep: i32) {
        for pid in children(self.root) {
            if pid != keep && !self.preexisting.contains(&pid) {
                let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

/// Signals `p` through a pidfd, if its pid still names the process seen.
pub fn signal_one(p: Seen, sig: Signal) -> bool {
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
    // SAFETY: plain system call on a descriptor we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            sig as i32,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}
