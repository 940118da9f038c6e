//! `dsh-exec mcp`: the MCP server on stdio, driven by raw JSON-RPC lines
//! (and, where the package can be had, by the official Python SDK): tools,
//! the policy a call cannot widen, cancellation, progress, jobs on a
//! terminal, and what closing stdin does.
use crate::support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// A server and a line-at-a-time JSON-RPC client of it.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Notifications seen while waiting for responses.
    notes: Vec<Value>,
    next_id: u64,
    _runtime: tempfile::TempDir,
}

impl Mcp {
    /// `dsh-exec mcp ARGS`, initialized.
    fn start(args: &[&str]) -> Mcp {
        Mcp::start_with(args, &[])
    }

    /// `dsh-exec mcp ARGS` with more environment variables, initialized.
    fn start_with(args: &[&str], env: &[(&str, &std::path::Path)]) -> Mcp {
        let runtime = crate::jobs::runtime_dir();
        let mut c = dsh();
        crate::jobs::with_runtime(&mut c, runtime.path());
        c.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = c
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let mut m = Mcp {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            notes: Vec::new(),
            next_id: 1,
            _runtime: runtime,
        };
        let init = m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "1"}}),
        );
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns its id.
    fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to `id`, within 20 s (it may have come while another
    /// was awaited: calls in flight answer in any order).
    fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.notes.iter().position(|v| v["id"] == json!(id)) {
            return self.notes.remove(i);
        }
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let v = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no response to {id}"));
            if v["id"] == json!(id) {
                return v;
            }
            self.notes.push(v);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id)
    }

    /// `tools/call` of `name`: the result object.
    fn call(&mut self, name: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": name, "arguments": args}));
        r["result"].clone()
    }

    /// Closes the server's stdin and waits (10 s at most) for it to exit.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < end, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_tools_are_listed_with_schemas_and_run_returns_text_and_the_result() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "-C",
        ws.path().to_str().unwrap(),
    ]);
    let tools = m.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "run",
            "start",
            "read",
            "write_stdin",
            "wait",
            "kill",
            "list",
            "commit",
            "discard",
            "diff"
        ]
    );
    for t in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["outputSchema"].is_object(), "{t}");
    }
    let r = m.call("run", json!({"command": "echo hi; exit 3"}));
    assert_eq!(text(&r), "hi\n[exit code: 3]\n");
    assert_eq!(r["structuredContent"]["exit_code"], 3);
    assert_eq!(r["structuredContent"]["sandbox"]["mode"], "workspace-write");
    let r = m.call("run", json!({"command": "cat", "stdin": "from the call\n"}));
    assert_eq!(text(&r), "from the call\n[exit code: 0]\n");
    assert!(m.close().success());
}

#[test]
fn a_call_cannot_widen_the_servers_policy() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "--timeout",
        "5s",
        "-C",
        ws.path().to_str().unwrap(),
    ]);
    let r = m.call("run", json!({"command": "pwd", "workdir": "/"}));
    assert_eq!(r["isError"], true);
    assert!(
        text(&r).contains("outside the server's workspace root"),
        "{r}"
    );
    let r = m.call("run", json!({"command": "pwd", "workdir": "../.."}));
    assert_eq!(r["isError"], true, "{r}");
    let r = m.call("run", json!({"command": "pwd", "workdir": "sub"}));
    assert!(text(&r).ends_with("/sub\n[exit code: 0]\n"), "{r}");
    let r = m.call("run", json!({"command": "true", "sandbox": "full-access"}));
    assert_eq!(r["isError"], true);
    assert_eq!(
        text(&r),
        "sandbox full-access is wider than the server's workspace-write"
    );
    let r = m.call("run", json!({"command": "touch x", "sandbox": "read-only"}));
    assert_eq!(
        r["structuredContent"]["sandbox"]["mode"], "read-only",
        "{r}"
    );
    // A longer deadline than the server's is clamped, and says so.
    let r = m.call("run", json!({"command": "true", "timeout_ms": 3_600_000}));
    assert_eq!(r["structuredContent"]["timeout_ms"], 5000, "{r}");
    assert_eq!(
        r["structuredContent"]["capped"][0],
        "timeout 1h capped at 5s by the server"
    );
    assert!(
        text(&r).contains("[timeout 1h capped at 5s by the server]"),
        "{r}"
    );
    let r = m.call("run", json!({"command": "true", "timeout_ms": 100}));
    assert_eq!(r["structuredContent"]["timeout_ms"], 100);
}

#[test]
fn a_confining_mode_s_network_default_is_loopback_for_calls_too() {
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().to_str().unwrap();
    // The network facts of a `run` call (and what its command was told).
    let network = |m: &mut Mcp, args: Value| {
        let r = m.call("run", args);
        let facts = &r["structuredContent"]["sandbox"];
        (
            facts["mode"].as_str().unwrap_or_default().to_string(),
            facts["network"].as_str().unwrap_or_default().to_string(),
            text(&r),
        )
    };
    let told = "echo $DSH_SANDBOX_NETWORK";
    let row = |mode: &str, network: &str| {
        (
            mode.to_string(),
            network.to_string(),
            format!("{network}\n[exit code: 0]\n"),
        )
    };
    // A server in full-access: allow; a call that narrows the mode to a
    // confining one gets that mode's default, as on the command line.
    let mut m = Mcp::start(&["--sandbox", "full-access", "-C", ws]);
    assert_eq!(
        network(&mut m, json!({"command": told})),
        row("full-access", "allow")
    );
    assert_eq!(
        network(
            &mut m,
            json!({"command": told, "sandbox": "workspace-write"})
        ),
        row("workspace-write", "loopback")
    );
    assert!(m.close().success());
    // A confining server: loopback, for every call.
    let mut m = Mcp::start(&["--sandbox", "workspace-write", "-C", ws]);
    assert_eq!(
        network(&mut m, json!({"command": told})),
        row("workspace-write", "loopback")
    );
    assert_eq!(
        network(&mut m, json!({"command": told, "sandbox": "read-only"})),
        row("read-only", "loopback")
    );
    assert!(m.close().success());
    // The server's --network allow is its policy; a narrower mode keeps it.
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "--network",
        "allow",
        "-C",
        ws,
    ]);
    assert_eq!(
        network(&mut m, json!({"command": told, "sandbox": "read-only"})),
        row("read-only", "allow")
    );
    assert!(m.close().success());
}

