//! Transactions (`--transaction`): the command's writes land in overlay
//! upper layers; the result lists every change; `commit`, `discard` and
//! `diff` decide afterwards. Each test needs a mount namespace (root):
//! without one it checks that the run fails closed, or skips, saying so.
use crate::support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A workspace and a home of its own, whose state directory
/// (`HOME/.local/state/dsh-exec`) holds the transactions; both removed
/// with the test.
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    /// `HOME/.local/state`.
    state: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&home).unwrap();
    Dirs {
        _root: root,
        ws,
        state: home.join(".local/state"),
        home,
    }
}

impl Dirs {
    /// `dsh-exec ARGS` in the workspace with the private state directory.
    fn dsh(&self, args: &[&str]) -> Outcome {
        Test::new()
            .env("HOME", &self.home)
            .arg("-C")
            .arg(&self.ws)
            .args(args)
            .run()
    }

    /// A subcommand (`commit`, `discard`, `diff`, `transaction`) with the
    /// private state directory.
    fn sub(&self, args: &[&str]) -> Outcome {
        Test::new().env("HOME", &self.home).args(args).run()
    }

    /// Runs `script` as a transaction; its JSON result.
    fn transact(&self, script: &str, extra: &[&str]) -> Value {
        let mut args = vec!["--transaction", "--json"];
        args.extend_from_slice(extra);
        args.extend(["--", script]);
        let out = self.dsh(&args);
        let v = out.json();
        assert!(
            v.get("transaction").is_some(),
            "{}\n{}",
            out.stdout,
            out.stderr
        );
        v
    }

    fn transactions(&self) -> Vec<String> {
        std::fs::read_dir(self.state.join("dsh-exec/transactions"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn overlays_here() -> bool {
    if !has_sys_admin() {
        eprintln!("skipped: transactions need a mount namespace (CAP_SYS_ADMIN)");
        return false;
    }
    true
}

/// Every entry under `root`: its type, mode, owner, size, mtime (files
/// and symlinks), bytes or target, and extended attributes.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let m = std::fs::metadata(root).unwrap();
    out.insert(
        PathBuf::from("."),
        format!("root mode {:o} owner {}:{}", m.mode(), m.uid(), m.gid()),
    );
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let what = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if !m.is_file() {
                format!("special {:o}", m.mode() & 0o170000)
            } else {
                format!("file {:?}", std::fs::read(&p).unwrap())
            };
            let what = format!("{what} mtime {}.{}", m.mtime(), m.mtime_nsec());
            let xattrs = Command::new("python3")
                .args([
                    "-c",
                    "import os,sys; p=sys.argv[1]; print(sorted((n, os.getxattr(p, n, \
                     follow_symlinks=False)) for n in os.listxattr(p, follow_symlinks=False)))",
                ])
                .arg(&p)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            out.insert(
                rel,
                format!(
                    "{what} mode {:o} owner {}:{} nlink {} xattrs {xattrs}",
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    if m.is_dir() { 0 } else { m.nlink() }
                ),
            );
        }
    }
    out
}

/// The `changes` of a result as (path relative to `ws`, change, kind,
/// what) rows.
fn rows(v: &Value, ws: &Path) -> Vec<(String, String, String, String)> {
    v["transaction"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let path = c["path"].as_str().unwrap();
            let rel = Path::new(path).strip_prefix(ws).unwrap();
            let what: Vec<&str> = c
                .get("what")
                .and_then(Value::as_array)
                .map(|w| w.iter().map(|x| x.as_str().unwrap()).collect())
                .unwrap_or_default();
            (
                rel.display().to_string(),
                c["change"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
                what.join(","),
            )
        })
        .collect()
}

/// The `refused` of a `commit --json` report as `PATH (REASON)` lines,
/// paths relative to `ws`.
fn refusals(report: &Value, ws: &Path) -> Vec<String> {
    report["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let path = Path::new(r["path"].as_str().unwrap());
            let rel = path.strip_prefix(ws).unwrap();
            format!("{} ({})", rel.display(), r["reason"].as_str().unwrap())
        })
        .collect()
}

fn row(p: &str, c: &str, k: &str, w: &str) -> (String, String, String, String) {
    (p.into(), c.into(), k.into(), w.into())
}

