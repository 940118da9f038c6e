//! `--keep` and `--render`: which part of a long stream the result keeps,
//! where its cuts fall, and how its text reads; the spill file stays exact.
use crate::support::*;

/// Runs `script` with `args` and a spill directory of its own; returns the
/// stdout with the spill directory's path written as `SPILL`, and the
/// spill file's bytes.
fn run_spilling(args: &[&str], script: &str) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .args(["--spill-dir", dir.path().to_str().unwrap()])
        .args(args)
        .args(["--", script])
        .run();
    let spill = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .map(|e| e.unwrap().path());
    let bytes = spill
        .as_ref()
        .map(|d| std::fs::read(d.join("stdout")).unwrap())
        .unwrap_or_default();
    let text = match &spill {
        Some(d) => out.stdout.replace(d.to_str().unwrap(), "SPILL"),
        None => out.stdout,
    };
    (text, bytes)
}

#[test]
fn head_and_tail_keep_both_ends_with_one_line_between_them() {
    let (text, spilled) = run_spilling(
        &["--keep", "head+tail", "--stdout-max-bytes", "64"],
        "seq 1 100",
    );
    // 32 bytes of head (cut before the newline that ends "14"), 32 of tail
    // (from the first whole line, "91").
    let head: String = (1..=14).map(|i| format!("{i}\n")).collect();
    let tail: String = (91..=100).map(|i| format!("{i}\n")).collect();
    let omitted = 292 - (head.len() - 1) - tail.len();
    assert_eq!(
        text,
        format!(
            "{head}[... {omitted} bytes omitted; full stream: SPILL/stdout ...]\n{tail}[exit code: 0]\n"
        )
    );
    let all: String = (1..=100).map(|i| format!("{i}\n")).collect();
    assert_eq!(spilled, all.as_bytes());
}

#[test]
fn head_keeps_the_start_and_says_what_came_after() {
    let (text, _) = run_spilling(&["--keep", "head", "--stdout-max-bytes", "20"], "seq 1 100");
    let head: String = (1..=10).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        text,
        format!(
            "{head}[stdout truncated: {} later bytes omitted; full stream: SPILL/stdout]\n[exit code: 0]\n",
            292 - head.len() + 1
        )
    );
}

#[test]
fn a_tail_cut_mid_line_starts_at_the_next_line_and_a_long_line_is_cut_by_bytes() {
    // The last 24 bytes start inside "bbbbbbb", and the window (1/8 of
    // the budget: 3 bytes) holds no line boundary: cut by bytes.
    let (text, _) = run_spilling(
        &["--stdout-max-bytes", "24"],
        "printf 'aaaaaaaaaaaaaaaaaaaa\\nbbbbbbb\\ncccccccccccccccc\\n'",
    );
    assert_eq!(
        text,
        "[stdout truncated: 22 earlier bytes omitted; full stream: SPILL/stdout]\n\
         bbbbbb\ncccccccccccccccc\n[exit code: 0]\n"
    );
    // A budget whose window holds the boundary: 80 bytes, window 10.
    let (text, _) = run_spilling(
        &["--stdout-max-bytes", "80"],
        "printf '%0100d\\n%070d\\n' 0 0",
    );
    assert_eq!(
        text,
        format!(
            "[stdout truncated: 101 earlier bytes omitted; full stream: SPILL/stdout]\n{}\n[exit code: 0]\n",
            "0".repeat(70)
        )
    );
    // One line longer than the budget: cut by bytes, as ever.
    let (text, _) = run_spilling(&["--stdout-max-bytes", "10"], "printf '%050d\\n' 0");
    assert_eq!(
        text,
        format!(
            "[stdout truncated: 41 earlier bytes omitted; full stream: SPILL/stdout]\n{}\n[exit code: 0]\n",
            "0".repeat(9)
        )
    );
}

#[test]
fn plain_render_collapses_progress_bars_and_removes_escapes() {
    Test::new()
        .args(["--render", "plain", "--"])
        .arg("for i in $(seq 100); do printf '\\r%3d%%' $i; done; echo; printf '\\033[1;31merror\\033[0m: x\\bX \\001\\n'")
        .run()
        .expect_stdout("100%\nerror: X \\x01\n[exit code: 0]\n");
    // The JSON says so; the counts and the spill file stay raw.
    let (v, _) = run_json(&["--render", "plain", "--", "printf 'a\\rb\\n'"]);
    assert_eq!(v["stdout"]["text"], "b\n");
    assert_eq!(v["stdout"]["render"], "plain");
    assert_eq!(v["stdout"]["total_bytes"], 4);
    let (v, _) = run_json(&["--", "printf 'a\\rb\\n'"]);
    assert_eq!(v["stdout"]["text"], "a\rb\n");
    assert_eq!(v["stdout"].get("render"), None);
}

#[test]
fn the_json_names_what_was_kept_and_how_much_was_omitted() {
    let dir = tempfile::tempdir().unwrap();
    let (v, _) = run_json(&[
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--keep",
        "head+tail",
        "--stdout-max-bytes",
        "64",
        "--",
        "seq 1 100",
    ]);
    let out = &v["stdout"];
    assert_eq!(out["kept"], "head+tail");
    let head: String = (1..=14).map(|i| format!("{i}\n")).collect();
    assert_eq!(out["head"], head.trim_end());
    assert_eq!(
        out["text"],
        (91..=100).map(|i| format!("{i}\n")).collect::<String>()
    );
    let tail_len = out["text"].as_str().unwrap().len() as u64;
    assert_eq!(
        out["omitted_bytes"],
        292 - (head.len() as u64 - 1) - tail_len
    );
    assert_eq!(out["omitted_bytes"], 229);
    assert_eq!(out["truncated"], true);
    // A command's own line of that shape is escaped in the text.
    Test::new()
        .args(["--", "echo '[... 5 bytes omitted; full stream: /x ...]'"])
        .run()
        .expect_stdout("\\[... 5 bytes omitted; full stream: /x ...]\n[exit code: 0]\n");
}

#[test]
fn keep_and_render_are_usage_checked_and_come_from_the_config() {
    let out = Test::new().args(["--keep", "middle", "--", "true"]).run();
    out.expect_status(125);
    assert!(
        out.stderr
            .contains("invalid keep 'middle' (tail, head or head+tail)"),
        "{}",
        out.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[defaults]\nkeep = \"head\"\nrender = \"plain\"\n").unwrap();
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &cfg)
        .args(["explain", "--json", "--", "true"])
        .run();
    let v = out.json();
    assert_eq!(
        v["keep"],
        serde_json::json!({"value": "head", "origin": "config"})
    );
    assert_eq!(
        v["render"],
        serde_json::json!({"value": "plain", "origin": "config"})
    );
}
