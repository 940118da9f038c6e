//! This process's initial environment block, which `/proc/PID/environ`
//! shows (proc(5)).

/// Overwrites, in this process's initial environment block, the values of
/// the variables named in `names` with NUL bytes; returns how many it
/// overwrote. The block is the memory from `env_start` to `env_end`
/// (fields 50 and 51 of proc_pid_stat(5), Linux 3.5), whatever
/// `setenv(3)` did since. Errors when `/proc/self/stat` cannot be read or
/// parsed; nothing is overwritten then.
pub(crate) fn wipe_values(names: &[std::ffi::OsString]) -> std::io::Result<usize> {
    use std::os::unix::ffi::OsStrExt;
    if names.is_empty() {
        return Ok(0);
    }
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "/proc/self/stat");
    let (start, end) = super::procfs::stat("self")
        .and_then(|s| s.env)
        .ok_or_else(bad)?;
    if end <= start {
        return Ok(0);
    }
    // SAFETY: [env_start, env_end) is this process's own initial stack
    // area, mapped readable and writable for its whole life (execve(2)
    // copies the environment strings there); nothing frees it. Values
    // overwritten in place keep every pointer into it valid.
    let block = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut wiped = 0;
    let mut at = 0;
    while at < block.len() {
        let len = block[at..]
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(block.len() - at);
        let entry = &mut block[at..at + len];
        if let Some(eq) = entry.iter().position(|b| *b == b'=')
            && names.iter().any(|n| n.as_bytes() == &entry[..eq])
        {
            entry[eq + 1..].fill(0);
            wiped += 1;
        }
        at += len + 1;
    }
    Ok(wiped)
}
