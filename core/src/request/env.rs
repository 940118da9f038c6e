//! The child environment, built in four layers (DESIGN.md, "Child environment"):
//!
//! 1. the ambient environment of `dsh-exec`, minus credential-shaped names and
//!    minus every `DSH_*` name;
//! 2. non-interactive overrides (`PAGER=cat`, `TERM=dumb`, ...), since output is
//!    captured (skipped for an interactive run);
//! 3. explicit `--env` entries, which win over 1 and 2 (an explicit
//!    credential-shaped entry is a deliberate opt-in);
//! 4. managed `--dsh-env` entries, last, so no `--env` entry displaces them.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub use crate::spec::{EnvPlan, EnvPolicy, EnvSetting, Layer};

/// The `_`-separated words of a name (compared in upper case) that make a
/// variable a secret: `MY_API_KEY`, `MYSQL_PWD`, `GH_PAT`, `BW_SESSION`.
/// Words, not substrings: `MONKEY` and `PYTHON_KEYRING_BACKEND` are no
/// secrets. `CONNECTION_STRING` is two words in a row.
///
/// Checked against the credential words of codex's `shell_environment_policy`
/// (`*KEY*`, `*SECRET*`, `*TOKEN*`) and of the keyword lists of secret
/// scanners (gitleaks, trufflehog, detect-secrets): `BEARER`, `OAUTH`,
/// `HMAC`, `TOTP`, `PASSCODE` and `PASSKEY` came from there. Not `SAS`
/// (Azure's tokens are `*_SAS_TOKEN`; the word would take `SASS_*`, node-sass's
/// settings) nor `OTP` (`OTP_VERSION` is Erlang's).
pub const SECRET_WORDS: [&str; 29] = [
    "KEY",
    "APIKEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "AUTH",
    "PRIVATE",
    "COOKIE",
    "SESSION",
    "JWT",
    "DSN",
    "WEBHOOK",
    "PAT",
    "SIGNATURE",
    "CERTKEY",
    "SALT",
    "BEARER",
    "OAUTH",
    "HMAC",
    "TOTP",
    "PASSCODE",
    "PASSKEY",
];

/// Names scrubbed as they are: they hand out an agent (ssh, gpg) or a
/// Kerberos ticket cache.
pub const SECRET_NAMES: [&str; 3] = ["SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KRB5CCNAME"];

/// Names a secret word would catch that are known to be harmless, with
/// why (docs/environment.md lists them): the working directory, the desktop
/// session's identifiers and its D-Bus bus (an address, no credential),
/// and terminals' session ids.
pub const HARMLESS_NAMES: [(&str, &str); 14] = [
    ("PWD", "the working directory"),
    ("OLDPWD", "the previous working directory"),
    ("XDG_SESSION_ID", "the login session's number"),
    ("XDG_SESSION_TYPE", "x11, wayland or tty"),
    ("XDG_SESSION_CLASS", "user, greeter or lock-screen"),
    ("XDG_SESSION_DESKTOP", "the desktop's name"),
    (
        "XDG_SESSION_PATH",
        "the display manager's D-Bus object path",
    ),
    (
        "DBUS_SESSION_BUS_ADDRESS",
        "the session bus's socket address; access is checked by the bus",
    ),
    ("DESKTOP_SESSION", "the desktop's name"),
    ("SESSION_MANAGER", "the X session manager's socket address"),
    ("TERM_SESSION_ID", "a terminal's session id"),
    ("GPG_TTY", "the terminal gpg asks on"),
    (
        "GPG_KEY",
        "a public release key's fingerprint (official Python images set it)",
    ),
    ("WT_SESSION", "Windows Terminal's session id"),
];

/// Well-known shapes of token values, by name: a value holding one is
/// scrubbed whatever its variable is called. Each is a prefix and the
/// least count of token characters (`[A-Za-z0-9_-]`) after it.
pub const TOKEN_SHAPES: [(&str, &str, usize); 21] = [
    ("github", "ghp_", 30),
    ("github", "gho_", 30),
    ("github", "ghu_", 30),
    ("github", "ghs_", 30),
    ("github", "ghr_", 30),
    ("github", "github_pat_", 40),
    ("gitlab", "glpat-", 20),
    ("slack", "xoxb-", 10),
    ("slack", "xoxp-", 10),
    ("slack", "xoxa-", 10),
    ("api key", "sk-", 20),
    ("hugging face", "hf_", 30),
    ("npm", "npm_", 36),
    ("aws access key id", "AKIA", 16),
    ("aws access key id", "ASIA", 16),
    ("jwt", "eyJ", 15),
    ("pypi", "pypi-AgE", 30),
    ("stripe", "sk_live_", 20),
    ("stripe", "rk_live_", 20),
    ("google api key", "AIza", 30),
    ("slack", "xapp-", 10),
];

