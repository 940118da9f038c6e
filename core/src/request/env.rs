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

use serde::{Deserialize, Serialize};

/// Case-insensitive substrings that make a variable name credential-shaped.
pub const CREDENTIAL_MARKERS: [&str; 6] =
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Variables that point a program at a control socket of the session
/// outside (a terminal multiplexer, an editor, an agent): a confined command
/// cannot reach them anyway (the gate refuses the connect), so they are not
/// passed, rather than left to fail. `-e NAME` passes one through.
pub const CONTROL_SOCKETS: [&str; 10] = [
    "TMUX",
    "TMUX_PANE",
    "STY",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK_CLI",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
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

/// True when `name` contains one of [`CREDENTIAL_MARKERS`], ignoring case.
pub fn is_credential_shaped(name: &OsStr) -> bool {
    let upper = name.as_bytes().to_ascii_uppercase();
    CREDENTIAL_MARKERS
        .iter()
        .any(|m| upper.windows(m.len()).any(|w| w == m.as_bytes()))
}

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

/// Which layer set a variable in the child environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Layer 2, a non-interactive override.
    Override,
    /// Layer 3, an explicit `--env` entry.
    Explicit,
    /// Layer 4, a managed `--dsh-env` entry.
    Managed,
}

/// A variable that one of layers 2 to 4 sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSetting {
    /// The variable name.
    pub name: String,
    /// Its value.
    pub value: OsString,
    /// The layer that sets it.
    pub layer: Layer,
}

/// The resolved plan for the child environment: what is inherited, what was
/// scrubbed, and what each later layer sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPlan {
    /// Layer 1: ambient variables that survive the scrub, in ambient order.
    pub inherited: Vec<(OsString, OsString)>,
    /// Ambient names removed by the scrub (credential-shaped or `DSH_*`), sorted.
    pub scrubbed: Vec<OsString>,
    /// Layers 2 to 4 in merge order; a later entry for the same name wins.
    pub settings: Vec<EnvSetting>,
    /// `--env KEY` names that had no ambient value and so set nothing.
    pub missing_pass_through: Vec<String>,
}

impl EnvPlan {
    /// Builds the plan from the ambient environment and the user's entries.
    pub fn build(
        ambient: &[(OsString, OsString)],
        interactive: bool,
        confined: bool,
        explicit: &[EnvArg],
        managed: &[(String, String)],
    ) -> EnvPlan {
        let mut plan = EnvPlan::default();
        for (k, v) in ambient {
            let control = confined && CONTROL_SOCKETS.iter().any(|c| k == *c);
            if is_credential_shaped(k) || is_managed(k) || control {
                if !plan.scrubbed.contains(k) {
                    plan.scrubbed.push(k.clone());
                }
            } else if !plan.inherited.iter().any(|(name, _)| name == k) {
                // A name given twice keeps its first value, the one
                // getenv(3) returns: every later layer then replaces it.
                plan.inherited.push((k.clone(), v.clone()));
            }
        }
        plan.scrubbed.sort();
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

/// The value to display for `name`: masked when the name is credential-shaped.
pub fn display_value(name: &str, value: &OsStr) -> String {
    if is_credential_shaped(OsStr::new(name)) {
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

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn credential_shapes() {
        for name in [
            "FOO_TOKEN",
            "MY_API_KEY",
            "DB_PASSWORD",
            "aws_secret_access_key",
            "passwd",
            "GcpCredentials",
        ] {
            assert!(is_credential_shaped(OsStr::new(name)), "{name}");
        }
        for name in ["PLAIN", "PATH", "HOME", "TOKE"] {
            assert!(!is_credential_shaped(OsStr::new(name)), "{name}");
        }
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
        let plan = EnvPlan::build(&amb, false, false, &explicit, &managed);
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
        let plan = EnvPlan::build(&ambient(&[("TERM", "xterm")]), true, false, &[], &[]);
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
