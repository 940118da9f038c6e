//! Control groups: finding a place for a run's own cgroup, creating it,
//! setting its limits, reading its counters, killing and removing it.
//!
//! What this relies on from the kernel (cgroups(7);
//! Documentation/admin-guide/cgroup-v2.rst; Documentation/admin-guide/
//! cgroup-v1/{memory,pids,cpuacct}.rst):
//!
//! - `/proc/self/cgroup` names this process's cgroup in each hierarchy
//!   (`ID:CONTROLLERS:PATH`, `0::PATH` for v2), relative to the cgroup
//!   namespace's root; `/proc/self/mountinfo` says where each hierarchy is
//!   mounted and which subtree the mount shows (proc(5)).
//! - Writing `0` to a cgroup's `cgroup.procs` moves the writing process
//!   (v2: "cgroup.procs"; v1 accepts 0 for the current task as well,
//!   `cgroup_procs_write_start`). The child does it between clone(2) and
//!   execve(2), on a descriptor the parent opened, so the command never
//!   runs outside its cgroup; whatever it forks starts inside.
//! - In v1 the child writes `0` to `tasks` instead, which moves the
//!   writing thread alone. The child is a clone of one thread, so it has
//!   only that one (clone(2)), and the whole process moves. Moving the
//!   current thread alone lets the kernel skip the global
//!   `cgroup_threadgroup_rwsem` (kernel/cgroup/cgroup.c,
//!   `cgroup_procs_write_start`: "If the thread is `current`, it won't
//!   exit(2) under our hands ... we can skip the global lock"), whose
//!   write side waits for an RCU grace period (percpu-rwsem): 5 to 20 ms
//!   for a run on its own, against about 0.3 ms. A kernel without that
//!   shortcut takes the lock and only costs the wait.
//! - v2's "no internal processes" rule: a cgroup whose
//!   `cgroup.subtree_control` enables a controller holds no processes
//!   (the root excepted). A run's cgroup therefore sits in a `dsh-exec`
//!   directory beside this process's own cgroup (v2) or inside it (v1,
//!   which has no such rule), and only that directory enables controllers.
//! - Moving a process needs write access to `cgroup.procs` of the common
//!   ancestor of the two cgroups (v2 delegation, cgroup-v2.rst
//!   "Delegation Containment"); a refusal reaches the child as EACCES or
//!   EPERM, and the run fails closed.
//! - `memory.max` (v2) and `memory.limit_in_bytes` (v1) make the kernel
//!   reclaim and then OOM-kill inside the cgroup; `memory.oom.group` (v2)
//!   kills the whole cgroup at once; `memory.events` and
//!   `memory.oom_control` count those kills (`oom_kill`). `pids.max` makes
//!   fork(2) and clone(2) fail with EAGAIN past the count; `pids.events`
//!   counts the refusals (`max`), `pids.peak` (Linux 6.13) the most at once.
//! - `cpu.stat` (every v2 cgroup, no controller needed) and
//!   `cpuacct.usage_user`/`usage_sys` (v1, nanoseconds) count the CPU time
//!   of every process that ran in the cgroup, exited ones included.
//! - `cgroup.kill` (v2, Linux 5.14) SIGKILLs every process in the cgroup
//!   and its descendants at once, forks in flight included.
//! - rmdir(2) of a cgroup succeeds once no live process is in it (zombies
//!   have left it already).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use nix::unistd::{AccessFlags, access};

/// Which cgroup hierarchy a directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// A v1 hierarchy of its own controllers.
    V1,
    /// The unified hierarchy.
    V2,
}

impl Version {
    /// `cgroup-v1` or `cgroup-v2`, as facts and `explain` name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "cgroup-v1",
            Version::V2 => "cgroup-v2",
        }
    }
}

/// One mounted hierarchy, as this process sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    pub(crate) version: Version,
    /// The directory of this process's own cgroup in it.
    pub(crate) own: PathBuf,
    /// The mount point (the visible root).
    pub(crate) mount: PathBuf,
    /// v1: the controllers bound to it (`memory`, `pids`, `cpuacct`, ...).
    /// v2: those of this process's own cgroup (`cgroup.controllers`: what
    /// its parent enables).
    pub(crate) controllers: Vec<String>,
}

