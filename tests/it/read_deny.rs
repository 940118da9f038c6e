//! The read deny list: credentials in the home unreadable in the
//! confining modes, `--allow-read` and `--deny-read`, and ordinary work
//! (git, cargo, python's ssl) unharmed by it.

use crate::support::{Test, Tier, poll_until, processes_naming, tiers};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Home {
    _root: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    tmp: PathBuf,
}

/// A home with a fixture key in `.ssh`, a `.netrc`, and a note beside
/// them; a workspace and a temp dir outside it.
fn home() -> Home {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let [home, ws, tmp] = ["home", "ws", "tmp"].map(|n| base.join(n));
    for d in [&home, &ws, &tmp] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::create_dir(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "FIXTURE KEY\n").unwrap();
    std::fs::write(home.join(".ssh/known_hosts"), "KNOWN\n").unwrap();
    std::fs::write(home.join(".netrc"), "machine x password y\n").unwrap();
    std::fs::write(home.join("notes"), "NOTE\n").unwrap();
    Home {
        _root: root,
        home,
        ws,
        tmp,
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A run in `tier` with `h`'s home and temp dir.
fn in_home(tier: Tier, h: &Home) -> Test {
    Test::in_tier(tier)
        .env("HOME", &h.home)
        .env("TMPDIR", &h.tmp)
}

/// `sh -c script` in a private mount namespace (`unshare -m`, so that its
/// mounts vanish with it), with a known environment and `h`'s home and
/// temp dir. Root only.
fn unshared(h: &Home, script: &str) -> std::process::Output {
    std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &h.home)
        .env("TMPDIR", &h.tmp)
        .output()
        .unwrap()
}

fn run(tier: Tier, h: &Home, args: &[&str], script: &str) -> Value {
    in_home(tier, h)
        .args(["--json", "-C", p(&h.ws)])
        .args(args)
        .args(["--", script])
        .run()
        .json()
}

#[test]
fn a_key_in_the_home_is_unreadable_and_the_denial_names_it() {
    for tier in tiers() {
        for mode in ["read-only", "workspace-write"] {
            let h = home();
            let script = "cat ~/.ssh/id_rsa; cat ~/.netrc; cat ~/notes; ls ~/.ssh | tr '\\n' ' '";
            let v = run(tier, &h, &["-s", mode], script);
            // With a mount namespace a denied directory is hidden under an
            // empty tmpfs: its names are not listable, a file in it is not
            // there. Without one, Landlock refuses the read and the names
            // stay listable.
            let (listed, key_error, key_errno) = match tier {
                Tier::MountNamespace => ("NOTE\n", "No such file or directory", "ENOENT"),
                Tier::Gate => ("NOTE\nid_rsa known_hosts ", "Permission denied", "EACCES"),
            };
            assert_eq!(v["stdout"]["text"], listed, "{tier:?} {mode}: {v}");
            let key = h.home.join(".ssh/id_rsa");
            let netrc = h.home.join(".netrc");
            assert_eq!(
                v["stderr"]["text"],
                format!(
                    "cat: {}: {key_error}\ncat: {}: Permission denied\n",
                    p(&key),
                    p(&netrc)
                )
            );
            assert_eq!(
                v["sandbox"]["denials"],
                json!([
                    {"op": "read", "path": p(&key), "errno": key_errno, "source": "output",
                     "network": false, "hint": format!("--allow-read {}", p(&h.home.join(".ssh"))), "count": 1},
                    {"op": "read", "path": p(&netrc), "errno": "EACCES", "source": "output",
                     "network": false, "hint": format!("--allow-read {}", p(&netrc)), "count": 1},
                ]),
                "{tier:?} {mode}"
            );
        }
    }
}

#[test]
fn allow_read_lifts_an_entry_or_opens_one_file_inside_it() {
    for tier in tiers() {
        let h = home();
        let both = "cat ~/.ssh/id_rsa ~/.ssh/known_hosts";
        let v = run(
            tier,
            &h,
            &["-s", "read-only", "--allow-read", "~/.ssh"],
            both,
        );
        assert_eq!(v["stdout"]["text"], "FIXTURE KEY\nKNOWN\n", "{tier:?}: {v}");
        let known = h.home.join(".ssh/known_hosts");
        let v = run(
            tier,
            &h,
            &["-s", "read-only", "--allow-read", p(&known)],
            both,
        );
        assert_eq!(
            (&v["stdout"]["text"], &v["exit_code"]),
            (&json!("KNOWN\n"), &json!(1)),
            "{tier:?}: {v}"
        );
    }
}

#[test]
fn deny_read_adds_a_path_and_full_access_reads_everything() {
    let h = home();
    let secret = h.tmp.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::write(secret.join("s"), "S\n").unwrap();
    let script = format!("cat {}/s", p(&secret));
    let v = run(
        Tier::MountNamespace,
        &h,
        &["-s", "read-only", "--deny-read", p(&secret)],
        &script,
    );
    assert_eq!(v["exit_code"], 1, "{v}");
    assert_eq!(v["sandbox"]["denials"][0]["op"], "read");
    let v = run(
        Tier::MountNamespace,
        &h,
        &["-s", "full-access"],
        "cat ~/.ssh/id_rsa",
    );
    assert_eq!(v["stdout"]["text"], "FIXTURE KEY\n", "{v}");
}

#[test]
fn explain_lists_the_denied_entries_and_the_mechanism() {
    let h = home();
    let out = in_home(Tier::MountNamespace, &h)
        .args(["explain", "--json", "-s", "read-only", "--", "true"])
        .run();
    let v = out.json();
    let denied = &v["sandbox"]["read_denied"];
    let paths: Vec<&str> = denied["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(paths.contains(&p(&h.home.join(".ssh"))), "{denied}");
    assert!(paths.contains(&p(&h.home.join(".netrc"))), "{denied}");
    assert!(
        denied["mechanism"]
            .as_str()
            .unwrap()
            .starts_with("Landlock")
    );
}

#[test]
fn git_cargo_and_python_ssl_work_with_the_deny_list_in_force() {
    let have = |c: &str| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok()
    };
    if !have("git") || !have("cargo") {
        eprintln!("skipped: git or cargo is not installed");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"rd\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn f() -> u8 { 1 }\n").unwrap();
    let script = "git init -q && git status --short | sort | tr '\\n' ' ' && cargo build --offline -q \
                  && python3 -c 'import ssl; print(ssl.OPENSSL_VERSION.split()[0])'";
    for tier in tiers() {
        let _ = std::fs::remove_dir_all(ws.join(".git"));
        let _ = std::fs::remove_dir_all(ws.join("target"));
        let _ = std::fs::remove_file(ws.join("Cargo.lock"));
        // The real home: cargo and rustup live there, and so does the
        // deny list that must not get in their way.
        let mut t = Test::in_tier(tier);
        for var in ["HOME", "CARGO_HOME", "RUSTUP_HOME"] {
            if let Some(v) = std::env::var_os(var) {
                t = t.env(var, v);
            }
        }
        let out = t
            .args(["-s", "workspace-write", "-C", p(&ws), "--", script])
            .run();
        assert_eq!(
            out.stdout, "?? Cargo.toml ?? src/ OpenSSL\n[exit code: 0]\n",
            "{tier:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn raw_devices_and_the_kernel_log_are_unreadable_the_ordinary_devices_work() {
    if !Path::new("/dev/kmsg").exists() {
        eprintln!("skipped: no /dev/kmsg");
        return;
    }
    for tier in tiers() {
        let h = home();
        let script = "head -c 1 /dev/kmsg; head -c 4 /dev/urandom | wc -c; echo x > /dev/null && ls /dev | grep -c null";
        let v = run(tier, &h, &["-s", "read-only"], script);
        assert_eq!(v["stdout"]["text"], "4\n1\n", "{tier:?}: {v}");
        assert_eq!(
            v["sandbox"]["denials"],
            json!([{"op": "read", "path": "/dev/kmsg", "errno": "EACCES", "source": "output",
                    "network": false, "hint": "--allow-read /dev/kmsg", "count": 1}]),
            "{tier:?}"
        );
    }
}

#[test]
fn read_roots_read_their_roots_the_workspace_and_the_system_and_nothing_else() {
    for tier in tiers() {
        let h = home();
        let data = h.tmp.join("data");
        let other = h.tmp.join("other");
        for (dir, file) in [(&data, "d"), (&other, "o")] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join(file), format!("{file}\n")).unwrap();
        }
        std::fs::write(h.ws.join("w"), "w\n").unwrap();
        let script = format!(
            "cat {d}/d w; head -c 1 /etc/passwd; echo; cat {o}/o; cat ~/notes",
            d = p(&data),
            o = p(&other)
        );
        let v = run(
            tier,
            &h,
            &["-s", "read-only", "--read-root", p(&data)],
            &script,
        );
        assert_eq!(v["stdout"]["text"], "d\nw\nr\n", "{tier:?}: {v}");
        let denied: Vec<(&str, &str)> = v["sandbox"]["denials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["path"].as_str().unwrap(), d["hint"].as_str().unwrap()))
            .collect();
        let (o, notes) = (other.join("o"), h.home.join("notes"));
        let (ho, hn) = (
            format!("--read-root {}", p(&other)),
            format!("--read-root {}", p(&h.home)),
        );
        assert_eq!(
            denied,
            [(p(&o), ho.as_str()), (p(&notes), hn.as_str())],
            "{tier:?}"
        );
    }
}

#[test]
fn a_denied_entry_renamed_or_linked_by_a_run_is_not_readable_to_the_next() {
    for tier in tiers() {
        let h = home();
        std::fs::create_dir(h.home.join(".cargo")).unwrap();
        std::fs::write(h.home.join(".cargo/credentials"), "CARGO TOKEN\n").unwrap();
        // The home as the workspace: the directories along the way to the
        // denied entries are writable.
        let plant = "mv .netrc n2; ln .cargo/credentials .cargo/c3; ln .cargo/credentials c4; \
                     cat .netrc; git init -q repo && echo made > repo/f && cat repo/f";
        let out = in_home(tier, &h)
            .args(["-s", "workspace-write", "-C", p(&h.home), "--", plant])
            .run();
        match tier {
            // Hidden under mounts: no rename (EBUSY), no link (EXDEV), an
            // empty file to read; new files and directories work.
            Tier::MountNamespace => {
                let v = in_home(tier, &h)
                    .args([
                        "--json",
                        "-s",
                        "workspace-write",
                        "-C",
                        p(&h.home),
                        "--",
                        "true",
                    ])
                    .run()
                    .json();
                assert_eq!(
                    v["sandbox"]["read_enforcement"],
                    "landlock: deny list; mounts hide its directories"
                );
                assert_eq!(
                    out.stdout,
                    "made\n[stderr]\nmv: cannot move '.netrc' to 'n2': Device or resource busy\n\
                 ln: failed to create hard link '.cargo/c3' => '.cargo/credentials': Invalid cross-device link\n\
                 ln: failed to create hard link 'c4' => '.cargo/credentials': Invalid cross-device link\n\
                 [exit code: 0]\n"
                );
            }
            // They cannot be hidden without a mount namespace: no run.
            Tier::Gate => {
                assert_eq!(out.status, 125, "{}", out.stdout);
                assert!(out.stderr.contains("cannot be hidden"), "{}", out.stderr);
            }
        }
        let v = run(
            tier,
            &h,
            &["-s", "read-only"],
            "cat ~/n2 ~/.cargo/c3 ~/c4 ~/.netrc",
        );
        assert_eq!(v["stdout"]["text"], "", "{tier:?}: {v}");
        assert_eq!(
            std::fs::read_to_string(h.home.join(".netrc")).unwrap(),
            "machine x password y\n",
            "{tier:?}"
        );
    }
}

#[test]
fn a_symlink_in_a_denied_directory_and_an_entry_made_during_the_run_stay_unreadable() {
    for tier in tiers() {
        let h = home();
        let keys = h.tmp.join("keys");
        std::fs::create_dir(&keys).unwrap();
        std::fs::write(keys.join("awscred"), "AWS SECRET\n").unwrap();
        std::fs::create_dir(h.home.join(".aws")).unwrap();
        std::os::unix::fs::symlink(keys.join("awscred"), h.home.join(".aws/credentials")).unwrap();
        // ~/.config/gh appears while the run waits.
        std::fs::create_dir(h.home.join(".config")).unwrap();
        let gh = h.home.join(".config/gh");
        let script = format!(
            "cat ~/.aws/credentials; while [ ! -e {g}/hosts.yml ]; do sleep 0.05; done; cat {g}/hosts.yml",
            g = p(&gh)
        );
        // Only once the command runs (its bash, confined before exec, is
        // there) does ~/.config/gh appear.
        let marker = format!("{}/hosts.yml", p(&gh));
        let maker = std::thread::spawn(move || {
            let bash = poll_until(Duration::from_secs(15), || {
                processes_naming(&marker).into_iter().find(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c.starts_with(b"bash\0-c\0"))
                })
            });
            assert!(bash.is_some(), "the command never started");
            std::fs::create_dir(&gh).unwrap();
            std::fs::write(gh.join("hosts.yml"), "GH TOKEN\n").unwrap();
        });
        let v = run(tier, &h, &["-s", "read-only", "--timeout", "20s"], &script);
        maker.join().unwrap();
        assert_eq!(v["stdout"]["text"], "", "{tier:?}: {v}");
    }
}

