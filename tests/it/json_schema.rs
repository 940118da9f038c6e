//! schema/run-result.schema.json describes the real --json output (the
//! drift against RunResult is checked by tests/it/generated_docs.rs).
use crate::support::*;
use serde_json::Value;

fn schema() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/run-result.schema.json");
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
