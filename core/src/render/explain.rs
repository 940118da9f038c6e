//! `dsh-exec explain`: the resolved spec, each value with its origin, the
//! child environment changes, and the sandbox as it would be applied (the
//! writable roots opened as a run would open them). Runs nothing; values of
//! credential-shaped names are masked.

use owo_colors::OwoColorize;
use serde_json::{Value, json};

use crate::request::env::{Layer, display_value};
use crate::request::shell::find_shell;
use crate::sandbox::landlock::enforcement;
use crate::units::{format_duration, format_size};
use std::path::PathBuf;

use crate::sandbox::protect::Protection;
use crate::sandbox::{self, Mode, Policy, Roots, kernel_abi, open_roots};
use crate::spec::{Origin, Sourced, Spec, StdinSource};

fn origin_text(o: Origin) -> &'static str {
    o.as_str()
}

/// `(flag)`, `(config)`, `(default)`, with a cap when one applied:
/// `(flag; 2h capped at 1h)`.
fn note<T>(s: &Sourced<T>) -> String {
    match &s.capped {
        Some(c) => format!("({}; {c})", origin_text(s.origin)),
        None => format!("({})", origin_text(s.origin)),
    }
}

fn layer_text(l: Layer) -> &'static str {
    match l {
        Layer::Override => "override",
        Layer::Explicit => "explicit",
        Layer::Managed => "managed",
    }
}

fn stdin_text(s: &StdinSource) -> String {
    match s {
        StdinSource::Closed => "closed (end-of-file at once)".into(),
        StdinSource::File(p) => format!("file {}", p.display()),
        StdinSource::Inherited => "this process's stdin".into(),
        StdinSource::Pipe => "a pipe kept open for `job write` (--stdin pipe)".into(),
        StdinSource::Text(t) => format!("{} bytes of text", t.len()),
    }
}

fn timeout_text(t: Option<std::time::Duration>) -> String {
    t.map(format_duration).unwrap_or_else(|| "none".into())
}

/// A path as a (lossy) string: JSON cannot hold non-UTF-8 bytes.
fn lossy(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

fn stdin_json(s: &StdinSource) -> Value {
    match s {
        StdinSource::Closed => json!({"kind": "closed"}),
        StdinSource::File(p) => json!({"kind": "file", "path": lossy(p)}),
        StdinSource::Inherited => json!({"kind": "inherited"}),
        StdinSource::Pipe => json!({"kind": "pipe"}),
        StdinSource::Text(t) => json!({"kind": "text", "bytes": t.len()}),
    }
}

fn sourced_json<T>(s: &Sourced<T>, value: Value) -> Value {
    match &s.capped {
        Some(c) => json!({"value": value, "origin": s.origin, "capped": c}),
        None => json!({"value": value, "origin": s.origin}),
    }
}

/// How the sandbox of a spec would be applied, as a run would prepare it.
struct Applied {
    roots: Roots,
    protection: Protection,
    mount_namespace: bool,
    read_only_tree: bool,
    spill_dir: (PathBuf, bool),
}

fn applied(spec: &Spec, policy: &Policy) -> Applied {
    let roots = open_roots(policy);
    let protection = sandbox::protection(policy, &roots, &spec.workdir.value);
    let spill_dir = sandbox::spill_parent(policy, &roots, &spec.spill_dir.value);
    Applied {
        roots,
        protection,
        mount_namespace: sandbox::has_mount_namespace(),
        read_only_tree: sandbox::read_only_tree_available(),
        spill_dir,
    }
}

/// The enforcement with what the protected paths lack without a mount
/// namespace, as a run reports it.
fn full_enforcement(policy: &Policy, abi: i32, a: &Applied) -> crate::sandbox::Enforcement {
    let mut e = enforcement(policy, abi);
    if !a.mount_namespace && !a.protection.protected.is_empty() {
        e.missing.push(crate::sandbox::Unenforced::ProtectedPaths);
    }
    e
}

/// What the gate decides, for `explain`: with a read-only mount tree (and
/// not under `-i`) the socket calls and the mode changes that set
/// set-user-ID or set-group-ID; otherwise every metadata change too.
fn gate_calls(spec: &Spec, a: &Applied) -> &'static str {
    if a.read_only_tree && !spec.interactive {
        "connect, sendto, sendmsg, sendmmsg; chmod setting set-user-ID or set-group-ID; xattr"
    } else {
        "connect, sendto, sendmsg, sendmmsg; chmod, chown, utime, xattr"
    }
}

