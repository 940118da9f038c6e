//! The phase machine of a run: when to drain, terminate, kill and stop.
//!
//! ```text
//! Running --child exits--> Draining --pipes close or DRAIN passes--> (leftovers?) Terminating
//!    |                                                                    |
//!    +--deadline or abort--> Terminating --all gone--> Done     grace passes or 2nd abort
//!                                                                         v
//!                                  Done <--pipes close or FINAL_READ passes-- Killed
//! ```
//!
//! The machine decides; it does not act on processes itself. It drives a
//! [`Processes`] (the real command's group and tree, or a fake child in the
//! tests below) and is handed the current time, so every transition can be
//! tested without processes and without sleeping.

use std::time::{Duration, Instant};

use crate::signal::Signal;

/// How long the pipes are still read after the direct child exited, for
/// output of processes it left behind (a `tee` in a process substitution),
/// before those are sent SIGTERM: 250 ms.
pub const DRAIN: Duration = Duration::from_millis(250);

/// How long the pipes are still read after SIGKILL was sent to the group, for
/// bytes already in the pipe buffers: 100 ms. A process that escaped the group
/// and still holds a pipe open cannot hold the run beyond this.
pub const FINAL_READ: Duration = Duration::from_millis(100);

/// How often the tree is re-read while waiting for it to die, since the
/// death of a grandchild sends no signal here: 20 ms.
pub const TREE_POLL: Duration = Duration::from_millis(20);

/// What the machine needs of the command's processes.
pub(crate) trait Processes {
    /// True once the direct child has exited (its status is known).
    fn exited(&self) -> bool;
    /// True when nothing of the run is alive any more.
    fn all_gone(&mut self) -> bool;
    /// SIGTERM (and SIGCONT) to the group and to every process of the tree.
    fn terminate(&mut self);
    /// SIGKILL to the group and to every process of the tree.
    fn kill(&mut self);
}

/// What cut the run short first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The deadline passed.
    Timeout,
    /// The idle deadline passed: no output for that long while the direct
    /// child ran.
    Idle,
    /// An abort was requested (a signal sent to `dsh-exec`).
    Abort(Signal),
    /// A resource limit was reached (CPU time used, or an OOM kill).
    Limit(crate::limits::LimitKind),
}

/// Where a run is in its life; each phase names the instant that ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The direct child runs.
    Running,
    /// The direct child exited: the pipes are read for leftovers' output
    /// until they close or `until` ([`DRAIN`]) passes.
    Draining { until: Instant },
    /// SIGTERM was sent to the group and the tree: SIGKILL follows at
    /// `kill_at` unless every process is gone first.
    Terminating { kill_at: Instant },
    /// SIGKILL was sent: the pipes are read for bytes already written until
    /// they close or `until` ([`FINAL_READ`]) passes.
    Killed { until: Instant },
    /// Nothing of the run is left; the result can be built.
    Done,
}

/// What the supervision loop must do after a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Effect {
    /// Nothing beyond what the machine did.
    None,
    /// Stop reading the pipes (keep what was read): a holder survived
    /// SIGKILL or escaped the sweep.
    StopReading,
}

/// The phase machine of one run.
#[derive(Debug, Clone)]
pub(crate) struct Phases {
    phase: Phase,
    cause: Option<Cause>,
    deadline: Option<Instant>,
    kill_after: Duration,
    /// `--idle-timeout`, and when output last came (or the run started).
    idle: Option<(Duration, Instant)>,
}

/// When the loop must wake up next: the end of the current phase, and the
/// next poll of the tree (while waiting for it to die).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wake {
    pub(crate) phase_end: Option<Instant>,
    pub(crate) poll: Option<Instant>,
}

impl Phases {
    /// A run that has just started; `deadline` is absolute, `kill_after`
    /// the grace period between SIGTERM and SIGKILL.
    pub(crate) fn new(deadline: Option<Instant>, kill_after: Duration) -> Phases {
        Phases {
            phase: Phase::Running,
            cause: None,
            deadline,
            kill_after,
            idle: None,
        }
    }

