//! Resource limits of a run: memory, processes and CPU time of the whole
//! tree, beside the per-file size limit, and the accounting the result
//! reports.
//!
//! Mechanisms, strongest first; `plan` picks one per limit and `explain`
//! names it:
//!
//! - a cgroup of the run's own (`cgroup.rs`): v2 where the controller is in
//!   the unified hierarchy and this user may make a cgroup there, else the
//!   v1 hierarchy of the controller. The limits are the kernel's
//!   (`memory.max`, `pids.max`); so are the counters.
//! - CPU time only: accounting (`Mechanism::Accounting`). Without a cgroup the
//!   supervision loop adds up the tree's CPU time from
//!   `/proc/PID/stat` (utime, stime, cutime, cstime of every live process;
//!   proc_pid_stat(5)) and `getrusage(RUSAGE_CHILDREN)` of the reaped
//!   ones, and `RLIMIT_CPU` (setrlimit(2)) bounds each process on its own
//!   as a backstop a little past the limit, for a process the sum missed.
//!   RLIMIT_CPU alone is per process, not a tree limit.
//!
//! Memory and process counts have no honest rlimit: `RLIMIT_AS` bounds one
//! process's address space, not the tree's memory, and `RLIMIT_NPROC`
//! counts every process of the user and does not bind root. Without a
//! cgroup they are unavailable: [`crate::Error::LimitUnavailable`], or
//! with `--limits best-effort` a warning and a `not_enforced` fact.
//!
//! A cgroup with controllers is made only for a run that sets a memory,
//! process or CPU limit. Every run gets, where it can, a v2 cgroup without
//! controllers for containment (`Containment`). The CPU limit is checked
//! when the tree could have used it up at the earliest: after (limit − used) divided by
//! the online CPUs, at least every 10 ms and at most every second.
//!
//! What the limits do not hold against: a command that can write to the
//! cgroup file system can move itself out. Confining sandbox modes cannot
//! (Landlock allows no writes under `/sys`); an unconfined root command
//! can.

pub(crate) mod cgroup;
pub(crate) mod usage;

pub use self::usage::Resources;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::cgroup::{Leaf, Place, Settings, Version};
use crate::error::Error;
use crate::units::{format_duration, format_size};

/// A limit a run can reach (`limit_exceeded`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// `--memory-max`: the kernel's OOM killer ended a process.
    Memory,
    /// `--pids-max`: a fork or thread was refused.
    Pids,
    /// `--cpu-max`: the tree used its CPU time.
    Cpu,
    /// `--file-size-max`: a process was ended by SIGXFSZ.
    FileSize,
}

impl LimitKind {
    /// `memory`, `pids`, `cpu` or `file_size`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Memory => "memory",
            LimitKind::Pids => "pids",
            LimitKind::Cpu => "cpu",
            LimitKind::FileSize => "file_size",
        }
    }

    /// The flag that sets it, e.g. `--memory-max`.
    pub fn flag(self) -> &'static str {
        match self {
            LimitKind::Memory => "--memory-max",
            LimitKind::Pids => "--pids-max",
            LimitKind::Cpu => "--cpu-max",
            LimitKind::FileSize => "--file-size-max",
        }
    }
}

/// What to do when a limit cannot be enforced as asked (`--limits`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LimitMode {
    /// Refuse to run: `LIMIT_UNAVAILABLE`, exit status 125.
    #[default]
    Strict,
    /// Run without it, with a warning and a `not_enforced` fact.
    BestEffort,
}

impl LimitMode {
    /// `strict` or `best-effort`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitMode::Strict => "strict",
            LimitMode::BestEffort => "best-effort",
        }
    }
}

impl std::str::FromStr for LimitMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(LimitMode::Strict),
            "best-effort" => Ok(LimitMode::BestEffort),
            _ => Err(format!(
                "invalid limits mode '{s}' (expected strict or best-effort)"
            )),
        }
    }
}

/// Every limit a spec sets, and how strictly (built by
/// [`Spec::limits_asked`](crate::spec::Spec::limits_asked)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// The tree limits.
    pub(crate) tree: Asked,
    /// RLIMIT_FSIZE, in bytes (`--file-size-max`).
    pub(crate) file_size_max: Option<u64>,
    /// `--limits best-effort`.
    pub(crate) best_effort: bool,
    /// Which of memory, pids and cpu a cap of the configuration file set
    /// (never downgraded by best-effort).
    pub(crate) capped: [bool; 3],
}

/// The tree limits a spec asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    /// Bytes of memory of the whole tree.
    pub(crate) memory_max: Option<u64>,
    /// Processes and threads at once.
    pub(crate) pids_max: Option<u64>,
    /// CPU time of the whole tree.
    pub(crate) cpu_max: Option<Duration>,
}

