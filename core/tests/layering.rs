//! The core's top-level modules form one order, and no module uses one
//! that comes after it.
//!
//! The order is the list in `ORDER` below, the same list `docs/layout.md`
//! explains. Each module of `core/src` may name (`use crate::X`,
//! `crate::X::…`, `crate::{X, …}`, or a root re-export such as
//! `crate::RunResult`) only modules earlier in the list. The check reads the
//! source itself: comments, strings and character literals are skipped, and
//! a top-level module missing from the list fails the test, so a new module
//! has to be given a place.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Lowest first: a module may use only the modules before it.
const ORDER: &[&str] = &[
    "sys",
    "units",
    "exit",
    "error",
    "signal",
    "origin",
    "serde_paths",
    "proctree",
    "capture",
    "limits",
    "net",
    "sandbox",
    "transaction",
    "spec",
    "result",
    "request",
    "render",
    "events",
    "exec",
    "jobs",
    "schema",
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The source with comments, string literals and character literals blanked
/// out, so that only code remains to be searched.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // A raw string: r"…", r#"…"#, br"…".
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

fn ident_at(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The first path segment of every `crate::` path in `code`: `crate::a::b`
/// gives `a`, and `crate::{a::x, b}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let trimmed = rest.trim_start();
        if let Some(group) = trimmed.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    if let Some(name) = ident_at(item.trim_start()) {
                        found.push(name.to_string());
                    }
                    item.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    item.push(c);
                }
            }
        } else if let Some(name) = ident_at(trimmed) {
            found.push(name.to_string());
        }
    }
    found
}

/// lib.rs's modules and its re-exports (`pub use m::{A, B}` maps A and B to
/// m), so that `crate::A` counts as a use of `m`.
fn read_lib() -> (Vec<String>, BTreeMap<String, String>) {
    let lib = code_only(&fs::read_to_string(src_dir().join("lib.rs")).unwrap());
    let mut modules = Vec::new();
    let mut reexports = BTreeMap::new();
    for stmt in lib.split(';') {
        let words: Vec<&str> = stmt.split_whitespace().collect();
        let Some(kw) = words.iter().position(|w| *w == "mod" || *w == "use") else {
            continue;
        };
        if words[kw] == "mod" {
            if let Some(name) = words.get(kw + 1).and_then(|w| ident_at(w)) {
                modules.push(name.to_string());
            }
            continue;
        }
        let path: String = words[kw + 1..].concat();
        let Some(module) = ident_at(&path) else {
            continue;
        };
        let tail = &path[module.len()..];
        for name in tail
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
        {
            reexports.insert(name.to_string(), module.to_string());
        }
    }
    (modules, reexports)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every use of a module from a module, as (from, to, file).
fn edges() -> Vec<(String, String, String)> {
    let (_, reexports) = read_lib();
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut edges = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let from = rel.split('/').next().unwrap().trim_end_matches(".rs");
        if from == "lib" {
            continue;
        }
        let code = code_only(&fs::read_to_string(&file).unwrap());
        for name in crate_paths(&code) {
            let to = reexports.get(&name).cloned().unwrap_or(name);
            if to != from {
                edges.push((from.to_string(), to, rel.clone()));
            }
        }
    }
    edges
}

#[test]
fn every_top_level_module_has_a_place_in_the_order() {
    let (modules, _) = read_lib();
    let missing: Vec<_> = modules
        .iter()
        .filter(|m| !ORDER.contains(&m.as_str()))
        .collect();
    assert!(missing.is_empty(), "modules not in ORDER: {missing:?}");
    let stale: Vec<_> = ORDER
        .iter()
        .filter(|m| !modules.iter().any(|x| x == *m))
        .collect();
    assert!(
        stale.is_empty(),
        "ORDER names modules lib.rs lacks: {stale:?}"
    );
}

#[test]
fn no_module_uses_one_later_in_the_order() {
    let rank = |m: &str| ORDER.iter().position(|x| *x == m);
    let mut upward = Vec::new();
    for (from, to, file) in edges() {
        match (rank(&from), rank(&to)) {
            (Some(a), Some(b)) if b > a => upward.push(format!("{file}: {from} uses {to}")),
            (Some(_), Some(_)) => {}
            _ => upward.push(format!("{file}: {from} uses {to}, which has no place")),
        }
    }
    upward.dedup();
    assert!(
        upward.is_empty(),
        "uses against the order {ORDER:?}:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_scanner_reads_paths_as_the_compiler_does() {
    let code = code_only(
        "use crate::{a::{x, y}, b};\n// crate::c\n/* crate::d /* nested */ crate::e */\n\
         let s = \"crate::f\"; let r = r#\"crate::g\"#; let q = '\"'; let z = crate::h::i;\n\
         fn f<'a>(x: &'a crate::j::K) {}\nsupercrate::k;",
    );
    assert_eq!(crate_paths(&code), ["a", "b", "h", "j"]);
}