/// The hierarchies this process can reach: each mount of a cgroup file
/// system whose subtree holds this process's cgroup, one per hierarchy.
pub(crate) fn hierarchies() -> Vec<Hierarchy> {
    let (Ok(cgroup), Ok(mountinfo)) = (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return Vec::new();
    };
    let mut hs = parse_hierarchies(&cgroup, &mountinfo);
    for h in hs.iter_mut().filter(|h| h.version == Version::V2) {
        h.controllers = read_small(&h.own.join("cgroup.controllers"))
            .map(|t| t.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
    }
    hs
}

/// [`hierarchies`] from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
pub(crate) fn parse_hierarchies(cgroup: &str, mountinfo: &str) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for m in crate::sys::procfs::parse_mountinfo(mountinfo.as_bytes()) {
        let (version, controllers) = match m.fstype.as_slice() {
            b"cgroup2" => (Version::V2, Vec::new()),
            b"cgroup" => {
                let supers = String::from_utf8_lossy(&m.super_options);
                let known = ["memory", "pids", "cpuacct", "cpu", "freezer"];
                let c: Vec<String> = supers
                    .split(',')
                    .filter(|o| known.contains(o))
                    .map(String::from)
                    .collect();
                if c.is_empty() {
                    continue;
                }
                (Version::V1, c)
            }
            _ => continue,
        };
        // This process's path in that hierarchy.
        let path = cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (id, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = match version {
                Version::V2 => id == "0" && list.is_empty(),
                Version::V1 => {
                    let names: Vec<&str> = list.split(',').collect();
                    controllers.iter().all(|c| names.contains(&c.as_str()))
                }
            };
            matches.then_some(path)
        });
        let Some(path) = path else { continue };
        let (root, mount) = (m.root, m.mount_point);
        // The mount shows the subtree `root`: our cgroup must be inside it.
        let Some(rel) = Path::new(path).strip_prefix(&root).ok() else {
            continue;
        };
        if out
            .iter()
            .any(|h| h.version == version && h.controllers == controllers)
        {
            continue;
        }
        let own = if rel.as_os_str().is_empty() {
            PathBuf::from(&mount)
        } else {
            Path::new(&mount).join(rel)
        };
        out.push(Hierarchy {
            version,
            own,
            mount,
            controllers,
        });
    }
    out
}

/// The directory under which a run's cgroups are made, in one hierarchy,
/// and the controllers it can give them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) version: Version,
    /// The `dsh-exec` directory (made on first use).
    pub(crate) base: PathBuf,
    /// The controllers a run's cgroup there can have (v1: those of the
    /// hierarchy; v2: the parent's `cgroup.subtree_control`).
    pub(crate) controllers: Vec<String>,
}

