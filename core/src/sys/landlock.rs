//! The two Landlock calls the parent makes directly (landlock(7),
//! Documentation/userspace-api/landlock.rst). The `landlock` crate builds
//! the rulesets; these stay raw because the crate has no version query
//! that reports the errno, and its path rules open each path again, where
//! the sandbox grants through the descriptor it already opened and
//! checked (an open of the path would follow a symlink swapped in since).

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::libc;

/// The kernel's Landlock ABI version (landlock_create_ruleset(2) with
/// `LANDLOCK_CREATE_RULESET_VERSION`), or the errno: ENOSYS when Landlock
/// is not built in, EOPNOTSUPP when it is disabled at boot.
pub(crate) fn abi_version() -> Result<i32, nix::errno::Errno> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a query that takes no pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(nix::errno::Errno::last());
    }
    Ok(v as i32)
}

/// Adds to `ruleset` a rule granting `access` (`LANDLOCK_ACCESS_FS_*`
/// bits) beneath the file or directory `parent` names
/// (landlock_add_rule(2), `LANDLOCK_RULE_PATH_BENEATH`).
pub(crate) fn add_path_beneath(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    access: u64,
) -> std::io::Result<()> {
    /// `struct landlock_path_beneath_attr`, packed
    /// (include/uapi/linux/landlock.h).
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` lives across the call, which only reads it; both
    // descriptors are borrowed, so they stay open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
