//! Follows a run's events through the library API, as a Rust agent
//! harness that shows progress would: the same events `--events` prints,
//! as typed values on a channel.
//!
//! ```text
//! cargo run --example events_from_tokio
//! ```

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use dsh_exec_core::events::Event;
use dsh_exec_core::{Ambient, NoAbort, Request, Started, prepare, resolve, start};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let request = Request {
        command: vec!["echo one; sleep 0.1; echo two >&2".into()],
        timeout: Some(Some(Duration::from_secs(5))),
        ..Request::default()
    };
    let spec = resolve(request, &Ambient::current(None)?)?;
    let (tx, rx) = mpsc::channel();
    // The sink is called from the run's threads, one call at a time.
    let tx = Mutex::new(tx);
    let prepared = prepare(&spec)?.events(Arc::new(move |event| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(event);
        }
    }));
    match start(&spec, prepared, Instant::now())? {
        Started::Running(execution) => {
            execution.wait(&mut NoAbort).await?;
        }
        Started::NotRun(_) => {}
    }
    for event in rx.try_iter() {
        match event {
            Event::Start(s) => println!("start: {}", s.command),
            Event::Stdout(c) => print!("stdout: {}", c.text),
            Event::Stderr(c) => print!("stderr: {}", c.text),
            Event::Exit { result } => println!("exit: {:?}", result.exit_code),
            other => println!("{other:?}"),
        }
    }
    Ok(())
}
