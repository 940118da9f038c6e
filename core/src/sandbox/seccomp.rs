//! The seccomp filters of a run: what Landlock does not cover.
//!
//! What it relies on from the kernel (seccomp(2),
//! Documentation/userspace-api/seccomp_filter.rst): a filter loaded after
//! no-new-privileges runs on every system call of the process and its
//! descendants, cannot be removed, and sees only the call number and the
//! raw argument registers, never the memory they point to. When several
//! filters match, the most restrictive action wins (KILL, then TRAP, then
//! ERRNO, then USER_NOTIF, ..., then ALLOW), so a call one filter refuses
//! with an errno never reaches the gate. Filters are compiled in the parent
//! with the `seccompiler` crate ([`compile`]: allow everything else, give
//! the matched calls one action) and loaded in the child.
//!
//! - [`confining_filter`] (read-only, workspace-write) refuses with EPERM:
//!   io_uring altogether (it can do socket, xattr and file work that no
//!   system-call filter sees), `file_setattr` and the inode-flag and
//!   project ioctls (`chattr`), the terminal-injection ioctls (`TIOCSTI`,
//!   `TIOCLINUX`), the keyrings (`keyctl`, `add_key`, `request_key`: keys
//!   are shared with processes outside), `prlimit64` on any process but
//!   itself, open_by_handle_at(2), user namespaces (`unshare`/`clone` with
//!   `CLONE_NEWUSER`), and creating a file with a set-user-ID or
//!   set-group-ID mode (`open`, `openat`, `creat` with `O_CREAT` or
//!   `O_TMPFILE`, `mknod`).
//! - [`enosys_filter`] makes `openat2` and `clone3` fail with ENOSYS, so
//!   that callers fall back to the calls whose flags a filter can read.
//! - [`gate_filter`] sends to the supervisor's gate (seccomp user
//!   notification, [`super::gate`]) what only a look at the arguments'
//!   memory can decide: `connect`, `sendto` with an address, `sendmsg`,
//!   `sendmmsg`, and every change of file metadata (mode, owner, times,
//!   extended attributes).
//! - [`deny_ip_sockets`] and [`deny_ip_sockets_gated`] (`--network deny`):
//!   socket(2) and socketpair(2) with `AF_INET`, `AF_INET6`, `AF_VSOCK` (a
//!   virtual machine's way to its host) or `AF_PACKET` go to the gate, which
//!   refuses them with EACCES and records a network denial; so do netlink
//!   sockets but for the families ordinary tools read ([`ALLOWED_NETLINK`]);
//!   io_uring fails with EACCES; Unix domain sockets keep working. Landlock's TCP rules
//!   ([`super::landlock`]) add a second layer where the ABI has them.
//! - [`gated_ip_calls`] and [`gated_sockopts`] (`--network loopback` and
//!   `allow=HOSTS`, any mode): `connect`, `bind`, `listen`, `sendto` with
//!   an address, `sendmsg` and `sendmmsg` go to the gate, which judges the
//!   IPv4/IPv6 address ([`crate::net`]); raw, packet, vsock, SCTP and
//!   MPTCP sockets and most netlink go to the gate to be refused and
//!   recorded; the socket options that choose a route, a source, an
//!   interface or a multicast membership fail with EPERM; io_uring with
//!   EACCES.
//! - [`x32_guard`] (x86_64): system calls of the x32 ABI (numbers with bit
//!   30 set) fail with ENOSYS, since the filters above match x86_64
//!   numbers only and a kernel built with x32 would run them.
//!
//! A run loads these as one program ([`chain`]), in the order of the
//! actions' precedence, so the first program to refuse decides, as the
//! kernel's "most restrictive wins" would: one seccomp(2) call and one
//! filter on every system call of the command, where four cost a BPF
//! compilation each at the start and a filter run each on every call.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::gate::table::{self, Judges, Sets, When};

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

