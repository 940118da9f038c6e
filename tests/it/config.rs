//! The configuration file: defaults, caps, precedence, origins, errors.
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

/// Runs `dsh-exec ARGS` with `config` as its configuration file.
fn with_config(config: &Path, args: &[&str]) -> Outcome {
    Test::new().env("DSH_EXEC_CONFIG", config).args(args).run()
}

/// The JSON explanation of `true` under `config` and `args`.
fn explain(config: &Path, args: &[&str]) -> Value {
    let out = with_config(
        config,
        &[&["explain", "--json"], args, &["--", "true"]].concat(),
    );
    out.expect_status(0);
    out.json()
}

#[test]
fn flag_beats_config_beats_default_and_explain_names_the_origin() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[defaults]\ntimeout = \"2m\"\nstdout_max_bytes = \"64K\"\n",
    )
    .unwrap();
    let v = explain(&cfg, &[]);
    assert_eq!(v["config_file"], cfg.to_str().unwrap());
    assert_eq!(
        v["timeout_ms"],
        json!({"value": 120000, "origin": "config"})
    );
    assert_eq!(
        v["stdout_max_bytes"],
        json!({"value": 65536, "origin": "config"})
    );
    assert_eq!(
        v["kill_after_ms"],
        json!({"value": 2000, "origin": "default"})
    );
    let v = explain(&cfg, &["--timeout", "5s"]);
    assert_eq!(v["timeout_ms"], json!({"value": 5000, "origin": "flag"}));
}

#[test]
fn caps_clamp_flags_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[caps]\nmax_timeout = \"1s\"\nmax_stdout_bytes = 4\n").unwrap();
    let v = explain(&cfg, &["--timeout", "10s", "--stdout-max-bytes", "1K"]);
    assert_eq!(
        v["timeout_ms"],
        json!({"value": 1000, "origin": "flag", "capped": "10s capped at 1s"})
    );
    assert_eq!(v["stdout_max_bytes"]["capped"], "1KiB capped at 4");
    let v = explain(&cfg, &["--timeout", "0"]);
    assert_eq!(
        v["timeout_ms"],
        json!({"value": 1000, "origin": "flag", "capped": "none capped at 1s"})
    );

    let out = with_config(
        &cfg,
        &[
            "--timeout",
            "10s",
            "--spill-dir",
            dir.path().to_str().unwrap(),
            "--",
            "sleep 5",
        ],
    );
    let c = cfg.display();
    out.expect_status(124).expect_stdout(&format!(
        "[timeout 10s capped at 1s by {c}]\n[timed out after 1s]\n[killed by signal: SIGTERM]\n"
    ));
    let v = with_config(&cfg, &["--json", "--timeout", "1h", "--", "true"]).json();
    assert_eq!(
        v["capped"],
        json!([format!("timeout 1h capped at 1s by {c}")])
    );
    // A built-in default above a cap is lowered without a notice.
    let v = with_config(&cfg, &["--json", "--", "true"]).json();
    assert_eq!(v["timeout_ms"], 1000);
    assert_eq!(v.get("capped"), None);
}

#[test]
fn a_malformed_config_is_an_error_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[defaults]\n# comment\ntimeout = \"soon\"\n").unwrap();
    let out = with_config(&cfg, &["--", "echo ran"]);
    out.expect_status(125).expect_stdout("");
    let err = &out.stderr;
    assert!(
        err.starts_with(&format!(
            "dsh-exec: error: config file {}: line 3, key timeout: invalid duration 'soon'",
            cfg.display()
        )),
        "{err}"
    );
    assert!(err.trim_end().ends_with("(CONFIG_INVALID)"), "{err}");
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn a_named_config_that_is_missing_is_an_error_but_a_default_location_is_optional() {
    let out = with_config(Path::new("/nonexistent/dsh.toml"), &["--", "true"]);
    out.expect_status(125);
    assert!(out.stderr.contains("CONFIG_INVALID"));
    let dir = tempfile::tempdir().unwrap();
    Test::new()
        .env("XDG_CONFIG_HOME", dir.path())
        .args(["--", "true"])
        .run()
        .expect_status(0);
}

#[test]
fn the_xdg_location_is_read_and_can_set_a_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dsh-exec")).unwrap();
    std::fs::write(
        dir.path().join("dsh-exec/config.toml"),
        "[defaults]\nsandbox = \"read-only\"\n",
    )
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let v = Test::new()
        .env("XDG_CONFIG_HOME", dir.path())
        .args(["--json", "-C", ws.path().to_str().unwrap(), "--", "touch f"])
        .run()
        .json();
    assert_eq!(v["sandbox"]["mode"], "read-only");
    assert!(!ws.path().join("f").exists());
}