#[test]
fn the_directories_holding_a_hidden_entry_cannot_be_renamed_away() {
    if !tiers().contains(&Tier::MountNamespace) {
        eprintln!("skipped: needs CAP_SYS_ADMIN (a mount namespace)");
        return;
    }
    let h = home();
    let secrets = h.ws.join("proj/secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("key.pem"), "KEY\n").unwrap();
    let key = secrets.join("key.pem");
    let args = ["-s", "workspace-write", "--deny-read", p(&key)];
    let v = run(
        Tier::MountNamespace,
        &h,
        &args,
        "mv proj/secrets proj/s2; mv proj p2; cat proj/secrets/key.pem; echo n > proj/secrets/n && cat proj/secrets/n",
    );
    assert_eq!(v["stdout"]["text"], "n\n", "{v}");
    assert!(key.exists() && h.ws.join("proj/secrets/n").exists());
}

#[test]
fn an_earlier_unconfined_runs_spill_file_is_out_of_a_confined_runs_reach() {
    let h = home();
    let out = in_home(Tier::MountNamespace, &h)
        .args([
            "--json",
            "--stdout-max-bytes",
            "1",
            "--",
            "echo SPILLED OUTPUT",
        ])
        .run()
        .json();
    let spill = out["stdout"]["spill_path"].as_str().unwrap().to_string();
    let state = h.home.join(".local/state/dsh-exec/spill");
    assert!(
        spill.starts_with(&format!("{}/dsh-exec-", p(&state))),
        "{out}"
    );
    assert_eq!(std::fs::read(&spill).unwrap(), b"SPILLED OUTPUT\n");
    for tier in tiers() {
        for mode in ["read-only", "workspace-write"] {
            let v = run(tier, &h, &["-s", mode], &format!("cat {spill}"));
            assert_eq!(v["stdout"]["text"], "", "{tier:?} {mode}: {v}");
            let error = match tier {
                Tier::MountNamespace => "No such file or directory",
                Tier::Gate => "Permission denied",
            };
            assert_eq!(
                v["stderr"]["text"],
                format!("cat: {spill}: {error}\n"),
                "{tier:?} {mode}: {v}"
            );
        }
    }
}

#[test]
fn an_allow_read_entry_that_does_not_exist_is_warned_about() {
    let h = home();
    let missing = h.home.join(".ssh/nonexistent");
    in_home(Tier::MountNamespace, &h)
        .args(["-s", "read-only", "-C", p(&h.ws), "--allow-read"])
        .arg(&missing)
        .args(["--", "cat ~/.ssh/id_rsa 2>/dev/null; echo done"])
        .run()
        .expect_stdout("done\n[exit code: 0]\n")
        .expect_stderr(&format!(
            "dsh-exec: warning: --allow-read {}: no such file or directory; nothing lifted\n",
            p(&missing)
        ));
}

/// A bind mount of `/` elsewhere (distrobox's /run/host, a container's
/// second view of the home) shows the denied entries again: they stay
/// unreadable through it, and through their own paths.
#[test]
fn a_denied_entry_stays_unreadable_through_a_bind_mount_of_an_ancestor() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a bind mount in a private mount namespace)");
        return;
    }
    for tier in tiers() {
        for layout in ["root", "entry", "shadowed", "overlay"] {
            let h = home();
            let bind = h.tmp.join("bind");
            std::fs::create_dir(&bind).unwrap();
            let key = h.home.join(".ssh/id_rsa");
            // Each layout: the mounts, and the other path to the key.
            let (mounts, other) = match layout {
                // A bind of `/` elsewhere.
                "root" => (
                    format!("mount --bind / {b}", b = p(&bind)),
                    format!("{}{}", p(&bind), p(&key)),
                ),
                // A bind of the denied entry itself.
                "entry" => (
                    format!("mount --bind {}/.ssh {b}", p(&h.home), b = p(&bind)),
                    format!("{}/id_rsa", p(&bind)),
                ),
                // An overlay whose lower layer is the home.
                "overlay" => {
                    for d in ["up", "wk"] {
                        std::fs::create_dir(h.tmp.join(d)).unwrap();
                    }
                    (
                        format!(
                            "mount -t overlay ov -o lowerdir={hm},upperdir={t}/up,workdir={t}/wk {b}",
                            hm = p(&h.home),
                            t = p(&h.tmp),
                            b = p(&bind)
                        ),
                        format!("{}/.ssh/id_rsa", p(&bind)),
                    )
                }
                // A tmpfs over the entry, then binds of the home over itself
                // and elsewhere: the key shows again at its own path.
                _ => (
                    format!(
                        "mount -t tmpfs t {hm}/.ssh && mount --bind {hm} {hm} && mount --bind {hm} {b}",
                        hm = p(&h.home),
                        b = p(&bind)
                    ),
                    format!("{}/.ssh/id_rsa", p(&bind)),
                ),
            };
            let runner = match tier {
                Tier::Gate => "setpriv --bounding-set=-sys_admin",
                Tier::MountNamespace => "",
            };
            // The mounts live in a private mount namespace: gone with it.
            let script = format!(
                "{mounts} && exec {runner} {bin} --json -s read-only -C {ws} -- 'cat {other}; cat {key}'",
                bin = crate::support::bin().display(),
                ws = p(&h.ws),
                key = p(&key),
            );
            let out = unshared(&h, &script);
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!(
                    "{tier:?} {layout}: {e}: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            assert_eq!(v["stdout"]["text"], "", "{tier:?} {layout}: {v}");
            // The alias is read through the bind (Landlock refuses it);
            // the entry itself is hidden with a mount namespace.
            let error = match tier {
                Tier::MountNamespace => "No such file or directory",
                Tier::Gate => "Permission denied",
            };
            // Each alias is a directory on the deny list of its own: with
            // a mount namespace it is hidden too.
            let other_error = error;
            assert_eq!(
                v["stderr"]["text"],
                format!("cat: {other}: {other_error}\ncat: {}: {error}\n", p(&key)),
                "{tier:?} {layout}: {v}"
            );
        }
    }
}

