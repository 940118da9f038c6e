//! `--network deny`: a seccomp filter that refuses IPv4 and IPv6 sockets.
//!
//! socket(2) and socketpair(2) with `AF_INET`, `AF_INET6`, `AF_VSOCK` (a
//! virtual machine's way to its host) or `AF_PACKET` fail with EACCES, and
//! so does io_uring, which can create sockets without socket(2); every other
//! family (Unix domain sockets above all) keeps working.
//! The filter is compiled in the parent with the `seccompiler` crate and
//! loaded in the child with prctl(PR_SET_SECCOMP) after no-new-privileges.
//! Landlock's TCP rules ([`super::ruleset`]) add a second layer where the
//! ABI has them.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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
pub fn deny_ip_sockets() -> Result<Vec<libc::sock_filter>, String> {
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
