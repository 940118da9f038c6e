//! Planted git metadata: what a confined run leaves for a later, unconfined
//! git command to run is put aside, judged by a snapshot of every git
//! directory under the writable roots from before the run; ordinary git
//! work (clone, submodules, worktrees, commits) is left as it is. Each
//! attack runs in every tier this machine has (with and without a mount
//! namespace).
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    tmp: PathBuf,
    /// Where a planted command leaves its mark: outside every root.
    ran: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let [ws, outside, tmp] = ["ws", "outside", "tmp"].map(|n| root.path().join(n));
    for d in [&ws, &outside, &tmp] {
        std::fs::create_dir(d).unwrap();
    }
    let ran = outside.join("ran");
    Dirs {
        _root: root,
        ws,
        tmp,
        ran,
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
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

/// Runs `script` with bash in `dir`, unconfined, as a user would later;
/// no global git config. Panics with its output when it fails and `must`.
fn sh(dir: &Path, script: &str, must: bool) -> String {
    let out = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!must || out.status.success(), "{script}: {text}");
    text
}

/// A repository with one commit in `dir`.
fn repository(dir: &Path) {
    sh(
        dir,
        "git init -q && git commit -q --allow-empty -m init",
        true,
    );
}

/// The JSON result of `script` run confined (workspace-write, temp dir
/// read-only) in `d.ws`, with a git identity and no global config.
fn run(tier: Tier, d: &Dirs, script: &str) -> Value {
    confined(tier, d, false).args(["--", script]).run().json()
}

/// dsh-exec in `tier`, workspace-write in `d.ws` with `--json`, a git
/// identity and no global config; the temp dir `d.tmp` writable when
/// `temp` (else `--no-temp-write`). The command is still to be given.
fn confined(tier: Tier, d: &Dirs, temp: bool) -> Test {
    let t = Test::in_tier(tier)
        .env("TMPDIR", &d.tmp)
        .args(["-s", "workspace-write", "--json"]);
    let t = if temp { t } else { t.arg("--no-temp-write") };
    t.args(["-C", p(&d.ws)])
        .args(["-e", "GIT_CONFIG_GLOBAL=/dev/null"])
        .args(["-e", "GIT_AUTHOR_NAME=t", "-e", "GIT_AUTHOR_EMAIL=t@t"])
        .args([
            "-e",
            "GIT_COMMITTER_NAME=t",
            "-e",
            "GIT_COMMITTER_EMAIL=t@t",
        ])
}

/// The protected changes of a result, as `(path, change, reason)`.
fn changes(v: &Value) -> Vec<(String, String, String)> {
    v["sandbox"]["protected_changes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["path"].as_str().unwrap_or("").to_string(),
                        c["change"].as_str().unwrap_or("").to_string(),
                        c["reason"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts that `path` was put aside for `reason` (a prefix) and that it
/// is gone from its place.
fn put_aside(v: &Value, path: &Path, reason: &str) {
    let found = changes(v).into_iter().any(|(p, c, r)| {
        p == path.to_str().unwrap() && c == "quarantined" && r.starts_with(reason)
    });
    assert!(
        found,
        "{} not put aside for {reason:?}: {v}",
        path.display()
    );
    assert!(
        std::fs::symlink_metadata(path).is_err(),
        "{} is still there",
        path.display()
    );
    let mut aside = path.as_os_str().to_os_string();
    aside.push(".dsh-exec-quarantined");
    assert!(
        std::fs::symlink_metadata(Path::new(&aside)).is_ok(),
        "{} was not kept",
        aside.to_string_lossy()
    );
}

/// `touch RAN` as a git config value that runs it.
fn touch(d: &Dirs) -> String {
    format!("touch {}; false #", p(&d.ran))
}

#[test]
fn a_submodule_hidden_in_a_split_index_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let v = run(
            tier,
            &d,
            &format!(
                "git init -q sub && git -C sub config core.fsmonitor '{}' \
                 && git -C sub commit -q --allow-empty -m x \
                 && git update-index --split-index \
                 && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub \
                 && ls .git/sharedindex.* >/dev/null",
                touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("sub/.git"), "config key core.fsmonitor");
        sh(&d.ws, "git status --short", true);
        assert!(!d.ran.exists(), "{tier:?}: the fsmonitor ran");
    }
}

#[test]
fn a_module_dir_with_a_hook_for_an_empty_submodule_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // An upstream outside the run, as a real submodule would have.
        let up = d.tmp.join("up");
        std::fs::create_dir(&up).unwrap();
        repository(&up);
        let v = run(
            tier,
            &d,
            &format!(
                "mkdir -p .git/modules && git clone -q --no-checkout --separate-git-dir .git/modules/m {up} m && rm -rf m && mkdir m \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > .git/modules/m/hooks/post-checkout \
                 && chmod +x .git/modules/m/hooks/post-checkout \
                 && printf '[submodule \"m\"]\\n\\tpath = m\\n\\turl = {up}\\n' > .gitmodules \
                 && git update-index --add --cacheinfo 160000,$(git -C {up} rev-parse HEAD),m",
                up = p(&up),
                ran = p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join(".git/modules/m"), "hook post-checkout");
        sh(
            &d.ws,
            "git -c protocol.file.allow=always submodule update --init",
            true,
        );
        assert!(!d.ran.exists(), "{tier:?}: the planted hook ran");
    }
}

#[test]
fn a_new_repository_with_a_key_off_the_allow_list_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let v = run(
            tier,
            &d,
            &format!(
                "git init -q sub && git -C sub config protocol.allow always \
                 && git -C sub remote add origin 'ext::sh -c touch% {}'",
                p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("sub/.git"), "config key protocol.allow");
        sh(&d.ws.join("sub"), "git fetch origin", false);
        assert!(!d.ran.exists(), "{tier:?}: the ext:: remote ran");
    }
}