/// A workspace with one of everything the tests change.
fn seed(ws: &Path) {
    sh(
        ws,
        "printf 'one\\ntwo\\n' > text && echo gone > removed && mkdir -p tree/sub && \
         echo a > tree/a && echo b > tree/sub/b && echo m > chmodded && chmod 644 chmodded && \
         echo t > touched && echo x > xattred && echo same > recreated && \
         mkdir renamed && echo r > renamed/r && ln -s text link && echo h > hard",
    );
    // Times in the past, so that a change made now shows.
    sh(ws, "find . -exec touch -h -d '2020-01-01 00:00:00' {} +");
}

#[test]
fn each_kind_of_change_is_reported_exactly_and_the_real_tree_is_untouched() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    seed(&d.ws);
    let before = tree(&d.ws);
    let v = d.transact(
        "printf 'one\\nTWO\\n' > text; rm removed; rm -r tree; mkdir tree; echo new > tree/new; \
         chmod 600 chmodded; touch -d '2021-01-01 00:00:00' touched; \
         python3 -c \"import os; os.setxattr('xattred', 'user.note', b'hi')\"; \
         rm recreated; echo same > recreated; mv renamed moved; ln -sfn tree link; \
         mkfifo pipe; ln hard hard2",
        &[],
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(
        rows(&v, &d.ws),
        vec![
            row("chmodded", "modified", "file", "mode"),
            row("hard", "modified", "file", "links"),
            row("hard2", "created", "file", ""),
            row("link", "modified", "symlink", "target,times"),
            row("moved", "created", "dir", ""),
            row("moved/r", "created", "file", ""),
            row("pipe", "created", "special", ""),
            row("recreated", "modified", "file", "times"),
            row("removed", "deleted", "file", ""),
            row("renamed", "deleted", "dir", ""),
            row("text", "modified", "file", "content,times"),
            row("touched", "modified", "file", "times"),
            row("tree/a", "deleted", "file", ""),
            row("tree/new", "created", "file", ""),
            row("tree/sub", "deleted", "dir", ""),
            row("xattred", "modified", "file", "xattrs"),
        ]
    );
    let t = &v["transaction"];
    assert_eq!(t["state"], "pending");
    assert_eq!(
        (
            &t["created"],
            &t["modified"],
            &t["deleted"],
            &t["changes_more"]
        ),
        (&json!(5), &json!(7), &json!(4), &json!(0))
    );
    assert_eq!(tree(&d.ws), before, "the real tree changed");
    assert_matches_schema("run-result", &v);
}

#[test]
fn the_text_result_ends_with_the_changes_line_before_the_marker() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(&d.ws, "echo a > a && echo b > b");
    let out = d.dsh(&[
        "--transaction",
        "--",
        "echo c > c; echo A > a; rm b; echo done",
    ]);
    let ids = d.transactions();
    assert_eq!(ids.len(), 1);
    let id = &ids[0];
    out.expect_status(0).expect_stdout(&format!(
        "done\n[changes: 1 created, 1 modified, 1 deleted (transaction {id}: dsh-exec commit \
         {id} | discard {id})]\n[exit code: 0]\n"
    ));
    // What parse-status reads is still the marker.
    Test::new()
        .arg("parse-status")
        .stdin(out.stdout.clone())
        .run()
        .expect_status(0)
        .expect_stdout("{\"exit_code\":0,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n");
}

#[test]
fn discard_leaves_the_real_tree_as_it_was_and_removes_the_layers() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    seed(&d.ws);
    let before = tree(&d.ws);
    let v = d.transact("rm -rf ./* && echo x > only && chmod 700 .", &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    assert_eq!(tree(&d.ws), before);
    d.sub(&["discard", &id])
        .expect_status(0)
        .expect_stdout(&format!("[discarded transaction {id}]\n"));
    assert_eq!(tree(&d.ws), before);
    assert_eq!(d.transactions(), Vec::<String>::new());
    // Deciding it again is an error with its code.
    let again = d.sub(&["commit", &id]);
    again.expect_status(125);
    assert_eq!(
        again.stderr,
        format!("dsh-exec: error: transaction {id}: no such transaction (TRANSACTION_FAILED)\n")
    );
}