/// What bounds metadata changes (mode, owner, times, xattrs) to the
/// writable roots.
fn metadata_mechanism(spec: &Spec, a: &Applied) -> &'static str {
    match (a.read_only_tree, spec.interactive) {
        (true, false) => "read-only mounts outside the writable roots (EROFS)",
        (true, true) => "the gate (under -i the command holds the caller's descriptors)",
        (false, _) => "the gate (no read-only mount tree without CAP_SYS_ADMIN)",
    }
}

/// The scratch directory a run gets (`read-only`, `--no-temp-write`).
fn scratch(parent: &std::path::Path) -> String {
    format!(
        "a private directory in {}, made for the run (0700) and removed after it; $TMPDIR names it",
        parent.display()
    )
}

/// What the command gets of `/dev/shm` (POSIX shared memory).
fn shm(a: &Applied) -> &'static str {
    if a.mount_namespace {
        "a private tmpfs"
    } else if a.roots.shm_shared {
        "the shared one, writable (no mount namespace without CAP_SYS_ADMIN)"
    } else {
        "the shared one, read-only (no mount namespace without CAP_SYS_ADMIN)"
    }
}

/// How Unix sockets are decided, for `explain`.
const PATHNAME_SOCKETS: &str = "pathname: the run's own sockets (the gate, by sock_diag)";

fn terminals(spec: &Spec, a: &Applied) -> &'static str {
    if spec.interactive {
        "this terminal and /dev/tty only"
    } else if a.mount_namespace {
        "the ones it makes (a private devpts)"
    } else {
        "none (a private devpts needs CAP_SYS_ADMIN)"
    }
}

fn protection_mechanism(a: &Applied) -> &'static str {
    if a.mount_namespace {
        "read-only bind mounts in a mount namespace"
    } else {
        "restored after the run (no mount namespace without CAP_SYS_ADMIN)"
    }
}

/// How the read deny list is enforced.
const READ_DENY_MECHANISM: &str = "Landlock: read granted on every entry beside the way to each denied one (names stay listable; entries made during the run directly in those directories are not readable)";

/// The sandbox part of the explanation, as JSON (`null` without a sandbox).
fn sandbox_json(spec: &Spec) -> Value {
    let Some(policy) = &spec.sandbox else {
        return Value::Null;
    };
    let a = applied(spec, policy);
    let roots = &a.roots;
    let (abi, enforcement) = match kernel_abi() {
        Ok(abi) => (json!(abi), json!(full_enforcement(policy, abi, &a))),
        Err(e) => (Value::Null, json!({"error": e.to_string()})),
    };
    let confining = policy.mode.value.confines();
    json!({
        "gate": confining.then(|| json!({"calls": gate_calls(spec, &a), "mechanism": "seccomp user notification"})),
        "metadata": confining.then(|| metadata_mechanism(spec, &a)),
        "shm": confining.then(|| shm(&a)),
        "scratch": policy.scratch_parent.as_deref().map(scratch),
        "unix_sockets": confining.then(|| json!({
            "mechanism": "gate",
            "allowed": roots.unix_sockets.iter().map(|(_, p)| lossy(p)).collect::<Vec<_>>(),
        })),
        "protected": confining.then(|| json!({
            "mechanism": protection_mechanism(&a),
            "paths": a.protection.paths().into_iter().map(lossy).collect::<Vec<_>>(),
            "removed_if_created": a.protection.absent.iter().map(|p| lossy(p)).collect::<Vec<_>>(),
            "notes": a.protection.notes,
        })),
        "terminals": confining.then(|| terminals(spec, &a)),
        "read_denied": confining.then(|| json!({
            "mechanism": READ_DENY_MECHANISM,
            "paths": roots.read_denied.iter().map(|p| lossy(p)).collect::<Vec<_>>(),
            "exceptions": roots.read_exceptions.iter().map(|p| lossy(p)).collect::<Vec<_>>(),
            "read_roots": roots.read_roots.iter().map(|p| lossy(p)).collect::<Vec<_>>(),
        })),
        "spill_dir": lossy(&a.spill_dir.0),
        "mode": policy.mode,
        "network": policy.network,
        "network_allow": policy.network_allow,
        "network_mechanism": network_mechanism(policy.network.value),
        "network_proxy": (policy.network.value == crate::sandbox::Network::AllowList)
            .then_some(PROXY_WHERE),
        "workspace_root": sourced_json(&policy.workspace_root, json!(lossy(&policy.workspace_root.value))),
        "writable": roots.writable_paths().into_iter().map(lossy).collect::<Vec<_>>(),
        "temp_dir": roots.temp_dir.as_deref().map(lossy),
        "caches": policy.caches.iter().map(|c| json!({"path": lossy(c), "exists": c.is_dir()})).collect::<Vec<_>>(),
        "skipped": roots.skipped.iter().map(|s| json!({"path": lossy(&s.path), "reason": s.reason})).collect::<Vec<_>>(),
        "warnings": roots.warnings,
        "landlock_abi": abi,
        "enforcement": enforcement,
    })
}