/// `keyctl`, `add_key` and `request_key`, which the libc crate names on
/// every architecture it supports.
const KEYRING_CALLS: [i64; 3] = [libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key];

/// The set-user-ID and set-group-ID bits of a mode (inode(7)).
const S_ISUID: u64 = 0o4000;
const S_ISGID: u64 = 0o2000;

/// Rules matching a call whose `arg` holds a mode with `bit` set.
fn mode_has(arg: u8, bit: u64) -> Result<SeccompRule, String> {
    rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)?])
}

/// Rules matching an open that creates a file (`O_CREAT` or `O_TMPFILE` in
/// the flags at `flags`) with a mode (at `mode`) holding set-user-ID or
/// set-group-ID: a new regular file gets that mode as given.
fn creates_setid(flags: u8, mode: u8) -> Result<Vec<SeccompRule>, String> {
    let creating = [
        libc::O_CREAT as u64,
        (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64,
    ];
    let mut rules = Vec::new();
    for how in creating {
        for bit in [S_ISUID, S_ISGID] {
            rules.push(rule(vec![
                cond(flags, SeccompCmpOp::MaskedEq(how), how)?,
                cond(mode, SeccompCmpOp::MaskedEq(bit), bit)?,
            ])?);
        }
    }
    Ok(rules)
}

/// The filter of the confining modes (see the module documentation).
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn confining_filter() -> Result<Vec<libc::sock_filter>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        SYS_FILE_SETATTR,
        // A file by its handle: no path walked, so nothing a path rule
        // could judge (and the way out of chroots with CAP_DAC_READ_SEARCH).
        libc::SYS_open_by_handle_at,
    ]
    .into_iter()
    .chain(KEYRING_CALLS)
    {
        rules.insert(nr, Vec::new());
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
    // Never a set-user-ID bit, nor set-group-ID on a regular file, at
    // creation (open, creat, mknod make regular files; mkdir is not refused:
    // a set-group-ID directory is harmless). A mode change that sets either
    // goes to the gate, which refuses set-user-ID always and set-group-ID
    // but on a directory, and records the refusal.
    rules.insert(libc::SYS_openat, creates_setid(2, 3)?);
    // No user namespace: in one the command would hold every capability
    // over mounts and network namespaces of its own, from which it could
    // show the gate a path or a socket name that means something else in
    // dsh-exec's namespaces (detached mounts, decoy sockets). Landlock
    // already keeps uid_map unwritable, so little works in one anyway.
    let newuser = libc::CLONE_NEWUSER as u64;
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        rules.insert(nr, vec![mode_has(0, newuser)?]);
    }
    rules.insert(
        libc::SYS_mknodat,
        vec![mode_has(2, S_ISUID)?, mode_has(2, S_ISGID)?],
    );
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_open, creates_setid(1, 2)?);
        rules.insert(
            libc::SYS_creat,
            vec![mode_has(1, S_ISUID)?, mode_has(1, S_ISGID)?],
        );
        rules.insert(
            libc::SYS_mknod,
            vec![mode_has(1, S_ISUID)?, mode_has(1, S_ISGID)?],
        );
    }
    compile(rules, SeccompAction::Errno(libc::EPERM as u32))
}

/// System V IPC (sysvipc(7)): message queues, shared memory, semaphores.
/// Their objects are named by keys and ids in the IPC namespace, not by
/// paths, so Landlock cannot bound them; a private IPC namespace does, and
/// needs CAP_SYS_ADMIN. Without one these calls are refused (EPERM): the
/// command could send to, read from or leave behind objects of processes
/// outside. x86_64 has one call per operation; others multiplex through
/// `ipc` on some architectures (not supported here).
pub(crate) fn sysv_ipc_filter() -> Result<Vec<libc::sock_filter>, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmdt,
        libc::SYS_shmctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
    ]
    .into_iter()
    .map(|nr| (nr, Vec::new()))
    .collect();
    compile(rules, SeccompAction::Errno(libc::EPERM as u32))
}