/// Where this user can make run cgroups in `h`, or why not; `controllers`
/// says whether the run cgroups need controllers enabled (v2; v1 always
/// has its own).
///
/// Inside this process's own cgroup, where it can: a `dsh-exec` directory
/// there, so that a run stays within whatever limits this process's own
/// cgroup is under (a nested run, a `systemd-run --scope -p MemoryMax=`).
/// That is always so in v1, and in v2 for a run cgroup without
/// controllers (CPU time, `cgroup.kill`). v2's no-internal-process rule
/// forbids enabling controllers below a cgroup that holds processes, as
/// this process's does: a run cgroup with controllers goes beside it, in
/// its parent (inside it only at the hierarchy's root, which the rule
/// exempts), whose `cgroup.subtree_control` must already enable them
/// (dsh-exec changes no directory but its own). A place beside would
/// escape the limits of this process's own cgroup: it is refused when
/// that cgroup sets any (`memory.max`, `memory.high`, `memory.swap.max`,
/// `pids.max`, `cpu.max`, `io.max`), and when it is itself a dsh-exec run
/// cgroup (a nested run).
pub(crate) fn place(h: &Hierarchy, controllers: bool) -> Result<Place, String> {
    let parent = match h.version {
        Version::V1 => h.own.clone(),
        Version::V2 if !controllers || h.own == h.mount => h.own.clone(),
        Version::V2 => {
            escapes_own_limits(&h.own)?;
            match h.own.parent() {
                Some(p) if p.starts_with(&h.mount) => p.to_path_buf(),
                _ => return Err(format!("{} has no parent", h.own.display())),
            }
        }
    };
    let base = parent.join("dsh-exec");
    let writable = |p: &Path| access(p, AccessFlags::W_OK);
    match writable(&base) {
        Ok(()) => {}
        Err(nix::errno::Errno::ENOENT) => writable(&parent)
            .map_err(|e| format!("cannot create {}: {}", base.display(), e.desc()))?,
        Err(e) => return Err(format!("{}: {}", base.display(), e.desc())),
    }
    let controllers = match h.version {
        Version::V1 => h.controllers.clone(),
        // What the parent enables for its children is all our own
        // directory can enable for the run cgroups (also at the root,
        // whose cgroup.subtree_control dsh-exec does not change).
        Version::V2 if controllers => {
            std::fs::read_to_string(parent.join("cgroup.subtree_control"))
                .map(|t| t.split_whitespace().map(String::from).collect())
                .unwrap_or_default()
        }
        Version::V2 => Vec::new(),
    };
    Ok(Place {
        version: h.version,
        base,
        controllers,
    })
}

/// Errs when a run cgroup beside `own` (a v2 cgroup) would escape limits
/// that `own` is under: its own limit files set, or `own` a dsh-exec run
/// cgroup.
fn escapes_own_limits(own: &Path) -> Result<(), String> {
    if own.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new("dsh-exec")) {
        return Err(format!(
            "this process runs in the run cgroup {} of another dsh-exec; a cgroup beside it \
             would escape that run's limits",
            own.display()
        ));
    }
    for (file, unlimited) in [
        ("memory.max", "max"),
        ("memory.high", "max"),
        ("memory.swap.max", "max"),
        ("pids.max", "max"),
        ("cpu.max", "max 100000"),
        ("io.max", ""),
    ] {
        if let Some(text) = read_small(&own.join(file))
            && text.trim() != unlimited
        {
            return Err(format!(
                "this process's cgroup {} sets {file} ({}); a cgroup beside it would escape that",
                own.display(),
                text.trim()
            ));
        }
    }
    Ok(())
}

/// The limits a run's cgroup is made with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Bytes of memory of the whole tree (swap not allowed on top).
    pub(crate) memory_max: Option<u64>,
    /// Processes and threads at once.
    pub(crate) pids_max: Option<u64>,
}

/// A run's own cgroup in one hierarchy, removed when dropped (once empty).
#[derive(Debug)]
pub(crate) struct Leaf {
    pub(crate) version: Version,
    pub(crate) dir: PathBuf,
    /// The controllers it was made for (`memory`, `pids`, `cpuacct`; for
    /// v2 also none at all, for `cpu.stat` and `cgroup.kill`).
    pub(crate) controllers: Vec<&'static str>,
    /// The file the child writes `0` to, open for writing: `cgroup.procs`
    /// (v2), `tasks` (v1: see the module's notes).
    pub(crate) procs: std::fs::File,
    /// The directory itself (`O_DIRECTORY`), for clone3 `CLONE_INTO_CGROUP`.
    dir_fd: std::fs::File,
    /// The highest `pids.current` seen, where `pids.peak` is missing.
    sampled_pids: AtomicU32,
}

/// Numbers the names of the run cgroups one process makes.
static SEQUENCE: AtomicU32 = AtomicU32::new(0);

fn write_file(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(name))
        .map_err(|e| io::Error::new(e.kind(), format!("{}/{name}: {e}", dir.display())))?;
    f.write_all(value.as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {value} to {}/{name}: {e}", dir.display()),
        )
    })
}

/// Reads a small cgroup file with read(2) alone (cgroup files report size 0).
fn read_small(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = String::with_capacity(256);
    f.read_to_string(&mut buf).ok()?;
    Some(buf)
}

