//! Submodules in a protected repository: the one way left to make the
//! next `git status` outside run a command of the run's choosing.
//!
//! `.git/config` and `.git/hooks` of a protected repository stay read-only,
//! but its index does not (`git add` writes it), nor the worktrees of its
//! submodules. `git status` recurses into every populated gitlink (mode
//! 160000) of the index, and runs git there with that repository's config
//! and hooks. So after every run, each gitlink of each protected index (and,
//! recursively, of the submodules' own indexes, [`MAX_DEPTH`] deep) is
//! looked at, reached from the worktree without following a symlink:
//! - a `.git` that is a file (`gitdir: PATH`) or a symlink, made or changed
//!   during the run, is renamed aside whatever it names: git would follow
//!   it anywhere (through symlinks, `..`, a multi-line path), and a
//!   legitimate `git submodule update` cannot make one in a protected
//!   repository anyway (`.git/modules` is protected);
//! - a `.git` directory, or the directory a `.git` file made earlier names
//!   (resolved as git does: the whole file but its trailing newlines,
//!   through the file system), whose config or a hook changed during the
//!   run (ctime, which no process can set back: inode(7)) is checked, and a
//!   config that names a command or a hook that could run gets the `.git`
//!   entry renamed aside.
//!
//! The renamed entries are `NAME.dsh-exec-quarantined`, reported as
//! `quarantined`. The index format is git's documented one
//! (gitformat-index(5), versions 2 to 4); the keys that run commands are
//! those git-config(1) documents as taking a command or a program.

use std::ffi::{OsStr, OsString};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::protect::ProtectedChange;

/// The largest index read: 256 MiB.
const INDEX_MAX: u64 = 256 << 20;

/// A protected repository's index as it was before the run.
#[derive(Debug, Clone)]
pub(crate) struct IndexWatch {
    /// The worktree (the directory holding `.git`).
    worktree: PathBuf,
    /// When the run started, as the file system stamps it: a change at or
    /// after it (ctime) may be the run's. See [`IndexWatch::record`].
    since: (i64, i64),
}

/// How deep submodules of submodules are followed.
pub(crate) const MAX_DEPTH: usize = 4;

/// The most gitlinks looked at per protected repository.
const MAX_LINKS: usize = 10_000;

/// Whether the inode behind `m` changed at or after `since` (ctime). A
/// ctime with no nanoseconds comes from a file system that stamps whole
/// seconds (or two, FAT): compared by the second, less one.
fn changed_since(m: &std::fs::Metadata, since: (i64, i64)) -> bool {
    if m.ctime_nsec() == 0 {
        return m.ctime() >= since.0 - 1;
    }
    (m.ctime(), m.ctime_nsec()) >= since
}

impl IndexWatch {
    /// The index of the repository whose worktree is `worktree`, now.
    ///
    /// The start is the kernel's coarse clock (`CLOCK_REALTIME_COARSE`,
    /// clock_gettime(2)), which local file systems stamp changes from
    /// (current_time(), fs/inode.c; multigrain stamps are finer, never
    /// older): a file changed after this moment has a ctime at or after
    /// it, and one changed a moment before the run (a submodule just
    /// cloned) does not count as the run's. On other file systems (NFS,
    /// FUSE: the server's clock) a second is taken off for skew.
    pub(crate) fn record(worktree: &Path) -> IndexWatch {
        use nix::sys::statfs;
        use nix::time::{ClockId, clock_gettime};
        let coarse = if let Ok(ts) = clock_gettime(ClockId::CLOCK_REALTIME_COARSE) {
            (ts.tv_sec(), ts.tv_nsec())
        } else {
            // Unreachable on Linux 2.6.32+; a second back is always safe.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (now.as_secs() as i64 - 1, i64::from(now.subsec_nanos()))
        };
        let local = statfs::statfs(worktree).is_ok_and(|f| {
            [
                statfs::EXT4_SUPER_MAGIC,
                statfs::XFS_SUPER_MAGIC,
                statfs::BTRFS_SUPER_MAGIC,
                statfs::TMPFS_MAGIC,
                statfs::OVERLAYFS_SUPER_MAGIC,
            ]
            .contains(&f.filesystem_type())
        });
        let since = if local {
            coarse
        } else {
            (coarse.0 - 1, coarse.1)
        };
        IndexWatch {
            worktree: worktree.to_path_buf(),
            since,
        }
    }

