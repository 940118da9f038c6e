//! Sandbox modes on real Landlock, with real files in temp dirs.
use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A workspace, a directory outside it, and a private temp dir, all under
/// one temp dir that is removed at the end.
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    tmp: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    let tmp = root.path().join("tmp");
    for d in [&ws, &outside, &tmp] {
        std::fs::create_dir(d).unwrap();
    }
    Dirs {
        _root: root,
        ws,
        outside,
        tmp,
    }
}

/// Runs `dsh-exec --json ARGS -- SCRIPT` in `d.ws` with `$TMPDIR` = `d.tmp`.
fn sandboxed(d: &Dirs, args: &[&str], script: &str) -> (Value, i32) {
    let out = Test::new()
        .env("TMPDIR", &d.tmp)
        .args(["--json", "-C", p(&d.ws)])
        .args(args)
        .args(["--", script])
        .run();
    (out.json(), out.status)
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A path as text (the temp dirs are UTF-8).
fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn read_only_reads_and_writes_devices_but_no_files() {
    let d = dirs();
    let (v, status) = sandboxed(
        &d,
        &["-s", "read-only"],
        "ls -l /bin >/dev/null && echo x > /dev/null && echo ok",
    );
    assert_eq!((status, v["stdout"]["text"].as_str()), (0, Some("ok\n")));
    assert_eq!(
        v["sandbox"],
        json!({"mode": "read-only", "denied": false, "denials": [], "denials_more": 0, "network_denied": false,
               "read_enforcement": "landlock: deny list", "denials_source": "output",
               "enforcement": "full", "runner_failed": false,
               // No --network: the confining modes' default.
               "network": "loopback", "network_enforcement": "gate"})
    );
    let (v, status) = sandboxed(&d, &["-s", "read-only"], &format!("touch {}/f", p(&d.ws)));
    assert_eq!(status, 1);
    assert_eq!(v["sandbox"]["denied"], true);
    assert!(!d.ws.join("f").exists());
}

#[test]
fn the_rendered_text_names_a_denial() {
    let d = dirs();
    for tier in tiers() {
        // A read-only mount refuses first (EROFS); without one, Landlock (EACCES).
        let why = match tier {
            Tier::MountNamespace => "Read-only file system",
            Tier::Gate => "Permission denied",
        };
        Test::in_tier(tier)
            .args(["-s", "read-only", "-C", p(&d.ws), "--", "touch f"])
            .run()
            .expect_stdout(&format!(
                "[stderr]\ntouch: cannot touch 'f': {why}\n\
                 [sandbox: denied write to {ws}/f; try --sandbox workspace-write]\n[exit code: 1]\n",
                ws = p(&d.ws)
            ));
    }
}

#[test]
fn workspace_write_allows_the_workspace_writable_roots_and_temp_only() {
    let d = dirs();
    let extra = d.outside.join("extra");
    std::fs::create_dir(&extra).unwrap();
    let script = format!(
        "touch {ws}/f && touch {extra}/g && touch $TMPDIR/t && echo ok; touch {out}/h",
        ws = p(&d.ws),
        extra = p(&extra),
        out = p(&d.outside)
    );
    let (v, status) = sandboxed(
        &d,
        &["-s", "workspace-write", "--writable-root", p(&extra)],
        &script,
    );
    assert_eq!(status, 1);
    assert_eq!(v["stdout"]["text"], "ok\n");
    assert_eq!(v["sandbox"]["denied"], true);
    assert!(d.ws.join("f").exists() && extra.join("g").exists() && d.tmp.join("t").exists());
    assert!(!d.outside.join("h").exists());
}

#[test]
fn no_temp_write_keeps_the_temp_dir_read_only_and_gives_a_scratch_dir() {
    let d = dirs();
    let tmp = std::fs::canonicalize(&d.tmp).unwrap();
    let script = format!(
        "touch {t}/t; echo $?; touch $TMPDIR/s && echo scratch; echo $TMPDIR",
        t = p(&tmp)
    );
    for mode in ["workspace-write", "read-only"] {
        let args: &[&str] = if mode == "read-only" {
            &["-s", "read-only"]
        } else {
            &["-s", mode, "--no-temp-write"]
        };
        let (v, status) = sandboxed(&d, args, &script);
        assert_eq!(status, 0, "{mode}: {v}");
        let text = v["stdout"]["text"].as_str().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..2], ["1", "scratch"], "{mode}: {v}");
        // A private directory in the temp dir, gone after the run.
        let scratch = Path::new(lines[2]);
        assert_eq!(scratch.parent(), Some(tmp.as_path()), "{mode}: {v}");
        assert!(!scratch.exists(), "{mode}: the scratch directory stayed");
        assert!(!tmp.join("t").exists());
    }
    // (The state directory falls back to TEMP/.dsh-exec-UID without a HOME.)
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".dsh-exec-scratch-"))
        .collect();
    assert!(left.is_empty(), "left in the temp dir: {left:?}");
}

