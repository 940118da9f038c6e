//! The final marker line of a result, and `parse-status`, which reads it
//! back. Only the last line is authoritative: a marker-shaped line inside
//! the command's output is the command's own.

use serde::Serialize;

use crate::result::RunResult;
use crate::signal::Signal;

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

/// An exit status read back from a rendered result: what `parse-status`
/// prints (`schema/parse-status.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
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
    /// The limit a limit's notice above the marker names (`[killed by the
    /// memory limit (64MiB)]`: `memory`), as the result's
    /// `limit_exceeded`; absent when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_exceeded: Option<crate::limits::LimitKind>,
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
        // Judged as the escaper judges it: an escaped line (a backslash in
        // front of what a reader sees) is the command's, and ends the block.
        let seen = super::plain::plain(line);
        let seen = seen.trim();
        if seen.starts_with('\\') || !super::text::is_own_line_shape(line) {
            break;
        }
        let line = seen;
        parsed.timed_out |=
            line.starts_with("[timed out after ") || line.starts_with("[timed out: no output for ");
        parsed.aborted |= line.starts_with("[aborted by ");
        use crate::limits::LimitKind;
        for (prefix, kind) in [
            ("[killed by the memory limit", LimitKind::Memory),
            ("[stopped by the CPU time limit", LimitKind::Cpu),
            ("[process limit reached", LimitKind::Pids),
            ("[file size limit reached", LimitKind::FileSize),
        ] {
            if line.starts_with(prefix) {
                parsed.limit_exceeded = Some(kind);
            }
        }
    }
    Some(parsed)
}

/// The fields of a `--json` result that `parse-status` reads; the rest
/// (the text fields, however long) is skipped without being held.
#[derive(serde::Deserialize)]
struct JsonStatus {
    #[serde(deserialize_with = "present")]
    exit_code: Option<i64>,
    #[serde(deserialize_with = "present")]
    signal: Option<String>,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    aborted: bool,
    #[serde(default)]
    limit_exceeded: Option<crate::limits::LimitKind>,
}

/// A field that must be there, `null` or not (a field with its own
/// deserializer and no default is required): an error object is no result.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(d)
}

impl JsonStatus {
    fn into_parsed(self) -> Option<ParsedStatus> {
        let exit_code = match self.exit_code {
            // Exit statuses are 0 to 255 (wait(2)), as in the text form.
            Some(n) if (0..=255).contains(&n) => Some(n as i32),
            Some(_) => return None,
            None => None,
        };
        if self
            .signal
            .as_deref()
            .is_some_and(|s| Signal::from_name(s).is_none())
        {
            return None;
        }
        Some(ParsedStatus {
            exit_code,
            signal: self.signal,
            timed_out: self.timed_out,
            aborted: self.aborted,
            detached: None,
            limit_exceeded: self.limit_exceeded,
        })
    }
}

/// The status of a `--json` result: its `exit_code`, `signal`,
/// `timed_out` and `aborted`.
fn from_json(text: &str) -> Option<ParsedStatus> {
    let status: JsonStatus = serde_json::from_str(text.trim()).ok()?;
    status.into_parsed()
}

/// How much of a rendered result is read for its marker: the last 64 KiB.
pub const PARSE_STATUS_TAIL: usize = 64 * 1024;

/// [`parse_status`] of everything `input` holds, in bounded memory: a
/// `--json` result of any size is read as it streams by (its text fields
/// skipped, not held), a rendered result by its last [`PARSE_STATUS_TAIL`]
/// bytes. Errors when `input` cannot be read.
pub fn parse_status_from(input: impl std::io::Read) -> std::io::Result<Option<ParsedStatus>> {
    use serde::Deserialize;
    let mut tee = Tail {
        inner: input,
        tail: Vec::new(),
        error: None,
    };
    {
        let mut de = serde_json::Deserializer::from_reader(&mut tee);
        if let Ok(status) = JsonStatus::deserialize(&mut de)
            && de.end().is_ok()
        {
            return Ok(status.into_parsed());
        }
    }
    if let Some(e) = tee.error.take() {
        return Err(e);
    }
    // Not one JSON object: the rest of the input, then its last line.
    std::io::copy(&mut tee, &mut std::io::sink())?;
    Ok(parse_status(&String::from_utf8_lossy(&tee.tail)))
}

/// A reader that keeps the last [`PARSE_STATUS_TAIL`] bytes read through it.
struct Tail<R> {
    inner: R,
    tail: Vec<u8>,
    error: Option<std::io::Error>,
}

impl<R: std::io::Read> std::io::Read for Tail<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Err(e),
            Err(e) => {
                // Kept for the caller: the JSON parser turns it into a
                // syntax error of its own.
                let kind = e.kind();
                self.error = Some(e);
                return Err(std::io::Error::from(kind));
            }
        };
        self.tail.extend_from_slice(&buf[..n]);
        if self.tail.len() > 2 * PARSE_STATUS_TAIL {
            self.tail.drain(..self.tail.len() - PARSE_STATUS_TAIL);
        }
        Ok(n)
    }
}

/// The marker line alone.
fn parse_marker(last: &str) -> Option<ParsedStatus> {
    // Colour codes and other escapes removed, as a terminal shows it.
    let last = super::plain::plain(last);
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
            limit_exceeded: None,
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
            limit_exceeded: None,
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
        limit_exceeded: None,
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
    fn a_limits_notice_above_the_marker_names_the_limit() {
        use crate::limits::LimitKind;
        let p = parse_status("[killed by the memory limit (64MiB)]\n[killed by signal: SIGKILL]\n")
            .unwrap();
        assert_eq!(p.limit_exceeded, Some(LimitKind::Memory));
        let p = parse_status(
            "[stopped by the CPU time limit (1s)]\n[timed out after 2s]\n[exit code: 0]\n",
        )
        .unwrap();
        assert_eq!(
            (p.limit_exceeded, p.timed_out),
            (Some(LimitKind::Cpu), true)
        );
        // The command's own, escaped, is not.
        let p = parse_status("\\[killed by the memory limit (64MiB)]\n[exit code: 0]\n").unwrap();
        assert_eq!(p.limit_exceeded, None);
        let json = r#"{"exit_code": 153, "signal": null, "limit_exceeded": "file_size"}"#;
        assert_eq!(
            parse_status(json).unwrap().limit_exceeded,
            Some(LimitKind::FileSize)
        );
        assert_eq!(
            serde_json::to_string(&parse_status("[exit code: 0]\n").unwrap()).unwrap(),
            r#"{"exit_code":0,"signal":null,"timed_out":false,"aborted":false}"#
        );
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
        assert_eq!(parse_status(r#"{"exit_code":300,"signal":null}"#), None);
        // Any size, streamed.
        let big = format!(
            r#"{{"stdout":{{"text":"{}"}},"exit_code":3,"signal":null}}"#,
            "a".repeat(200_000)
        );
        let p = parse_status_from(big.as_bytes()).unwrap().unwrap();
        assert_eq!(p.exit_code, Some(3));
        // Text that starts like JSON is still text.
        let text = format!("{{\"a\": 1}}\n{}\n[exit code: 4]\n", "x".repeat(100_000));
        let p = parse_status_from(text.as_bytes()).unwrap().unwrap();
        assert_eq!(p.exit_code, Some(4));
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
