//! The command line, defined once with clap: the single source of `--help`,
//! the man pages and the shell completions (`examples/gen_docs.rs` includes
//! this file to generate them).
//!
//! Parsing yields what the user said ([`RunArgs`]); [`RunArgs::into_request`]
//! hands it to [`dsh_exec_core::resolve`], which applies every default.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use dsh_exec_core::limits::LimitMode;
use dsh_exec_core::net::rules::HostRule;
use dsh_exec_core::render::plain::Render;
use dsh_exec_core::request::env::{EnvArg, EnvPolicy, parse_env_arg, parse_managed_arg};
use dsh_exec_core::sandbox::{Mode, Network};
use dsh_exec_core::spec::LiveOutput;
use dsh_exec_core::units::{parse_budget, parse_duration, parse_timeout};
use dsh_exec_core::{Keep, Request, Signal};

const AFTER_HELP: &str = "\
Output: the command's stdout, a [stderr] section when stderr is not empty,
notices ([timed out after D], [aborted by SIGNAL]), and always, last,
[exit code: N] or [killed by signal: NAME]. With --json, one JSON object.

Exit status: the command's own; 124 timed out; 128+S killed by (or aborted
by) signal S; 125 dsh-exec itself failed, a usage error included (USAGE).

Examples:
  dsh-exec -- 'make test'
  dsh-exec --timeout 30s --stdout-max-bytes 64K -- cargo build
  dsh-exec --json -e MY_TOKEN -- ./deploy.sh";

