//! The child environment: scrub, non-interactive overrides, explicit, managed.
use crate::support::*;

/// The environment `env` sees, run with `extra_args` under an ambient
/// environment holding credential-shaped and managed names.
fn child_env(extra_args: &[&str]) -> String {
    let out = Test::new()
        .env("FOO_TOKEN", "t1")
        .env("MY_API_KEY", "k1")
        .env("DB_PASSWORD", "p1")
        .env("aws_secret_access_key", "s1")
        .env("DSH_ANYTHING", "d1")
        .env("PLAIN", "plain-value")
        .env("PAGER", "more")
        .arg("--json")
        .args(extra_args)
        .args(["--", "env"])
        .run();
    out.expect_status(0);
    out.json()["stdout"]["text"].as_str().unwrap().to_string()
}

fn lines(env: &str) -> Vec<&str> {
    env.lines().collect()
}

#[test]
fn credential_shaped_and_managed_names_are_scrubbed() {
    let env = child_env(&[]);
    let l = lines(&env);
    for name in [
        "FOO_TOKEN=",
        "MY_API_KEY=",
        "DB_PASSWORD=",
        "aws_secret_access_key=",
        "DSH_ANYTHING=",
    ] {
        assert!(
            !l.iter().any(|x| x.starts_with(name)),
            "{name} leaked:\n{env}"
        );
    }
    assert!(l.contains(&"PLAIN=plain-value"), "{env}");
}

#[test]
fn non_interactive_overrides_are_set() {
    let env = child_env(&[]);
    let l = lines(&env);
    for kv in [
        "PAGER=cat",
        "GIT_PAGER=cat",
        "MANPAGER=cat",
        "GIT_TERMINAL_PROMPT=0",
        "TERM=dumb",
        "NO_COLOR=1",
    ] {
        assert!(l.contains(&kv), "{kv} missing:\n{env}");
    }
}

#[test]
fn an_explicit_pass_through_brings_a_scrubbed_value_back() {
    let env = child_env(&["-e", "MY_API_KEY"]);
    assert!(lines(&env).contains(&"MY_API_KEY=k1"), "{env}");
    assert!(!lines(&env).iter().any(|x| x.starts_with("FOO_TOKEN=")));
}

#[test]
fn an_explicit_entry_beats_an_override() {
    let env = child_env(&["-e", "PAGER=less"]);
    assert!(lines(&env).contains(&"PAGER=less"), "{env}");
}

#[test]
fn a_managed_entry_beats_an_explicit_one_whatever_the_order() {
    let env = child_env(&["--dsh-env", "DSH_X=1", "-e", "DSH_X=2"]);
    assert!(lines(&env).contains(&"DSH_X=1"), "{env}");
    assert!(!lines(&env).contains(&"DSH_X=2"), "{env}");
}

#[test]
fn a_managed_key_without_the_prefix_is_a_usage_error() {
    let out = Test::new()
        .args(["--dsh-env", "FOO=1", "--", "echo ran"])
        .run();
    out.expect_status(2).expect_stdout("");
    assert!(
        out.stderr.contains("must start with DSH_"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_name_given_twice_keeps_its_first_value_and_every_layer_replaces_it() {
    // execve(2) allows an environment with a name twice; std::process does
    // not, so the binary is started through Python's ctypes.
    let script = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
b = sys.argv[1].encode()
argv = [b, b"-e", b"FOO=explicit", b"--", b"env | grep -E '^(FOO|PAGER|BAR)=' | sort"]
env = [b"PATH=/usr/bin:/bin", b"FOO=one", b"PAGER=less", b"BAR=first", b"FOO=two", b"PAGER=more", b"BAR=second"]
A = (ctypes.c_char_p * (len(argv) + 1))(*argv, None)
E = (ctypes.c_char_p * (len(env) + 1))(*env, None)
libc.execve(b, A, E)
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(bin())
        .output()
        .unwrap();
    assert_eq!(
        stdout(&out),
        "BAR=first\nFOO=explicit\nPAGER=cat\n[exit code: 0]\n"
    );
}
