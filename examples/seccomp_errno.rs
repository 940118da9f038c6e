//! Runs a command under a seccomp filter that makes the named system calls
//! fail with ENOSYS, as on a kernel without them.
//!
//! The tests use it to drive `dsh-exec`'s fail-closed paths for real on a
//! kernel that has Landlock:
//!
//! ```text
//! cargo run --example seccomp_errno -- landlock_restrict_self -- dsh-exec -s read-only -- true
//! ```

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

fn syscall_number(name: &str) -> Option<i64> {
    Some(match name {
        "landlock_create_ruleset" => libc_nr::LANDLOCK_CREATE_RULESET,
        "landlock_add_rule" => libc_nr::LANDLOCK_ADD_RULE,
        "landlock_restrict_self" => libc_nr::LANDLOCK_RESTRICT_SELF,
        "clone3" => libc_nr::CLONE3,
        _ => return None,
    })
}

/// The Landlock system call numbers, the same on every architecture
/// (include/uapi/asm-generic/unistd.h).
mod libc_nr {
    pub const LANDLOCK_CREATE_RULESET: i64 = 444;
    pub const LANDLOCK_ADD_RULE: i64 = 445;
    pub const LANDLOCK_RESTRICT_SELF: i64 = 446;
    /// clone3 (Linux 5.3), refused by container runtimes' default policies.
    pub const CLONE3: i64 = 435;
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(sep) = args.iter().position(|a| a == "--") else {
        eprintln!("usage: seccomp_errno SYSCALL[,SYSCALL...] -- COMMAND [ARGS...]");
        std::process::exit(2);
    };
    if sep != 1 || args.len() < 3 {
        eprintln!("usage: seccomp_errno SYSCALL[,SYSCALL...] -- COMMAND [ARGS...]");
        std::process::exit(2);
    }
    let mut rules = BTreeMap::new();
    for name in args[0].split(',') {
        let Some(nr) = syscall_number(name) else {
            eprintln!("seccomp_errno: unknown system call {name}");
            std::process::exit(2);
        };
        rules.insert(nr, vec![]);
    }
    let arch = match std::env::consts::ARCH {
        "aarch64" => TargetArch::aarch64,
        "riscv64" => TargetArch::riscv64,
        _ => TargetArch::x86_64,
    };
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(38), arch)
        .expect("filter");
    let program = BpfProgram::try_from(filter).expect("compile");
    // SAFETY: prctl with integer arguments.
    unsafe {
        nix::libc::prctl(nix::libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    seccompiler::apply_filter(&program).expect("apply filter");
    let err = std::process::Command::new(&args[2]).args(&args[3..]).exec();
    eprintln!("seccomp_errno: exec {}: {err}", args[2]);
    std::process::exit(127);
}