/// The value of `key` in a flat-keyed file (`key value` lines).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// This process as the run cgroups' names give it: its pid and start time
/// as `/proc` shows them (readlink of `/proc/self`: in a PID namespace
/// with the host's `/proc`, as a job's command has, the host's pid, which
/// names the process uniquely where the namespace's own would collide),
/// and its start time (field 22 of proc_pid_stat(5)), against pid reuse.
fn identity() -> (i32, u64) {
    let pid = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str()?.parse().ok())
        .unwrap_or_else(|| std::process::id() as i32);
    (pid, crate::proctree::live_start_time(pid).unwrap_or(0))
}

/// Removes `dir` and the cgroups below it (a nested run's `dsh-exec`
/// directory) once none holds a process; at most 8 levels deep.
fn remove_tree(dir: &Path, depth: u32) -> io::Result<()> {
    if depth > 0
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = remove_tree(&e.path(), depth - 1);
            }
        }
    }
    std::fs::remove_dir(dir)
}

/// Removes run cgroups under `base` whose `dsh-exec` is gone (one killed
/// by SIGKILL leaves its own behind), judged by the pid and start time in
/// the name (`run-PIDNS-PID-START-N`), as `/proc` shows them; a populated
/// one stays (rmdir(2) refuses it).
///
/// Only the runs of this process's own PID namespace (`PIDNS`, the
/// inode of `/proc/self/ns/pid`: pid_namespaces(7)) are judged: a
/// `dsh-exec` in another one (PID 1 of a container that shares the
/// cgroup tree) cannot see their pids in its `/proc`, and once took a
/// running `dsh-exec`'s fresh cgroup for stale and removed it, whose
/// clone3(2) into it then failed with ENOENT.
fn prune_stale(base: &Path, me: (u64, i32, u64)) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((ns, pid, start)) = name
            .to_str()
            .and_then(|n| n.strip_prefix("run-"))
            .and_then(crate::proctree::owner_in_name)
        else {
            continue;
        };
        if ns != me.0 || (pid, start) == (me.1, me.2) {
            continue;
        }
        if crate::proctree::live_start_time(pid) != Some(start) {
            let _ = remove_tree(&e.path(), 8);
        }
    }
}

