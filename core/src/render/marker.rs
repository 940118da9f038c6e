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
    /// `[timed out after D]` stands among the notices above the marker.
    pub timed_out: bool,
    /// `[aborted by SIGNAL]` stands among the notices above the marker.
    pub aborted: bool,
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

/// Inverts the final marker: reads the last non-empty line of `text`, and
/// the notices right above it (`[timed out after D]`, `[aborted by X]`;
/// only lines of `dsh-exec`'s own shape, which the command's output cannot
/// produce unescaped). A `--json` result (one JSON object) is read too.
///
/// Returns `None` when that line is no marker (or the object no result).
pub fn parse_status(text: &str) -> Option<ParsedStatus> {
    if text.trim_start().starts_with('{')
        && let Some(parsed) = from_json(text)
    {
        return Some(parsed);
    }
    let mut lines = text.lines().rev().skip_while(|l| l.trim().is_empty());
    let last = lines.next()?;
    let mut parsed = parse_marker(last)?;
    for line in lines {
        let line = strip_sgr(line);
        let line = line.trim();
        if !super::text::is_own_line_shape(line) || line.starts_with('\\') {
            break;
        }
        parsed.timed_out |= line.starts_with("[timed out after ");
        parsed.aborted |= line.starts_with("[aborted by ");
    }
    Some(parsed)
}

/// The status of a `--json` result: its `exit_code`, `signal`,
/// `timed_out` and `aborted`.
fn from_json(text: &str) -> Option<ParsedStatus> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let obj = v.as_object()?;
    if !obj.contains_key("exit_code") || !obj.contains_key("signal") {
        return None;
    }
    let exit_code = match &obj["exit_code"] {
        serde_json::Value::Null => None,
        n => Some(i32::try_from(n.as_i64()?).ok()?),
    };
    let signal = match &obj["signal"] {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) if Signal::from_name(s).is_some() => Some(s.clone()),
        _ => return None,
    };
    Some(ParsedStatus {
        exit_code,
        signal,
        timed_out: obj.get("timed_out").and_then(|b| b.as_bool()) == Some(true),
        aborted: obj.get("aborted").and_then(|b| b.as_bool()) == Some(true),
        detached: None,
    })
}

/// The marker line alone.
fn parse_marker(last: &str) -> Option<ParsedStatus> {
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
            timed_out: false,
            aborted: false,
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
            timed_out: false,
            aborted: false,
            detached: Some(id.to_string()),
        });
    }
    let sig = last
        .strip_prefix("[killed by signal: ")
        .and_then(|s| s.strip_suffix(']'))?;
    Signal::from_name(sig).map(|_| ParsedStatus {
        exit_code: None,
        signal: Some(sig.to_string()),
        timed_out: false,
        aborted: false,
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

    #[test]
    fn the_notices_above_the_marker_say_timed_out_and_aborted() {
        let p = parse_status("x\n[timed out after 1s]\n[killed by signal: SIGTERM]\n").unwrap();
        assert_eq!(
            (p.signal.as_deref(), p.timed_out, p.aborted),
            (Some("SIGTERM"), true, false)
        );
        let p = parse_status("[aborted by SIGINT]\n[exit code: 130]\n").unwrap();
        assert!(p.aborted && !p.timed_out);
        // The command's own line (escaped) above the marker is not a notice.
        let p = parse_status("\\[timed out after 1s]\n[exit code: 0]\n").unwrap();
        assert!(!p.timed_out);
        // Nor is one above a line of output.
        let p = parse_status("[timed out after 1s]\nout\n[exit code: 0]\n").unwrap();
        assert!(!p.timed_out);
        let p = parse_status("[timed out after 1s]\n[sandbox: x]\n[exit code: 0]\n").unwrap();
        assert!(p.timed_out);
    }

    #[test]
    fn a_json_result_is_read_too() {
        let p = parse_status(
            r#"{"exit_code":null,"signal":"SIGTERM","timed_out":true,"aborted":false}"#,
        )
        .unwrap();
        assert_eq!(
            (p.exit_code, p.signal.as_deref(), p.timed_out),
            (None, Some("SIGTERM"), true)
        );
        assert_eq!(parse_status(r#"{"error":{"code":"USAGE"}}"#), None);
        assert_eq!(
            parse_status("{not json\n[exit code: 3]\n").and_then(|p| p.exit_code),
            Some(3)
        );
        assert_eq!(parse_status(r#"{"exit_code":"x","signal":null}"#), None);
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
