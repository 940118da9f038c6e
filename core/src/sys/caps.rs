//! Capability sets of this process (capabilities(7)), through rustix's
//! capget(2) and capset(2) with the version 3 header
//! (`_LINUX_CAPABILITY_VERSION_3`: 64 bits per set). One system call where
//! `/proc/self/status` would cost a file generated and parsed per run.

use rustix::thread::{CapabilitySet, CapabilitySets, capabilities, set_capabilities};

/// CAP_SETPCAP (capabilities(7)): needed to drop from the bounding set.
pub(crate) const CAP_SETPCAP: u32 = 8;
/// CAP_SYS_ADMIN (capabilities(7)): needed for new namespaces and mounts.
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

/// True when this process's effective set holds capability `cap` (a failed
/// capget counts as not holding it).
pub(crate) fn holds(cap: u32) -> bool {
    capabilities(None).is_ok_and(|s| s.effective.bits() & (1 << cap) != 0)
}

/// This thread's sets masked with `keep` (one bit per capability number),
/// as the raw `__user_cap_data_struct[2]` that capset(2) takes: effective,
/// permitted, inheritable of the low 32 capabilities, then of the high
/// ones. All zero when `keep` is empty or capget fails. The post-fork
/// child applies them with a literal capset (see `sys::child`).
pub(crate) fn masked(keep: u64) -> [u32; 6] {
    if keep == 0 {
        return [0; 6];
    }
    let Ok(s) = capabilities(None) else {
        return [0; 6];
    };
    let (e, p, i) = (
        s.effective.bits() & keep,
        s.permitted.bits() & keep,
        s.inheritable.bits() & keep,
    );
    [
        e as u32,
        p as u32,
        i as u32,
        (e >> 32) as u32,
        (p >> 32) as u32,
        (i >> 32) as u32,
    ]
}

/// Limits the calling thread's effective and permitted sets to `keep` and
/// clears its inheritable set. capset(2) acts on the calling thread alone;
/// threads it starts afterwards inherit its sets. Best effort: an
/// unprivileged process has nothing to drop.
pub(crate) fn limit_thread(keep: u64) {
    let Ok(s) = capabilities(None) else {
        return;
    };
    let keep = CapabilitySet::from_bits_retain(keep);
    let _ = set_capabilities(
        None,
        CapabilitySets {
            effective: s.effective & keep,
            permitted: s.permitted & keep,
            inheritable: CapabilitySet::empty(),
        },
    );
}
