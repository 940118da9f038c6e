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

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::sys::pidfd;
use crate::sys::procfs::{self, children};

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

/// The start time of `pid`, whatever its state.
fn start_time(pid: i32) -> Option<u64> {
    procfs::stat(&pid.to_string()).map(|s| s.start_time)
}

/// The owner named in `NS-PID-START-REST`, the names of what a
/// `dsh-exec` leaves behind if it is killed (run cgroups, CA directories):
/// its PID namespace's inode, its pid and its start time ([`live_start_time`]);
/// `None` when `name` is not such a name.
pub(crate) fn owner_in_name(name: &str) -> Option<(u64, i32, u64)> {
    let mut parts = name.split('-');
    let (Some(Ok(ns)), Some(Ok(pid)), Some(Ok(start)), Some(_)) = (
        parts.next().map(str::parse::<u64>),
        parts.next().map(str::parse::<i32>),
        parts.next().map(str::parse::<u64>),
        parts.next(),
    ) else {
        return None;
    };
    Some((ns, pid, start))
}

/// The inode of this process's PID namespace (`/proc/self/ns/pid`,
/// pid_namespaces(7)), or 0 when it cannot be read: what names the
/// namespace in which a pid recorded in a name means something.
pub(crate) fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since
/// boot) when it runs and is not a zombie: with the pid, it names the
/// process uniquely.
pub(crate) fn live_start_time(pid: i32) -> Option<u64> {
    procfs::stat(&pid.to_string())
        .filter(|s| !s.is_dead())
        .map(|s| s.start_time)
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

    /// Walks the run's processes, each once: `visit` gets each pid and its
    /// `stat`. A process gone by the time its `stat` is read is skipped,
    /// and so are its children (they are reparented here, and found from
    /// the root on the next walk).
    fn walk(&self, mut visit: impl FnMut(i32, &procfs::Stat)) {
        let mut queue: Vec<i32> = children(self.root)
            .into_iter()
            .filter(|p| !self.preexisting.contains(p))
            .collect();
        let mut visited = HashSet::new();
        while let Some(pid) = queue.pop() {
            if !visited.insert(pid) {
                continue;
            }
            let Some(stat) = procfs::stat(&pid.to_string()) else {
                continue;
            };
            visit(pid, &stat);
            queue.extend(children(pid));
        }
    }

    /// The run's processes that are alive (not zombies), found by a walk.
    pub(crate) fn live(&self) -> Vec<Seen> {
        let mut found = Vec::new();
        self.walk(|pid, stat| {
            if !stat.is_dead() {
                found.push(Seen {
                    pid,
                    start_time: stat.start_time,
                    pgrp: stat.pgrp,
                });
            }
        });
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
        self.walk(|_, stat| total += stat.cpu_ticks);
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

/// Whether a live process of `tree` has one of the sockets `inodes` open
/// (`/proc/PID/fd/N` reading `socket:[INODE]`, proc(5)).
pub(crate) fn tree_holds(tree: &Tree, inodes: &[u64]) -> bool {
    if inodes.is_empty() {
        return false;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    tree.live().iter().any(|p| {
        std::fs::read_dir(format!("/proc/{}/fd", p.pid))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .any(|link| wanted.iter().any(|w| link.as_os_str() == w.as_str()))
    })
}

/// For each of `links` (what readlink(2) of `/proc/self/fd/N` gives for
/// a file this process holds; empty for none), whether a live process of
/// `tree` holds it too: one of its threads' descriptors reads the same
/// (`/proc/PID/task/TID/fd/N`, proc(5); every thread's table, since a
/// thread group whose leader has exited shows none under `/proc/PID/fd`).
/// Only links are read, never the files: a stat(2) of a descriptor on a
/// file system that does not answer (a stalled FUSE or NFS mount) would
/// hang the caller.
pub(crate) fn tree_holds_links(tree: &Tree, links: &[std::path::PathBuf]) -> Vec<bool> {
    let mut held = vec![false; links.len()];
    let done = |held: &[bool]| {
        held.iter()
            .zip(links)
            .all(|(h, l)| *h || l.as_os_str().is_empty())
    };
    // Every process of the tree, zombies too: a thread group whose leader
    // has exited reads as a zombie while its other threads run on.
    let mut pids = Vec::new();
    tree.walk(|pid, _| pids.push(pid));
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(fds) = std::fs::read_dir(task.path().join("fd")) else {
                continue;
            };
            for e in fds.flatten() {
                if let Ok(target) = std::fs::read_link(e.path())
                    && let Some(i) = links
                        .iter()
                        .position(|l| !l.as_os_str().is_empty() && *l == target)
                {
                    held[i] = true;
                }
            }
            if done(&held) {
                return held;
            }
        }
    }
    held
}

/// Signals `p` through a pidfd, if its pid still names the process seen and
/// its command line (`/proc/PID/cmdline`, read once the pidfd pins it)
/// passes `check`.
pub(crate) fn signal_verified(p: Seen, sig: Signal, check: impl Fn(&[u8]) -> bool) -> bool {
    let Ok(fd) = pidfd::open(p.pid) else {
        return false;
    };
    let same = start_time(p.pid) == Some(p.start_time)
        && std::fs::read(format!("/proc/{}/cmdline", p.pid)).is_ok_and(|c| check(&c));
    // The pidfd still names the process checked: a reused pid would have
    // another start time, and the pidfd would not follow it.
    same && pidfd::send_signal(&fd, sig as i32)
}

/// Signals `p` through a pidfd, if its pid still names the process seen.
pub(crate) fn signal_one(p: Seen, sig: Signal) -> bool {
    let Ok(fd) = pidfd::open(p.pid) else {
        // No pidfd support (Linux < 5.3): fall back to kill(2) after the
        // same identity check; the window for pid reuse is then tiny.
        return start_time(p.pid) == Some(p.start_time)
            && nix::sys::signal::kill(Pid::from_raw(p.pid), sig).is_ok();
    };
    // The pidfd pins the process: if the start time still matches now, the
    // signal reaches the process that was seen, even if it exits meanwhile.
    start_time(p.pid) == Some(p.start_time) && pidfd::send_signal(&fd, sig as i32)
}