/// The calls that fail with ENOSYS in the confining modes, so that callers
/// take their fallback: `openat2` and `clone3`, whose flags are in memory
/// the filter cannot read (callers fall back to `openat` and `clone`, whose
/// flags it can: glibc's pthread_create and posix_spawn do).
pub(crate) fn enosys_filter() -> Result<Vec<libc::sock_filter>, String> {
    let rules = BTreeMap::from([
        (libc::SYS_openat2, Vec::new()),
        (libc::SYS_clone3, Vec::new()),
    ]);
    compile(rules, SeccompAction::Errno(libc::ENOSYS as u32))
}

/// Which metadata changes the gate decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GatedMetadata {
    /// Every change of mode, owner, times and extended attributes: nothing
    /// else bounds them to the writable roots.
    All,
    /// Only a mode change that sets set-user-ID (always refused) or
    /// set-group-ID (allowed on directories alone): a read-only mount tree
    /// makes the kernel refuse every other change outside the writable
    /// roots (EROFS).
    SetId,
}

/// The value seccompiler is asked to return for a gated call, replaced by
/// `SECCOMP_RET_USER_NOTIF` in the compiled program: seccompiler has no
/// user-notification action, and `SECCOMP_RET_TRACE | data` is a return
/// value nothing else in the program uses.
const GATE_MARK: u32 = 0x6a7e;

/// The gate's filter: every gated call returns `SECCOMP_RET_USER_NOTIF`:
/// the socket calls (`sendto` only with an address, its fifth argument)
/// and the metadata changes `metadata` names.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn gate_filter(metadata: GatedMetadata) -> Result<Vec<libc::sock_filter>, String> {
    let filter = match metadata {
        GatedMetadata::All => table::METADATA,
        // Setting an ACL (`system.posix_acl_access`) clears the set-group-ID
        // bit of a file whose group the caller is not in, unless it holds
        // CAP_FSETID (inode_permission's ACL path, posix_acl_update_mode(9)),
        // which a confined command does not keep: with it, a chown would
        // keep a set-user-ID bit. So the extended-attribute calls stay in
        // this form too; the gate sets them itself, as `cp -a` unconfined
        // would.
        GatedMetadata::SetId => table::SET_ID,
    };
    let rules = gate_rules(filter, |_| Ok(Vec::new()))?;
    notify(compile(rules, SeccompAction::Trace(GATE_MARK))?)
}

/// The rules of one of the gate's filters, taken from the gate's table
/// ([`table::trapped_by`]): each call the table puts in `filter`, with its
/// condition. A mode change in the set-ID form is trapped only when its
/// mode argument holds a set-ID bit; `families` gives the conditions of
/// the calls trapped by socket family ([`When::Family`]), and must give
/// some (an empty list would trap the call always).
///
/// Errors with a message when a condition cannot be built.
pub(crate) fn gate_rules(
    filter: table::Filters,
    families: impl Fn(i64) -> Result<Vec<SeccompRule>, String>,
) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules = BTreeMap::new();
    for trap in table::trapped_by(filter) {
        let conditions = match (trap.when, trap.judges) {
            (When::Always, Judges::Metadata(_, Sets::Mode(arg))) if filter == table::SET_ID => {
                vec![mode_has(arg, S_ISUID)?, mode_has(arg, S_ISGID)?]
            }
            (When::Always, _) => Vec::new(),
            (When::ArgSet(arg), _) => vec![rule(vec![
                SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
                    .map_err(|e| e.to_string())?,
            ])?],
            (When::Family, _) => {
                let by_family = families(trap.nr)?;
                if by_family.is_empty() {
                    return Err(format!("no socket families given for {}", trap.name));
                }
                by_family
            }
        };
        rules.insert(trap.nr, conditions);
    }
    Ok(rules)
}