#[test]
fn allow_write_is_the_servers_and_taken_from_its_workdir() {
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(ws.join(".vscode")).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join(".vscode/tasks.json"), "{}\n").unwrap();
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "--allow-write",
        ".vscode",
        "-C",
        ws.to_str().unwrap(),
    ]);
    let r = m.call(
        "run",
        json!({"command": "echo lifted > .vscode/tasks.json && echo ok"}),
    );
    assert_eq!(text(&r), "ok\n[exit code: 0]\n", "{r}");
    assert_eq!(
        std::fs::read_to_string(ws.join(".vscode/tasks.json")).unwrap(),
        "lifted\n"
    );
    // A call in sub: the server's .vscode is lifted, not sub's.
    let r = m.call(
        "run",
        json!({"command": "mkdir .vscode && echo x > .vscode/tasks.json && echo made", "workdir": "sub"}),
    );
    assert_eq!(r["structuredContent"]["stdout"]["text"], "made\n", "{r}");
    assert!(!ws.join("sub/.vscode").exists(), "{r}");
    // A call has no allow_write of its own.
    let r = m.call(
        "run",
        json!({"command": "true", "allow_write": [".claude"]}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).starts_with("bad arguments: "), "{r}");
    // A narrower mode goes on without it.
    let r = m.call("run", json!({"command": "echo hi", "sandbox": "read-only"}));
    assert_eq!(text(&r), "hi\n[exit code: 0]\n", "{r}");
}

#[test]
fn bad_calls_get_errors_and_the_server_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let r = m.request("tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = m.call("run", json!({"command": 42}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).starts_with("bad arguments: "), "{r}");
    let r = m.call("run", json!({"command": "true", "unknown": 1}));
    assert_eq!(r["isError"], true, "{r}");
    let huge = "x".repeat(2 << 20);
    let r = m.call("run", json!({"command": huge}));
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("at most 1048576"), "{r}");
    let r = m.call("read", json!({"job_id": "jnotmine1"}));
    assert_eq!(text(&r), "no job jnotmine1 was started by this server");
    // Malformed messages: the SDK answers a line that is no JSON-RPC
    // message with an Invalid Request error (and drops a request whose
    // params are not an object); the server goes on either way.
    m.send(json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": "garbage"}));
    writeln!(m.stdin.as_mut().unwrap(), "not json at all").unwrap();
    let r = m.call("run", json!({"command": "echo still here"}));
    assert_eq!(text(&r), "still here\n[exit code: 0]\n");
    assert!(
        m.notes.iter().any(|n| n["error"]["code"] == -32600),
        "{:?}",
        m.notes
    );
}

#[test]
fn a_cancelled_run_is_aborted_at_once_and_the_next_run_answers() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "31.4159";
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let id = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("sleep {marker}")}}),
    );
    assert!(
        poll_until(Duration::from_secs(10), || (!processes_with(marker)
            .is_empty())
        .then_some(()))
        .is_some(),
        "the sleep did not start"
    );
    let cancelled = Instant::now();
    m.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": id, "reason": "test"}}),
    );
    assert!(
        poll_until(Duration::from_secs(5), || processes_with(marker)
            .is_empty()
            .then_some(()))
        .is_some(),
        "the sleep survived the cancellation"
    );
    assert!(
        cancelled.elapsed() < Duration::from_secs(1),
        "{:?}",
        cancelled.elapsed()
    );
    let r = m.call("run", json!({"command": "echo next"}));
    assert_eq!(text(&r), "next\n[exit code: 0]\n");
}

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
                && alive(*pid)
        })
        .collect()
}

#[test]
fn jobs_take_input_on_a_terminal_and_die_with_the_servers_stdin() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "27.1828";
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let r = m.call("start", json!({"command": "python3 -i -q", "pty": true}));
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call(
        "write_stdin",
        json!({"job_id": job, "data": "print(6*7)\n"}),
    );
    assert_eq!(r["structuredContent"]["written"], 11, "{r}");
    let mut seen = String::new();
    let got = poll_until(Duration::from_secs(10), || {
        let r = m.call("read", json!({"job_id": job}));
        seen.push_str(
            r["structuredContent"]["delta_stdout"]
                .as_str()
                .unwrap_or_default(),
        );
        seen.contains("\n42\r\n").then_some(())
    });
    assert!(got.is_some(), "{seen:?}");
    let r = m.call("start", json!({"command": format!("sleep {marker}")}));
    let sleeper = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call("list", json!({}));
    let listed: Vec<&str> = r["structuredContent"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [job.as_str(), sleeper.as_str()]);
    let r = m.call("wait", json!({"job_id": sleeper, "timeout_ms": 100}));
    assert_eq!(r["structuredContent"]["status"], "running");
    assert!(!processes_with(marker).is_empty());
    assert!(m.close().success());
    assert_eq!(processes_with(marker), Vec::<i32>::new(), "survivors");
}