#[test]
fn a_submodule_five_deep_is_judged_like_the_first() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // s1/s2/s3/s4/s5, each a repository registered in its parent's
        // index; the deepest runs a command on `git status`.
        let v = run(
            tier,
            &d,
            &format!(
                "set -e; path=/s1/s2/s3/s4/s5; mkdir -p s1/s2/s3/s4/s5; \
                 for i in 5 4 3 2 1; do dir=${{path%/s$i/*}}; dir=${{dir%/s$i}}/s$i; dir=${{dir#/}}; \
                   git -C $dir init -q; \
                   if [ $i = 5 ]; then git -C $dir config core.fsmonitor '{}'; \
                   else git -C $dir add -A 2>/dev/null; fi; \
                   git -C $dir commit -q --allow-empty -m x; done; \
                 git add s1",
                touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(
            &v,
            &d.ws.join("s1/s2/s3/s4/s5/.git"),
            "config key core.fsmonitor",
        );
        assert_eq!(changes(&v).len(), 1, "{tier:?}: {v}");
        sh(&d.ws, "git status --short", true);
        assert!(!d.ran.exists(), "{tier:?}: the fsmonitor five deep ran");
    }
}

#[test]
fn a_key_added_to_an_existing_unprotected_config_is_undone_and_the_rest_kept() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        // Deeper than the protection plan looks: its config is writable.
        let deep = d.ws.join("a/b/c/repo");
        std::fs::create_dir_all(&deep).unwrap();
        repository(&deep);
        let config = d.ws.join("a/b/c/repo/.git/config");
        let before = std::fs::read_to_string(&config).unwrap();
        let v = run(
            tier,
            &d,
            &format!(
                "cd a/b/c/repo && git config user.name agent && git config core.fsmonitor '{}'",
                touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert!(
            changes(&v).contains(&(
                p(&config).to_string(),
                "modified".to_string(),
                "config key core.fsmonitor".to_string()
            )),
            "{tier:?}: {v}"
        );
        assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
        let kept =
            std::fs::read_to_string(d.ws.join("a/b/c/repo/.git/config.dsh-exec-quarantined"))
                .unwrap();
        assert!(kept.contains("fsmonitor"), "{kept}");
        sh(&deep, "git status --short", true);
        assert!(!d.ran.exists(), "{tier:?}: the fsmonitor ran");
    }
}

#[test]
fn a_pointer_to_an_existing_bare_repository_with_hooks_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // A bare repository shipped as a test fixture, with a live hook
        // and an fsmonitor: harmless where it is, until something points
        // git at it.
        let fixture = d.ws.join("fixtures/evil.git");
        std::fs::create_dir_all(&fixture).unwrap();
        sh(
            &fixture,
            &format!(
                "git init -q --bare && git config core.fsmonitor '{}'",
                touch(&d)
            ),
            true,
        );
        let v = run(
            tier,
            &d,
            "mkdir w && printf 'gitdir: ../fixtures/evil.git\\n' > w/.git",
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("w/.git"), "names ");
        // The fixture itself was there before the run: it stays.
        assert!(fixture.join("config").exists());
        // And moved into place, it is new where it lands.
        let v = run(tier, &d, "mkdir v && mv fixtures/evil.git v/.git");
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("v/.git"), "config key core.fsmonitor");
        sh(&d.ws.join("v"), "git status --short", false);
        assert!(!d.ran.exists(), "{tier:?}: the fixture's fsmonitor ran");
    }
}