/// The reference sections of `--help` and of the man page, defined once:
/// (heading, paragraphs).
pub const REFERENCE: &[(&str, &[&str])] = &[
    (
        "OUTPUT",
        &[
            "The command's stdout comes first, then a [stderr] section when stderr is not empty. \
             A stream that outgrew its budget opens with [STREAM truncated: N earlier bytes omitted; \
             full stream: PATH] (--keep tail), ends with [STREAM truncated: N later bytes omitted; \
             ...] (--keep head), or has [... N bytes omitted; full stream: PATH ...] between its head \
             and its tail (--keep head+tail); the spill file at PATH holds every byte. Cuts fall at \
             line boundaries within 1 KiB where they can. --render plain applies carriage returns, \
             backspaces and erase-in-line and removes escape sequences; --stream past the budget \
             ends with [STREAM: N bytes shown live, M kept; full stream: PATH].",
            "Notices follow, each only when true: [NAME VALUE capped at CAP by FILE], one line per \
             sandbox denial ([sandbox: denied write to PATH; try FLAG], [sandbox: denied chmod of \
             PATH], [sandbox: network denied: socket(AF_INET)], [sandbox: network denied: \
             connect(192.0.2.2:80)], [sandbox: network denied: proxy refused HOST:PORT (REASON)], \
             then [sandbox: N more denied; --json lists them]), [sandbox: MODE; the sandbox runner failed], [timed out after D], \
             [aborted by SIGNAL].",
            "A line of the command's own output shaped like one of these notices or markers is \
             shown with a backslash in front (\\[exit code: 0]); on a terminal, output holding an \
             escape sequence is followed by an attribute reset before the notices.",
            "On a terminal, the command's control sequences are shown, not obeyed: ESC as \\x1b \
             followed by the sequence (\\x1b]0;title\\x07, \\x1b[2J), other controls but newline \
             and tab as \\xNN, a carriage return not before a newline as \\r and a line break; SGR \
             colours stay unless --color never or NO_COLOR. This covers the output, the [stderr] \
             section and --stream's live copy; --render raw (given) opts out. The JSON and the \
             spill files are always exact.",
            "The last line is always the marker: [exit code: N], [killed by signal: NAME], or \
             [detached as job ID] for a --detach-after run still running. 'dsh-exec parse-status' \
             reads it back. With --json, one JSON object is printed instead: command, workdir, \
             exit_code, signal, timed_out, aborted, aborted_by, capped, env_scrubbed, timeout_ms, duration_ms, \
             stdout and stderr (text, head, truncated, kept, omitted_bytes, render, total_bytes, \
             spill_path), resources (cpu_user_ms, cpu_system_ms, peak_memory_bytes, max_pids, \
             source), limit_exceeded (memory, pids, cpu, file_size or null), limits (memory_max_bytes, \
             pids_max, cpu_max_ms, file_size_max_bytes, mechanism, not_enforced), sandbox (mode, denied, \
             denials, denials_more, denials_source, network_denied, enforcement, read_enforcement, \
             runner_failed, \
             network, network_enforcement, network_allow, network_proxy, network_denials, \
             network_denials_more, network_allowed, protected_changes).",
        ],
    ),
    (
        "EXIT STATUS",
        &[
            "The command's own exit status; 124 when the deadline passed; 128+S when the command \
             was killed by signal S (also by a limit: 137 for the memory limit's SIGKILL, 143 for the \
             CPU limit's SIGTERM), or when dsh-exec was aborted by signal S (SIGINT 130, SIGTERM \
             143, SIGHUP 129); 125 when dsh-exec itself failed (WORKDIR_UNUSABLE, SHELL_NOT_FOUND, \
             STDIN_UNREADABLE, SPILL_UNUSABLE, CONFIG_INVALID, JOBS_UNUSABLE, SANDBOX_UNAVAILABLE, \
             LIMIT_UNAVAILABLE, SPAWN_FAILED, RUNTIME_FAILED, SUPERVISION_FAILED), the sandbox runner failed, or the \
             command line was wrong (USAGE: a bad flag or value, as timeout(1), env(1) and nice(1) \
             exit 125 for their own failures; with --json an error object on stdout too). 126 and \
             127 come from bash itself. parse-status: 0, 1 when the last line is no marker, 2 when \
             its input cannot be read.",
        ],
    ),
    (
        "ENVIRONMENT",
        &[
            "The command's environment is built in four layers: the environment of dsh-exec \
             (--env-policy inherit; core passes only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, \
             TZ, TMPDIR and TERM; none nothing) minus what is plainly a secret (a name with a word \
             such as KEY, SECRET, TOKEN, PASSWORD, PASS, PWD, AUTH, SESSION, PAT, DSN or WEBHOOK; \
             SSH_AUTH_SOCK, GPG_AGENT_INFO, KRB5CCNAME; a value with a URL password, a private key \
             or a known token shape; see docs/environment.md) and minus every DSH_* name; then PAGER=cat, GIT_PAGER=cat, MANPAGER=cat, \
             GIT_TERMINAL_PROMPT=0, TERM=dumb and NO_COLOR=1 (not with --interactive); then --env \
             entries; then --dsh-env entries, which no --env entry can displace. Sandboxed runs \
             also get DSH_SANDBOX_MODE and DSH_SANDBOX_NETWORK (allow, deny, loopback or \
             allow-list: the policy in force, the default too); \
             --network allow= runs get HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower-case \
             forms pointing at the run's proxy, and NO_PROXY=localhost,127.0.0.1,::1.",
            "NO_COLOR (non-empty) turns colour off; CLICOLOR_FORCE (non-empty, not 0) turns it \
             on when not on a terminal; NO_COLOR wins. TMPDIR is the temp directory that \
             workspace-write may write. DSH_EXEC_CONFIG, else \
             XDG_CONFIG_HOME/dsh-exec/config.toml, else ~/.config/dsh-exec/config.toml is the \
             configuration file (defaults and caps; flags win over it, caps over both). \
             dsh-exec's state directory STATE (background jobs in STATE/jobs, spill files in \
             STATE/spill) is XDG_RUNTIME_DIR/dsh-exec, else XDG_STATE_HOME/dsh-exec, else \
             ~/.local/state/dsh-exec, else TMPDIR/.dsh-exec-UID; every confining mode keeps it \
             unreadable.",
        ],
    ),
];

/// Examples for `--help` and the man page: (command, what it does).
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "dsh-exec -- 'make test'",
        "Run the tests with the default 10-minute deadline.",
    ),
    (
        "dsh-exec --timeout 30s --stdout-max-bytes 64K -- cargo build",
        "Keep the last 64 KiB of stdout; the rest goes to a spill file.",
    ),
    (
        "dsh-exec --json -e MY_TOKEN -- ./deploy.sh",
        "Pass one scrubbed secret through and print the result as JSON.",
    ),
    (
        "dsh-exec -s workspace-write -- npm test",
        "Confine writes to the workdir and the temp dir; loopback only (the default).",
    ),
    (
        "dsh-exec -s workspace-write --network allow=registry.npmjs.org -- npm ci",
        "Reach one registry, through a proxy of the run, and nothing else off the host.",
    ),
    (
        "dsh-exec explain -s read-only -- make",
        "Show what would run, with which environment and confinement.",
    ),
];

