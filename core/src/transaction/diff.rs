//! `diff`: a transaction's changes as a unified diff (text files) and a
//! line per other change (binary files with their sizes, directories,
//! symlinks, removals), computed with the `similar` crate.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{ChangeKind, EntryKind, failed, read_meta};
use crate::error::Error;

/// The largest file shown as text; larger ones are named with their sizes.
const TEXT_MAX: u64 = 8 << 20;

/// Transaction `id`'s changes as a unified diff, limited to the paths
/// under one of `only` (absolute; empty: every change).
///
/// # Errors
/// [`Error::Transaction`]: unknown id, unreadable record.
pub fn diff(state_dir: &Path, id: &str, only: &[PathBuf]) -> Result<String, Error> {
    let meta = read_meta(state_dir, id)?;
    super::decidable(&meta, false)?;
    let mut changes = Vec::new();
    for layer in &meta.layers {
        super::changes(layer, &mut changes).map_err(|e| failed(id, e))?;
    }
    changes.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out = String::new();
    for c in changes
        .iter()
        .filter(|c| only.is_empty() || only.iter().any(|o| c.path.starts_with(o)))
    {
        let Some(layer) = meta.layers.iter().find(|l| c.path.starts_with(&l.root)) else {
            continue;
        };
        let rel = c.path.strip_prefix(&layer.root).unwrap_or(&c.path);
        let shown = c.path.display();
        if c.kind != EntryKind::File {
            let what = match c.change {
                ChangeKind::Created => "created",
                ChangeKind::Modified => "modified",
                ChangeKind::Deleted => "deleted",
            };
            let kind = match c.kind {
                EntryKind::Dir => "directory",
                EntryKind::Symlink => "symlink",
                _ => "special file",
            };
            out.push_str(&format!("{kind} {what}: {shown}"));
            if !c.what.is_empty() {
                out.push_str(&format!(" ({})", c.what.join(", ")));
            }
            out.push('\n');
            continue;
        }
        let old = match c.change {
            ChangeKind::Created => Some(Vec::new()),
            _ => read_beneath(&layer.root, rel),
        };
        let new = match c.change {
            ChangeKind::Deleted => Some(Vec::new()),
            _ => read_beneath(&layer.upper, rel),
        };
        let (Some(old), Some(new)) = (old, new) else {
            out.push_str(&format!(
                "Files {shown} differ (too large or unreadable to show)\n"
            ));
            continue;
        };
        match (std::str::from_utf8(&old), std::str::from_utf8(&new)) {
            (Ok(a), Ok(b)) if !a.contains('\0') && !b.contains('\0') => {
                if a == b {
                    out.push_str(&format!(
                        "File {shown}: same content ({})\n",
                        c.what.join(", ")
                    ));
                    continue;
                }
                let from = if c.change == ChangeKind::Created {
                    "/dev/null".to_string()
                } else {
                    format!("a{shown}")
                };
                let to = if c.change == ChangeKind::Deleted {
                    "/dev/null".to_string()
                } else {
                    format!("b{shown}")
                };
                let diff = similar::TextDiff::from_lines(a, b);
                out.push_str(&format!(
                    "{}",
                    diff.unified_diff().context_radius(3).header(&from, &to)
                ));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(&format!(
                "Binary file {shown}: {} bytes -> {} bytes\n",
                old.len(),
                new.len()
            )),
        }
    }
    Ok(out)
}

/// The bytes of `rel` beneath `root`, no symlink followed; `None` when it
/// cannot be read or is larger than [`TEXT_MAX`].
fn read_beneath(root: &Path, rel: &Path) -> Option<Vec<u8>> {
    use nix::libc;
    use std::os::unix::ffi::OsStrExt;
    let dir = crate::sys::fs::open_no_symlinks(root, libc::O_RDONLY | libc::O_DIRECTORY).ok()?;
    let fd = crate::sys::fs::open_at2(
        std::os::fd::AsRawFd::as_raw_fd(&dir),
        rel.as_os_str().as_bytes(),
        libc::O_RDONLY,
        crate::sys::fs::RESOLVE_BENEATH
            | crate::sys::fs::RESOLVE_NO_SYMLINKS
            | crate::sys::fs::RESOLVE_NO_MAGICLINKS,
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    if file.metadata().ok()?.len() > TEXT_MAX {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(TEXT_MAX).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
