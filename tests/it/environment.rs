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
    out.expect_status(125).expect_stdout("");
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

/// Each name and value the scrub must catch, and each it must keep, through
/// the real binary: what `env` in the child shows, and `env_scrubbed`.
#[test]
fn plain_secrets_are_scrubbed_and_harmless_names_are_kept() {
    let scrubbed = [
        ("MY_PASS", "x"),
        ("DATABASE_URL", "postgres://u:pw@h/db"),
        ("NPM_CONFIG__AUTH", "x"),
        ("MYSQL_PWD", "x"),
        ("GPG_PASSPHRASE", "x"),
        ("BW_SESSION", "x"),
        ("OP_SESSION_x", "x"),
        ("HTTPS_PROXY", "http://user:pw@proxy:3128"),
        ("SENTRY_DSN", "x"),
        ("SLACK_WEBHOOK_URL", "x"),
        ("DOCKER_AUTH_CONFIG", "x"),
        ("AZURE_STORAGE_CONNECTION_STRING", "x"),
        ("CI_JOB_JWT", "x"),
        ("SESSION_COOKIE", "x"),
        ("PRIVATE_PEM", "x"),
        ("GH_PAT", "x"),
        ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
        ("REDIS_URL", "redis://:pw@h"),
        ("V_GITHUB", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("V_AWS", "AKIAIOSFODNN7EXAMPLE"),
        ("V_OPENAI", "sk-proj-abcdefghijklmnopqrstuvwx"),
        ("V_PEM", "-----BEGIN RSA PRIVATE KEY-----\nx\n"),
        ("API_KEY2", "x"),
        ("SLACK_TOKEN1", "x"),
        (
            "REPO_URL",
            "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
        ),
        (
            "MIRROR_URL",
            "https://0123456789abcdef0123456789abcdef01234567@github.com/o/r.git",
        ),
        ("MINIO_ACCESSKEY", "x"),
        ("GPG_PRIVATEKEY", "x"),
        ("PROXY_AUTHORIZATION", "x"),
        ("APIKEYVALUE", "x"),
        ("GITLAB_HEADER", "PRIVATE-TOKEN: 9f8e7d6c5b4a"),
        ("SECRET_FILE", "hunter2"),
        // Credential words of secret scanners and codex's
        // shell_environment_policy that the list once missed.
        ("BEARER", "abc"),
        ("API_BEARER", "abc"),
        ("GOOGLE_OAUTH_REFRESH", "abc"),
        ("SIGNING_HMAC", "abc"),
        ("MFA_TOTP_SEED", "abc"),
        ("VAULT_PASSCODE", "abc"),
        ("WEB_PASSKEY", "abc"),
        // An acronym before a capitalised word is one word (HMACKey), and
        // compounds end or start with the word.
        ("HMACKey", "abc"),
        ("TOTPSeed", "abc"),
        ("USERPASSCODE", "abc"),
        ("ADMINPASSKEY", "abc"),
        ("GITHUBOAUTH", "abc"),
        ("APPBEARER", "abc"),
    ];
    let kept = [
        ("MONKEY", "1"),
        ("MONKEY_PATCH_LEVEL", "2"),
        ("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring"),
        ("PLAIN_DB_URL", "postgres://h/db"),
        ("XDG_SESSION_TYPE", "tty"),
        ("GIT_CONFIG_KEY_0", "safe.directory"),
        ("AUTH0_DOMAIN", "example.auth0.com"),
        ("MODEL_ID", "hf_internal_testing_tiny_random_bert_x"),
        ("COMMIT_MESSAGE", "token refresh: fix race"),
        ("SSL_KEY_FILE", "server.key"),
        ("SASS_BINARY_SITE", "https://example.org/"),
        ("OTP_VERSION", "26"),
        ("OAUTHLIB_DEBUG", "verbose"),
    ];
    let mut t = Test::new();
    for (k, v) in scrubbed.iter().chain(&kept) {
        t = t.env(k, v);
    }
    let out = t.args(["--json", "--", "env"]).run();
    let v = out.json();
    let env = v["stdout"]["text"].as_str().unwrap();
    for (k, _) in scrubbed {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{k}="))),
            "{k} leaked"
        );
    }
    for (k, val) in kept {
        assert!(
            env.lines().any(|l| l == format!("{k}={val}")),
            "{k} missing"
        );
    }
    let mut names: Vec<&str> = scrubbed.iter().map(|(k, _)| *k).collect();
    names.sort();
    let listed: Vec<&str> = v["env_scrubbed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for n in &names {
        assert!(listed.contains(n), "{n} not in env_scrubbed: {listed:?}");
    }
    assert!(!out.stdout.contains("pw@"), "a value reached the result");
}