#[test]
fn commit_gives_the_tree_an_unconfined_run_would_have_made() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    seed(&d.ws);
    let twin = d.ws.parent().unwrap().join("twin");
    sh(d.ws.parent().unwrap(), "cp -a ws twin");
    let script = "printf 'one\\nTWO\\n' > text; rm removed; rm -r tree; mkdir tree; \
                  echo new > tree/new; chmod 600 chmodded; touch -d '2021-01-01 00:00:00' touched; \
                  python3 -c \"import os; os.setxattr('xattred', 'user.note', b'hi')\"; \
                  mv renamed moved; ln -sfn tree link; mkfifo pipe; ln hard hard2; \
                  mkdir -p deep/er && echo z > deep/er/z && chmod 750 deep; \
                  mkfifo -m 0666 pipe2; chmod 0750 .; \
                  find . -exec touch -h -d '2022-02-02 00:00:00' {} +";
    sh(&twin, script);
    let v = d.transact(script, &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id, "--json"]);
    out.expect_status(0);
    let report = out.json();
    assert_eq!(report["refused"], json!([]), "{report}");
    assert_eq!(report["state"], "committed");
    assert_eq!(tree(&d.ws), tree(&twin));
    assert_eq!(d.transactions(), Vec::<String>::new());
}

#[test]
fn a_path_changed_in_the_real_tree_meanwhile_is_refused_and_named() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(&d.ws, "echo a > a && echo b > b");
    let v = d.transact("echo A > a; echo B > b; echo c > c", &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    // Someone else edits `b` and makes `c` after the run started.
    sh(&d.ws, "echo theirs > b && echo theirs > c");
    let atomic = d.sub(&["commit", &id, "--atomic"]);
    let ws = d.ws.display();
    atomic.expect_status(1).expect_stdout(&format!(
        "refused: {ws}/b (changed in the real tree after the transaction started)\nrefused: \
         {ws}/c (changed in the real tree after the transaction started)\n[transaction {id} not \
         committed (--atomic): 2 refused]\n"
    ));
    assert_eq!(std::fs::read_to_string(d.ws.join("a")).unwrap(), "a\n");
    let partial = d.sub(&["commit", &id]);
    partial.expect_status(1).expect_stdout(&format!(
        "refused: {ws}/b (changed in the real tree after the transaction started)\nrefused: \
         {ws}/c (changed in the real tree after the transaction started)\n[committed transaction \
         {id}: 1 applied, 2 refused; the refused stay pending: diff, discard, or commit --force \
         for conflicts]\n"
    ));
    for (f, text) in [("a", "A\n"), ("b", "theirs\n"), ("c", "theirs\n")] {
        assert_eq!(std::fs::read_to_string(d.ws.join(f)).unwrap(), text, "{f}");
    }
}

fn have_git() -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: git is not installed");
    }
    ok
}

#[test]
fn a_planted_hook_or_command_running_config_never_lands() {
    if !overlays_here() || !have_git() {
        return;
    }
    let d = dirs();
    let ran = d.ws.parent().unwrap().join("ran");
    sh(
        &d.ws,
        "git init -q . && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m init",
    );
    let plant = format!(
        "printf '#!/bin/sh\\ntouch {r}\\n' > .git/hooks/post-checkout; chmod +x \
         .git/hooks/post-checkout; git config core.fsmonitor 'touch {r}'; \
         mkdir -p inner && cd inner && git init -q . && git config core.fsmonitor 'touch {r}'; \
         cd ..; echo ok > file",
        r = ran.display()
    );
    let v = d.transact(&plant, &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id, "--json"]);
    out.expect_status(1);
    let refused = refusals(&out.json(), &d.ws);
    assert_eq!(
        refused,
        vec![
            ".git/config (protected path)".to_string(),
            ".git/hooks/post-checkout (protected path)".into(),
            "inner/.git/config (config key core.fsmonitor)".into(),
        ]
    );
    assert_eq!(std::fs::read_to_string(d.ws.join("file")).unwrap(), "ok\n");
    // Judged before anything was written: the planted config never lay in
    // the real tree, not even for the length of the commit.
    assert!(!d.ws.join("inner/.git/config").exists());
    // What a user runs next, unconfined, runs nothing planted.
    sh(
        &d.ws,
        "git status >/dev/null 2>&1; git checkout -q -b x 2>/dev/null; cd inner 2>/dev/null && \
         git status >/dev/null 2>&1; true",
    );
    assert!(!ran.exists(), "a planted command ran");
}