#[test]
fn a_writable_root_inside_a_denied_entry_does_not_start() {
    for tier in tiers() {
        let h = home();
        let sub = h.home.join(".ssh/sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("s"), "SECRET\n").unwrap();
        let out = in_home(tier, &h)
            .args(["-s", "workspace-write", "-C", p(&sub), "--", "cat s"])
            .run();
        out.expect_status(125).expect_stdout("");
        let ssh = h.home.join(".ssh");
        assert_eq!(
            out.stderr,
            format!(
                "dsh-exec: error: sandbox unavailable: the writable root {} lies inside {}, which \
                 the read deny list keeps unreadable; --allow-read {} to work there \
                 (SANDBOX_UNAVAILABLE)\n",
                p(&sub),
                p(&ssh),
                p(&ssh)
            ),
            "{tier:?}"
        );
    }
}

/// With the home as the workspace, dsh-exec's state directory lies in a
/// writable root: the run's spill file survives the run, and a command
/// that rewrites it (possible without a mount namespace) cannot change
/// the tail the result reports.
#[test]
fn with_the_home_writable_the_spill_file_survives_and_its_tail_cannot_be_forged() {
    for tier in tiers() {
        // A home with nothing on the deny list (the gate tier refuses a
        // writable root that holds some).
        let h = home();
        let home = &h.ws;
        let script = "head -c 5000 /dev/zero | tr '\\0' a; echo; echo REAL-END; sleep 0.2; \
                      for f in ~/.local/state/dsh-exec/spill/*/stdout; do \
                      printf 'FORGED!!\\n' | dd of=\"$f\" bs=1 seek=$(( $(stat -c %s \"$f\") - 9 )) \
                      conv=notrunc 2>/dev/null; done; true";
        let v = Test::in_tier(tier)
            .env("HOME", home)
            .env("TMPDIR", &h.tmp)
            .args([
                "--json",
                "-s",
                "workspace-write",
                "--stdout-max-bytes",
                "1K",
                "-C",
            ])
            .arg(home)
            .args(["--", script])
            .run()
            .json();
        let text = v["stdout"]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{tier:?}: {v}"));
        assert!(text.ends_with("aaaa\nREAL-END\n"), "{tier:?}: {v}");
        let spill = v["stdout"]["spill_path"].as_str().unwrap();
        let kept = std::fs::read(spill).unwrap_or_else(|e| panic!("{tier:?}: {spill}: {e}"));
        assert_eq!(kept.len(), 5010, "{tier:?}");
    }
}

/// A big cache in one denied directory does not use up the symlink scan
/// of another: a key linked from ~/.ssh stays unreadable.
#[test]
fn a_symlinked_key_stays_denied_beside_a_big_kube_cache() {
    let h = home();
    let cache = h.home.join(".kube/cache/discovery");
    std::fs::create_dir_all(&cache).unwrap();
    for i in 0..2100 {
        std::fs::write(cache.join(format!("f{i}")), "").unwrap();
    }
    let dots = h.tmp.join("dots");
    std::fs::create_dir(&dots).unwrap();
    std::fs::write(dots.join("id_secret"), "LINKED KEY\n").unwrap();
    std::os::unix::fs::symlink(dots.join("id_secret"), h.home.join(".ssh/id_link")).unwrap();
    let v = run(
        Tier::MountNamespace,
        &h,
        &["-s", "read-only"],
        "cat ~/.ssh/id_link",
    );
    assert_eq!(v["stdout"]["text"], "", "{v}");
}

/// With a read-only home, STATE/spill cannot be made: a confined run
/// still runs, spilling into the temp dir, and says so.
#[test]
fn a_read_only_home_spills_into_the_temp_dir_with_a_warning() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root (a read-only bind mount in a private mount namespace)");
        return;
    }
    let h = home();
    let script = format!(
        "mount --bind -o ro {home} {home} && exec {bin} -s workspace-write -C {ws} --stdout-max-bytes 10 -- 'seq 100'",
        home = p(&h.home),
        bin = crate::support::bin().display(),
        ws = p(&h.ws),
    );
    let out = unshared(&h, &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.ends_with("99\n100\n[exit code: 0]\n"), "{stdout}");
    let state = h.home.join(".local/state/dsh-exec/spill");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "dsh-exec: warning: spill directory {}: Read-only file system (os error 30); spilling \
             to {} instead, where the confined command can change the spill files\n",
            p(&state),
            p(&h.tmp)
        )
    );
}