#[test]
fn ordinary_git_work_is_left_as_it_is() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // The user's own config runs things: a run that commits must not
        // cost them their repository.
        sh(
            &d.ws,
            "git config core.fsmonitor false && git config alias.st status \
             && printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            true,
        );
        let up = d.tmp.join("up");
        std::fs::create_dir(&up).unwrap();
        repository(&up);
        let v = run(
            tier,
            &d,
            &format!(
                "set -e; echo a > a.txt; git add a.txt; git commit -q -m a; git stash list; \
                 git init -q --bare bare.git; git gc -q; \
                 git clone -q {up} cloned; cd cloned; git config user.name agent; \
                 git remote add mirror https://example.com/x.git; \
                 git -c protocol.file.allow=always submodule add -q {up} subm; git commit -q -m sub; \
                 git worktree add -q ../wt; git branch -q --set-upstream-to=origin/HEAD 2>/dev/null || true; \
                 cd ..; git init -q k; git -C k config remote.pushDefault origin; \
                 git -C k remote add v6 'ssh://git@[::1]:2222/r.git'; git -C k config submodule.x.update rebase; \
                 git -C k config core.fscache true; git -C k config branch.autoSetupRebase always",
                up = p(&up)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(
            changes(&v),
            Vec::<(String, String, String)>::new(),
            "{tier:?}: {v}"
        );
        let status = sh(
            &d.ws.join("cloned"),
            "git submodule status && git worktree list",
            true,
        );
        assert!(
            status.contains("subm") && status.contains("/wt "),
            "{status}"
        );
        assert!(d.ws.join(".git/hooks/pre-commit").exists());
    }
}

#[test]
fn a_repository_planted_directly_in_the_temp_dir_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        // The temp dir is a writable root here (no --no-temp-write); it is
        // walked one level deep: `$TMPDIR/clone/.git`.
        let v = Test::in_tier(tier)
            .env("TMPDIR", &d.tmp)
            .args(["-s", "workspace-write", "--json", "-C", p(&d.ws)])
            .args(["-e", "GIT_CONFIG_GLOBAL=/dev/null"])
            .args(["--"])
            .arg(format!(
                "git init -q $TMPDIR/clone && git -C $TMPDIR/clone config core.fsmonitor '{}'",
                touch(&d)
            ))
            .run()
            .json();
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.tmp.join("clone/.git"), "config key core.fsmonitor");
    }
}

