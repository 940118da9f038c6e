//! The seccomp filters of a run: what Landlock does not cover.
//!
//! What it relies on from the kernel (seccomp(2), Documentation/userspace-api/
//! seccomp_filter.rst): a filter loaded after no-new-privileges runs on
//! every system call of the process and its descendants, cannot be removed,
//! and sees only the call number and the raw argument registers, never the
//! memory they point to. So these filters decide on numbers and flags only;
//! the filters are compiled in the parent with the `seccompiler` crate
//! ([`compile`]: allow everything else, fail the matched calls with one
//! errno) and loaded in the child.
//!
//! Landlock governs opening, creating, removing and renaming files, not
//! changing the attributes of existing ones, and io_uring can do socket and
//! xattr work that bypasses system-call filters. In `read-only` and
//! `workspace-write` [`confining_filter`] makes these fail with EPERM:
//!
//! - io_uring altogether (`io_uring_setup`, `_enter`, `_register`);
//! - giving files away (`chown` to another owner or group; keeping one's
//!   own, as `cp -a` does, works) and inode flags by path (`file_setattr`);
//!   extended attributes, POSIX ACLs included, fail with EOPNOTSUPP instead
//!   ([`xattr_filter`]), which tools treat as "not supported here" and work
//!   around;
//! - in `read-only`, every mode and timestamp change (`chmod`, `utimensat`
//!   and their variants); in `workspace-write`, a mode with the set-user-ID
//!   or set-group-ID bit (a mode change without them, or a timestamp change,
//!   cannot be told apart from one inside the workspace by a filter, and
//!   stays possible on files the command owns);
//! - the inode-flag and project ioctls (`FS_IOC_SETFLAGS`,
//!   `FS_IOC_FSSETXATTR`, `FS_IOC_SETVERSION`) and the terminal-injection
//!   ioctls (`TIOCSTI`, `TIOCLINUX`), which would let a command type into
//!   the caller's shell under `--interactive`;
//! - `prlimit64` on any process but itself (it could lower the limits of
//!   processes outside the sandbox, `dsh-exec` included).
//!
//! `--network deny` adds [`deny_ip_sockets`]: socket(2) and socketpair(2)
//! with `AF_INET`, `AF_INET6`, `AF_VSOCK` (a virtual machine's way to its
//! host) or `AF_PACKET` fail with EACCES, and so does io_uring, which can
//! create sockets without socket(2); Unix domain sockets keep working.
//! Landlock's TCP rules ([`super::landlock`]) add a second layer where the
//! ABI has them.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::Mode;

/// `setxattrat` and `removexattrat` (Linux 6.13, the same number on every
/// architecture), which the libc crate may not name yet.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;

/// `file_setattr` (Linux 6.17): inode flags by path.
const SYS_FILE_SETATTR: i64 = 469;

/// ioctl commands refused (linux/fs.h, ext4.h, asm-generic/ioctls.h).
const REFUSED_IOCTLS: [u64; 7] = [
    0x4008_6602, // FS_IOC_SETFLAGS
    0x4004_6602, // FS_IOC32_SETFLAGS
    0x401c_5820, // FS_IOC_FSSETXATTR
    0x4008_7602, // FS_IOC_SETVERSION
    0x4008_6604, // EXT4_IOC_SETVERSION
    0x5412,      // TIOCSTI
    0x541c,      // TIOCLINUX
];

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

/// Rules matching a mode argument at `arg` with the set-user-ID or
/// set-group-ID bit.
fn setid_mode(arg: u8) -> Result<Vec<SeccompRule>, String> {
    Ok(vec![
        rule(vec![cond(arg, SeccompCmpOp::MaskedEq(0o4000), 0o4000)?])?,
        rule(vec![cond(arg, SeccompCmpOp::MaskedEq(0o2000), 0o2000)?])?,
    ])
}

/// The extended-attribute filter: every xattr change (POSIX ACLs
/// included) fails with EOPNOTSUPP, as on a file system without xattrs, so
/// that `cp -p` and `install` fall back to a plain mode change instead of
/// failing (EPERM would be fatal to them).
pub(crate) fn xattr_filter() -> Result<Vec<libc::sock_filter>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
    ] {
        rules.insert(nr, Vec::new());
    }
    compile(rules, libc::EOPNOTSUPP)
}

