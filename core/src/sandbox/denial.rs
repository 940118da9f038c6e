//! Whether a confined run's failure looks like the sandbox's doing.
//!
//! A conservative classification from the command's output: true only when
//! a confining mode was active, the command failed, and its output shows a
//! permission, read-only-file-system or operation-not-permitted failure.

use super::Mode;

/// Output substrings (compared in lower case) that show a denied write.
pub const DENIAL_MARKERS: [&str; 3] = [
    "permission denied",
    "read-only file system",
    "operation not permitted",
];

/// The conservative denial classification (see the module documentation).
pub fn looks_denied(mode: Mode, failed: bool, stdout: &str, stderr: &str) -> bool {
    if !mode.confines() || !failed {
        return false;
    }
    [stdout, stderr].iter().any(|text| {
        let lower = text.to_lowercase();
        DENIAL_MARKERS.iter().any(|m| lower.contains(m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_is_conservative() {
        let ws = Mode::WorkspaceWrite;
        assert!(looks_denied(
            ws,
            true,
            "",
            "touch: cannot touch '/x': Permission denied\n"
        ));
        assert!(looks_denied(
            Mode::ReadOnly,
            true,
            "",
            "bash: /f: Read-only file system"
        ));
        assert!(!looks_denied(ws, false, "", "Permission denied"));
        assert!(!looks_denied(
            Mode::FullAccess,
            true,
            "",
            "Permission denied"
        ));
        assert!(!looks_denied(ws, true, "", ""));
        assert!(!looks_denied(ws, true, "/tmp/x/sandbox/package.json\n", ""));
    }
}