/// With the home as the workspace in the mount tier, a denied entry is
/// hidden under a mount in the command's namespace; a symlink to its real
/// path resolved by the gate must not reach the entry outside that
/// namespace (`chmod g+s` goes through the gate there).
#[test]
fn a_symlink_to_a_hidden_entry_does_not_take_the_gate_to_the_real_one() {
    if !crate::support::has_sys_admin() {
        eprintln!("skipped: needs CAP_SYS_ADMIN (the mount tier)");
        return;
    }
    let h = home();
    let aws = h.home.join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(aws.join("credentials"), "AWS SECRET\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&aws, std::fs::Permissions::from_mode(0o700)).unwrap();
    let script = format!(
        "ln -s {aws} l_aws && chmod 2777 l_aws; echo rc=$?",
        aws = p(&aws)
    );
    let out = in_home(Tier::MountNamespace, &h)
        .args(["-s", "workspace-write", "--allow-read"])
        .arg(h.home.join(".ssh"))
        .arg("--allow-read")
        .arg(h.home.join(".netrc"))
        .arg("-C")
        .arg(&h.home)
        .args(["--", &script])
        .run();
    assert!(
        out.stdout.starts_with("rc=1\n"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    let mode = std::fs::metadata(&aws).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "the real ~/.aws was changed");
}

#[test]
fn with_a_mount_namespace_the_names_in_denied_directories_and_the_jobs_root_are_not_listable() {
    let h = home();
    let runtime = h.home.join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let job = Test::new()
        .env("HOME", &h.home)
        .env("TMPDIR", &h.tmp)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["--background", "--", "sleep 30"])
        .run();
    let id = job.stdout.trim().to_string();
    assert_eq!(job.status, 0, "{}", job.stderr);
    let jobs = runtime.join("dsh-exec/jobs");
    assert!(jobs.join(&id).is_dir(), "{id}");
    for tier in tiers() {
        for mode in ["read-only", "workspace-write"] {
            let v = in_home(tier, &h)
                .env("XDG_RUNTIME_DIR", &runtime)
                .args(["--json", "-s", mode, "-C", p(&h.ws), "--"])
                .arg(format!(
                    "echo J $(ls -A {}); echo S $(ls -A ~/.ssh)",
                    p(&jobs)
                ))
                .run()
                .json();
            let listed = v["stdout"]["text"].as_str().unwrap_or_default().to_string();
            match tier {
                // An empty tmpfs over each: nothing to list.
                Tier::MountNamespace => assert_eq!(listed, "J\nS\n", "{mode}: {v}"),
                // Landlock alone cannot refuse the names (docs/known-limits.md).
                Tier::Gate => assert_eq!(
                    listed,
                    format!("J {id}\nS id_rsa known_hosts\n"),
                    "{mode}: {v}"
                ),
            }
        }
    }
    let kill = Test::new()
        .env("HOME", &h.home)
        .env("TMPDIR", &h.tmp)
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["job", "kill", &id])
        .run();
    assert_eq!(kill.status, 0, "{}", kill.stderr);
}