#[test]
fn a_repository_deeper_than_the_walk_goes_is_put_aside_with_the_directory_it_made() {
    if !have_git() {
        return;
    }
    // A directory as deep that was there before the run: told, never
    // renamed. Made for every tier first, then aged past the start stamp:
    // that stamp is the coarse clock (a second back on a file system
    // without fine times), and since Linux 6.13 a file's ctime can run
    // ahead of the coarse clock (multigrain timestamps), so a directory
    // made in the moment before the run counts as made by it.
    let made: Vec<(Tier, Dirs, PathBuf)> = tiers()
        .into_iter()
        .map(|tier| {
            let d = dirs();
            repository(&d.ws);
            let mut old = d.ws.join("old");
            for _ in 0..260 {
                old.push("d");
            }
            std::fs::create_dir_all(&old).unwrap();
            (tier, d, old)
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for (tier, d, old) in made {
        // 260 directories deep; the walk goes 256 below the root: what the
        // run made beyond it cannot be judged, so it is put aside whole.
        let v = run(
            tier,
            &d,
            &format!(
                "p=$(printf 'd/%.0s' $(seq 260)) && mkdir -p $p && git init -q $p && git -C $p config core.fsmonitor '{}'",
                touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        let mut deepest = d.ws.clone();
        for _ in 0..257 {
            deepest.push("d");
        }
        let found = changes(&v).into_iter().any(|(p, c, r)| {
            p == deepest.to_str().unwrap() && c == "unchecked" && r.starts_with("made by the run")
        });
        assert!(found, "{tier:?}: {v}");
        assert!(!deepest.exists(), "{tier:?}: the unjudged directory stayed");
        assert!(
            old.is_dir(),
            "{tier:?}: a directory from before the run was moved"
        );
        let mut old_reported = d.ws.join("old");
        for _ in 0..256 {
            old_reported.push("d");
        }
        assert!(
            changes(&v)
                .into_iter()
                .any(|(p, c, _)| p == old_reported.to_str().unwrap() && c == "unchecked"),
            "{tier:?}: {v}"
        );
        let mut gone = deepest.clone();
        gone.pop();
        sh(&gone, "git status --short >/dev/null 2>&1; true", true);
        assert!(!d.ran.exists(), "{tier:?}: the deep fsmonitor ran");
    }
}

#[test]
fn red_team_plants_are_put_aside_and_the_users_own_hooks_and_roots_are_left() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // 1. A repository hidden in the objects directory, reached by a
        // pointer: it is walked and judged like any other.
        let v = run(
            tier,
            &d,
            &format!(
                "h=.git/objects/zz/.git && mkdir -p $h/objects $h/refs && echo 'ref: refs/heads/main' > $h/HEAD \
                 && printf '[core]\\n\\tfsmonitor = \"{}\"\\n' > $h/config && mkdir sub && echo 'gitdir: ../.git/objects/zz/.git' > sub/.git",
                touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(
            &v,
            &d.ws.join(".git/objects/zz/.git"),
            "config key core.fsmonitor",
        );
        sh(
            &d.ws.join("sub"),
            "git status --short >/dev/null 2>&1; true",
            true,
        );
        assert!(
            !d.ran.exists(),
            "{tier:?}: the hidden repository's fsmonitor ran"
        );
        // 2. A hook that is a symlink through /proc/self/cwd: dsh-exec
        // cannot tell where it leads for git, so it counts as a hook.
        let v = run(
            tier,
            &d,
            &format!(
                "git init -q s2 && printf '#!/bin/sh\\ntouch {}\\n' > s2/h.sh && chmod +x s2/h.sh \
                 && ln -s /proc/self/cwd/h.sh s2/.git/hooks/pre-commit",
                p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("s2/.git"), "hook pre-commit");
        // 4. A hundred names taken: a random suffix still puts it aside.
        let v = run(
            tier,
            &d,
            &format!(
                "git init -q s4 && git -C s4 config core.fsmonitor '{}' && touch s4/.git.dsh-exec-quarantined \
                 && for i in $(seq 1 99); do touch s4/.git.dsh-exec-quarantined.$i; done",
                touch(&d)
            ),
        );
        assert!(
            changes(&v)
                .iter()
                .any(|(p, c, _)| p == d.ws.join("s4/.git").to_str().unwrap() && c == "quarantined"),
            "{tier:?}: {v}"
        );
        assert!(!d.ws.join("s4/.git").exists(), "{tier:?}: {v}");
        // 9. The workspace root made a bare repository: never renamed (it
        // is a writable root); the planted config is put aside instead.
        let bare = d.ws.join("bare-root");
        std::fs::create_dir(&bare).unwrap();
        let v = Test::in_tier(tier)
            .env("TMPDIR", &d.tmp)
            .args([
                "-s",
                "workspace-write",
                "--json",
                "--no-temp-write",
                "-C",
                p(&bare),
            ])
            .args(["-e", "GIT_CONFIG_GLOBAL=/dev/null", "--"])
            .arg(format!(
                "git init -q --bare . && git config core.fsmonitor '{}'",
                touch(&d)
            ))
            .run()
            .json();
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert!(
            bare.is_dir(),
            "{tier:?}: the workspace root was renamed: {v}"
        );
        assert!(
            !bare.join("config").exists(),
            "{tier:?}: the planted config stayed: {v}"
        );
        // 11. The user's own hook, hard-linked elsewhere by the run (its
        // ctime changes, its bytes do not): left as it is.
        let deep = d.ws.join("a/b/c/own");
        std::fs::create_dir_all(&deep).unwrap();
        repository(&deep);
        sh(
            &deep,
            "printf '#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            true,
        );
        let v = run(
            tier,
            &d,
            "ln a/b/c/own/.git/hooks/pre-commit linked && git -C a/b/c/own commit -q --allow-empty -m x",
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(
            changes(&v),
            Vec::<(String, String, String)>::new(),
            "{tier:?}: {v}"
        );
        assert!(deep.join(".git/hooks/pre-commit").exists());
        std::fs::remove_file(d.ws.join("linked")).unwrap();
    }
}

#[test]
fn an_existing_superprojects_submodules_update_and_its_worktrees_go() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let up = d.tmp.join("lib");
        std::fs::create_dir(&up).unwrap();
        repository(&up);
        repository(&d.ws);
        sh(
            &d.ws,
            &format!(
                "git -c protocol.file.allow=always submodule add -q {} lib && git commit -q -m sub \
                 && git worktree add -q wt1 && git worktree add -q wt2",
                p(&up)
            ),
            true,
        );
        // git rewrites the submodule's core.worktree on every update, and
        // removes a worktree's git directory: both are ordinary work.
        let v = run(
            tier,
            &d,
            "git -c protocol.file.allow=always submodule update && git worktree remove wt1 \
             && git worktree move wt2 wt3",
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(
            changes(&v),
            Vec::<(String, String, String)>::new(),
            "{tier:?}: {v}"
        );
        let list = sh(&d.ws, "git worktree list --porcelain", true);
        assert!(
            !list.contains("wt1") && list.contains("wt3"),
            "{tier:?}: {list}"
        );
    }
}

#[test]
fn second_round_plants_are_put_aside_too() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // B. A module directory named like a quarantined one is judged.
        let v = run(
            tier,
            &d,
            "N=m.dsh-exec-quarantined && mkdir -p .git/modules && git init -q --bare .git/modules/$N \
             && printf '#!/bin/sh\\nexit 0\\n' > .git/modules/$N/hooks/post-checkout \
             && chmod +x .git/modules/$N/hooks/post-checkout",
        );
        assert!(
            changes(&v).iter().any(
                |(p, c, r)| p.ends_with(".git/modules/m.dsh-exec-quarantined")
                    && c == "quarantined"
                    && r == "hook post-checkout"
            ),
            "{tier:?}: {v}"
        );
        // C, D. Hook symlinks through /proc by a relative path, and to a
        // file that does not exist yet: each counts as a hook.
        for (name, target) in [
            (
                "c",
                "../../../../../../../../../../../../proc/self/cwd/h.sh",
            ),
            ("dd", "/nonexistent-dsh-exec-test/later-hook"),
        ] {
            let v = run(
                tier,
                &d,
                &format!("git init -q {name} && ln -s {target} {name}/.git/hooks/pre-commit"),
            );
            put_aside(&v, &d.ws.join(format!("{name}/.git")), "hook pre-commit");
        }
        // E. A hooks directory that was a symlink before the run: a hook
        // the run writes where it leads is put aside.
        let own = d.ws.join("own");
        std::fs::create_dir(&own).unwrap();
        repository(&own);
        sh(
            &own,
            "mkdir -p tools/hooks && rm -rf .git/hooks && ln -s ../tools/hooks .git/hooks",
            true,
        );
        let v = run(
            tier,
            &d,
            "printf '#!/bin/sh\\nexit 0\\n' > own/tools/hooks/pre-commit && chmod +x own/tools/hooks/pre-commit",
        );
        assert!(
            changes(&v).iter().any(|(p, c, _)| p
                == own.join("tools/hooks/pre-commit").to_str().unwrap()
                && c == "quarantined"),
            "{tier:?}: {v}"
        );
        assert!(
            !own.join("tools/hooks/pre-commit").exists(),
            "{tier:?}: {v}"
        );
    }
}

/// As [`run`], with the temp dir (`d.tmp`) writable, as by default: it is
/// walked one level deep, and what the workspace points into deeper is
/// followed.
fn run_with_temp(tier: Tier, d: &Dirs, script: &str) -> Value {
    confined(tier, d, true).args(["--", script]).run().json()
}

/// Asserts that the config of the git directory `git_dir` was restored,
/// for a reason that contains `why`.
fn restored(v: &Value, git_dir: &Path, why: &str) {
    let config = git_dir.join("config");
    let found = changes(v)
        .into_iter()
        .any(|(p, _, r)| p == config.to_str().unwrap() && r.contains(why));
    assert!(found, "{} not restored for {why:?}: {v}", config.display());
}

#[test]
fn a_push_url_into_the_deep_temp_dir_naming_a_repository_with_hooks_is_undone() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let inner = d.ws.join("a/b/inner");
        std::fs::create_dir_all(&inner).unwrap();
        repository(&inner);
        let evil = d.tmp.join("x/y/e.git");
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "mkdir -p {x} && git init -q --bare {evil} \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > {evil}/hooks/pre-receive \
                 && chmod +x {evil}/hooks/pre-receive \
                 && git -C a/b/inner remote add origin {evil} \
                 && git -C a/b/inner config remote.origin.pushurl {evil}",
                x = p(&d.tmp.join("x/y")),
                evil = p(&evil),
                ran = p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        restored(
            &v,
            &inner.join(".git"),
            &format!("names {}: hook pre-receive", p(&evil)),
        );
        sh(&inner, "git push -q origin HEAD:refs/heads/x", false);
        assert!(!d.ran.exists(), "{tier:?}: the pre-receive hook ran");
    }
}

#[test]
fn a_module_symlink_into_the_deep_temp_dir_is_put_aside() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let evil = d.tmp.join("m/n/e.git");
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "mkdir -p {mn} && git init -q --bare {evil} \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > {evil}/hooks/post-checkout \
                 && chmod +x {evil}/hooks/post-checkout \
                 && mkdir -p .git/modules && ln -s {evil} .git/modules/evil",
                mn = p(&d.tmp.join("m/n")),
                evil = p(&evil),
                ran = p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(
            &v,
            &d.ws.join(".git/modules/evil"),
            "a symlink to a directory in a git directory",
        );
    }
}