#[test]
fn a_long_run_reports_progress_when_asked() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let r = m.request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": "echo a; sleep 2.2; echo b"},
               "_meta": {"progressToken": "p1"}}),
    );
    assert_eq!(text(&r["result"]), "a\nb\n[exit code: 0]\n");
    let progress: Vec<&Value> = m
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{:?}", m.notes);
    assert_eq!(progress[0]["params"]["progressToken"], "p1");
    assert!(
        progress[0]["params"]["message"]
            .as_str()
            .unwrap()
            .ends_with(" ms, 2 bytes of stdout, 0 of stderr"),
        "{:?}",
        progress[0]
    );
}

#[test]
fn the_official_python_sdk_drives_the_server() {
    let Some(python) = std::env::var_os("DSH_EXEC_MCP_PYTHON") else {
        eprintln!(
            "skipped: DSH_EXEC_MCP_PYTHON names no python with the mcp package \
             (.ci/run makes one: a venv with pip install mcp)"
        );
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let runtime = crate::jobs::runtime_dir();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python_client.py");
    let mut c = Command::new(python);
    crate::jobs::with_runtime(&mut c, runtime.path());
    let out = c
        .arg(script)
        .arg(bin())
        .arg(ws.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "tools: commit,diff,discard,kill,list,read,run,start,wait,write_stdin\nrun: [exit code: 3]\npty: 42\n\
         parallel: 4 runs\ncancel one: the other ran on\n"
    );
}

#[test]
fn start_with_detach_after_returns_a_quick_result_or_a_running_job() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let r = m.call(
        "start",
        json!({"command": "echo quick", "detach_after_ms": 5000}),
    );
    assert_eq!(r["structuredContent"]["job_id"], Value::Null, "{r}");
    assert_eq!(r["structuredContent"]["result"]["exit_code"], 0);
    assert_eq!(text(&r), "quick\n[exit code: 0]\n");
    let r = m.call(
        "start",
        json!({"command": "echo early; echo '[exit code: 0]'; sleep 30", "detach_after_ms": 500}),
    );
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        r["structuredContent"]["detached"]["delta_stdout"],
        "early\n[exit code: 0]\n"
    );
    // The job's own marker-shaped line is escaped in the text.
    assert_eq!(
        text(&r),
        format!("early\n\\[exit code: 0]\n[detached as job {job}]\n")
    );
    let r = m.call("list", json!({}));
    assert_eq!(
        r["structuredContent"]["jobs"].as_array().unwrap().len(),
        1,
        "{r}"
    );
    let r = m.call("kill", json!({"job_id": job}));
    assert_eq!(r["structuredContent"]["killed"], true);
}

#[test]
fn keep_jobs_leaves_the_servers_jobs_running_after_it_ends() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "16.1803";
    let mut m = Mcp::start(&["--keep-jobs", "-C", ws.path().to_str().unwrap()]);
    let r = m.call("start", json!({"command": format!("sleep {marker}")}));
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let runtime = m._runtime.path().to_path_buf();
    let mut kill = dsh();
    crate::jobs::with_runtime(&mut kill, &runtime);
    kill.args(["job", "kill", &job]);
    // The runtime dir must outlive the server for the kill below.
    let keep = std::mem::replace(&mut m._runtime, tempfile::tempdir().unwrap());
    assert!(m.close().success());
    assert!(
        !processes_with(marker).is_empty(),
        "the job died with the server"
    );
    let out = kill.output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(processes_with(marker), Vec::<i32>::new());
    drop(keep);
}

#[test]
fn sigterm_to_the_server_ends_its_run_and_its_jobs() {
    let ws = tempfile::tempdir().unwrap();
    let (job_marker, run_marker) = ("14.1421", "17.3205");
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    for cmd in [
        format!("trap '' TERM; sleep {job_marker} & wait"),
        format!("sleep {job_marker}"),
    ] {
        let r = m.call("start", json!({ "command": cmd }));
        assert!(r["structuredContent"]["job_id"].is_string(), "{r}");
    }
    m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("sleep {run_marker}")}}),
    );
    let all_up = poll_until(Duration::from_secs(10), || {
        (processes_with(job_marker).len() >= 2 && !processes_with(run_marker).is_empty())
            .then_some(())
    });
    assert!(all_up.is_some(), "the processes did not start");
    let started = Instant::now();
    let _ = Command::new("kill")
        .args(["-TERM", &m.child.id().to_string()])
        .status();
    // Its stdin stays open: the signal alone ends the session.
    let status = poll_until(Duration::from_secs(8), || m.child.try_wait().unwrap())
        .expect("the server did not exit on SIGTERM");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::into_raw(status) >> 8,
        143
    );
    // One grace period for all the jobs, not one each.
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        processes_with(run_marker),
        Vec::<i32>::new(),
        "the run survived"
    );
    assert_eq!(
        processes_with(job_marker),
        Vec::<i32>::new(),
        "jobs survived"
    );
}

#[test]
fn a_calls_writable_root_is_the_servers_root_and_sigkill_takes_the_jobs_along() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "-C",
        ws.path().to_str().unwrap(),
    ]);
    // The sandbox's root is the server's, whatever the call's workdir: a
    // workdir is checked here but opened later, the root is opened once.
    let r = m.call(
        "run",
        json!({"command": "echo x > ../in-root && echo ok", "workdir": "sub"}),
    );
    assert_eq!(text(&r), "ok\n[exit code: 0]\n", "{r}");
    assert!(ws.path().join("in-root").exists());
    let marker = "12.2474";
    let r = m.call("start", json!({"command": format!("sleep {marker}")}));
    assert!(r["structuredContent"]["job_id"].is_string(), "{r}");
    // The job's command is spawned by then, but may not have reached
    // execve: until it does, its command line is the supervisor's.
    let running = poll_until(Duration::from_secs(5), || {
        (!processes_with(marker).is_empty()).then_some(())
    });
    assert!(running.is_some(), "the job's command never ran");
    let _ = Command::new("kill")
        .args(["-KILL", &m.child.id().to_string()])
        .status();
    let _ = m.child.wait();
    let gone = poll_until(Duration::from_secs(5), || {
        processes_with(marker).is_empty().then_some(())
    });
    assert!(gone.is_some(), "a job outlived the server's SIGKILL");
}