impl Asked {
    fn any(&self) -> bool {
        self.memory_max.is_some() || self.pids_max.is_some() || self.cpu_max.is_some()
    }

    /// The asked value of `kind` as written on the command line.
    fn shown(&self, kind: LimitKind) -> String {
        match kind {
            LimitKind::Memory => self.memory_max.map(format_size).unwrap_or_default(),
            LimitKind::Pids => self.pids_max.map(|n| n.to_string()).unwrap_or_default(),
            LimitKind::Cpu => self.cpu_max.map(format_duration).unwrap_or_default(),
            LimitKind::FileSize => String::new(),
        }
    }
}

/// How one limit is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// A run cgroup under this place.
    Cgroup(Place),
    /// The tree's CPU time added up by the supervision loop, with a
    /// per-process RLIMIT_CPU backstop.
    Accounting,
    /// Cannot be enforced here, and why.
    Unavailable(String),
}

impl Mechanism {
    /// `cgroup-v2`, `cgroup-v1`, `accounting` or `none`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Mechanism::Cgroup(p) => p.version.as_str(),
            Mechanism::Accounting => "accounting",
            Mechanism::Unavailable(_) => "none",
        }
    }

    /// One line for `explain`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Mechanism::Cgroup(p) => format!("{} under {}", p.version.as_str(), p.base.display()),
            Mechanism::Accounting => {
                "accounting: the tree's CPU time from /proc and getrusage, RLIMIT_CPU per process as a backstop".into()
            }
            Mechanism::Unavailable(why) => format!("unavailable: {why}"),
        }
    }
}

/// The mechanism of each limit asked for (`None`: not asked).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) memory: Option<Mechanism>,
    pub(crate) pids: Option<Mechanism>,
    pub(crate) cpu: Option<Mechanism>,
}

impl Plan {
    /// (kind, mechanism) of each limit asked for.
    pub(crate) fn each(&self) -> impl Iterator<Item = (LimitKind, &Mechanism)> {
        [
            (LimitKind::Memory, self.memory.as_ref()),
            (LimitKind::Pids, self.pids.as_ref()),
            (LimitKind::Cpu, self.cpu.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, m)| m.map(|m| (k, m)))
    }
}

/// Picks the mechanism of each limit in `asked`, from the hierarchies this
/// process can reach; makes nothing (a run does, in [`Limiter::prepare`]).
pub(crate) fn plan(asked: Asked) -> Plan {
    if !asked.any() {
        return Plan::default();
    }
    plan_with(asked, &cgroup::hierarchies(), cgroup::place)
}

fn plan_with(
    asked: Asked,
    hs: &[cgroup::Hierarchy],
    place: impl Fn(&cgroup::Hierarchy, bool) -> Result<Place, String>,
) -> Plan {
    let v2 = hs.iter().find(|h| h.version == Version::V2);
    let in_v2 = |c: &str| v2.is_some_and(|h| h.controllers.iter().any(|x| x == c));
    // A v2 run cgroup with controllers, when a limit needs one there; one
    // without (inside this process's own cgroup) for CPU time alone.
    let with_controllers = (asked.memory_max.is_some() && in_v2("memory"))
        || (asked.pids_max.is_some() && in_v2("pids"));
    let beside = v2.filter(|_| with_controllers).map(|h| place(h, true));
    let inside = v2.map(|h| place(h, false));
    let v1 = |controller: &str| {
        hs.iter()
            .find(|h| h.version == Version::V1 && h.controllers.iter().any(|c| c == controller))
    };
    let controller = |name: &str, why_not_rlimit: &str| -> Mechanism {
        if in_v2(name) {
            return match &beside {
                Some(Ok(p)) if p.controllers.iter().any(|c| c == name) => {
                    Mechanism::Cgroup(p.clone())
                }
                Some(Ok(p)) => Mechanism::Unavailable(format!(
                    "the {name} controller is not enabled for {} (its parent's \
                     cgroup.subtree_control); {why_not_rlimit}",
                    p.base.display()
                )),
                Some(Err(why)) => {
                    Mechanism::Unavailable(format!("cgroup v2 {name}: {why}; {why_not_rlimit}"))
                }
                None => Mechanism::Unavailable(format!("cgroup v2 {name}: not placed")),
            };
        }
        if let Some(h) = v1(name) {
            return match place(h, true) {
                Ok(p) => Mechanism::Cgroup(p),
                Err(why) => {
                    Mechanism::Unavailable(format!("cgroup v1 {name}: {why}; {why_not_rlimit}"))
                }
            };
        }
        Mechanism::Unavailable(format!(
            "no cgroup hierarchy with the {name} controller is mounted; {why_not_rlimit}"
        ))
    };
    let memory = asked.memory_max.map(|_| {
        controller(
            "memory",
            "RLIMIT_AS would bound one process's address space, not the tree's memory",
        )
    });
    let pids = asked.pids_max.map(|_| {
        controller(
            "pids",
            "RLIMIT_NPROC counts every process of the user, not the tree's, and does not bind root",
        )
    });
    // CPU time goes with a v2 cgroup made for the others, else in one of
    // its own.
    let shared = [&memory, &pids].into_iter().find_map(|m| match m {
        Some(Mechanism::Cgroup(p)) if p.version == Version::V2 => Some(p.clone()),
        _ => None,
    });
    let cpu = asked.cpu_max.map(|_| match (shared.as_ref(), &inside) {
        (Some(p), _) | (None, Some(Ok(p))) => Mechanism::Cgroup(p.clone()),
        _ => match v1("cpuacct").map(|h| place(h, true)) {
            Some(Ok(p)) => Mechanism::Cgroup(p),
            _ => Mechanism::Accounting,
        },
    });
    Plan { memory, pids, cpu }
}