/// Netlink families that stay open under `--network deny`: route (read by
/// getaddrinfo(3) and `ip`; changing routes needs CAP_NET_ADMIN, which the
/// command does not have), sock_diag (`ss`) and kobject_uevent (device
/// events, read-only). Every other netlink family (netfilter, generic
/// netlink with its nl80211 and WireGuard, xfrm, audit, ...) fails with
/// EACCES.
pub(crate) const ALLOWED_NETLINK: [i32; 3] = [
    libc::NETLINK_ROUTE,
    libc::NETLINK_SOCK_DIAG,
    libc::NETLINK_KOBJECT_UEVENT,
];

/// The x32 guard (x86_64 only; `None` elsewhere): our own four
/// instructions, since seccompiler matches x86_64 numbers only.
pub(crate) fn x32_guard() -> Option<Vec<libc::sock_filter>> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let stmt = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    // ld [nr]; jge X32_SYSCALL_BIT ? next : skip; ret ERRNO(ENOSYS); ret ALLOW
    Some(vec![
        stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        stmt(
            (libc::BPF_RET | libc::BPF_K) as u16,
            libc::SECCOMP_RET_ALLOW,
        ),
    ])
}

/// Joins `programs` into one: each program's `SECCOMP_RET_ALLOW` becomes a
/// jump to the next program, so a call is allowed only if every program
/// allows it, and otherwise gets the first other return met. Give the
/// programs in the order of their actions' precedence (errno refusals
/// before the gate's `SECCOMP_RET_USER_NOTIF`) and the result decides
/// every call as the kernel would with the programs loaded separately.
///
/// Relies on the programs being self-contained classic BPF as seccompiler
/// and [`x32_guard`] emit them: every jump forward within the program, and
/// no return of the accumulator (`BPF_RET | BPF_A`), which is refused.
/// Errors when that does not hold or the result is longer than the
/// kernel's `BPF_MAXINSNS` (4096 instructions).
pub(crate) fn chain(
    programs: Vec<Vec<libc::sock_filter>>,
) -> Result<Vec<libc::sock_filter>, String> {
    const BPF_MAXINSNS: usize = 4096;
    const BPF_RET: u16 = libc::BPF_RET as u16;
    const BPF_K: u16 = libc::BPF_K as u16;
    const BPF_JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    let count = programs.len();
    let mut out = Vec::new();
    for (n, mut program) in programs.into_iter().enumerate() {
        let last = n + 1 == count;
        let len = program.len();
        if program.last().is_none_or(|i| i.code != BPF_RET | BPF_K) {
            // A program that can fall off its end is not self-contained.
            return Err("seccomp chain: a program does not end in a return".into());
        }
        for (i, insn) in program.iter_mut().enumerate() {
            if insn.code & 0x07 == BPF_RET {
                if insn.code != BPF_RET | BPF_K {
                    return Err("seccomp chain: a program returns its accumulator".into());
                }
                if !last && insn.k == libc::SECCOMP_RET_ALLOW {
                    // To the first instruction after this program.
                    *insn = libc::sock_filter {
                        code: BPF_JA,
                        jt: 0,
                        jf: 0,
                        k: (len - 1 - i) as u32,
                    };
                }
            }
        }
        out.extend(program);
    }
    if out.len() > BPF_MAXINSNS {
        return Err(format!(
            "seccomp chain: {} instructions, more than the kernel's {BPF_MAXINSNS}",
            out.len()
        ));
    }
    Ok(out)
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

/// `--network deny`, the part a filter decides alone: io_uring, which can
/// make sockets without socket(2), fails with EACCES.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn deny_ip_sockets() -> Result<Vec<libc::sock_filter>, String> {
    let mut rules = BTreeMap::new();
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(nr, vec![]);
    }
    compile(rules, SeccompAction::Errno(libc::EACCES as u32))
}