#[test]
fn on_exit_commit_and_discard_decide_without_a_second_call() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    let v = d.transact("echo x > kept", &["--on-exit", "commit"]);
    assert_eq!(v["transaction"]["state"], "committed");
    assert_eq!(
        v["transaction"]["commit"],
        json!({"applied": 1, "refused": [], "state": "committed"})
    );
    assert_eq!(std::fs::read_to_string(d.ws.join("kept")).unwrap(), "x\n");
    let v = d.transact("echo y > thrown", &["--on-exit", "discard"]);
    assert_eq!(v["transaction"]["state"], "discarded");
    assert!(!d.ws.join("thrown").exists());
    assert_eq!(d.transactions(), Vec::<String>::new());
    // Half a piece of work is not applied: a failed command's transaction
    // stays pending, and says why.
    let v = d.transact("echo w > w; exit 3", &["--on-exit", "commit"]);
    assert_eq!(v["transaction"]["state"], "pending");
    assert_eq!(
        v["transaction"]["error"],
        "not committed: the command exited with 3"
    );
    assert!(!d.ws.join("w").exists());
    let v = d.transact(
        "echo w > w; sleep 10",
        &["--on-exit", "commit", "-t", "300ms"],
    );
    assert_eq!(
        v["transaction"]["error"],
        "not committed: the command timed out"
    );
    assert!(!d.ws.join("w").exists());
    assert_eq!(d.transactions().len(), 2);
    // One left without its record by a dsh-exec killed as it started, an
    // hour ago.
    let unrecorded = d.state.join("dsh-exec/transactions/tunrecord1");
    std::fs::create_dir_all(unrecorded.join("0/upper")).unwrap();
    sh(
        &d.state,
        &format!("touch -d '1 hour ago' {}", unrecorded.display()),
    );
    d.sub(&["transaction", "prune", "--older-than", "0s"])
        .expect_status(0)
        .expect_stdout("pruned 3 transactions\n");
    assert_eq!(d.transactions(), Vec::<String>::new());
    let out = d.dsh(&["--transaction", "--on-exit", "discard", "--", "echo z > z"]);
    let line = out.stdout.lines().rev().nth(1).unwrap();
    assert!(
        line.starts_with("[changes: 1 created, 0 modified, 0 deleted (transaction t")
            && line.ends_with(" discarded)]"),
        "{line}"
    );
}