/// The reference sections and examples as plain text, for `--help`.
pub fn reference_text() -> String {
    let mut text = String::new();
    for (heading, paragraphs) in REFERENCE {
        text.push_str(&format!("{heading}:\n"));
        for p in *paragraphs {
            text.push_str(&format!("  {p}\n"));
        }
        text.push('\n');
    }
    text.push_str("EXAMPLES:\n");
    for (cmd, what) in EXAMPLES {
        text.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    text
}

/// Runs one shell command safely and reports exactly what happened.
#[derive(Debug, Parser)]
#[command(
    name = "dsh-exec",
    version,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    /// `explain` or `parse-status`; `None` runs the command.
    pub subcommand: Option<Sub>,
    #[command(flatten)]
    /// The options and command of a run.
    pub run: RunArgs,
}

/// The subcommands; a name is one only as the first argument.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Resolve and show the spec and child environment; run nothing.
    Explain(Box<RunArgs>),
    /// Serve the Model Context Protocol on stdio: tools run, start, read, write_stdin, wait, kill and list, and commit, discard and diff for transactions, under the policy these options fix (a call may ask for less, never for more).
    #[command(
        after_help = "Refused here (exit 125, USAGE), since each tool call brings its own: a COMMAND, \
                      --background, --detach-after, -i, --stream, --pty, --stdin and --stdin-file.",
        mut_arg("command", |a| a.hide(true)),
        mut_arg("background", |a| a.hide(true)),
        mut_arg("detach_after", |a| a.hide(true)),
        mut_arg("interactive", |a| a.hide(true)),
        mut_arg("stream", |a| a.hide(true)),
        mut_arg("pty", |a| a.hide(true)),
        mut_arg("stdin", |a| a.hide(true)),
        mut_arg("stdin_file", |a| a.hide(true))
    )]
    Mcp(Box<McpArgs>),
    /// Read, write to, resize, wait for, kill, list or prune background jobs.
    #[command(subcommand, disable_help_subcommand = true)]
    Job(JobCmd),
    /// Remove this user's spill directories that nothing has changed for a
    /// while (a week unless --older-than says otherwise).
    Prune {
        /// Prune spill directories (what `prune` removes; required).
        #[arg(long)]
        spill: bool,
        /// Only those unchanged for this long.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "7d")]
        older_than: Duration,
        /// Look in DIR instead of the configured spill_dir, STATE/spill and the temp dir.
        #[arg(long, value_name = "DIR")]
        spill_dir: Option<PathBuf>,
    },
    /// Apply a transaction's changes (from a run with --transaction) to the real roots; a path changed meanwhile in the real tree, or protected, is refused and named (exit 1 when any was).
    Commit {
        /// The transaction id the run printed.
        id: String,
        /// Apply nothing when any path would be refused.
        #[arg(long)]
        atomic: bool,
        /// Also apply paths changed in the real tree after the transaction started (never protected paths or planted git metadata).
        #[arg(long)]
        force: bool,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Throw a transaction's changes away; the real roots stay as they are.
    Discard {
        /// The transaction id.
        id: String,
    },
    /// Show a transaction's changes: a unified diff of text files, a line for each other change.
    Diff {
        /// The transaction id.
        id: String,
        /// Only changes under these paths.
        paths: Vec<PathBuf>,
    },
    /// List or prune the pending transactions (those of runs with --transaction not yet committed or discarded).
    #[command(subcommand, disable_help_subcommand = true)]
    Transaction(TransactionCmd),
    /// Read a rendered result (or a --json one) and print its status as JSON: exit_code, signal, and timed_out and aborted from the notices above the marker (exit 1 when the last line is no marker).
    ParseStatus {
        /// The rendered result; standard input when absent or '-'.
        file: Option<PathBuf>,
    },
}

/// `dsh-exec mcp`: the server's options.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Leave the jobs the server started running when the client closes its stdin [default: they are killed and their trees swept].
    #[arg(long)]
    pub keep_jobs: bool,
    /// How many `run` calls run at once; more wait for a slot, and say so in progress notifications.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_parallel: u32,
    /// How many background jobs started by `start` may run at once; one more is a tool error.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_jobs: u32,
    #[command(flatten)]
    /// The policy every call runs under (a call may narrow it).
    pub run: RunArgs,
}