/// `--network deny`, the part the gate answers: socket(2) and
/// socketpair(2) with `AF_INET`, `AF_INET6`, `AF_VSOCK` (a virtual
/// machine's way to its host) or `AF_PACKET`, and netlink sockets but for
/// the families ordinary tools read ([`ALLOWED_NETLINK`]), go to the gate,
/// which refuses them with EACCES, as a filter would, and records each as
/// a network denial.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn deny_ip_sockets_gated() -> Result<Vec<libc::sock_filter>, String> {
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
    let mut socket_rules = ip_families()?;
    // A netlink socket of any family but the allowed ones.
    let mut netlink = vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_NETLINK as u64,
        )
        .map_err(|e| e.to_string())?,
    ];
    for family in ALLOWED_NETLINK {
        netlink.push(
            SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64)
                .map_err(|e| e.to_string())?,
        );
    }
    socket_rules.push(SeccompRule::new(netlink).map_err(|e| e.to_string())?);
    let rules = gate_rules(table::DENY_IP, |nr| match nr {
        libc::SYS_socket => Ok(socket_rules.clone()),
        libc::SYS_socketpair => ip_families(),
        _ => Ok(Vec::new()),
    })?;
    notify(compile(rules, SeccompAction::Trace(GATE_MARK))?)
}

/// The socket types of IPv4/IPv6 sockets that `loopback` and `allow-list`
/// keep: `SOCK_STREAM` and `SOCK_DGRAM` (the low four bits of socket(2)'s
/// type; the rest are flags).
const GATED_TYPES: [u64; 2] = [libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64];

/// The protocols of IPv4/IPv6 sockets that `loopback` and `allow-list`
/// keep: the default (0), TCP, UDP, and ICMP/ICMPv6 echo (ping sockets,
/// whose every send names its address). Not SCTP, whose
/// `SCTP_SOCKOPT_CONNECTX` connects through setsockopt(2), nor MPTCP,
/// whose subflows go to addresses the peer announces: connections that no
/// `connect` the gate sees would make.
const GATED_PROTOCOLS: [u64; 5] = [0, 1, 6, 17, 58];

/// setsockopt(2) options refused under `loopback` and `allow-list` (level,
/// name): ways to send to an address other than the one the gate judged,
/// or out of an interface of the task's choosing. IP_OPTIONS (source
/// routes: the first hop is where the packet goes, ip(7)), IP_UNICAST_IF,
/// IPV6_2292PKTOPTIONS, IPV6_2292RTHDR, IPV6_NEXTHOP, IPV6_PKTINFO (a
/// sticky source and interface), IPV6_RTHDR, IPV6_UNICAST_IF (ipv6(7),
/// linux/in6.h), SO_BINDTODEVICE, SO_BINDTOIFINDEX (socket(7)), and
/// SO_PASSRIGHTS (Linux 6.16), which the gate clears on a socket that
/// reaches a server outside the run, so that no connected socket of the
/// host can be passed in to it.
const GATED_SOCKOPTS: [(u64, u64); 11] = [
    (0, 4),   // IPPROTO_IP, IP_OPTIONS
    (0, 50),  // IPPROTO_IP, IP_UNICAST_IF
    (41, 5),  // IPPROTO_IPV6, IPV6_2292RTHDR
    (41, 6),  // IPPROTO_IPV6, IPV6_2292PKTOPTIONS
    (41, 9),  // IPPROTO_IPV6, IPV6_NEXTHOP
    (41, 50), // IPPROTO_IPV6, IPV6_PKTINFO
    (41, 57), // IPPROTO_IPV6, IPV6_RTHDR
    (41, 76), // IPPROTO_IPV6, IPV6_UNICAST_IF
    (1, 25),  // SOL_SOCKET, SO_BINDTODEVICE
    (1, 62),  // SOL_SOCKET, SO_BINDTOIFINDEX
    (1, SO_PASSRIGHTS as u64),
];

/// `SO_PASSRIGHTS` (asm-generic/socket.h, Linux 6.16).
pub(crate) const SO_PASSRIGHTS: i32 = 83;