#[test]
fn diff_shows_text_changes_as_a_unified_diff_and_names_the_rest() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(
        &d.ws,
        "printf 'a\\nb\\nc\\n' > t && printf '\\0\\1' > bin && mkdir dir",
    );
    let v = d.transact(
        "printf 'a\\nB\\nc\\n' > t; printf '\\0\\2\\3' > bin; rmdir dir",
        &[],
    );
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let ws = d.ws.display();
    d.sub(&["diff", &id]).expect_status(0).expect_stdout(&format!(
        "Binary file {ws}/bin: 2 bytes -> 3 bytes\ndirectory deleted: {ws}/dir\n--- a{ws}/t\n+++ \
         b{ws}/t\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    ));
    let t = d.ws.join("t");
    d.sub(&["diff", &id, t.to_str().unwrap()])
        .expect_status(0)
        .expect_stdout(&format!(
            "--- a{ws}/t\n+++ b{ws}/t\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        ));
    let list = d.sub(&["transaction", "list", "--json"]);
    list.expect_status(0);
    assert_eq!(list.json()[0]["id"], json!(id));
    assert_eq!(list.json()[0]["modified"], json!(2));
}

#[test]
fn a_transaction_without_a_mount_namespace_fails_closed_and_runs_nothing() {
    let d = dirs();
    let marker = d.ws.join("marker");
    let script = format!("touch {}", marker.display());
    let out = if has_sys_admin() {
        Test::in_tier(Tier::Gate)
            .env("HOME", &d.home)
            .arg("-C")
            .arg(&d.ws)
            .args(["--transaction", "--", &script])
            .run()
    } else {
        d.dsh(&["--transaction", "--", &script])
    };
    out.expect_status(125).expect_stdout("");
    assert_eq!(
        out.stderr,
        "dsh-exec: error: sandbox unavailable: --transaction needs a mount namespace and a \
         read-only mount tree (root, or CAP_SYS_ADMIN, and Linux 5.12): the command would \
         otherwise write the real tree (SANDBOX_UNAVAILABLE)\n"
    );
    assert!(!marker.exists());
    assert_eq!(d.transactions(), Vec::<String>::new());
}

#[test]
fn a_transaction_asks_for_workspace_write_and_on_exit_for_a_transaction() {
    let d = dirs();
    let out = d.dsh(&["--transaction", "--sandbox", "read-only", "--", "true"]);
    out.expect_status(125);
    assert_eq!(
        out.stderr,
        "dsh-exec: error: --transaction needs --sandbox workspace-write (the writable roots it \
         runs on overlays), not read-only (USAGE)\n"
    );
    let out = d.dsh(&["--on-exit", "commit", "--", "true"]);
    out.expect_status(125);
    assert_eq!(
        out.stderr,
        "dsh-exec: error: --on-exit needs --transaction (USAGE)\n"
    );
    let out = d.dsh(&["--transaction", "--on-exit", "later", "--", "true"]);
    out.expect_status(125);
    assert!(
        out.stderr
            .contains("invalid --on-exit value 'later' (commit, discard or keep)"),
        "{}",
        out.stderr
    );
    let out = d.sub(&["commit", "../x"]);
    out.expect_status(125);
    assert_eq!(
        out.stderr,
        "dsh-exec: error: transaction ../x: not a transaction id (t followed by [a-z0-9]) \
         (TRANSACTION_FAILED)\n"
    );
}

#[test]
fn explain_says_whether_a_transaction_can_run_and_over_which_roots() {
    let d = dirs();
    let out = Test::new()
        .env("HOME", &d.home)
        .args(["explain", "--json", "-C"])
        .arg(&d.ws)
        .args(["--transaction", "--on-exit", "discard", "--", "true"])
        .run();
    out.expect_status(0);
    let t = &out.json()["sandbox"]["transaction"];
    assert_eq!(t["asked"], true);
    assert_eq!(t["on_exit"], json!({"value": "discard", "origin": "flag"}));
    let ws = std::fs::canonicalize(&d.ws).unwrap();
    if has_sys_admin() {
        assert_eq!(t["available"], true);
        assert_eq!(
            t["detail"],
            format!(
                "overlays over {} (upper layers in {}/dsh-exec/transactions); the temp dir, \
                 caches and /dev/shm are written directly",
                ws.display(),
                d.state.display()
            )
        );
    } else {
        assert_eq!(t["available"], false);
    }
}

#[test]
fn a_protected_directory_replaced_by_a_file_is_refused_whole() {
    if !overlays_here() || !have_git() {
        return;
    }
    let d = dirs();
    sh(&d.ws, "git init -q . && echo keep > kept");
    let before = tree(&d.ws.join(".git"));
    let v = d.transact(
        "rm -rf .git; printf 'gitdir: /elsewhere\\n' > .git; echo x > x",
        &[],
    );
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id]);
    let ws = d.ws.display();
    out.expect_status(1).expect_stdout(&format!(
        "refused: {ws}/.git (protected path)\n[committed transaction {id}: 1 applied, 1 \
         refused; the refused stay pending: diff, discard, or commit --force for conflicts]\n"
    ));
    assert_eq!(tree(&d.ws.join(".git")), before);
    assert_eq!(std::fs::read_to_string(d.ws.join("x")).unwrap(), "x\n");
}

#[test]
fn the_roots_own_metadata_is_a_change_and_is_committed() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    std::fs::set_permissions(&d.ws, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let v = d.transact("chmod 0710 .", &[]);
    assert_eq!(rows(&v, &d.ws), vec![row("", "modified", "dir", "mode")]);
    assert_eq!(std::fs::metadata(&d.ws).unwrap().mode() & 0o7777, 0o755);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    d.sub(&["commit", &id]).expect_status(0);
    assert_eq!(std::fs::metadata(&d.ws).unwrap().mode() & 0o7777, 0o710);
}

#[test]
fn a_transaction_is_decided_once_and_not_while_it_runs_or_is_locked() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    let mut child = Command::new(bin());
    known_env(&mut child)
        .env("HOME", &d.home)
        .arg("-C")
        .arg(&d.ws)
        .args(["--transaction", "--", "echo a > a; sleep 30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    let id = poll_until(std::time::Duration::from_secs(10), || {
        let ids = d.transactions();
        let id = ids.first()?.clone();
        let meta = d
            .state
            .join("dsh-exec/transactions")
            .join(&id)
            .join("meta.json");
        meta.exists().then_some(id)
    })
    .expect("the transaction's record");
    let busy = d.sub(&["commit", &id]);
    busy.expect_status(125);
    assert_eq!(
        busy.stderr,
        format!("dsh-exec: error: transaction {id}: its run has not ended (TRANSACTION_FAILED)\n")
    );
    let list = d.sub(&["transaction", "list", "--json"]);
    assert_eq!(list.json()[0]["state"], "running");
    // dsh-exec killed: the run is lost, and can only be thrown away.
    child.kill().unwrap();
    child.wait().unwrap();
    let list = d.sub(&["transaction", "list", "--json"]);
    assert_eq!(list.json()[0]["state"], "lost");
    let lost = d.sub(&["commit", &id]);
    assert_eq!(
        lost.stderr,
        format!(
            "dsh-exec: error: transaction {id}: its run was lost (its dsh-exec was killed): \
             discard it (TRANSACTION_FAILED)\n"
        )
    );
    assert!(!d.ws.join("a").exists());
    // A commit or discard in progress holds the transaction's lock.
    let v = d.transact("echo b > b", &[]);
    let second = v["transaction"]["id"].as_str().unwrap().to_string();
    let dir = d.state.join("dsh-exec/transactions").join(&second);
    let file = std::fs::File::open(&dir).unwrap();
    let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let locked = d.sub(&["commit", &second]);
    assert_eq!(
        locked.stderr,
        format!(
            "dsh-exec: error: transaction {second}: being committed or discarded by another \
             process (TRANSACTION_FAILED)\n"
        )
    );
    drop(held);
    d.sub(&["discard", &id]).expect_status(0);
    d.sub(&["commit", &second]).expect_status(0);
    assert_eq!(d.transactions(), Vec::<String>::new());
}