    /// After the run: puts aside what the gitlinks of the index lead to
    /// that the run could have planted (see the module documentation).
    pub(crate) fn check(&self) -> Vec<ProtectedChange> {
        let mut changes = Vec::new();
        let mut budget = MAX_LINKS;
        self.check_index(
            &self.worktree.join(".git/index"),
            Path::new(""),
            0,
            &mut budget,
            &mut changes,
        );
        changes
    }

    /// The gitlinks of the index at `index`, of the (sub)repository whose
    /// worktree is `at` below the protected worktree.
    fn check_index(
        &self,
        index: &Path,
        at: &Path,
        depth: usize,
        budget: &mut usize,
        changes: &mut Vec<ProtectedChange>,
    ) {
        let Ok(bytes) = read_index(index) else {
            return;
        };
        for link in gitlinks(&bytes) {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let rel = Path::new(OsStr::from_bytes(&link));
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                continue;
            }
            let rel = at.join(rel);
            if let Some(gitdir) = self.check_link(&rel, changes)
                && depth + 1 < MAX_DEPTH
            {
                self.check_index(&gitdir.join("index"), &rel, depth + 1, budget, changes);
            }
        }
    }
}

fn read_index(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    let mut bytes = Vec::new();
    f.take(INDEX_MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The paths of the gitlink entries (mode 160000) of an index
/// (gitformat-index(5)): a 12-byte header `DIRC`, version, count; then each
/// entry: 40 bytes of stat data (mode at offset 24), the object id (20
/// bytes, or 32 for SHA-256: told apart by where the path ends), 16 bits of
/// flags (and 16 more in version 3 when the extended bit is set), the path;
/// versions 2 and 3 pad each entry with NULs to a multiple of 8, version 4
/// compresses the path against the previous one. A malformed index gives
/// what was read before the fault.
pub(crate) fn gitlinks(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if b.len() < 12 || &b[..4] != b"DIRC" {
        return out;
    }
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let version = be32(4);
    let count = be32(8) as usize;
    if !(2..=4).contains(&version) {
        return out;
    }
    // SHA-1 unless the repository says otherwise; try both, keeping the
    // one whose entries parse to the end.
    for hash in [20usize, 32] {
        if let Some(links) = parse_entries(b, version, count, hash) {
            return links;
        }
    }
    out.clear();
    out
}

fn parse_entries(b: &[u8], version: u32, count: usize, hash: usize) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut at = 12usize;
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let fixed = at.checked_add(40 + hash + 2)?;
        if fixed > b.len() {
            return None;
        }
        let mode = u32::from_be_bytes(b[at + 24..at + 28].try_into().ok()?);
        let flags = u16::from_be_bytes(b[at + 40 + hash..at + 42 + hash].try_into().ok()?);
        at = fixed;
        if version >= 3 && flags & 0x4000 != 0 {
            at = at.checked_add(2)?;
        }
        let path = if version == 4 {
            // A varint: how many bytes of the previous path to drop.
            let mut drop = 0usize;
            loop {
                let byte = *b.get(at)?;
                at += 1;
                drop = (drop << 7) | usize::from(byte & 0x7f);
                if byte & 0x80 == 0 {
                    break;
                }
                drop += 1;
            }
            let end = at + b.get(at..)?.iter().position(|c| *c == 0)?;
            let keep = previous.len().checked_sub(drop)?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(&b[at..end]);
            at = end + 1;
            path
        } else {
            let end = at + b.get(at..)?.iter().position(|c| *c == 0)?;
            let path = b[at..end].to_vec();
            // Padded with 1 to 8 NULs to a multiple of 8 from the entry's start.
            let len = end - start;
            at = start + (len + 8) / 8 * 8;
            path
        };
        if at > b.len() || path.is_empty() {
            return None;
        }
        if mode & 0o170000 == 0o160000 {
            out.push(path.clone());
        }
        previous = path;
    }
    Some(out)
}

