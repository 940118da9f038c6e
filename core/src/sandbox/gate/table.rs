//! The gate's one table: every system call the gate traps, the arguments
//! its verdict rests on, which filters trap it, and its handler.
//!
//! The seccomp filters that return `SECCOMP_RET_USER_NOTIF`
//! ([`crate::sandbox::seccomp`]) take their call numbers from here, and the
//! gate dispatches each notification by looking its number up here
//! ([`lookup`]); a number the table lacks is answered ENOSYS. The test
//! `every_notifying_call_has_a_handler_and_every_handler_is_trapped` runs the
//! compiled filters themselves over every call number and checks both
//! directions.

use nix::libc;

use super::task::Task;
use super::{GatePolicy, Outcome, fs, net};

/// `setxattrat` and `removexattrat` (Linux 6.13, the same number on every
/// architecture), which the libc crate may not name yet.
pub(crate) const SYS_SETXATTRAT: i64 = 463;
/// See [`SYS_SETXATTRAT`].
pub(crate) const SYS_REMOVEXATTRAT: i64 = 466;

/// Performs one trapped call for the task, or says why not (an errno).
pub(crate) type Handler = fn(&Task, &Trap, &[u64; 6], &GatePolicy) -> Result<Outcome, i32>;

/// The gate's filters, one bit each ([`Trap::filters`]).
pub(crate) type Filters = u8;
/// The gate's filter when nothing else bounds metadata changes
/// (`GatedMetadata::All`).
pub(crate) const METADATA: Filters = 1;
/// The gate's filter under a read-only mount tree (`GatedMetadata::SetId`):
/// a mode change only when its mode argument holds a set-ID bit.
pub(crate) const SET_ID: Filters = 2;
/// Both forms of the gate's filter: the socket calls whose address is in
/// memory (Unix sockets are judged in every confining mode).
pub(crate) const GATE: Filters = METADATA | SET_ID;
/// `--network loopback` and `allow=`: the IPv4/IPv6 calls.
pub(crate) const GATED_IP: Filters = 4;
/// `--network deny`: the socket families refused and recorded.
pub(crate) const DENY_IP: Filters = 8;

/// When a filter traps a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    /// Always.
    Always,
    /// Only when this argument is not zero (`sendto` with an address).
    ArgSet(u8),
    /// Only for the socket families and protocols the filter names (the
    /// filter supplies the conditions).
    Family,
}

/// How a metadata call names the inode it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Names {
    /// The task's descriptor in argument 0.
    Fd,
    /// The path at argument `path`, relative to the directory descriptor
    /// in argument `dirfd` (`None`: the working directory).
    Path {
        /// The directory descriptor's argument.
        dirfd: Option<u8>,
        /// The path's argument.
        path: u8,
        /// Whether a final symlink is followed.
        follow: Follow,
    },
    /// utimensat(2): the path at argument 1 relative to the descriptor in
    /// argument 0, or, when the path pointer is NULL, that descriptor
    /// itself (futimens(3)); `AT_` flags in argument 3.
    PathOrFd,
}

/// Whether a path's final symlink is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Follow {
    /// Always (chmod, chown, setxattr, utime, utimes).
    Always,
    /// Never (lchown, lsetxattr).
    Never,
    /// As the `AT_SYMLINK_NOFOLLOW` and `AT_EMPTY_PATH` bits of this
    /// argument say.
    Flags(u8),
}

/// The change a metadata call asks for, and where its values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sets {
    /// A mode, in this argument.
    Mode(u8),
    /// An owner and a group, in these arguments.
    Owner(u8, u8),
    /// Access and modification times at the pointer in this argument
    /// (NULL: now), in this layout.
    Times(u8, TimesLayout),
    /// An extended attribute: name, value pointer, value size and flags.
    SetXattr {
        /// The name's argument.
        name: u8,
        /// The value pointer's argument.
        value: u8,
        /// The value size's argument.
        size: u8,
        /// The `XATTR_CREATE`/`XATTR_REPLACE` argument.
        flags: u8,
    },
    /// setxattrat(2): the name at argument 3, value, size and flags in the
    /// `struct xattr_args` at argument 4.
    SetXattrArgs,
    /// The removal of the extended attribute named in this argument.
    RemoveXattr(u8),
}