/// `dsh-exec transaction ...`: this user's pending transactions.
#[derive(Debug, Subcommand)]
pub enum TransactionCmd {
    /// List the pending transactions: id, state (pending, running, lost), changes, working directory, command.
    List {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Discard the pending transactions that started longer ago than --older-than (a week unless it says otherwise), those whose run was lost (its dsh-exec killed), and unrecorded ones left by a dsh-exec killed as it started (unchanged for a minute at least).
    Prune {
        /// Only those started at least this long ago.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "7d")]
        older_than: Duration,
    },
}

/// `dsh-exec job ...`: the background jobs of this user.
#[derive(Debug, Subcommand)]
pub enum JobCmd {
    /// Print what the job wrote since the previous read, then `[running]` or its end.
    Read {
        /// The job id printed by --background.
        id: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Wait for the job to end and print its result as a foreground run would.
    Wait {
        /// The job id.
        id: String,
        /// Give up after this long: print `[still running]` and exit 124.
        #[arg(short = 't', long, value_name = "DURATION", value_parser = timeout_value, allow_hyphen_values = true)]
        timeout: Option<Timeout>,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Append to the stdin of a job started with --stdin pipe (DATA with C escapes: \n, \t, \\, \xHH; or --file; '-' reads this process's stdin), or close it; exit 1 if the job cannot take it.
    Write {
        /// The job id.
        id: String,
        /// The bytes to write, with \n, \r, \t, \0, \e, \\ and \xHH escapes; '-': this process's stdin, as it is.
        #[arg(
            value_name = "DATA",
            conflicts_with = "file",
            allow_hyphen_values = true
        )]
        data: Option<String>,
        /// Write this file's bytes, as they are.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Close the job's stdin (after writing DATA or FILE, if given): the command reads end-of-file.
        #[arg(long)]
        close: bool,
        /// Give up when the command has not read for this long [default: 10s].
        #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
        timeout: Option<Duration>,
    },
    /// Set the window size of a --pty job's terminal (the command gets SIGWINCH); exit 1 if the job has none.
    Resize {
        /// The job id.
        id: String,
        /// The size as COLSxROWS, e.g. 120x40.
        #[arg(value_name = "COLSxROWS", value_parser = parse_window)]
        size: (u16, u16),
    },
    /// Kill the job's whole tree (SIGTERM, grace, SIGKILL); exit 1 if it had ended.
    Kill {
        /// The job id.
        id: String,
    },
    /// List this user's jobs.
    List {
        /// Print one JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove the directories of finished and lost jobs.
    Prune {
        /// Also remove their spill files.
        #[arg(long)]
        spill: bool,
    },
}

/// When to colour the notices and the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ColorChoice {
    /// On a terminal (or with CLICOLOR_FORCE), unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// A sandbox mode as clap sees it: the names and help of [`Mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeArg(pub Mode);

impl ValueEnum for ModeArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [ModeArg; 3] = [
            ModeArg(Mode::ALL[0]),
            ModeArg(Mode::ALL[1]),
            ModeArg(Mode::ALL[2]),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.as_str()).help(self.0.describe()))
    }
}

/// Parses `--spill-max-bytes`.
fn parse_size_arg(s: &str) -> Result<u64, String> {
    dsh_exec_core::units::parse_size(s)
}

/// A limit's value: `None` is `none` (unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit<T>(pub Option<T>);

/// `none` as unlimited, else `parse`.
fn limit_or_none<T>(s: &str, parse: fn(&str) -> Result<T, String>) -> Result<Limit<T>, String> {
    if s.trim() == "none" {
        return Ok(Limit(None));
    }
    parse(s).map(|v| Limit(Some(v)))
}

/// Parses `--memory-max`.
fn parse_memory_arg(s: &str) -> Result<Limit<u64>, String> {
    limit_or_none(s, dsh_exec_core::units::parse_memory_max)
}

/// Parses `--pids-max`.
fn parse_pids_arg(s: &str) -> Result<Limit<u64>, String> {
    limit_or_none(s, dsh_exec_core::units::parse_pids_max)
}

/// Parses `--cpu-max`.
fn parse_cpu_arg(s: &str) -> Result<Limit<Duration>, String> {
    limit_or_none(s, dsh_exec_core::units::parse_cpu_max)
}

/// Parses `--limits`.
fn parse_limits_arg(s: &str) -> Result<LimitMode, String> {
    s.parse()
}

/// Parses `job resize`'s COLSxROWS: each from 1 to 65535.
fn parse_window(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("invalid size '{s}' (expected COLSxROWS, e.g. 120x40)");
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let n = |t: &str| t.trim().parse::<u16>().ok().filter(|v| *v > 0);
    Ok((n(c).ok_or_else(bad)?, n(r).ok_or_else(bad)?))
}