    /// The same with an idle deadline: `idle` of silence from `now` on
    /// (the start), counted again from each [`Phases::output`].
    pub(crate) fn with_idle(mut self, idle: Option<Duration>, now: Instant) -> Phases {
        self.idle = idle.map(|d| (d, now));
        self
    }

    /// Output came at `now`: the idle deadline starts again.
    pub(crate) fn output(&mut self, now: Instant) {
        if let Some((_, last)) = self.idle.as_mut() {
            *last = now;
        }
    }

    /// Whether a phase end at `now` could be the idle deadline's (the run
    /// goes on and its deadline, if any, has not passed): output already
    /// waiting in the pipes must be read before it is judged.
    pub(crate) fn idle_may_end(&self, now: Instant) -> bool {
        self.phase == Phase::Running && self.idle.is_some() && self.deadline.is_none_or(|d| now < d)
    }

    /// When the idle deadline passes, unless output comes first.
    fn idle_end(&self) -> Option<Instant> {
        self.idle.map(|(d, last)| last + d)
    }

    /// The current phase.
    #[cfg(test)]
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// What cut the run short first, if anything did.
    pub(crate) fn cause(&self) -> Option<Cause> {
        self.cause
    }

    /// True once nothing of the run is left.
    pub(crate) fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// When the loop must wake up next, at `now`.
    pub(crate) fn wake(&self, exited: bool, now: Instant) -> Wake {
        let (phase_end, poll) = match self.phase {
            Phase::Running => (
                match (self.deadline, self.idle_end()) {
                    (Some(d), Some(i)) => Some(d.min(i)),
                    (d, i) => d.or(i),
                },
                None,
            ),
            Phase::Draining { until } => (Some(until), None),
            Phase::Terminating { kill_at } => (Some(kill_at), Some(now + TREE_POLL)),
            // Without the direct child's exit there is nothing to cut
            // short: wait for it (SIGKILL cannot be caught).
            Phase::Killed { until } => (exited.then_some(until), Some(now + TREE_POLL)),
            Phase::Done => (None, None),
        };
        Wake { phase_end, poll }
    }

    /// The current phase's end instant has passed.
    pub(crate) fn phase_ended(&mut self, now: Instant, procs: &mut impl Processes) -> Effect {
        match self.phase {
            Phase::Running => {
                // The deadline first; the idle deadline only when no output
                // came since the wake-up was computed.
                if self.deadline.is_some_and(|d| now >= d) {
                    self.cause = Some(Cause::Timeout);
                } else if self.idle_end().is_some_and(|i| now >= i) {
                    self.cause = Some(Cause::Idle);
                } else {
                    return Effect::None;
                }
                self.terminate(now, procs);
            }
            Phase::Draining { .. } => self.terminate(now, procs),
            Phase::Terminating { .. } => self.kill(now, procs),
            Phase::Killed { .. } => {
                if procs.exited() {
                    self.phase = Phase::Done;
                    return Effect::StopReading;
                }
            }
            Phase::Done => {}
        }
        Effect::None
    }

    /// A poll tick while waiting for the tree to die: while killing, SIGKILL
    /// again what was forked while the first was on its way.
    pub(crate) fn poll(&mut self, procs: &mut impl Processes) {
        if matches!(self.phase, Phase::Killed { .. }) {
            procs.kill();
        }
    }

    /// An abort request: the first starts the escalation, a further one
    /// (during the drain or the grace period) sends SIGKILL at once.
    pub(crate) fn abort(&mut self, sig: Signal, now: Instant, procs: &mut impl Processes) {
        match self.phase {
            Phase::Running => {
                self.cause = Some(Cause::Abort(sig));
                self.terminate(now, procs);
            }
            Phase::Draining { .. } | Phase::Terminating { .. } => self.kill(now, procs),
            Phase::Killed { .. } | Phase::Done => {}
        }
    }

    /// A limit was reached: as the deadline while the direct child runs or
    /// its leftovers drain (SIGTERM, grace, SIGKILL), unless something
    /// else cut the run short first.
    pub(crate) fn exceeded(
        &mut self,
        kind: crate::limits::LimitKind,
        now: Instant,
        procs: &mut impl Processes,
    ) {
        if matches!(self.phase, Phase::Running | Phase::Draining { .. }) && self.cause.is_none() {
            self.cause = Some(Cause::Limit(kind));
            self.terminate(now, procs);
        }
    }

