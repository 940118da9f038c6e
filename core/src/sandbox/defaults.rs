//! The sandbox's built-in path lists: what stays readable in every
//! confining mode, what never does unless lifted, and the package
//! managers' caches a run may be granted.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The package caches `--allow-caches` makes writable, as each tool finds
/// its own, from the caller's environment `env` and home, each with the
/// programs that use it:
///
/// | tool | directory |
/// |---|---|
/// | cargo | `$CARGO_HOME/registry` and `$CARGO_HOME/git` (`~/.cargo`) |
/// | npm | `$npm_config_cache` (`~/.npm`) |
/// | yarn | `$YARN_CACHE_FOLDER` (`$XDG_CACHE_HOME/yarn`) |
/// | pip | `$PIP_CACHE_DIR` (`$XDG_CACHE_HOME/pip`) |
/// | uv | `$UV_CACHE_DIR` (`$XDG_CACHE_HOME/uv`) |
/// | go | `$GOMODCACHE` (`$GOPATH/pkg/mod`, `~/go/pkg/mod`) and `$GOCACHE` (`$XDG_CACHE_HOME/go-build`) |
/// | gradle | `$GRADLE_USER_HOME/caches` and `/wrapper` (`~/.gradle`) |
/// | maven | `~/.m2/repository` |
///
/// `$XDG_CACHE_HOME` defaults to `~/.cache`. Only caches: not the tools'
/// configs (`~/.cargo/config.toml`, `~/.npmrc`), nor their `bin`
/// directories. Relative values are ignored, as the tools ignore them.
pub fn cache_dirs(
    env: &[(OsString, OsString)],
    home: Option<&Path>,
) -> Vec<(PathBuf, &'static [&'static str])> {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    let Some(home) = home else {
        return Vec::new();
    };
    let xdg_cache = get("XDG_CACHE_HOME").unwrap_or_else(|| home.join(".cache"));
    let cargo = get("CARGO_HOME").unwrap_or_else(|| home.join(".cargo"));
    let gradle = get("GRADLE_USER_HOME").unwrap_or_else(|| home.join(".gradle"));
    let gopath = get("GOPATH").unwrap_or_else(|| home.join("go"));
    const CARGO: &[&str] = &["cargo"];
    const NPM: &[&str] = &["npm", "npx"];
    const PIP: &[&str] = &["pip", "pip3"];
    const GO: &[&str] = &["go"];
    const GRADLE: &[&str] = &["gradle"];
    vec![
        (cargo.join("registry"), CARGO),
        (cargo.join("git"), CARGO),
        (
            get("npm_config_cache")
                .or_else(|| get("NPM_CONFIG_CACHE"))
                .unwrap_or_else(|| home.join(".npm")),
            NPM,
        ),
        (
            get("YARN_CACHE_FOLDER").unwrap_or_else(|| xdg_cache.join("yarn")),
            &["yarn"],
        ),
        (
            get("PIP_CACHE_DIR").unwrap_or_else(|| xdg_cache.join("pip")),
            PIP,
        ),
        (
            get("UV_CACHE_DIR").unwrap_or_else(|| xdg_cache.join("uv")),
            &["uv"],
        ),
        (
            get("GOMODCACHE").unwrap_or_else(|| gopath.join("pkg").join("mod")),
            GO,
        ),
        (
            get("GOCACHE").unwrap_or_else(|| xdg_cache.join("go-build")),
            GO,
        ),
        (gradle.join("caches"), GRADLE),
        (gradle.join("wrapper"), GRADLE),
        (home.join(".m2").join("repository"), &["mvn"]),
    ]
}

/// The paths unreadable in every confining mode unless lifted with
/// `--allow-read`, for a home `home` (the invoking user's; as root `/root`
/// too): credentials and keys of ssh, gpg, the clouds (AWS, Azure, Google
/// Cloud), Kubernetes, Docker, netrc, git, GitHub's CLI, npm, PyPI, cargo
/// and pass.
pub const READ_DENIED_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
];

/// What a process needs to run, readable under `--read-root` besides the
/// roots given: the system's programs and libraries, its configuration
/// (`/etc`, less the deny list), the kernel's interfaces (`/proc`: other
/// processes' private files are still guarded by ptrace access checks;
/// `/sys`), and the devices of [`READABLE_DEVICES`].
pub const SYSTEM_READ_ROOTS: [&str; 10] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys",
];

/// What stays readable in `/dev`, which is on the read deny list: a
/// root command could otherwise read raw disks (`/dev/sda`, and every
/// secret on them), the kernel log, and the user's other terminals. The
/// command's own terminal (`-i`) and the ones it makes (a private devpts)
/// are granted on their own; `--allow-read /dev` lifts the entry.
pub const READABLE_DEVICES: [&str; 10] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/shm",
    "/dev/mqueue",
    "/dev/hugepages",
];