/// The tree limits of `spec`, for `explain`: (kind, value as written,
/// mechanism name, one line on the mechanism), in the order memory, pids,
/// cpu. Probes the hierarchies; makes nothing.
pub(crate) fn explained(wanted: &Wanted) -> Vec<(LimitKind, String, &'static str, String)> {
    let asked = wanted.tree;
    plan(asked)
        .each()
        .map(|(kind, m)| (kind, asked.shown(kind), m.name(), m.describe()))
        .collect()
}

/// One limit that is not enforced (`--limits best-effort`), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotEnforced {
    /// `memory`, `pids` or `cpu`.
    pub limit: LimitKind,
    /// Why, e.g. `no cgroup hierarchy with the memory controller is mounted`.
    pub reason: String,
}

/// The limits of a run, as the result reports them; present when any was
/// set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LimitFacts {
    /// `--memory-max`, in bytes.
    pub memory_max_bytes: Option<u64>,
    /// `--pids-max`: processes and threads at once.
    pub pids_max: Option<u64>,
    /// `--cpu-max`, in milliseconds of CPU time.
    pub cpu_max_ms: Option<u64>,
    /// `--file-size-max` (RLIMIT_FSIZE), in bytes.
    pub file_size_max_bytes: Option<u64>,
    /// How each limit set is enforced, by limit: `cgroup-v2`, `cgroup-v1`,
    /// `accounting` (CPU time added up by dsh-exec, RLIMIT_CPU per process
    /// as a backstop), `rlimit`, or `none` (see `not_enforced`).
    pub mechanism: BTreeMap<String, String>,
    /// Limits that were asked for but not enforced (`--limits
    /// best-effort`); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<NotEnforced>,
}

/// Where the CPU time of the tree is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CpuSource {
    /// The leaf at this index.
    Leaf(usize),
    /// Added up from `/proc` and getrusage.
    Walk,
}

/// How often the loop looks for an OOM kill where the kernel kills one
/// process rather than the cgroup (v1): 50 ms.
const OOM_POLL: Duration = Duration::from_millis(50);

/// The earliest and latest interval between two CPU checks.
const CPU_POLL_MIN: Duration = Duration::from_millis(10);
const CPU_POLL_MAX: Duration = Duration::from_secs(1);

/// A run's limits while it runs: its cgroups, and the state of the checks.
/// Dropping it removes the cgroups (after the tree is gone).
#[derive(Debug)]
pub(crate) struct Limiter {
    asked: Asked,
    file_size_max: Option<u64>,
    plan: Plan,
    leaves: Vec<Leaf>,
    cpu: Option<CpuSource>,
    /// CPU µs seen at the last check.
    cpu_used: u64,
    /// Online CPUs: the most CPU time the tree gains per second of wall time.
    cpus: u32,
    not_enforced: Vec<NotEnforced>,
    /// `pids.peak` is missing: `pids.current` is sampled.
    sample_pids: bool,
    /// When the next check is due, once [`Limiter::next_check`] set it.
    due: Option<Instant>,
}

