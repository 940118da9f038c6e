//! `denials`: exactly what a confined run was refused, and nothing it was
//! not. The gate's refusals are known exactly; a refused write is read
//! from the output of a failed run, only where the sandbox is why.

use crate::support::{Test, Tier, tiers};
use serde_json::{Value, json};
use std::path::Path;

struct Dirs {
    _root: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
    tmp: std::path::PathBuf,
    home: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    // Real paths: the facts name them so.
    let base = std::fs::canonicalize(root.path()).unwrap();
    let [ws, outside, tmp, home] = ["ws", "outside", "tmp", "home"].map(|n| base.join(n));
    for d in [&ws, &outside, &tmp, &home] {
        std::fs::create_dir(d).unwrap();
    }
    Dirs {
        _root: root,
        ws,
        outside,
        tmp,
        home,
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `--json` run of `script` in `d.ws`, `$TMPDIR` = `d.tmp`, `$HOME` = `d.home`.
fn confined(tier: Tier, d: &Dirs, args: &[&str], script: &str) -> (Value, i32) {
    let out = Test::in_tier(tier)
        .env("TMPDIR", &d.tmp)
        .env("HOME", &d.home)
        .args(["--json", "-C", p(&d.ws)])
        .args(args)
        .args(["--", script])
        .run();
    (out.json(), out.status)
}

#[test]
fn words_that_look_like_a_denial_are_not_one() {
    for tier in tiers() {
        let d = dirs();
        // The errno this tier's sandbox cannot give for /etc/x.
        let impossible = match tier {
            Tier::MountNamespace => "Permission denied",
            Tier::Gate => "Read-only file system",
        };
        for (mode, message) in [
            ("read-only", "Permission denied".to_string()),
            (
                "read-only",
                format!("cp: cannot create '/etc/x': {impossible}"),
            ),
            (
                "workspace-write",
                "cp: cannot create './x': Permission denied".to_string(),
            ),
            ("workspace-write", format!("tar: /etc/x: {impossible}")),
        ] {
            let (v, _) = confined(
                tier,
                &d,
                &["-s", mode],
                &format!("echo \"{message}\" >&2; exit 1"),
            );
            assert_eq!(
                (
                    &v["exit_code"],
                    &v["sandbox"]["denied"],
                    &v["sandbox"]["denials"]
                ),
                (&json!(1), &json!(false), &json!([])),
                "{tier:?} {mode}: {v}"
            );
        }
    }
}

#[test]
fn a_refused_write_outside_names_the_path() {
    for tier in tiers() {
        let d = dirs();
        let target = d.outside.join("x");
        let (v, status) = confined(
            tier,
            &d,
            &["-s", "workspace-write"],
            &format!("touch {}", p(&target)),
        );
        assert_eq!(status, 1, "{tier:?}: {v}");
        let errno = match tier {
            Tier::MountNamespace => "EROFS",
            Tier::Gate => "EACCES",
        };
        assert_eq!(
            v["sandbox"]["denials"],
            json!([{"op": "write", "path": p(&target), "errno": errno, "source": "output",
                    "network": false,
                    "hint": format!("--writable-root {}", p(target.parent().unwrap())),
                    "count": 1}]),
            "{tier:?}"
        );
        assert_eq!(v["sandbox"]["denied"], json!(true));
        assert_eq!(v["sandbox"]["network_denied"], json!(false));
        assert!(!target.exists());
    }
}

#[test]
fn a_write_the_caller_could_not_make_either_is_no_denial() {
    // A file under a directory that does not exist: touch fails unconfined
    // too, with ENOENT, and that is no refusal of the sandbox.
    let d = dirs();
    let (v, status) = confined(
        Tier::MountNamespace,
        &d,
        &["-s", "read-only"],
        &format!("touch {}/no/such/dir/f", p(&d.outside)),
    );
    assert_eq!(status, 1);
    assert_eq!(v["sandbox"]["denied"], json!(false), "{v}");
}

#[test]
fn a_refused_network_socket_is_a_network_denial_not_a_write() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for tier in tiers() {
        let d = dirs();
        let script = format!(
            "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)'"
        );
        let (v, status) = confined(tier, &d, &["-s", "read-only", "--network", "deny"], &script);
        assert_eq!(status, 1, "{tier:?}: {v}");
        assert_eq!(
            v["sandbox"]["denials"],
            json!([{"op": "socket", "path": "AF_INET", "errno": "EACCES", "source": "gate",
                    "network": true,
                    "hint": "--network loopback (local servers) or --network allow=HOST",
                    "count": 1}]),
            "{tier:?}"
        );
        assert_eq!(v["sandbox"]["network_denied"], json!(true));
    }
}

#[test]
fn the_text_names_each_denial_and_counts_repeats() {
    let d = dirs();
    let script = "python3 -c '
import socket
for _ in range(3):
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    except OSError:
        pass
'";
    Test::new()
        .env("TMPDIR", &d.tmp)
        .args([
            "-C",
            p(&d.ws),
            "-s",
            "workspace-write",
            "--network",
            "deny",
            "--",
            script,
        ])
        .run()
        .expect_stdout(
            "[sandbox: network denied: socket(AF_INET6) (3 times); \
             try --network loopback (local servers) or --network allow=HOST]\n[exit code: 0]\n",
        );
}

/// A local package, packed: `npm install` of it needs no registry.
fn local_package(d: &Dirs) -> std::path::PathBuf {
    let pkg = d.outside.join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"dsh-local","version":"1.0.0"}"#,
    )
    .unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 1;\n").unwrap();
    let packed = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&d.outside)
        .current_dir(&pkg)
        .env("HOME", &d.home)
        .env("npm_config_cache", d.outside.join("pack-cache"))
        .output()
        .unwrap();
    assert!(packed.status.success(), "{packed:?}");
    std::fs::write(
        d.ws.join("package.json"),
        r#"{"name":"ws","version":"1.0.0"}"#,
    )
    .unwrap();
    d.outside.join("dsh-local-1.0.0.tgz")
}

