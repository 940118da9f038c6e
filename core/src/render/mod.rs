//! Rendering: the text result ([`text`](mod@text)), what a terminal is shown
//! of the command's output ([`terminal`](mod@terminal)), its marker and `parse-status`
//! ([`marker`](mod@marker)), and the `explain` view ([`explain`](mod@explain)). The JSON result is
//! the serde form of [`crate::RunResult`]; `explain --json` is that of
//! [`Explanation`].

pub mod explain;
pub mod marker;
pub mod plain;
pub mod terminal;
pub mod text;

pub use self::explain::{Explanation, explain_json, explain_schema, explain_text, explanation};
pub use self::marker::{ParsedStatus, marker, parse_status};
pub use self::text::{
    ATTRIBUTE_RESET, escape_own_lines, is_own_line_shape, notices, one_line, output_pieces,
    render_after_stream, render_output, render_sandbox_notices, render_status,
    render_status_without_sandbox, render_text, render_truncations, sandbox_notices,
};