impl Limiter {
    /// The limits a spec sets (`spec`): makes the run's cgroups. `None` when the spec
    /// sets no tree limit and no file size limit.
    ///
    /// Errors with [`Error::LimitUnavailable`] when a limit cannot be
    /// enforced (no mechanism, or its cgroup cannot be made) and the mode
    /// is strict; in best-effort mode such a limit is listed in
    /// `not_enforced` instead.
    ///
    /// Every run is also put, where the unified hierarchy lets this user
    /// make a cgroup inside its own, into a v2 cgroup without controllers
    /// (see [`Containment`]), so that `cgroup.kill` ends the whole tree,
    /// also the processes that left the process group and the session, and
    /// also when dsh-exec itself is killed (the watchdog writes it). A run
    /// whose limits already make a v2 cgroup uses that one. Where no such
    /// cgroup can be made the run goes on without it: the process group and
    /// the subreaper sweep still end the tree while dsh-exec lives.
    pub(crate) fn prepare(spec: &Wanted) -> Result<Option<Limiter>, Error> {
        let asked = spec.tree;
        if !asked.any() && spec.file_size_max.is_none() {
            return Ok(Containment::make().map(Limiter::containing));
        }
        // A limit an operator's cap imposed is never downgraded: best-effort
        // is for the limits the caller asked for.
        let best_effort = spec.best_effort;
        let capped = |kind: LimitKind| match kind {
            LimitKind::Memory => spec.capped[0],
            LimitKind::Pids => spec.capped[1],
            LimitKind::Cpu => spec.capped[2],
            LimitKind::FileSize => false,
        };
        let plan = plan(asked);
        let mut not_enforced = Vec::new();
        let mut refuse = |kind: LimitKind, reason: String| -> Result<(), Error> {
            if !best_effort || capped(kind) {
                let by_cap = match (capped(kind), best_effort) {
                    (true, true) => {
                        " (set by a cap of the configuration file, which --limits best-effort does not lift)"
                    }
                    (true, false) => " (set by a cap of the configuration file)",
                    _ => "",
                };
                return Err(Error::LimitUnavailable {
                    limit: format!("{} {}{by_cap}", kind.flag(), asked.shown(kind)),
                    reason,
                });
            }
            not_enforced.push(NotEnforced {
                limit: kind,
                reason,
            });
            Ok(())
        };
        // One cgroup per place, with the controllers of every limit there.
        let mut wanted: Vec<(Place, Vec<LimitKind>)> = Vec::new();
        for (kind, mechanism) in plan.each() {
            match mechanism {
                Mechanism::Cgroup(p) => match wanted.iter_mut().find(|(q, _)| q.base == p.base) {
                    Some((_, kinds)) => kinds.push(kind),
                    None => wanted.push((p.clone(), vec![kind])),
                },
                Mechanism::Accounting => {}
                Mechanism::Unavailable(why) => refuse(kind, why.clone())?,
            }
        }
        // The v2 cgroup first: the child is started in it (clone3).
        wanted.sort_by_key(|(p, _)| p.version != Version::V2);
        let settings = Settings {
            memory_max: asked.memory_max,
            pids_max: asked.pids_max,
        };
        let mut leaves = Vec::new();
        let mut cpu = plan
            .cpu
            .as_ref()
            .filter(|m| **m == Mechanism::Accounting)
            .map(|_| CpuSource::Walk);
        let mut failed: Vec<LimitKind> = Vec::new();
        for (place, kinds) in wanted {
            let controllers: Vec<&'static str> = kinds
                .iter()
                .filter_map(|k| match (k, place.version) {
                    (LimitKind::Memory, _) => Some("memory"),
                    (LimitKind::Pids, _) => Some("pids"),
                    (LimitKind::Cpu, Version::V1) => Some("cpuacct"),
                    _ => None,
                })
                .collect();
            match Leaf::create(&place, controllers, settings) {
                Ok(leaf) => {
                    if kinds.contains(&LimitKind::Cpu) {
                        cpu = Some(CpuSource::Leaf(leaves.len()));
                    }
                    leaves.push(leaf);
                }
                Err(e) => {
                    for kind in kinds {
                        failed.push(kind);
                        refuse(kind, e.to_string())?;
                    }
                }
            }
        }
        let mut plan = plan;
        for kind in failed {
            let m = Some(Mechanism::Unavailable(
                "its cgroup could not be made".into(),
            ));
            match kind {
                LimitKind::Memory => plan.memory = m,
                LimitKind::Pids => plan.pids = m,
                LimitKind::Cpu => plan.cpu = m,
                LimitKind::FileSize => {}
            }
        }
        if !leaves.iter().any(|l| l.version == Version::V2)
            && let Some(Containment(leaf)) = Containment::make()
        {
            // The v2 cgroup first: the child is started in it (clone3).
            leaves.insert(0, leaf);
            if let Some(CpuSource::Leaf(i)) = &mut cpu {
                *i += 1;
            }
        }
        let sample_pids = leaves
            .iter()
            .any(|l| l.controllers.contains(&"pids") && !l.dir.join("pids.peak").exists());
        let online = nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN)
            .ok()
            .flatten()
            .unwrap_or(1);
        Ok(Some(Limiter {
            asked,
            file_size_max: spec.file_size_max,
            plan,
            leaves,
            cpu,
            cpu_used: 0,
            cpus: u32::try_from(online).unwrap_or(1).max(1),
            not_enforced,
            sample_pids,
            due: None,
        }))
    }

    /// A limiter that sets no limit and only holds `containment`.
    fn containing(containment: Containment) -> Limiter {
        Limiter {
            asked: Asked::default(),
            file_size_max: None,
            plan: Plan::default(),
            leaves: vec![containment.0],
            cpu: None,
            cpu_used: 0,
            cpus: 1,
            not_enforced: Vec::new(),
            sample_pids: false,
            due: None,
        }
    }

    /// Whether the run sets a limit (else the limiter only holds the
    /// containment cgroup, and the result has no `limits`).
    pub(crate) fn limits_any(&self) -> bool {
        self.asked.any() || self.file_size_max.is_some()
    }

    /// Takes note of the cgroups the child could not join (bit i:
    /// `join_fds()[i]`; best-effort mode): their limits are not enforced.
    pub(crate) fn joined(&mut self, failed: u32) {
        if failed == 0 {
            return;
        }
        let mut kept = Vec::new();
        let mut cpu_moved = None;
        for (i, leaf) in std::mem::take(&mut self.leaves).into_iter().enumerate() {
            if failed & (1 << i) == 0 {
                if self.cpu == Some(CpuSource::Leaf(i)) {
                    cpu_moved = Some(CpuSource::Leaf(kept.len()));
                }
                kept.push(leaf);
                continue;
            }
            let reason = format!("the command could not join {}", leaf.dir.display());
            let none = || Some(Mechanism::Unavailable(reason.clone()));
            let mut lost = Vec::new();
            if leaf.controllers.contains(&"memory") {
                self.plan.memory = none();
                lost.push(LimitKind::Memory);
            }
            if leaf.controllers.contains(&"pids") {
                self.plan.pids = none();
                lost.push(LimitKind::Pids);
            }
            if self.cpu == Some(CpuSource::Leaf(i)) {
                self.plan.cpu = none();
                lost.push(LimitKind::Cpu);
                cpu_moved = None;
                self.cpu = None;
            }
            self.not_enforced
                .extend(lost.into_iter().map(|limit| NotEnforced {
                    limit,
                    reason: reason.clone(),
                }));
        }
        if self.cpu.is_some() {
            self.cpu = cpu_moved.or(self.cpu.filter(|c| *c == CpuSource::Walk));
        }
        self.leaves = kept;
    }

    /// A v1 memory cgroup: its OOM kills are polled for ([`OOM_POLL`]); v2
    /// kills the whole cgroup itself.
    fn watch_oom(&self) -> bool {
        self.leaves
            .iter()
            .any(|l| l.version == Version::V1 && l.controllers.contains(&"memory"))
    }

    /// The `cgroup.procs` descriptors the child writes itself into, the
    /// v2 cgroup's first (see [`Limiter::v2_dir_fd`]).
    pub(crate) fn join_fds(&self) -> Vec<i32> {
        self.leaves.iter().map(Leaf::procs_fd).collect()
    }

    /// The directory descriptor of the v2 run cgroup, for clone3
    /// `CLONE_INTO_CGROUP`; `join_fds()[0]` is its `cgroup.procs`.
    pub(crate) fn v2_dir_fd(&self) -> Option<i32> {
        self.leaves
            .first()
            .filter(|l| l.version == Version::V2)
            .map(Leaf::dir_fd)
    }

    /// RLIMIT_CPU for each process, in seconds, when the CPU limit is
    /// enforced by accounting: a backstop past the limit and the grace
    /// period, for a process the sum cannot see.
    pub(crate) fn cpu_rlimit(&self, grace: Duration) -> Option<u64> {
        match (self.cpu, self.asked.cpu_max) {
            (Some(CpuSource::Walk), Some(max)) => Some((max + grace).as_secs() + 2),
            _ => None,
        }
    }

    /// The not-enforced limits, as warnings (best-effort mode).
    pub(crate) fn warnings(&self) -> Vec<String> {
        self.not_enforced
            .iter()
            .map(|n| {
                format!(
                    "{} {} is not enforced: {}",
                    n.limit.flag(),
                    self.asked.shown(n.limit),
                    n.reason
                )
            })
            .collect()
    }

    /// When the loop must check the limits next (`None`: only at the
    /// end). The instant is kept until the check is made, so that a loop
    /// driven in short slices (a job's supervisor) still reaches it.
    pub(crate) fn next_check(&mut self, now: Instant) -> Option<Instant> {
        if self.due.is_none() {
            let cpu = self.cpu.zip(self.asked.cpu_max).map(|(_, max)| {
                let left = max.saturating_sub(Duration::from_micros(self.cpu_used));
                (left / self.cpus).clamp(CPU_POLL_MIN, CPU_POLL_MAX)
            });
            let oom = (self.watch_oom() || self.sample_pids).then_some(OOM_POLL);
            self.due = [cpu, oom].into_iter().flatten().min().map(|d| now + d);
        }
        self.due
    }

    /// Reads the counters: the limit that now ends the run, if one does
    /// (the tree used its CPU time, or the kernel OOM-killed a process of
    /// it). `tree_cpu` gives the tree's CPU µs where no cgroup counts it.
    pub(crate) fn check(&mut self, tree_cpu: impl FnOnce() -> u64) -> Option<LimitKind> {
        self.due = None;
        if self.sample_pids {
            self.leaves.iter().for_each(Leaf::sample_pids);
        }
        if self.leaves.iter().any(|l| l.oom_kills().unwrap_or(0) > 0) {
            return Some(LimitKind::Memory);
        }
        let max = self.asked.cpu_max?;
        self.cpu_used = match self.cpu? {
            CpuSource::Leaf(i) => self.leaves.get(i)?.cpu_total()?,
            CpuSource::Walk => tree_cpu(),
        };
        (Duration::from_micros(self.cpu_used) >= max).then_some(LimitKind::Cpu)
    }

    /// The directory of a v2 run cgroup, for `cgroup.kill`.
    pub(crate) fn v2_dir(&self) -> Option<std::path::PathBuf> {
        self.leaves
            .iter()
            .find(|l| l.version == Version::V2)
            .map(|l| l.dir.clone())
    }

    /// The limit the run reached, given what ended it: `cause` (a limit
    /// the loop acted on), else an OOM kill, refused forks, the accounting
    /// backstop's SIGXCPU, or under a file size limit a process ended by
    /// SIGXFSZ: the direct child (`signal`), or one that bash reported on
    /// `stderr` with strsignal(3)'s text, "File size limit exceeded"
    /// (bash alone sees how its children died; the command's own output
    /// could say the same). `tree_cpu_us` is the tree's CPU time at the
    /// end, which a SIGXCPU death must have reached the limit with.
    pub(crate) fn exceeded(
        &self,
        cause: Option<LimitKind>,
        signal: Option<crate::signal::Signal>,
        stderr: &str,
        tree_cpu_us: u64,
    ) -> Option<LimitKind> {
        let died_of = |n: i32| signal.is_some_and(|s| s.number() == n);
        // SIGXCPU counts as the CPU limit only when the tree did use it (a
        // process may send itself SIGXCPU).
        let used_it = self
            .asked
            .cpu_max
            .is_some_and(|max| Duration::from_micros(tree_cpu_us) >= max);
        let xfsz = died_of(nix::libc::SIGXFSZ)
            || stderr
                .lines()
                .any(|l| l.starts_with("bash: ") && l.contains(" File size limit exceeded"));
        // The accounting backstop's signal.
        let xcpu = died_of(nix::libc::SIGXCPU) && self.cpu == Some(CpuSource::Walk) && used_it;
        cause
            .or_else(|| {
                self.leaves
                    .iter()
                    .any(|l| l.oom_kills().unwrap_or(0) > 0)
                    .then_some(LimitKind::Memory)
            })
            .or_else(|| {
                self.leaves
                    .iter()
                    .any(|l| l.pids_refusals().unwrap_or(0) > 0)
                    .then_some(LimitKind::Pids)
            })
            .or_else(|| xcpu.then_some(LimitKind::Cpu))
            .or_else(|| (xfsz && self.file_size_max.is_some()).then_some(LimitKind::FileSize))
    }

    /// The facts of the result.
    pub(crate) fn facts(&self) -> LimitFacts {
        let mut mechanism = BTreeMap::new();
        for (kind, m) in self.plan.each() {
            mechanism.insert(kind.as_str().to_string(), m.name().to_string());
        }
        if self.file_size_max.is_some() {
            mechanism.insert("file_size".into(), "rlimit".into());
        }
        LimitFacts {
            memory_max_bytes: self.asked.memory_max,
            pids_max: self.asked.pids_max,
            cpu_max_ms: self.asked.cpu_max.map(|d| d.as_millis() as u64),
            file_size_max_bytes: self.file_size_max,
            mechanism,
            not_enforced: self.not_enforced.clone(),
        }
    }

    /// Replaces the figures of `r` that a cgroup counts better: CPU time
    /// (any cgroup that counts it), the tree's peak memory (memory), the
    /// most processes at once (pids). Call once the tree is gone.
    pub(crate) fn account(&self, r: &mut Resources) {
        let mut from = Vec::new();
        if let Some((leaf, (user, system))) = self
            .leaves
            .iter()
            .find_map(|l| l.cpu_usage().map(|u| (l, u)))
        {
            r.cpu_user_ms = user / 1000;
            r.cpu_system_ms = system / 1000;
            let file = match leaf.version {
                Version::V2 => "cpu.stat",
                Version::V1 => "cpuacct.usage_user/usage_sys",
            };
            from.push(format!("cpu: {} {file}", leaf.version.as_str()));
        }
        if let Some((leaf, peak)) = self
            .leaves
            .iter()
            .find_map(|l| l.peak_memory().map(|p| (l, p)))
        {
            r.peak_memory_bytes = peak;
            let file = match leaf.version {
                Version::V2 => "memory.peak",
                Version::V1 => "memory.max_usage_in_bytes + memory.kmem.tcp.max_usage_in_bytes",
            };
            from.push(format!(
                "memory: {} {file} (the tree's sum)",
                leaf.version.as_str()
            ));
        }
        if let Some((leaf, (peak, counted))) = self
            .leaves
            .iter()
            .find_map(|l| l.peak_pids().map(|p| (l, p)))
        {
            r.max_pids = Some(peak);
            let how = if counted {
                "pids.peak"
            } else {
                "pids.current, sampled"
            };
            from.push(format!("pids: {} {how}", leaf.version.as_str()));
        }
        if !from.is_empty() {
            if from.len() < 3 {
                from.push("the rest: getrusage(RUSAGE_CHILDREN)".into());
            }
            r.source = from.join("; ");
        }
    }
}

