//! A program on a real pseudo-terminal, driven by python3's `pty` module:
//! what the terminal showed, and how the program ended.

use super::known_env;
use std::ffi::{OsStr, OsString};
use std::process::Command;
use std::time::Duration;

/// How long a whole session may take before the driver gives up: it then
/// stops the program (SIGTERM, then SIGKILL) and the test fails.
const SESSION_LIMIT: Duration = Duration::from_secs(20);

/// The driver. Its arguments: the steps as JSON (`[[after, keys as hex],
/// ...]`), the session limit in seconds, then the program's argv. It writes
/// what the terminal showed to stdout and `status=N` to stderr; when the
/// session fails it writes why to stderr and exits 2.
const DRIVER: &str = r#"
import json, os, pty, select, signal, sys, time

steps = json.loads(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
argv = sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
shown = b""

def read_some():
    # Waits up to 50 ms for output; False once the terminal is closed.
    global shown
    if select.select([fd], [], [], 0.05)[0]:
        try:
            data = os.read(fd, 4096)
        except OSError:
            return False
        if not data:
            return False
        shown += data
    return True

def reap(seconds):
    # Reads on while waiting up to `seconds` for the program; its status or None.
    stop = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() >= stop:
            return None
        read_some()

def stop(sig):
    # The program leads its own session and process group (pty.fork).
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass

def fail(why):
    stop(signal.SIGTERM)
    if reap(5) is None:
        stop(signal.SIGKILL)
        os.waitpid(pid, 0)
    sys.stdout.buffer.write(shown)
    sys.stderr.write("pty driver: %s\n" % why)
    sys.exit(2)

mark = 0
for after, keys in steps:
    wanted = after.encode()
    while shown.find(wanted, mark) < 0:
        if time.monotonic() >= end:
            fail("the terminal did not show %r in time" % after)
        if not read_some():
            fail("the program closed the terminal before showing %r" % after)
    mark = shown.find(wanted, mark) + len(wanted)
    os.write(fd, bytes.fromhex(keys))
while read_some():
    if time.monotonic() >= end:
        fail("the program did not close the terminal in time")
status = reap(max(0.0, end - time.monotonic()))
if status is None:
    fail("the program did not exit in time")
sys.stdout.buffer.write(shown)
sys.stderr.write("status=%d\n" % os.waitstatus_to_exitcode(status))
"#;

/// A session to run on a new pseudo-terminal: the program (its argv), its
/// environment ([`dsh`](super::dsh)'s small one plus what [`Pty::env`]
/// adds), and what to type when. Built like [`Test`](super::Test).
pub struct Pty {
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    steps: Vec<(String, Vec<u8>)>,
}

/// What the terminal showed (lossy UTF-8, line ends as the terminal sent
/// them: `\r\n`), and the program's exit status (`-N` for death by signal
/// N).
pub struct Screen {
    /// Everything the program wrote to the terminal, including the echo of
    /// what was typed.
    pub text: String,
    /// The program's exit status.
    pub status: i32,
}

impl Pty {
    /// A session running `program`, with no arguments yet.
    pub fn new(program: impl AsRef<OsStr>) -> Pty {
        Pty {
            argv: vec![program.as_ref().to_owned()],
            env: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Pty
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.argv
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets `key` to `value` in the program's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Pty {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Adds a step: once the terminal has shown `after` (after what the
    /// previous step waited for), type `keys`.
    pub fn type_after(mut self, after: &str, keys: &[u8]) -> Pty {
        self.steps.push((after.to_owned(), keys.to_owned()));
        self
    }

    /// Runs the session: the steps in order, then reads until the program
    /// closes the terminal and exits. Panics, showing the terminal so far,
    /// when that takes longer than 20 s (the program is then stopped).
    pub fn run(self) -> Screen {
        let steps: Vec<(String, String)> = self
            .steps
            .iter()
            .map(|(after, keys)| {
                let hex = keys.iter().map(|b| format!("{b:02x}")).collect();
                (after.clone(), hex)
            })
            .collect();
        let mut driver = Command::new("python3");
        known_env(&mut driver)
            .args(["-c", DRIVER])
            .arg(serde_json::to_string(&steps).unwrap())
            .arg(SESSION_LIMIT.as_secs_f64().to_string())
            .args(&self.argv)
            .envs(self.env);
        let out = driver.output().expect("run python3");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let report = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{}\nthe terminal showed:\n{text}",
            report.trim_end()
        );
        let status = report
            .trim_end()
            .rsplit('\n')
            .next()
            .and_then(|l| l.strip_prefix("status="))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("pty driver: no status in {report:?}"));
        Screen { text, status }
    }
}
