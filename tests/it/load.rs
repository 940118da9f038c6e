//! Many runs at once on a small machine: every result right, nothing left.
use crate::support::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn a_hundred_concurrent_runs_each_get_their_own_result() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    let pids = dir.path().join("pids");
    std::fs::create_dir(&spill).unwrap();
    std::fs::create_dir(&pids).unwrap();
    let children: Vec<_> = (0..100)
        .map(|i| {
            let script = format!(
                "echo $$ > {}/{i}; head -c 5000 /dev/zero | tr '\\0' x; echo run-{i} >&2; exit {i}",
                pids.display()
            );
            dsh()
                .args([
                    "--json",
                    "--stdout-max-bytes",
                    "1K",
                    "--spill-dir",
                    spill.to_str().unwrap(),
                ])
                .args(["--", &script])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(code(&out), i as i32, "run {i}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["exit_code"], i);
        assert_eq!(v["stdout"]["text"], "x".repeat(1024), "run {i}");
        assert_eq!(v["stdout"]["total_bytes"], 5000);
        assert_eq!(v["stderr"]["text"], format!("run-{i}\n"));
        let file = v["stdout"]["spill_path"].as_str().unwrap();
        assert_eq!(std::fs::read(file).unwrap(), vec![b'x'; 5000], "run {i}");
    }
    // One private directory per run, holding only its stdout spill file.
    let dirs: Vec<_> = std::fs::read_dir(&spill)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 100);
    for d in dirs {
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("stdout")],
            "{}",
            d.display()
        );
    }
    for i in 0..100 {
        let pid: i32 = std::fs::read_to_string(pids.join(i.to_string()))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            gone_within(pid, Duration::from_secs(2)),
            "run {i}: {pid} survived"
        );
    }
}