/// Parses `--signal`.
fn parse_signal(s: &str) -> Result<Signal, String> {
    Signal::parse_first(s)
}

/// Parses `--keep`.
fn parse_keep(s: &str) -> Result<Keep, String> {
    s.parse()
}

/// Parses `--render`.
fn parse_render(s: &str) -> Result<Render, String> {
    s.parse()
}

/// One `--network` value: a policy, and for `allow=HOSTS` its hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkArg {
    /// The policy.
    pub policy: Network,
    /// The hosts of `allow=HOSTS`; empty for the other policies.
    pub hosts: Vec<HostRule>,
}

/// Parses `allow`, `deny`, `loopback` or `allow=HOST[,HOST...]`.
///
/// Errors with a one-line message naming the bad value or host.
pub fn parse_network(s: &str) -> Result<NetworkArg, String> {
    if let Some(list) = s.strip_prefix("allow=") {
        return Ok(NetworkArg {
            policy: Network::AllowList,
            hosts: dsh_exec_core::net::rules::parse_list(list)?,
        });
    }
    match s.parse::<Network>() {
        Ok(Network::AllowList) | Err(_) => Err(format!(
            "invalid network policy '{s}' (allow, deny, loopback or allow=HOST[,HOST...])"
        )),
        Ok(policy) => Ok(NetworkArg {
            policy,
            hosts: Vec::new(),
        }),
    }
}

/// The policy of every `--network` given: the last plain one, or the
/// hosts of all the `allow=` ones together.
///
/// Errors when an `allow=` list is mixed with another policy.
fn network_of(args: &[NetworkArg]) -> Result<(Option<Network>, Vec<HostRule>), String> {
    let lists: Vec<HostRule> = args.iter().flat_map(|a| a.hosts.clone()).collect();
    match args.iter().find(|a| a.policy != Network::AllowList) {
        Some(plain) if !lists.is_empty() => Err(format!(
            "--network {} cannot be combined with --network allow=HOSTS",
            plain.policy
        )),
        _ if !lists.is_empty() => Ok((Some(Network::AllowList), lists)),
        _ => Ok((args.last().map(|a| a.policy), Vec::new())),
    }
}

/// An environment policy as clap sees it (the core has no clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvPolicyArg(pub EnvPolicy);

impl ValueEnum for EnvPolicyArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [EnvPolicyArg; 3] = [
            EnvPolicyArg(EnvPolicy::Inherit),
            EnvPolicyArg(EnvPolicy::Core),
            EnvPolicyArg(EnvPolicy::None),
        ];
        &ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self.0 {
            EnvPolicy::Inherit => PossibleValue::new("inherit")
                .help("this process's environment minus what is plainly a secret"),
            EnvPolicy::Core => PossibleValue::new("core")
                .help("only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR and TERM"),
            EnvPolicy::None => PossibleValue::new("none").help("nothing of this process's"),
        })
    }
}

/// A deadline: `None` is no deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout(pub Option<Duration>);

fn timeout_value(s: &str) -> Result<Timeout, String> {
    parse_timeout(s).map(Timeout)
}

fn managed_value(s: &str) -> Result<(String, String), String> {
    parse_managed_arg(s)
}