/// Rules matching a chown whose owner (argument `arg`) or group (the next
/// one) is neither unchanged (-1) nor the caller's own: giving a file away
/// is refused, while `cp -a` or `tar` keeping their own ownership works.
fn foreign_owner(arg: u8, uid: u64, gid: u64) -> Result<Vec<SeccompRule>, String> {
    const UNCHANGED: u64 = 0xFFFF_FFFF;
    Ok(vec![
        rule(vec![
            cond(arg, SeccompCmpOp::Ne, UNCHANGED)?,
            cond(arg, SeccompCmpOp::Ne, uid)?,
        ])?,
        rule(vec![
            cond(arg + 1, SeccompCmpOp::Ne, UNCHANGED)?,
            cond(arg + 1, SeccompCmpOp::Ne, gid)?,
        ])?,
    ])
}

/// The compiled filter for a confining `mode`.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn confining_filter(mode: Mode) -> Result<Vec<libc::sock_filter>, String> {
    let always = Vec::new;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        SYS_FILE_SETATTR,
    ] {
        rules.insert(nr, always());
    }
    // (syscall, index of its owner argument; the group follows it)
    let mut chowns = vec![(libc::SYS_fchown, 1), (libc::SYS_fchownat, 2)];
    #[cfg(target_arch = "x86_64")]
    chowns.extend([(libc::SYS_chown, 1), (libc::SYS_lchown, 1)]);
    let (uid, gid) = (
        u64::from(nix::unistd::geteuid().as_raw()),
        u64::from(nix::unistd::getegid().as_raw()),
    );
    for (nr, arg) in chowns {
        rules.insert(nr, foreign_owner(arg, uid, gid)?);
    }
    // (syscall, index of its mode argument)
    let mut chmods = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    chmods.push((libc::SYS_chmod, 1));
    let mut times = vec![libc::SYS_utimensat];
    #[cfg(target_arch = "x86_64")]
    times.extend([libc::SYS_utime, libc::SYS_utimes, libc::SYS_futimesat]);
    if mode == Mode::ReadOnly {
        for (nr, _) in chmods {
            rules.insert(nr, always());
        }
        for nr in times {
            rules.insert(nr, always());
        }
    } else {
        for (nr, arg) in chmods {
            rules.insert(nr, setid_mode(arg)?);
        }
    }
    rules.insert(
        libc::SYS_ioctl,
        REFUSED_IOCTLS
            .iter()
            .map(|cmd| rule(vec![cond(1, SeccompCmpOp::Eq, *cmd)?]))
            .collect::<Result<_, _>>()?,
    );
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, SeccompCmpOp::Ne, 0)?])?],
    );
    compile(rules, libc::EPERM)
}

/// The seccomp architecture of this build.
fn target_arch() -> Result<TargetArch, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(TargetArch::x86_64),
        "aarch64" => Ok(TargetArch::aarch64),
        "riscv64" => Ok(TargetArch::riscv64),
        other => Err(format!("no seccomp support for architecture {other}")),
    }
}

/// The compiled filter, as the `sock_filter` instructions prctl(2) takes.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn deny_ip_sockets() -> Result<Vec<libc::sock_filter>, String> {
    let family_is = |family: i32| -> Result<SeccompRule, String> {
        let cond =
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
                .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![cond]).map_err(|e| e.to_string())
    };
    let ip_families = || -> Result<Vec<SeccompRule>, String> {
        Ok(vec![
            family_is(libc::AF_INET)?,
            family_is(libc::AF_INET6)?,
            family_is(libc::AF_VSOCK)?,
            family_is(libc::AF_PACKET)?,
        ])
    };
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_socket, ip_families()?);
    rules.insert(libc::SYS_socketpair, ip_families()?);
    // io_uring can create sockets without socket(2).
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(nr, vec![]);
    }
    compile(rules, libc::EACCES)
}

/// Compiles `rules` into a filter that allows everything else and makes the
/// matched system calls fail with `errno`, as the `sock_filter` array
/// prctl(2) takes.
pub(crate) fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
) -> Result<Vec<libc::sock_filter>, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        target_arch()?,
    )
    .map_err(|e| e.to_string())?;
    let program = BpfProgram::try_from(filter).map_err(|e| e.to_string())?;
    Ok(to_libc(&program))
}

/// seccompiler's instructions as the `sock_filter` array prctl(2) takes.
fn to_libc(program: &BpfProgram) -> Vec<libc::sock_filter> {
    program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}