#[test]
fn a_new_repositorys_hook_is_refused_before_it_is_written() {
    if !overlays_here() || !have_git() {
        return;
    }
    let d = dirs();
    let v = d.transact(
        "mkdir -p sub && cd sub && git init -q . && printf '#!/bin/sh\\n' > .git/hooks/pre-commit \
         && chmod +x .git/hooks/pre-commit && printf 'not a hook\\n' > notes",
        &[],
    );
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id]);
    out.expect_status(1);
    assert!(
        out.stdout.starts_with(&format!(
            "refused: {}/sub/.git/hooks/pre-commit (hook pre-commit)\n",
            d.ws.display()
        )),
        "{}",
        out.stdout
    );
    assert!(!d.ws.join("sub/.git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(d.ws.join("sub/notes")).unwrap(),
        "not a hook\n"
    );
}

#[test]
fn an_edit_inside_a_removed_directory_is_a_conflict_and_the_refused_stay_pending() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(
        &d.ws,
        "mkdir -p data/sub && echo one > data/sub/one && echo b > b",
    );
    let v = d.transact("rm -rf data; echo B > b", &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    // The user edits a file deep inside the directory the run removed.
    sh(&d.ws, "echo edit >> data/sub/one");
    let ws = d.ws.display();
    d.sub(&["commit", &id])
        .expect_status(1)
        .expect_stdout(&format!(
            "refused: {ws}/data (changed in the real tree after the transaction started)\n\
         [committed transaction {id}: 1 applied, 1 refused; the refused stay pending: diff, \
         discard, or commit --force for conflicts]\n"
        ));
    assert_eq!(
        std::fs::read_to_string(d.ws.join("data/sub/one")).unwrap(),
        "one\nedit\n"
    );
    assert_eq!(std::fs::read_to_string(d.ws.join("b")).unwrap(), "B\n");
    // What was refused is still the transaction's, and only that.
    let list = d.sub(&["transaction", "list", "--json"]);
    assert_eq!(
        (
            &list.json()[0]["id"],
            &list.json()[0]["deleted"],
            &list.json()[0]["modified"]
        ),
        (&json!(id), &json!(1), &json!(0))
    );
    d.sub(&["diff", &id])
        .expect_status(0)
        .expect_stdout(&format!("directory deleted: {ws}/data\n"));
    // --force applies a conflicting change.
    let out = d.sub(&["commit", &id, "--force"]);
    out.expect_status(0);
    assert!(!d.ws.join("data").exists());
    assert_eq!(d.transactions(), Vec::<String>::new());
}

#[test]
fn a_transaction_over_the_home_fails_closed_and_says_why() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    std::fs::create_dir_all(d.state.join("dsh-exec")).unwrap();
    let marker = d.home.join("marker");
    let out = Test::new()
        .env("HOME", &d.home)
        .arg("-C")
        .arg(&d.home)
        .args([
            "--transaction",
            "--",
            &format!("touch {}", marker.display()),
        ])
        .run();
    out.expect_status(125).expect_stdout("");
    let state = std::fs::canonicalize(d.state.join("dsh-exec")).unwrap();
    let home = std::fs::canonicalize(&d.home).unwrap();
    assert_eq!(
        out.stderr,
        format!(
            "dsh-exec: error: sandbox unavailable: --transaction: the state directory {s} lies \
             inside the writable root {h}, where the transaction's upper layer cannot be kept; \
             set XDG_STATE_HOME elsewhere (SANDBOX_UNAVAILABLE)\n",
            s = state.display(),
            h = home.display()
        )
    );
    assert!(!marker.exists());
}

