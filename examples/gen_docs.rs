//! Generates the shell completions (`completions/`) and the man pages
//! (`man/`) from the one clap definition in `src/cli.rs` (included here as
//! a module, as clap_complete suggests for build scripts), the JSON
//! Schema of every JSON output (`schema/*.schema.json`) from the types
//! that print them (`dsh_exec_core::schema::all`), and the MCP server's
//! tool list with their schemas (`schema/mcp-tools.json`).
//!
//! ```text
//! cargo run --example gen_docs            # write the files
//! cargo run --example gen_docs -- --check # exit 1 when a committed file drifted
//! ```

#[allow(dead_code)]
#[path = "../src/cli.rs"]
mod cli;

#[allow(dead_code)]
#[path = "../src/mcp_tools.rs"]
mod mcp_tools;

use std::path::{Path, PathBuf};

use clap_complete::Shell;
use roff::{Roff, bold, roman};

/// Every generated file: (path relative to the repository, contents).
fn generated() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for (shell, name) in [
        (Shell::Bash, "dsh-exec.bash"),
        (Shell::Zsh, "_dsh-exec"),
        (Shell::Fish, "dsh-exec.fish"),
        (Shell::Elvish, "dsh-exec.elv"),
        (Shell::PowerShell, "_dsh-exec.ps1"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cli::command(), "dsh-exec", &mut out);
        if shell == Shell::Bash {
            out = bash_names_fixed(out);
        }
        files.push((Path::new("completions").join(name), out));
    }
    files.push((Path::new("man").join("dsh-exec.1"), man_page()));
    for (stem, schema, _) in dsh_exec_core::schema::all() {
        let text = serde_json::to_string_pretty(&schema).expect("json") + "\n";
        files.push((
            Path::new("schema").join(format!("{stem}.schema.json")),
            text.into_bytes(),
        ));
    }
    let tools = serde_json::to_string_pretty(&mcp_tools::tools()).expect("json") + "\n";
    files.push((
        Path::new("schema").join("mcp-tools.json"),
        tools.into_bytes(),
    ));
    // A page for each subcommand, and for each of `job`'s, which the job
    // page names (dsh-exec-job-read(1), ...).
    // (file name, the command as typed, its definition)
    let mut pages: Vec<(String, String, clap::Command)> = Vec::new();
    for sub in cli::command().get_subcommands() {
        let (name, typed) = (
            format!("dsh-exec-{}", sub.get_name()),
            format!("dsh-exec {}", sub.get_name()),
        );
        for inner in sub.get_subcommands() {
            pages.push((
                format!("{name}-{}", inner.get_name()),
                format!("{typed} {}", inner.get_name()),
                inner.clone(),
            ));
        }
        pages.push((name, typed, sub.clone()));
    }
    for (name, typed, cmd) in pages {
        // clap takes a static name; this short-lived generator can leak it.
        let usage = format!("{typed} {}", usage_of(&cmd));
        let cmd = cmd
            .name(&*Box::leak(name.clone().into_boxed_str()))
            .bin_name(typed)
            .override_usage(usage);
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .date("2026-11-30")
            .render(&mut out)
            .expect("render");
        files.push((Path::new("man").join(format!("{name}.1")), out));
    }
    files
}

/// A command's options and arguments with their values
/// (`[-t|--timeout DURATION] ... ID`), which clap_mangen's synopsis leaves
/// out.
fn usage_of(cmd: &clap::Command) -> String {
    let mut parts = Vec::new();
    for arg in cmd.get_arguments() {
        let value = || {
            arg.get_value_names()
                .and_then(|v| v.first())
                .map(|v| v.to_string())
                .unwrap_or_else(|| arg.get_id().to_string().to_uppercase())
        };
        if arg.is_positional() {
            parts.push(if arg.is_required_set() {
                value()
            } else {
                format!("[{}]", value())
            });
            continue;
        }
        let Some(long) = arg.get_long() else { continue };
        let mut flag = match arg.get_short() {
            Some(s) => format!("-{s}|--{long}"),
            None => format!("--{long}"),
        };
        if arg.get_action().takes_values() {
            flag = format!("{flag} {}", value());
        }
        parts.push(format!("[{flag}]"));
    }
    parts.join(" ")
}

