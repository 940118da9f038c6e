//! Submodules a confined run registered in a protected repository: the
//! one way left to make the next `git status` outside run a command of its
//! choosing.
//!
//! `.git/config` and `.git/hooks` of a protected repository stay read-only,
//! but its index does not (`git add` writes it). A run can make a new
//! repository inside the worktree with `core.fsmonitor` (or a hook, an
//! alias, a filter ...) in its own config, and add it to the index as a
//! gitlink (mode 160000). `git status` in the protected repository then
//! runs git inside the submodule, with that config. So when a run changed a
//! protected repository's index, every gitlink in it whose worktree holds a
//! repository of its own is checked: a `.git` directory, or the directory a
//! `.git` file (`gitdir: PATH`, gitrepository-layout(5)) names, unless that
//! lies in the protected repository's own `.git/modules`. A config that
//! names a command or a hook that could run is renamed aside
//! (`config.dsh-exec-quarantined`, `hooks.dsh-exec-quarantined`) and
//! reported. A `.git` file whose directory cannot be checked safely (a
//! symlink on the way to it, a `commondir` of its own, a path that is not
//! UTF-8-clean) is itself renamed aside: git then sees no repository there.
//!
//! The index format is git's documented one (gitformat-index(5), versions 2
//! to 4); the keys that run commands are those git-config(1) documents as
//! taking a command or a program.

use nix::libc;
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
    /// (device, inode, ctime seconds, ctime nanoseconds, size) of
    /// `.git/index`; `None`: there was none.
    before: Option<(u64, u64, i64, i64, u64)>,
}

fn index_state(worktree: &Path) -> Option<(u64, u64, i64, i64, u64)> {
    let m = std::fs::symlink_metadata(worktree.join(".git/index")).ok()?;
    Some((m.dev(), m.ino(), m.ctime(), m.ctime_nsec(), m.size()))
}

impl IndexWatch {
    /// The index of the repository whose worktree is `worktree`, now.
    pub(crate) fn record(worktree: &Path) -> IndexWatch {
        IndexWatch {
            worktree: worktree.to_path_buf(),
            before: index_state(worktree),
        }
    }