/// The first bytes of [`TOKEN_SHAPES`]' prefixes (a test checks them).
const TOKEN_FIRST_BYTES: &[u8] = b"gxshnAepr";

/// Whether `name` is `prefix` followed by a number (`GIT_CONFIG_KEY_0`).
fn is_git_config_pair(name: &[u8], prefix: &[u8]) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

/// Why a variable would be scrubbed: `managed DSH_`, `name SSH_AUTH_SOCK`,
/// `word KEY`, `url password`, `token shape github`, `private key`; `None`
/// to keep it. Never says anything of the value itself.
pub fn scrub_rule(name: &OsStr, value: &OsStr) -> Option<String> {
    if is_managed(name) {
        return Some(format!("managed {MANAGED_PREFIX}"));
    }
    let raw = String::from_utf8_lossy(name.as_bytes());
    let upper = raw.to_ascii_uppercase();
    if SECRET_NAMES.contains(&upper.as_str()) {
        return Some(format!("name {upper}"));
    }
    // GIT_CONFIG_KEY_<n> holds the name of a git setting, not a secret.
    let git_key = is_git_config_pair(upper.as_bytes(), b"GIT_CONFIG_KEY_");
    if !git_key
        && !HARMLESS_NAMES.iter().any(|(n, _)| *n == upper)
        && let Some(rule) = name_rule(&name_words(&raw), &String::from_utf8_lossy(value.as_bytes()))
        // Checked last: it may stat the value as a path.
        && !harmless_value(&String::from_utf8_lossy(value.as_bytes()))
    {
        return Some(rule);
    }
    value_rule(value.as_bytes())
}

/// The rule a name's words match, if any: a secret word, or
/// `CONNECTION_STRING`, unless the name says where a thing is (`..._PATH`,
/// `..._DIR`, `..._FILE`) or names a harmless kind of session.
fn name_rule(words: &[String], value: &str) -> Option<String> {
    // `..._PATH`, `..._DIR`, `..._FILE`: where a secret is, not one; as
    // long as the value is a place too (`SECRET_FILE=hunter2` is not).
    let v = value.trim();
    let a_place = v.is_empty() || v.contains(['/', '.']) || v.starts_with('~');
    let names_a_place = a_place
        && words
            .last()
            .is_some_and(|w| ["PATH", "DIR", "DIRECTORY", "FILE", "HOME"].contains(&w.as_str()));
    if names_a_place {
        return None;
    }
    let harmless_session = words.windows(2).any(|w| {
        w[0] == "SESSION"
            && [
                "ID", "TYPE", "VERSION", "PID", "NAME", "CLASS", "DESKTOP", "PATH", "MANAGER",
                "BUS",
            ]
            .contains(&w[1].as_str())
    });
    if let Some(w) = words.iter().find_map(|w| secret_word(w))
        && !(w == "SESSION" && harmless_session)
    {
        return Some(format!("word {w}"));
    }
    words
        .windows(2)
        .any(|w| w == ["CONNECTION", "STRING"] || w == ["CONNECTION", "STRINGS"])
        .then(|| "word CONNECTION_STRING".into())
}

