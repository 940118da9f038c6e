//! `explain` shows the resolved spec with origins and runs nothing.
use crate::support::*;
use serde_json::json;

#[test]
fn json_explanation_names_values_and_origins_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let out = Test::new()
        .env("MY_API_KEY", "s3cret")
        .env("DSH_OLD", "x")
        .args([
            "explain",
            "--json",
            "--timeout",
            "30s",
            "-C",
            dir.path().to_str().unwrap(),
        ])
        .args([
            "-e",
            "MY_API_KEY",
            "-e",
            "PAGER=less",
            "--dsh-env",
            "DSH_RUN=7",
            "--",
            &script,
        ])
        .run();
    out.expect_status(0);
    assert!(!marker.exists(), "explain ran the command");
    let v = out.json();
    assert_eq!(v["command"], script);
    assert_eq!(v["timeout_ms"], json!({"value": 30000, "origin": "flag"}));
    assert_eq!(
        v["kill_after_ms"],
        json!({"value": 2000, "origin": "default"})
    );
    assert_eq!(
        v["stdout_max_bytes"],
        json!({"value": 1048576, "origin": "default"})
    );
    assert_eq!(v["workdir"], json!({"value": dir.path(), "origin": "flag"}));
    assert_eq!(
        v["stdin"],
        json!({"value": {"kind": "closed"}, "origin": "default"})
    );
    let env = &v["environment"];
    assert_eq!(env["scrubbed"], json!(["DSH_OLD", "MY_API_KEY"]));
    let set = env["set"].as_array().unwrap();
    assert!(set.contains(&json!({"name": "MY_API_KEY", "value": "<masked>", "layer": "explicit"})));
    assert!(set.contains(&json!({"name": "PAGER", "value": "less", "layer": "explicit"})));
    assert!(set.contains(&json!({"name": "TERM", "value": "dumb", "layer": "override"})));
    assert!(set.contains(&json!({"name": "DSH_RUN", "value": "7", "layer": "managed"})));
    assert!(!out.stdout.contains("s3cret"));
}

#[test]
fn text_explanation_is_aligned_and_masks_secrets() {
    let out = Test::new()
        .env("FOO_TOKEN", "tok")
        .args([
            "explain",
            "-e",
            "FOO_TOKEN",
            "--stdout-max-bytes",
            "64K",
            "--",
            "make",
            "test",
        ])
        .run();
    out.expect_status(0);
    let text = &out.stdout;
    assert!(text.starts_with("command           make test\n"), "{text}");
    assert!(text.contains("\nstdout-max-bytes  64KiB"), "{text}");
    assert!(text.contains("(flag)\n"), "{text}");
    assert!(text.contains("\ntimeout           10m"), "{text}");
    assert!(
        text.contains("  scrubbed   FOO_TOKEN (word TOKEN)\n"),
        "{text}"
    );
    assert!(text.contains("  explicit   FOO_TOKEN=<masked>\n"), "{text}");
    assert!(!text.contains("tok\n"), "{text}");
}

#[test]
fn explain_is_coloured_only_when_asked_or_on_a_terminal() {
    let run = |args: &[&str]| {
        Test::new()
            .arg("explain")
            .args(args)
            .args(["-s", "read-only", "--", "true"])
            .run()
            .stdout
    };
    let coloured = run(&["--color", "always"]);
    assert!(
        coloured.contains("\u{1b}[1msandbox\u{1b}[0m\u{1b}[32m"),
        "{coloured}"
    );
    // Piped output is plain under auto.
    assert!(!run(&[]).contains('\u{1b}'));
    assert!(!run(&["--color", "never"]).contains('\u{1b}'));
}

#[test]
fn explain_names_the_gate_the_protected_paths_and_where_spill_files_go() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let tmp = root.path().join("tmp");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "").unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let home = root.path().join("home");
    std::fs::create_dir(&home).unwrap();
    for tier in tiers() {
        let out = Test::in_tier(tier)
            .env("TMPDIR", &tmp)
            .env("HOME", &home)
            .args(["explain", "--json", "-s", "workspace-write", "-C"])
            .arg(&ws)
            .args(["--", "true"])
            .run();
        let sb = &out.json()["sandbox"];
        let (calls, metadata) = match tier {
            Tier::MountNamespace => (
                "connect, sendto, sendmsg, sendmmsg; chmod setting set-user-ID or set-group-ID; xattr",
                "read-only mounts outside the writable roots (EROFS)",
            ),
            Tier::Gate => (
                "connect, sendto, sendmsg, sendmmsg; chmod, chown, utime, xattr",
                "the gate (no read-only mount tree without CAP_SYS_ADMIN)",
            ),
        };
        assert_eq!(sb["gate"]["calls"], calls, "{tier:?}");
        assert_eq!(sb["metadata"], metadata, "{tier:?}");
    }
    let out = Test::new()
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .args(["explain", "--json", "-s", "workspace-write", "-C"])
        .arg(&ws)
        .args(["--", "true"])
        .run();
    let sb = &out.json()["sandbox"];
    let paths = sb["protected"]["paths"].as_array().unwrap();
    for p in [".git/config", ".git/hooks"] {
        let want = ws.join(p);
        assert!(
            paths.iter().any(|x| x == want.to_str().unwrap()),
            "{p} not protected: {sb}"
        );
    }
    // The temp dir is writable in workspace-write: spill files go elsewhere.
    let spill = sb["spill_dir"].as_str().unwrap();
    assert!(!spill.starts_with(tmp.to_str().unwrap()), "{spill}");
    assert_eq!(
        spill,
        home.join(".local/state/dsh-exec/spill").to_str().unwrap()
    );
    let mechanism = sb["protected"]["mechanism"].as_str().unwrap();
    if nix::unistd::geteuid().is_root() {
        assert_eq!(mechanism, "read-only bind mounts in a mount namespace");
        assert_eq!(sb["terminals"], "the ones it makes (a private devpts)");
    }
}