#[test]
fn read_only_work_that_needs_a_temp_dir_works() {
    let d = dirs();
    std::fs::write(
        d.ws.join("test_one.py"),
        "def test_one():\n    assert 1 + 1 == 2\n",
    )
    .unwrap();
    let have_pytest = std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    let heredoc = "x=$(head -c 102400 /dev/zero | tr '\\0' a); cat <<EOF | wc -c\n$x\nEOF";
    let mut script = format!(
        "{heredoc}\nseq 3000000 | sort -n -r | head -1\npython3 -c 'import tempfile; tempfile.TemporaryFile().write(b\"x\")' && echo tempfile"
    );
    if have_pytest {
        script.push_str("\npython3 -m pytest -q -p no:cacheprovider test_one.py | tail -1");
    } else {
        eprintln!("note: pytest is not installed; its case is not run");
    }
    for tier in tiers() {
        let out = Test::in_tier(tier)
            .env("TMPDIR", &d.tmp)
            .args(["--json", "-s", "read-only", "-C", p(&d.ws), "--", &script])
            .run();
        let v = out.json();
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        let text = v["stdout"]["text"].as_str().unwrap();
        assert!(
            text.starts_with("102401\n3000000\ntempfile\n"),
            "{tier:?}: {v}"
        );
        if have_pytest {
            assert!(text.contains("1 passed"), "{tier:?}: {v}");
        }
    }
}

#[test]
fn a_missing_writable_root_is_skipped_with_a_warning() {
    let d = dirs();
    Test::new()
        .args([
            "-s",
            "workspace-write",
            "--writable-root",
            "/nonexistent/root",
            "-C",
            p(&d.ws),
        ])
        .args(["--", "touch f && echo ok"])
        .run()
        .expect_stdout("ok\n[exit code: 0]\n")
        .expect_stderr(
            "dsh-exec: warning: writable root /nonexistent/root skipped: No such file or directory (os error 2)\n",
        );
}

#[test]
fn escapes_from_the_workspace_fail() {
    let d = dirs();
    let secret = d.outside.join("secret");
    std::fs::write(&secret, "keep\n").unwrap();
    let s = p(&secret);
    let o = p(&d.outside);
    let attempts = [
        format!("ln -s {s} link && echo x >> link"),
        format!("ln {s} hard && echo x >> hard"),
        format!("mv {s} moved"),
        format!(": > {s}"),
        format!("truncate -s0 {s}"),
        format!("cd {o} && touch /proc/self/cwd/new"),
        format!("cp /dev/null {o}/copy"),
    ];
    for script in attempts {
        let (v, status) = sandboxed(&d, &["-s", "workspace-write"], &script);
        assert_ne!(status, 0, "{script}: {v}");
        // Landlock refuses a link across directories with EXDEV ("Invalid
        // cross-device link"), which the conservative classification does
        // not call a denial: the same error comes from real mount crossings.
        let exdev = v["stderr"]["text"]
            .as_str()
            .unwrap()
            .contains("cross-device");
        assert_eq!(v["sandbox"]["denied"], !exdev, "{script}: {v}");
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep\n");
    let names: Vec<_> = std::fs::read_dir(&d.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("secret")]);
}

#[test]
fn confined_commands_have_no_new_privileges_and_no_capabilities() {
    let d = dirs();
    for tier in tiers() {
        // Root keeps CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (bits 1, 2),
        // bounded by Landlock; with a read-only mount tree CAP_CHOWN and
        // CAP_FOWNER (bits 0, 3) too, bounded by it. Others have none.
        let caps = match (tier, is_root()) {
            (_, false) => "0000000000000000",
            (Tier::MountNamespace, true) => "000000000000000f",
            (Tier::Gate, true) => "0000000000000006",
        };
        for mode in ["read-only", "workspace-write"] {
            let out = Test::in_tier(tier)
                .env("TMPDIR", &d.tmp)
                .args(["--json", "-C", p(&d.ws), "-s", mode, "--"])
                .arg("grep -E '^(NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb)' /proc/self/status")
                .run();
            assert_eq!(out.status, 0);
            assert_eq!(
                out.json()["stdout"]["text"],
                format!(
                    "CapInh:\t0000000000000000\nCapPrm:\t{caps}\nCapEff:\t{caps}\n\
                     CapBnd:\t{caps}\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
                ),
                "{tier:?} {mode}"
            );
        }
    }
}