/// Options of a run (and of `explain`).
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Working directory of the command [default: the current directory].
    #[arg(short = 'C', long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m].
    #[arg(short = 't', long, value_name = "DURATION", value_parser = timeout_value, allow_hyphen_values = true)]
    pub timeout: Option<Timeout>,
    /// The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM].
    #[arg(long, value_name = "SIG", value_parser = parse_signal)]
    pub signal: Option<Signal>,
    /// End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none].
    #[arg(long, value_name = "DURATION", value_parser = timeout_value, allow_hyphen_values = true)]
    pub idle_timeout: Option<Timeout>,
    /// Grace period between SIGTERM and SIGKILL [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub kill_after: Option<Duration>,
    /// Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_budget, allow_hyphen_values = true)]
    pub stdout_max_bytes: Option<u64>,
    /// Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_budget, allow_hyphen_values = true)]
    pub stderr_max_bytes: Option<u64>,
    /// The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited].
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, allow_hyphen_values = true)]
    pub file_size_max: Option<u64>,
    /// The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, allow_hyphen_values = true)]
    pub spill_max_bytes: Option<u64>,
    /// The whole tree's memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as '[killed by the memory limit (SIZE)]'; none: unlimited, whatever the configuration file's default [default: unlimited].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory_arg, allow_hyphen_values = true)]
    pub memory_max: Option<Limit<u64>>,
    /// Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited].
    #[arg(long, value_name = "N", value_parser = parse_pids_arg, allow_hyphen_values = true)]
    pub pids_max: Option<Limit<u64>>,
    /// CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited].
    #[arg(long, value_name = "DURATION", value_parser = parse_cpu_arg, allow_hyphen_values = true)]
    pub cpu_max: Option<Limit<Duration>>,
    /// strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict].
    #[arg(long, value_name = "strict|best-effort", value_parser = parse_limits_arg)]
    pub limits: Option<LimitMode>,
    /// Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail].
    #[arg(long, value_name = "tail|head|head+tail", value_parser = parse_keep)]
    pub keep: Option<Keep>,
    /// raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw].
    #[arg(long, value_name = "raw|plain", value_parser = parse_render)]
    pub render: Option<Render>,
    /// Feed this file to the command's stdin ('-': this process's stdin) [default: closed].
    #[arg(long, value_name = "PATH")]
    pub stdin_file: Option<PathBuf>,
    /// closed: the command's stdin reads end-of-file at once; pipe (with --background): it stays open, 'dsh-exec job write ID' appends to it and 'job write ID --close' closes it [default: closed].
    #[arg(long, value_name = "closed|pipe", value_parser = ["closed", "pipe"], conflicts_with = "stdin_file")]
    pub stdin: Option<String>,
    /// With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal's (stderr merged), 'job write' types into it, 'job resize' sets its size; TERM=xterm-256color unless -e says otherwise.
    #[arg(long, conflicts_with_all = ["stdin_file", "stdin", "interactive"])]
    pub pty: bool,
    /// Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one).
    #[arg(short = 'e', long = "env", value_name = "KEY[=VALUE]", value_parser = parse_env_arg)]
    pub env: Vec<EnvArg>,
    /// Which of this process's variables the command inherits [default: inherit]; --env applies on top.
    #[arg(long = "env-policy", value_name = "inherit|core|none", value_enum)]
    pub env_policy: Option<EnvPolicyArg>,
    /// Set a managed DSH_KEY=VALUE entry, applied after every --env entry.
    #[arg(long = "dsh-env", value_name = "DSH_KEY=VALUE", value_parser = managed_value)]
    pub dsh_env: Vec<(String, String)>,
    /// Where the run's private spill directory is created [default: STATE/spill, out of confined runs' reach; $TMPDIR or /tmp if that cannot be made].
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Confine the command: read-only, workspace-write or full-access (Linux Landlock).
    #[arg(short = 's', long, value_name = "MODE", value_enum)]
    pub sandbox: Option<ModeArg>,
    /// Root the command may write under in workspace-write [default: the workdir].
    #[arg(long, value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,
    /// Another directory writable in workspace-write (repeatable; missing ones are skipped).
    #[arg(long = "writable-root", value_name = "PATH")]
    pub writable_roots: Vec<PathBuf>,
    /// Keep the temp directory read-only in workspace-write.
    #[arg(long)]
    pub no_temp_write: bool,
    /// Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept).
    #[arg(long)]
    pub allow_caches: bool,
    /// Run the workspace root and every --writable-root on an overlay: the command's writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root).
    #[arg(long)]
    pub transaction: bool,
    /// What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep].
    #[arg(long, value_name = "WHAT")]
    pub on_exit: Option<dsh_exec_core::sandbox::overlay::OnExit>,
    /// A Unix socket outside the writable roots that a confined command may connect to (repeatable).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable).
    #[arg(long = "protect", value_name = "PATH")]
    pub protect: Vec<PathBuf>,
    /// In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable).
    #[arg(long = "allow-write", value_name = "PATH")]
    pub allow_write: Vec<PathBuf>,
    /// Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub deny_read: Vec<PathBuf>,
    /// Read only PATH (repeatable), the workspace, the writable roots and the system's directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices.
    #[arg(long = "read-root", value_name = "PATH")]
    pub read_roots: Vec<PathBuf>,
    /// Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable).
    #[arg(long = "allow-read", value_name = "PATH")]
    pub allow_read: Vec<PathBuf>,
    /// IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket.
    #[arg(long, value_name = "POLICY", value_parser = parse_network)]
    pub network: Vec<NetworkArg>,
    /// Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names.
    #[arg(long = "credential", value_name = "NAME=SOURCE")]
    pub credentials: Vec<dsh_exec_core::net::inject::Credential>,
    /// Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run.
    #[arg(long = "inject", value_name = "RULE")]
    pub inject: Vec<dsh_exec_core::net::inject::InjectRule>,
    /// Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env).
    #[arg(long = "credential-env", value_name = "NAME=VAR")]
    pub credential_env: Vec<dsh_exec_core::net::inject::PhantomVar>,
    /// Trust the CA certificates in FILE (PEM) for the proxy's TLS to injection hosts, beside the system's roots (repeatable; config key upstream_ca).
    #[arg(long = "upstream-ca", value_name = "FILE")]
    pub upstream_ca: Vec<PathBuf>,
    /// Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker.
    #[arg(short = 'i', long, conflicts_with = "stdin_file")]
    pub interactive: bool,
    /// Start the command as a background job and print its id (see `dsh-exec job`).
    #[arg(long, conflicts_with_all = ["interactive", "stream"])]
    pub background: bool,
    /// If the command still runs after this long, print its output so far and
    /// leave it running as a background job.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true, conflicts_with_all = ["interactive", "background", "stream"])]
    pub detach_after: Option<Duration>,
    /// Show the output live as it is produced (to stderr with --json), capturing it as usual.
    #[arg(long, conflicts_with = "interactive")]
    pub stream: bool,
    /// Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what '> FILE' costs. As under '> FILE', a command that reopens /dev/stdout or /dev/stderr by path ('echo x > /dev/stderr') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory's file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made ('explain' says which).
    #[arg(long, conflicts_with_all = ["interactive", "stream", "background", "pty"])]
    pub output_files: bool,
    /// No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Print one JSON object instead of the rendered text.
    #[arg(long)]
    pub json: bool,
    /// Print the run's events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it).
    #[arg(long, conflicts_with_all = ["json", "stream", "interactive", "background", "detach_after", "output_files", "pty"])]
    pub events: bool,
    /// Colour the notices and the marker; never (or NO_COLOR) also removes the command's own colours on a terminal.
    #[arg(long, value_name = "WHEN", value_enum, default_value_t)]
    pub color: ColorChoice,
    /// The command: one word is a bash script; several are shell-quoted and joined. With -i it may be left out: $SHELL, else bash.
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    pub command: Vec<String>,
}