/// The layout of a times argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimesLayout {
    /// `struct timespec[2]` (utimensat).
    Timespec,
    /// `struct timeval[2]` (utimes, futimesat).
    Timeval,
    /// `struct utimbuf` (utime).
    Utimbuf,
}

/// What the verdict on a call rests on: the arguments read from the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judges {
    /// A metadata change: the inode named, and the change.
    Metadata(Names, Sets),
    /// The socket in argument 0 and the address at argument `addr`,
    /// `len` bytes.
    Address {
        /// The address pointer's argument.
        addr: u8,
        /// The address length's argument.
        len: u8,
    },
    /// The socket in argument 0 and the `struct msghdr` at argument 1:
    /// its address and its ancillary data (descriptors passed).
    Message,
    /// The socket in argument 0 and the `struct mmsghdr` array at
    /// argument 1, argument 2 long.
    Messages,
    /// The socket in argument 0: the address it is bound to.
    BoundSocket,
    /// The family, type and protocol in arguments 0, 1 and 2 (registers
    /// only: the filter already decided; the gate records the refusal).
    SocketKind,
}

/// One trapped system call.
#[derive(Debug)]
pub(crate) struct Trap {
    /// The call's number on this architecture.
    pub(crate) nr: i64,
    /// Its name, as denials report the operation's family.
    pub(crate) name: &'static str,
    /// What the verdict reads.
    pub(crate) judges: Judges,
    /// The filters that trap it.
    pub(crate) filters: Filters,
    /// When they trap it.
    pub(crate) when: When,
    /// Its handler.
    pub(crate) handler: Handler,
}

const fn metadata(nr: i64, name: &'static str, names: Names, sets: Sets) -> Trap {
    // A mode change is in both forms of the filter (the set-ID form traps
    // it when the mode holds a set-ID bit); so is an extended attribute
    // (setting an ACL can clear a set-group-ID bit, see `seccomp`); owner
    // and times changes only where nothing else bounds them.
    let filters = match sets {
        Sets::Mode(_) | Sets::SetXattr { .. } | Sets::SetXattrArgs | Sets::RemoveXattr(_) => GATE,
        Sets::Owner(..) | Sets::Times(..) => METADATA,
    };
    Trap {
        nr,
        name,
        judges: Judges::Metadata(names, sets),
        filters,
        when: When::Always,
        handler: fs::metadata,
    }
}

const AT: Follow = Follow::Flags(3);