#[test]
fn git_pointers_and_configs_a_commit_would_bring_are_judged_before_they_are_written() {
    if !overlays_here() || !have_git() {
        return;
    }
    let d = dirs();
    let elsewhere = d.ws.parent().unwrap().join("elsewhere.git");
    let ran = d.ws.parent().unwrap().join("ran");
    let plant = format!(
        "git init -q --bare {e} && git -C {e} config core.fsmonitor 'touch {r}'; \
         mkdir p1 && printf 'gitdir: {e}\\n' > p1/.git; \
         git init -q p2 && mkdir -p c/objects c/refs && \
         printf '[core]\\n\\tfsmonitor = touch {r}\\n' > c/config && echo ../../c > p2/.git/commondir; \
         git init -q p3 && printf '[core]\\n\\tfsmonitor = touch {r}\\n' > cfg && \
         rm p3/.git/config && ln -s ../../cfg p3/.git/config; \
         git init -q p4 && ln -s /bin/true p4/.git/hooks/post-checkout; \
         git init -q p5 && git -C p5 config user.name someone; \
         git init -q p6 && ln -s {o} p6/.git/modules && \
         mkdir p7 && printf 'gitdir: ../p6/.git/modules/evil\n' > p7/.git",
        e = elsewhere.display(),
        r = ran.display(),
        o = d.ws.parent().unwrap().join("outside").display()
    );
    // A repository outside the root that a pointer could reach through a
    // symlink the commit brings.
    let outside = d.ws.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    sh(
        &outside,
        &format!(
            "git init -q --bare evil && git -C evil config core.fsmonitor 'touch {}'",
            ran.display()
        ),
    );
    let v = d.transact(&plant, &["--no-temp-write"]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id, "--json"]);
    out.expect_status(1);
    let refused = refusals(&out.json(), &d.ws);
    assert_eq!(
        refused,
        vec![
            "c/config (config key core.fsmonitor)".to_string(),
            "p1/.git (a .git file pointing outside the repository's modules/ and worktrees/)"
                .into(),
            "p2/.git/commondir (a commondir pointing elsewhere than the repository's own .git)"
                .into(),
            "p3/.git/config (a config that is not a file)".into(),
            "p4/.git/hooks/post-checkout (hook post-checkout)".into(),
            "p6/.git/modules (a symlink in a git directory (modules))".into(),
            "p7/.git (a .git file pointing outside the repository's modules/ and worktrees/)"
                .into(),
        ]
    );
    for never in ["c/config", "p1/.git", "p2/.git/commondir", "p3/.git/config"] {
        assert!(
            std::fs::symlink_metadata(d.ws.join(never)).is_err(),
            "{never} was written"
        );
    }
    // A plain-data key of a new repository lands.
    assert!(
        std::fs::read_to_string(d.ws.join("p5/.git/config"))
            .unwrap()
            .contains("name = someone")
    );
    sh(
        &d.ws,
        "for r in p1 p2 p3 p4 p5 p6 p7; do (cd $r && git status >/dev/null 2>&1); done; true",
    );
    assert!(!ran.exists(), "a planted command ran");
}

#[test]
fn a_directory_made_again_inside_a_removed_one_replaces_it_whole() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(
        &d.ws,
        "mkdir -p D/a D/b && echo old > D/a/old && echo k > D/b/k && echo t > D/top",
    );
    let v = d.transact("rm -rf D && mkdir -p D/a && echo new > D/a/new", &[]);
    assert_eq!(
        rows(&v, &d.ws),
        vec![
            row("D/a/new", "created", "file", ""),
            row("D/a/old", "deleted", "file", ""),
            row("D/b", "deleted", "dir", ""),
            row("D/top", "deleted", "file", ""),
        ]
    );
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    d.sub(&["commit", &id]).expect_status(0);
    let left: Vec<String> = std::fs::read_dir(d.ws.join("D/a"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["new".to_string()]);
    assert!(!d.ws.join("D/b").exists() && !d.ws.join("D/top").exists());
}