#[test]
fn a_root_replaced_after_the_servers_start_is_not_writable() {
    let parent = tempfile::tempdir().unwrap();
    let ws = parent.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let mut m = Mcp::start(&["--sandbox", "workspace-write", "-C", ws.to_str().unwrap()]);
    let r = m.call("run", json!({"command": "touch before && echo ok"}));
    assert_eq!(text(&r), "ok\n[exit code: 0]\n", "{r}");
    // Another directory now has the root's path (a parent renamed, say).
    std::fs::rename(&ws, parent.path().join("old")).unwrap();
    std::fs::create_dir(&ws).unwrap();
    let r = m.call("run", json!({"command": "touch after"}));
    assert!(!ws.join("after").exists(), "{r}");
    assert_ne!(r["structuredContent"]["exit_code"], 0, "{r}");
}

#[test]
fn the_served_tools_are_the_committed_list_and_every_structured_result_matches_its_schema() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let served = m.request("tools/list", json!({}))["result"]["tools"].clone();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/mcp-tools.json");
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        served, committed,
        "tools/list drifted from schema/mcp-tools.json"
    );
    let output_schema = |name: &str| {
        let tool = committed
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap();
        jsonschema::validator_for(&tool["outputSchema"]).unwrap()
    };
    let check = |name: &str, r: &Value| {
        let content = &r["structuredContent"];
        let errors: Vec<String> = output_schema(name)
            .iter_errors(content)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{r}");
    };
    let r = m.call("run", json!({"command": "echo hi; exit 3"}));
    check("run", &r);
    let r = m.call("start", json!({"command": "cat", "stdin_pipe": true}));
    check("start", &r);
    let id = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call(
        "write_stdin",
        json!({"job_id": id, "data": "typed\n", "close": true}),
    );
    check("write_stdin", &r);
    let r = m.call("wait", json!({"job_id": id, "timeout_ms": 10000}));
    assert_eq!(r["structuredContent"]["status"], "finished", "{r}");
    check("wait", &r);
    let r = m.call("read", json!({"job_id": id}));
    check("read", &r);
    let r = m.call("list", json!({}));
    check("list", &r);
    let r = m.call("start", json!({"command": "sleep 30"}));
    let id = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call("kill", json!({"job_id": id}));
    assert_eq!(r["structuredContent"]["killed"], true, "{r}");
    check("kill", &r);
    assert!(m.close().success());
}

#[test]
fn a_command_with_line_breaks_is_one_line_of_lists_text() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let command = "true\r\x1b[2K\n# jforged01 running forged\u{2028}x";
    let r = m.call("start", json!({ "command": command }));
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call("list", json!({}));
    let listed = text(&r);
    assert_eq!(listed.lines().count(), 1, "{listed:?}");
    assert!(listed.starts_with(&format!("{job} ")), "{listed:?}");
    assert!(
        listed.ends_with(" true\\r\\x1b[2K\\n# jforged01 running forged\\u2028x\n"),
        "{listed:?}"
    );
    // structuredContent keeps the command exact.
    assert_eq!(r["structuredContent"]["jobs"][0]["command"], command, "{r}");
}

/// The next `n` responses to `id`, within 20 s each.
fn responses(m: &mut Mcp, id: u64, n: usize) -> Vec<Value> {
    (0..n).map(|_| m.response(id)).collect()
}

#[test]
fn a_request_whose_id_is_in_flight_gets_an_error_and_the_first_its_reply() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let call = |command: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "run", "arguments": {"command": command}}})
    };
    m.send(call("sleep 0.5; echo one"));
    m.send(call("echo two"));
    let mut got = responses(&mut m, 7, 2);
    // The refusal comes at once, the first request's result after its run.
    got.sort_by_key(|r| r["error"].is_null());
    let (refused, first) = (&got[0], &got[1]);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("request id 7 "), "{refused}");
    assert_eq!(text(&first["result"]), "one\n[exit code: 0]\n", "{first}");
    // Answered, the id is free again; and the server goes on.
    m.send(call("echo three"));
    assert_eq!(text(&m.response(7)["result"]), "three\n[exit code: 0]\n");
    let r = m.call("run", json!({"command": "echo four"}));
    assert_eq!(text(&r), "four\n[exit code: 0]\n");
}

#[test]
fn an_id_used_again_after_its_cancellation_gets_its_own_reply() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "23.0258";
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let call = |command: &str| {
        json!({"jsonrpc": "2.0", "id": "again", "method": "tools/call",
               "params": {"name": "run", "arguments": {"command": command}}})
    };
    m.send(call(&format!("sleep {marker}")));
    assert!(
        poll_until(Duration::from_secs(10), || (!processes_with(marker)
            .is_empty())
        .then_some(()))
        .is_some(),
        "the sleep did not start"
    );
    // Cancelled, the request is over for the client, which may use its id
    // again at once, while the cancelled run is still being aborted.
    m.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": "again", "reason": "test"}}),
    );
    m.send(call("echo second"));
    let end = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        let left = end.saturating_duration_since(Instant::now());
        let v = m.lines.recv_timeout(left).expect("no reply to the second");
        if v["id"] == "again" {
            break v;
        }
    };
    assert_eq!(
        text(&reply["result"]),
        "second\n[exit code: 0]\n",
        "{reply}"
    );
    // No other reply to that id follows.
    let r = m.call("run", json!({"command": "true"}));
    assert_eq!(text(&r), "[exit code: 0]\n");
    assert!(!m.notes.iter().any(|n| n["id"] == "again"), "{:?}", m.notes);
}

