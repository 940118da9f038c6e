//! Nothing the command started survives the run, whatever it did to escape,
//! and nothing dsh-exec did not start is touched.
use crate::support::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The `sleep` processes whose command line names `marker` (bash's
/// command line names it too).
fn sleeps_naming(marker: &str) -> Vec<i32> {
    processes_naming(marker)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
        .collect()
}

/// Asserts every pid is gone (allowing 2 s for init to reap), killing any
/// survivor so a failure leaves nothing behind.
fn assert_all_gone(pids: &[i32]) {
    assert!(!pids.is_empty(), "no pids were recorded");
    let survivors: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !gone_within(*p, Duration::from_secs(2)))
        .collect();
    for p in &survivors {
        cleanup(*p);
    }
    assert!(survivors.is_empty(), "survived the run: {survivors:?}");
}

#[test]
fn busy_loops_in_the_background_die_with_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!(
        "for i in 1 2; do (while :; do :; done) & echo $! >> {}; done; sleep 60",
        pids.display()
    );
    let t0 = Instant::now();
    let (v, status) = run_json(&["--timeout", "1s", "--", &script]);
    let took = t0.elapsed();
    assert_eq!(status, 124);
    assert_eq!(v["timed_out"], true);
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_all_gone(&pids_in(&pids));
}

#[test]
fn a_fifo_reader_and_writer_die_and_the_lines_so_far_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let script = format!(
        "mkfifo {d}/p; (while true; do echo child; sleep 0.3; done) > {d}/p & echo $! > {d}/pids; cat {d}/p"
    );
    let t0 = Instant::now();
    let (v, status) = run_json(&["--timeout", "2s", "--", &script]);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(status, 124);
    let text = v["stdout"]["text"].as_str().unwrap();
    assert!(text.starts_with("child\nchild\n"), "{text:?}");
    assert!(text.lines().all(|l| l == "child"), "{text:?}");
    assert_all_gone(&pids_in(&dir.path().join("pids")));
}

#[test]
fn processes_ignoring_sigterm_are_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let script = format!(
        "(trap '' TERM; exec sleep 98) & echo $! > {d}/pids; trap '' TERM; sleep 99 & echo $! >> {d}/pids; wait"
    );
    let t0 = Instant::now();
    let (v, status) = run_json(&["--timeout", "1s", "--kill-after", "500ms", "--", &script]);
    let took = t0.elapsed();
    assert_eq!(status, 124);
    assert_eq!(v["signal"], "SIGKILL");
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_all_gone(&pids_in(&dir.path().join("pids")));
}

#[test]
fn a_setsid_escapee_is_swept_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "setsid sh -c 'while :; do echo tick; sleep 0.05; done' & echo $! > {}/pids; sleep 60",
        dir.path().display()
    );
    let t0 = Instant::now();
    let (v, status) = run_json(&["--timeout", "1s", "--", &script]);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!(status, 124);
    assert!(v["stdout"]["text"].as_str().unwrap().starts_with("tick\n"));
    assert_all_gone(&pids_in(&dir.path().join("pids")));
}

#[test]
fn an_orphaned_setsid_escapee_is_swept_when_the_command_exits() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(setsid sleep 96 > /dev/null 2>&1 & echo $! > {}/pids); echo ok",
        dir.path().display()
    );
    let t0 = Instant::now();
    let (text, status) = run(&["--", &script]);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert_eq!((text.as_str(), status), ("ok\n[exit code: 0]\n", 0));
    assert_all_gone(&pids_in(&dir.path().join("pids")));
}

#[test]
fn a_looping_background_job_is_killed_after_the_foreground_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "(while :; do echo bg; sleep 0.1; done) & echo $! > {}/pids; echo fg-done",
        dir.path().display()
    );
    let t0 = Instant::now();
    let (v, status) = run_json(&["--timeout", "0", "--", &script]);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(status, 0);
    assert_eq!(v["exit_code"], 0);
    assert!(v["stdout"]["text"].as_str().unwrap().contains("fg-done\n"));
    assert_all_gone(&pids_in(&dir.path().join("pids")));
}

#[test]
fn output_before_the_deadline_is_kept() {
    let (v, status) = run_json(&[
        "--timeout",
        "2s",
        "--",
        "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done",
    ]);
    assert_eq!(status, 124);
    let text = v["stdout"]["text"].as_str().unwrap();
    assert!(text.starts_with("tick 1\ntick 2\n"), "{text:?}");
}

#[test]
fn dsh_exec_survives_its_own_deadline_to_print_the_marker() {
    let (text, status) = run(&["--timeout", "1s", "--", "sleep 30"]);
    assert_eq!(text, "[timed out after 1s]\n[killed by signal: SIGTERM]\n");
    assert_eq!(status, 124);
}