#[test]
fn a_repository_an_earlier_run_pointed_at_in_the_deep_temp_dir_is_judged_when_it_changes() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let r = d.tmp.join("a/b/r");
        // Run 1: a benign repository deep in the temp dir, and a `.git`
        // file in the workspace pointing at it: it passes.
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "mkdir -p {r} && git init -q {r} && mkdir x && echo 'gitdir: {r}/.git' > x/.git",
                r = p(&r)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(changes(&v), vec![], "{tier:?}: {v}");
        // Run 2: that repository gains a command-running key.
        let v = run_with_temp(
            tier,
            &d,
            &format!("git -C {} config core.fsmonitor '{}'", p(&r), touch(&d)),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        restored(&v, &r.join(".git"), "config key core.fsmonitor");
        sh(&d.ws.join("x"), "git status --short", false);
        assert!(!d.ran.exists(), "{tier:?}: the fsmonitor ran");
    }
}

#[test]
fn a_clone_of_the_users_own_repository_deep_in_the_temp_dir_passes_and_a_new_remote_to_one_with_receive_hooks_goes()
 {
    // The snapshot has no history of either: whatever their age, what a
    // reference made during the run leads to must pass as new (an earlier
    // confined run may have planted it). Through a URL only the hooks a
    // push runs count: the clone's source keeps its pre-commit and
    // passes; a remote to a repository with a pre-receive hook goes, even
    // the user's own (docs/known-limits.md).
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        let src = d.tmp.join("deep/src");
        let bare = d.tmp.join("deep/x/bare.git");
        std::fs::create_dir_all(&src).unwrap();
        repository(&src);
        sh(
            &d.tmp,
            &format!(
                "printf '#!/bin/sh\\nexit 0\\n' > {s}/.git/hooks/pre-commit && chmod +x {s}/.git/hooks/pre-commit \
                 && git init -q --bare {b} && printf '#!/bin/sh\\nexit 0\\n' > {b}/hooks/pre-receive \
                 && chmod +x {b}/hooks/pre-receive",
                s = p(&src),
                b = p(&bare)
            ),
            true,
        );
        // Three levels down: a repository nearer the top has its own
        // config read-only under the read-only tree.
        let v = run_with_temp(tier, &d, &format!("git clone -q {} a/b/c1", p(&src)));
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(changes(&v), vec![], "{tier:?}: {v}");
        assert!(d.ws.join("a/b/c1/.git").is_dir());
        let v = run_with_temp(
            tier,
            &d,
            &format!("git -C a/b/c1 remote add mine {}", p(&bare)),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        restored(
            &v,
            &d.ws.join("a/b/c1/.git"),
            &format!("remote.mine.url names {}: hook pre-receive", p(&bare)),
        );
    }
}

