//! The command's processes: the direct child, whose exit is read without
//! reaping it, and the tree it starts (see [`crate::proctree`]), signalled
//! as the escalation asks.

use std::io;

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::phases::Processes;
use crate::proctree::Tree;
use crate::signal::Signal as SignalName;
use crate::sys::pidfd;

/// How the direct child ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(SignalName),
}

/// How `pid` ended, if it has, leaving it a zombie (see
/// [`pidfd::ended`]).
fn exited_status(pid: Pid) -> io::Result<Option<Exit>> {
    Ok(pidfd::ended(pid.as_raw())?.map(|e| match e {
        pidfd::Ended::Exited(code) => Exit::Code(code),
        pidfd::Ended::Killed(n) => Exit::Signal(SignalName::from_number(n)),
    }))
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
    /// Kills the group should this process die before the run ends
    /// ([`crate::sys::watchdog`]); stood down once the tree is gone.
    watchdog: Option<crate::sys::watchdog::Watchdog>,
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
            watchdog: None,
        }
    }

    /// The same, with the run's watchdog, armed with the group's id.
    pub(crate) fn watched(
        mut self,
        watchdog: Option<crate::sys::watchdog::Watchdog>,
    ) -> CommandProcs {
        if let Some(w) = &watchdog {
            w.arm(self.pid.as_raw());
        }
        self.watchdog = watchdog;
        self
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
    pub(crate) fn first_signal(mut self, first: SignalName) -> CommandProcs {
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
        if let Some(w) = self.watchdog.as_mut() {
            w.stand_down();
        }
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
