//! schema/run-result.schema.json describes the real --json output, and
//! schema/explain.schema.json the real `explain --json` output (the drift
//! against RunResult and Explanation is checked by
//! tests/it/generated_docs.rs).
use crate::support::*;
use serde_json::Value;

fn schema() -> Value {
    committed("run-result.schema.json")
}

fn committed(name: &str) -> Value {
    let path = format!("{}/schema/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn real_results_validate_against_the_committed_schema() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--", "echo hi"],
        vec!["--", "exit 7"],
        vec!["--", "kill -KILL $$"],
        vec!["--timeout", "100ms", "--", "sleep 5"],
        vec![
            "--stdout-max-bytes",
            "8",
            "--spill-dir",
            spill,
            "--",
            "seq 1 100",
        ],
        vec!["--timeout", "0", "--", "printf '\\377'"],
        vec!["-s", "read-only", "--network", "deny", "--", "touch /x"],
        // No denial at all: the lists are there, empty.
        vec!["-s", "workspace-write", "--", "true"],
        vec![
            "--network",
            "loopback",
            "--",
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'",
        ],
        // The allow-list facts: the proxy refuses without connecting.
        vec![
            "--network",
            "allow=localhost:9",
            "--",
            "curl -sS --noproxy '' http://example.org/",
        ],
    ];
    for args in cases {
        let (v, _) = run_json(&args);
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{args:?}: {errors:?}\n{v}");
    }
}

#[test]
fn the_schema_rejects_what_is_not_a_result() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let (mut v, _) = run_json(&["--", "true"]);
    assert!(validator.is_valid(&v));
    v["surprise"] = Value::Bool(true);
    assert!(!validator.is_valid(&v));
    v.as_object_mut().unwrap().remove("surprise");
    v.as_object_mut().unwrap().remove("exit_code");
    assert!(!validator.is_valid(&v));
}

#[test]
fn errors_match_the_error_schema() {
    let out = dsh()
        .args(["--json", "-C", "/nonexistent/dir", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["error"]["code"], "WORKDIR_UNUSABLE");
    assert_matches_schema("error", &v);
    let out = dsh()
        .args(["--json", "--timeout", "soon", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["error"]["code"], "USAGE");
    assert_matches_schema("error", &v);
}

/// `dsh-exec parse-status` of `text`, as JSON.
fn parse_status(text: &str) -> Value {
    use std::io::Write;
    let mut child = dsh()
        .arg("parse-status")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[test]
fn parse_status_output_matches_its_schema() {
    let (text, _) = run(&["--timeout", "100ms", "--", "sleep 5"]);
    let v = parse_status(&text);
    assert_eq!(v["timed_out"], true);
    assert_matches_schema("parse-status", &v);
    let (text, _) = run(&["--", "exit 3"]);
    let v = parse_status(&text);
    assert_eq!(v["exit_code"], 3);
    assert_matches_schema("parse-status", &v);
}

/// The errors of `v` against schema/explain.schema.json.
fn explain_errors(v: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(&committed("explain.schema.json")).unwrap();
    validator.iter_errors(v).map(|e| e.to_string()).collect()
}

/// Asserts that `out` is an explanation the schema accepts and that the
/// `Explanation` type reads back as it was printed.
fn assert_valid_explanation(what: &str, out: &Outcome) {
    out.expect_status(0);
    let v = out.json();
    let errors = explain_errors(&v);
    assert!(errors.is_empty(), "{what}: {errors:?}\n{v}");
    let typed: dsh_exec_core::render::Explanation = serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("{what}: not an Explanation ({e})\n{v}"));
    assert_eq!(serde_json::to_value(&typed).unwrap(), v, "{what}");
}

#[test]
fn real_explanations_validate_against_the_committed_schema() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "").unwrap();
    let home = root.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let config = root.path().join("config.toml");
    std::fs::write(
        &config,
        "[defaults]\nkeep = \"head+tail\"\nprune_spill_after = \"7d\"\n\
         [caps]\nmax_timeout = \"2h\"\nmax_memory = \"8GiB\"\nmax_cpu = \"1h\"\n",
    )
    .unwrap();
    let missing = root.path().join("missing");
    let ws_arg = ws.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--", "true"],
        vec!["-s", "read-only", "--", "true"],
        vec![
            "-s",
            "workspace-write",
            "--network",
            "loopback",
            "--",
            "true",
        ],
        vec![
            "-s",
            "workspace-write",
            "--network",
            "allow=example.org,*.github.com:8443",
            "--memory-max",
            "100M",
            "--pids-max",
            "50",
            "--cpu-max",
            "2s",
            "--limits",
            "best-effort",
            "--",
            "true",
        ],
        vec![
            "-s",
            "workspace-write",
            "--no-temp-write",
            "--deny-read",
            "/etc/hostname",
            "-e",
            "FOO=bar",
            "-e",
            "MY_API_KEY",
            "-e",
            "NOT_SET_HERE",
            "--env-policy",
            "core",
            "--stdin-file",
            "/etc/hostname",
            "--",
            "true",
        ],
        vec!["-i", "-s", "workspace-write", "--", "true"],
        vec!["-s", "full-access", "--", "true"],
        vec!["--network", "deny", "--", "true"],
        vec![
            "--stdin-file",
            "-",
            "-t",
            "0",
            "--signal",
            "KILL",
            "--",
            "cat",
        ],
        vec!["--background", "--stdin", "pipe", "--", "cat"],
        vec![
            "-s",
            "workspace-write",
            "--writable-root",
            missing.to_str().unwrap(),
            "--allow-unix-socket",
            "/etc/hostname",
            "--allow-caches",
            "--",
            "true",
        ],
        // Caps of the configuration file: `capped` appears.
        vec![
            "-t",
            "4h",
            "--memory-max",
            "16G",
            "--cpu-max",
            "3h",
            "--",
            "true",
        ],
    ];
    for args in cases {
        let out = Test::new()
            .env("HOME", &home)
            .env("MY_API_KEY", "s3cret")
            .env("DSH_EXEC_CONFIG", &config)
            .args(["explain", "--json", "-C", ws_arg])
            .args(&args)
            .run();
        assert_valid_explanation(&format!("{args:?}"), &out);
    }
    // With and without a mount namespace: the protected paths of a
    // repository, restored after the run in the tier without one.
    for tier in tiers() {
        let out = Test::in_tier(tier)
            .env("HOME", &home)
            .args(["explain", "--json", "-s", "workspace-write", "-C", ws_arg])
            .args(["--", "true"])
            .run();
        assert_valid_explanation(&format!("{tier:?}"), &out);
    }
}

