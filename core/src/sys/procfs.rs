//! The `/proc` files the core reads, one parser each (proc(5),
//! proc_pid_stat(5), proc_pid_mountinfo(5)).

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Reads a whole `/proc` file into `out` with read(2) alone: std's
/// `read_to_end` first asks fstat(2) for a size, which proc files report as
/// 0, a system call per read for nothing on the sweep's hot path. False
/// when the file cannot be opened or read (the process is gone).
pub(crate) fn read_proc(path: &str, out: &mut Vec<u8>) -> bool {
    out.clear();
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut chunk = [0u8; 512];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The fields of `/proc/PID/stat` (proc_pid_stat(5)) the core uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z`, `X`, …
    pub(crate) state: char,
    /// Field 5: the process group.
    pub(crate) pgrp: i32,
    /// Fields 14 to 17 summed: utime + stime + cutime + cstime, in clock
    /// ticks (sysconf `_SC_CLK_TCK`).
    pub(crate) cpu_ticks: u64,
    /// Field 22: the start time, in clock ticks since boot. With the pid it
    /// names a process uniquely.
    pub(crate) start_time: u64,
    /// Fields 50 and 51 (Linux 3.5): the address range of the initial
    /// environment block, when present.
    pub(crate) env: Option<(usize, usize)>,
}

impl Stat {
    /// Parses one `stat` line. The command name (field 2) may hold spaces
    /// and parentheses, so the fields are split after its last `)`.
    pub(crate) fn parse(line: &[u8]) -> Option<Stat> {
        let at = line.iter().rposition(|&b| b == b')')?;
        let text = std::str::from_utf8(&line[at + 1..]).ok()?;
        // fields[0] is field 3.
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).copied();
        let number = |n: usize| field(n)?.parse::<u64>().ok();
        let cpu_ticks = (14..=17).filter_map(number).sum();
        Some(Stat {
            state: field(3)?.chars().next()?,
            pgrp: field(5)?.parse().ok()?,
            cpu_ticks,
            start_time: number(22)?,
            env: number(50)
                .zip(number(51))
                .map(|(start, end)| (start as usize, end as usize)),
        })
    }

    /// True for a zombie (`Z`) or a dead (`X`) process.
    pub(crate) fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// The `stat` of process `pid` (`"self"` for this one), or `None` when it
/// is gone or unreadable.
pub(crate) fn stat(pid: &str) -> Option<Stat> {
    let mut buf = Vec::with_capacity(512);
    read_proc(&format!("/proc/{pid}/stat"), &mut buf)
        .then(|| Stat::parse(&buf))
        .flatten()
}

/// The children of every thread of `pid`, from
/// `/proc/PID/task/TID/children` (proc(5), Linux 3.5).
pub(crate) fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut list = Vec::with_capacity(512);
    for task in tasks.flatten() {
        let tid = task.file_name();
        let path = format!("/proc/{pid}/task/{}/children", tid.to_string_lossy());
        if read_proc(&path, &mut list) {
            out.extend(
                list.split(|b| b.is_ascii_whitespace())
                    .filter_map(|p| std::str::from_utf8(p).ok()?.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// One line of a `mountinfo` table (proc_pid_mountinfo(5)):
/// `ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL…] - TYPE SOURCE
/// SUPER-OPTIONS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// Field 1: the mount's unique ID.
    pub(crate) id: u64,
    /// Field 3: the device, `major:minor`.
    pub(crate) dev: Vec<u8>,
    /// Field 4: the root of the mount within its file system, unescaped.
    pub(crate) root: PathBuf,
    /// Field 5: the mount point, unescaped.
    pub(crate) mount_point: PathBuf,
    /// The file-system type, after the `-`.
    pub(crate) fstype: Vec<u8>,
    /// The per-superblock options, comma-separated, escapes kept (an
    /// option's value is unescaped with [`unescape`] once split).
    pub(crate) super_options: Vec<u8>,
}

/// Undoes the octal escapes (`\040` for space; also tab, newline and
/// backslash) that the kernel's `seq_file` writes in mount tables
/// (fs/proc_namespace.c, `mangle` via `seq_escape`).
pub(crate) fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The entries of a `mountinfo` table; lines that do not parse are
/// skipped.
pub(crate) fn parse_mountinfo(table: &[u8]) -> Vec<MountEntry> {
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|&b| b == b' ');
            let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
            let dev = fields.nth(1)?.to_vec();
            let root = unescape(fields.next()?);
            let mount_point = unescape(fields.next()?);
            // After the optional fields and `-`: type, source, options.
            let mut rest = fields.skip_while(|f| *f != b"-").skip(1);
            let fstype = rest.next()?.to_vec();
            let super_options = rest.nth(1).unwrap_or_default().to_vec();
            Some(MountEntry {
                id,
                dev,
                root,
                mount_point,
                fstype,
                super_options,
            })
        })
        .collect()
}

/// The mount table of process `pid` (`"self"` for this one).
pub(crate) fn mountinfo(pid: &str) -> io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&std::fs::read(format!(
        "/proc/{pid}/mountinfo"
    ))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_splits_after_the_last_parenthesis() {
        // Fields 3 to 52 after a name with spaces and parentheses: field n
        // holds n, but for the ones checked.
        let mut line = b"42 (a) b) (c)".to_vec();
        for n in 3..=52 {
            let v = match n {
                3 => "S".to_string(),
                5 => "7".to_string(),
                22 => "9876".to_string(),
                50 => "1000".to_string(),
                51 => "2000".to_string(),
                n => n.to_string(),
            };
            line.extend(format!(" {v}").as_bytes());
        }
        line.push(b'\n');
        let s = Stat::parse(&line).unwrap();
        assert_eq!(
            (s.state, s.pgrp, s.cpu_ticks, s.start_time),
            ('S', 7, 14 + 15 + 16 + 17, 9876)
        );
        assert_eq!(s.env, Some((1000, 2000)));
        let short = b"42 (x) Z 1 7 7 0 -1 0 0 0 0 0 1 1 1 1 20 0 1 0 5";
        let s = Stat::parse(short).unwrap();
        assert!(s.is_dead());
        assert_eq!((s.start_time, s.env), (5, None));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/mnt/a\040b"), PathBuf::from("/mnt/a b"));
        assert_eq!(unescape(br"/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape(br"/trailing\04"), PathBuf::from(r"/trailing\04"));
    }

    #[test]
    fn mountinfo_fields_are_unescaped() {
        let table = b"36 35 98:0 /mnt\\040a /x\\134y rw,noatime master:1 - overlay none rw,lowerdir=/l\\040o,upperdir=/u\n\
                      garbage\n\
                      37 35 0:5 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let m = parse_mountinfo(table);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].id, 36);
        assert_eq!(m[0].dev, b"98:0");
        assert_eq!(m[0].root, PathBuf::from("/mnt a"));
        assert_eq!(m[0].mount_point, PathBuf::from("/x\\y"));
        assert_eq!(m[0].fstype, b"overlay");
        assert_eq!(m[0].super_options, b"rw,lowerdir=/l\\040o,upperdir=/u");
        assert_eq!((m[1].id, m[1].fstype.as_slice()), (37, &b"cgroup2"[..]));
        assert_eq!(m[1].mount_point, PathBuf::from("/sys/fs/cgroup"));
    }
}
