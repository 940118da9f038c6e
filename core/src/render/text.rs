//! The rendered text result: output sections, notices, and the marker.
//!
//! Grammar (DESIGN.md, "Rendered result"):
//!
//! ```text
//! [stdout truncated: N earlier bytes omitted; full stream: PATH]   (when cut, --keep tail)
//! ...stdout text...                                                (--keep head+tail: head,
//!                                                                   [... N bytes omitted; full stream: PATH ...],
//!                                                                   tail; --keep head: the
//!                                                                   truncation line follows)
//! [stderr]                                                         (when stderr is not empty)
//! [stderr truncated: N earlier bytes omitted; full stream: PATH]   (when truncated)
//! ...stderr text...
//! [sandbox: denied write to PATH; try FLAG]                        (each of the first 3 denials)
//! [sandbox: network denied: socket(AF_INET)]
//! [sandbox: network denied: proxy refused HOST:PORT (REASON)]         (each of the first 3)
//! [sandbox: N more denied; --json lists them]
//! [sandbox: put aside PATH (REASON)]                               (each of the first 3 protected
//! [sandbox: undid the run's change to PATH (CHANGE)]                changes; then how many more)
//! [killed by the memory limit (SIZE)]                              (limit_exceeded: memory)
//! [stopped by the CPU time limit (D)]                              (limit_exceeded: cpu)
//! [process limit reached (N): forks were refused]                  (limit_exceeded: pids)
//! [file size limit reached (SIZE): a write was refused]            (limit_exceeded: file_size)
//! [timed out after D]                                              (when timed out)
//! [aborted by SIGNAME]                                             (when aborted)
//! [changes: N created, N modified, N deleted (transaction T: ...)] (--transaction)
//! [exit code: N] | [killed by signal: SIGNAME]                     (always, last)
//! ```

use owo_colors::OwoColorize;
use std::borrow::Cow;

use super::marker::marker;
use crate::capture::{CollectedOutput, Keep};
use crate::result::RunResult;
use crate::spec::OnTerminal;
use crate::units::format_duration;

/// The notice lines that precede the marker, each without its newline.
pub fn notices(result: &RunResult) -> Vec<String> {
    notice_lines(result, true)
}

/// The sandbox's notice lines (each denial with the flag that would allow
/// it, or the runner's failure), each without its newline: what `-i`
/// writes to stderr at its end.
pub fn sandbox_notices(result: &RunResult) -> Vec<String> {
    let Some(sb) = &result.sandbox else {
        return Vec::new();
    };
    let mut lines = if sb.runner_failed {
        vec![format!("[sandbox: {}; the sandbox runner failed]", sb.mode)]
    } else if sb.denied {
        denial_lines(sb)
    } else {
        Vec::new()
    };
    lines.extend(protected_lines(sb));
    lines
}

/// What was undone or put aside after the run (`protected_changes`): the
/// first 3, then how many more.
fn protected_lines(sb: &crate::result::SandboxFacts) -> Vec<String> {
    let mut lines: Vec<String> = sb
        .protected_changes
        .iter()
        .take(3)
        .map(|c| {
            let path = escape_controls(&c.path.to_string_lossy());
            let why = c
                .reason
                .as_deref()
                .map(|r| format!(" ({})", escape_controls(r)))
                .unwrap_or_default();
            match (c.change.as_str(), c.restored) {
                ("quarantined", true) => format!("[sandbox: put aside {path}{why}]"),
                ("unchecked", false) => format!("[sandbox: not checked: {path}{why}]"),
                ("unchecked", true) => format!("[sandbox: put aside {path}{why}]"),
                (change, true) => {
                    format!("[sandbox: undid the run's change to {path} ({change}){why}]")
                }
                (change, false) => {
                    format!("[sandbox: could not undo the run's change to {path} ({change}){why}]")
                }
            }
        })
        .collect();
    let more = sb.protected_changes.len().saturating_sub(3);
    if more > 0 {
        lines.push(format!(
            "[sandbox: {more} more protected changes; --json lists them]"
        ));
    }
    lines
}