#[test]
fn the_config_allow_list_is_the_policy_until_a_network_flag_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[defaults]\nnetwork_allow = [\"pypi.org\", \"*.pythonhosted.org:443\"]\n",
    )
    .unwrap();
    let v = explain(&cfg, &[]);
    assert_eq!(
        v["sandbox"]["network"],
        json!({"value": "allow-list", "origin": "config"})
    );
    assert_eq!(
        v["sandbox"]["network_allow"],
        json!(["pypi.org", "*.pythonhosted.org:443"])
    );
    let v = explain(&cfg, &["--network", "loopback"]);
    assert_eq!(
        v["sandbox"]["network"],
        json!({"value": "loopback", "origin": "flag"})
    );
    assert_eq!(v["sandbox"]["network_allow"], json!([]));
    std::fs::write(&cfg, "[defaults]\nnetwork_allow = [\"a b\"]\n").unwrap();
    let out = with_config(&cfg, &["--", "true"]);
    assert_eq!(out.status, 125, "{}", out.stderr);
    assert!(out.stderr.contains("invalid host 'a b'"), "{}", out.stderr);
}

#[test]
fn the_config_network_key_and_network_allow_open_what_a_confining_mode_closes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "").unwrap();
    // The network facts of a confined run, and what the command was told.
    let facts = |args: &[&str]| {
        let v = with_config(
            &cfg,
            &[
                &["--json", "-C", dir.path().to_str().unwrap()],
                args,
                &["--", "echo $DSH_SANDBOX_NETWORK"],
            ]
            .concat(),
        )
        .json();
        (
            v["sandbox"]["network"].clone(),
            v["sandbox"]["network_enforcement"].clone(),
            v["stdout"]["text"].clone(),
        )
    };
    let (allow, loopback) = (
        (json!("allow"), json!("none"), json!("allow\n")),
        (json!("loopback"), json!("gate"), json!("loopback\n")),
    );
    // Neither: the mode's default.
    assert_eq!(facts(&["-s", "workspace-write"]), loopback);
    // The flag opens it, as before.
    assert_eq!(
        facts(&["-s", "workspace-write", "--network", "allow"]),
        allow
    );
    // So does the file's key, for every run whose flags name no policy.
    std::fs::write(&cfg, "[defaults]\nnetwork = \"allow\"\n").unwrap();
    assert_eq!(facts(&["-s", "workspace-write"]), allow);
    assert_eq!(facts(&["-s", "read-only"]), allow);
    assert_eq!(
        explain(&cfg, &["-s", "read-only"])["sandbox"]["network"],
        json!({"value": "allow", "origin": "config"})
    );
    // A flag replaces it.
    assert_eq!(
        facts(&["-s", "workspace-write", "--network", "loopback"]),
        loopback
    );
    // `deny` in the file confines the network of a run with no mode, as
    // `--network deny` alone does (full-access).
    std::fs::write(&cfg, "[defaults]\nnetwork = \"deny\"\n").unwrap();
    assert_eq!(facts(&[]), (json!("deny"), json!("full"), json!("deny\n")));
    // Not beside an allow-list, which is the allow= policy.
    std::fs::write(
        &cfg,
        "[defaults]\nnetwork = \"allow\"\nnetwork_allow = [\"pypi.org\"]\n",
    )
    .unwrap();
    let out = with_config(&cfg, &["--", "true"]);
    out.expect_status(125).expect_stderr(&format!(
        "dsh-exec: error: config file {}: line 2, key network: network and network_allow \
         cannot both be given: network_allow is the allow= policy (leave network out) \
         (CONFIG_INVALID)\n",
        cfg.display()
    ));
}

#[test]
fn prune_spill_after_zero_is_refused_and_explain_shows_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[defaults]\nprune_spill_after = \"0\"\n").unwrap();
    let out = with_config(&cfg, &["--", "true"]);
    assert_eq!(out.status, 125, "{}", out.stderr);
    assert!(out.stderr.contains("is less than 1h"), "{}", out.stderr);
    std::fs::write(&cfg, "[defaults]\nprune_spill_after = \"7d\"\n").unwrap();
    let v = explain(&cfg, &[]);
    assert_eq!(v["prune_spill_after_ms"], json!(7 * 24 * 3600 * 1000u64));
}