    /// Moves to the next phase when the current one's goal is reached;
    /// called after every event with whether both pipes have closed.
    pub(crate) fn advance(&mut self, now: Instant, pipes_closed: bool, procs: &mut impl Processes) {
        if !procs.exited() || !pipes_closed {
            if self.phase == Phase::Running && procs.exited() {
                self.phase = Phase::Draining {
                    until: self.bounded_by_deadline(now + DRAIN, now),
                };
            }
            return;
        }
        // The direct child has exited and the pipes are closed.
        match self.phase {
            Phase::Running | Phase::Draining { .. } => {
                if procs.all_gone() {
                    self.phase = Phase::Done;
                } else {
                    self.terminate(now, procs);
                }
            }
            Phase::Terminating { .. } | Phase::Killed { .. } => {
                if procs.all_gone() {
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => {}
        }
    }

    /// SIGTERM now, SIGKILL after the grace period.
    fn terminate(&mut self, now: Instant, procs: &mut impl Processes) {
        procs.terminate();
        let kill_at = now + self.kill_after;
        self.phase = Phase::Terminating {
            kill_at: if procs.exited() {
                self.bounded_by_deadline(kill_at, now)
            } else {
                kill_at
            },
        };
    }

    fn kill(&mut self, now: Instant, procs: &mut impl Processes) {
        procs.kill();
        self.phase = Phase::Killed {
            until: now + FINAL_READ,
        };
    }

    /// Leftovers of a command that has exited get no time past the run's
    /// deadline: `at`, or the deadline if that comes first.
    fn bounded_by_deadline(&self, at: Instant, now: Instant) -> Instant {
        match self.deadline {
            Some(d) => at.min(d.max(now)),
            None => at,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The machine against a fake child, in the manner of watchexec's
    //! `testchild`: no processes, no sleeping; time is passed in.
    use super::*;

    /// A fake command: whether the direct child has exited, how many
    /// leftovers live, and how they react to signals.
    #[derive(Default)]
    struct FakeChild {
        exited: bool,
        leftovers: usize,
        /// The direct child ignores SIGTERM (a `trap '' TERM`).
        ignores_term: bool,
        /// Leftovers ignore SIGTERM.
        leftovers_ignore_term: bool,
        signals: Vec<&'static str>,
    }

    impl Processes for FakeChild {
        fn exited(&self) -> bool {
            self.exited
        }
        fn all_gone(&mut self) -> bool {
            self.exited && self.leftovers == 0
        }
        fn terminate(&mut self) {
            self.signals.push("TERM");
            if !self.ignores_term {
                self.exited = true;
            }
            if !self.leftovers_ignore_term {
                self.leftovers = 0;
            }
        }
        fn kill(&mut self) {
            self.signals.push("KILL");
            self.exited = true;
            self.leftovers = 0;
        }
    }

    const GRACE: Duration = Duration::from_secs(2);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_limit_escalates_as_the_deadline_and_does_not_displace_an_earlier_cause() {
        use crate::limits::LimitKind;
        let t0 = Instant::now();
        let mut m = Phases::new(Some(t0 + ms(10_000)), GRACE);
        let mut child = FakeChild {
            ignores_term: true,
            ..FakeChild::default()
        };
        m.exceeded(LimitKind::Cpu, t0 + ms(5), &mut child);
        assert_eq!(m.cause(), Some(Cause::Limit(LimitKind::Cpu)));
        assert_eq!(
            m.phase(),
            Phase::Terminating {
                kill_at: t0 + ms(5) + GRACE
            }
        );
        // A second limit while terminating changes nothing.
        m.exceeded(LimitKind::Memory, t0 + ms(6), &mut child);
        assert_eq!(m.cause(), Some(Cause::Limit(LimitKind::Cpu)));
        assert_eq!(child.signals, ["TERM"]);
        let _ = m.phase_ended(t0 + ms(5) + GRACE, &mut child);
        assert_eq!(child.signals, ["TERM", "KILL"]);

        let mut timed = Phases::new(Some(t0 + ms(10)), GRACE);
        let mut child = FakeChild {
            ignores_term: true,
            ..FakeChild::default()
        };
        let _ = timed.phase_ended(t0 + ms(10), &mut child);
        timed.exceeded(LimitKind::Cpu, t0 + ms(11), &mut child);
        assert_eq!(timed.cause(), Some(Cause::Timeout));
        assert_eq!(child.signals, ["TERM"]);
    }

    #[test]
    fn a_clean_exit_with_closed_pipes_is_done_at_once() {
        let t0 = Instant::now();
        let mut m = Phases::new(Some(t0 + ms(1000)), GRACE);
        let mut child = FakeChild::default();
        m.advance(t0, false, &mut child);
        assert_eq!(m.phase(), Phase::Running);
        child.exited = true;
        m.advance(t0 + ms(10), true, &mut child);
        assert!(m.is_done());
        assert_eq!(m.cause(), None);
        assert!(child.signals.is_empty());
    }

    #[test]
    fn the_deadline_terminates_then_kills_after_the_grace_period() {
        let t0 = Instant::now();
        let deadline = t0 + ms(300);
        let mut m = Phases::new(Some(deadline), GRACE);
        let mut child = FakeChild {
            ignores_term: true,
            ..FakeChild::default()
        };
        assert_eq!(m.wake(false, t0).phase_end, Some(deadline));
        assert_eq!(m.phase_ended(deadline, &mut child), Effect::None);
        assert_eq!(m.cause(), Some(Cause::Timeout));
        assert_eq!(
            m.phase(),
            Phase::Terminating {
                kill_at: deadline + GRACE
            }
        );
        m.advance(deadline, false, &mut child);
        assert!(!m.is_done(), "a TERM-ignoring child is still there");
        let _ = m.phase_ended(deadline + GRACE, &mut child);
        assert_eq!(child.signals, ["TERM", "KILL"]);
        assert_eq!(
            m.phase(),
            Phase::Killed {
                until: deadline + GRACE + FINAL_READ
            }
        );
        m.advance(deadline + GRACE, true, &mut child);
        assert!(m.is_done());
    }

    #[test]
    fn a_deadline_during_the_drain_ends_the_drain_early_without_being_the_cause() {
        let t0 = Instant::now();
        let deadline = t0 + ms(100);
        let mut m = Phases::new(Some(deadline), GRACE);
        // The child exited but a leftover holds the pipes open.
        let mut child = FakeChild {
            exited: true,
            leftovers: 1,
            leftovers_ignore_term: true,
            ..FakeChild::default()
        };
        m.advance(t0, false, &mut child);
        // The drain would last DRAIN (250 ms); the deadline comes first.
        assert_eq!(m.phase(), Phase::Draining { until: deadline });
        let _ = m.phase_ended(deadline, &mut child);
        // The command itself finished in time: not timed out.
        assert_eq!(m.cause(), None);
        // Leftovers get no grace past the deadline: SIGKILL is due now.
        assert_eq!(m.phase(), Phase::Terminating { kill_at: deadline });
        let _ = m.phase_ended(deadline, &mut child);
        assert_eq!(child.signals, ["TERM", "KILL"]);
        m.advance(deadline, true, &mut child);
        assert!(m.is_done());
    }

    #[test]
    fn an_abort_during_the_grace_period_kills_at_once() {
        let t0 = Instant::now();
        let mut m = Phases::new(None, GRACE);
        let mut child = FakeChild {
            ignores_term: true,
            ..FakeChild::default()
        };
        assert_eq!(m.wake(false, t0).phase_end, None, "no deadline");
        m.abort(Signal::SIGINT, t0, &mut child);
        assert_eq!(m.cause(), Some(Cause::Abort(Signal::SIGINT)));
        assert_eq!(
            m.phase(),
            Phase::Terminating {
                kill_at: t0 + GRACE
            }
        );
        // A second abort (another Ctrl-C) does not wait for the grace period.
        m.abort(Signal::SIGTERM, t0 + ms(50), &mut child);
        assert_eq!(child.signals, ["TERM", "KILL"]);
        assert_eq!(
            m.phase(),
            Phase::Killed {
                until: t0 + ms(50) + FINAL_READ
            }
        );
        // The first cause stands.
        assert_eq!(m.cause(), Some(Cause::Abort(Signal::SIGINT)));
        // A third one changes nothing.
        m.abort(Signal::SIGINT, t0 + ms(60), &mut child);
        assert_eq!(child.signals, ["TERM", "KILL"]);
    }

    #[test]
    fn a_leftover_after_exit_is_terminated_and_the_run_ends_when_it_is_gone() {
        let t0 = Instant::now();
        let mut m = Phases::new(Some(t0 + ms(10_000)), GRACE);
        // The child exited and closed its pipes; a leftover runs on.
        let mut child = FakeChild {
            exited: true,
            leftovers: 1,
            ..FakeChild::default()
        };
        m.advance(t0, true, &mut child);
        assert_eq!(child.signals, ["TERM"]);
        assert!(matches!(m.phase(), Phase::Terminating { .. }));
        m.advance(t0 + ms(20), true, &mut child);
        assert!(m.is_done());
        assert_eq!(m.cause(), None);
    }

    #[test]
    fn a_pipe_holder_that_survives_sigkill_cannot_hold_the_run() {
        let t0 = Instant::now();
        let mut m = Phases::new(Some(t0 + ms(100)), GRACE);
        let mut child = FakeChild {
            ignores_term: true,
            ..FakeChild::default()
        };
        let _ = m.phase_ended(t0 + ms(100), &mut child);
        let _ = m.phase_ended(t0 + ms(100) + GRACE, &mut child);
        let until = t0 + ms(100) + GRACE + FINAL_READ;
        assert_eq!(m.wake(true, until).phase_end, Some(until));
        // The pipes are still open (an escaped holder): stop reading.
        assert_eq!(m.phase_ended(until, &mut child), Effect::StopReading);
        assert!(m.is_done());
    }

    #[test]
    fn while_killing_each_poll_kills_again() {
        let t0 = Instant::now();
        let mut m = Phases::new(None, GRACE);
        let mut child = FakeChild::default();
        m.poll(&mut child);
        assert!(child.signals.is_empty(), "no poll kills while running");
        m.abort(Signal::SIGINT, t0, &mut child);
        m.abort(Signal::SIGINT, t0, &mut child);
        m.poll(&mut child);
        assert_eq!(child.signals, ["TERM", "KILL", "KILL"]);
        assert_eq!(m.wake(true, t0).poll, Some(t0 + TREE_POLL));
    }
    #[test]
    fn output_moves_the_idle_deadline_and_the_earlier_deadline_names_the_cause() {
        let t0 = Instant::now();
        let mut m = Phases::new(Some(t0 + ms(1000)), GRACE).with_idle(Some(ms(300)), t0);
        let mut child = FakeChild::default();
        assert_eq!(m.wake(false, t0).phase_end, Some(t0 + ms(300)));
        m.output(t0 + ms(200));
        // The wake-up computed before the output fires: nothing happens.
        assert_eq!(m.phase_ended(t0 + ms(300), &mut child), Effect::None);
        assert_eq!(m.cause(), None);
        assert!(child.signals.is_empty());
        assert_eq!(m.wake(false, t0 + ms(300)).phase_end, Some(t0 + ms(500)));
        let _ = m.phase_ended(t0 + ms(500), &mut child);
        assert_eq!(m.cause(), Some(Cause::Idle));
        assert_eq!(child.signals, ["TERM"]);

        // Output all along: the deadline comes first and is the cause.
        let mut m = Phases::new(Some(t0 + ms(1000)), GRACE).with_idle(Some(ms(300)), t0);
        let mut child = FakeChild::default();
        m.output(t0 + ms(900));
        assert_eq!(m.wake(false, t0 + ms(900)).phase_end, Some(t0 + ms(1000)));
        let _ = m.phase_ended(t0 + ms(1000), &mut child);
        assert_eq!(m.cause(), Some(Cause::Timeout));
    }
}