/// The notices, with the sandbox's or without.
fn notice_lines(result: &RunResult, sandbox: bool) -> Vec<String> {
    let mut lines: Vec<String> = result.capped.iter().map(|c| format!("[{c}]")).collect();
    if sandbox {
        lines.extend(sandbox_notices(result));
    }
    if let Some(kind) = result.limit_exceeded {
        lines.push(crate::limits::notice(kind, result.limits.as_ref()));
    }
    if result.timed_out {
        let show = |ms: Option<u64>| {
            ms.map(|ms| format_duration(std::time::Duration::from_millis(ms)))
                .unwrap_or_else(|| "?".into())
        };
        lines.push(match result.timeout_kind {
            Some(crate::result::TimeoutKind::Idle) => {
                format!(
                    "[timed out: no output for {}]",
                    show(result.idle_timeout_ms)
                )
            }
            _ => format!("[timed out after {}]", show(result.timeout_ms)),
        });
    }
    if let Some(sig) = &result.aborted_by {
        lines.push(format!("[aborted by {sig}]"));
    }
    if let Some(t) = &result.transaction {
        lines.push(transaction_line(t));
    }
    lines
}

/// `[changes: 3 created, 1 modified, 2 deleted (transaction T: dsh-exec
/// commit T | discard T)]`, or what `--on-exit` did.
fn transaction_line(t: &crate::transaction::TransactionFacts) -> String {
    use crate::transaction::State;
    let id = &t.id;
    let counts = format!(
        "{} created, {} modified, {} deleted",
        t.created, t.modified, t.deleted
    );
    let tail = match (t.state, &t.commit, &t.error) {
        (_, _, Some(e)) if t.state == State::Pending => format!(
            "transaction {id} pending, {}: dsh-exec commit {id} | discard {id}",
            escape_controls(e)
        ),
        (State::Pending, _, _) => format!("transaction {id}: dsh-exec commit {id} | discard {id}"),
        (State::Running, _, _) => format!("transaction {id} running"),
        (State::Discarded, _, _) => format!("transaction {id} discarded"),
        (State::Committed, Some(c), _) if !c.refused.is_empty() => format!(
            "transaction {id} committed; {} refused, --json lists them",
            c.refused.len()
        ),
        (State::Committed, _, _) => format!("transaction {id} committed"),
    };
    format!("[changes: {counts} ({tail})]")
}

/// How many denials the text names; the rest are counted.
const DENIALS_SHOWN: usize = 3;

/// The sandbox's denial notices: one line for each of the first
/// [`DENIALS_SHOWN`] denials, with a hint where one helps, then a count.
fn denial_lines(sb: &crate::result::SandboxFacts) -> Vec<String> {
    let mut lines = Vec::new();
    for d in sb.denials.iter().take(DENIALS_SHOWN) {
        let path = d.path.as_deref().map(escape_controls);
        let what = match (&path, d.network) {
            (Some(family), true) => format!("network denied: {}({family})", d.op),
            (None, true) => format!("network denied: {}", d.op),
            (Some(path), false) => {
                let prep = if d.op == "write" || d.op == "connect" || d.op.starts_with("send") {
                    "to"
                } else {
                    "of"
                };
                format!("denied {} {prep} {path}", d.op)
            }
            (None, false) => format!("{}; a write was denied", sb.mode),
        };
        let what = match d.count {
            0 | 1 => what,
            n => format!("{what} ({n} times)"),
        };
        // A hint names a path the command may have chosen.
        match d.hint.as_deref().map(escape_controls) {
            Some(h) => lines.push(format!("[sandbox: {what}; try {h}]")),
            None => lines.push(format!("[sandbox: {what}]")),
        }
    }
    for d in sb.network_denials.iter().take(DENIALS_SHOWN) {
        let host = escape_controls(&d.host);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let times = match d.count {
            0 | 1 => String::new(),
            n => format!(" ({n} times)"),
        };
        lines.push(format!(
            "[sandbox: network denied: proxy refused {host}:{} ({}){times}]",
            d.port,
            escape_controls(&d.reason)
        ));
    }
    let proxy_more =
        sb.network_denials.len().saturating_sub(DENIALS_SHOWN) as u64 + sb.network_denials_more;
    if proxy_more > 0 {
        lines.push(format!(
            "[sandbox: the proxy refused {proxy_more} more; --json lists up to 100]"
        ));
    }
    let shown = sb.denials.len().min(DENIALS_SHOWN) as u64;
    let listed_more = sb.denials.len() as u64 - shown;
    match (listed_more, sb.denials_more) {
        (0, 0) => {}
        (n, 0) => lines.push(format!("[sandbox: {n} more denied; --json lists them]")),
        (0, m) => lines.push(format!("[sandbox: {m} more denied, counted only]")),
        (n, m) => lines.push(format!(
            "[sandbox: {} more denied; --json lists {n} of them]",
            n + m
        )),
    }
    if lines.is_empty() {
        lines.push(format!("[sandbox: {}; a write was denied]", sb.mode));
    }
    lines
}