/// The calls trapped on every architecture.
static TRAPS: [Trap; 22] = [
    Trap {
        nr: libc::SYS_connect,
        name: "connect",
        judges: Judges::Address { addr: 1, len: 2 },
        filters: GATE | GATED_IP,
        when: When::Always,
        handler: net::connect,
    },
    Trap {
        nr: libc::SYS_sendto,
        name: "sendto",
        judges: Judges::Address { addr: 4, len: 5 },
        filters: GATE | GATED_IP,
        when: When::ArgSet(4),
        handler: net::sendto,
    },
    Trap {
        nr: libc::SYS_sendmsg,
        name: "sendmsg",
        judges: Judges::Message,
        filters: GATE | GATED_IP,
        when: When::Always,
        handler: net::sendmsg,
    },
    Trap {
        nr: libc::SYS_sendmmsg,
        name: "sendmmsg",
        judges: Judges::Messages,
        filters: GATE | GATED_IP,
        when: When::Always,
        handler: net::sendmmsg,
    },
    Trap {
        nr: libc::SYS_bind,
        name: "bind",
        judges: Judges::Address { addr: 1, len: 2 },
        filters: GATED_IP,
        when: When::Always,
        handler: net::bind,
    },
    Trap {
        nr: libc::SYS_listen,
        name: "listen",
        judges: Judges::BoundSocket,
        filters: GATED_IP,
        when: When::Always,
        handler: net::listen,
    },
    Trap {
        nr: libc::SYS_socket,
        name: "socket",
        judges: Judges::SocketKind,
        filters: GATED_IP | DENY_IP,
        when: When::Family,
        handler: net::refuse_socket,
    },
    Trap {
        nr: libc::SYS_socketpair,
        name: "socketpair",
        judges: Judges::SocketKind,
        filters: GATED_IP | DENY_IP,
        when: When::Family,
        handler: net::refuse_socket,
    },
    metadata(libc::SYS_fchmod, "fchmod", Names::Fd, Sets::Mode(1)),
    // fchmodat(2)'s flags argument is the C library's, not the kernel's.
    metadata(
        libc::SYS_fchmodat,
        "fchmodat",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: Follow::Always,
        },
        Sets::Mode(2),
    ),
    metadata(
        libc::SYS_fchmodat2,
        "fchmodat2",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: AT,
        },
        Sets::Mode(2),
    ),
    metadata(libc::SYS_fchown, "fchown", Names::Fd, Sets::Owner(1, 2)),
    metadata(
        libc::SYS_fchownat,
        "fchownat",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: Follow::Flags(4),
        },
        Sets::Owner(2, 3),
    ),
    metadata(
        libc::SYS_utimensat,
        "utimensat",
        Names::PathOrFd,
        Sets::Times(2, TimesLayout::Timespec),
    ),
    metadata(
        libc::SYS_setxattr,
        "setxattr",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        XATTR_SET,
    ),
    metadata(
        libc::SYS_lsetxattr,
        "lsetxattr",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Never,
        },
        XATTR_SET,
    ),
    metadata(libc::SYS_fsetxattr, "fsetxattr", Names::Fd, XATTR_SET),
    metadata(
        libc::SYS_removexattr,
        "removexattr",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        Sets::RemoveXattr(1),
    ),
    metadata(
        libc::SYS_lremovexattr,
        "lremovexattr",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Never,
        },
        Sets::RemoveXattr(1),
    ),
    metadata(
        libc::SYS_fremovexattr,
        "fremovexattr",
        Names::Fd,
        Sets::RemoveXattr(1),
    ),
    // setxattrat(dirfd, path, at_flags, name, struct xattr_args *, size)
    metadata(
        SYS_SETXATTRAT,
        "setxattrat",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: Follow::Flags(2),
        },
        Sets::SetXattrArgs,
    ),
    // removexattrat(dirfd, path, at_flags, name)
    metadata(
        SYS_REMOVEXATTRAT,
        "removexattrat",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: Follow::Flags(2),
        },
        Sets::RemoveXattr(3),
    ),
];

const XATTR_SET: Sets = Sets::SetXattr {
    name: 1,
    value: 2,
    size: 3,
    flags: 4,
};

/// The legacy path forms x86_64 also has.
#[cfg(target_arch = "x86_64")]
static LEGACY_TRAPS: [Trap; 6] = [
    metadata(
        libc::SYS_chmod,
        "chmod",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        Sets::Mode(1),
    ),
    metadata(
        libc::SYS_chown,
        "chown",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        Sets::Owner(1, 2),
    ),
    metadata(
        libc::SYS_lchown,
        "lchown",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Never,
        },
        Sets::Owner(1, 2),
    ),
    metadata(
        libc::SYS_utime,
        "utime",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        Sets::Times(1, TimesLayout::Utimbuf),
    ),
    metadata(
        libc::SYS_utimes,
        "utimes",
        Names::Path {
            dirfd: None,
            path: 0,
            follow: Follow::Always,
        },
        Sets::Times(1, TimesLayout::Timeval),
    ),
    metadata(
        libc::SYS_futimesat,
        "futimesat",
        Names::Path {
            dirfd: Some(0),
            path: 1,
            follow: Follow::Always,
        },
        Sets::Times(2, TimesLayout::Timeval),
    ),
];
#[cfg(not(target_arch = "x86_64"))]
static LEGACY_TRAPS: [Trap; 0] = [];

