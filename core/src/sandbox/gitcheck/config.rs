//! Git config files as git reads them, and the allow-list of plain-data
//! keys a run may add to one.
//!
//! git runs commands named by many config keys (git-config(1): every key
//! whose value is "a command", "a program" or "a path to a hook", whole
//! sections such as `alias`, `filter`, `credential`, `include`), and new
//! keys arrive with each release. So a config is not searched for the keys
//! known to run commands: each key a run added must be on [`ALLOWED`], a
//! list of keys that only hold data, and anything else is refused. A key
//! git itself writes during ordinary work (`git init`, `clone`,
//! `submodule init/update`, `worktree add`, `config user.name`) is on it;
//! a key that names a program, a file of config, a transport helper or a
//! URL rewrite is not.

/// One `section[.subsection].key [= value]` of a config file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Entry {
    /// The section name, lower case (case-insensitive to git).
    pub(crate) section: String,
    /// The subsection, as written (case-sensitive to git); `None` without
    /// one.
    pub(crate) subsection: Option<String>,
    /// The key, lower case.
    pub(crate) key: String,
    /// The value, unquoted and unescaped; `None` for a bare key (boolean
    /// true to git).
    pub(crate) value: Option<String>,
}

impl Entry {
    /// `section.subsection.key`, as git-config(1) names it.
    pub(crate) fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// Parses a config file as git's config.c does: `[section]`,
/// `[section "subsection"]` and the older `[section.subsection]` headers;
/// `key = value` lines, a bare `key`; values with double quotes, the
/// escapes `\\ \" \n \t \b` and a backslash-newline continuation; `#` and
/// `;` comments outside quotes; a UTF-8 byte order mark at the start.
///
/// Errors (as git would refuse the file, or where this reading could
/// differ from git's: bytes that are not UTF-8, a NUL) give `Err` with
/// what was wrong: the caller treats such a file as one it cannot judge.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\0') {
        return Err("a NUL byte".into());
    }
    let mut p = Parser {
        chars: text.chars().collect(),
        at: 0,
    };
    let mut out = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    loop {
        p.skip_blank_lines();
        let Some(c) = p.peek() else {
            return Ok(out);
        };
        if c == '[' {
            p.at += 1;
            section = Some(p.header()?);
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(format!("unexpected {c:?}"));
        }
        let Some((name, sub)) = &section else {
            return Err("a key before any section".into());
        };
        let key = p.key();
        let value = p.value()?;
        out.push(Entry {
            section: name.clone(),
            subsection: sub.clone(),
            key,
            value,
        });
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// Skips whitespace, newlines and comment lines.
    fn skip_blank_lines(&mut self) {
        while let Some(c) = self.peek() {
            if matches!(c, ' ' | '\t' | '\n' | '\r') {
                self.at += 1;
            } else if c == '#' || c == ';' {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.at += 1;
                }
            } else {
                return;
            }
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.at += 1;
        }
    }

    /// After `[`: the header, through `]`.
    fn header(&mut self) -> Result<(String, Option<String>), String> {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                name.push(c.to_ascii_lowercase());
                self.at += 1;
            } else {
                break;
            }
        }
        if name.is_empty() {
            return Err("an empty section name".into());
        }
        match self.peek() {
            Some(']') => {
                self.at += 1;
                // [section.subsection]: the older form, all lower case.
                return Ok(match name.split_once('.') {
                    Some((s, sub)) => (s.to_string(), Some(sub.to_string())),
                    None => (name, None),
                });
            }
            Some(' ' | '\t') => {}
            _ => return Err("a malformed section header".into()),
        }
        if name.contains('.') {
            return Err("a dotted section with a subsection".into());
        }
        self.skip_spaces();
        if self.peek() != Some('"') {
            return Err("a malformed section header".into());
        }
        self.at += 1;
        let mut sub = String::new();
        loop {
            match self.peek() {
                None | Some('\n') => return Err("an unterminated subsection".into()),
                Some('"') => {
                    self.at += 1;
                    break;
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek() {
                        None | Some('\n') => return Err("an unterminated subsection".into()),
                        Some(c) => sub.push(c),
                    }
                    self.at += 1;
                }
                Some(c) => {
                    sub.push(c);
                    self.at += 1;
                }
            }
        }
        if self.peek() != Some(']') {
            return Err("a malformed section header".into());
        }
        self.at += 1;
        Ok((name, Some(sub)))
    }

    fn key(&mut self) -> String {
        let mut key = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '-' {
                key.push(c.to_ascii_lowercase());
                self.at += 1;
            } else {
                break;
            }
        }
        key
    }

    /// After the key: ` = value` to the end of the line, or nothing.
    fn value(&mut self) -> Result<Option<String>, String> {
        self.skip_spaces();
        match self.peek() {
            None | Some('\n') => return Ok(None),
            Some('\r') if self.chars.get(self.at + 1) == Some(&'\n') => return Ok(None),
            Some('#' | ';') => {
                self.skip_blank_lines();
                return Ok(None);
            }
            Some('=') => self.at += 1,
            Some(c) => return Err(format!("unexpected {c:?} after a key")),
        }
        self.skip_spaces();
        let mut value = String::new();
        // Length of `value` up to its last character that was quoted or
        // not whitespace: trailing whitespace outside quotes is dropped.
        let mut keep = 0;
        let mut quoted = false;
        loop {
            let Some(c) = self.peek() else {
                if quoted {
                    return Err("an unterminated quote".into());
                }
                break;
            };
            self.at += 1;
            match c {
                '\n' if !quoted => break,
                '\n' => return Err("a newline inside quotes".into()),
                '#' | ';' if !quoted => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                    break;
                }
                '"' => {
                    quoted = !quoted;
                    keep = value.len();
                }
                '\\' => {
                    let Some(next) = self.peek() else {
                        return Err("a backslash at the end".into());
                    };
                    self.at += 1;
                    match next {
                        '\n' => continue,
                        '\r' if self.peek() == Some('\n') => {
                            self.at += 1;
                            continue;
                        }
                        '\\' | '"' => value.push(next),
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        'b' => value.push('\u{8}'),
                        _ => return Err(format!("the escape \\{next}")),
                    }
                    keep = value.len();
                }
                // git's own isspace (SP, TAB, CR, LF): no other character
                // is trimmed (a no-break space stays in the value).
                ' ' | '\t' | '\r' if !quoted => value.push(c),
                c => {
                    value.push(c);
                    keep = value.len();
                }
            }
        }
        value.truncate(keep);
        Ok(Some(value))
    }
}