#[test]
fn a_confined_command_cannot_signal_a_process_outside() {
    let d = dirs();
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = victim.id().to_string();
    let (v, status) = sandboxed(&d, &["-s", "read-only"], &format!("kill -TERM {pid}"));
    let still_alive = alive(victim.id() as i32);
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert_eq!(status, 1, "{v}");
    assert!(still_alive, "the confined kill reached the outside process");
}

#[test]
fn network_deny_refuses_ip_but_keeps_unix_sockets() {
    let d = dirs();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let tcp = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let (v, status) = sandboxed(&d, &["-s", "read-only", "--network", "deny"], &tcp);
    assert_ne!(status, 0, "{v}");
    assert_eq!(v["stdout"]["text"], "");
    assert_eq!(v["sandbox"]["network"], "deny");
    assert_eq!(v["sandbox"]["network_enforcement"], "full");
    let (v, status) = sandboxed(
        &d,
        &["--network", "deny"],
        &format!("echo x > /dev/udp/127.0.0.1/{port}"),
    );
    assert_ne!(status, 0, "{v}");
    let unix = "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"hi\"); print(b.recv(2).decode())'";
    let (v, status) = sandboxed(&d, &["-s", "read-only", "--network", "deny"], unix);
    assert_eq!(
        (status, v["stdout"]["text"].as_str()),
        (0, Some("hi\n")),
        "{v}"
    );
    let (v, status) = sandboxed(&d, &["-s", "read-only", "--network", "allow"], &tcp);
    assert_eq!(
        (status, v["stdout"]["text"].as_str()),
        (0, Some("connected\n")),
        "{v}"
    );
    drop(listener);
}

#[test]
fn the_child_sees_its_sandbox_as_managed_entries() {
    let d = dirs();
    let (v, _) = sandboxed(
        &d,
        &[
            "-s",
            "read-only",
            "--network",
            "deny",
            "-e",
            "DSH_SANDBOX_MODE=none",
        ],
        "echo $DSH_SANDBOX_MODE $DSH_SANDBOX_NETWORK",
    );
    assert_eq!(v["stdout"]["text"], "read-only deny\n");
}

#[test]
fn full_access_confines_nothing_but_reports_facts() {
    let d = dirs();
    let (v, status) = sandboxed(
        &d,
        &["-s", "full-access"],
        &format!("touch {}/f && echo ok", p(&d.outside)),
    );
    assert_eq!(status, 0);
    assert_eq!(v["sandbox"]["mode"], "full-access");
    assert!(d.outside.join("f").exists());
}

#[test]
fn denial_classification_is_conservative() {
    let d = dirs();
    for script in [
        "false",
        "echo /tmp/x/sandbox/package.json; exit 1",
        "echo permission denied",
    ] {
        let (v, _) = sandboxed(&d, &["-s", "workspace-write"], script);
        assert_eq!(v["sandbox"]["denied"], false, "{script}");
    }
}

fn seccomp_errno() -> PathBuf {
    example("seccomp_errno")
}

#[test]
fn without_usable_landlock_a_confining_mode_fails_closed() {
    let d = dirs();
    let marker = d.outside.join("ran");
    let out = Command::new(seccomp_errno())
        .args(["landlock_create_ruleset", "--", bin().to_str().unwrap()])
        .args([
            "-s",
            "workspace-write",
            "--json",
            "--",
            &format!("touch {}", p(&marker)),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125, "{}", stderr(&out));
    assert!(!marker.exists(), "the command ran unconfined");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "SANDBOX_UNAVAILABLE");
    assert!(
        stderr(&out).starts_with("dsh-exec: error: sandbox unavailable: Landlock is not available")
    );
}

