//! The sandbox does not break real work: what a developer's or a CI step's
//! commands do inside the workspace works confined as it does unconfined,
//! in both tiers (with and without a mount namespace), while what had to
//! fail still fails. Root-only cases skip with the reason when not root.
use crate::support::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A workspace and a temp dir, both fresh.
struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    tmp: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let [ws, tmp, outside] = ["ws", "tmp", "outside"].map(|n| root.path().join(n));
    for d in [&ws, &tmp, &outside] {
        std::fs::create_dir(d).unwrap();
    }
    Dirs {
        _root: root,
        ws,
        tmp,
        outside,
    }
}

fn run_in(tier: Tier, d: &Dirs, mode: &str, script: &str) -> Outcome {
    Test::in_tier(tier)
        .env("TMPDIR", &d.tmp)
        .args(["-s", mode, "-C", p(&d.ws), "--", script])
        .run()
}

/// A tree owned by uid and gid 1000 at `dir`: a 0640 file, a 0600 file
/// and a 0755 directory with a file in it.
fn foreign_tree(dir: &Path) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for (name, mode) in [("a", 0o640), ("secret", 0o600), ("sub/b", 0o644)] {
        std::fs::write(dir.join(name), format!("{name}\n")).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    for path in [
        dir.to_path_buf(),
        dir.join("a"),
        dir.join("secret"),
        dir.join("sub"),
        dir.join("sub/b"),
    ] {
        nix::unistd::chown(&path, Some(1000.into()), Some(1000.into())).unwrap();
    }
}

#[test]
fn root_works_with_another_uids_files_in_the_workspace() {
    if !is_root() {
        eprintln!("skipped: needs root (files of another uid)");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        foreign_tree(&d.ws.join("proj"));
        // A CI checkout of another uid: read, change, add, remove.
        let out = run_in(
            tier,
            &d,
            "workspace-write",
            "cat proj/secret && echo y >> proj/a && touch proj/new && rm proj/sub/b && echo ok",
        );
        assert_eq!(out.stdout, "secret\nok\n[exit code: 0]\n", "{tier:?}");
        // Reading works in read-only too.
        let out = run_in(tier, &d, "read-only", "cat proj/secret");
        assert_eq!(out.stdout, "secret\n[exit code: 0]\n", "{tier:?}");
    }
}

#[test]
fn tar_cp_and_rsync_keep_another_uids_files_as_root() {
    if !is_root() {
        eprintln!("skipped: needs root (chown to another uid)");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        foreign_tree(&d.ws.join("src"));
        let tar = Command::new("tar")
            .args(["-cpf", "t.tar", "src"])
            .current_dir(&d.ws)
            .status()
            .unwrap();
        assert!(tar.success());
        let rsync = if have("rsync") {
            " && rsync -a src/ r/"
        } else {
            ""
        };
        let script = format!(
            "mkdir x && tar -xpf t.tar -C x && cp -a src c{rsync} \
             && echo z >> x/src/sub/b && rm -rf x && echo ok"
        );
        let out = run_in(tier, &d, "workspace-write", &script);
        assert_eq!(out.stdout, "ok\n[exit code: 0]\n", "{tier:?}");
        let copied: Vec<PathBuf> = std::iter::once(d.ws.join("c/secret"))
            .chain(have("rsync").then(|| d.ws.join("r/secret")))
            .collect();
        for f in copied {
            let m = std::fs::metadata(&f).unwrap();
            assert_eq!(
                (m.uid(), m.gid(), m.mode() & 0o777),
                (1000, 1000, 0o600),
                "{tier:?} {f:?}"
            );
        }
    }
}

#[test]
fn a_set_group_id_directory_breaks_neither_cp_a_nor_git_init_shared() {
    let git = have("git");
    for tier in tiers() {
        let d = dirs();
        let shared = d.ws.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o2775)).unwrap();
        let script = format!(
            "cd shared && mkdir -p src/d && echo x > src/d/f && cp -a src copy && tar -cf t.tar src \
             && mkdir x && tar -xpf t.tar -C x && chmod -R u+rwX,go+rX copy{} && stat -c %A copy/d",
            if git {
                " && git init -q --shared=group repo"
            } else {
                ""
            }
        );
        let out = run_in(tier, &d, "workspace-write", &script);
        assert_eq!(out.stdout, "drwxr-sr-x\n[exit code: 0]\n", "{tier:?}");
    }
}