/// `--network loopback` and `allow=HOSTS`, the part the gate answers:
/// `connect`, `bind`, `listen`, `sendto` with an address, `sendmsg` and
/// `sendmmsg` (whatever the socket; the gate looks at its family), and the
/// sockets these policies refuse: IPv4/IPv6 sockets of another type than
/// stream and datagram (raw, packet) or another protocol than
/// [`GATED_PROTOCOLS`], `AF_VSOCK`, `AF_PACKET`, and netlink but for
/// [`ALLOWED_NETLINK`]; the gate refuses these with EACCES and records
/// them.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn gated_ip_calls() -> Result<Vec<libc::sock_filter>, String> {
    let dword = |arg: u8, op: SeccompCmpOp, v: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).map_err(|e| e.to_string())
    };
    let mut socket_rules = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        let family = family as u64;
        for t in (0..16u64).filter(|t| !GATED_TYPES.contains(t)) {
            socket_rules.push(rule(vec![
                dword(0, SeccompCmpOp::Eq, family)?,
                dword(1, SeccompCmpOp::MaskedEq(0xf), t)?,
            ])?);
        }
        let mut other_protocol = vec![dword(0, SeccompCmpOp::Eq, family)?];
        for p in GATED_PROTOCOLS {
            other_protocol.push(dword(2, SeccompCmpOp::Ne, p)?);
        }
        socket_rules.push(rule(other_protocol)?);
    }
    for family in [libc::AF_VSOCK, libc::AF_PACKET] {
        socket_rules.push(rule(vec![dword(0, SeccompCmpOp::Eq, family as u64)?])?);
    }
    let mut netlink = vec![dword(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?];
    for family in ALLOWED_NETLINK {
        netlink.push(dword(2, SeccompCmpOp::Ne, family as u64)?);
    }
    socket_rules.push(rule(netlink)?);
    let pair = [
        libc::AF_INET,
        libc::AF_INET6,
        libc::AF_VSOCK,
        libc::AF_PACKET,
    ]
    .into_iter()
    .map(|f| rule(vec![dword(0, SeccompCmpOp::Eq, f as u64)?]))
    .collect::<Result<Vec<_>, String>>()?;
    let rules = gate_rules(table::GATED_IP, |nr| match nr {
        libc::SYS_socket => Ok(socket_rules.clone()),
        libc::SYS_socketpair => Ok(pair.clone()),
        _ => Ok(Vec::new()),
    })?;
    notify(compile(rules, SeccompAction::Trace(GATE_MARK))?)
}

/// `--network loopback` and `allow=HOSTS`, the part a filter decides
/// alone: the [`GATED_SOCKOPTS`], multicast membership and userfaultfd
/// fail with EPERM.
///
/// Errors with a message when the architecture is not supported or the
/// filter cannot be compiled.
pub(crate) fn gated_sockopts() -> Result<Vec<libc::sock_filter>, String> {
    let mut opts = Vec::new();
    for (level, name) in GATED_SOCKOPTS {
        opts.push(rule(vec![
            cond(1, SeccompCmpOp::Eq, level)?,
            cond(2, SeccompCmpOp::Eq, name)?,
        ])?);
    }
    // Multicast group membership: a join makes the kernel send IGMP and
    // MLD reports out of the host's interfaces, and they carry the group
    // (and source) addresses the task chose: bytes off the host. IPPROTO_IP
    // 35..=48 (IP_ADD_MEMBERSHIP to MCAST_MSFILTER), IPPROTO_IPV6 20..=21
    // (IPV6_ADD_MEMBERSHIP, IPV6_DROP_MEMBERSHIP) and 42..=48 (MCAST_*)
    // (linux/in.h, linux/in6.h).
    for (level, low, high) in [(0u64, 35u64, 48u64), (41, 20, 21), (41, 42, 48)] {
        opts.push(rule(vec![
            cond(1, SeccompCmpOp::Eq, level)?,
            cond(2, SeccompCmpOp::Ge, low)?,
            cond(2, SeccompCmpOp::Le, high)?,
        ])?);
    }
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_setsockopt, opts);
    // userfaultfd(2), and /dev/userfaultfd's USERFAULTFD_IOC_NEW (0xaa00,
    // linux/userfaultfd.h): a buffer in a page the command serves itself
    // would hold the gate's read of its memory (process_vm_readv) for as
    // long as it likes. Where the command keeps CAP_SYS_PTRACE
    // (full-access) the kernel would grant it.
    rules.insert(libc::SYS_userfaultfd, vec![]);
    rules.insert(
        libc::SYS_ioctl,
        vec![rule(vec![cond(1, SeccompCmpOp::Eq, 0xaa00)?])?],
    );
    compile(rules, SeccompAction::Errno(libc::EPERM as u32))
}