/// Where the allow-list proxy listens, as `explain` can tell before a run.
const PROXY_WHERE: &str = "http://dsh-exec:TOKEN@127.0.0.1:PORT (a port and a token picked \
     when the run starts), set in HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower-case forms \
     over any other value; NO_PROXY=localhost,127.0.0.1,::1 unless -e sets it (loopback is \
     reached directly, not through the proxy)";

/// How a network policy is enforced, in one line.
fn network_mechanism(network: crate::sandbox::Network) -> &'static str {
    use crate::sandbox::Network;
    match network {
        Network::Allow => "none",
        Network::Deny => {
            "seccomp: IPv4, IPv6, packet and vsock sockets and most netlink families refused \
             (EACCES, recorded by the gate), io_uring refused; Landlock TCP bind/connect rules \
             where the ABI has them (4+)"
        }
        Network::Loopback => {
            "gate (seccomp user notification): connect, bind, listen, sendto, sendmsg and \
             sendmmsg of IPv4/IPv6 sockets made by dsh-exec with the copied address, loopback \
             only (EACCES otherwise; wildcard binds narrowed to loopback); seccomp: raw, packet, \
             vsock, SCTP and MPTCP sockets, source routes and interface options refused, io_uring \
             refused"
        }
        Network::AllowList => {
            "as loopback, plus an HTTP/HTTPS proxy of the run that reaches only the listed hosts \
             (CONNECT tunnels untouched, plain http:// forwarded); names resolved by the proxy, \
             private, loopback, link-local and metadata addresses only when listed exactly; DNS \
             to loopback port 53 refused"
        }
    }
}