#[test]
fn a_workdir_swapped_for_a_symlink_out_of_the_root_never_starts_a_run_outside() {
    // `ws/d` flips between a directory and a symlink to `../outside` while
    // calls run there: each call starts in that directory or fails, never
    // outside (the outside directory's inode never shows). (The directory
    // is compared by inode: bash's `pwd -P`
    // resolves `$PWD` as a string, through whatever `d` is by then.)
    use std::os::unix::fs::MetadataExt;
    let parent = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(parent.path()).unwrap();
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let d_ino = std::fs::metadata(ws.join("d")).unwrap().ino();
    let mut m = Mcp::start(&["--sandbox", "workspace-write", "-C", ws.to_str().unwrap()]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, ws) = (stop.clone(), ws.clone());
        std::thread::spawn(move || {
            let (d, real, link) = (ws.join("d"), ws.join("d.real"), ws.join("d.link"));
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(&d, &real);
                let _ = std::os::unix::fs::symlink("../outside", &link);
                let _ = std::fs::rename(&link, &d);
                std::thread::sleep(Duration::from_micros(300));
                let _ = std::fs::remove_file(&d);
                let _ = std::fs::rename(&real, &d);
                // Long enough for a call's supervisor to start and open it
                // (each run has a process of its own).
                std::thread::sleep(Duration::from_micros(3000));
            }
            let _ = std::fs::remove_file(&d);
            let _ = std::fs::rename(&real, &d);
        })
    };
    let (mut inside, mut refused) = (0, 0);
    // 150 calls; more while none has landed on the real directory (on a
    // loaded machine the flipper can win 150 in a row).
    for i in 0..1000 {
        if i >= 150 && inside > 0 {
            break;
        }
        let r = m.call("run", json!({"command": "stat -c %i .", "workdir": "d"}));
        match r["structuredContent"]["exit_code"].as_i64() {
            Some(0) => {
                assert_eq!(
                    r["structuredContent"]["stdout"]["text"],
                    format!("{d_ino}\n"),
                    "{r}"
                );
                inside += 1;
            }
            _ => refused += 1,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(inside > 0, "no call ran ({refused} refused)");
}

#[test]
fn the_server_refuses_what_a_call_chooses_and_its_help_says_so() {
    for args in [
        &["mcp", "--", "echo", "hi"][..],
        &["mcp", "--background"],
        &["mcp", "-i"],
        &["mcp", "--stream"],
        &["mcp", "--stdin-file", "/etc/hostname"],
    ] {
        let out = dsh().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("dsh-exec: error: dsh-exec mcp"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let help = dsh().args(["mcp", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    assert!(
        text.contains("Refused here (exit 125, USAGE), since each tool call brings its own: a COMMAND, --background, --detach-after, -i, --stream, --pty, --stdin and --stdin-file."),
        "{text}"
    );
}

#[test]
fn denial_hints_speak_of_the_server_and_of_call_arguments_not_of_a_callers_flags() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "--no-temp-write",
        "-C",
        ws.path().to_str().unwrap(),
    ]);
    let target = outside.path().join("x");
    let r = m.call(
        "run",
        json!({"command": format!("echo > {}", target.display())}),
    );
    let d = &r["structuredContent"]["sandbox"]["denials"][0];
    let hint = format!(
        "a server started with --writable-root {}",
        outside.path().display()
    );
    assert_eq!(d["hint"], json!(hint), "{r}");
    assert!(text(&r).contains(&format!("; try {hint}]")), "{r}");
    // A call that narrowed the mode can widen it back to the server's.
    let r = m.call(
        "run",
        json!({"command": "echo > y", "sandbox": "read-only"}),
    );
    let d = &r["structuredContent"]["sandbox"]["denials"][0];
    assert_eq!(
        d["hint"], r#"the call's "sandbox": "workspace-write""#,
        "{r}"
    );
    assert!(!target.exists());
}

/// Sends `run` calls for `commands` at once and returns their results, in
/// the order of `commands`.
fn run_all(m: &mut Mcp, commands: &[&str]) -> Vec<Value> {
    let ids: Vec<u64> = commands
        .iter()
        .map(|c| {
            m.send_request(
                "tools/call",
                json!({"name": "run", "arguments": {"command": c}}),
            )
        })
        .collect();
    ids.iter()
        .map(|id| m.response(*id)["result"].clone())
        .collect()
}

#[test]
fn four_runs_at_once_take_the_time_of_one() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let started = Instant::now();
    let results = run_all(
        &mut m,
        &[
            "sleep 1; echo 1",
            "sleep 1; echo 2",
            "sleep 1; echo 3",
            "sleep 1; echo 4",
        ],
    );
    let took = started.elapsed();
    for (i, r) in results.iter().enumerate() {
        assert_eq!(text(r), format!("{}\n[exit code: 0]\n", i + 1), "{r}");
    }
    // One after another would take 4 s (bench/mcp.sh measures it).
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn runs_past_max_parallel_wait_for_a_slot_and_say_so() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["--max-parallel", "1", "-C", ws.path().to_str().unwrap()]);
    let first = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": "sleep 1.5; date +%s%N"}}),
    );
    let second = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": "date +%s%N"},
               "_meta": {"progressToken": "w"}}),
    );
    let stamp = |r: &Value| -> u128 { text(&r["result"]).lines().next().unwrap().parse().unwrap() };
    let (a, b) = (m.response(first), m.response(second));
    // The second ran after the first had ended.
    assert!(stamp(&b) >= stamp(&a), "{a}\n{b}");
    let waiting: Vec<&str> = m
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == "w")
        .filter_map(|n| n["params"]["message"].as_str())
        .collect();
    assert!(!waiting.is_empty(), "{:?}", m.notes);
    assert!(
        waiting[0].starts_with("waiting ")
            && waiting[0].ends_with(" ms for a run slot: 1 runs in flight (--max-parallel 1)"),
        "{waiting:?}"
    );
}