/// The words of a name, in upper case: split at every character that is
/// not a letter or a digit (`_`, `.`, `-`, `/`, `:`), and where a lower-case
/// letter meets an upper-case one (`GithubToken`, `dbPassword`).
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit() && prev_lower;
        word.push(c.to_ascii_uppercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The secret word a word of a name is, if any: one of [`SECRET_WORDS`],
/// its plural, or a compound that ends with one of the long ones
/// (`PGPASSWORD`, `ROOTPASSWORD`, `AUTHTOKEN`, `ADMINPASSKEY`) or starts
/// with `SECRET`, `PASSWORD`, `APIKEY`, `HMAC` or `TOTP` (`SECRETKEY`,
/// `HMACKEY` as `HMACKey` is written; not `TOKENIZERS`, nor `OAUTHLIB`).
fn secret_word(word: &str) -> Option<&'static str> {
    const LONG: [&str; 19] = [
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "TOKEN",
        "APIKEY",
        "CREDENTIAL",
        "ACCESSKEY",
        "PRIVATEKEY",
        "SIGNINGKEY",
        "ENCRYPTIONKEY",
        "MASTERKEY",
        "AUTHORIZATION",
        "BEARER",
        "OAUTH",
        "HMAC",
        "TOTP",
        "PASSCODE",
        "PASSKEY",
    ];
    // AUTH0 is a company's name (AUTH0_DOMAIN), not AUTH and a number.
    if word == "AUTH0" {
        return None;
    }
    // A number after the word counts for nothing (`API_KEY2`, `TOKEN1`).
    let word = word.trim_end_matches(|c: char| c.is_ascii_digit());
    let singular = word
        .strip_suffix('S')
        .filter(|w| w.len() >= 3)
        .unwrap_or(word);
    SECRET_WORDS
        .iter()
        .find(|w| **w == word || **w == singular)
        .copied()
        .or_else(|| {
            LONG.iter()
                .find(|l| {
                    singular.ends_with(*l)
                        || singular.starts_with(*l)
                            && ["SECRET", "PASSWORD", "APIKEY", "HMAC", "TOTP"].contains(l)
                })
                .copied()
        })
}

/// A value no secret can be: empty, a switch (`0`, `1`, `true`, `no`), or
/// an absolute path to something that exists (a name like
/// `GOOGLE_APPLICATION_CREDENTIALS` then says where a secret is, not what).
fn harmless_value(value: &str) -> bool {
    let v = value.trim();
    let switch = ["", "0", "1", "true", "false", "yes", "no", "on", "off"]
        .iter()
        .any(|s| v.eq_ignore_ascii_case(s));
    let path = v.starts_with('/') && !v.contains(char::is_whitespace) && Path::new(v).exists();
    switch || path
}

/// The value rules of [`scrub_rule`].
fn value_rule(value: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(value);
    if url_has_password(&text) {
        return Some("url password".into());
    }
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        return Some("private key".into());
    }
    let lower = text.to_ascii_lowercase();
    // Every marker and header below holds a `=` or a `:`; most values
    // (paths, words, numbers) hold neither, and skip the searches.
    let has_separator = value.iter().any(|c| matches!(c, b'=' | b':'));
    // A password in a connection string or a document: JDBC `password=`,
    // ADO.NET `Password=...;`, JSON `"password": ...`.
    for marker in [
        "password=",
        "pwd=",
        "\"password\":",
        "\"password\" :",
        "passwd=",
    ] {
        if has_separator && lower.contains(marker) {
            return Some("inline password".into());
        }
    }
    // An HTTP credential (RFC 9110 section 11.6.2), as a header or alone:
    // `Authorization: Bearer ...`, `-H 'Authorization: ...'`, `Basic ...`.
    // A scheme counts when one credential-like word follows it (8 or more
    // characters, no blank): `token refresh: fix race` is a sentence.
    let scheme = ["bearer ", "basic ", "token "].iter().any(|p| {
        lower.strip_prefix(p).is_some_and(|rest| {
            let rest = rest.trim();
            rest.len() >= 8 && !rest.contains(char::is_whitespace)
        })
    });
    // Header names: RFC 9110's Authorization and Proxy-Authorization,
    // GitLab's PRIVATE-TOKEN, the common X-API-Key.
    let header = [
        "authorization:",
        "authorization=",
        "private-token:",
        "x-api-key:",
    ]
    .iter()
    .any(|h| has_separator && lower.contains(h));
    if header || scheme {
        return Some("authorization header".into());
    }
    let token_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    // A token starts the value or follows a separator; not a path or a
    // file name (`/data/hf_models`).
    let boundary_char = |c: u8| !token_char(c) && c != b'/' && c != b'.';
    // One pass: at each position where a token may start, try each shape.
    let bytes = text.as_bytes();
    for start in 0..bytes.len() {
        // A token starts a URL's userinfo too (`https://ghp_...@github.com`).
        if start > 0 && !boundary_char(bytes[start - 1]) && !bytes[..start].ends_with(b"://") {
            continue;
        }
        // Every shape's prefix starts with one of these bytes.
        if !TOKEN_FIRST_BYTES.contains(&bytes[start]) {
            continue;
        }
        for (what, prefix, least) in TOKEN_SHAPES {
            let Some(tail) = bytes[start..].strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            // Hugging Face tokens are letters and digits only
            // (`hf_internal_testing_model` is a model's name).
            let run = if prefix == "hf_" {
                tail.iter()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .count()
            } else {
                tail.iter().take_while(|c| token_char(**c)).count()
            };
            let aws_ok = (prefix != "AKIA" && prefix != "ASIA")
                || tail[..run.min(16)]
                    .iter()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            if run >= least && aws_ok {
                return Some(format!("token shape {what}"));
            }
        }
    }
    None
}