/// The sandbox rows of the text explanation.
fn sandbox_rows(spec: &Spec, policy: &Policy) -> Vec<(String, String, String)> {
    let a = applied(spec, policy);
    let roots = &a.roots;
    let o = |o: Origin| format!("({})", origin_text(o));
    let mut rows = vec![
        (
            "sandbox".into(),
            policy.mode.value.as_str().into(),
            o(policy.mode.origin),
        ),
        (
            "network".into(),
            policy.network.value.as_str().into(),
            o(policy.network.origin),
        ),
    ];
    for (i, h) in policy.network_allow.iter().enumerate() {
        let name = if i == 0 { "allow-hosts" } else { "" };
        let note = if h.port.is_none() {
            "(ports 80 and 443)"
        } else {
            "(this port)"
        };
        rows.push((name.into(), h.to_string(), note.into()));
    }
    if policy.network.value == crate::sandbox::Network::AllowList {
        rows.push(("proxy".into(), PROXY_WHERE.into(), String::new()));
    }
    if policy.network.value != crate::sandbox::Network::Allow {
        rows.push((
            "net-mechanism".into(),
            network_mechanism(policy.network.value).into(),
            String::new(),
        ));
    }
    if policy.mode.value == Mode::WorkspaceWrite {
        rows.push((
            "workspace-root".into(),
            policy.workspace_root.value.display().to_string(),
            o(policy.workspace_root.origin),
        ));
        for (i, w) in roots.writable_paths().into_iter().enumerate() {
            let name = if i == 0 { "writable" } else { "" };
            rows.push((name.into(), w.display().to_string(), String::new()));
        }
        for (i, c) in policy.caches.iter().enumerate() {
            let name = if i == 0 { "caches" } else { "" };
            let note = if c.is_dir() {
                "(--allow-caches)"
            } else {
                "(--allow-caches; made before the run, and kept)"
            };
            rows.push((name.into(), c.display().to_string(), note.into()));
        }
        if roots.temp_dir.is_none() {
            rows.push((
                "temp-dir".into(),
                "read-only (--no-temp-write)".into(),
                String::new(),
            ));
        }
    }
    for w in &roots.warnings {
        rows.push(("warning".into(), w.clone(), String::new()));
    }
    for s in &roots.skipped {
        rows.push((
            "skipped".into(),
            format!("{} ({})", s.path.display(), s.reason),
            "(warning)".into(),
        ));
    }
    if policy.mode.value.confines() {
        rows.push(("gate".into(), gate_calls(spec, &a).into(), String::new()));
        rows.push((
            "metadata".into(),
            metadata_mechanism(spec, &a).into(),
            String::new(),
        ));
        rows.push(("/dev/shm".into(), shm(&a).into(), String::new()));
        for (i, p) in roots.read_denied.iter().enumerate() {
            let name = if i == 0 { "read-denied" } else { "" };
            rows.push((name.into(), p.display().to_string(), String::new()));
        }
        for p in &roots.read_exceptions {
            let built_in = crate::request::READABLE_DEVICES
                .iter()
                .any(|d| p == std::path::Path::new(d));
            let why = if built_in {
                "(built in)"
            } else {
                "(--allow-read)"
            };
            rows.push(("read-allowed".into(), p.display().to_string(), why.into()));
        }
        if !roots.read_denied.is_empty() {
            rows.push((
                "read-deny".into(),
                READ_DENY_MECHANISM.into(),
                String::new(),
            ));
        }
        for (i, p) in roots.read_roots.iter().enumerate() {
            let name = if i == 0 { "read-roots" } else { "" };
            rows.push((name.into(), p.display().to_string(), "(--read-root)".into()));
        }
        if let Some(parent) = &policy.scratch_parent {
            rows.push(("scratch".into(), scratch(parent), String::new()));
        }
        let mut sockets = vec![PATHNAME_SOCKETS.to_string()];
        sockets.extend(
            roots
                .unix_sockets
                .iter()
                .map(|(_, p)| format!("and {}", p.display())),
        );
        sockets.push("abstract: the run's own (Landlock scope and the gate)".into());
        for (i, line) in sockets.into_iter().enumerate() {
            let name = if i == 0 { "unix-sockets" } else { "" };
            rows.push((name.into(), line, String::new()));
        }
        let shown = 12;
        let paths = a.protection.paths();
        for (i, p) in paths.iter().take(shown).enumerate() {
            let (name, note) = if i == 0 {
                ("protected", format!("({})", protection_mechanism(&a)))
            } else {
                ("", String::new())
            };
            rows.push((name.into(), p.display().to_string(), note));
        }
        if paths.len() > shown {
            rows.push((
                "".into(),
                format!("... {} more", paths.len() - shown),
                String::new(),
            ));
        }
        if !a.protection.absent.is_empty() {
            rows.push((
                "".into(),
                format!(
                    "{} more removed after the run if created",
                    a.protection.absent.len()
                ),
                String::new(),
            ));
        }
        for n in &a.protection.notes {
            rows.push(("note".into(), n.clone(), String::new()));
        }
        rows.push((
            "terminals".into(),
            terminals(spec, &a).into(),
            String::new(),
        ));
    }
    match kernel_abi() {
        Ok(abi) => {
            let e = full_enforcement(policy, abi, &a);
            let level = match e.level() {
                crate::result::EnforcementLevel::Full => "full",
                crate::result::EnforcementLevel::Partial => "partial",
            };
            rows.push((
                "landlock".into(),
                format!("ABI {abi}, enforcement {level}"),
                String::new(),
            ));
            for (i, m) in e.missing.iter().enumerate() {
                let name = if i == 0 { "not enforced" } else { "" };
                rows.push((name.into(), m.describe(), String::new()));
            }
        }
        Err(e) => rows.push(("landlock".into(), e.to_string(), "(unavailable)".into())),
    }
    rows
}