impl RunArgs {
    /// What the user said, as a request for [`dsh_exec_core::resolve`].
    ///
    /// Errors with a one-line usage message when the flags contradict each
    /// other (an `allow=` list beside another `--network` policy).
    pub fn into_request(self) -> Result<Request, String> {
        let (network, network_allow) = network_of(&self.network)?;
        Ok(Request {
            injection: dsh_exec_core::net::inject::Injection {
                credentials: self.credentials,
                inject: self.inject,
                phantom_env: self.credential_env,
                upstream_ca: self.upstream_ca,
            },
            secrets: None,
            command: self.command,
            workdir: self.workdir,
            timeout: self.timeout.map(|t| t.0),
            kill_after: self.kill_after,
            idle_timeout: self.idle_timeout.map(|t| t.0),
            stdout_max_bytes: self.stdout_max_bytes,
            stderr_max_bytes: self.stderr_max_bytes,
            keep: self.keep,
            spill_max_bytes: self.spill_max_bytes,
            file_size_max: self.file_size_max,
            memory_max: self.memory_max.map(|l| l.0),
            pids_max: self.pids_max.map(|l| l.0),
            cpu_max: self.cpu_max.map(|l| l.0),
            limits: self.limits,
            signal: self.signal,
            render: self.render,
            stdin_file: self.stdin_file,
            stdin_pipe: self.stdin.as_deref() == Some("pipe"),
            pty: self.pty,
            output_files: self.output_files,
            env: self.env,
            env_policy: self.env_policy.map(|p| p.0),
            dsh_env: self.dsh_env,
            spill_dir: self.spill_dir,
            sandbox: self.sandbox.map(|m| m.0),
            network,
            network_allow,
            workspace_root: self.workspace_root,
            writable_roots: self.writable_roots,
            allow_unix_sockets: self.allow_unix_sockets,
            protect: self.protect,
            allow_write: self.allow_write,
            deny_read: self.deny_read,
            read_roots: self.read_roots,
            allow_read: self.allow_read,
            no_temp_write: self.no_temp_write,
            allow_caches: self.allow_caches,
            transaction: self.transaction,
            on_exit: self.on_exit,
            interactive: self.interactive,
            // Decided by the binary from --color (resolve_args).
            terminal_colours: None,
            background: self.background || self.detach_after.is_some(),
            detach: self.detach_after.is_some(),
            config: None,
            stream: match (self.stream, self.json) {
                (false, _) => None,
                (true, false) => Some(LiveOutput::Mirrored),
                (true, true) => Some(LiveOutput::Stderr),
            },
        })
    }
}