impl Leaf {
    /// Makes a run cgroup at `place` with `controllers` and `settings`.
    ///
    /// Errors (with the path and the step in the message) when a directory
    /// cannot be made, a controller cannot be enabled or a limit cannot be
    /// written; nothing is left behind then.
    pub(crate) fn create(
        place: &Place,
        controllers: Vec<&'static str>,
        settings: Settings,
    ) -> io::Result<Leaf> {
        match std::fs::create_dir(&place.base) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("creating {}: {e}", place.base.display()),
                ));
            }
        }
        if place.version == Version::V2 {
            // Our directory enables, for the run cgroups in it, the
            // controllers they need (idempotent).
            let wanted: Vec<String> = controllers
                .iter()
                .filter(|c| **c != "cpuacct")
                .map(|c| format!("+{c}"))
                .collect();
            if !wanted.is_empty() {
                write_file(&place.base, "cgroup.subtree_control", &wanted.join(" "))?;
            }
        }
        let me = identity();
        let ns = crate::proctree::pid_namespace();
        prune_stale(&place.base, (ns, me.0, me.1));
        let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let dir = place.base.join(format!("run-{ns}-{}-{}-{n}", me.0, me.1));
        std::fs::create_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        let made = || -> io::Result<(std::fs::File, std::fs::File)> {
            apply(place.version, &dir, &controllers, settings)?;
            let join = match place.version {
                Version::V2 => "cgroup.procs",
                Version::V1 => "tasks",
            };
            let procs = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join(join))
                .map_err(|e| io::Error::new(e.kind(), format!("{}/{join}: {e}", dir.display())))?;
            Ok((procs, std::fs::File::open(&dir)?))
        };
        match made() {
            Ok((procs, dir_fd)) => Ok(Leaf {
                version: place.version,
                dir,
                controllers,
                procs,
                dir_fd,
                sampled_pids: AtomicU32::new(0),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The directory's descriptor.
    pub(crate) fn dir_fd(&self) -> i32 {
        self.dir_fd.as_raw_fd()
    }

    /// The descriptor the child writes `0` to.
    pub(crate) fn procs_fd(&self) -> i32 {
        self.procs.as_raw_fd()
    }

    fn has(&self, controller: &str) -> bool {
        self.controllers.contains(&controller)
    }

    fn read(&self, name: &str) -> Option<String> {
        read_small(&self.dir.join(name))
    }

    /// OOM kills inside the cgroup so far (`oom_kill`), when it has the
    /// memory controller.
    pub(crate) fn oom_kills(&self) -> Option<u64> {
        if !self.has("memory") {
            return None;
        }
        match self.version {
            Version::V2 => keyed(&self.read("memory.events")?, "oom_kill"),
            Version::V1 => keyed(&self.read("memory.oom_control")?, "oom_kill"),
        }
    }

    /// The most memory the cgroup used at once, in bytes (page cache
    /// included, as the limit counts it; v1: plus the peak of TCP buffers,
    /// counted apart).
    pub(crate) fn peak_memory(&self) -> Option<u64> {
        if !self.has("memory") {
            return None;
        }
        let number = |file| self.read(file)?.trim().parse::<u64>().ok();
        match self.version {
            Version::V2 => number("memory.peak"),
            // TCP buffers have their own counter in v1 (see `apply`); the
            // sum of the two peaks bounds the peak of the sum.
            Version::V1 => Some(
                number("memory.max_usage_in_bytes")?
                    + number("memory.kmem.tcp.max_usage_in_bytes").unwrap_or(0),
            ),
        }
    }

    /// Forks refused by `pids.max` so far.
    pub(crate) fn pids_refusals(&self) -> Option<u64> {
        if !self.has("pids") {
            return None;
        }
        keyed(&self.read("pids.events")?, "max")
    }

    /// Notes `pids.current`, for kernels without `pids.peak`.
    pub(crate) fn sample_pids(&self) {
        if self.has("pids")
            && let Some(n) = self
                .read("pids.current")
                .and_then(|t| t.trim().parse::<u32>().ok())
        {
            self.sampled_pids.fetch_max(n, Ordering::Relaxed);
        }
    }

    /// The most processes and threads at once, and whether the kernel
    /// counted it (`pids.peak`) or it is the highest sample.
    pub(crate) fn peak_pids(&self) -> Option<(u64, bool)> {
        if !self.has("pids") {
            return None;
        }
        match self.read("pids.peak").and_then(|t| t.trim().parse().ok()) {
            Some(n) => Some((n, true)),
            None => Some((u64::from(self.sampled_pids.load(Ordering::Relaxed)), false)),
        }
    }

    /// (user µs, system µs) of everything that ran in the cgroup.
    pub(crate) fn cpu_usage(&self) -> Option<(u64, u64)> {
        match self.version {
            Version::V2 => {
                let text = self.read("cpu.stat")?;
                Some((keyed(&text, "user_usec")?, keyed(&text, "system_usec")?))
            }
            Version::V1 if self.has("cpuacct") => {
                let ns = |f| self.read(f)?.trim().parse::<u64>().ok();
                Some((
                    ns("cpuacct.usage_user")? / 1000,
                    ns("cpuacct.usage_sys")? / 1000,
                ))
            }
            Version::V1 => None,
        }
    }

    /// Total CPU time of the cgroup in µs, at the kernel's precision
    /// (`usage_usec`; `cpuacct.usage`).
    pub(crate) fn cpu_total(&self) -> Option<u64> {
        match self.version {
            Version::V2 => keyed(&self.read("cpu.stat")?, "usage_usec"),
            Version::V1 if self.has("cpuacct") => {
                Some(self.read("cpuacct.usage")?.trim().parse::<u64>().ok()? / 1000)
            }
            Version::V1 => None,
        }
    }
}

/// Writes the limits into a fresh run cgroup.
fn apply(version: Version, dir: &Path, controllers: &[&str], s: Settings) -> io::Result<()> {
    if let (Some(max), true) = (s.memory_max, controllers.contains(&"memory")) {
        match version {
            Version::V2 => {
                write_file(dir, "memory.max", &max.to_string())?;
                // No swap on top of the limit (a kernel without swap
                // accounting has no such file).
                if dir.join("memory.swap.max").exists() {
                    write_file(dir, "memory.swap.max", "0")?;
                }
                // An OOM kill ends the whole tree at once, not one process.
                if dir.join("memory.oom.group").exists() {
                    write_file(dir, "memory.oom.group", "1")?;
                }
            }
            Version::V1 => {
                write_file(dir, "memory.limit_in_bytes", &max.to_string())?;
                // memory+swap no larger than memory: no swap on top. The
                // file exists only with swap accounting.
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write_file(dir, "memory.memsw.limit_in_bytes", &max.to_string())?;
                }
                // v1 does not charge TCP socket buffers to the memory
                // limit unless they have a limit of their own
                // (cgroup-v1/memory.rst, "kernel memory extension"): the
                // same size, so that queued data cannot exceed it either
                // (the two counters are separate: up to twice the limit
                // in all).
                if dir.join("memory.kmem.tcp.limit_in_bytes").exists() {
                    write_file(dir, "memory.kmem.tcp.limit_in_bytes", &max.to_string())?;
                }
            }
        }
    }
    if let (Some(max), true) = (s.pids_max, controllers.contains(&"pids")) {
        write_file(dir, "pids.max", &max.to_string())?;
    }
    Ok(())
}

impl Drop for Leaf {
    /// Removes the cgroup once its processes are gone (with the cgroups a
    /// nested run left in it): rmdir(2), retried for up to 100 ms while
    /// the last exits finish; left in place (and pruned by a later run) if
    /// something still lives in it.
    fn drop(&mut self) {
        for _ in 0..20 {
            match remove_tree(&self.dir, 8) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(nix::libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(_) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 24 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
35 31 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
36 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
37 31 0:32 / /sys/fs/cgroup/pids rw,relatime shared:16 - cgroup cgroup rw,pids
38 31 0:33 / /sys/fs/cgroup/systemd rw,relatime shared:17 - cgroup cgroup rw,xattr,name=systemd
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/user.slice
4:memory:/process_api/abc
2:cpu,cpuacct:/
0::/
";

    #[test]
    fn a_hybrid_host_has_a_unified_hierarchy_and_one_per_v1_controller_group() {
        let hs = parse_hierarchies(HYBRID_CGROUP, HYBRID_MOUNTS);
        let seen: Vec<(Version, &str, Vec<String>)> = hs
            .iter()
            .map(|h| (h.version, h.own.to_str().unwrap(), h.controllers.clone()))
            .collect();
        assert_eq!(
            seen,
            vec![
                (Version::V2, "/sys/fs/cgroup/unified", vec![]),
                (
                    Version::V1,
                    "/sys/fs/cgroup/memory/process_api/abc",
                    vec!["memory".to_string()]
                ),
                (
                    Version::V1,
                    "/sys/fs/cgroup/cpu,cpuacct",
                    vec!["cpu".to_string(), "cpuacct".to_string()]
                ),
                (
                    Version::V1,
                    "/sys/fs/cgroup/pids/user.slice",
                    vec!["pids".to_string()]
                ),
            ]
        );
    }

    #[test]
    fn a_mount_of_a_subtree_maps_the_path_inside_it_and_skips_others() {
        // A container's view: the mount shows /docker/x, and this process
        // is in /docker/x/app; a mount of an unrelated subtree is useless.
        let mounts = "\
40 31 0:27 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw
41 31 0:27 /other /mnt/other rw - cgroup2 cgroup2 rw
";
        let hs = parse_hierarchies("0::/docker/x/app\n", mounts);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].own, Path::new("/sys/fs/cgroup/app"));
        assert_eq!(hs[0].mount, Path::new("/sys/fs/cgroup"));
    }

    #[test]
    fn flat_keyed_files_are_read_by_key() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed(text, "oom_kill"), Some(3));
        assert_eq!(keyed(text, "missing"), None);
        assert_eq!(keyed("usage_usec 12\nuser_usec 7\n", "user_usec"), Some(7));
    }
}