/// `text` with its control characters (C0, DEL, C1) shown as `\xNN`: a
/// path the command chose cannot start a line of its own in the notices.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` as one line of a table (`job list`, the MCP `list` tool's
/// text): a control character (C0, DEL, C1) shows as an escape (`\n`,
/// `\r`, `\t`, the others `\xNN`), and so do the characters some readers
/// break a line at or that reorder what follows (the line and paragraph
/// separators, the bidirectional marks, embeddings, overrides and
/// isolates: `\u2028`, `\u202e`, ...). Whatever a job's command holds,
/// its row is then one line: no part of the command starts a row of its
/// own or draws over the row on a terminal. Backslashes stay as they are: the text
/// is for reading (a command's own `\n` reads as it was typed), and the
/// JSON forms keep the exact text.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| {
        c.is_control()
            || matches!(c,
                '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x100 && escaped(c) => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if escaped(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Appends `text`, the command's, as `on_terminal` says, with the lines
/// that read as `dsh-exec`'s own escaped, and a newline if it has none.
fn push_text<'a>(buf: &mut Vec<Cow<'a, str>>, text: &'a str, on_terminal: OnTerminal) {
    let shown = match super::terminal::shown(text, on_terminal) {
        Cow::Borrowed(t) => escape_own_lines(t),
        Cow::Owned(t) => Cow::Owned(escape_own_lines(&t).into_owned()),
    };
    let newline = !shown.is_empty() && !shown.ends_with('\n');
    buf.push(shown);
    if newline {
        buf.push(Cow::Borrowed("\n"));
    }
}

/// SGR 0 (ECMA-48 "reset all attributes"): written before the notices and
/// the marker on a terminal, so that output ending in `\x1b[8m`
/// (concealed) cannot hide them.
pub const ATTRIBUTE_RESET: &str = "\x1b[0m";

/// Whether `line` (without its newline) has the shape of a line `dsh-exec`
/// itself writes in the text result: a marker (`[exit code: N]`, `[killed
/// by signal: X]`, `[detached as job ID]`), a notice (`[timed out after
/// D]`, `[aborted by X]`, `[sandbox: ...]`, `[NAME VALUE capped at ...]`,
/// a limit's (`[killed by the memory limit ...]`, `[stopped by the CPU
/// time limit ...]`, `[process limit reached ...]`, `[file size limit
/// reached ...]`),
/// `[not shown live...]`), a section or truncation line (`[stderr]`,
/// `[stdout truncated: ...]`), or a job's state (`[running]`, `[still
/// running]`, `[lost]`); after any backslashes in front (see
/// [`escape_own_lines`]).
///
/// The line is judged as a reader sees it: with a terminal's effects
/// applied and escapes removed ([`super::plain::plain`]: `x\r[exit code:
/// 0]` shows as the marker), and without whitespace at either end
/// (`[timed out after 1s] `, a trailing `\r`, a no-break space in front),
/// so that nothing that reads as one of these lines passes unescaped.
pub fn is_own_line_shape(line: &str) -> bool {
    if !line.contains('[') {
        return false;
    }
    // A piece after a character some reader breaks the line at is judged
    // as a line of its own.
    if line.contains(breaks_a_line) && line.split(breaks_a_line).skip(1).any(one_line_shape) {
        return true;
    }
    one_line_shape(line)
}