/// Whether `text` holds a URL whose userinfo has a password
/// (`scheme://user:PASSWORD@host`, RFC 3986 section 3.2.1); `redis://:pw@h`
/// counts, `postgres://h/db` and `https://user@h` do not.
fn url_has_password(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        // Up to the last `@` before the next blank: a password may hold an
        // unencoded `/`, `?`, `#` or `,` (`postgres://u:pa/ss@h/db`).
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        let authority = &after[..end];
        if let Some(userinfo_end) = authority.rfind('@') {
            let userinfo = &authority[..userinfo_end];
            if userinfo
                .split_once(':')
                .is_some_and(|(_, pw)| !pw.is_empty())
            {
                return true;
            }
            // A user name that is a token (`https://<40 hex>@github.com`):
            // 32 or more characters a token is made of.
            if userinfo.len() >= 32
                && userinfo
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
            {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// True when [`scrub_rule`] would scrub `name` for its name alone (any
/// value): what `explain` masks.
pub fn is_credential_shaped(name: &OsStr) -> bool {
    scrub_rule(name, OsStr::new("")).is_some_and(|r| !r.starts_with("managed"))
}

/// What `--env-policy core` passes.
pub const CORE_NAMES: [&str; 10] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ", "TMPDIR", "TERM", "LC_ALL",
];

fn in_core(name: &OsStr) -> bool {
    CORE_NAMES.iter().any(|c| name == *c) || name.as_bytes().starts_with(b"LC_")
}

/// Variables that point a program at a control socket of the session
/// outside (a terminal multiplexer, an editor, an agent): a confined command
/// cannot reach them anyway (the gate refuses the connect), so they are not
/// passed, rather than left to fail. `-e NAME` passes one through.
pub const CONTROL_SOCKETS: [&str; 8] = [
    "TMUX",
    "TMUX_PANE",
    "STY",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK_CLI",
];

/// Prefix of the names `dsh-exec` manages; ambient ones never reach the child.
pub const MANAGED_PREFIX: &str = "DSH_";

/// Layer 2: set for every captured run so nothing pages, prompts or colours.
pub const NON_INTERACTIVE_OVERRIDES: [(&str, &str); 6] = [
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
];

/// True when `name` starts with [`MANAGED_PREFIX`] (case-sensitive, as the
/// environment is).
pub fn is_managed(name: &OsStr) -> bool {
    name.as_bytes().starts_with(MANAGED_PREFIX.as_bytes())
}

/// One `--env` entry as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvArg {
    /// `KEY=VALUE`: set KEY to VALUE.
    Set(String, String),
    /// `KEY`: pass the ambient value of KEY through, even a scrubbed one.
    PassThrough(String),
}

/// Parses a `--env` argument (`KEY=VALUE` or `KEY`).
///
/// Errors when the name is empty or holds `=` or NUL.
pub fn parse_env_arg(text: &str) -> Result<EnvArg, String> {
    let arg = match text.split_once('=') {
        Some((k, v)) => EnvArg::Set(k.to_string(), v.to_string()),
        None => EnvArg::PassThrough(text.to_string()),
    };
    let key = match &arg {
        EnvArg::Set(k, _) | EnvArg::PassThrough(k) => k,
    };
    check_name(key)?;
    if text.contains('\0') {
        return Err(format!("environment entry '{key}' contains a NUL byte"));
    }
    Ok(arg)
}

/// Parses a `--dsh-env` argument: `DSH_KEY=VALUE`, the key starting `DSH_`.
pub fn parse_managed_arg(text: &str) -> Result<(String, String), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("managed entry '{text}' must be DSH_KEY=VALUE"))?;
    check_name(k)?;
    if !k.starts_with(MANAGED_PREFIX) {
        return Err(format!(
            "managed entry '{k}' must start with {MANAGED_PREFIX} (use --env for other names)"
        ));
    }
    if v.contains('\0') {
        return Err(format!("managed entry '{k}' contains a NUL byte"));
    }
    Ok((k.to_string(), v.to_string()))
}