/// What a key on the allow-list may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// Anything: the key is data git never runs or follows to a program.
    Any,
    /// A boolean: true, false, yes, no, on, off, 1, 0 or empty.
    Bool,
    /// A repository URL git fetches from with its own transports
    /// ([`plain_url`]).
    Url,
    /// A relative path (`core.worktree`, which `git submodule` writes as
    /// `../../../sub`); judged against the writable roots by the caller.
    RelativePath,
    /// `submodule.*.update`: `checkout`, `rebase`, `merge` or `none` (what
    /// git copies from `.gitmodules`); not `!command`.
    UpdateMode,
}

/// The keys a run may add to a git config, by section (lower case) and key
/// (`*`: every key of the section). Each holds data only: a name, a
/// number, a boolean, a ref, a refspec, a plain URL (see [`Value`]). Not
/// on the list, because their values name programs or pull in other
/// config: `alias.*`, `core.editor`, `core.pager`, `core.sshCommand`,
/// `core.askPass`, `core.hooksPath`, `core.fsmonitor` (unless a boolean:
/// git's own daemon), `core.gitProxy`, `core.alternateRefsCommand`,
/// `credential.*`, `diff.external`, `diff.*.textconv`, `diff.*.command`,
/// `filter.*`, `merge.*.driver`, `gpg.*`, `include.*`, `includeIf.*`,
/// `pager.*`, `sequence.editor`, `submodule.*.update` but as `checkout`,
/// `rebase`, `merge` or `none` (`!command` runs one),
/// `remote.*.uploadpack`, `remote.*.receivepack`, `remote.*.vcs`,
/// `protocol.allow` and `protocol.*.allow` (they enable `ext::`),
/// `url.*.insteadOf` (rewrites where code is fetched from), `http.*` and
/// `safe.*`, and every key of a section not named here.
const ALLOWED: &[(&str, &str, Value)] = &[
    ("core", "repositoryformatversion", Value::Any),
    ("core", "filemode", Value::Any),
    ("core", "bare", Value::Any),
    ("core", "logallrefupdates", Value::Any),
    ("core", "ignorecase", Value::Any),
    ("core", "precomposeunicode", Value::Any),
    ("core", "symlinks", Value::Any),
    ("core", "autocrlf", Value::Any),
    ("core", "eol", Value::Any),
    ("core", "safecrlf", Value::Any),
    ("core", "quotepath", Value::Any),
    ("core", "sparsecheckout", Value::Any),
    ("core", "sparsecheckoutcone", Value::Any),
    ("core", "splitindex", Value::Any),
    ("core", "untrackedcache", Value::Any),
    ("core", "checkstat", Value::Any),
    ("core", "trustctime", Value::Any),
    ("core", "abbrev", Value::Any),
    ("core", "compression", Value::Any),
    ("core", "loosecompression", Value::Any),
    ("core", "bigfilethreshold", Value::Any),
    ("core", "whitespace", Value::Any),
    ("core", "commentchar", Value::Any),
    ("core", "commentstring", Value::Any),
    ("core", "protectntfs", Value::Any),
    ("core", "protecthfs", Value::Any),
    ("core", "preloadindex", Value::Any),
    ("core", "multipackindex", Value::Any),
    ("core", "commitgraph", Value::Any),
    ("core", "warnambiguousrefs", Value::Any),
    ("core", "sharedrepository", Value::Any),
    ("core", "fsync", Value::Any),
    ("core", "fsyncmethod", Value::Any),
    ("core", "fsmonitor", Value::Bool),
    ("core", "fscache", Value::Any),
    ("core", "excludesfile", Value::Any),
    ("core", "attributesfile", Value::Any),
    ("core", "checkroundtripencoding", Value::Any),
    ("core", "packedrefstimeout", Value::Any),
    ("core", "filesreflocktimeout", Value::Any),
    ("core", "worktree", Value::RelativePath),
    ("extensions", "*", Value::Any),
    ("user", "*", Value::Any),
    ("author", "*", Value::Any),
    ("committer", "*", Value::Any),
    ("init", "defaultbranch", Value::Any),
    ("remote", "pushdefault", Value::Any),
    ("remote", "url", Value::Url),
    ("remote", "pushurl", Value::Url),
    ("remote", "fetch", Value::Any),
    ("remote", "push", Value::Any),
    ("remote", "tagopt", Value::Any),
    ("remote", "prune", Value::Any),
    ("remote", "prunetags", Value::Any),
    ("remote", "mirror", Value::Any),
    ("remote", "skipdefaultupdate", Value::Any),
    ("remote", "skipfetchall", Value::Any),
    ("remote", "promisor", Value::Any),
    ("remote", "partialclonefilter", Value::Any),
    ("remote", "followremotehead", Value::Any),
    ("branch", "remote", Value::Any),
    ("branch", "merge", Value::Any),
    ("branch", "rebase", Value::Any),
    ("branch", "pushremote", Value::Any),
    ("branch", "description", Value::Any),
    ("branch", "autosetupmerge", Value::Any),
    ("branch", "autosetuprebase", Value::Any),
    ("branch", "sort", Value::Any),
    ("submodule", "url", Value::Url),
    ("submodule", "active", Value::Any),
    ("submodule", "branch", Value::Any),
    ("submodule", "fetchrecursesubmodules", Value::Any),
    ("submodule", "ignore", Value::Any),
    ("submodule", "shallow", Value::Any),
    ("submodule", "recurse", Value::Any),
    ("submodule", "update", Value::UpdateMode),
    ("submodule", "fetchjobs", Value::Any),
    ("pull", "rebase", Value::Any),
    ("pull", "ff", Value::Any),
    ("push", "default", Value::Any),
    ("push", "autosetupremote", Value::Any),
    ("push", "followtags", Value::Any),
    ("push", "recursesubmodules", Value::Any),
    ("fetch", "prune", Value::Any),
    ("fetch", "prunetags", Value::Any),
    ("fetch", "recursesubmodules", Value::Any),
    ("fetch", "parallel", Value::Any),
    ("fetch", "writecommitgraph", Value::Any),
    ("fetch", "fsckobjects", Value::Any),
    ("fetch", "showforcedupdates", Value::Any),
    ("fetch", "unpacklimit", Value::Any),
    ("fetch", "negotiationalgorithm", Value::Any),
    ("fetch", "output", Value::Any),
    ("merge", "ff", Value::Any),
    ("merge", "conflictstyle", Value::Any),
    ("merge", "log", Value::Any),
    ("merge", "renames", Value::Any),
    ("merge", "renamelimit", Value::Any),
    ("merge", "autostash", Value::Any),
    ("merge", "stat", Value::Any),
    ("diff", "renames", Value::Any),
    ("diff", "algorithm", Value::Any),
    ("diff", "mnemonicprefix", Value::Any),
    ("diff", "noprefix", Value::Any),
    ("diff", "context", Value::Any),
    ("diff", "colormoved", Value::Any),
    ("diff", "submodule", Value::Any),
    ("diff", "ignoresubmodules", Value::Any),
    ("status", "*", Value::Any),
    ("color", "*", Value::Any),
    ("column", "*", Value::Any),
    ("advice", "*", Value::Any),
    ("i18n", "*", Value::Any),
    ("log", "*", Value::Any),
    ("commit", "cleanup", Value::Any),
    ("commit", "verbose", Value::Any),
    ("commit", "status", Value::Any),
    ("commit", "gpgsign", Value::Any),
    ("commit", "template", Value::Any),
    ("notes", "*", Value::Any),
    ("am", "keepcr", Value::Any),
    ("am", "threeway", Value::Any),
    ("commitgraph", "*", Value::Any),
    ("help", "autocorrect", Value::Any),
    ("gui", "gcwarning", Value::Any),
    ("credential", "usehttppath", Value::Any),
    ("credential", "username", Value::Any),
    ("credential", "validate", Value::Any),
    ("tag", "*", Value::Any),
    ("rebase", "*", Value::Any),
    ("rerere", "*", Value::Any),
    ("stash", "*", Value::Any),
    ("checkout", "*", Value::Any),
    ("clone", "*", Value::Any),
    // Not `gc.*`: gc.recentObjectsHook is a command (git 2.42).
    ("gc", "auto", Value::Any),
    ("gc", "autodetach", Value::Any),
    ("gc", "autopacklimit", Value::Any),
    ("gc", "aggressivedepth", Value::Any),
    ("gc", "aggressivewindow", Value::Any),
    ("gc", "bigpackthreshold", Value::Any),
    ("gc", "cruftpacks", Value::Any),
    ("gc", "maxcruftsize", Value::Any),
    ("gc", "packrefs", Value::Any),
    ("gc", "prunexpire", Value::Any),
    ("gc", "pruneexpire", Value::Any),
    ("gc", "worktreepruneexpire", Value::Any),
    ("gc", "reflogexpire", Value::Any),
    ("gc", "reflogexpireunreachable", Value::Any),
    ("gc", "rerereresolved", Value::Any),
    ("gc", "rerereunresolved", Value::Any),
    ("gc", "writecommitgraph", Value::Any),
    ("gc", "logexpiry", Value::Any),
    // Formatting and behaviour switches that hold data only (a workload
    // review set each with `git config --local`). Not here: push.gpgSign
    // (runs gpg), pull.octopus and pull.twohead (name merge strategies,
    // run as programs), help.format (`web` starts a browser).
    ("format", "signoff", Value::Bool),
    ("format", "pretty", Value::Any),
    ("pretty", "*", Value::Any),
    ("apply", "whitespace", Value::Any),
    ("core", "longpaths", Value::Bool),
    ("core", "hidedotfiles", Value::Any),
    ("core", "notesref", Value::Any),
    ("uploadpack", "allowfilter", Value::Bool),
    ("versionsort", "suffix", Value::Any),
    ("clean", "requireforce", Value::Bool),
    ("add", "ignoreerrors", Value::Bool),
    ("interactive", "singlekey", Value::Bool),
    ("mailmap", "file", Value::Any),
    ("mailmap", "blob", Value::Any),
    ("transfer", "credentialsinurl", Value::Any),
    ("merge", "renormalize", Value::Bool),
    ("diff", "renamelimit", Value::Any),
    ("push", "pushoption", Value::Any),
    ("pack", "*", Value::Any),
    ("index", "*", Value::Any),
    ("feature", "*", Value::Any),
    ("fsck", "*", Value::Any),
    ("repack", "*", Value::Any),
    ("receive", "*", Value::Any),
    ("transfer", "fsckobjects", Value::Any),
    ("transfer", "unpacklimit", Value::Any),
    ("protocol", "version", Value::Any),
    ("maintenance", "*", Value::Any),
    // Not `lfs.*`: git-lfs runs `lfs.customtransfer.*.path` and
    // `lfs.extension.*.smudge` as programs.
    ("lfs", "url", Value::Any),
    ("lfs", "repositoryformatversion", Value::Any),
    ("worktree", "guessremote", Value::Any),
    ("blame", "*", Value::Any),
    ("grep", "*", Value::Any),
];