#[test]
fn a_restriction_failing_after_the_spawn_is_a_runner_failure() {
    let d = dirs();
    let marker = d.outside.join("ran");
    let out = Command::new(seccomp_errno())
        .args(["landlock_restrict_self", "--", bin().to_str().unwrap()])
        .args([
            "-s",
            "read-only",
            "--json",
            "--",
            &format!("touch {}", p(&marker)),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125, "{}", stderr(&out));
    assert!(!marker.exists(), "the command ran");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"]["runner_failed"], true);
    assert_eq!(v["exit_code"], Value::Null);
    assert_eq!(
        v["stderr"]["text"],
        "dsh-exec: the sandbox runner failed, the command did not run: landlock_restrict_self: Function not implemented (os error 38)\n"
    );
    let text = Command::new(seccomp_errno())
        .args(["landlock_restrict_self", "--", bin().to_str().unwrap()])
        .args(["-s", "read-only", "--", "true"])
        .output()
        .unwrap();
    let text = stdout(&text);
    assert!(
        text.ends_with("[sandbox: read-only; the sandbox runner failed]\n[exit code: 125]\n"),
        "{text}"
    );
}

#[test]
fn explain_shows_the_policy() {
    let d = dirs();
    let v = Test::new()
        .env("TMPDIR", &d.tmp)
        .args([
            "explain",
            "--json",
            "-s",
            "workspace-write",
            "--network",
            "deny",
            "-C",
            p(&d.ws),
        ])
        .args(["--writable-root", "/nonexistent/w", "--", "true"])
        .run()
        .json();
    let sb = &v["sandbox"];
    assert_eq!(
        sb["mode"],
        json!({"value": "workspace-write", "origin": "flag"})
    );
    assert_eq!(sb["network"], json!({"value": "deny", "origin": "flag"}));
    let real = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(sb["writable"], json!([real(&d.ws), real(&d.tmp)]));
    assert_eq!(sb["skipped"][0]["path"], "/nonexistent/w");
    assert!(sb["landlock_abi"].as_i64().unwrap() >= 1);
    assert_eq!(sb["enforcement"]["network"], "full");
}

#[test]
fn a_confined_command_cannot_redirect_the_spill_files_with_symlinks() {
    let d = dirs();
    // The command looks for the spill directory wherever it can write, and
    // swaps any it finds for a symlink to a directory outside.
    let swap_dir = format!(
        "head -c 100 /dev/zero; sleep 0.3; \
         for s in $(find $TMPDIR {ws} -name 'dsh-exec-*' -type d 2>/dev/null); do \
           mv $s $s.moved 2>/dev/null && ln -s {o} $s 2>/dev/null; done; \
         head -c 100 /dev/zero >&2",
        ws = p(&d.ws),
        o = p(&d.outside)
    );
    let (v, _) = sandboxed(
        &d,
        &[
            "-s",
            "workspace-write",
            "--spill-dir",
            p(&d.tmp),
            "--stdout-max-bytes",
            "16",
            "--stderr-max-bytes",
            "16",
        ],
        &swap_dir,
    );
    assert_eq!(v["stderr"]["total_bytes"], 100, "{v}");
    for stream in ["stdout", "stderr"] {
        let path = v[stream]["spill_path"].as_str().unwrap();
        // The reported path holds exactly the stream.
        assert_eq!(std::fs::read(path).unwrap(), vec![0u8; 100], "{path}");
        assert!(!path.starts_with(p(&d.ws)), "{path}");
    }
    let outside: Vec<_> = std::fs::read_dir(&d.outside).unwrap().collect();
    assert!(outside.is_empty(), "dsh-exec wrote outside: {outside:?}");

    // A spill directory asked for inside the workspace is not used: the
    // command could swap it.
    let spill = d.ws.join("spill");
    std::fs::create_dir(&spill).unwrap();
    let swap_parent = format!(
        "rmdir spill && ln -s {} spill && head -c 100 /dev/zero",
        p(&d.outside)
    );
    let out = Test::new()
        .env("TMPDIR", &d.tmp)
        .args([
            "--json",
            "-C",
            p(&d.ws),
            "-s",
            "workspace-write",
            "--spill-dir",
        ])
        .arg(&spill)
        .args(["--stdout-max-bytes", "16", "--", &swap_parent])
        .run();
    assert!(
        out.stderr.starts_with(&format!(
            "dsh-exec: warning: spill directory {} is writable by the confined command; spilling to ",
            spill.display()
        )),
        "{}",
        out.stderr
    );
    let v = out.json();
    let path = v["stdout"]["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::read(path).unwrap(), vec![0u8; 100]);
    let outside: Vec<_> = std::fs::read_dir(&d.outside).unwrap().collect();
    assert!(outside.is_empty(), "dsh-exec wrote outside: {outside:?}");
}