fn check_name(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("environment name is empty".into());
    }
    if key.contains('\0') {
        return Err("environment name contains a NUL byte".into());
    }
    Ok(())
}

impl EnvPlan {
    /// Builds the plan from the ambient environment and the user's entries.
    pub fn build(
        ambient: &[(OsString, OsString)],
        interactive: bool,
        confined: bool,
        policy: EnvPolicy,
        explicit: &[EnvArg],
        managed: &[(String, String)],
    ) -> EnvPlan {
        let mut plan = EnvPlan {
            policy,
            ..EnvPlan::default()
        };
        let mut scrubbed: Vec<(OsString, String)> = Vec::new();
        for (k, v) in ambient {
            let kept_by_policy = match policy {
                EnvPolicy::Inherit => true,
                EnvPolicy::Core => in_core(k),
                EnvPolicy::None => false,
            };
            let control = (confined && CONTROL_SOCKETS.iter().any(|c| k == *c))
                .then(|| "control socket".to_string());
            // A secret is listed (and wiped from dsh-exec's own block)
            // whatever the policy; the policy drops the rest.
            let rule = scrub_rule(k, v).or(control);
            if let Some(rule) = rule {
                if !scrubbed.iter().any(|(n, _)| n == k) {
                    scrubbed.push((k.clone(), rule));
                }
            } else if !kept_by_policy {
                plan.policy_dropped += 1;
            } else if !plan.inherited.iter().any(|(name, _)| name == k) {
                // A name given twice keeps its first value, the one
                // getenv(3) returns: every later layer then replaces it.
                plan.inherited.push((k.clone(), v.clone()));
            }
        }
        // git's GIT_CONFIG_COUNT / GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>
        // (git-config(1), ENVIRONMENT; actions/checkout passes an
        // `http.extraheader` with a token so): with a value withheld, git
        // refuses to start ("missing config value"). Withholding the count
        // too makes git ignore the pairs.
        let git_value_withheld = scrubbed.iter().any(|(n, _)| {
            is_git_config_pair(n.as_bytes(), b"GIT_CONFIG_VALUE_")
                || is_git_config_pair(n.as_bytes(), b"GIT_CONFIG_KEY_")
        });
        if git_value_withheld
            && let Some(at) = plan
                .inherited
                .iter()
                .position(|(n, _)| n == "GIT_CONFIG_COUNT")
        {
            let (name, _) = plan.inherited.remove(at);
            scrubbed.push((name, "git config pair withheld".into()));
        }
        scrubbed.sort();
        (plan.scrubbed, plan.scrub_rules) = scrubbed.into_iter().unzip();
        if !interactive {
            for (k, v) in NON_INTERACTIVE_OVERRIDES {
                plan.push(k, v.into(), Layer::Override);
            }
        }
        for arg in explicit {
            match arg {
                EnvArg::Set(k, v) => plan.push(k, v.into(), Layer::Explicit),
                EnvArg::PassThrough(k) => {
                    match ambient.iter().rev().find(|(name, _)| name == k.as_str()) {
                        Some((_, v)) => plan.push(k, v.clone(), Layer::Explicit),
                        None => plan.missing_pass_through.push(k.clone()),
                    }
                }
            }
        }
        for (k, v) in managed {
            plan.push(k, v.into(), Layer::Managed);
        }
        plan
    }