/// The explanation as one JSON object.
pub fn explain_json(spec: &Spec) -> Value {
    let env = &spec.env;
    let shell = find_shell(&env.child_env()).map(|p| lossy(&p));
    json!({
        "command": spec.script,
        "config_file": spec.config_file.as_deref().map(lossy),
        "shell": shell,
        "workdir": sourced_json(&spec.workdir, json!(lossy(&spec.workdir.value))),
        "timeout_ms": sourced_json(&spec.timeout, json!(spec.timeout.value.map(|t| t.as_millis() as u64))),
        "kill_after_ms": sourced_json(&spec.kill_after, json!(spec.kill_after.value.as_millis() as u64)),
        "signal": sourced_json(&spec.signal, json!(spec.signal.value)),
        "stdout_max_bytes": sourced_json(&spec.stdout_max_bytes, json!(spec.stdout_max_bytes.value)),
        "stderr_max_bytes": sourced_json(&spec.stderr_max_bytes, json!(spec.stderr_max_bytes.value)),
        "file_size_max_bytes": sourced_json(&spec.file_size_max, json!(spec.file_size_max.value)),
        "memory_max_bytes": sourced_json(&spec.memory_max, json!(spec.memory_max.value)),
        "pids_max": sourced_json(&spec.pids_max, json!(spec.pids_max.value)),
        "cpu_max_ms": sourced_json(&spec.cpu_max, json!(spec.cpu_max.value.map(|d| d.as_millis() as u64))),
        "limits": sourced_json(&spec.limits, json!(spec.limits.value.as_str())),
        "limit_mechanisms": crate::limits::explained(&spec.limits_asked()).into_iter()
            .map(|(kind, _, name, line)| (kind.as_str().to_string(), json!({"mechanism": name, "detail": line})))
            .collect::<serde_json::Map<String, Value>>(),
        "spill_max_bytes": sourced_json(&spec.spill_max_bytes, json!(spec.spill_max_bytes.value)),
        "keep": sourced_json(&spec.keep, json!(spec.keep.value)),
        "render": sourced_json(&spec.render, json!(spec.render.value)),
        "prune_spill_after_ms": spec.prune_spill_after.map(|d| d.as_millis() as u64),
        "stdin": sourced_json(&spec.stdin, stdin_json(&spec.stdin.value)),
        "spill_dir": sourced_json(&spec.spill_dir, json!(lossy(&spec.spill_dir.value))),
        "environment": {
            "inherited_count": env.inherited.len(),
            "scrubbed": env.scrubbed.iter().map(|n| n.to_string_lossy()).collect::<Vec<_>>(),
            "scrub_rules": env.scrubbed.iter().zip(&env.scrub_rules)
                .map(|(n, r)| json!({"name": n.to_string_lossy(), "rule": r}))
                .collect::<Vec<_>>(),
            "policy": env.policy,
            "policy_dropped": env.policy_dropped,
            "set": env.effective_settings().iter().map(|s| json!({
                "name": s.name,
                "value": display_value(&s.name, &s.value),
                "layer": s.layer,
            })).collect::<Vec<_>>(),
            "missing_pass_through": env.missing_pass_through,
        },
        "sandbox": sandbox_json(spec),
    })
}

/// Colours one aligned row for a terminal: names bold, the sandbox mode by
/// how much it allows, warnings yellow, what is not enforced red.
fn paint_row(name: &str, value: &str, line: &str) -> String {
    let (head, rest) = line.split_at(name.len().min(line.len()));
    let head = head.bold().to_string();
    let rest = match (name, value) {
        ("sandbox", "read-only") => rest.green().to_string(),
        ("sandbox", "workspace-write") => rest.yellow().to_string(),
        ("sandbox", _) => rest.red().to_string(),
        ("skipped" | "warning", _) => rest.yellow().to_string(),
        ("not enforced", _) | ("", _) if line.contains("(ABI") => rest.red().to_string(),
        ("landlock", v) if v.contains("partial") || !v.starts_with("ABI") => rest.red().to_string(),
        ("landlock", _) => rest.green().to_string(),
        _ => rest.to_string(),
    };
    head + &rest
}