#[test]
fn an_explanation_without_landlock_validates_against_the_schema() {
    let out = std::process::Command::new(example("seccomp_errno"))
        .args(["landlock_create_ruleset", "--", bin().to_str().unwrap()])
        .args(["explain", "--json", "-s", "read-only", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["sandbox"]["enforcement"]["error"].as_str().unwrap();
    assert!(error.starts_with("Landlock is not available"), "{v}");
    assert_eq!(v["sandbox"]["landlock_abi"], Value::Null);
    let errors = explain_errors(&v);
    assert!(errors.is_empty(), "{errors:?}\n{v}");
    let typed: dsh_exec_core::render::Explanation = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), v);
}

#[test]
fn the_explain_schema_rejects_what_is_not_an_explanation() {
    let validator = jsonschema::validator_for(&committed("explain.schema.json")).unwrap();
    let out = Test::new()
        .args(["explain", "--json", "-s", "workspace-write", "--", "true"])
        .run();
    let mut v = out.json();
    assert!(validator.is_valid(&v));
    // An unknown field, at the top and inside.
    v["surprise"] = Value::Bool(true);
    assert!(!validator.is_valid(&v));
    v.as_object_mut().unwrap().remove("surprise");
    v["sandbox"]["surprise"] = Value::Bool(true);
    assert!(!validator.is_valid(&v));
    v["sandbox"].as_object_mut().unwrap().remove("surprise");
    v["timeout_ms"]["surprise"] = Value::Bool(true);
    assert!(!validator.is_valid(&v));
    v["timeout_ms"].as_object_mut().unwrap().remove("surprise");
    // `capped` may appear; a field that is `null` may not be left out.
    v["timeout_ms"]["capped"] = Value::String("4h capped at 2h".into());
    assert!(validator.is_valid(&v));
    v.as_object_mut().unwrap().remove("prune_spill_after_ms");
    assert!(!validator.is_valid(&v));
    v["prune_spill_after_ms"] = Value::Null;
    // Values outside their sets.
    v["stdin"]["value"]["kind"] = Value::String("socket".into());
    assert!(!validator.is_valid(&v));
    v["stdin"]["value"] = serde_json::json!({"kind": "closed"});
    v["limit_mechanisms"]["disk"] = serde_json::json!({"mechanism": "none", "detail": "x"});
    assert!(!validator.is_valid(&v));
    v["limit_mechanisms"] = serde_json::json!({});
    assert!(validator.is_valid(&v));
}