    /// The plan of a command on a pseudo-terminal of its own (`--pty`):
    /// `TERM=xterm-256color` where [`NON_INTERACTIVE_OVERRIDES`] would set
    /// `TERM=dumb` (build it with `interactive` true), under any `--env`
    /// entry; `on` false leaves the plan as it is.
    pub(crate) fn on_terminal(mut self, on: bool) -> EnvPlan {
        if on {
            let at = self
                .settings
                .iter()
                .position(|s| s.layer != Layer::Override)
                .unwrap_or(self.settings.len());
            self.settings.insert(
                at,
                EnvSetting {
                    name: "TERM".into(),
                    value: "xterm-256color".into(),
                    layer: Layer::Override,
                },
            );
        }
        self
    }

    /// Withholds each of `names` from the command, listed as scrubbed
    /// (`credential source`, and wiped from dsh-exec's own environment
    /// with the rest): the sources of `--credential NAME=env:VAR`.
    pub(crate) fn withholding<'a>(mut self, names: impl Iterator<Item = &'a str>) -> EnvPlan {
        for name in names {
            self.inherited.retain(|(k, _)| k != name);
            if !self.scrubbed.iter().any(|k| k == name) {
                self.scrubbed.push(name.into());
                self.scrub_rules.push("credential source".into());
            }
        }
        self
    }

    fn push(&mut self, name: &str, value: OsString, layer: Layer) {
        self.settings.push(EnvSetting {
            name: name.to_string(),
            value,
            layer,
        });
    }

    /// The merged child environment: inherited variables, then each setting
    /// in layer order, a later value replacing an earlier one in place.
    pub fn child_env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.inherited.clone();
        for s in &self.settings {
            match env.iter_mut().find(|(k, _)| k == s.name.as_str()) {
                Some(slot) => slot.1 = s.value.clone(),
                None => env.push((s.name.clone().into(), s.value.clone())),
            }
        }
        env
    }

    /// The settings that decide the final value of each name (the last one
    /// per name), in the order they were given.
    pub fn effective_settings(&self) -> Vec<&EnvSetting> {
        self.settings
            .iter()
            .enumerate()
            .filter(|(i, s)| !self.settings[i + 1..].iter().any(|t| t.name == s.name))
            .map(|(_, s)| s)
            .collect()
    }
}