/// The explanation as aligned, human-readable text, coloured when `color`.
pub fn explain_text(spec: &Spec, color: bool) -> String {
    let env = &spec.env;
    let shell = find_shell(&env.child_env())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "NOT FOUND on PATH".into());
    let mut rows: Vec<(String, String, String)> = vec![
        ("command".into(), spec.script.clone(), String::new()),
        ("shell".into(), format!("{shell} -c COMMAND"), String::new()),
    ];
    if let Some(path) = &spec.config_file {
        rows.push(("config".into(), path.display().to_string(), String::new()));
    }
    let mut row = |name: &str, value: String, note: String| {
        rows.push((name.into(), value, note));
    };
    row(
        "workdir",
        spec.workdir.value.display().to_string(),
        note(&spec.workdir),
    );
    if !spec.workdir.value.is_dir() {
        row(
            "warning",
            "the workdir is not a directory: a run fails (WORKDIR_UNUSABLE)".into(),
            String::new(),
        );
    }
    row(
        "timeout",
        timeout_text(spec.timeout.value),
        note(&spec.timeout),
    );
    row("signal", spec.signal.value.name(), note(&spec.signal));
    row(
        "kill-after",
        format_duration(spec.kill_after.value),
        note(&spec.kill_after),
    );
    row(
        "stdout-max-bytes",
        format_size(spec.stdout_max_bytes.value),
        note(&spec.stdout_max_bytes),
    );
    row(
        "stderr-max-bytes",
        format_size(spec.stderr_max_bytes.value),
        note(&spec.stderr_max_bytes),
    );
    if let Some(max) = spec.file_size_max.value {
        row(
            "file-size-max",
            format!("{} (RLIMIT_FSIZE)", format_size(max)),
            note(&spec.file_size_max),
        );
    }
    let limits = crate::limits::explained(&spec.limits_asked());
    for (kind, value, _, line) in &limits {
        let origin = match kind {
            crate::limits::LimitKind::Memory => note(&spec.memory_max),
            crate::limits::LimitKind::Pids => note(&spec.pids_max),
            _ => note(&spec.cpu_max),
        };
        let fails = if line.starts_with("unavailable: ")
            && spec.limits.value == crate::limits::LimitMode::Strict
        {
            " (a run fails: LIMIT_UNAVAILABLE; --limits best-effort runs without it)"
        } else {
            ""
        };
        row(&kind.flag()[2..], format!("{value}: {line}{fails}"), origin);
    }
    if !limits.is_empty() {
        row(
            "limits",
            spec.limits.value.as_str().into(),
            note(&spec.limits),
        );
    }
    row(
        "spill-max-bytes",
        format_size(spec.spill_max_bytes.value),
        note(&spec.spill_max_bytes),
    );
    row("keep", spec.keep.value.as_str().into(), note(&spec.keep));
    row(
        "render",
        spec.render.value.as_str().into(),
        note(&spec.render),
    );
    row("stdin", stdin_text(&spec.stdin.value), note(&spec.stdin));
    if let Some(age) = spec.prune_spill_after {
        row(
            "prune-spill",
            format!("after {} unchanged, at each start", format_duration(age)),
            "(config)".into(),
        );
    }
    let moved = spec
        .sandbox
        .as_ref()
        .map(|p| sandbox::spill_parent(p, &open_roots(p), &spec.spill_dir.value))
        .filter(|(_, moved)| *moved);
    match moved {
        Some((actual, _)) => row(
            "spill-dir",
            actual.display().to_string(),
            format!(
                "({}; {} is writable by the command)",
                origin_text(spec.spill_dir.origin),
                spec.spill_dir.value.display()
            ),
        ),
        None => row(
            "spill-dir",
            spec.spill_dir.value.display().to_string(),
            note(&spec.spill_dir),
        ),
    }
    if let Some(policy) = &spec.sandbox {
        rows.extend(sandbox_rows(spec, policy));
    }
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let vwidth = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).min(48);
    let mut text = String::new();
    for (name, value, origin) in rows {
        let line = format!("{name:width$}  {value:vwidth$}  {origin}");
        let line = line.trim_end();
        if color {
            text.push_str(&paint_row(&name, &value, line));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    text.push_str(&if color {
        "environment:".bold().to_string()
    } else {
        "environment:".into()
    });
    text.push('\n');
    text.push_str(&format!(
        "  inherited  {} variables from this process\n",
        env.inherited.len()
    ));
    if env.policy_dropped > 0 {
        let policy = match env.policy {
            crate::request::env::EnvPolicy::Core => "core",
            _ => "none",
        };
        text.push_str(&format!(
            "  dropped    {} variables (--env-policy {policy})\n",
            env.policy_dropped
        ));
    }
    // Names and the rule that caught each; never a value.
    for (name, rule) in env.scrubbed.iter().zip(&env.scrub_rules) {
        text.push_str(&format!(
            "  scrubbed   {} ({rule})\n",
            name.to_string_lossy()
        ));
    }
    for s in env.effective_settings() {
        text.push_str(&format!(
            "  {:9}  {}={}\n",
            layer_text(s.layer),
            s.name,
            display_value(&s.name, &s.value)
        ));
    }
    for name in &env.missing_pass_through {
        text.push_str(&format!(
            "  skipped    {name} (--env {name}: not set here)\n"
        ));
    }
    text
}