/// [`is_own_line_shape`] of a line without break characters.
fn one_line_shape(line: &str) -> bool {
    if !line.contains('[') {
        return false;
    }
    // As a terminal shows it (effects applied, escapes removed), and as
    // the bytes are, where a NUL or another control character may show as
    // nothing at all.
    let seen = super::plain::plain(line);
    shape_of(seen.trim_matches(invisible)) || shape_of(line.trim_matches(invisible))
}

/// Whether `line`, trimmed, has the shape of one of dsh-exec's own lines.
fn shape_of(line: &str) -> bool {
    let line = line.trim_start_matches('\\');
    let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) else {
        return false;
    };
    let int = |s: &str| {
        let s = s.strip_prefix('-').unwrap_or(s);
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    };
    inner.strip_prefix("exit code: ").is_some_and(int)
        || ["stderr", "running", "still running", "lost"].contains(&inner)
        || [
            "killed by signal: ",
            "timed out after ",
            "timed out: no output for ",
            "aborted by ",
            "sandbox: ",
            "killed by the memory limit",
            "stopped by the CPU time limit",
            "process limit reached",
            "file size limit reached",
            "changes: ",
            "stdout truncated: ",
            "stderr truncated: ",
            "detached as job ",
            "not shown live",
            "lossy: ",
            "... ",
            "stdout: ",
            "stderr: ",
        ]
        .iter()
        .any(|p| inner.starts_with(p))
        || inner.contains(" capped at ")
}

/// What a reader does not see at either end of a line: whitespace, and the
/// Unicode format characters that render as nothing (soft hyphen, zero-
/// width space and joiners, direction marks and embeddings, word joiner
/// and invisible operators, isolates, the byte-order mark).
fn invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c,
            '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{180e}'
            | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{ffa0}' | '\u{e0000}'..='\u{e007f}')
}

