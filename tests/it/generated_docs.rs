//! The completions and man pages are generated from the clap definition, and
//! the JSON Schemas (schema/run-result.schema.json,
//! schema/explain.schema.json) from the core's types; none may drift. The
//! man page must render cleanly.
use crate::support::*;

#[test]
fn completions_and_man_pages_match_the_cli_definition() {
    let out = std::process::Command::new(example("gen_docs"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_man_page_renders_without_warnings() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new("man")
        .args(["--warnings", "-l", &format!("{root}/man/dsh-exec.1")])
        .env("MANWIDTH", "80")
        .env("LC_ALL", "C.UTF-8")
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: man is not installed");
        return;
    };
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let text = String::from_utf8_lossy(&out.stdout);
    for heading in [
        "OPTIONS",
        "OUTPUT",
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
    ] {
        assert!(
            text.contains(&format!("\n{heading}\n")),
            "no {heading} section"
        );
    }
}

#[test]
fn bash_completes_subcommands_and_their_options() {
    let root = env!("CARGO_MANIFEST_DIR");
    let complete = |words: &str, cword: usize, cur: &str, prev: &str| {
        let script = format!(
            "source {root}/completions/dsh-exec.bash; COMP_WORDS=({words}); COMP_CWORD={cword}; \
             _dsh__exec dsh-exec '{cur}' '{prev}'; echo \"${{COMPREPLY[@]}}\""
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        complete("dsh-exec job ''", 2, "", "job"),
        "-h --help read wait write resize kill list prune"
    );
    assert_eq!(
        complete("dsh-exec explain --j", 2, "--j", "explain"),
        "--json"
    );
    assert_eq!(
        complete("dsh-exec parse-status --h", 2, "--h", "parse-status"),
        "--help"
    );
}

#[test]
fn every_man_page_a_page_names_is_shipped_and_the_synopsis_shows_values() {
    let man = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    for entry in std::fs::read_dir(&man).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for (i, _) in text.match_indices("(1)") {
            let start = text[..i]
                .rfind(|c: char| c.is_whitespace() || c == '>')
                .map_or(0, |s| s + 1);
            let page = text[start..i].replace("\\-", "-");
            if page.starts_with("dsh-exec") {
                assert!(
                    man.join(format!("{page}.1")).exists(),
                    "{page}(1) is not shipped"
                );
            }
        }
    }
    let main = std::fs::read_to_string(man.join("dsh-exec.1")).unwrap();
    assert!(main.contains("[\\-t|\\-\\-timeout DURATION]"), "{main}");
}
