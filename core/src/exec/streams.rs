//! The command's output pipes while it runs: read into the captures, copied
//! live for `--stream`.

use std::future::pending;
use std::io;
use std::os::fd::OwnedFd;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use crate::capture::{Delta, SpillDir, StreamCapture};
use crate::error::Error;
use crate::spec::LiveOutput;

/// Bytes read from a pipe at once: 256 KiB.
const READ_CHUNK: usize = 256 * 1024;

/// The capacity asked for each output pipe: 1 MiB, the default
/// `/proc/sys/fs/pipe-max-size` (pipe(7), `F_SETPIPE_SZ`). A command that
/// writes a lot then wakes this process once per megabyte instead of once
/// per 64 KiB; a kernel that refuses keeps the default, which only costs
/// speed.
const PIPE_CAPACITY: i32 = 1 << 20;

/// The live copy of the output for `--stream`. Writes block (a slow reader
/// slows the run, as with `tee`); a write error (a closed stdout) ends the
/// copy to that target, never the run.
struct Live {
    target: Option<LiveOutput>,
    stdout_ok: bool,
    stderr_ok: bool,
}

impl Live {
    fn copy(&mut self, bytes: &[u8], from_stderr: bool) {
        use std::io::Write;
        let to_stderr = match self.target {
            None => return,
            Some(LiveOutput::Stderr) => true,
            Some(LiveOutput::Mirrored) => from_stderr,
        };
        if to_stderr && self.stderr_ok {
            let mut e = io::stderr().lock();
            self.stderr_ok = e.write_all(bytes).and_then(|_| e.flush()).is_ok();
        } else if !to_stderr && self.stdout_ok {
            let mut o = io::stdout().lock();
            self.stdout_ok = o.write_all(bytes).and_then(|_| o.flush()).is_ok();
        }
    }
}

/// One output pipe and its capture.
struct Stream {
    pipe: Option<pipe::Receiver>,
    capture: StreamCapture,
    /// Read buffer, allocated once per run (a supervisor drives the run in
    /// short slices).
    buf: Vec<u8>,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, name: &'static str, budget: u64) -> Result<Stream, Error> {
        if let Some(fd) = &fd {
            let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
        }
        let pipe = fd
            .map(pipe::Receiver::from_owned_fd)
            .transpose()
            .map_err(|source| Error::Runtime {
                what: "the output pipes",
                source,
            })?;
        Ok(Stream {
            pipe,
            capture: StreamCapture::new(name, budget),
            buf: vec![0u8; READ_CHUNK],
        })
    }

    async fn read(&mut self) -> io::Result<usize> {
        match &mut self.pipe {
            Some(p) => p.read(&mut self.buf).await,
            None => pending().await,
        }
    }

    /// Takes the outcome of a read: bytes into the capture (and the live
    /// copy), end-of-file or an error closes the pipe.
    fn took(&mut self, read: io::Result<usize>, live: &mut Live, spill: &mut SpillDir, err: bool) {
        match read {
            Ok(n) if n > 0 => {
                live.copy(&self.buf[..n], err);
                self.capture.push(&self.buf[..n], spill);
            }
            _ => self.pipe = None,
        }
    }
}

/// stdout and stderr of the command, the spill directory they overflow
/// into, and the live copy.
pub(crate) struct Streams {
    out: Stream,
    err: Stream,
    spill_dir: SpillDir,
    live: Live,
}

impl Streams {
    /// The captures of a spawned command's pipes (`None` for an interactive
    /// run, whose output is not captured).
    pub(crate) fn new(
        stdout: Option<OwnedFd>,
        stderr: Option<OwnedFd>,
        budgets: (u64, u64),
        spill_dir: SpillDir,
        live: Option<LiveOutput>,
    ) -> Result<Streams, Error> {
        Ok(Streams {
            out: Stream::new(stdout, "stdout", budgets.0)?,
            err: Stream::new(stderr, "stderr", budgets.1)?,
            spill_dir,
            live: Live {
                target: live,
                stdout_ok: true,
                stderr_ok: true,
            },
        })
    }

    /// Reads the next chunk from whichever pipe has one; pending forever
    /// once both are closed. Cancel-safe: a read that did not complete took
    /// no bytes.
    pub(crate) async fn read_some(&mut self) {
        let Streams {
            out,
            err,
            spill_dir,
            live,
        } = self;
        tokio::select! {
            r = out.read() => out.took(r, live, spill_dir, false),
            r = err.read() => err.took(r, live, spill_dir, true),
        }
    }

    /// True when both pipes are closed (or their reading was cut off).
    pub(crate) fn closed(&self) -> bool {
        self.out.pipe.is_none() && self.err.pipe.is_none()
    }

    /// Stops reading; what was read is kept.
    pub(crate) fn stop_reading(&mut self) {
        self.out.pipe = None;
        self.err.pipe = None;
    }

    /// Consumes the output produced since the previous call: (stdout, stderr).
    pub(crate) fn read_delta(&mut self) -> (Delta, Delta) {
        (self.out.capture.read_delta(), self.err.capture.read_delta())
    }

    /// The captures, to finish, and the spill directory.
    pub(crate) fn into_parts(self) -> (StreamCapture, StreamCapture, SpillDir) {
        (self.out.capture, self.err.capture, self.spill_dir)
    }

    /// The spill files of (stdout, stderr), once the streams outgrew their budgets.
    pub(crate) fn spill_paths(&self) -> (Option<&std::path::Path>, Option<&std::path::Path>) {
        (self.out.capture.spill_path(), self.err.capture.spill_path())
    }
}