/// A bare repository the run makes deep in the temp dir, whose
/// `pre-receive` hook marks `d.ran` (a push to it runs it).
fn evil_bare(d: &Dirs) -> String {
    format!(
        "mkdir -p $TMPDIR/a/b && git init -q --bare $TMPDIR/a/b/evil.git \
         && printf '#!/bin/sh\\ntouch {ran}\\n' > $TMPDIR/a/b/evil.git/hooks/pre-receive \
         && chmod +x $TMPDIR/a/b/evil.git/hooks/pre-receive",
        ran = p(&d.ran)
    )
}

#[test]
fn every_way_git_takes_a_local_url_is_followed_into_the_temp_dir() {
    // The ways git resolves a push URL to a local repository (transport.c,
    // path.c `enter_repo`): a file:// URL with a host or escapes, a path
    // without the `.git` suffix, a path relative to the worktree.
    if !have_git() {
        return;
    }
    for tier in tiers() {
        for url in [
            "file://localhost$TMPDIR/a/b/evil.git",
            "file://$TMPDIR/%61/b/evil.git",
            "$TMPDIR/a/b/evil",
            "../../../../tmp/a/b/evil.git",
        ] {
            let d = dirs();
            let inner = d.ws.join("a/b/inner");
            std::fs::create_dir_all(&inner).unwrap();
            repository(&inner);
            let v = run_with_temp(
                tier,
                &d,
                &format!(
                    "{} && git -C a/b/inner remote add origin {url}",
                    evil_bare(&d)
                ),
            );
            assert_eq!(v["exit_code"], 0, "{tier:?} {url}: {v}");
            assert_ne!(changes(&v), vec![], "{tier:?} {url}: {v}");
            sh(&inner, "git push -q origin HEAD:refs/heads/x", false);
            assert!(!d.ran.exists(), "{tier:?} {url}: the pre-receive hook ran");
        }
    }
}

#[test]
fn a_remote_name_key_given_a_path_and_a_worktree_in_the_temp_dir_are_undone() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        for (line, why) in [
            (
                "git -C a/b/inner config remote.pushDefault $TMPDIR/a/b/evil.git",
                "remote.pushdefault names ",
            ),
            (
                "git -C a/b/inner config core.worktree $TMPDIR/a/w",
                "config key core.worktree",
            ),
        ] {
            let d = dirs();
            let inner = d.ws.join("a/b/inner");
            std::fs::create_dir_all(&inner).unwrap();
            repository(&inner);
            let v = run_with_temp(tier, &d, &format!("{} && {line}", evil_bare(&d)));
            assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
            restored(&v, &inner.join(".git"), why);
        }
    }
}

#[test]
fn the_walked_top_of_the_temp_dir_judges_old_directories_and_follows_symlinks() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // An old plain directory at the top of the temp dir made a
        // repository with a hook; and a new symlink there to a repository
        // made deeper, with an fsmonitor.
        std::fs::create_dir(d.tmp.join("build")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "git init -q --bare $TMPDIR/build \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > $TMPDIR/build/hooks/reference-transaction \
                 && chmod +x $TMPDIR/build/hooks/reference-transaction \
                 && mkdir -p $TMPDIR/z/y && git init -q $TMPDIR/z/y/clone2 \
                 && git -C $TMPDIR/z/y/clone2 config core.fsmonitor '{t}' \
                 && ln -s $TMPDIR/z/y/clone2 $TMPDIR/clone2",
                ran = p(&d.ran),
                t = touch(&d)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.tmp.join("build"), "hook reference-transaction");
        put_aside(
            &v,
            &d.tmp.join("z/y/clone2/.git"),
            "config key core.fsmonitor",
        );
    }
}