/// The `clap` command, for parsing, help and generated documentation.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command().after_long_help(reference_text())
}

/// The names the full [`command`] takes as a subcommand in the first
/// argument (a test checks this list against the definition).
const SUBCOMMANDS: &[&str] = &[
    "explain",
    "mcp",
    "job",
    "prune",
    "commit",
    "discard",
    "diff",
    "transaction",
    "parse-status",
];

/// Parses `argv` (the program's name first) with [`command`].
///
/// A run, whose first argument names no subcommand, is parsed by the run's
/// options alone: building the subcommands' definitions, two of which
/// hold every run option again, was a sixth of the instructions of
/// `dsh-exec -- true`. A run that parses so is what the full command
/// would have parsed (no subcommand can match); anything else, a help or
/// version request or an error included, goes through the full command,
/// so its message and help text are the full command's.
///
/// Errors with clap's error (help and version requests included).
pub fn parse(argv: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    let names_subcommand = argv
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| SUBCOMMANDS.contains(&a));
    if !names_subcommand {
        let run_only = <RunArgs as clap::Args>::augment_args(
            clap::Command::new("dsh-exec").disable_help_subcommand(true),
        );
        if let Ok(matches) = run_only.try_get_matches_from(argv)
            && let Ok(run) = <RunArgs as clap::FromArgMatches>::from_arg_matches(&matches)
        {
            return Ok(Cli {
                subcommand: None,
                run,
            });
        }
    }
    let matches = command().try_get_matches_from(argv)?;
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definition_is_consistent() {
        command().debug_assert();
    }

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("dsh-exec").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_fast_path_knows_every_subcommand_name() {
        let mut names: Vec<String> = command()
            .get_subcommands()
            .flat_map(|c| std::iter::once(c.get_name()).chain(c.get_all_aliases()))
            .map(String::from)
            .collect();
        names.sort();
        let mut known: Vec<String> = SUBCOMMANDS.iter().map(|s| s.to_string()).collect();
        known.sort();
        assert_eq!(names, known);
    }

    #[test]
    fn the_fast_path_parses_what_the_full_command_parses() {
        for args in [
            &["--", "true"][..],
            &["-t", "5", "explain"],
            &["--json", "ls", "-la", "--color"],
            &[
                "-s",
                "workspace-write",
                "--network",
                "deny",
                "-e",
                "A=1",
                "--",
                "echo",
                "a b",
            ],
            &["--stdout-max-bytes", "1MiB", "--keep", "head", "true"],
        ] {
            let argv: Vec<std::ffi::OsString> = std::iter::once("dsh-exec")
                .chain(args.iter().copied())
                .map(Into::into)
                .collect();
            let fast = super::parse(&argv).unwrap();
            let full = Cli::try_parse_from(&argv).unwrap();
            assert!(fast.subcommand.is_none() && full.subcommand.is_none());
            assert_eq!(
                format!("{:?}", fast.run),
                format!("{:?}", full.run),
                "{args:?}"
            );
        }
    }

    #[test]
    fn subcommand_only_as_first_argument() {
        assert!(matches!(
            parse(&["explain", "--", "ls"]).subcommand,
            Some(Sub::Explain(_))
        ));
        let cli = parse(&["--", "explain"]);
        assert!(cli.subcommand.is_none());
        assert_eq!(cli.run.command, vec!["explain"]);
        let cli = parse(&["-t", "5", "explain"]);
        assert!(cli.subcommand.is_none());
        assert_eq!(cli.run.command, vec!["explain"]);
    }

    #[test]
    fn command_words_keep_their_flags() {
        let cli = parse(&["--json", "ls", "-la", "--color"]);
        assert!(cli.run.json);
        assert_eq!(cli.run.command, vec!["ls", "-la", "--color"]);
    }
}