/// How a run's tree would be held, for `explain`: (`cgroup-v2` or
/// `process-group`, the directory the containment cgroup would be made in,
/// one line on what that means or why there is none). Probes; makes
/// nothing.
pub(crate) fn containment_explained() -> (&'static str, Option<std::path::PathBuf>, String) {
    const SURVIVES: &str = "a process that leaves the process group survives a SIGKILL of dsh-exec";
    let Some(v2) = cgroup::hierarchies()
        .into_iter()
        .find(|h| h.version == Version::V2)
    else {
        return (
            "process-group",
            None,
            format!("no unified (v2) cgroup hierarchy is mounted; {SURVIVES}"),
        );
    };
    match cgroup::place(&v2, false) {
        Ok(p) => (
            "cgroup-v2",
            Some(p.base),
            "cgroup.kill ends the whole tree, also after a SIGKILL of dsh-exec".into(),
        ),
        Err(why) => ("process-group", None, format!("{why}; {SURVIVES}")),
    }
}

/// A run's containment cgroup: a v2 cgroup without controllers, inside
/// dsh-exec's own, that the command is started in (clone3
/// `CLONE_INTO_CGROUP`), so that every process of the tree stays in it
/// whatever it does to its process group or session.
///
/// What it relies on from the kernel (cgroups(7), Documentation/admin-guide/
/// cgroup-v2.rst): a child is born in the cgroup of its parent and leaves
/// it only by a write to some `cgroup.procs`, which needs write access to
/// the cgroup file system (confining modes allow no writes under `/sys`);
/// and writing `1` to `cgroup.kill` (Linux 5.14) SIGKILLs every process in
/// the cgroup and its descendants, also those forked while it runs.
#[derive(Debug)]
struct Containment(Leaf);

