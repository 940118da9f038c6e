//! Abort requests: what makes a run end early besides its deadline.
//!
//! The first request starts the SIGTERM → grace → SIGKILL escalation; a
//! further one sends SIGKILL at once ([`super::phases`]).

use std::future::{Future, pending};
use std::io;

use tokio::signal::unix::{SignalKind, signal};

use crate::signal::Signal;

/// A source of abort requests; each names the signal that asked for it.
pub trait AbortSource {
    /// Resolves with the next abort request; may never resolve.
    fn next(&mut self) -> impl Future<Output = Signal>;
}

/// No abort source: the run ends only by itself or by its deadline.
pub struct NoAbort;

impl AbortSource for NoAbort {
    async fn next(&mut self) -> Signal {
        pending().await
    }
}

/// SIGINT, SIGTERM and SIGHUP sent to this process, as abort requests, and
/// the other signals whose default action would end it without cleaning up
/// (SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM), so that no signal short of SIGKILL
/// leaves the command's tree behind.
///
/// Installing replaces the default action of those signals (termination) for
/// the whole process, which is what the `dsh-exec` binary wants.
pub struct AbortSignals {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl AbortSignals {
    /// Installs the handlers. Must be called within a tokio runtime.
    ///
    /// Errors when a handler cannot be installed (sigaction(2)).
    pub fn install() -> io::Result<AbortSignals> {
        use nix::libc;
        let kinds = [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGALRM,
        ];
        let streams = kinds
            .into_iter()
            .map(|n| Ok((Signal::from_number(n), signal(SignalKind::from_raw(n))?)))
            .collect::<io::Result<_>>()?;
        Ok(AbortSignals { streams })
    }
}

impl AbortSource for AbortSignals {
    async fn next(&mut self) -> Signal {
        // The first of the streams (in the order above) with a pending signal.
        std::future::poll_fn(|cx| {
            for (sig, stream) in &mut self.streams {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}