/// The value to display for `name`: masked when the name or the value is
/// one the scrub would catch.
pub fn display_value(name: &str, value: &OsStr) -> String {
    if scrub_rule(OsStr::new(name), value).is_some_and(|r| !r.starts_with("managed")) {
        "<masked>".to_string()
    } else {
        value.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ambient(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn token_first_bytes_are_the_shapes_first_bytes() {
        let mut firsts: Vec<u8> = TOKEN_SHAPES
            .iter()
            .map(|(_, p, _)| p.as_bytes()[0])
            .collect();
        firsts.sort();
        firsts.dedup();
        let mut known = TOKEN_FIRST_BYTES.to_vec();
        known.sort();
        assert_eq!(firsts, known);
    }

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.to_str())
    }

    fn rule(name: &str, value: &str) -> Option<String> {
        scrub_rule(OsStr::new(name), OsStr::new(value))
    }

    #[test]
    fn secret_names_by_their_words() {
        for (name, why) in [
            ("FOO_TOKEN", "word TOKEN"),
            ("MY_API_KEY", "word KEY"),
            ("DB_PASSWORD", "word PASSWORD"),
            ("aws_secret_access_key", "word SECRET"),
            ("passwd", "word PASSWD"),
            ("MY_PASS", "word PASS"),
            ("NPM_CONFIG__AUTH", "word AUTH"),
            ("MYSQL_PWD", "word PWD"),
            ("GPG_PASSPHRASE", "word PASSPHRASE"),
            ("BW_SESSION", "word SESSION"),
            ("OP_SESSION_x", "word SESSION"),
            ("SENTRY_DSN", "word DSN"),
            ("SLACK_WEBHOOK_URL", "word WEBHOOK"),
            ("DOCKER_AUTH_CONFIG", "word AUTH"),
            ("AZURE_STORAGE_CONNECTION_STRING", "word CONNECTION_STRING"),
            ("CI_JOB_JWT", "word JWT"),
            ("SESSION_COOKIE", "word SESSION"),
            ("PRIVATE_PEM", "word PRIVATE"),
            ("GH_PAT", "word PAT"),
            ("SSH_AUTH_SOCK", "name SSH_AUTH_SOCK"),
            ("GPG_AGENT_INFO", "name GPG_AGENT_INFO"),
            ("KRB5CCNAME", "name KRB5CCNAME"),
            ("PGPASSWORD", "word PASSWORD"),
            ("GithubToken", "word TOKEN"),
            ("dbPassword", "word PASSWORD"),
            ("MYSQL_ROOTPASSWORD", "word PASSWORD"),
            ("MINIO_SECRETKEY", "word SECRET"),
            ("NPM_AUTHTOKEN", "word TOKEN"),
            ("AWS_SECRETS", "word SECRET"),
            ("API_KEYS", "word KEY"),
            ("spring.datasource.password", "word PASSWORD"),
            ("MY-TOKEN", "word TOKEN"),
            ("npm_config_//registry.npmjs.org/:_authToken", "word AUTH"),
            ("ConnectionStrings__Default", "word CONNECTION_STRING"),
            ("DSH_OLD", "managed DSH_"),
        ] {
            assert_eq!(rule(name, "x").as_deref(), Some(why), "{name}");
        }
        for name in [
            "PLAIN",
            "PATH",
            "HOME",
            "TOKE",
            "MONKEY",
            "MONKEY_PATCH_LEVEL",
            "PYTHON_KEYRING_BACKEND",
            "PWD",
            "OLDPWD",
            "XDG_SESSION_ID",
            "DBUS_SESSION_BUS_ADDRESS",
            "PATCH_LEVEL",
            "KEYBOARD",
            "GIT_AUTHOR_NAME",
            "GPG_KEY",
            "DBUS_SESSION_BUS_PID",
            "ITERM_SESSION_ID",
            "KDE_SESSION_VERSION",
            "SESSION_TYPE",
            "TF_VAR_session_name",
            "PASSWORD_STORE_DIR",
            "PUBLIC_KEY_PATH",
            "PASSWD_FILE",
            "WT_SESSION",
            "TOKENIZERS_PARALLELISM",
        ] {
            // (A place name holds a place: a path, a file name.)
            assert_eq!(rule(name, "./x"), None, "{name}");
        }
        // A place name whose value is no place is judged by its words.
        assert_eq!(rule("SECRET_FILE", "hunter2"), Some("word SECRET".into()));
        assert_eq!(rule("SSL_KEY_FILE", "server.key"), None);
        // A switch or an existing path is no secret, whatever the name.
        assert_eq!(rule("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"), None);
        assert_eq!(
            rule("GOOGLE_APPLICATION_CREDENTIALS", "/etc/hostname"),
            None
        );
    }

    #[test]
    fn secret_values_by_their_shape() {
        for (value, why) in [
            ("postgres://u:pw@h/db", "url password"),
            ("http://user:pw@proxy:3128", "url password"),
            ("redis://:pw@h", "url password"),
            (
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "token shape github",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "token shape github",
            ),
            ("glpat-abcdefghij0123456789", "token shape gitlab"),
            ("xoxb-1234567890-abcdef", "token shape slack"),
            ("AKIAIOSFODNN7EXAMPLE", "token shape aws access key id"),
            ("sk-proj-abcdefghijklmnopqrstuvwx", "token shape api key"),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwx",
                "token shape api key",
            ),
            (
                "hf_abcdefghijklmnopqrstuvwxyz0123456",
                "token shape hugging face",
            ),
            (
                "npm_abcdefghijklmnopqrstuvwxyz0123456789",
                "token shape npm",
            ),
            (
                "Bearer ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "authorization header",
            ),
            (
                "Authorization: Bearer abcdef0123456789abcdef",
                "authorization header",
            ),
            ("Basic dXNlcjpwYXNz", "authorization header"),
            ("-H 'Authorization: Bearer x'", "authorization header"),
            (
                "{\"auth\": \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"}",
                "token shape github",
            ),
            ("postgres://user:pa/ss@h/db", "url password"),
            ("jdbc:mysql://h/db?user=u&password=x", "inline password"),
            (
                "Server=h;Database=d;User Id=u;Password=x;",
                "inline password",
            ),
            ("{\"password\": \"x\"}", "inline password"),
            (
                "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2w",
                "token shape pypi",
            ),
            ("sk_live_abcdefghijklmnopqrstuvwx", "token shape stripe"),
            (
                "AIzaSyAbcdefghijklmnopqrstuvwxyz0123456",
                "token shape google api key",
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk",
                "token shape jwt",
            ),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "private key"),
        ] {
            assert_eq!(rule("PLAIN_VALUE", value).as_deref(), Some(why), "{value}");
        }
        for value in [
            "postgres://h/db",
            "https://user@h/x",
            "desk-top",
            "task-runner",
            "AKIA",
            "/usr/bin:/bin",
            "/data/hf_models_cache_directory_long_name_x",
        ] {
            assert_eq!(rule("PLAIN_VALUE", value), None, "{value}");
        }
    }

    #[test]
    fn the_policies_pass_what_they_say() {
        let amb = ambient(&[
            ("PATH", "/bin"),
            ("LC_TIME", "C"),
            ("EDITOR", "vi"),
            ("A_TOKEN", "t"),
        ]);
        let names = |p: EnvPolicy| -> Vec<String> {
            EnvPlan::build(&amb, true, false, p, &[], &[])
                .inherited
                .iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(EnvPolicy::Inherit), ["PATH", "LC_TIME", "EDITOR"]);
        assert_eq!(names(EnvPolicy::Core), ["PATH", "LC_TIME"]);
        assert!(names(EnvPolicy::None).is_empty());
        let plan = EnvPlan::build(&amb, true, false, EnvPolicy::Core, &[], &[]);
        // A_TOKEN is listed as scrubbed (and wiped) whatever the policy.
        assert_eq!((plan.policy_dropped, plan.scrubbed.len()), (1, 1));
    }

    #[test]
    fn layers_merge_in_order() {
        let amb = ambient(&[
            ("PLAIN", "1"),
            ("MY_API_KEY", "s3cret"),
            ("DSH_OLD", "stale"),
            ("PAGER", "less"),
        ]);
        let explicit = vec![
            EnvArg::PassThrough("MY_API_KEY".into()),
            EnvArg::Set("DSH_X".into(), "2".into()),
            EnvArg::PassThrough("UNSET_ONE".into()),
        ];
        let managed = vec![("DSH_X".to_string(), "1".to_string())];
        let plan = EnvPlan::build(&amb, false, false, EnvPolicy::Inherit, &explicit, &managed);
        let env = plan.child_env();
        assert_eq!(get(&env, "PLAIN"), Some("1"));
        assert_eq!(get(&env, "MY_API_KEY"), Some("s3cret"));
        assert_eq!(get(&env, "DSH_OLD"), None);
        assert_eq!(get(&env, "PAGER"), Some("cat"));
        assert_eq!(get(&env, "DSH_X"), Some("1"));
        assert_eq!(
            plan.scrubbed,
            vec![OsString::from("DSH_OLD"), "MY_API_KEY".into()]
        );
        assert_eq!(plan.missing_pass_through, vec!["UNSET_ONE".to_string()]);
        let eff: Vec<_> = plan
            .effective_settings()
            .iter()
            .map(|s| (s.name.as_str(), s.layer))
            .collect();
        assert!(eff.contains(&("DSH_X", Layer::Managed)));
        assert!(!eff.contains(&("DSH_X", Layer::Explicit)));
    }

    #[test]
    fn interactive_skips_overrides() {
        let plan = EnvPlan::build(
            &ambient(&[("TERM", "xterm")]),
            true,
            false,
            EnvPolicy::Inherit,
            &[],
            &[],
        );
        assert_eq!(get(&plan.child_env(), "TERM"), Some("xterm"));
    }

    #[test]
    fn arg_parsing() {
        assert_eq!(
            parse_env_arg("A=b=c"),
            Ok(EnvArg::Set("A".into(), "b=c".into()))
        );
        assert_eq!(parse_env_arg("A"), Ok(EnvArg::PassThrough("A".into())));
        assert!(parse_env_arg("=x").is_err());
        assert!(parse_env_arg("").is_err());
        assert_eq!(
            parse_managed_arg("DSH_X=1"),
            Ok(("DSH_X".into(), "1".into()))
        );
        assert!(parse_managed_arg("FOO=1").is_err());
        assert!(parse_managed_arg("DSH_X").is_err());
    }
}
