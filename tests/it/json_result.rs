//! `--json`: one object with exactly the fields of the contract.
use crate::support::*;
use serde_json::{Value, json};

#[test]
fn the_object_holds_exactly_the_contract_fields() {
    let dir = tempfile::tempdir().unwrap();
    let (v, status) = run_json(&[
        "-C",
        dir.path().to_str().unwrap(),
        "--",
        "echo hello; echo oops >&2; exit 4",
    ]);
    assert_eq!(status, 4);
    let obj = v.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "aborted",
            "command",
            "duration_ms",
            "env_scrubbed",
            "exit_code",
            "limit_exceeded",
            "resources",
            "sandbox",
            "signal",
            "stderr",
            "stdout",
            "timed_out",
            "timeout_ms",
            "workdir"
        ]
    );
    assert_eq!(v["command"], "echo hello; echo oops >&2; exit 4");
    assert_eq!(v["workdir"], dir.path().to_str().unwrap());
    assert_eq!(v["exit_code"], 4);
    assert_eq!(v["signal"], Value::Null);
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["aborted"], false);
    assert_eq!(v["timeout_ms"], 600000);
    assert!(v["duration_ms"].as_u64().unwrap() < 10_000);
    assert_eq!(
        v["stdout"],
        json!({"text": "hello\n", "truncated": false, "kept": "tail", "omitted_bytes": 0,
               "total_bytes": 6, "spill_path": null})
    );
    assert_eq!(
        v["stderr"],
        json!({"text": "oops\n", "truncated": false, "kept": "tail", "omitted_bytes": 0,
               "total_bytes": 5, "spill_path": null})
    );
    assert_eq!(v["sandbox"], Value::Null);
}

#[test]
fn non_utf8_output_still_yields_valid_json() {
    let v = Test::new()
        .args(["--json", "--", "printf 'a\\377b\\300'"])
        .run()
        .json();
    assert_eq!(v["stdout"]["text"], "a\u{FFFD}b\u{FFFD}");
    assert_eq!(v["stdout"]["total_bytes"], 4);
}

#[test]
fn a_signal_death_has_a_null_exit_code() {
    let (v, status) = run_json(&["--", "kill -KILL $$"]);
    assert_eq!(status, 137);
    assert_eq!(v["exit_code"], Value::Null);
    assert_eq!(v["signal"], "SIGKILL");
}

#[test]
fn resources_say_what_the_tree_used() {
    // 64 MiB touched by one process; CPU spent in an orphan that outlives
    // its parent shell counts too (dsh-exec reaps it).
    let (v, status) = run_json(&[
        "--",
        "python3 -c 'b = bytearray(64 << 20); b[::4096] = b\"x\" * len(b[::4096])'; \
         (python3 -c 'sum(range(2000000))' &) ; sleep 1",
    ]);
    assert_eq!(status, 0);
    let r = &v["resources"];
    assert_eq!(r["source"], unlimited_source());
    assert_eq!(r["max_pids"], serde_json::Value::Null);
    let peak = r["peak_memory_bytes"].as_u64().unwrap();
    assert!((64 << 20..1 << 30).contains(&peak), "{r}");
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!(cpu >= 20, "{r}");
}
