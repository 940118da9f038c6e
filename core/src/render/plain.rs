//! `--render plain`: the kept text as a terminal would leave it, for a
//! model's context or a log. Escape sequences are parsed by the `vte` crate
//! (the ECMA-48 state machine of Paul Williams' DEC parser); this module
//! only applies their effect on a line:
//!
//! - a carriage return moves to the start of the line, and what is printed
//!   next overwrites it (a progress bar drawn with `\r` keeps its last
//!   frame);
//! - a backspace moves one column back;
//! - erase in line (`CSI K`, `CSI 1 K`, `CSI 2 K`) clears to the end, to
//!   the start, or all of it;
//! - every other CSI, OSC, DCS and escape sequence is dropped (colours,
//!   cursor moves, titles, hyperlinks);
//! - other C0 controls but `\t` and `\n`, DEL and the C1 controls are
//!   shown as `\xNN`.
//!
//! The spill file and the byte counts stay raw: this changes only the text
//! fields of the result.

use vte::{Params, Parser, Perform};

pub use crate::spec::Render;

/// Renders the text fields of `out` (the kept text and head) as `render`
/// says; the byte counts and the spill file are left as they are.
pub fn apply(render: Render, out: &mut crate::CollectedOutput) {
    if render == Render::Plain {
        out.text = plain(&out.text);
        out.head = out.head.as_deref().map(plain);
        out.render = Some("plain".into());
    }
}

/// `text` with the terminal effects applied and escapes removed.
pub fn plain(text: &str) -> String {
    let mut screen = Line::default();
    let mut parser = Parser::new();
    parser.advance(&mut screen, text.as_bytes());
    screen.flush_line(false);
    screen.out
}

/// The line being drawn and the finished text.
#[derive(Default)]
struct Line {
    /// Finished lines, each with its `\n`.
    out: String,
    /// The current line's cells.
    cells: Vec<char>,
    /// The cursor's column in `cells`.
    col: usize,
}

impl Line {
    fn put(&mut self, c: char) {
        if self.col < self.cells.len() {
            self.cells[self.col] = c;
        } else {
            self.cells.resize(self.col, ' ');
            self.cells.push(c);
        }
        self.col += 1;
    }

    fn flush_line(&mut self, newline: bool) {
        self.out.extend(self.cells.drain(..));
        if newline {
            self.out.push('\n');
        }
        self.col = 0;
    }
}

impl Perform for Line {
    fn print(&mut self, c: char) {
        if c.is_control() {
            // DEL and the C1 controls, which the parser hands over as text.
            for s in format!("\\x{:02x}", u32::from(c)).chars() {
                self.put(s);
            }
        } else {
            self.put(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => self.flush_line(true),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => self.put('\t'),
            other => {
                for c in format!("\\x{other:02x}").chars() {
                    self.put(c);
                }
            }
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        if action != 'K' || !intermediates.is_empty() {
            return;
        }
        let mode = params
            .iter()
            .next()
            .and_then(|p| p.first().copied())
            .unwrap_or(0);
        match mode {
            0 => self.cells.truncate(self.col),
            1 => {
                let upto = (self.col + 1).min(self.cells.len());
                self.cells[..upto].fill(' ');
            }
            2 => self.cells.clear(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carriage_return_progress_bar_keeps_its_last_frame() {
        let frames: String = (1..=100).map(|i| format!("\r{i:3}%")).collect();
        assert_eq!(plain(&frames), "100%");
        assert_eq!(plain("\rdownloading 10%\r\x1b[Kdone\n"), "done\n");
        assert_eq!(plain("abc\rX\n"), "Xbc\n");
    }

    #[test]
    fn escapes_go_backspaces_apply_and_controls_show() {
        assert_eq!(plain("\x1b[31mred\x1b[0m \x1b]0;title\x07ok\n"), "red ok\n");
        assert_eq!(plain("ab\x08c\n"), "ac\n");
        assert_eq!(plain("a\tb\x01c\x7f\n"), "a\tb\\x01c\\x7f\n");
        assert_eq!(plain("x\x1b[2Ky\n"), " y\n");
        assert_eq!(plain("abcd\x08\x08\x1b[1Kz\n"), "  zd\n");
    }
}