#[test]
fn a_partial_commit_under_a_replaced_directory_keeps_what_the_command_made() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(&d.ws, "mkdir D && echo x > D/x && echo y > D/y");
    let v = d.transact("rm -rf D && mkdir D && echo n > D/n", &[]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    sh(&d.ws, "echo edited >> D/y");
    d.sub(&["commit", &id]).expect_status(1);
    assert_eq!(std::fs::read_to_string(d.ws.join("D/n")).unwrap(), "n\n");
    assert_eq!(
        std::fs::read_to_string(d.ws.join("D/y")).unwrap(),
        "y\nedited\n"
    );
    // The refused removal is still pending, and the command's D/n is not
    // taken for a removal by the second commit.
    d.sub(&["commit", &id, "--force"]).expect_status(0);
    let mut left: Vec<String> = std::fs::read_dir(d.ws.join("D"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["n".to_string()]);
}

#[test]
fn metadata_only_changes_of_directories_symlinks_and_fifos_are_committed() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(
        &d.ws,
        "mkdir dir && ln -s dir link && mkfifo fifo && \
         python3 -c \"import os; os.setxattr('dir', 'user.a', b'1')\" && \
         touch -h -d '2012-01-01' dir link fifo",
    );
    let v = d.transact(
        "python3 -c \"import os; os.removexattr('dir', 'user.a')\"; \
         touch -h -d '2016-02-02' link fifo dir",
        &[],
    );
    assert_eq!(
        rows(&v, &d.ws),
        vec![
            row("dir", "modified", "dir", "xattrs"),
            row("fifo", "modified", "special", "times"),
            row("link", "modified", "symlink", "times"),
        ]
    );
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    d.sub(&["commit", &id]).expect_status(0);
    let t = tree(&d.ws);
    let when = "mtime 1454371200.0";
    for name in ["dir", "link", "fifo"] {
        assert!(
            t[Path::new(name)].contains(when),
            "{name}: {}",
            t[Path::new(name)]
        );
    }
    assert!(
        t[Path::new("dir")].ends_with("xattrs []"),
        "{}",
        t[Path::new("dir")]
    );
}

#[test]
fn a_symlink_into_a_repository_the_run_made_outside_the_root_is_refused() {
    if !overlays_here() || !have_git() {
        return;
    }
    let d = dirs();
    let tmp = d.ws.parent().unwrap().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let ran = d.ws.parent().unwrap().join("ran");
    // The temp dir is written directly, not through the transaction.
    let script = format!(
        "mkdir -p $TMPDIR/a/b && git init -q $TMPDIR/a/b/repo && \
         git -C $TMPDIR/a/b/repo config core.fsmonitor 'touch {}' && \
         ln -s $TMPDIR/a/b/repo lnk && echo ok > ok",
        ran.display()
    );
    let out = Test::new()
        .env("HOME", &d.home)
        .env("TMPDIR", &tmp)
        .arg("-C")
        .arg(&d.ws)
        .args(["--transaction", "--json", "--", &script])
        .run();
    let v = out.json();
    assert_eq!(v["exit_code"], 0, "{v}");
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    let out = d.sub(&["commit", &id, "--json"]);
    out.expect_status(1);
    let repo = std::fs::canonicalize(tmp.join("a/b/repo/.git")).unwrap();
    assert_eq!(
        refusals(&out.json(), &d.ws),
        vec![format!(
            "lnk (a symlink into a repository made during the run ({}))",
            repo.display()
        )]
    );
    assert!(std::fs::symlink_metadata(d.ws.join("lnk")).is_err());
    assert_eq!(std::fs::read_to_string(d.ws.join("ok")).unwrap(), "ok\n");
}

#[test]
fn the_roots_acl_and_xattrs_survive_a_commit() {
    if !overlays_here() {
        return;
    }
    let d = dirs();
    sh(
        &d.ws,
        "python3 -c \"import os; os.setxattr('.', 'user.keep', b'1')\"",
    );
    let v = d.transact("touch f", &[]);
    assert_eq!(rows(&v, &d.ws), vec![row("f", "created", "file", "")]);
    let id = v["transaction"]["id"].as_str().unwrap().to_string();
    d.sub(&["commit", &id]).expect_status(0);
    assert_eq!(tree(&d.ws)[Path::new(".")], "root mode 40755 owner 0:0");
    let kept = Command::new("python3")
        .args([
            "-c",
            "import os,sys; print(os.getxattr(sys.argv[1], 'user.keep'))",
        ])
        .arg(&d.ws)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&kept.stdout), "b'1'\n");
}