    /// After the run: when the index changed, quarantines the configs and
    /// hooks of the gitlinks' own repositories that could run commands.
    pub(crate) fn check(&self) -> Vec<ProtectedChange> {
        if index_state(&self.worktree) == self.before {
            return Vec::new();
        }
        let Ok(bytes) = read_index(&self.worktree.join(".git/index")) else {
            return Vec::new();
        };
        let mut changes = Vec::new();
        for link in gitlinks(&bytes) {
            quarantine(&self.worktree, &link, &mut changes);
        }
        changes
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
    for line in config.lines() {
        let line = line.trim();
        if let Some(head) = line.strip_prefix('[') {
            // [section] or [section "subsection"]
            let head = head.split(']').next().unwrap_or("");
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
            continue;
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
    std::fs::read_dir(hooks).ok()?.flatten().find_map(|e| {
        let name = e.file_name();
        if name.as_bytes().ends_with(b".sample") {
            return None;
        }
        let m = e.metadata().ok()?;
        (m.is_file() && m.mode() & 0o111 != 0).then_some(name)
    })
}

/// Checks the repository of the gitlink at `link` (relative to
/// `worktree`), reached without following a symlink; quarantines its
/// config and hooks when they could run commands.
fn quarantine(worktree: &Path, link: &[u8], changes: &mut Vec<ProtectedChange>) {
    let rel = Path::new(OsStr::from_bytes(link));
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return;
    }
    let Some(anchor) = super::undo::Anchor::record(worktree, &worktree.join(rel).join(".git"))
    else {
        return;
    };
    let mut ignored = Vec::new();
    let Some(dir) = anchor.reach_parent(&mut ignored) else {
        return;
    };
    let shown = worktree.join(rel).join(".git");
    let git = match super::undo::open_dir_at(dir.as_raw_fd(), OsStr::new(".git")) {
        Ok(git) => git,
        Err(_) => match gitfile_target(worktree, rel, dir.as_raw_fd()) {
            GitFile::None | GitFile::Protected => return,
            GitFile::Dir(git, path) => {
                check_repo(&git, &path, changes);
                return;
            }
            GitFile::Unsafe => {
                let moved = super::undo::rename_aside(
                    dir.as_raw_fd(),
                    OsStr::new(".git"),
                    ".dsh-exec-quarantined",
                );
                changes.push(ProtectedChange {
                    path: shown,
                    change: "quarantined",
                    restored: moved.is_ok(),
                });
                return;
            }
        },
    };
    check_repo(&git, &shown, changes);
}

/// What a gitlink's `.git` file leads to.
enum GitFile {
    /// No `.git` file (or not one git accepts: git runs nothing there).
    None,
    /// A directory in the protected repository's `.git/modules`.
    Protected,
    /// The directory it names, opened with no symlink on the way, and its
    /// path for the report.
    Dir(std::os::fd::OwnedFd, PathBuf),
    /// A directory that cannot be checked safely.
    Unsafe,
}

/// The directory the `.git` file in `dir` (the gitlink `rel` of
/// `worktree`) names. Read once, from a descriptor opened with
/// `O_NOFOLLOW`; the first line must be `gitdir: PATH`, PATH relative to
/// the file's directory when not absolute (gitrepository-layout(5)).
fn gitfile_target(worktree: &Path, rel: &Path, dir: std::os::fd::RawFd) -> GitFile {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: openat with a literal C string; the result is checked.
    let fd = unsafe { libc::openat(dir, c".git".as_ptr(), flags) };
    if fd < 0 {
        return GitFile::None;
    }
    // SAFETY: a fresh descriptor we own.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return GitFile::None;
    }
    let mut text = String::new();
    if (&mut file).take(4096).read_to_string(&mut text).is_err() {
        return GitFile::Unsafe;
    }
    let Some(named) = text.lines().next().and_then(|l| l.strip_prefix("gitdir: ")) else {
        return GitFile::None;
    };
    let here = worktree.join(rel);
    let mut target = PathBuf::new();
    for c in here.join(named.trim_end()).components() {
        match c {
            std::path::Component::ParentDir => {
                target.pop();
            }
            std::path::Component::CurDir => {}
            other => target.push(other),
        }
    }
    let Ok(git) = super::undo::open_root(&target) else {
        // Missing: git finds no repository and runs nothing. Anything else
        // (a symlink on the way): not checked, so not left.
        return match std::fs::symlink_metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !has_symlink(&target) => {
                GitFile::None
            }
            _ => GitFile::Unsafe,
        };
    };
    if target.starts_with(worktree.join(".git").join("modules")) {
        return GitFile::Protected;
    }
    let base = PathBuf::from(format!("/proc/self/fd/{}", git.as_raw_fd()));
    if std::fs::symlink_metadata(base.join("commondir")).is_ok() {
        return GitFile::Unsafe;
    }
    GitFile::Dir(git, target)
}

/// Whether a symlink is on the way to `path` (in its existing part).
fn has_symlink(path: &Path) -> bool {
    path.ancestors()
        .any(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
}

/// Quarantines the config and hooks of the git directory `git` (shown as
/// `shown`) when they could run commands.
fn check_repo(git: &std::os::fd::OwnedFd, shown: &Path, changes: &mut Vec<ProtectedChange>) {
    let base = PathBuf::from(format!("/proc/self/fd/{}", git.as_raw_fd()));
    let config = std::fs::read_to_string(base.join("config")).unwrap_or_default();
    let mut put_aside = |name: &str| {
        let moved =
            super::undo::rename_aside(git.as_raw_fd(), OsStr::new(name), ".dsh-exec-quarantined");
        changes.push(ProtectedChange {
            path: shown.join(name),
            change: "quarantined",
            restored: moved.is_ok(),
        });
    };
    if runs_commands(&config).is_some() {
        put_aside("config");
    }
    if live_hook(&base.join("hooks")).is_some() {
        put_aside("hooks");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