#[test]
fn a_child_the_process_image_already_had_is_never_touched() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // bash starts a sleep, then execs dsh-exec: the sleep is dsh-exec's child
    // from its first instruction, but not the command's.
    let script = format!(
        "sleep 30 >/dev/null 2>&1 & echo $! > {}; exec {} -- 'sleep 0.2 & echo done'",
        pidfile.display(),
        bin().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    let pid = pids_in(&pidfile)[0];
    let alive_after = alive(pid);
    cleanup(pid);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "done\n[exit code: 0]\n"
    );
    assert!(alive_after, "the pre-existing sleep {pid} was killed");
}

/// A "hopper": each instance starts the next and exits at once, so the
/// chain is always between a parent that is leaving and a child that is
/// being reparented. 25 runs confined and 25 unconfined leave no survivor.
#[test]
fn a_hopper_that_keeps_reparenting_itself_does_not_survive_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let hopper = dir.path().join("hopper.sh");
    let stop = dir.path().join("stop");
    std::fs::write(
        &hopper,
        format!(
            "#!/bin/sh\n[ -e {} ] && exit 0\nsetsid \"$0\" </dev/null >/dev/null 2>&1 &\nexit 0\n",
            stop.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hopper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = hopper.to_str().unwrap().to_string();
    let mut survivors = 0;
    for i in 0..50 {
        let mut args = vec!["--timeout", "10s", "--kill-after", "200ms"];
        if i % 2 == 1 {
            args.extend(["-s", "workspace-write"]);
        }
        let script = format!("{marker} & sleep 0.2");
        let out = Test::new()
            .args(&args)
            .args(["-C"])
            .arg(dir.path())
            .args(["--", &script])
            .run();
        assert_eq!(out.status, 0, "{}", out.stderr);
        let left = processes_naming(&marker);
        survivors += left.len();
        if !left.is_empty() {
            eprintln!("run {i}: {} survived", left.len());
        }
    }
    // Stop the chain and kill what is left, before asserting.
    std::fs::write(&stop, "").unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end && !processes_naming(&marker).is_empty() {
        for pid in processes_naming(&marker) {
            cleanup(pid);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(survivors, 0, "hopper processes survived their runs");
}

#[test]
fn kill_9_of_dsh_exec_takes_the_commands_group_along() {
    // Only the direct child has the parent-death signal; the watchdog
    // kills the rest of the group when dsh-exec dies without ending the run.
    for confined in [false, true] {
        let marker = if confined { "4321.7" } else { "4321.6" };
        let mut c = dsh();
        if confined {
            c.args(["-s", "workspace-write"]);
        }
        let mut child = c
            .arg("--")
            .arg(format!(
                "sleep {marker} & (sleep {marker} &); sleep {marker} & wait"
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let sleeps = || sleeps_naming(marker);
        let three = poll_until(Duration::from_secs(5), || {
            let p = sleeps();
            (p.len() == 3).then_some(p)
        });
        let Some(pids) = three else {
            let _ = child.kill();
            panic!("the sleeps never started");
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = poll_until(Duration::from_secs(5), || {
            processes_naming(marker).is_empty().then_some(())
        });
        if gone.is_none() {
            for pid in &pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("confined {confined}: processes of the run outlived kill -9 of dsh-exec");
        }
    }
}

#[test]
fn kill_9_of_dsh_exec_takes_a_setsid_escapee_along_through_the_containment_cgroup() {
    // A process that left the process group (setsid) is reached, after
    // dsh-exec dies, only through the run's containment cgroup.
    if !contained() {
        eprintln!(
            "skipped: no containment cgroup here (needs a unified cgroup hierarchy this user \
             may make a cgroup in; see `dsh-exec explain`)"
        );
        return;
    }
    for confined in [false, true] {
        let marker = if confined { "4322.7" } else { "4322.6" };
        let mut c = dsh();
        if confined {
            c.args(["-s", "workspace-write"]);
        }
        let mut child = c
            .arg("--")
            .arg(format!("setsid sleep {marker} & sleep {marker}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let sleeps = || sleeps_naming(marker);
        let Some(pids) = poll_until(Duration::from_secs(5), || {
            let p = sleeps();
            (p.len() == 2).then_some(p)
        }) else {
            let _ = child.kill();
            panic!("the sleeps never started");
        };
        // One of them leads a session of its own.
        let sids: Vec<i32> = pids
            .iter()
            .map(|p| {
                nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(*p)))
                    .unwrap()
                    .as_raw()
            })
            .collect();
        assert!(
            sids.contains(&pids[0]) || sids.contains(&pids[1]),
            "{pids:?} {sids:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_all_gone(&pids);
    }
}