#[test]
fn a_repository_planted_deep_in_the_temp_dir_by_an_earlier_run_is_judged_when_a_later_run_points_at_it()
 {
    // Run 1 plants, pointing at nothing; run 2 points at it (a remote, a
    // symlink at the temp dir's top, a `.git` file): the repository is
    // older than run 2, and judged as new all the same.
    if !have_git() {
        return;
    }
    for tier in tiers() {
        for (point, used) in [
            (
                "git -C a/b/inner remote add origin $TMPDIR/a/b/evil.git",
                "git -C a/b/inner push -q origin HEAD:refs/heads/x",
            ),
            (
                "ln -s a/b/evil.git $TMPDIR/evil",
                "git -C ../tmp/evil fetch -q ../ws/a/b/inner HEAD:refs/heads/y",
            ),
            (
                "mkdir w && echo \"gitdir: $TMPDIR/a/b/evil.git\" > w/.git",
                "git -C w fetch -q ../a/b/inner HEAD:refs/heads/z",
            ),
        ] {
            let d = dirs();
            let inner = d.ws.join("a/b/inner");
            std::fs::create_dir_all(&inner).unwrap();
            repository(&inner);
            let v = run_with_temp(
                tier,
                &d,
                &format!(
                    "{} && printf '#!/bin/sh\\ntouch {ran}\\n' > $TMPDIR/a/b/evil.git/hooks/reference-transaction \
                     && chmod +x $TMPDIR/a/b/evil.git/hooks/reference-transaction",
                    evil_bare(&d),
                    ran = p(&d.ran)
                ),
            );
            assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
            std::thread::sleep(std::time::Duration::from_millis(50));
            let v = run_with_temp(tier, &d, point);
            assert_eq!(v["exit_code"], 0, "{tier:?} {point}: {v}");
            assert_ne!(changes(&v), vec![], "{tier:?} {point}: {v}");
            sh(&d.ws, used, false);
            assert!(!d.ran.exists(), "{tier:?} {point}: a planted hook ran");
        }
    }
}

#[test]
fn urls_through_magic_links_home_and_linked_worktrees_and_legacy_remote_files_are_judged() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        for (line, used) in [
            (
                "git -C a/b/inner remote add origin /proc/self/cwd/../../../../tmp/a/b/evil.git",
                "git -C a/b/inner push -q origin HEAD:refs/heads/x",
            ),
            (
                "git -C a/b/inner remote add origin '~/a/b/evil.git'",
                "HOME=../../../../tmp git -C a/b/inner push -q origin HEAD:refs/heads/x",
            ),
            (
                "mkdir -p a/b/inner/.git/remotes && printf 'URL: %s\\n' $TMPDIR/a/b/evil.git > a/b/inner/.git/remotes/other",
                "git -C a/b/inner push -q other HEAD:refs/heads/x",
            ),
            (
                "git -C a/b/inner worktree add -q ../../x/y/wt -b wtb \
                 && git -C a/b/inner remote add origin ../../../../tmp/a/b/evil.git",
                "cd x/y/wt && git push -q origin HEAD:refs/heads/x",
            ),
        ] {
            let d = dirs();
            let inner = d.ws.join("a/b/inner");
            std::fs::create_dir_all(&inner).unwrap();
            repository(&inner);
            let v = confined(tier, &d, true)
                .env("HOME", &d.tmp)
                .args(["--", &format!("{} && {line}", evil_bare(&d))])
                .run()
                .json();
            assert_eq!(v["exit_code"], 0, "{tier:?} {line}: {v}");
            assert_ne!(changes(&v), vec![], "{tier:?} {line}: {v}");
            sh(&d.ws, used, false);
            assert!(!d.ran.exists(), "{tier:?} {line}: the pre-receive hook ran");
        }
    }
}

#[test]
fn a_clone_with_submodules_into_the_temp_dir_keeps_its_submodules_worktree() {
    // git writes `core.worktree = ../../../sub` into the clone's
    // `.git/modules/sub`: inside its superproject, where git put it.
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        let up = d.tmp.join("deep/up");
        let sup = d.tmp.join("deep/super");
        std::fs::create_dir_all(&up).unwrap();
        std::fs::create_dir_all(&sup).unwrap();
        repository(&up);
        repository(&sup);
        sh(
            &sup,
            &format!(
                "git -c protocol.file.allow=always submodule add -q {} sub && git commit -q -m sub",
                p(&up)
            ),
            true,
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "git -c protocol.file.allow=always clone -q --recurse-submodules {} $TMPDIR/build",
                p(&sup)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_eq!(changes(&v), vec![], "{tier:?}: {v}");
        sh(&d.tmp.join("build"), "git status --short", true);
    }
}