#[test]
fn npm_install_names_its_cache_and_allow_caches_lets_it_work() {
    if std::process::Command::new("npm")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: npm is not installed");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let tgz = local_package(&d);
        let install = format!(
            "npm install --offline --no-audit --no-fund --loglevel=error --update-notifier=false {}",
            p(&tgz)
        );
        let (v, status) = confined(tier, &d, &["-s", "workspace-write"], &install);
        assert_ne!(status, 0, "{tier:?}: {v}");
        let npm = d.home.join(".npm");
        let denial = &v["sandbox"]["denials"][0];
        assert!(
            denial["path"]
                .as_str()
                .is_some_and(|s| s.starts_with(p(&npm))),
            "{tier:?}: {v}"
        );
        assert_eq!(
            denial["hint"],
            json!(format!("--allow-caches (or --writable-root {})", p(&npm))),
            "{tier:?}"
        );
        // The same, with the cache granted (made for the run: npm is on
        // $PATH), and with it named as a writable root.
        let (v, status) = confined(
            tier,
            &d,
            &["-s", "workspace-write", "--allow-caches"],
            &install,
        );
        assert_eq!(status, 0, "{tier:?}: {v}");
        assert_eq!(v["sandbox"]["denied"], json!(false));
        assert!(d.ws.join("node_modules/dsh-local/index.js").is_file());
        std::fs::remove_dir_all(d.ws.join("node_modules")).unwrap();
        let (v, status) = confined(
            tier,
            &d,
            &["-s", "workspace-write", "--writable-root", p(&npm)],
            &install,
        );
        assert_eq!(status, 0, "{tier:?}: {v}");
        assert!(d.ws.join("node_modules/dsh-local/index.js").is_file());
    }
}

#[test]
fn a_flood_of_denials_hides_no_network_refusal_and_a_name_starts_no_line() {
    let d = dirs();
    // 101 refused connects to distinct abstract names (one with a newline
    // and a fake marker in it), then a refused network socket.
    let script = r#"python3 -c '
import socket
for i in range(101):
    s = socket.socket(socket.AF_UNIX)
    name = "\0x]\n[exit code: 0]" if i == 0 else "\0dsh-exec-flood-%d" % i
    try:
        s.connect(name)
    except OSError:
        pass
try:
    socket.socket(socket.AF_INET)
except OSError:
    pass
'"#;
    let args = ["-s", "workspace-write", "--network", "deny"];
    let (v, _) = confined(Tier::MountNamespace, &d, &args, script);
    assert_eq!(v["sandbox"]["network_denied"], json!(true), "{v}");
    assert_eq!(v["sandbox"]["denials"].as_array().unwrap().len(), 100);
    assert_eq!(v["sandbox"]["denials_more"], json!(2));
    let out = Test::new()
        .env("TMPDIR", &d.tmp)
        .args(["-C", p(&d.ws)])
        .args(args)
        .args(["--", script])
        .run();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "[sandbox: denied connect to @x]\\x0a[exit code: 0]]",
            "[sandbox: denied connect to @dsh-exec-flood-1]",
            "[sandbox: denied connect to @dsh-exec-flood-2]",
            "[sandbox: 99 more denied; --json lists 97 of them]",
            "[exit code: 0]",
        ],
        "{}",
        out.stdout
    );
}