#[test]
fn cancelling_one_run_leaves_the_others_running() {
    let ws = tempfile::tempdir().unwrap();
    let (gone, kept) = ("23.0258", "26.4575");
    let mut m = Mcp::start(&["-C", ws.path().to_str().unwrap()]);
    let cancelled = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("sleep {gone}")}}),
    );
    let other = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("sleep {kept} & sleep 1.5; kill $!; echo done")}}),
    );
    let up = poll_until(Duration::from_secs(10), || {
        (!processes_with(gone).is_empty() && !processes_with(kept).is_empty()).then_some(())
    });
    assert!(up.is_some(), "the runs did not start");
    m.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": cancelled, "reason": "test"}}),
    );
    let ended = poll_until(Duration::from_secs(5), || {
        processes_with(gone).is_empty().then_some(())
    });
    assert!(ended.is_some(), "the cancelled run survived");
    assert!(
        !processes_with(kept).is_empty(),
        "the other run was touched"
    );
    let r = m.response(other);
    assert_eq!(text(&r["result"]), "done\n[exit code: 0]\n", "{r}");
}

#[test]
fn max_jobs_bounds_the_jobs_running_at_once() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "19.5959";
    let mut m = Mcp::start(&["--max-jobs", "2", "-C", ws.path().to_str().unwrap()]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = m.call("start", json!({"command": format!("sleep {marker}")}));
        ids.push(
            r["structuredContent"]["job_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let r = m.call("start", json!({"command": "true"}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "2 jobs of this server are running, as many as --max-jobs 2 allows: wait for one or \
         kill one"
    );
    // A finished job no longer counts.
    let k = m.call("kill", json!({"job_id": ids[0]}));
    assert_eq!(k["structuredContent"]["killed"], true, "{k}");
    let r = m.call(
        "start",
        json!({"command": "echo third", "detach_after_ms": 5000}),
    );
    assert_eq!(
        r["structuredContent"]["result"]["stdout"]["text"], "third\n",
        "{r}"
    );
    let _ = m.call("kill", json!({"job_id": ids[1]}));
    assert!(m.close().success());
    assert_eq!(processes_with(marker), Vec::<i32>::new());
}

#[test]
fn a_run_cannot_reach_the_abstract_socket_another_run_listens_on() {
    let ws = tempfile::tempdir().unwrap();
    let name = format!("dsh-it-peer-{}", std::process::id());
    let mut m = Mcp::start(&[
        "--sandbox",
        "workspace-write",
        "-C",
        ws.path().to_str().unwrap(),
    ]);
    // Under `loopback` the gate makes listen(2) for the run, so the
    // listener the kernel names is a dsh-exec process: the listening run's
    // supervisor, never the other run's.
    let listen = format!(
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(b\"\\0{name}\"); \
         s.listen(); s.settimeout(4); print(\"listening\", flush=True)\ntry: s.accept(); print(\"accepted\")\nexcept OSError: print(\"no peer\")'"
    );
    let listener = m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": listen}}),
    );
    std::thread::sleep(Duration::from_millis(1500));
    let connect = format!(
        "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX)\ntry: s.connect(b\"\\0{name}\"); print(\"connected\")\nexcept OSError as e: print(e.errno)'"
    );
    let r = m.call("run", json!({ "command": connect }));
    let out = text(&r);
    assert!(!out.starts_with("connected"), "{r}");
    let l = m.response(listener);
    assert_eq!(
        text(&l["result"]),
        "listening\nno peer\n[exit code: 0]\n",
        "{l}"
    );
}

#[test]
fn a_calls_idle_timeout_is_no_longer_than_the_servers() {
    let ws = tempfile::tempdir().unwrap();
    let mut m = Mcp::start(&["--idle-timeout", "300ms", "-C", ws.path().to_str().unwrap()]);
    let r = m.call(
        "run",
        json!({"command": "echo a; sleep 30", "idle_timeout_ms": 60000}),
    );
    assert_eq!(
        text(&r),
        "a\n[timed out: no output for 300ms]\n[killed by signal: SIGTERM]\n",
        "{r}"
    );
    assert_eq!(r["structuredContent"]["timeout_kind"], "idle");
    let r = m.call(
        "run",
        json!({"command": "sleep 30", "idle_timeout_ms": 100}),
    );
    assert_eq!(r["structuredContent"]["idle_timeout_ms"], 100, "{r}");
    let r = m.call("run", json!({"command": "true", "idle_timeout_ms": 0}));
    assert_eq!(r["isError"], true, "{r}");
}

#[test]
fn a_hundred_calls_at_once_run_at_most_max_parallel_at_a_time_and_all_answer() {
    let ws = tempfile::tempdir().unwrap();
    let log = ws.path().join("log");
    let mut m = Mcp::start(&["--max-parallel", "3", "-C", ws.path().to_str().unwrap()]);
    // Each run writes `+` when it starts and `-` when it ends (appends of
    // one byte: never interleaved).
    let command = format!(
        "printf + >> {log}; sleep 0.05; printf - >> {log}",
        log = log.display()
    );
    let commands: Vec<&str> = (0..100).map(|_| command.as_str()).collect();
    let results = run_all(&mut m, &commands);
    assert_eq!(results.len(), 100);
    for r in &results {
        assert_eq!(text(r), "[exit code: 0]\n", "{r}");
    }
    let marks = std::fs::read_to_string(&log).unwrap();
    assert_eq!(marks.len(), 200);
    let (mut running, mut most) = (0i32, 0i32);
    for c in marks.chars() {
        running += if c == '+' { 1 } else { -1 };
        most = most.max(running);
    }
    assert_eq!(running, 0);
    assert!(most <= 3, "{most} at once: {marks}");
    assert!(most >= 2, "never in parallel: {marks}");
}

#[test]
fn closing_stdin_ends_the_runs_in_flight_at_once_and_starts_no_queued_one() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "31.0062";
    let mut m = Mcp::start(&["--max-parallel", "1", "-C", ws.path().to_str().unwrap()]);
    m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("sleep {marker}")}}),
    );
    let queued = ws.path().join("queued-ran");
    m.send_request(
        "tools/call",
        json!({"name": "run", "arguments": {"command": format!("touch {}", queued.display())}}),
    );
    let up = poll_until(Duration::from_secs(10), || {
        (!processes_with(marker).is_empty()).then_some(())
    });
    assert!(up.is_some(), "the run did not start");
    let closed = Instant::now();
    let status = m.close();
    assert!(status.success());
    // Not rmcp's 5 s wait for the calls in flight.
    assert!(
        closed.elapsed() < Duration::from_secs(3),
        "{:?}",
        closed.elapsed()
    );
    assert_eq!(processes_with(marker), Vec::<i32>::new());
    assert!(
        !queued.exists(),
        "a queued run started after the client left"
    );
}