#[test]
fn remote_names_git_takes_for_paths_push_to_checkout_and_a_target_moved_under_an_old_url_are_judged()
 {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        // A remote name no section defines is a path to git: `evil`, a
        // gitfile in the worktree naming a repository planted earlier.
        let d = dirs();
        let inner = d.ws.join("a/b/inner");
        std::fs::create_dir_all(&inner).unwrap();
        repository(&inner);
        let v = run_with_temp(tier, &d, &evil_bare(&d));
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let v = run_with_temp(
            tier,
            &d,
            "cd a/b/inner && b=$(git symbolic-ref --short HEAD) \
             && git config branch.$b.remote evil && git config branch.$b.merge refs/heads/$b \
             && echo \"gitdir: $TMPDIR/a/b/evil.git\" > evil",
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_ne!(changes(&v), vec![], "{tier:?}: {v}");
        sh(&inner, "git push -q", false);
        assert!(
            !d.ran.exists(),
            "{tier:?}: a remote name led a push to a planted hook"
        );

        // A non-bare remote that takes pushes into its worktree runs the
        // checkout's hooks too.
        let d = dirs();
        let inner = d.ws.join("a/b/inner");
        std::fs::create_dir_all(&inner).unwrap();
        repository(&inner);
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "mkdir -p $TMPDIR/g/h && git init -q $TMPDIR/g/h/t \
                 && git -C $TMPDIR/g/h/t config receive.denyCurrentBranch updateInstead \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > $TMPDIR/g/h/t/.git/hooks/post-index-change \
                 && chmod +x $TMPDIR/g/h/t/.git/hooks/post-index-change \
                 && git -C a/b/inner remote add origin $TMPDIR/g/h/t",
                ran = p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_ne!(changes(&v), vec![], "{tier:?}: {v}");
        sh(&inner, "git push -q origin HEAD", false);
        assert!(!d.ran.exists(), "{tier:?}: post-index-change ran");

        // An old URL that led nowhere, and a run that moves a planted
        // repository's parent into its place.
        let d = dirs();
        let inner = d.ws.join("a/b/inner");
        std::fs::create_dir_all(&inner).unwrap();
        repository(&inner);
        let v = run_with_temp(
            tier,
            &d,
            &format!(
                "git -C a/b/inner remote add origin $TMPDIR/x/y/r.git && mkdir -p $TMPDIR/x $TMPDIR/m/n \
                 && git init -q --bare $TMPDIR/m/n/r.git \
                 && printf '#!/bin/sh\\ntouch {ran}\\n' > $TMPDIR/m/n/r.git/hooks/pre-receive \
                 && chmod +x $TMPDIR/m/n/r.git/hooks/pre-receive",
                ran = p(&d.ran)
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let v = run_with_temp(tier, &d, "mv $TMPDIR/m/n $TMPDIR/x/y");
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        assert_ne!(changes(&v), vec![], "{tier:?}: {v}");
        sh(&inner, "git push -q origin HEAD:refs/heads/x", false);
        assert!(
            !d.ran.exists(),
            "{tier:?}: a moved repository's pre-receive ran"
        );
    }
}

#[test]
fn a_deep_tree_does_not_stop_the_check_and_an_old_tree_moved_below_its_depth_is_the_runs() {
    if !have_git() {
        return;
    }
    for tier in tiers() {
        let d = dirs();
        repository(&d.ws);
        // 240 levels: the walk's stack must hold them (it overflowed once,
        // and the plant beside it went unjudged).
        let v = run(
            tier,
            &d,
            &format!(
                "p=.; for i in $(seq 240); do p=$p/b; done; mkdir -p $p; mkdir -p plant && \
                 cd plant && git init -q . && git config core.fsmonitor 'touch {}'",
                d.ran.display()
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        put_aside(&v, &d.ws.join("plant/.git"), "config key core.fsmonitor");
        // An old tree moved below the depth limit, a repository planted in
        // a part of it the walk cannot reach.
        sh(&d.ws, "mkdir -p old/c/g", true);
        let v = run(
            tier,
            &d,
            &format!(
                "p=.; for i in $(seq 255); do p=$p/a; done; mkdir -p $p; mv old $p/old; \
                 cd $p/old/c/g && git init -q . && git config core.fsmonitor 'touch {}'",
                d.ran.display()
            ),
        );
        assert_eq!(v["exit_code"], 0, "{tier:?}: {v}");
        let deep: PathBuf = std::iter::repeat_n("a", 255).collect();
        let moved = d.ws.join(deep).join("old");
        assert!(
            changes(&v)
                .iter()
                .any(|(p, c, _)| moved.join("c").starts_with(p) && c == "unchecked")
                && std::fs::symlink_metadata(moved.join("c/g/.git")).is_err(),
            "{tier:?}: the moved tree's repository is still there: {v}"
        );
        assert!(!d.ran.exists(), "{tier:?}: a planted command ran");
    }
}