#[test]
fn a_refused_write_is_resolved_as_the_command_resolved_it() {
    // Through a dangling symlink, through /proc/self/cwd, through a
    // symlinked directory: the denial names the file outside, as the
    // command's kernel reached it, not the path as dsh-exec would take it.
    for tier in tiers() {
        let d = dirs();
        let out = |f: &str| p(&d.outside.join(f)).to_string();
        let errno = match tier {
            Tier::MountNamespace => "EROFS",
            Tier::Gate => "EACCES",
        };
        for (script, target) in [
            (
                format!("ln -s {} link && echo x > link", out("f")),
                out("f"),
            ),
            ("echo x > /proc/self/cwd/../outside/g".to_string(), out("g")),
            (
                format!("ln -s {} dir && touch dir/h", p(&d.outside)),
                out("h"),
            ),
        ] {
            let (v, _) = confined(
                tier,
                &d,
                &["-s", "workspace-write", "--no-temp-write"],
                &format!("{script}; exit 1"),
            );
            assert_eq!(
                v["sandbox"]["denials"],
                json!([{"op": "write", "path": target, "errno": errno, "source": "output",
                        "network": false, "hint": format!("--writable-root {}", p(&d.outside)),
                        "count": 1}]),
                "{tier:?} {script}: {v}"
            );
            let _ = std::fs::remove_file(d.ws.join("link"));
            let _ = std::fs::remove_file(d.ws.join("dir"));
        }
        // After `cd` out of the workdir a relative path cannot be placed;
        // under the read-only tree the refusal is still told, as written.
        let (v, _) = confined(
            tier,
            &d,
            &["-s", "workspace-write", "--no-temp-write"],
            "cd ../outside && touch j; exit 1",
        );
        let want = match tier {
            Tier::MountNamespace => json!([{"op": "write", "path": "j", "errno": "EROFS",
                "source": "output", "network": false, "hint": null, "count": 1}]),
            Tier::Gate => json!([]),
        };
        assert_eq!(v["sandbox"]["denials"], want, "{tier:?}: {v}");
    }
}

#[test]
fn sqlites_refusal_to_open_a_database_outside_is_a_denial() {
    let have = std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipped: sqlite3 is not installed");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let db = d.outside.join("x.db");
        let errno = match tier {
            Tier::MountNamespace => "EROFS",
            Tier::Gate => "EACCES",
        };
        // The second fails for a missing directory in the workspace: no
        // denial.
        let (v, _) = confined(
            tier,
            &d,
            &["-s", "workspace-write", "--no-temp-write"],
            &format!(
                "sqlite3 {} 'create table t(x)'; sqlite3 nodir/y.db 'create table t(x)'",
                p(&db)
            ),
        );
        assert_eq!(
            v["sandbox"]["denials"],
            json!([{"op": "write", "path": p(&db), "errno": errno, "source": "output",
                    "network": false, "hint": format!("--writable-root {}", p(&d.outside)),
                    "count": 1}]),
            "{tier:?}: {v}"
        );
    }
}

#[test]
fn a_metadata_refusal_this_user_would_meet_unconfined_too_is_no_denial() {
    // Mode to itself: a no-op, even if it were let through.
    let script = "chmod $(stat -c %a /etc/hostname) /etc/hostname";
    let denials_of = |out: &std::process::Output| -> Value {
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["exit_code"], 1, "{v}");
        v["sandbox"]["denials"].clone()
    };
    let args = |ws: &Path| -> Vec<String> {
        [
            "--json",
            "-s",
            "workspace-write",
            "--no-temp-write",
            "-C",
            ws.to_str().unwrap(),
            "--",
            script,
        ]
        .map(String::from)
        .to_vec()
    };
    let ws = tempfile::tempdir().unwrap();
    let out = crate::support::dsh()
        .args(args(ws.path()))
        .output()
        .unwrap();
    if nix::unistd::geteuid().is_root() {
        // Root could change /etc/hostname unconfined: a denial, with the
        // flag that allows it (the gate's EPERM, or under the read-only
        // tree the EROFS read from the output).
        let d = denials_of(&out);
        assert_eq!(
            (&d[0]["op"], &d[0]["path"], &d[0]["hint"]),
            (
                &json!("chmod"),
                &json!("/etc/hostname"),
                &json!("--writable-root /etc")
            ),
            "{d}"
        );
    }
    // Anyone else could not (not the owner): EPERM all the same, and no
    // denial.
    let Some(user) = crate::support::Unprivileged::new() else {
        return;
    };
    let ws = user.dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    nix::unistd::chown(&ws, Some(65534.into()), Some(65534.into())).unwrap();
    let args = args(&ws);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = user.run(&args);
    assert_eq!(denials_of(&out), json!([]));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sandbox"]["denied"], false);
    assert!(
        v["stderr"]["text"]
            .as_str()
            .unwrap()
            .ends_with("Operation not permitted\n"),
        "{v}"
    );
}

#[test]
fn a_protected_git_config_named_after_a_cd_is_told_as_written() {
    // Under the read-only tree `.git/config` of a repository is a mount
    // point: git's rename over it is EBUSY, and after `cd super` the
    // message names it relative to `super`.
    if !crate::support::has_sys_admin() {
        eprintln!("skipped: the read-only tree needs CAP_SYS_ADMIN");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .env("GIT_CONFIG_GLOBAL", ws.path().join("none"))
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert!(ok.status.success(), "{ok:?}");
    };
    git(&["init", "-q", "super"]);
    let out = crate::support::dsh()
        .args(["--json", "-s", "workspace-write", "--no-temp-write", "-C"])
        .arg(ws.path())
        .args(["--", "cd super && git config --local x.y z"])
        .env("GIT_CONFIG_GLOBAL", ws.path().join("none"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["sandbox"]["denials"],
        json!([{"op": "write", "path": ".git/config", "errno": "EBUSY", "source": "output",
                "network": false, "hint": null, "count": 1}]),
        "{v}"
    );
    assert_eq!(v["sandbox"]["denied"], true);
}
