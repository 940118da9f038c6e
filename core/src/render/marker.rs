//! The final marker line of a result, and `parse-status`, which reads it
//! back. Only the last line is authoritative: a marker-shaped line inside
//! the command's output is the command's own.

use serde::Serialize;

use crate::result::{RunResult, Signal};

/// The final marker line of a result, without its newline.
///
/// A run that never spawned (its deadline passed during preparation) has
/// neither exit code nor signal; its marker is `[exit code: 124]`, the exit
/// status `dsh-exec` reports for it.
pub fn marker(result: &RunResult) -> String {
    match (&result.signal, result.exit_code) {
        (Some(sig), _) => format!("[killed by signal: {sig}]"),
        (None, Some(code)) => format!("[exit code: {code}]"),
        (None, None) => format!("[exit code: {}]", result.exit_status()),
    }
}

/// An exit status read back from a rendered result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParsedStatus {
    /// The exit code of `[exit code: N]`, else `null`.
    pub exit_code: Option<i32>,
    /// The signal name of `[killed by signal: NAME]`, else `null`.
    pub signal: Option<String>,
    /// The job id of `[detached as job ID]` (a `--detach-after` run that is
    /// still running); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detached: Option<String>,
}

/// Removes ANSI SGR sequences (`ESC [ ... m`), so coloured output parses.
fn strip_sgr(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Inverts the final marker: reads the last non-empty line of `text`.
///
/// Returns `None` when that line is no marker.
pub fn parse_status(text: &str) -> Option<ParsedStatus> {
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let last = strip_sgr(last);
    let last = last.trim();
    if let Some(code) = last
        .strip_prefix("[exit code: ")
        .and_then(|s| s.strip_suffix(']'))
    {
        // Exit statuses are 0 to 255 (wait(2)); digits only, no sign.
        if !code.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let code: u8 = code.parse().ok()?;
        return Some(ParsedStatus {
            exit_code: Some(code.into()),
            signal: None,
            detached: None,
        });
    }
    if let Some(id) = last
        .strip_prefix("[detached as job ")
        .and_then(|s| s.strip_suffix(']'))
        .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
    {
        return Some(ParsedStatus {
            exit_code: None,
            signal: None,
            detached: Some(id.to_string()),
        });
    }
    let sig = last
        .strip_prefix("[killed by signal: ")
        .and_then(|s| s.strip_suffix(']'))?;
    Signal::from_name(sig).map(|_| ParsedStatus {
        exit_code: None,
        signal: Some(sig.to_string()),
        detached: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_markers() {
        assert_eq!(parse_status(""), None);
        assert_eq!(parse_status("hello\n"), None);
        assert_eq!(parse_status("[exit code: x]\n"), None);
        assert_eq!(parse_status("[exit code: 0]\nmore\n"), None);
        assert_eq!(parse_status("[killed by signal: ]"), None);
        assert_eq!(parse_status("[killed by signal: SIGFOO]"), None);
        assert_eq!(parse_status("[exit code: -1]"), None);
        assert_eq!(parse_status("[exit code: +7]"), None);
        assert_eq!(parse_status("[exit code: 256]"), None);
        assert_eq!(
            parse_status("early\n[detached as job j4k2x9qa]\n").and_then(|p| p.detached),
            Some("j4k2x9qa".into())
        );
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_status_never_panics(s in "\\PC{0,200}") {
            let _ = parse_status(&s);
        }

        #[test]
        fn a_marker_after_any_output_is_found(body in "\\PC{0,200}", code in any::<u8>()) {
            let text = format!("{body}\n[exit code: {code}]\n");
            prop_assert_eq!(parse_status(&text).and_then(|p| p.exit_code), Some(i32::from(code)));
        }
    }
}