impl Containment {
    /// Makes the cgroup, or `None` where the unified hierarchy is not
    /// mounted or this user cannot make a cgroup inside its own there.
    fn make() -> Option<Containment> {
        let v2 = cgroup::hierarchies()
            .into_iter()
            .find(|h| h.version == Version::V2)?;
        let place = cgroup::place(&v2, false).ok()?;
        Leaf::create(&place, Vec::new(), Settings::default())
            .ok()
            .map(Containment)
    }
}

/// The limits line of a notice: `[killed by the memory limit (64MiB)]` and
/// its kin, for the limit `kind` of `facts`.
pub fn notice(kind: LimitKind, facts: Option<&LimitFacts>) -> String {
    let f = |v: Option<String>| v.map(|v| format!(" ({v})")).unwrap_or_default();
    match kind {
        LimitKind::Memory => format!(
            "[killed by the memory limit{}]",
            f(facts.and_then(|x| x.memory_max_bytes).map(format_size))
        ),
        LimitKind::Cpu => format!(
            "[stopped by the CPU time limit{}]",
            f(facts
                .and_then(|x| x.cpu_max_ms)
                .map(|ms| format_duration(Duration::from_millis(ms))))
        ),
        LimitKind::Pids => format!(
            "[process limit reached{}: forks were refused]",
            f(facts.and_then(|x| x.pids_max).map(|n| n.to_string()))
        ),
        LimitKind::FileSize => format!(
            "[file size limit reached{}: a write was refused]",
            f(facts.and_then(|x| x.file_size_max_bytes).map(format_size))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::cgroup::Hierarchy;
    use super::*;
    use std::path::PathBuf;

    fn h(version: Version, own: &str, controllers: &[&str]) -> Hierarchy {
        Hierarchy {
            version,
            own: own.into(),
            mount: own.into(),
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn place_ok(h: &Hierarchy, with: bool) -> Result<Place, String> {
        Ok(Place {
            version: h.version,
            base: h.own.join("dsh-exec"),
            controllers: match (h.version, with) {
                (Version::V1, _) => h.controllers.clone(),
                (Version::V2, true) => h.controllers.clone(),
                (Version::V2, false) => Vec::new(),
            },
        })
    }

    const ALL: Asked = Asked {
        memory_max: Some(1 << 26),
        pids_max: Some(32),
        cpu_max: Some(Duration::from_secs(1)),
    };

    #[test]
    fn a_hybrid_host_puts_memory_and_pids_in_v1_and_cpu_in_the_unified_hierarchy() {
        let hs = [
            h(Version::V2, "/u", &[]),
            h(Version::V1, "/m", &["memory"]),
            h(Version::V1, "/p", &["pids"]),
        ];
        let plan = plan_with(ALL, &hs, place_ok);
        let base = |m: &Option<Mechanism>| match m {
            Some(Mechanism::Cgroup(p)) => p.base.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(base(&plan.memory), PathBuf::from("/m/dsh-exec"));
        assert_eq!(base(&plan.pids), PathBuf::from("/p/dsh-exec"));
        assert_eq!(base(&plan.cpu), PathBuf::from("/u/dsh-exec"));
    }

    #[test]
    fn without_a_cgroup_memory_and_pids_are_unavailable_and_cpu_is_accounted() {
        let denied = |_: &Hierarchy, _: bool| Err("permission denied".to_string());
        let hs = [h(Version::V2, "/u", &["memory", "pids"])];
        let plan = plan_with(ALL, &hs, denied);
        assert!(
            matches!(&plan.memory, Some(Mechanism::Unavailable(w)) if w.contains("permission denied") && w.contains("RLIMIT_AS")),
            "{plan:?}"
        );
        assert!(
            matches!(&plan.pids, Some(Mechanism::Unavailable(w)) if w.contains("RLIMIT_NPROC")),
            "{plan:?}"
        );
        assert_eq!(plan.cpu, Some(Mechanism::Accounting));
        let none = plan_with(ALL, &[], denied);
        assert!(
            matches!(&none.memory, Some(Mechanism::Unavailable(w)) if w.starts_with("no cgroup hierarchy with the memory controller")),
            "{none:?}"
        );
    }

    #[test]
    fn a_unified_hierarchy_with_the_controllers_enabled_takes_every_limit() {
        let hs = [h(Version::V2, "/u/me", &["memory", "pids"])];
        let plan = plan_with(ALL, &hs, place_ok);
        for m in [&plan.memory, &plan.pids, &plan.cpu] {
            assert_eq!(m.as_ref().map(Mechanism::name), Some("cgroup-v2"));
        }
        // One cgroup for all three.
        assert_eq!(plan.cpu, plan.memory);
        let unasked = plan_with(Asked::default(), &hs, place_ok);
        assert_eq!(unasked, Plan::default());
    }

    #[test]
    fn cpu_time_alone_stays_inside_this_processs_cgroup_and_a_refused_place_is_said() {
        let hs = [h(Version::V2, "/u/me", &["memory"])];
        let placed = |h: &Hierarchy, with: bool| {
            if with {
                Err("this process's cgroup /u/me sets memory.max (1G); a cgroup beside it would escape that".to_string())
            } else {
                place_ok(h, false)
            }
        };
        let cpu_only = Asked {
            cpu_max: Some(Duration::from_secs(1)),
            ..Asked::default()
        };
        let plan = plan_with(cpu_only, &hs, placed);
        assert!(
            matches!(&plan.cpu, Some(Mechanism::Cgroup(p)) if p.base == std::path::Path::new("/u/me/dsh-exec")),
            "{plan:?}"
        );
        let plan = plan_with(ALL, &hs, placed);
        assert!(
            matches!(&plan.memory, Some(Mechanism::Unavailable(w)) if w.contains("would escape")),
            "{plan:?}"
        );
        // No controller of v2 is asked for pids: none mounted for it.
        assert!(
            matches!(&plan.pids, Some(Mechanism::Unavailable(w)) if w.starts_with("no cgroup hierarchy with the pids")),
            "{plan:?}"
        );
        assert!(matches!(&plan.cpu, Some(Mechanism::Cgroup(_))), "{plan:?}");
    }

    #[test]
    fn notices_name_the_limit_and_its_value() {
        let facts = LimitFacts {
            memory_max_bytes: Some(512 << 20),
            pids_max: Some(32),
            cpu_max_ms: Some(1500),
            file_size_max_bytes: Some(1 << 20),
            mechanism: BTreeMap::new(),
            not_enforced: Vec::new(),
        };
        let n = |k| notice(k, Some(&facts));
        assert_eq!(
            n(LimitKind::Memory),
            "[killed by the memory limit (512MiB)]"
        );
        assert_eq!(n(LimitKind::Cpu), "[stopped by the CPU time limit (1.5s)]");
        assert_eq!(
            n(LimitKind::Pids),
            "[process limit reached (32): forks were refused]"
        );
        assert_eq!(
            n(LimitKind::FileSize),
            "[file size limit reached (1MiB): a write was refused]"
        );
    }
}