/// Every trapped call of this architecture.
pub(crate) fn all() -> impl Iterator<Item = &'static Trap> {
    TRAPS.iter().chain(LEGACY_TRAPS.iter())
}

/// The calls a filter traps.
pub(crate) fn trapped_by(filter: Filters) -> impl Iterator<Item = &'static Trap> {
    all().filter(move |t| t.filters & filter != 0)
}

/// The entry for call `nr`, if the gate traps it.
pub(crate) fn lookup(nr: i64) -> Option<&'static Trap> {
    all().find(|t| t.nr == nr)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::sandbox::seccomp::{
        GatedMetadata, deny_ip_sockets_gated, gate_filter, gated_ip_calls,
    };

    /// Runs a classic BPF seccomp program (Documentation/networking/
    /// filter.rst) over `struct seccomp_data` for call `nr` with `args` on
    /// this architecture, and returns the action it gives. Panics on an
    /// instruction it does not know, so a new kind of program fails the
    /// test rather than passing it.
    fn run(program: &[libc::sock_filter], nr: i64, args: &[u64; 6]) -> u32 {
        let arch: u32 = if cfg!(target_arch = "x86_64") {
            0xc000_003e // AUDIT_ARCH_X86_64
        } else if cfg!(target_arch = "aarch64") {
            0xc000_00b7 // AUDIT_ARCH_AARCH64
        } else {
            panic!("no audit arch for this target")
        };
        // struct seccomp_data { int nr; u32 arch; u64 ip; u64 args[6]; }
        let mut data = Vec::with_capacity(64);
        data.extend((nr as i32).to_ne_bytes());
        data.extend(arch.to_ne_bytes());
        data.extend(0u64.to_ne_bytes());
        for a in args {
            data.extend(a.to_ne_bytes());
        }
        let word =
            |k: u32| u32::from_ne_bytes(data[k as usize..k as usize + 4].try_into().unwrap());
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let mut mem = [0u32; 16];
        loop {
            let i = program[pc];
            let k = i.k;
            pc += 1;
            let code = u32::from(i.code);
            match code {
                0x20 => a = word(k),         // BPF_LD | BPF_W | BPF_ABS
                0x00 => a = k,               // BPF_LD | BPF_IMM
                0x01 => x = k,               // BPF_LDX | BPF_IMM
                0x60 => a = mem[k as usize], // BPF_LD | BPF_MEM
                0x61 => x = mem[k as usize], // BPF_LDX | BPF_MEM
                0x02 => mem[k as usize] = a, // BPF_ST
                0x03 => mem[k as usize] = x, // BPF_STX
                0x54 => a &= k,              // BPF_ALU | BPF_AND | BPF_K
                0x44 => a |= k,              // BPF_ALU | BPF_OR | BPF_K
                0x07 => x = a,               // BPF_MISC | BPF_TAX
                0x87 => a = x,               // BPF_MISC | BPF_TXA
                0x05 => pc += k as usize,    // BPF_JMP | BPF_JA
                0x06 => return k,            // BPF_RET | BPF_K
                0x15 | 0x25 | 0x35 | 0x45 | 0x1d | 0x2d | 0x3d | 0x4d => {
                    let v = if code & 0x08 != 0 { x } else { k };
                    let taken = match code & 0xf0 {
                        0x10 => a == v,
                        0x20 => a > v,
                        0x30 => a >= v,
                        _ => a & v != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                other => panic!("BPF instruction {other:#x} is not understood here"),
            }
        }
    }

    /// Argument vectors that reach every condition the gate's filters use:
    /// zeros, a set-ID mode in each argument, and each socket family with
    /// odd types and protocols.
    fn probes() -> Vec<[u64; 6]> {
        let mut out = vec![[0; 6], [1; 6], [u64::MAX; 6]];
        for i in 0..6 {
            let mut a = [1; 6];
            a[i] = 0o6777;
            out.push(a);
        }
        for family in [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_VSOCK,
            libc::AF_PACKET,
            libc::AF_NETLINK,
        ] {
            for (kind, protocol) in [(1, 0), (3, 0), (1, 132), (2, 9), (2, 255)] {
                out.push([family as u64, kind, protocol, 0, 0, 0]);
            }
        }
        out
    }

    /// The call numbers a compiled program sends to the gate for some probe.
    fn notified(program: &[libc::sock_filter]) -> BTreeSet<i64> {
        let probes = probes();
        (0..600)
            .filter(|nr| {
                probes
                    .iter()
                    .any(|a| run(program, *nr, a) == libc::SECCOMP_RET_USER_NOTIF)
            })
            .collect()
    }

    fn gate_programs() -> Vec<(Filters, Vec<libc::sock_filter>)> {
        vec![
            (METADATA, gate_filter(GatedMetadata::All).unwrap()),
            (SET_ID, gate_filter(GatedMetadata::SetId).unwrap()),
            (DENY_IP, deny_ip_sockets_gated().unwrap()),
            (GATED_IP, gated_ip_calls().unwrap()),
        ]
    }

    #[test]
    fn every_notifying_call_has_a_handler_and_every_handler_is_trapped() {
        let mut reached = BTreeSet::new();
        for (filter, program) in gate_programs() {
            for nr in notified(&program) {
                let trap = lookup(nr).unwrap_or_else(|| {
                    panic!("call {nr} reaches the gate ({filter:#b}) but has no handler")
                });
                assert!(
                    trap.filters & filter != 0,
                    "{} reaches the gate from filter {filter:#b}, which the table does not name",
                    trap.name
                );
                reached.insert((nr, filter));
            }
        }
        for trap in all() {
            for filter in [METADATA, SET_ID, DENY_IP, GATED_IP] {
                if trap.filters & filter != 0 {
                    assert!(
                        reached.contains(&(trap.nr, filter)),
                        "{} has a handler but filter {filter:#b} does not trap it",
                        trap.name
                    );
                }
            }
        }
    }

    #[test]
    fn each_call_is_in_the_table_once_and_named_as_the_kernel_names_it() {
        let mut seen = BTreeSet::new();
        for trap in all() {
            assert!(seen.insert(trap.nr), "{} is listed twice", trap.name);
            assert_ne!(trap.filters, 0, "{} is trapped by no filter", trap.name);
        }
        assert_eq!(lookup(libc::SYS_fchmodat).map(|t| t.name), Some("fchmodat"));
        assert_eq!(lookup(libc::SYS_read).map(|t| t.name), None);
    }

    #[test]
    fn the_set_id_filter_traps_a_mode_change_only_with_a_set_id_bit() {
        let program = gate_filter(GatedMetadata::SetId).unwrap();
        let notify = |a: [u64; 6]| run(&program, libc::SYS_fchmodat, &a);
        assert_eq!(
            notify([0, 0, 0o2755, 0, 0, 0]),
            libc::SECCOMP_RET_USER_NOTIF
        );
        assert_eq!(
            notify([0, 0, 0o4755, 0, 0, 0]),
            libc::SECCOMP_RET_USER_NOTIF
        );
        assert_eq!(notify([0, 0, 0o0755, 0, 0, 0]), libc::SECCOMP_RET_ALLOW);
        let sendto = |addr: u64| run(&program, libc::SYS_sendto, &[3, 0, 0, 0, addr, 16]);
        assert_eq!(sendto(0x1000), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(sendto(0), libc::SECCOMP_RET_ALLOW);
    }
}
