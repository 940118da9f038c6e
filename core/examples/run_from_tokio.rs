//! Runs a command from a tokio program through the library API, as a Rust
//! agent harness would: resolve a request into a spec, run it, render it.
//!
//! ```text
//! cargo run --example run_from_tokio
//! ```

use std::time::Duration;

use dsh_exec_core::render::{parse_status, render_text};
use dsh_exec_core::{Ambient, NoAbort, Request, resolve};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let request = Request {
        command: vec!["echo hello from bash; echo oops >&2; exit 3".into()],
        timeout: Some(Some(Duration::from_secs(5))),
        stdout_max_bytes: Some(64 * 1024),
        ..Request::default()
    };
    // Every default is applied here; the spec says where each value came from.
    let spec = resolve(request, &Ambient::current(None)?)?;
    // A nonzero exit is a result, not an error: only infrastructure failures
    // (a missing workdir, no bash, ...) are Err.
    let result = dsh_exec_core::run(&spec, &mut NoAbort).await?;
    // Printed where a human may read it: the spec says what a terminal is
    // shown of the command's output (its control sequences escaped); a
    // program that stores or parses the text passes OnTerminal::Exact.
    let text = render_text(&result, false, spec.on_terminal);
    print!("{text}");
    println!("exit status for the caller: {}", result.exit_status());
    println!("parsed back: {:?}", parse_status(&text));
    println!("as JSON: {}", serde_json::to_string(&result)?);
    Ok(())
}