/// Why `e` may not be added by a run, or `None` when it may. A
/// [`Value::RelativePath`] is checked by `inside` (the path, joined to the
/// git directory, stays where it must).
pub(crate) fn refused(e: &Entry, inside: &dyn Fn(&str) -> bool) -> Option<String> {
    let rule = ALLOWED
        .iter()
        .find(|(s, k, _)| *s == e.section && (*k == "*" || *k == e.key))
        .map(|(_, _, v)| *v);
    let value = e.value.as_deref().unwrap_or("");
    let ok = match rule {
        None => false,
        Some(Value::Any) => true,
        Some(Value::Bool) => {
            e.value.is_none()
                || ["true", "false", "yes", "no", "on", "off", "1", "0", ""]
                    .contains(&value.to_ascii_lowercase().as_str())
        }
        Some(Value::Url) => plain_url(value),
        Some(Value::RelativePath) => !value.is_empty() && inside(value),
        Some(Value::UpdateMode) => {
            ["checkout", "rebase", "merge", "none"].contains(&value.to_ascii_lowercase().as_str())
        }
    };
    (!ok).then(|| format!("config key {}", e.name()))
}

/// Whether a remote URL is fetched by git's own transports (git-fetch(1),
/// GIT URLS): `http(s)://`, `ssh://` (and `git+ssh://`, `ssh+git://`),
/// `git://`, `file://`, `ftp(s)://`, the
/// scp-like `[user@]host:path`, or a local path. Refused: a
/// `<transport>::<address>` (a remote helper: `ext::` runs its argument as
/// a command), any other `scheme://` (a `git-remote-SCHEME` program), a
/// leading `-` (taken as an option by ssh), and control characters.
pub(crate) fn plain_url(url: &str) -> bool {
    if url.is_empty() || url.starts_with('-') || url.chars().any(char::is_control) {
        return false;
    }
    // `<transport>::<address>` (transport.c, transport_get): URL-scheme
    // characters from the start, then `::`. (An IPv6 literal further on,
    // `ssh://[::1]/r`, is no helper.)
    let scheme_len = url
        .char_indices()
        .take_while(|(i, c)| {
            c.is_ascii_alphabetic() || (*i > 0 && (c.is_ascii_digit() || "+-.".contains(*c)))
        })
        .count();
    if url[scheme_len..].starts_with("::") {
        return false;
    }
    match url.split_once("://") {
        Some((scheme, _)) => [
            "http", "https", "ssh", "git", "file", "ftp", "ftps", "git+ssh", "ssh+git",
        ]
        .contains(&scheme.to_ascii_lowercase().as_str()),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        parse(text.as_bytes())
            .unwrap()
            .iter()
            .map(|e| format!("{}={}", e.name(), e.value.as_deref().unwrap_or("<none>")))
            .collect()
    }

    #[test]
    fn a_config_is_read_as_git_reads_it() {
        assert_eq!(
            names(
                "\u{feff}[core]\n\tbare = false ; a comment\n[remote \"Or\\\"ig\"] url = \"a b\" # c\n\
                 [Branch.Main]\n  Merge=refs/heads/main \n[user]\n\tname = a \\\n b\n\tflag\n"
            ),
            [
                "core.bare=false",
                "remote.Or\"ig.url=a b",
                "branch.main.merge=refs/heads/main",
                "user.name=a  b",
                "user.flag=<none>",
            ]
        );
        assert_eq!(names("[a]\n\tk = \"x ; y\"  \n"), ["a.k=x ; y"]);
        for bad in [
            "k = v\n",
            "[a\n",
            "[a \"b]\n",
            "[a]\n\tk = \"x\n",
            "[a]\n\tk = \\q\n",
            "[a]\n\t=x\n",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse(b"[a]\n\tk = \xff\n").is_err());
    }

    #[test]
    fn only_plain_data_keys_are_allowed() {
        let inside = |p: &str| p.starts_with("../");
        let judge = |text: &str| -> Vec<String> {
            parse(text.as_bytes())
                .unwrap()
                .iter()
                .filter_map(|e| refused(e, &inside))
                .collect()
        };
        // What `git clone` and `git submodule update` write.
        let clone = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
            \tlogallrefupdates = true\n\tworktree = ../../../sub\n\
            [remote \"origin\"]\n\turl = https://example.com/x.git\n\
            \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
            [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
            [submodule \"s\"]\n\turl = git@example.com:a/b.git\n\tactive = true\n\
            [user]\n\tname = a\n\temail = a@b\n[core]\n\tfsmonitor = false\n\
            [submodule \"t\"]\n\tupdate = rebase\n[remote \"v6\"]\n\turl = ssh://git@[::1]:2222/r.git\n\
            \tpushurl = git+ssh://h/r\n[remote]\n\tpushDefault = origin\n[core]\n\tfscache = true\n";
        assert_eq!(judge(clone), Vec::<String>::new());
        for (text, key) in [
            ("[core]\n\tfsmonitor = \"touch x\"\n", "core.fsmonitor"),
            ("[core]\n\thooksPath = /tmp/h\n", "core.hookspath"),
            ("[core]\n\tworktree = /etc\n", "core.worktree"),
            ("[alias]\n\tst = !sh\n", "alias.st"),
            ("[filter \"lfs\"]\n\tclean = x\n", "filter.lfs.clean"),
            ("[diff \"b\"]\n\ttextconv = x\n", "diff.b.textconv"),
            ("[include]\n\tpath = x\n", "include.path"),
            ("[submodule \"s\"]\n\tupdate = !x\n", "submodule.s.update"),
            ("[gui]\n\teditor = x\n", "gui.editor"),
            ("[credential]\n\thelper = x\n", "credential.helper"),
            ("[remote \"o\"]\n\turl = abc+d::x\n", "remote.o.url"),
            ("[protocol]\n\tallow = always\n", "protocol.allow"),
            (
                "[protocol \"ext\"]\n\tallow = always\n",
                "protocol.ext.allow",
            ),
            ("[remote \"o\"]\n\turl = ext::sh -c x\n", "remote.o.url"),
            ("[remote \"o\"]\n\turl = fd::7\n", "remote.o.url"),
            ("[remote \"o\"]\n\turl = testgit://x\n", "remote.o.url"),
            ("[remote \"o\"]\n\turl = -oProxyCommand=x\n", "remote.o.url"),
            ("[remote \"o\"]\n\tuploadpack = x\n", "remote.o.uploadpack"),
            (
                "[url \"ext::sh \"]\n\tinsteadOf = https://\n",
                "url.ext::sh .insteadof",
            ),
            ("[somefuture]\n\tkey = x\n", "somefuture.key"),
            ("[gc]\n\trecentObjectsHook = x\n", "gc.recentobjectshook"),
            ("[core]\n\tfsmonitor = true\u{a0}\n", "core.fsmonitor"),
            (
                "[lfs \"customtransfer.x\"]\n\tpath = x\n",
                "lfs.customtransfer.x.path",
            ),
        ] {
            assert_eq!(judge(text), [format!("config key {key}")], "{text}");
        }
    }
}