/// A server whose state (and so its transactions' layers) lives in
/// temporary directories: its runtime dir, and `XDG_STATE_HOME` besides.
fn transaction_server(args: &[&str], state: &tempfile::TempDir) -> Mcp {
    Mcp::start_with(args, &[("XDG_STATE_HOME", state.path())])
}

#[test]
fn a_call_s_transaction_waits_for_diff_commit_or_discard() {
    if !has_sys_admin() {
        eprintln!("skipped: needs root (a transaction's overlays and mount namespace)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("keep"), "old\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut m = transaction_server(
        &["--sandbox", "workspace-write", "-C", ws.to_str().unwrap()],
        &state,
    );
    let f = ws.join("f");
    let r = m.call(
        "run",
        json!({"command": "printf 'new\\n' > f", "transaction": true}),
    );
    assert_eq!(r["structuredContent"]["exit_code"], 0, "{r}");
    let tx = &r["structuredContent"]["transaction"];
    let id = tx["id"].as_str().unwrap().to_string();
    assert_eq!(
        *tx,
        json!({"id": id, "state": "pending",
               "changes": [{"path": f, "change": "created", "kind": "file", "size": 4}],
               "changes_more": 0, "created": 1, "modified": 0, "deleted": 0,
               "commit": null, "error": null})
    );
    assert!(!f.exists(), "the run wrote the real tree");
    // The text names the tools, not the CLI.
    assert_eq!(
        text(&r),
        format!(
            "[changes: 1 created, 0 modified, 0 deleted (transaction {id}: the commit or \
             discard tool, transaction_id {id})]\n[exit code: 0]\n"
        )
    );
    // The diff: every change, or those under the paths asked for.
    let expected = format!("--- /dev/null\n+++ b{}\n@@ -0,0 +1 @@\n+new\n", f.display());
    let r = m.call("diff", json!({"transaction_id": id}));
    assert_eq!(text(&r), expected, "{r}");
    assert_eq!(
        r["structuredContent"],
        json!({"transaction_id": id, "diff": expected})
    );
    let r = m.call("diff", json!({"transaction_id": id, "paths": ["keep"]}));
    assert_eq!(r["structuredContent"]["diff"], "", "{r}");
    let r = m.call("diff", json!({"transaction_id": id, "paths": [f]}));
    assert_eq!(r["structuredContent"]["diff"], expected.as_str(), "{r}");
    let r = m.call("diff", json!({"transaction_id": id, "paths": ["/etc"]}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text(&r).contains("outside the server's workspace root"),
        "{r}"
    );
    // Commit: the file appears in the real tree.
    let r = m.call("commit", json!({"transaction_id": id}));
    assert_eq!(
        text(&r),
        format!("[committed transaction {id}: 1 applied, 0 refused]\n"),
        "{r}"
    );
    assert_eq!(
        r["structuredContent"],
        json!({"transaction_id": id, "state": "committed", "applied": 1, "refused": []})
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new\n");
    // Decided once: deciding again is an error.
    let r = m.call("discard", json!({"transaction_id": id}));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("TRANSACTION_FAILED"), "{r}");
    // Discard: the real tree stays as it was.
    let r = m.call(
        "run",
        json!({"command": "rm keep; echo x > g; echo more >> f", "transaction": true}),
    );
    let tx = &r["structuredContent"]["transaction"];
    assert_eq!(
        (&tx["created"], &tx["modified"], &tx["deleted"]),
        (&json!(1), &json!(1), &json!(1)),
        "{r}"
    );
    let id = tx["id"].as_str().unwrap().to_string();
    let r = m.call("discard", json!({"transaction_id": id}));
    assert_eq!(text(&r), format!("[discarded transaction {id}]\n"), "{r}");
    assert_eq!(
        r["structuredContent"],
        json!({"transaction_id": id, "state": "discarded"})
    );
    assert_eq!(std::fs::read_to_string(ws.join("keep")).unwrap(), "old\n");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new\n");
    assert!(!ws.join("g").exists());
    assert!(m.close().success());
}

#[test]
fn a_job_s_transaction_is_decided_once_its_result_is_returned() {
    if !has_sys_admin() {
        eprintln!("skipped: needs root (a transaction's overlays and mount namespace)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut m = transaction_server(&["-C", ws.to_str().unwrap()], &state);
    let r = m.call(
        "start",
        json!({"command": "echo job > j", "transaction": true}),
    );
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call("wait", json!({"job_id": job}));
    assert_eq!(r["structuredContent"]["status"], "finished", "{r}");
    let tx = &r["structuredContent"]["result"]["transaction"];
    assert_eq!(tx["changes"][0]["path"], json!(ws.join("j")), "{r}");
    let id = tx["id"].as_str().unwrap().to_string();
    let r = m.call("commit", json!({"transaction_id": id, "atomic": true}));
    assert_eq!(r["structuredContent"]["applied"], 1, "{r}");
    assert_eq!(std::fs::read_to_string(ws.join("j")).unwrap(), "job\n");
    assert!(m.close().success());
}

#[test]
fn a_transaction_this_server_did_not_make_cannot_be_decided_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut m = transaction_server(
        &["--sandbox", "workspace-write", "-C", ws.to_str().unwrap()],
        &state,
    );
    for (tool, args) in [
        ("commit", json!({"transaction_id": "tabcd1234"})),
        ("discard", json!({"transaction_id": "tabcd1234"})),
        (
            "diff",
            json!({"transaction_id": "tabcd1234", "paths": ["x"]}),
        ),
    ] {
        let r = m.call(tool, args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert_eq!(
            text(&r),
            "no transaction tabcd1234 was made by this server",
            "{tool}"
        );
    }
    if !has_sys_admin() {
        eprintln!("skipped (in part): needs root (a transaction made outside the server)");
        return;
    }
    // One the command line made, in the same state directory: pending, and
    // not this server's to decide.
    let mut c = dsh();
    crate::jobs::with_runtime(&mut c, m._runtime.path());
    let out = c
        .env("XDG_STATE_HOME", state.path())
        .args(["--transaction", "--json", "-C", ws.to_str().unwrap()])
        .args(["--", "echo outside > o"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let r = m.call("commit", json!({"transaction_id": id}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        format!("no transaction {id} was made by this server")
    );
    assert!(!ws.join("o").exists());
}

#[test]
fn a_call_cannot_leave_the_servers_transaction_nor_name_on_exit_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut m = transaction_server(&["-C", ws.to_str().unwrap()], &state);
    let r = m.call("run", json!({"command": "true", "on_exit": "commit"}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        text(&r),
        "on_exit needs a transaction: the call's \"transaction\": true, or a server \
         started with --transaction"
    );
    let r = m.call(
        "start",
        json!({"command": "true", "on_exit": "keep", "transaction": false}),
    );
    assert_eq!(r["isError"], true, "{r}");
    drop(m);
    let mut m = transaction_server(&["--transaction", "-C", ws.to_str().unwrap()], &state);
    for tool in ["run", "start"] {
        let r = m.call(tool, json!({"command": "touch x", "transaction": false}));
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert_eq!(
            text(&r),
            "transaction false: this server runs every command as a transaction \
             (--transaction); a call cannot run outside one",
            "{tool}"
        );
    }
    assert!(!ws.join("x").exists());
    if !has_sys_admin() {
        eprintln!("skipped (in part): needs root (a transaction's overlays)");
        return;
    }
    // A call without the argument runs in the server's transaction; its
    // on_exit decides it at the end.
    let r = m.call("run", json!({"command": "touch x", "on_exit": "discard"}));
    let tx = &r["structuredContent"]["transaction"];
    assert_eq!(tx["state"], "discarded", "{r}");
    assert_eq!(tx["created"], 1, "{r}");
    assert!(!ws.join("x").exists());
    assert!(m.close().success());
}

#[test]
fn the_server_reads_its_credentials_once_and_every_call_carries_them() {
    let secret = crate::credentials::secret("mcp");
    let up = crate::credentials::Upstream::start(&format!("Bearer {secret}"), None);
    let ws = tempfile::tempdir().unwrap();
    let host = up.host();
    let ca = up.ca.display().to_string();
    let args: Vec<String> = vec![
        "--sandbox".into(),
        "workspace-write".into(),
        "-C".into(),
        ws.path().display().to_string(),
        format!("--network=allow={host}"),
        "--credential=K=env:TOKEN".into(),
        format!("--inject={host}=bearer:K"),
        "--credential-env=K=K_TOKEN".into(),
        format!("--upstream-ca={ca}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut m = Mcp::start_with(&args, &[("TOKEN", std::path::Path::new(&secret))]);
    let curl = format!("curl -sS https://{host}/api/call -H \"Authorization: Bearer $K_TOKEN\"");
    let mut replies = String::new();
    for _ in 0..2 {
        let r = m.call("run", json!({"command": curl}));
        assert_eq!(
            text(&r),
            "{\"authorized\": true, \"path\": \"/api/call\"}\n[exit code: 0]\n",
            "{r}"
        );
        assert_eq!(
            r["structuredContent"]["sandbox"]["credentials_used"]["K"]["localhost"],
            1
        );
        replies.push_str(&r.to_string());
    }
    // A job of the server carries them too.
    let r = m.call("start", json!({"command": format!("{curl}; env")}));
    let job = r["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = m.call("wait", json!({"job_id": job, "timeout_ms": 20000}));
    assert!(text(&r).starts_with("{\"authorized\": true"), "{r}");
    replies.push_str(&r.to_string());
    assert!(!replies.contains(&secret), "the secret is in a reply");
    assert!(replies.contains("K_TOKEN=dsh-exec-phantom-k-"));
    assert_eq!(up.requests().len(), 3);
    assert!(m.close().success());
}
