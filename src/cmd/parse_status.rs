//! `dsh-exec parse-status [FILE]`: the final marker of a rendered result,
//! as JSON.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use dsh_exec_core::render::parse_status as parse;

use crate::output::{print_stdout, say, to_json};

/// The last `keep` bytes of `r`: memory stays bounded whatever the input.
fn read_tail(mut r: impl Read, keep: usize) -> std::io::Result<Vec<u8>> {
    let mut tail = Vec::with_capacity(keep * 2);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(tail),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
}

/// How much of a rendered result `parse-status` reads: its last 64 KiB,
/// where the marker line is.
const PARSE_STATUS_TAIL: usize = 64 * 1024;

/// Reads `file` (stdin when absent or `-`) and prints its marker; exits 1
/// when the last line is no marker, and with the usage status when the
/// input cannot be read.
pub(crate) fn parse_status(file: Option<PathBuf>) -> ExitCode {
    let file = file.filter(|f| f.as_os_str() != "-");
    let read = match &file {
        Some(path) => std::fs::File::open(path).and_then(|f| read_tail(f, PARSE_STATUS_TAIL)),
        None => read_tail(std::io::stdin().lock(), PARSE_STATUS_TAIL),
    };
    let bytes = match read {
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
    match parse(&String::from_utf8_lossy(&bytes)) {
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