#[test]
fn what_the_kept_capabilities_must_not_allow_still_fails() {
    if !is_root() {
        eprintln!("skipped: needs root (the capabilities kept are root's)");
        return;
    }
    let d = dirs();
    let secret = d.outside.join("root-only");
    std::fs::write(&secret, "keep\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A process outside the run to try ptrace on.
    let mut outside = Command::new("sleep").arg("30").spawn().unwrap();
    let script = format!(
        r#"python3 - <<'EOF'
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def errno(rc): return "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
# open_by_handle_at: a file by its handle, past every path rule
h = ctypes.create_string_buffer(8 + 128); ctypes.c_uint.from_buffer(h).value = 128
mnt = ctypes.c_int()
libc.name_to_handle_at(-100, b"{secret}", h, ctypes.byref(mnt), 0)
print("open_by_handle_at", errno(libc.open_by_handle_at(os.open("/", os.O_RDONLY), h, os.O_RDWR)))
print("mknod", errno(libc.mknod(b"null2", 0o20666, os.makedev(1, 3))))
print("mount", errno(libc.mount(b"none", b".", b"tmpfs", 0, None)))
print("ptrace", errno(libc.ptrace(16, {pid}, None, None)))
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("raw ok")
except OSError as e:
    print("raw", e.strerror)
try:
    open("{secret}", "a").write("x"); print("write ok")
except OSError as e:
    print("write", e.strerror)
EOF"#,
        secret = p(&secret),
        pid = outside.id()
    );
    for tier in tiers() {
        let out = run_in(tier, &d, "workspace-write", &script);
        let lines: Vec<&str> = out.stdout.lines().collect();
        for (i, what) in [
            "open_by_handle_at",
            "mknod",
            "mount",
            "ptrace",
            "raw",
            "write",
        ]
        .iter()
        .enumerate()
        {
            let line = lines.get(i).copied().unwrap_or("");
            assert!(
                line.starts_with(what) && !line.ends_with("ok"),
                "{tier:?}: {}",
                out.stdout
            );
        }
    }
    let _ = outside.kill();
    let _ = outside.wait();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep\n");
    assert!(!d.ws.join("null2").exists());
}

#[test]
fn python_multiprocessing_works_confined() {
    // SemLock and shared_memory live in /dev/shm: a private tmpfs with a
    // mount namespace, the shared one (writable in workspace-write) without.
    let script = "python3 -c '
from multiprocessing import Pool, shared_memory
from concurrent.futures import ProcessPoolExecutor
with Pool(2) as pool: print(pool.map(abs, [-1, -2]))
with ProcessPoolExecutor(2) as ex: print(list(ex.map(abs, [-3])))
m = shared_memory.SharedMemory(create=True, size=16); m.close(); m.unlink(); print(\"shm\")
'";
    for tier in tiers() {
        let modes: &[&str] = match tier {
            Tier::MountNamespace => &["workspace-write", "read-only"],
            // Without a mount namespace read-only cannot give a private one.
            Tier::Gate => &["workspace-write"],
        };
        for mode in modes {
            let d = dirs();
            let out = run_in(tier, &d, mode, script);
            assert_eq!(
                out.stdout, "[1, 2]\n[3]\nshm\n[exit code: 0]\n",
                "{tier:?} {mode}"
            );
        }
    }
}

#[test]
fn cp_a_keeps_the_set_group_id_bit_of_a_foreign_directory() {
    if !is_root() {
        eprintln!("skipped: needs root to make a directory of another group");
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let src = d.ws.join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), "x\n").unwrap();
        std::os::unix::fs::chown(&src, Some(1000), Some(1000)).unwrap();
        std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o2775)).unwrap();
        // cp -a sets the mode, then the ACL: setting an ACL clears the
        // set-group-ID bit of a caller outside the group without CAP_FSETID.
        let out = run_in(
            tier,
            &d,
            "workspace-write",
            "cp -a src dst && stat -c '%a %u:%g' dst",
        );
        assert_eq!(out.stdout, "2775 1000:1000\n[exit code: 0]\n", "{tier:?}");
    }
}

/// GNU tar sets extended attributes (and modes) through
/// `/proc/self/fd/N/NAME`: a path beneath the task's own descriptor, or
/// beneath its working directory or root, works as it does unconfined.
#[test]
fn metadata_changes_through_the_tasks_own_proc_links_work_confined() {
    if !have("python3") {
        eprintln!("skipped: needs python3");
        return;
    }
    let script = "mkdir -p d/sub && echo x > d/sub/f && python3 -c \"
import os
fd = os.open('d', os.O_RDONLY)
os.setxattr(f'/proc/self/fd/{fd}/sub/f', 'user.wl', b'1')
os.chmod(f'/proc/self/fd/{fd}/sub/f', 0o600)
os.utime(f'/proc/self/cwd/d/sub/f', (0, 0))
os.chmod(f'/proc/{os.getpid()}/root{os.getcwd()}/d/sub', 0o700)
print(os.getxattr('d/sub/f', 'user.wl'), oct(os.stat('d/sub/f').st_mode & 0o777),
      os.stat('d/sub/f').st_mtime, oct(os.stat('d/sub').st_mode & 0o777))
\"";
    for tier in tiers() {
        let d = dirs();
        let out = run_in(tier, &d, "workspace-write", script);
        assert_eq!(
            out.stdout, "b'1' 0o600 0.0 0o700\n[exit code: 0]\n",
            "{tier:?}: {}",
            out.stderr
        );
    }
}
