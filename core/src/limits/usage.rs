//! What a run's processes used: CPU time and peak memory from getrusage(2),
//! or from the run's cgroup files where it has limits.

use serde::{Deserialize, Serialize};

/// What a run's processes used, from getrusage(2) `RUSAGE_CHILDREN` of
/// `dsh-exec`: it is the subreaper of the command's tree and reaps every
/// process of it, so the figures cover the whole tree, orphans included,
/// once each has been reaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Resources {
    /// User CPU time of the tree, in milliseconds.
    pub cpu_user_ms: u64,
    /// System CPU time of the tree, in milliseconds.
    pub cpu_system_ms: u64,
    /// The largest resident set of any one process of the tree, in bytes
    /// (`ru_maxrss`; not the sum: that takes a cgroup). In a program that
    /// runs several commands through the library, the largest of any so far.
    pub peak_memory_bytes: u64,
    /// The most processes and threads of the tree at once: `null` without a
    /// cgroup to count them.
    pub max_pids: Option<u64>,
    /// Where the figures come from: `getrusage(RUSAGE_CHILDREN)`, or for
    /// a run with limits, the cgroup files read per figure (`cpu:
    /// cgroup-v2 cpu.stat; memory: cgroup-v1 memory.max_usage_in_bytes
    /// (the tree's sum); pids: cgroup-v1 pids.peak`).
    pub source: String,
}

/// `RUSAGE_CHILDREN` of this process: (user µs, system µs, max RSS bytes);
/// zeros when getrusage(2) fails.
pub(crate) fn children_usage() -> (u64, u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(u) = getrusage(UsageWho::RUSAGE_CHILDREN) else {
        return (0, 0, 0);
    };
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
    (
        us(u.user_time()),
        us(u.system_time()),
        u.max_rss() as u64 * 1024,
    )
}

impl Resources {
    /// The usage since `before` ([`children_usage`] taken before the spawn).
    pub(crate) fn since(before: (u64, u64, u64)) -> Resources {
        let now = children_usage();
        Resources {
            cpu_user_ms: now.0.saturating_sub(before.0) / 1000,
            cpu_system_ms: now.1.saturating_sub(before.1) / 1000,
            peak_memory_bytes: now.2,
            max_pids: None,
            source: "getrusage(RUSAGE_CHILDREN)".into(),
        }
    }
}