/// The command-running keys of a git config (git-config(1)): whole
/// sections whose values are commands or pull in other files, and single
/// keys elsewhere. Names compared in lower case; `x.*.y` as `x.y`.
fn runs_commands(config: &str) -> Option<String> {
    const SECTIONS: [&str; 15] = [
        "alias",
        "pager",
        "filter",
        "credential",
        "include",
        "includeif",
        "gpg",
        "difftool",
        "mergetool",
        "browser",
        "man",
        "web",
        "sendemail",
        "instaweb",
        "uploadpack",
    ];
    const KEYS: [&str; 17] = [
        "core.fsmonitor",
        "core.hookspath",
        "core.sshcommand",
        "core.editor",
        "core.pager",
        "core.askpass",
        "core.gitproxy",
        "core.alternaterefscommand",
        "core.worktree",
        "sequence.editor",
        "diff.external",
        "diff.textconv",
        "diff.command",
        "merge.driver",
        "submodule.update",
        "remote.uploadpack",
        "remote.receivepack",
    ];
    let mut section = String::new();
    // git skips a UTF-8 byte order mark at the start (config.c).
    let config = config.strip_prefix('\u{feff}').unwrap_or(config);
    for line in config.lines() {
        let mut line = line.trim();
        // `[section] key = value` is one line to git: the header, then a key.
        while let Some(head) = line.strip_prefix('[') {
            // [section] or [section "subsection"]
            let (head, rest) = head.split_once(']').unwrap_or((head, ""));
            section = head
                .split(|c: char| c.is_whitespace() || c == '"')
                .next()
                .unwrap_or("")
                .to_lowercase();
            if SECTIONS.contains(&section.as_str()) {
                return Some(section);
            }
            // [section.subsection] (the older form)
            if let Some((s, _)) = section.split_once('.') {
                section = s.to_string();
            }
            line = rest.trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let key = line
            .split(|c: char| c == '=' || c.is_whitespace())
            .next()
            .unwrap_or("")
            .to_lowercase();
        let name = format!("{section}.{key}");
        if KEYS.contains(&name.as_str()) || name == "interactive.difffilter" {
            return Some(name);
        }
    }
    None
}

/// Whether a hooks directory holds a hook git would run: an executable
/// regular file (or symlink) whose name has no `.sample` ending.
fn live_hook(hooks: &Path) -> Option<OsString> {
    std::fs::read_dir(hooks)
        .ok()?
        .flatten()
        .find_map(|e| live_hook_entry(&e.path()).then(|| e.file_name()))
}

/// Whether the hook at `path` is one git would run: not a `.sample`, and
/// an executable regular file, or a symlink to one (git follows it).
fn live_hook_entry(path: &Path) -> bool {
    let sample = path
        .file_name()
        .is_some_and(|n| n.as_bytes().ends_with(b".sample"));
    !sample && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

impl IndexWatch {
    /// Looks at the `.git` of the gitlink `rel` (below the protected
    /// worktree), reached without following a symlink; puts it aside when
    /// the run could have planted something there. Returns the git
    /// directory to recurse into, when it was left.
    fn check_link(&self, rel: &Path, changes: &mut Vec<ProtectedChange>) -> Option<PathBuf> {
        let shown = self.worktree.join(rel).join(".git");
        let anchor = super::undo::Anchor::record(&self.worktree, &shown)?;
        let mut ignored = Vec::new();
        let dir = anchor.reach_parent(&mut ignored)?;
        let dirfd = dir.as_raw_fd();
        let entry = PathBuf::from(format!("/proc/self/fd/{dirfd}/.git"));
        let meta = std::fs::symlink_metadata(&entry).ok()?;
        let mut put_aside = || {
            let moved =
                super::undo::rename_aside(dirfd, OsStr::new(".git"), ".dsh-exec-quarantined");
            changes.push(ProtectedChange {
                path: shown.clone(),
                change: "quarantined",
                restored: moved.is_ok(),
            });
        };
        let gitdir = if meta.is_dir() {
            // Through the descriptor: the path cannot be swapped now.
            let git = super::undo::open_dir_at(dirfd, OsStr::new(".git")).ok()?;
            PathBuf::from(format!("/proc/self/fd/{}", git.as_raw_fd()))
                .read_link()
                .ok()?
        } else if changed_since(&meta, self.since)
            || meta.file_type().is_symlink() && {
                // A symlink made earlier: its target may be new.
                std::fs::metadata(&entry).is_ok_and(|m| changed_since(&m, self.since))
            }
        {
            // A .git file or symlink made (or retargeted) during the run.
            put_aside();
            return None;
        } else if meta.file_type().is_symlink() {
            std::fs::canonicalize(&entry).ok()?
        } else {
            gitfile_target(&entry, &self.worktree.join(rel))?
        };
        if planted(&gitdir, self.since) {
            // A config or hook that runs commands, changed during the run.
            put_aside();
            return None;
        }
        Some(gitdir)
    }
}

/// The directory a `.git` file names, as git reads it (setup.c,
/// read_gitfile_gently): `gitdir: PATH`, the whole file but its trailing
/// newlines and carriage returns; PATH relative to the file's directory
/// `here` when not absolute; resolved through the file system (symlinks and
/// `..` as the kernel takes them). At most 64 KiB are read.
fn gitfile_target(file: &Path, here: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut text = Vec::new();
    std::fs::File::open(file)
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut text)
        .ok()?;
    while matches!(text.last(), Some(b'\n' | b'\r')) {
        text.pop();
    }
    let named = text.strip_prefix(b"gitdir: ")?;
    let named = Path::new(OsStr::from_bytes(named));
    std::fs::canonicalize(here.join(named)).ok()
}

/// Whether the git directory `git` holds, changed at or after `since`, a
/// config that names a command, a `commondir` or `config.worktree` (which
/// make git read config elsewhere), or a hook git would run.
fn planted(git: &Path, since: (i64, i64)) -> bool {
    let new = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| changed_since(&m, since))
            || std::fs::metadata(p).is_ok_and(|m| changed_since(&m, since))
    };
    for other in ["commondir", "config.worktree"] {
        if new(&git.join(other)) {
            return true;
        }
    }
    let config = git.join("config");
    if new(&config)
        && runs_commands(&std::fs::read_to_string(&config).unwrap_or_default()).is_some()
    {
        return true;
    }
    let hooks = git.join("hooks");
    new(&hooks) && live_hook(&hooks).is_some()
        || std::fs::read_dir(&hooks).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| new(&e.path()) && live_hook_entry(&e.path()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_or_a_key_on_the_header_line_hides_nothing() {
        assert_eq!(
            runs_commands("\u{feff}[core]\n\tfsmonitor = x\n").as_deref(),
            Some("core.fsmonitor")
        );
        assert_eq!(
            runs_commands("[core] fsmonitor = \"touch x\"\n").as_deref(),
            Some("core.fsmonitor")
        );
        assert_eq!(runs_commands("[user] name = a\n"), None);
    }

    #[test]
    fn command_running_keys_are_found_and_ordinary_ones_are_not() {
        let ordinary = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
            [remote \"origin\"]\n\turl = https://example.com/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
            [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[user]\n\tname = a\n";
        assert_eq!(runs_commands(ordinary), None);
        for (text, key) in [
            ("[core]\n\tfsmonitor = \"touch x\"\n", "core.fsmonitor"),
            ("[CORE]\n  hooksPath=/tmp/h\n", "core.hookspath"),
            ("[alias]\n\tst = !sh -c x\n", "alias"),
            ("[filter \"lfs\"]\n\tclean = x\n", "filter"),
            ("[diff \"bin\"]\n\ttextconv = x\n", "diff.textconv"),
            ("[includeIf \"gitdir:/\"]\n\tpath = /x\n", "includeif"),
            ("[submodule \"s\"]\n\tupdate = !x\n", "submodule.update"),
        ] {
            assert_eq!(runs_commands(text).as_deref(), Some(key), "{text}");
        }
    }

    #[test]
    fn gitlinks_are_read_from_a_real_index() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "git {args:?}");
        };
        if std::process::Command::new("git")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: git is not installed");
            return;
        }
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let oid = "0123456789012345678901234567890123456789";
        for version in ["2", "3", "4"] {
            git(&["update-index", "--add", "a.txt"]);
            git(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{oid},deep/sub/mod"),
            ]);
            git(&["update-index", "--index-version", version]);
            let bytes = std::fs::read(dir.path().join(".git/index")).unwrap();
            assert_eq!(
                gitlinks(&bytes),
                vec![b"deep/sub/mod".to_vec()],
                "version {version}"
            );
        }
    }
}