/// Turns the gate's mark in a compiled program into
/// `SECCOMP_RET_USER_NOTIF`; errors when there is none.
fn notify(mut program: Vec<libc::sock_filter>) -> Result<Vec<libc::sock_filter>, String> {
    const BPF_RET_K: u16 = 0x06;
    let marked = libc::SECCOMP_RET_TRACE | GATE_MARK;
    let mut replaced = 0;
    for insn in &mut program {
        if insn.code == BPF_RET_K && insn.k == marked {
            insn.k = libc::SECCOMP_RET_USER_NOTIF;
            replaced += 1;
        }
    }
    if replaced == 0 {
        return Err("gate filter: no gated return in the compiled program".into());
    }
    Ok(program)
}

/// Compiles `rules` into a filter that allows everything else and gives the
/// matched system calls `action`, as the `sock_filter` array prctl(2) takes.
pub(crate) fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<Vec<libc::sock_filter>, String> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, target_arch()?)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ret(k: u32) -> libc::sock_filter {
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k,
        }
    }

    #[test]
    fn chain_turns_each_allow_but_the_last_into_a_jump_past_its_program() {
        let a = x32_guard().unwrap_or_else(|| vec![ret(libc::SECCOMP_RET_ALLOW)]);
        let b = vec![
            ret(libc::SECCOMP_RET_ERRNO | 1),
            ret(libc::SECCOMP_RET_ALLOW),
        ];
        let (la, lb) = (a.len(), b.len());
        let out = chain(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(out.len(), la + lb);
        for (i, insn) in out[..la].iter().enumerate() {
            if a[i].code == (libc::BPF_RET | libc::BPF_K) as u16
                && a[i].k == libc::SECCOMP_RET_ALLOW
            {
                assert_eq!(insn.code, (libc::BPF_JMP | libc::BPF_JA) as u16);
                // The jump lands on the first instruction of `b`.
                assert_eq!(i + 1 + insn.k as usize, la);
            } else {
                assert_eq!((insn.code, insn.k), (a[i].code, a[i].k));
            }
        }
        // The last program keeps its returns.
        assert_eq!(out[la + 1].k, libc::SECCOMP_RET_ALLOW);
        assert_eq!(out[la].k, libc::SECCOMP_RET_ERRNO | 1);
    }

    #[test]
    fn chain_refuses_what_it_cannot_join() {
        let ld = libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        };
        let ret_a = libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_A) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        };
        let allow = ret(libc::SECCOMP_RET_ALLOW);
        assert!(chain(vec![vec![ld], vec![allow]]).is_err());
        assert!(chain(vec![vec![ret_a, allow], vec![allow]]).is_err());
        assert!(chain(vec![vec![allow; 3000], vec![allow; 1100]]).is_err());
    }

    #[test]
    fn a_run_s_chained_program_fits_the_kernel_s_limit() {
        let mut programs: Vec<_> = x32_guard().into_iter().collect();
        programs.push(deny_ip_sockets().unwrap());
        programs.push(confining_filter().unwrap());
        programs.push(enosys_filter().unwrap());
        programs.push(gate_filter(GatedMetadata::All).unwrap());
        programs.push(gated_sockopts().unwrap());
        programs.push(gated_ip_calls().unwrap());
        assert!(chain(programs).unwrap().len() <= 4096);
    }
}