/// The SYNOPSIS of the main page, with each option's value
/// (`[-t|--timeout DURATION]`), which clap_mangen leaves out, and the
/// subcommands' forms.
fn synopsis() -> Roff {
    let mut roff = Roff::default();
    roff.control("SH", ["SYNOPSIS"]);
    let mut parts = vec![bold("dsh-exec")];
    for arg in cli::command().get_arguments() {
        let (Some(long), false) = (arg.get_long(), arg.is_positional()) else {
            continue;
        };
        let mut flag = match arg.get_short() {
            Some(s) => format!("-{s}|--{long}"),
            None => format!("--{long}"),
        };
        if arg.get_action().takes_values() {
            let value = arg
                .get_value_names()
                .and_then(|v| v.first())
                .map(|v| v.to_string())
                .unwrap_or_else(|| "VALUE".into());
            flag = format!("{flag} {value}");
        }
        parts.push(roman(format!(" [{flag}]")));
    }
    parts.push(roman(" [--] COMMAND..."));
    roff.text(parts);
    for form in [
        "dsh-exec -i [OPTIONS] [[--] COMMAND...]",
        "dsh-exec explain [OPTIONS] [--] COMMAND...",
        "dsh-exec mcp [--keep-jobs] [OPTIONS]",
        "dsh-exec parse-status [FILE]",
        "dsh-exec job read|write|resize|wait|kill|list|prune ...",
        "dsh-exec prune --spill [--older-than DURATION] [--spill-dir DIR]",
    ] {
        roff.control("br", []).text([roman(form)]);
    }
    roff
}

/// clap_complete's bash script for a hyphenated binary name sets
/// `cmd="dsh__exec__subcmd__job"` while its case branches read
/// `dsh__subcmd__exec__subcmd__job)`, so no subcommand ever completes:
/// the branch names are made to match what `cmd` is set to.
fn bash_names_fixed(script: Vec<u8>) -> Vec<u8> {
    String::from_utf8(script)
        .expect("clap_complete writes UTF-8")
        .replace("dsh__subcmd__exec__", "dsh__exec__")
        .into_bytes()
}

/// The man page: clap_mangen's title, name, synopsis, description, options
/// and subcommands, then the reference sections and examples of `cli.rs`.
fn man_page() -> Vec<u8> {
    // The short after-help is replaced by the full reference sections below.
    let cmd = cli::command()
        .after_help(None::<&str>)
        .after_long_help(None::<&str>);
    let man = clap_mangen::Man::new(cmd).date("2026-11-30");
    let mut out = Vec::new();
    man.render_title(&mut out).expect("render");
    man.render_name_section(&mut out).expect("render");
    synopsis().to_writer(&mut out).expect("render");
    man.render_description_section(&mut out).expect("render");
    man.render_options_section(&mut out).expect("render");
    man.render_subcommands_section(&mut out).expect("render");
    let mut roff = Roff::default();
    for (heading, paragraphs) in cli::REFERENCE {
        roff.control("SH", [*heading]);
        for p in *paragraphs {
            roff.control("PP", []).text([roman(*p)]);
        }
    }
    roff.control("SH", ["EXAMPLES"]);
    for (cmd, what) in cli::EXAMPLES {
        roff.control("TP", [])
            .text([bold(*cmd)])
            .text([roman(*what)]);
    }
    roff.to_writer(&mut out).expect("render");
    man.render_version_section(&mut out).expect("render");
    out
}

fn main() {
    let check = std::env::args().any(|a| a == "--check");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut drifted = Vec::new();
    for (rel, contents) in generated() {
        let path = root.join(&rel);
        if check {
            if std::fs::read(&path).ok().as_deref() != Some(&contents[..]) {
                drifted.push(rel);
            }
        } else {
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dir");
            std::fs::write(&path, contents).expect("write");
            println!("wrote {}", rel.display());
        }
    }
    if !drifted.is_empty() {
        for rel in &drifted {
            eprintln!(
                "gen_docs: {} differs from what src/cli.rs and the core's types generate",
                rel.display()
            );
        }
        eprintln!("gen_docs: run `cargo run --example gen_docs` and commit the result");
        std::process::exit(1);
    }
}