#[test]
fn env_policy_core_and_none_pass_what_they_say() {
    let run = |policy: &str| {
        let out = Test::new()
            .env("EDITOR", "vi")
            .env("LC_TIME", "C")
            .args(["--env-policy", policy, "-e", "EXTRA=1", "--", "env | sort"])
            .run();
        out.expect_status(0);
        out.stdout
    };
    let core = run("core");
    assert!(!core.contains("EDITOR="), "{core}");
    assert!(
        core.contains("LC_TIME=C\n") && core.contains("PATH="),
        "{core}"
    );
    assert!(core.contains("EXTRA=1\n"), "{core}");
    let none = run("none");
    assert!(
        !none.contains("PATH=") && !none.contains("LC_TIME"),
        "{none}"
    );
    assert!(
        none.contains("EXTRA=1\n") && none.contains("PAGER=cat\n"),
        "{none}"
    );
    let (_, status) = crate::support::run(&["--env-policy", "some", "--", "true"]);
    assert_eq!(status, 125);
}

#[test]
fn scrubbed_values_leave_dsh_exec_s_own_environment_block() {
    // Only a command with CAP_SYS_PTRACE can read the environ of the
    // non-dumpable dsh-exec: as root, unconfined.
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: reading a non-dumpable parent's environ needs root");
        return;
    }
    let out = Test::new()
        .env("SCRUBBED_TOKEN", "tok-value-123")
        .env("PLAIN_KEPT", "plain-value")
        .args([
            "--",
            "tr '\\0' '\\n' < /proc/$PPID/environ | grep -a -E '^(SCRUBBED_TOKEN|PLAIN_KEPT)='",
        ])
        .run();
    assert_eq!(
        out.stdout,
        "PLAIN_KEPT=plain-value\nSCRUBBED_TOKEN=\n[exit code: 0]\n"
    );
    // -e NAME still passes the value through: it was read before the wipe.
    Test::new()
        .env("SCRUBBED_TOKEN", "tok-value-123")
        .args(["-e", "SCRUBBED_TOKEN", "--", "echo $SCRUBBED_TOKEN"])
        .run()
        .expect_stdout("tok-value-123\n[exit code: 0]\n");
}

#[test]
fn env_policy_none_still_names_the_granted_temp_dir_and_env_scrubbed_omits_what_e_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = Test::new()
        .env("TMPDIR", tmp.path())
        .env("A_TOKEN", "t")
        .env("B_TOKEN", "t")
        .args([
            "--json",
            "-s",
            "workspace-write",
            "--env-policy",
            "none",
            "-e",
            "A_TOKEN",
            "-C",
        ])
        .arg(ws.path())
        .args(["--", "mktemp >/dev/null && echo made"])
        .run();
    let v = out.json();
    assert_eq!(v["stdout"]["text"], "made\n", "{v}");
    assert_eq!(v["env_scrubbed"], serde_json::json!(["B_TOKEN"]));
}

/// git's configuration in the environment (GIT_CONFIG_COUNT and its
/// pairs, as actions/checkout passes them): a pair with a plain value
/// reaches git; when a value is withheld (an Authorization header), the
/// count goes with it, so that git ignores the pairs instead of refusing
/// to start.
#[test]
fn git_config_pairs_reach_git_and_a_withheld_value_takes_the_count_along() {
    let plain = Test::new()
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .args(["--", "git config --get safe.directory"])
        .run();
    plain.expect_stdout("*\n[exit code: 0]\n");
    let withheld = Test::new()
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.https://github.com/.extraheader")
        .env(
            "GIT_CONFIG_VALUE_0",
            "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0",
        )
        .args([
            "--json",
            "--",
            "git config --get http.https://github.com/.extraheader; echo rc=$?",
        ])
        .run()
        .json();
    assert_eq!(withheld["stdout"]["text"], "rc=1\n", "{withheld}");
    assert_eq!(withheld["stderr"]["text"], "", "{withheld}");
    assert_eq!(
        withheld["env_scrubbed"],
        serde_json::json!(["GIT_CONFIG_COUNT", "GIT_CONFIG_VALUE_0"])
    );
    // A key with a password in it goes the same way.
    let key = Test::new()
        .env("GIT_CONFIG_COUNT", "2")
        .env(
            "GIT_CONFIG_KEY_0",
            "url.https://u:pw@example.com/.insteadOf",
        )
        .env("GIT_CONFIG_VALUE_0", "https://example.com/")
        .env("GIT_CONFIG_KEY_1", "safe.directory")
        .env("GIT_CONFIG_VALUE_1", "*")
        .args([
            "--json",
            "--",
            "git config --get safe.directory; echo rc=$?",
        ])
        .run()
        .json();
    assert_eq!(key["stdout"]["text"], "rc=1\n", "{key}");
    assert_eq!(key["stderr"]["text"], "", "{key}");
}