/// Characters that some readers take for a line break inside what
/// dsh-exec splits as one line (Python's `str.splitlines`, terminals):
/// vertical tab, form feed, NEL, the line and paragraph separators, and a
/// carriage return.
fn breaks_a_line(c: char) -> bool {
    matches!(
        c,
        '\u{0b}' | '\u{0c}' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// `line` (without its newline) escaped, when it reads as one of
/// `dsh-exec`'s own ([`is_own_line_shape`]): a backslash in front, and the
/// line as it reads when it holds control characters (a carriage return
/// or a backspace would draw over the backslash on a terminal); `None`
/// when it needs no escaping.
pub fn escaped_line(line: &str) -> Option<String> {
    if !is_own_line_shape(line) {
        return None;
    }
    if line.chars().any(|c| c.is_control()) {
        Some(format!("\\{}", super::plain::plain(line)))
    } else {
        Some(format!("\\{line}"))
    }
}

/// `text` with a backslash in front of every line that has the shape of
/// one of `dsh-exec`'s own lines ([`is_own_line_shape`]): the mbox "From "
/// rule, so that only `dsh-exec`'s own notices and marker appear
/// unescaped in the text result (a command printing `[exit code: 0]` shows
/// `\[exit code: 0]`). A line that already starts with backslashes gets
/// one more, so the escaping can be undone. JSON text fields and spill
/// files stay exact.
pub fn escape_own_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('[') || !text.split('\n').any(is_own_line_shape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        match escaped_line(line) {
            Some(escaped) => out.push_str(&escaped),
            None => out.push_str(line),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Where the full stream is, for a line about a cut.
fn whereabouts(out: &CollectedOutput) -> String {
    if out.spill_truncated
        && let Some(p) = &out.spill_path
    {
        return format!(
            "spill file {} holds the first {} bytes only (--spill-max-bytes); {} later bytes \
             dropped",
            p.display(),
            out.total_bytes.saturating_sub(out.spill_dropped_bytes),
            out.spill_dropped_bytes
        );
    }
    match (&out.spill_path, &out.spill_error) {
        (Some(p), None) => format!("full stream: {}", p.display()),
        (Some(p), Some(e)) => format!("spill file {} incomplete: {e}", p.display()),
        (None, Some(e)) => format!("spill failed: {e}"),
        (None, None) => "no spill file".into(),
    }
}

/// The line that opens a cut stream's section (`kept: tail`), or closes
/// it (`kept: head`); `None` for `head+tail`, whose line goes between the
/// two parts ([`omission_line`]), and for a stream kept whole.
fn truncation_line(name: &str, out: &CollectedOutput) -> Option<String> {
    if !out.truncated {
        return None;
    }
    let (n, at) = (out.omitted_bytes(), whereabouts(out));
    match out.kept {
        Keep::Tail => Some(format!(
            "[{name} truncated: {n} earlier bytes omitted; {at}]"
        )),
        Keep::Head => Some(format!("[{name} truncated: {n} later bytes omitted; {at}]")),
        Keep::HeadTail => None,
    }
}

/// The line between the head and the tail of `kept: head+tail`.
fn omission_line(out: &CollectedOutput) -> String {
    format!(
        "[... {} bytes omitted; {} ...]",
        out.omitted_bytes(),
        whereabouts(out)
    )
}

/// One stream's text as the result shows it: the truncation line and the
/// text, or the head, the omission line and the tail.
fn push_stream<'a>(
    buf: &mut Vec<Cow<'a, str>>,
    name: &str,
    out: &'a CollectedOutput,
    on_terminal: OnTerminal,
) {
    match (out.kept, &out.head) {
        (Keep::HeadTail, Some(head)) if out.truncated => {
            push_text(buf, head, on_terminal);
            buf.push(Cow::Owned(omission_line(out) + "\n"));
            push_text(buf, &out.text, on_terminal);
        }
        (Keep::Head, _) => {
            push_text(buf, &out.text, on_terminal);
            if let Some(line) = truncation_line(name, out) {
                buf.push(Cow::Owned(line + "\n"));
            }
        }
        _ => {
            if let Some(line) = truncation_line(name, out) {
                buf.push(Cow::Owned(line + "\n"));
            }
            push_text(buf, &out.text, on_terminal);
        }
    }
}

/// Styles the notice and marker lines on a terminal.
fn paint(line: &str, result: &RunResult, is_marker: bool) -> String {
    if is_marker {
        if result.exit_code == Some(0) && result.signal.is_none() {
            line.green().bold().to_string()
        } else {
            line.red().bold().to_string()
        }
    } else if line.starts_with("[timed out") {
        line.yellow().to_string()
    } else {
        line.red().to_string()
    }
}

/// For `--stream`, where every byte was shown live: one line per outgrown
/// stream, saying so and where its full copy is (`[stdout: 12869 bytes
/// shown live, 1024 kept; full stream: PATH]`).
pub fn render_truncations(result: &RunResult) -> String {
    [("stdout", &result.stdout), ("stderr", &result.stderr)]
        .into_iter()
        .filter(|(_, out)| out.truncated)
        .map(|(name, out)| {
            format!(
                "[{name}: {} bytes shown live, {} kept; {}]\n",
                out.total_bytes,
                out.kept_bytes,
                whereabouts(out)
            )
        })
        .collect()
}

/// What follows the live output of `--stream`: a newline when stdout ended
/// mid-line (so the marker gets a line of its own), where the full streams
/// are when they outgrew their budgets, and the notices and the marker.
/// When the live copy fell behind and dropped output, a line says so and the
/// kept output is printed in full instead, shown as `on_terminal` says.
pub fn render_after_stream(result: &RunResult, color: bool, on_terminal: OnTerminal) -> String {
    let mut buf = String::new();
    // What was shown live decides, not the kept text: stderr may share the
    // terminal (2>&1), and the kept text may be the head or rendered.
    if result.stdout.live_ended_mid_line {
        buf.push('\n');
    }
    let dropped = [("stdout", &result.stdout), ("stderr", &result.stderr)]
        .into_iter()
        .filter(|(_, o)| o.live_dropped_bytes > 0)
        .map(|(name, o)| format!("{name}: {} bytes", o.live_dropped_bytes))
        .collect::<Vec<_>>();
    if dropped.is_empty() {
        buf.push_str(&render_truncations(result));
    } else {
        buf.push_str(&format!(
            "[not shown live, the reader fell behind: {}; the kept output follows]\n",
            dropped.join(", ")
        ));
        buf.push_str(&render_output(result, on_terminal));
    }
    buf + &render_status(result, color)
}

/// The output sections only (truncation lines, stdout, `[stderr]`
/// section), the command's text shown as `on_terminal` says
/// ([`OnTerminal::Exact`] where the text goes to no terminal).
pub fn render_output(result: &RunResult, on_terminal: OnTerminal) -> String {
    output_pieces(result, on_terminal).concat()
}

/// [`render_output`] in pieces, in order, each kept stream's text borrowed
/// from `result` where nothing in it is changed: written one after the
/// other, the kept output is never copied whole (peak memory grows with
/// the budget once, not twice).
pub fn output_pieces(result: &RunResult, on_terminal: OnTerminal) -> Vec<Cow<'_, str>> {
    let mut buf = Vec::new();
    push_stream(&mut buf, "stdout", &result.stdout, on_terminal);
    if result.stderr.total_bytes > 0 {
        buf.push(Cow::Borrowed("[stderr]\n"));
        push_stream(&mut buf, "stderr", &result.stderr, on_terminal);
    }
    buf
}

/// The notices and the marker, each line ending in a newline; coloured when
/// `color` is true.
pub fn render_status(result: &RunResult, color: bool) -> String {
    status_lines(result, color, true)
}

/// [`render_status`] without the sandbox's notices, which `-i` writes to
/// stderr ([`render_sandbox_notices`]).
pub fn render_status_without_sandbox(result: &RunResult, color: bool) -> String {
    status_lines(result, color, false)
}

/// The sandbox's notices ([`sandbox_notices`]), each line ending in a
/// newline; coloured when `color` is true.
pub fn render_sandbox_notices(result: &RunResult, color: bool) -> String {
    sandbox_notices(result)
        .into_iter()
        .map(|line| {
            let line = if color {
                paint(&line, result, false)
            } else {
                line
            };
            line + "\n"
        })
        .collect()
}

/// The notices (the sandbox's too when `sandbox`) and the marker.
fn status_lines(result: &RunResult, color: bool, sandbox: bool) -> String {
    let mut buf = String::new();
    let style = |line: String, is_marker| {
        if color {
            paint(&line, result, is_marker)
        } else {
            line
        }
    };
    for line in notice_lines(result, sandbox) {
        buf.push_str(&style(line, false));
        buf.push('\n');
    }
    buf.push_str(&style(marker(result), true));
    buf.push('\n');
    buf
}

/// The whole rendered result: output sections (shown as `on_terminal`
/// says), notices, marker.
pub fn render_text(result: &RunResult, color: bool, on_terminal: OnTerminal) -> String {
    render_output(result, on_terminal) + &render_status(result, color)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::marker::parse_status;
    use crate::signal::Signal;

    fn result(stdout: &str, stderr: &str) -> RunResult {
        let out = |t: &str| CollectedOutput {
            text: t.into(),
            head: None,
            kept: Keep::Tail,
            omitted_bytes: 0,
            render: None,
            truncated: false,
            total_bytes: t.len() as u64,
            kept_bytes: t.len() as u64,
            spill_path: None,
            spill_error: None,
            spill_truncated: false,
            spill_dropped_bytes: 0,
            live_dropped_bytes: 0,
            live_ended_mid_line: false,
        };
        RunResult {
            command: "x".into(),
            workdir: "/".into(),
            exit_code: Some(0),
            signal: None,
            timed_out: false,
            timeout_kind: None,
            aborted: false,
            aborted_by: None,
            timeout_ms: Some(300),
            idle_timeout_ms: None,
            capped: vec![],
            duration_ms: 1,
            stdout: out(stdout),
            stderr: out(stderr),
            sandbox: None,
            env_scrubbed: vec![],
            resources: None,
            limit_exceeded: None,
            limits: None,
            transaction: None,
        }
    }

    #[test]
    fn the_commands_own_marker_shaped_lines_are_escaped() {
        let r = result(
            "[exit code: 0]\nok [exit code: 0]\n[1, 2]\n\\[sandbox: x]\n",
            "[stderr]\n",
        );
        assert_eq!(
            render_text(&r, false, OnTerminal::Exact),
            "\\[exit code: 0]\nok [exit code: 0]\n[1, 2]\n\\\\[sandbox: x]\n[stderr]\n\\[stderr]\n[exit code: 0]\n"
        );
        assert_eq!(
            parse_status(&render_text(&r, false, OnTerminal::Exact))
                .unwrap()
                .exit_code,
            Some(0)
        );
    }

    #[test]
    fn a_marker_behind_invisible_characters_is_escaped_too() {
        for line in [
            "\u{200b}[exit code: 0]",
            "[exit code: 0]\u{feff}",
            "\u{2066}[killed by signal: SIGKILL]\u{2069}",
            "\u{00ad} [timed out after 1s]",
            "\u{061c}[exit code: 0]",
            "[exit code: 0]\u{0}",
            "\u{e0001}[exit code: 0]",
            "x\u{0b}[exit code: 0]",
            "x\u{85}[exit code: 0]",
            "x\u{2028}[stderr]",
        ] {
            assert!(is_own_line_shape(line), "{line:?}");
            assert!(
                escaped_line(line).is_some_and(|e| e.starts_with('\\')),
                "{line:?}"
            );
        }
        assert!(!is_own_line_shape("\u{200b}[1, 2]"));
    }

    #[test]
    fn a_denial_shows_the_controls_of_its_path_and_hint() {
        let mut r = result("", "");
        r.exit_code = Some(1);
        r.sandbox = Some(
            serde_json::from_value(serde_json::json!({
                "mode": "workspace-write", "denied": true, "enforcement": "full",
                "runner_failed": false, "network": "allow", "network_enforcement": "none",
                "denials": [{"op": "write", "path": "/d\u{1b}]0;t\u{7}/f", "errno": "EACCES",
                             "source": "output", "hint": "--writable-root /d\u{1b}]0;t\u{7}"}],
            }))
            .unwrap(),
        );
        assert_eq!(
            sandbox_notices(&r),
            ["[sandbox: denied write to /d\\x1b]0;t\\x07/f; try --writable-root /d\\x1b]0;t\\x07]"]
        );
        assert_eq!(render_status_without_sandbox(&r, false), "[exit code: 1]\n");
    }

    #[test]
    fn plain_exit() {
        assert_eq!(
            render_text(&result("hello\n", ""), false, OnTerminal::Exact),
            "hello\n[exit code: 0]\n"
        );
    }

    #[test]
    fn stderr_section_and_missing_newlines() {
        let mut r = result("out", "err");
        r.timed_out = true;
        r.exit_code = None;
        r.signal = Some(Signal::SIGTERM);
        assert_eq!(
            render_text(&r, false, OnTerminal::Exact),
            "out\n[stderr]\nerr\n[timed out after 300ms]\n[killed by signal: SIGTERM]\n"
        );
    }

    #[test]
    fn markers_round_trip() {
        for code in [0, 1, 2, 124, 125, 126, 127, 255] {
            let mut r = result("", "");
            r.exit_code = Some(code);
            let parsed = parse_status(&render_text(&r, false, OnTerminal::Exact)).unwrap();
            assert_eq!(parsed.exit_code, Some(code));
            let parsed = parse_status(&render_text(&r, true, OnTerminal::Exact)).unwrap();
            assert_eq!(parsed.exit_code, Some(code));
        }
        for n in 1..=64 {
            let mut r = result("", "");
            r.exit_code = None;
            r.signal = Some(Signal::from_number(n));
            let parsed = parse_status(&render_text(&r, false, OnTerminal::Exact)).unwrap();
            assert_eq!(parsed.signal, Some(Signal::from_number(n).name()));
        }
    }

    #[test]
    fn one_line_escapes_what_breaks_or_reorders_a_line() {
        assert_eq!(one_line("echo a | tr a b"), "echo a | tr a b");
        assert!(matches!(
            one_line("printf 'x\\n'"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            one_line("a\nb\rc\td\x1b[2Je\u{0}f\u{7f}g\u{85}h\u{2028}i\u{202e}j"),
            "a\\nb\\rc\\td\\x1b[2Je\\x00f\\x7fg\\x85h\\u2028i\\u202ej"
        );
        assert_eq!(one_line("café ✓"), "café ✓");
    }
}
