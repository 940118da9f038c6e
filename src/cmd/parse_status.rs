//! `dsh-exec parse-status [FILE]`: the final marker of a rendered result,
//! as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use dsh_exec_core::render::marker::parse_status_from;

use crate::output::{print_stdout, say, to_json};

/// Reads `file` (stdin when absent or `-`) and prints its marker; exits 1
/// when the last line is no marker, and with the usage status when the
/// input cannot be read.
pub(crate) fn parse_status(file: Option<PathBuf>) -> ExitCode {
    let file = file.filter(|f| f.as_os_str() != "-");
    let read = match &file {
        Some(path) => std::fs::File::open(path).and_then(parse_status_from),
        None => parse_status_from(std::io::stdin().lock()),
    };
    let parsed = match read {
        Ok(b) => b,
        Err(e) => {
            let name = file
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "stdin".into());
            // parse-status keeps its own statuses: 2 for input it cannot read.
            say!("dsh-exec: error: cannot read {name}: {e}");
            return ExitCode::from(2);
        }
    };
    match parsed {
        Some(status) => {
            print_stdout(&to_json(&status));
            ExitCode::SUCCESS
        }
        None => {
            say!(
                "dsh-exec: error: the last line is no exit marker (and the input no --json result)"
            );
            ExitCode::from(1)
        }
    }
}