/// A command with a line break is one row of `explain`'s text: it cannot
/// forge a `sandbox none` row under the real one.
#[test]
fn a_command_with_line_breaks_is_one_row_of_explain() {
    let out = Test::new()
        .args(["explain", "--", "true\nsandbox      none"])
        .run();
    out.expect_status(0);
    let rows: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("sandbox"))
        .collect();
    assert!(rows.is_empty(), "{rows:?}\n{}", out.stdout);
    assert!(
        out.stdout.contains("true\\nsandbox      none"),
        "{}",
        out.stdout
    );
}

/// Every value of `explain`'s text is one line: a workdir or a variable
/// with a line break or an escape sequence cannot forge a row nor drive
/// the terminal.
#[test]
fn every_value_of_explain_is_one_line() {
    let out = Test::new()
        .args([
            "explain",
            "-C",
            "/nonexistent/d\nsandbox      none\x1b[2J",
            "-e",
            "FOO=a\n  explicit   FORGED=1\x1b[31m",
            "--",
            "true",
        ])
        .run();
    out.expect_status(0);
    assert!(!out.stdout.contains('\x1b'), "{}", out.stdout);
    assert!(
        !out.stdout
            .lines()
            .any(|l| l.starts_with("sandbox") || l.trim_start().starts_with("explicit   FORGED")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("FOO=a\\n  explicit   FORGED=1\\x1b[31m"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_names_the_network_policy_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "").unwrap();
    // The `network` row of the text (its alignment squeezed out) and the
    // JSON's policy, its source and the variable the command gets.
    let explain = |args: &[&str]| {
        let run = |json: &[&str]| {
            let out = Test::new()
                .env("DSH_EXEC_CONFIG", &cfg)
                .arg("explain")
                .args(json)
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .args(["--", "true"])
                .run();
            out.expect_status(0);
            out
        };
        let text = run(&[]).stdout;
        let row = text
            .lines()
            .find(|l| l.starts_with("network "))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no network row: {text}"));
        let v = run(&["--json"]).json();
        let told = v["environment"]["set"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "DSH_SANDBOX_NETWORK")
            .cloned();
        (
            row,
            v["sandbox"]["network"].clone(),
            v["sandbox"]["network_source"].clone(),
            told,
        )
    };
    let told = |policy: &str| {
        Some(json!({"name": "DSH_SANDBOX_NETWORK", "value": policy, "layer": "managed"}))
    };
    for (args, row, network, source) in [
        (
            &["-s", "workspace-write"][..],
            "network loopback (default for workspace-write)",
            json!({"value": "loopback", "origin": "default"}),
            "default for workspace-write",
        ),
        (
            &["-s", "read-only"],
            "network loopback (default for read-only)",
            json!({"value": "loopback", "origin": "default"}),
            "default for read-only",
        ),
        (
            &["-s", "full-access"],
            "network allow (default for full-access)",
            json!({"value": "allow", "origin": "default"}),
            "default for full-access",
        ),
        (
            &["-s", "workspace-write", "--network", "allow"],
            "network allow (flag)",
            json!({"value": "allow", "origin": "flag"}),
            "flag",
        ),
    ] {
        let policy = network["value"].as_str().unwrap();
        assert_eq!(
            explain(args),
            (
                row.to_string(),
                network.clone(),
                json!(source),
                told(policy)
            ),
            "{args:?}"
        );
    }
    std::fs::write(&cfg, "[defaults]\nnetwork = \"allow\"\n").unwrap();
    assert_eq!(
        explain(&["-s", "workspace-write"]),
        (
            "network allow (config)".to_string(),
            json!({"value": "allow", "origin": "config"}),
            json!("config"),
            told("allow")
        )
    );
}
