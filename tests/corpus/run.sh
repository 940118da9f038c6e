#!/usr/bin/env bash
# The workload corpus (issue 24): 110 real developer workloads, each run
# unconfined and confined, to show that the confining modes (with their
# default network policy, loopback) break none of them and report no
# refusal that did not happen, and that what must be refused is, with the
# exact facts.
#
#   bash tests/corpus/run.sh                         # every workload
#   CORPUS_FILTER='^git\.' bash tests/corpus/run.sh  # a subset (ERE on names)
#   DSH_EXEC_BIN=target/release/dsh-exec bash tests/corpus/run.sh
#
# Environment:
#   DSH_EXEC_BIN    the binary to test; unset: `cargo build` here, and its
#                   debug binary
#   CORPUS_FILTER   an extended regular expression: run the workloads
#                   whose name matches
#   CORPUS_JOBS     workloads run at once (default 3)
#   CORPUS_TMPDIR   where the scratch directory goes (default /tmp)
#   CORPUS_KEEP=1   keep the scratch directory (its path is printed)
#   CORPUS_VERBOSE=1  also show what each unconfined run printed
#
# A `works` workload runs in a fresh workspace made by its setup, once
# unconfined (`bash -c CMD` in a session of its own) and once confined
# (`dsh-exec -s workspace-write --json -C WS -- CMD`; some also
# `-s read-only`), each time from a fresh setup at the same path, with the
# same HOME (a fixture), TMPDIR and environment. Compared: exit status,
# stdout (or the digest the workload defines), the names left in the
# workspace; and the confined facts: `denied` false, `denials` empty, no
# `protected_changes`. A difference in behaviour is a FALSE BREAKAGE; the
# same behaviour with a refusal reported is a WRONG DENIED fact.
# A `refused:REASON` workload runs confined only, and its facts must be
# exactly the expected ones (and its effect must not have happened).
#
# Everything is offline: servers listen on loopback, remotes are bare
# repositories on disk, pip installs only --no-index from a wheel built
# here, npm installs only local folders and tarballs. A workload whose tool
# is missing is skipped. Exit status: 0 when every workload that ran is
# ok, 1 otherwise, 2 when the corpus itself could not run.
set -uo pipefail
shopt -s nullglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
started=$(date +%s%3N)

die() { echo "corpus: $*" >&2; exit 2; }
command -v jq >/dev/null || die "needs jq"
((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) || die "needs bash 5.1 or newer"

if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  (cd "$repo" && cargo build -q) || die "cargo build failed"
  target=${CARGO_TARGET_DIR:-target}
  [[ $target == /* ]] || target=$repo/$target
  BIN=$target/debug/dsh-exec
fi
[[ $BIN == /* ]] || BIN=$PWD/$BIN
[[ -x $BIN ]] || die "no dsh-exec at $BIN"

JOBS=${CORPUS_JOBS:-3}
FILTER=${CORPUS_FILTER:-}

# --- the scratch directory: everything the corpus makes is under it -------
ROOT=$(mktemp -d "${CORPUS_TMPDIR:-/tmp}/dsh-corpus.XXXXXX") || die "mktemp failed"
chmod 755 "$ROOT"
mkdir -p "$ROOT/pg" "$ROOT/dog" "$ROOT/dsh" "$ROOT/res" "$ROOT/w"
workers=()
cleanup() {
  local f p
  for p in "${workers[@]}"; do kill -TERM "$p" 2>/dev/null; done
  # The watchdogs of unconfined runs.
  for f in "$ROOT"/dog/*; do kill -TERM "${f##*/}" 2>/dev/null; done
  # A confined run in flight: dsh-exec ends its command's tree on SIGTERM.
  for f in "$ROOT"/dsh/*; do kill -TERM "${f##*/}" 2>/dev/null; done
  # Unconfined runs each lead a session of their own: kill what is left.
  for f in "$ROOT"/pg/*; do kill -KILL -- "-${f##*/}" 2>/dev/null; done
  wait 2>/dev/null
  for f in "$ROOT"/pg/*; do kill -KILL -- "-${f##*/}" 2>/dev/null; done
  # dsh-exec's own grace period (--kill-after) is 2 s.
  local tries left
  for tries in 1 2 3 4 5 6; do
    left=("$ROOT"/dsh/*)
    ((${#left[@]})) || break
    for f in "${left[@]}"; do kill -0 "${f##*/}" 2>/dev/null || rm -f "$f"; done
    sleep 0.5
  done
  if [[ -n ${CORPUS_KEEP:-} ]]; then
    echo "corpus: kept $ROOT" >&2
  else
    chmod -R u+rwX "$ROOT" 2>/dev/null
    rm -rf "$ROOT"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the environment every run gets, unconfined and confined ---------------
# The interpreters are named by their real paths, so that a shim that
# needs the caller's HOME (pyenv) is not in the way of the fixture HOME.
if command -v python3 >/dev/null; then
  pyexe=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && PATH=${pyexe%/*}:$PATH
fi
if command -v rustup >/dev/null; then
  export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup} CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
fi
# What dsh-exec withholds from its child (credential-shaped names, DSH_*)
# is withheld from the unconfined run too.
while IFS= read -r name; do
  unset "$name"
done < <(compgen -e | grep -iE 'KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|^DSH_')
unset XDG_RUNTIME_DIR XDG_STATE_HOME XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME \
  DSH_EXEC_CONFIG PYTHONPATH VIRTUAL_ENV CDPATH GIT_DIR GIT_WORK_TREE MAKEFLAGS
export PATH LC_ALL=C TZ=UTC
# What dsh-exec sets for a captured run, set for the unconfined run too.
export PAGER=cat GIT_PAGER=cat MANPAGER=cat GIT_TERMINAL_PROMPT=0 TERM=dumb NO_COLOR=1
# Commits are the same bytes in every run.
export GIT_AUTHOR_NAME=Corpus GIT_AUTHOR_EMAIL=corpus@example.invalid \
  GIT_COMMITTER_NAME=Corpus GIT_COMMITTER_EMAIL=corpus@example.invalid \
  GIT_AUTHOR_DATE='2024-01-02T03:04:05Z' GIT_COMMITTER_DATE='2024-01-02T03:04:05Z'
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export npm_config_update_notifier=false npm_config_fund=false
FIX=$ROOT/fix
export FIX

# The tier: with a read-only mount tree (root with CAP_SYS_ADMIN) a refused
# write is EROFS, without it (Landlock alone) EACCES.
tier_json=$("$BIN" explain --json -s workspace-write -- true 2>/dev/null) || die "dsh-exec explain failed"
if jq -e '.sandbox.metadata | startswith("read-only mounts")' <<<"$tier_json" >/dev/null; then
  TIER=mount WERR=EROFS
else
  TIER=gate WERR=EACCES
fi

have() {
  case $1 in
    pytest) python3 -c 'import pytest' 2>/dev/null ;;
    venv) python3 -c 'import venv, ensurepip' 2>/dev/null ;;
    pip) python3 -m pip --version >/dev/null 2>&1 ;;
    cargo) command -v cargo >/dev/null && cargo --version >/dev/null 2>&1 ;;
    rustfmt) command -v cargo >/dev/null && cargo fmt --version >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

# --- fixtures, built once, read (never written) by the workloads -----------
build_fixtures() {
  set -e
  mkdir -p "$ROOT/home0" "$FIX"
  # The fixture HOME: a git identity, and credentials the sandbox must not
  # let anyone read.
  printf '[user]\n\tname = Corpus\n\temail = corpus@example.invalid\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n' \
    >"$ROOT/home0/.gitconfig"
  mkdir -m 700 "$ROOT/home0/.ssh" "$ROOT/home0/.aws"
  printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----\n' >"$ROOT/home0/.ssh/id_ed25519"
  printf '[default]\naws_access_key_id = AKIANOTAREALKEY\n' >"$ROOT/home0/.aws/credentials"
  chmod 600 "$ROOT/home0/.ssh/id_ed25519" "$ROOT/home0/.aws/credentials"
  export HOME=$ROOT/home0

  if have git; then
    local t=$ROOT/fixwork
    mkdir -p "$t"
    git init -q --bare "$FIX/remote.git"
    git init -q "$t/remote" && (
      cd "$t/remote"
      echo "the remote" >README && mkdir src && echo one >src/one.txt
      git add . && git commit -qm one
      echo two >src/two.txt && git add . && git commit -qm two
      echo three >>README && git commit -qam three
      git push -q "$FIX/remote.git" HEAD:main
    )
    git init -q --bare "$FIX/sub.git"
    git init -q "$t/sub" && (
      cd "$t/sub" && echo "submodule readme" >README && git add . && git commit -qm sub
      git push -q "$FIX/sub.git" HEAD:main
    )
    git init -q --bare "$FIX/super.git"
    git init -q "$t/super" && (
      cd "$t/super" && echo super >README && git add . && git commit -qm super
      git -c protocol.file.allow=always submodule add -q "$FIX/sub.git" libs/sub
      git commit -qm add-sub
      git push -q "$FIX/super.git" HEAD:main
    )
    rm -rf "$t"
  fi

  # A tiny pure-Python package, and a wheel of it built by hand (no build
  # backend, no index).
  mkdir -p "$FIX/tinypkg/tinypkg" "$FIX/wheels"
  cat >"$FIX/tinypkg/tinypkg/__init__.py" <<'EOF'
def hello():
    return "hello from tinypkg"


def main():
    print(hello())
EOF
  printf 'from tinypkg import main\nmain()\n' >"$FIX/tinypkg/tinypkg/__main__.py"
  cat >"$FIX/mkwheel.py" <<'EOF'
"""Build a py3-none-any wheel of the packages in SRC into DIST (no backend)."""
import base64, hashlib, os, sys, zipfile

src, dist = sys.argv[1], sys.argv[2]
name, version = "tinypkg", "1.0"
info = f"{name}-{version}.dist-info"
files = {}
for root, dirs, names in os.walk(src):
    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
    for n in sorted(names):
        p = os.path.join(root, n)
        with open(p, "rb") as f:
            files[os.path.relpath(p, src)] = f.read()
files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
files[f"{info}/entry_points.txt"] = b"[console_scripts]\ntinyhello = tinypkg:main\n"
record = []
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
os.makedirs(dist, exist_ok=True)
out = os.path.join(dist, f"{name}-{version}-py3-none-any.whl")
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for path, data in files.items():
        z.writestr(zipfile.ZipInfo(path, (2024, 1, 2, 3, 4, 6)), data)
print(os.path.basename(out))
EOF
  if have python3; then python3 "$FIX/mkwheel.py" "$FIX/tinypkg" "$FIX/wheels" >/dev/null; fi

  # A loopback HTTP server: serves a directory, echoes POST bodies, and
  # writes the port it got to a file.
  cat >"$FIX/serve.py" <<'EOF'
import http.server, os, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

directory, portfile = sys.argv[1], sys.argv[2]
host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
os.chdir(directory)
server = http.server.ThreadingHTTPServer((host, 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
server.serve_forever()
EOF
  cat >"$FIX/waitport" <<'EOF'
#!/bin/sh
# waitport FILE: print the port a server wrote to FILE, waiting up to 10 s.
i=0
while [ $i -lt 200 ]; do
  [ -s "$1" ] && exec cat "$1"
  sleep 0.05
  i=$((i + 1))
done
echo "waitport: no port in $1" >&2
exit 1
EOF
  chmod 755 "$FIX/waitport"

  mkdir -p "$FIX/npm/lp"
  printf '{\n  "name": "lp",\n  "version": "1.0.0",\n  "main": "index.js",\n  "license": "MIT"\n}\n' >"$FIX/npm/lp/package.json"
  echo 'module.exports = { answer: 42 };' >"$FIX/npm/lp/index.js"
  echo '# lp' >"$FIX/npm/lp/README.md"
  chmod -R a+rX "$ROOT/home0" "$FIX"
  set +e
}

# --- the workloads -------------------------------------------------------------
# w NAME EXPECT TOOLS SETUP CMD [KEY=VALUE...]
#   EXPECT  works | refused:REASON
#   TOOLS   the programs it needs (skipped when one is missing)
#   SETUP   run unconfined in the fresh workspace before each run
#   CMD     the workload (bash), run in the workspace
# Keys:
#   ro=1         works: also run confined under -s read-only
#   norm=FILTER  works: compare stdout through this shell filter (a digest)
#   post=none    works: do not compare the names left in the workspace
#   limit=TEXT   works: a limit docs/known-limits.md names, for a security
#                reason: a difference is a KNOWN LIMIT, told, not failed
#   flags=...    extra dsh-exec flags (e.g. --network allow)
#   mode=MODE    refused: the sandbox mode (default workspace-write)
#   denials=RE   refused: the denials, `op|path|errno|source` joined by `;`,
#                as an extended regular expression ({WS} {OUT} {HOME}
#                {WERR} replaced)
#   denied=B     refused: the expected `denied` (default true)
#   net=B        refused: the expected `network_denied` (default false)
#   pc=RE        refused: the protected changes, `path|change|restored`
#                joined by `;` (default: none)
#   KEY_gate=... refused: the expectation in the tier without the read-only
#                mount tree (no CAP_SYS_ADMIN), where the truth differs:
#                metadata is refused by the gate (EPERM), and protected
#                files are restored after the run rather than refused
#   effect=SH    refused: must succeed after the run (the effect did not
#                happen), run in the workspace
#   maxms=N      refused: the run must take less than N ms
NAMES=() EXPECTS=() TOOLSL=() SETUPS=() CMDS=() OPTS=()
w() {
  local name=$1 expect=$2 tools=$3 setup=$4 cmd=$5
  shift 5
  NAMES+=("$name") EXPECTS+=("$expect") TOOLSL+=("$tools") SETUPS+=("$setup") CMDS+=("$cmd")
  local o="" kv
  for kv in "$@"; do o+="$kv"$'\x1f'; done
  OPTS+=("$o")
}

# A repository with two commits, used by many git workloads.
REPO='git init -q && echo a > a.txt && mkdir -p src d1 d2 && echo one > src/one.txt && echo 1 > d1/f && echo 2 > d2/f && git add . && git commit -qm init && echo b >> a.txt && git commit -qam second'
# A loopback server on a port of its own, serving the workspace.
SERVE='echo hello-loopback > hello.txt; python3 "$FIX/serve.py" . "$TMPDIR/port" & srv=$!; port=$("$FIX/waitport" "$TMPDIR/port") || exit 9'
STOP='kill $srv; wait $srv 2>/dev/null; rm -f hello.txt'
LISTING_PRUNE='-name .git -o -name node_modules -o -name target -o -name __pycache__'

## Shell and coreutils (17)
w sh.find-sort works "find sort" \
  'mkdir -p a/b c && touch a/1.txt a/b/2.txt c/3.log c/4.txt' \
  'find . -name "*.txt" | sort' ro=1
w sh.sed-inplace works sed \
  'printf "foo 1\nbar foo\n" > a.txt; printf "foo\n" > b.txt' \
  'sed -i "s/foo/baz/g" a.txt b.txt && sed -i.bak 1d a.txt && cat a.txt b.txt a.txt.bak'
w sh.sort-uniq works "sort uniq" \
  'for i in $(seq 1 200); do echo $((i * 7 % 11)); done > nums' \
  'sort -n nums | uniq -c | sort -k1,1nr -k2,2n' ro=1
w sh.sort-spill works sort \
  'seq 1 30000 | rev > big' \
  'sort -S 64K -T "$TMPDIR" big | md5sum && ls -A "$TMPDIR" | wc -l' ro=1
w sh.xargs works "find xargs wc" \
  'mkdir src && for i in 1 2 3; do seq $i > src/f$i.c; done' \
  'find src -name "*.c" -print0 | sort -z | xargs -0 wc -l' ro=1
w sh.mktemp works mktemp \
  '' \
  'f=$(mktemp) && echo hi > "$f" && cat "$f" && rm "$f" && d=$(mktemp -d) && touch "$d/x" && ls "$d" && rm -r "$d"' ro=1
w sh.ln works ln \
  'echo target > target; echo hard > hard' \
  'ln -s target link && ln hard hard2 && ln -sf hard link2 && readlink link link2 && stat -c %h hard && cat link'
w sh.chmod works "chmod stat" \
  'printf "#!/bin/sh\necho ran\n" > run.sh; mkdir dir; touch dir/a dir/b' \
  'chmod +x run.sh && ./run.sh && chmod -R go-w dir && chmod g+s dir && chmod 640 dir/a && stat -c "%A %n" run.sh dir dir/a dir/b'
w sh.touch-d works "touch stat" \
  'echo x > f' \
  'touch -d "2020-01-02 03:04:05" f && touch -r f g && touch -m -t 202101010000 h && stat -c "%y %n" f g h'
w sh.mkfifo works mkfifo \
  '' \
  'mkfifo p && { echo through-fifo > p & } && cat p && test -p p && echo is-fifo'
w sh.unix-socket works python3 \
  'cat > sock.py <<"EOF"
import os, socket, threading
path = "s.sock"
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(1)
def serve():
    c, _ = srv.accept()
    c.sendall(b"echo:" + c.recv(100))
    c.close()
t = threading.Thread(target=serve)
t.start()
cli = socket.socket(socket.AF_UNIX)
cli.connect(path)
cli.sendall(b"ping")
print(cli.recv(100).decode())
t.join()
os.unlink(path)
EOF' \
  'python3 sock.py'
w sh.abstract-socket works python3 \
  'cat > abs.py <<"EOF"
import os, socket
name = b"\0corpus-%d" % os.getpid()
srv = socket.socket(socket.AF_UNIX)
srv.bind(name)
srv.listen(1)
if os.fork() == 0:
    c = socket.socket(socket.AF_UNIX)
    c.connect(name)
    c.sendall(b"from child")
    os._exit(0)
conn, _ = srv.accept()
print(conn.recv(100).decode())
os.wait()
a, b = socket.socketpair()
a.sendall(b"pair")
print(b.recv(10).decode())
EOF' \
  'python3 abs.py' ro=1
w sh.mv-tree works "mv find" \
  'mkdir -p a/x && echo 1 > a/x/f' \
  'mkdir b && mv a/x b/ && mv b c && find . | sort'
w sh.atomic-replace works mv \
  'echo old > config.ini' \
  'echo new > .config.ini.tmp && mv -f .config.ini.tmp config.ini && cat config.ini'
w sh.diff-patch works "diff patch cmp" \
  'printf "a\nb\nc\n" > old; printf "a\nB\nc\nd\n" > new; cp old work' \
  'diff -u old new > p.diff; patch -s work < p.diff && cmp work new && echo patched'
w sh.grep-r works grep \
  'mkdir -p src/x && echo "// TODO one" > src/a.c && echo "# TODO two" > src/x/b.py && echo none > src/c' \
  'grep -rn TODO src | sort' ro=1
w sh.umask-flock works flock \
  '' \
  'umask 077 && touch private && stat -c %a private && flock lockfile -c "echo locked" && flock -n lockfile true && echo free'

## git (21)
w git.init-commit works git \
  'echo hi > f' \
  'git init -q && git add . && git commit -qm first && git log --format=%s && git status --porcelain | wc -l'
w git.branch-merge works git "$REPO" \
  'git switch -qc feat && echo b > b.txt && git add b.txt && git commit -qm feat-b && git switch -q main && echo c > c.txt && git add c.txt && git commit -qm main-c && git merge -q --no-ff feat -m merge-feat && git log --format=%s --graph'
w git.rebase works git "$REPO"' && git switch -qc feat && echo f1 > f1 && git add f1 && git commit -qm f1 && echo f2 > f2 && git add f2 && git commit -qm f2 && git switch -q main && echo m > m && git add m && git commit -qm m' \
  'git rebase -q main feat && git log --format=%s'
w git.rebase-autosquash works git "$REPO"' && echo x > x && git add x && git commit -qm add-x && echo y >> a.txt && git commit -qam other && echo x2 >> x && git commit -qam "fixup! add-x"' \
  'GIT_SEQUENCE_EDITOR=: git rebase -q -i --autosquash HEAD~3 && git log --format=%s && cat x'
w git.stash works git "$REPO" \
  'echo dirty >> a.txt && echo new > untracked && git stash push -q -u -m wip && git stash list && git status --porcelain && git stash pop -q && git status --porcelain'
w git.tag-describe works git "$REPO" \
  'git tag -a v1.0 -m "release 1.0" && echo x >> a.txt && git commit -qam next && git describe --tags && git tag -l'
w git.gc works git "$REPO"' && for i in $(seq 1 15); do echo $i >> a.txt; git commit -qam c$i; done' \
  'git gc -q --aggressive --prune=now && git count-objects -v | grep -E "^(count|packs):" && git fsck --no-progress && echo fsck-ok'
w git.worktree works git "$REPO" \
  'git worktree add -q -b feat wt/feat && echo w > wt/feat/w.txt && git -C wt/feat add w.txt && git -C wt/feat commit -qm in-worktree && git log --format=%s feat && git worktree remove wt/feat && git worktree list | wc -l'
w git.submodule-add works git "$REPO" \
  'git -c protocol.file.allow=always submodule add -q "$FIX/sub.git" libs/sub && git commit -qm add-sub && git submodule status && cat libs/sub/README' \
  "limit=the workspace repository's own .git/config is read-only as root"
w git.submodule-update works git \
  'git clone -q "$FIX/super.git" super' \
  'cd super && git -c protocol.file.allow=always submodule update --init -q && git submodule status && cat libs/sub/README' \
  "limit=the workspace repository's own .git/config is read-only as root"
w git.clone-recursive works git \
  '' \
  'git -c protocol.file.allow=always clone -q --recurse-submodules "$FIX/super.git" s && git -C s submodule status && cat s/libs/sub/README && git -C s log --format=%s'
w git.push-local works git \
  'git clone -q --bare "$FIX/remote.git" origin.git && git clone -q origin.git work' \
  'cd work && echo x >> README && git commit -qam local-change && git push -q origin HEAD:main && git -C ../origin.git log --format=%s main'
w git.fetch-pull works git \
  'git clone -q --bare "$FIX/remote.git" origin.git && git clone -q origin.git work && git clone -q origin.git other && cd other && echo o >> README && git commit -qam other-change && git push -q origin HEAD:main' \
  'cd work && git fetch -q && git pull -q --ff-only && git log --format=%s'
w git.push-upstream works git \
  'git clone -q --bare "$FIX/remote.git" origin.git && git clone -q origin.git work' \
  'cd work && git switch -qc feat && echo f > f && git add f && git commit -qm feat && git push -q -u origin feat && git status -sb | head -1' \
  "limit=the workspace repository's own .git/config is read-only as root"
w git.bisect-run works git "$REPO"' && for i in 1 2 3 4 5 6 7 8; do [ $i = 5 ] && echo bad > bad; echo $i > n; git add -A; git commit -qm c$i; done' \
  'git bisect start HEAD HEAD~8 >/dev/null && git bisect run sh -c "test ! -e bad" > bisect.log && grep -c "is the first bad commit" bisect.log && git show -s --format=%s refs/bisect/bad && git bisect reset > /dev/null 2>&1 && rm bisect.log && git log -1 --format=%s'
w git.format-patch-am works git \
  'mkdir a && cd a && '"$REPO"' && cd .. && git clone -q a b && cd a && echo p1 > p1 && git add p1 && git commit -qm p1 && echo p2 >> p1 && git commit -qam p2' \
  'git -C a format-patch -q -2 -o ../patches && ls patches && git -C b am -q "$PWD"/patches/*.patch && git -C b log --format=%s'
w git.notes works git "$REPO" \
  'git notes add -m reviewed HEAD && git notes show HEAD && git log -1 --format=%N'
w git.sparse-checkout works git "$REPO" \
  'git sparse-checkout set d1 && ls && git sparse-checkout list' \
  "limit=the workspace repository's own .git/config is read-only as root"
w git.archive works "git tar unzip" "$REPO" \
  'git archive --format=tar.gz --prefix=p/ -o out.tgz HEAD && tar -tzf out.tgz | sort && git archive --format=zip -o out.zip HEAD && unzip -l out.zip | tail -1'
w git.log-blame-diff works git "$REPO" \
  'git log --format="%h %s" && git blame --porcelain a.txt | head -1 | cut -c1-7 && git diff HEAD~1 --stat && git status --porcelain' ro=1
w git.hook-runs works git "$REPO"' && printf "#!/bin/sh\necho hook-ran > hook.out\n" > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit' \
  'echo more >> a.txt && git commit -qam with-hook && git log -1 --format=%s && cat hook.out'
## Python (17)
w py.venv-pip works "python3 venv" \
  '' \
  'python3 -m venv v && v/bin/python -m pip --version | cut -d" " -f1,2 && v/bin/pip install -q --no-index --find-links "$FIX/wheels" tinypkg && v/bin/tinyhello && v/bin/python -m pip list --format=freeze | grep -i tinypkg' \
  post=none
w py.venv-pip-python works "python3 venv pip" \
  '' \
  'python3 -m venv --without-pip v && python3 -m pip --python v/bin/python install -q --no-index --find-links "$FIX/wheels" tinypkg && v/bin/python -c "import tinypkg; print(tinypkg.hello())"' \
  post=none
w py.pip-version works "python3 pip" \
  '' \
  'python3 -m pip --version | cut -d" " -f1,2' ro=1
w py.pip-wheel works "python3 pip" \
  '' \
  'python3 -m pip wheel -q --no-index --find-links "$FIX/wheels" -w dist tinypkg && ls dist'
w py.pip-target works "python3 pip" \
  'cp -r "$FIX/tinypkg" src && cp "$FIX/mkwheel.py" .' \
  'python3 mkwheel.py src dist && python3 -m pip install -q --no-index --target lib dist/*.whl && PYTHONPATH=lib python3 -m tinypkg'
w py.mp-pool works python3 \
  'printf "from multiprocessing import Pool\nif __name__ == \"__main__\":\n    with Pool(2) as p:\n        print(sum(p.map(abs, range(-50, 50))))\n" > pool.py' \
  'python3 pool.py' ro=1
w py.mp-manager works python3 \
  'printf "from multiprocessing import Manager, Process\ndef f(d, i):\n    d[i] = i * i\nif __name__ == \"__main__\":\n    with Manager() as m:\n        d = m.dict()\n        ps = [Process(target=f, args=(d, i)) for i in range(4)]\n        [p.start() for p in ps]\n        [p.join() for p in ps]\n        print(sorted(d.items()))\n" > mgr.py' \
  'python3 mgr.py' ro=1
w py.mp-spawn-queue works python3 \
  'printf "import multiprocessing as mp\ndef work(q, lock, v):\n    with lock:\n        v.value += 1\n    q.put(\"done\")\nif __name__ == \"__main__\":\n    mp.set_start_method(\"spawn\")\n    q, lock, v = mp.Queue(), mp.Lock(), mp.Value(\"i\", 0)\n    ps = [mp.Process(target=work, args=(q, lock, v)) for _ in range(3)]\n    [p.start() for p in ps]\n    print([q.get() for _ in ps])\n    [p.join() for p in ps]\n    print(v.value)\n" > sp.py' \
  'python3 sp.py' ro=1
w py.sqlite3 works python3 \
  '' \
  'python3 -c "
import sqlite3
db = sqlite3.connect(\"app.db\")
db.execute(\"pragma journal_mode=wal\")
db.execute(\"create table t (k text, v int)\")
db.executemany(\"insert into t values (?, ?)\", [(\"a\", 1), (\"b\", 2), (\"a\", 3)])
db.commit()
print(db.execute(\"select k, sum(v) from t group by k order by k\").fetchall())
db.close()
"'
w py.tempfile works python3 \
  '' \
  'python3 -c "
import os, tempfile
with tempfile.NamedTemporaryFile(\"w\", delete=False) as f:
    f.write(\"x\")
print(os.path.getsize(f.name)); os.unlink(f.name)
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, \"a\"), \"w\").close(); print(os.listdir(d))
fd, p = tempfile.mkstemp(suffix=\".txt\"); os.close(fd); os.unlink(p)
print(tempfile.gettempdir() == os.environ[\"TMPDIR\"])
"' ro=1
w py.http-server works python3 \
  'echo hello-http > hello.txt' \
  'python3 -u -m http.server --bind 127.0.0.1 0 > srv.log 2>&1 & srv=$!; for i in $(seq 100); do grep -q port srv.log && break; sleep 0.05; done; port=$(grep -o "port [0-9]*" srv.log | cut -d" " -f2); python3 -c "import sys, urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:%s/hello.txt\" % sys.argv[1]).read().decode(), end=\"\")" "$port"; kill $srv; wait $srv 2>/dev/null; rm srv.log'
w py.http-server-any works python3 \
  'echo hello-any > hello.txt' \
  'python3 -u -m http.server 0 > srv.log 2>&1 & srv=$!; for i in $(seq 100); do grep -q port srv.log && break; sleep 0.05; done; port=$(grep -o "port [0-9]*" srv.log | cut -d" " -f2); python3 -c "import sys, urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:%s/hello.txt\" % sys.argv[1]).read().decode(), end=\"\")" "$port"; kill $srv; wait $srv 2>/dev/null; rm srv.log'
w py.tcp-echo works python3 \
  'cat > echo.py <<"EOF"
import socket, threading
srv = socket.create_server(("127.0.0.1", 0))
port = srv.getsockname()[1]
def serve():
    for _ in range(3):
        c, _ = srv.accept()
        with c:
            c.sendall(c.recv(100).upper())
threading.Thread(target=serve, daemon=True).start()
for word in (b"one", b"two", b"three"):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(word)
        print(s.recv(100).decode())
EOF' \
  'python3 echo.py' ro=1
w py.udp-loopback works python3 \
  '' \
  'python3 -c "
import socket
a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind((\"127.0.0.1\", 0))
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.sendto(b\"datagram\", a.getsockname())
data, peer = a.recvfrom(100)
a.sendto(data.upper(), peer)
print(data.decode(), b.recv(100).decode())
"' ro=1
w py.ipv6-loopback works python3 \
  '' \
  'python3 -c "
import socket, threading
srv = socket.create_server((\"::1\", 0), family=socket.AF_INET6)
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept(); c.sendall(b\"v6:\" + c.recv(10)); c.close()
threading.Thread(target=serve).start()
s = socket.create_connection((\"::1\", port)); s.sendall(b\"hi\"); print(s.recv(20).decode())
"' ro=1
w py.unittest works python3 \
  'mkdir tests && printf "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n    def test_tmp(self):\n        import tempfile\n        with tempfile.TemporaryDirectory() as d:\n            self.assertTrue(d)\n" > tests/test_a.py' \
  'python3 -m unittest discover -s tests 2>&1' 'norm=sed -E "s/in [0-9.]+s/in Xs/"'
w py.pytest works "python3 pytest" \
  'mkdir tests && printf "def test_one(tmp_path):\n    (tmp_path / \"x\").write_text(\"y\")\n    assert (tmp_path / \"x\").read_text() == \"y\"\n" > tests/test_a.py' \
  'python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tail -1 | sed -E "s/in [0-9.]+s/in Xs/"'

## Node and npm (8)
w node.npm-init works "node npm" \
  '' \
  'npm init -y > /dev/null && node -p "require(\"./package.json\").version"'
w node.npm-pkg works "node npm" \
  'npm init -y > /dev/null' \
  'npm pkg set scripts.test="node t.js" description=corpus && npm pkg get scripts.test description'
w node.npm-pack works "node npm" \
  'cp -r "$FIX/npm/lp/." .' \
  'npm pack --silent && tar -tzf lp-1.0.0.tgz | sort' flags=--allow-caches
w node.npm-install-folder works "node npm" \
  'cp -r "$FIX/npm/lp" lp && mkdir app && cd app && npm init -y > /dev/null' \
  'cd app && npm install --no-audit ../lp > /dev/null && node -p "require(\"lp\").answer" && ls node_modules'
w node.npm-install-tarball works "node npm" \
  'cp -r "$FIX/npm/lp" lp && (cd lp && npm pack --silent > /dev/null) && mkdir app && cd app && npm init -y > /dev/null' \
  'cd app && npm install --no-audit ../lp/lp-1.0.0.tgz > /dev/null && node -p "require(\"lp\").answer"' \
  flags=--allow-caches
w node.npm-run works "node npm" \
  'printf "{\"name\": \"b\", \"version\": \"1.0.0\", \"scripts\": {\"build\": \"node build.js\"}}\n" > package.json && printf "const fs = require(\"fs\");\nfs.mkdirSync(\"dist\", {recursive: true});\nfs.writeFileSync(\"dist/out.txt\", \"built\\\\n\");\n" > build.js' \
  'npm run -s build && cat dist/out.txt'
w node.http-loopback works node \
  '' \
  'node -e "
const http = require(\"http\");
const srv = http.createServer((q, r) => r.end(\"node says \" + q.url));
srv.listen(0, () => {
  http.get({host: \"127.0.0.1\", port: srv.address().port, path: \"/hi\"}, res => {
    let b = \"\"; res.on(\"data\", d => b += d); res.on(\"end\", () => { console.log(b); srv.close(); });
  });
});
"' ro=1
w node.test-runner works node \
  'printf "const test = require(\"node:test\");\nconst assert = require(\"node:assert\");\nconst fs = require(\"fs\"), os = require(\"os\"), path = require(\"path\");\ntest(\"adds\", () => assert.strictEqual(1 + 1, 2));\ntest(\"tmp\", () => { const d = fs.mkdtempSync(path.join(os.tmpdir(), \"t-\")); fs.rmSync(d, {recursive: true}); });\n" > a.test.js' \
  'node --test 2>&1 | grep -E "^# (pass|fail)"'

## Rust (6)
w cargo.new-build works cargo \
  '' \
  'cargo new -q --vcs none app && cd app && cargo build -q --offline && ./target/debug/app'
w cargo.new-git works "cargo git" \
  '' \
  'cargo new -q app && git -C app status --porcelain | sort && git -C app symbolic-ref --short HEAD'
w cargo.test works cargo \
  'cargo new -q --vcs none --lib calc && printf "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n    #[test]\n    fn tmp() { let d = std::env::temp_dir().join(\"calc-t\"); std::fs::write(&d, b\"x\").unwrap(); std::fs::remove_file(&d).unwrap(); }\n}\n" > calc/src/lib.rs' \
  'cd calc && cargo test -q --offline 2>&1 | grep "^test result" | sed -E "s/finished in [0-9.]+s//"'
w cargo.path-dep works cargo \
  'cargo new -q --vcs none --lib util && echo "pub fn greet() -> &'"'"'static str { \"hi from util\" }" > util/src/lib.rs && cargo new -q --vcs none app && printf "util = { path = \"../util\" }\n" >> app/Cargo.toml && echo "fn main() { println!(\"{}\", util::greet()); }" > app/src/main.rs' \
  'cd app && cargo build -q --offline && ./target/debug/app'
w cargo.build-script works cargo \
  'cargo new -q --vcs none gen && printf "fn main() {\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    std::fs::write(format!(\"{out}/gen.rs\"), \"pub const GREETING: &str = \\\\\"generated\\\\\";\").unwrap();\n}\n" > gen/build.rs && printf "include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));\nfn main() { println!(\"{}\", GREETING); }\n" > gen/src/main.rs' \
  'cd gen && cargo run -q --offline'
w rustc.file works cargo \
  'echo "fn main() { println!(\"rustc {}\", 6 * 7); }" > hello.rs' \
  'rustc -O hello.rs -o hello && ./hello'

## C and make (3)
w cc.hello works cc \
  'printf "#include <stdio.h>\nint main(void) { printf(\"hello %%d\\\\n\", 42); return 0; }\n" > hello.c' \
  'cc -O2 -Wall -o hello hello.c && ./hello'
w make.build works "make cc" \
  'printf "int twice(int x) { return 2 * x; }\n" > lib.c && printf "#include <stdio.h>\nint twice(int);\nint main(void) { printf(\"%%d\\\\n\", twice(21)); return 0; }\n" > main.c && printf "app: main.o lib.o\n\t\$(CC) -o \$@ \$^\nclean:\n\trm -f app *.o\n" > Makefile' \
  'make -s -j2 && ./app && touch lib.c && make && make -s clean && ls'
w gcc.static-lib works "gcc ar" \
  'printf "int sq(int x) { return x * x; }\n" > sq.c && printf "#include <stdio.h>\nint sq(int);\nint main(void) { printf(\"%%d\\\\n\", sq(9)); return 0; }\n" > main.c' \
  'gcc -c sq.c && ar rcs libsq.a sq.o && gcc main.c -L. -lsq -o m && ./m'
## Archives and copies (7)
w tar.roundtrip works "tar gzip diff" \
  'mkdir -p src/d && echo a > src/a && echo b > src/d/b' \
  'tar -czf a.tgz src && mkdir x && tar -xzf a.tgz -C x && diff -r src x/src && echo same && tar -tzf a.tgz | sort'
w tar.owners works "tar stat" \
  'mkdir src && echo a > src/a && tar --owner=1234 --group=1234 --numeric-owner --mtime=2020-01-01 -cf a.tar src && rm -r src' \
  'tar -xpf a.tar && stat -c "%u:%g %a %y %n" src src/a'
w gzip.roundtrip works "gzip md5sum" \
  'seq 1 500 > f' \
  'gzip -k f && gzip -t f.gz && gunzip -c f.gz | md5sum && zcat f.gz | wc -l && gzip -df f.gz && wc -l < f'
w zip.unzip works "zip unzip" \
  'mkdir -p src/d && echo a > src/a && echo b > src/d/b' \
  'zip -qr a.zip src && unzip -q a.zip -d out && find out | sort && unzip -l a.zip | tail -1 && unzip -oq a.zip && echo overwritten'
w cp.archive works "cp stat" \
  'mkdir src && echo x > src/f && ln -s f src/l && touch -d 2001-02-03 src/f && touch -h -d 2002-03-04 src/l && { [ "$(id -u)" = 0 ] && chown -R 1234:1234 src || true; }' \
  'cp -a src dst && stat -c "%u:%g %y %N" dst/f dst/l'
w rsync.mirror works rsync \
  'mkdir -p src/d && echo a > src/a && echo b > src/d/b && mkdir dst && echo stale > dst/stale' \
  'rsync -a --delete src/ dst/ && find dst | sort'
w sha256.verify works sha256sum \
  'mkdir src && echo a > src/a && echo b > src/b && sha256sum src/* > SUMS' \
  'sha256sum -c --quiet SUMS && echo verified' ro=1

## jq, sqlite3 and curl (6)
w jq.query works jq \
  'echo "{\"items\": [{\"name\": \"a\", \"n\": 1}, {\"name\": \"b\", \"n\": 2}, {\"name\": \"c\", \"n\": 3}]}" > data.json' \
  'jq -r ".items[] | select(.n > 1) | .name" data.json && jq -s "map(.items | length) | add" data.json' ro=1
w sqlite.import-backup works sqlite3 \
  'printf "name,age\nann,31\nbob,42\n" > people.csv' \
  'sqlite3 app.db "pragma journal_mode=wal;" ".import --csv people.csv people" "select count(*), max(age) from people;" && sqlite3 app.db ".backup copy.db" && sqlite3 copy.db "select name from people order by name;"'
w sqlite.readonly works sqlite3 \
  'sqlite3 app.db "create table t(x); insert into t values (7);"' \
  'sqlite3 -readonly app.db "select x * 6 from t;"' ro=1
w curl.loopback works "curl python3" \
  '' \
  "$SERVE"'; curl -fsS "http://127.0.0.1:$port/hello.txt"; rc=$?; '"$STOP"'; exit $rc'
w curl.download-post works "curl python3" \
  '' \
  "$SERVE"'; curl -fsS -o got.txt "http://127.0.0.1:$port/hello.txt" && cat got.txt && curl -fsS -H "Content-Type: application/json" -d "{\"a\": 1}" "http://127.0.0.1:$port/echo"; rc=$?; echo; '"$STOP"'; exit $rc'
w curl.localhost works "curl python3" \
  '' \
  "$SERVE"'; curl -fsS "http://localhost:$port/hello.txt"; rc=$?; '"$STOP"'; exit $rc'

## Failing the same way, and needing what the defaults close (8)
w sh.touch-devnull works touch \
  '' \
  'LOG=${LOG:-/dev/null}; touch "$LOG" && echo "build ok" >> "$LOG" && echo logged' \
  "limit=the device nodes' times cannot be changed (the read-only tree; the gate without it)"
w fail.shell-noexec works bash \
  'printf "#!/bin/sh\necho built\n" > build.sh' \
  './build.sh; echo "status $?"; sh build.sh'
w fail.unittest works python3 \
  'mkdir tests && printf "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertTrue(True)\n    def test_bad(self):\n        self.assertEqual(\"a\", \"b\")\n" > tests/test_a.py' \
  'python3 -m unittest discover -s tests 2>&1 | sed -E "s/in [0-9.]+s/in Xs/"; exit ${PIPESTATUS[0]}'
w fail.cargo-test works cargo \
  'cargo new -q --vcs none --lib calc && printf "#[test]\nfn fails() { assert_eq!(1 + 1, 3); }\n" > calc/src/lib.rs' \
  'cd calc && cargo test -q --offline > out.txt 2>&1; rc=$?; grep -E "^test result|panicked" out.txt | sed -E "s/finished in [0-9.]+s//; s/ \([0-9]+\) panicked/ panicked/"; rm out.txt; exit $rc'
w fail.make-error works "make cc" \
  'printf "int main(void) { return undefined_name; }\n" > bad.c && printf "all: bad\nbad: bad.c\n\t\$(CC) -o bad bad.c\n" > Makefile' \
  'make -s 2> err.txt; rc=$?; grep -c "undefined_name" err.txt; rm err.txt; exit $rc'
w fail.curl-no-server works "curl python3" \
  '' \
  'port=$(python3 -c "import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])"); curl -sS "http://127.0.0.1:$port/" 2>&1 | sed -E "s/port [0-9]+ after [0-9]+ ms/port P after N ms/"; exit ${PIPESTATUS[0]}'
w net.curl-dns works curl \
  '' \
  'curl -sS --max-time 10 https://corpus.example.invalid/ 2>&1 | sed -E "s/after [0-9]+ ms/after N ms/"; exit ${PIPESTATUS[0]}' \
  'flags=--network allow'
w net.git-ls-remote works git \
  '' \
  'timeout 20 git ls-remote https://corpus.example.invalid/repo.git 2>&1 | head -1; exit ${PIPESTATUS[0]}' \
  'flags=--network allow'

## Refused (17)
w r.write-outside refused:write-outside-workspace "" \
  '' \
  'echo x > "$OUTSIDE/new.txt"' \
  "denials=write|{OUT}/new.txt|{WERR}|output" 'effect=test ! -e "$OUTSIDE/new.txt"'
w r.touch-outside refused:utime-outside-workspace touch \
  '' \
  'touch -d 2001-01-01 "$OUTSIDE/existing.txt"' \
  "denials=write|{OUT}/existing.txt|{WERR}|output" "denials_gate=utime|{OUT}/existing.txt|EPERM|gate" \
  'effect=test "$(stat -c %Y "$OUTSIDE/existing.txt")" != 978307200'
w r.chmod-outside refused:chmod-outside-workspace chmod \
  '' \
  'chmod 600 "$OUTSIDE/existing.txt"' \
  "denials=chmod|{OUT}/existing.txt|{WERR}|output" "denials_gate=chmod|{OUT}/existing.txt|EPERM|gate" 'effect=test "$(stat -c %a "$OUTSIDE/existing.txt")" = 644'
w r.rm-outside refused:remove-outside-workspace rm \
  '' \
  'rm -f "$OUTSIDE/existing.txt"' \
  "denials=write|{OUT}/existing.txt|{WERR}|output" 'effect=test -e "$OUTSIDE/existing.txt"'
w r.mkdir-outside refused:mkdir-outside-workspace mkdir \
  '' \
  'mkdir "$OUTSIDE/newdir"' \
  "denials=write|{OUT}/newdir|{WERR}|output" 'effect=test ! -e "$OUTSIDE/newdir"'
w r.tar-x-outside refused:extract-outside-workspace tar \
  'mkdir src && echo a > src/a && tar -cf a.tar src && rm -r src' \
  'tar -xf a.tar -C "$OUTSIDE"' \
  "denials=write|src|{WERR}|output" "denials_gate=" "denied_gate=false" 'effect=test ! -e "$OUTSIDE/src"'
w r.read-ssh refused:read-credentials cat \
  '' \
  'cat ~/.ssh/id_ed25519' \
  "denials=read|{HOME}/.ssh/id_ed25519|ENOENT|output" "denials_gate=read|{HOME}/.ssh/id_ed25519|EACCES|output"
w r.read-aws refused:read-credentials python3 \
  '' \
  'python3 -c "import os; print(open(os.path.expanduser(\"~/.aws/credentials\")).read())"' \
  "denials=read|{HOME}/.aws/credentials|ENOENT|output" "denials_gate=read|{HOME}/.aws/credentials|EACCES|output"
w r.egress-curl refused:egress curl \
  '' \
  'curl -sS --connect-timeout 30 http://192.0.2.1/' \
  "denials=connect|192.0.2.1:80|EACCES|gate" net=true maxms=5000
w r.egress-tcp refused:egress python3 \
  '' \
  'python3 -c "import socket; socket.create_connection((\"192.0.2.1\", 443), timeout=30)"' \
  "denials=connect|192.0.2.1:443|EACCES|gate" net=true maxms=5000
w r.egress-udp refused:egress python3 \
  '' \
  'python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"q\", (\"192.0.2.1\", 53))"' \
  "denials=sendto|192.0.2.1:53|EACCES|gate" net=true maxms=5000
# `npm ping` always asks the registry (npm's update notifier would too, but
# it stays quiet wherever a CI variable is set).
w r.npm-ping refused:egress-by-default "node npm" \
  'mkdir app' \
  'cd app && npm init -y > /dev/null && npm ping --fetch-retries=0 --fetch-timeout=5000; echo ran' \
  "denials=connect|[^|]+:53|EACCES|gate" net=true 'effect=test -e app/package.json'
w r.git-config refused:protected-git-config git "$REPO" \
  'git config core.fsmonitor "touch pwned"' \
  "denials=write|{WS}/.git/config|EBUSY|output" 'effect=! git config core.fsmonitor' \
  denials_gate= denied_gate=false "pc_gate={WS}/.git/config|modified|true"
w r.git-remote-add refused:protected-git-config git "$REPO" \
  'git remote add origin "$FIX/remote.git"' \
  "denials=write|{WS}/.git/config|EBUSY|output" 'effect=! git config remote.origin.url' \
  denials_gate= denied_gate=false "pc_gate={WS}/.git/config|modified|true"
w r.git-hook refused:protected-git-hooks git "$REPO" \
  'printf "#!/bin/sh\ntouch pwned\n" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout' \
  "denials=write|{WS}/.git/hooks/post-checkout|{WERR}|output" 'effect=test ! -e .git/hooks/post-checkout' \
  "denials_gate=chmod|{WS}/.git/hooks/post-checkout|EPERM|gate" "pc_gate={WS}/.git/hooks/post-checkout|created|true"
w r.vscode-tasks refused:protected-editor-file mkdir \
  '' \
  'mkdir -p .vscode && echo "{\"tasks\": [{\"runOptions\": {\"runOn\": \"folderOpen\"}}]}" > .vscode/tasks.json' \
  denied=false denials= "pc={WS}/.vscode|created|true" 'effect=test ! -e .vscode'
w r.readonly-write refused:read-only-workspace touch \
  '' \
  'touch notes.txt' \
  mode=read-only "denials=write|{WS}/notes.txt|{WERR}|output" 'effect=test ! -e notes.txt'

# --- running one workload -----------------------------------------------------
opt() { # opt KEY [DEFAULT]: the workload's option (status 1 when absent, no default)
  local kv
  for kv in "${cur_optv[@]}"; do
    [[ $kv == "$1="* ]] && { printf '%s' "${kv#*=}"; return 0; }
  done
  [[ $# -gt 1 ]] && printf '%s' "$2"
  [[ $# -gt 1 ]]
}
topt() { # topt KEY [DEFAULT]: KEY_gate in the tier without the mount tree, where given
  if [[ $TIER == gate ]] && has_opt "$1_gate"; then opt "$1_gate"; else opt "$@"; fi
}
has_opt() {
  local kv
  for kv in "${cur_optv[@]}"; do [[ $kv == "$1="* ]] && return 0; done
  return 1
}

# The environment of one run (its own HOME, TMPDIR and outside dir).
run_env() {
  envs=(HOME="$wd/home" TMPDIR="$wd/tmp" OUTSIDE="$wd/outside" WS="$wd/ws")
}

# Fresh workspace, home, temp dir and outside dir, then the setup.
prepare() {
  chmod -R u+rwX "$wd" 2>/dev/null
  rm -rf "$wd"
  mkdir -p "$wd/ws" "$wd/tmp" "$wd/outside"
  cp -a "$ROOT/home0" "$wd/home"
  echo original >"$wd/outside/existing.txt"
  chmod 644 "$wd/outside/existing.txt"
  run_env
  [[ -z $cur_setup ]] && return 0
  (cd "$wd/ws" && env "${envs[@]}" bash -c "$cur_setup") </dev/null >"$wd.setup.log" 2>&1
}

listing() {
  if [[ $(opt post '') == none ]]; then
    echo "(not compared)"
  else
    (cd "$wd/ws" && eval "find . \\( $LISTING_PRUNE \\) -prune -o -printf '%y %p\\n'" | LC_ALL=C sort)
  fi
}

normalise() { # stdin -> stdout, through the workload's filter
  local n
  if n=$(opt norm); then bash -c "$n"; else cat; fi
}

# Unconfined: bash -c in a session of its own, killed whole afterwards, and
# after 90 s at the latest.
run_unconfined() {
  local out=$1 rc p dog done
  (cd "$wd/ws" && exec env "${envs[@]}" setsid bash -c "$cur_cmd") </dev/null >"$out.stdout" 2>"$out.stderr" &
  p=$!
  : >"$ROOT/pg/$p"
  sleep 90 &
  dog=$!
  : >"$ROOT/dog/$dog"
  wait -n -p done "$p" "$dog"
  rc=$?
  if [[ $done == "$dog" ]]; then
    kill -KILL -- "-$p" 2>/dev/null
    wait "$p"
    rc=$?
  else
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
  fi
  kill -KILL -- "-$p" 2>/dev/null
  rm -f "$ROOT/pg/$p" "$ROOT/dog/$dog"
  echo "$rc" >"$out.rc"
  normalise <"$out.stdout" >"$out.norm"
  listing >"$out.list"
}

run_confined() {
  local out=$1 mode=$2 flags
  flags=$(opt flags '')
  local p
  # shellcheck disable=SC2086
  (cd "$wd/ws" && exec env "${envs[@]}" "$BIN" -s "$mode" --json --timeout 90s -C "$wd/ws" $flags -- "$cur_cmd") \
    </dev/null >"$out.json" 2>"$out.dsh-stderr" &
  p=$!
  : >"$ROOT/dsh/$p"
  wait "$p"
  echo $? >"$out.rc"
  rm -f "$ROOT/dsh/$p"
  if jq -e '.exit_code != null or .signal != null' "$out.json" >/dev/null 2>&1; then
    jq -j '.stdout.text' "$out.json" | normalise >"$out.norm"
    jq -r 'if .exit_code != null then .exit_code else "signal " + .signal end' "$out.json" >"$out.code"
  else
    : >"$out.norm"
    echo "error: $(jq -c '.error // "no JSON"' "$out.json" 2>/dev/null || echo 'no JSON')" >"$out.code"
  fi
  listing >"$out.list"
}

subst() { # replace the placeholders of an expectation
  local s=$1
  s=${s//\{WS\}/$wd/ws}
  s=${s//\{OUT\}/$wd/outside}
  s=${s//\{HOME\}/$wd/home}
  s=${s//\{WERR\}/$WERR}
  printf '%s' "$s"
}

# Compare a confined run with the unconfined one: adds to `reasons` and
# `details`, and sets `kind` to FALSE BREAKAGE or WRONG DENIED (or leaves it).
compare() {
  local u=$1 c=$2 label=$3 ucode ccode facts
  ucode=$(cat "$u.rc")
  ccode=$(cat "$c.code")
  local why=()
  [[ $ucode == "$ccode" ]] || why+=("exit $ucode unconfined, $ccode confined")
  cmp -s "$u.norm" "$c.norm" || why+=("stdout differs")
  cmp -s "$u.list" "$c.list" || why+=("workspace differs")
  if [[ $ccode != error* ]]; then
    jq -e '.sandbox.runner_failed == false' "$c.json" >/dev/null || why+=("runner failed")
    [[ $(jq '.sandbox.protected_changes // [] | length' "$c.json") == 0 ]] ||
      why+=("protected_changes $(jq -c '[.sandbox.protected_changes[] | "\(.path) \(.change)"]' "$c.json")")
  fi
  facts=""
  if [[ $ccode != error* ]] && ! jq -e '.sandbox.denied == false and .sandbox.network_denied == false and (.sandbox.denials | length) == 0' "$c.json" >/dev/null; then
    facts="denied=$(jq -r .sandbox.denied "$c.json") $(jq -c '[.sandbox.denials[] | "\(.op) \(.path) \(.errno) \(.source)"]' "$c.json")"
  fi
  if ((${#why[@]})); then
    # A documented limit (docs/known-limits.md) is told, not failed.
    if has_opt limit; then
      kind="KNOWN LIMIT"
      why+=("limit: $(opt limit)")
    else
      kind="FALSE BREAKAGE"
    fi
    reasons+=("$label: $(IFS=';'; echo "${why[*]}")${facts:+; $facts}")
    details+=("--- $label: unconfined exit $ucode, confined $ccode")
    if ! cmp -s "$u.norm" "$c.norm"; then
      details+=("$(diff -u --label unconfined --label confined "$u.norm" "$c.norm" | head -20)")
    fi
    if ! cmp -s "$u.list" "$c.list"; then
      details+=("$(diff -u --label unconfined --label confined "$u.list" "$c.list" | head -20)")
    fi
    [[ $ccode == error* ]] || details+=("confined stderr: $(jq -r '.stderr.text' "$c.json" | tail -5)")
  elif [[ -n $facts ]] && ! has_opt limit; then
    [[ $kind == "FALSE BREAKAGE" ]] || kind="WRONG DENIED"
    reasons+=("$label: $facts")
    details+=("--- $label: confined stderr: $(jq -r '.stderr.text' "$c.json" | tail -5)")
  fi
}

run_works() {
  kind=ok reasons=() details=()
  prepare || { kind=SETUP; reasons+=("setup failed: $(tail -3 "$wd.setup.log")"); return; }
  run_unconfined "$wd.u"
  prepare || { kind=SETUP; reasons+=("setup failed (2nd): $(tail -3 "$wd.setup.log")"); return; }
  run_confined "$wd.ww" workspace-write
  compare "$wd.u" "$wd.ww" workspace-write
  if [[ -n ${CORPUS_VERBOSE:-} ]]; then
    details+=("unconfined exit $(cat "$wd.u.rc"); stdout: $(head -c 300 "$wd.u.norm" | tr '\n' '~')")
    details+=("unconfined stderr: $(head -c 300 "$wd.u.stderr" | tr '\n' '~')")
  fi
  if [[ $(opt ro '') == 1 ]]; then
    prepare || { kind=SETUP; reasons+=("setup failed (3rd)"); return; }
    run_confined "$wd.ro" read-only
    compare "$wd.u" "$wd.ro" read-only
  fi
}

run_refused() {
  kind=ok reasons=() details=()
  local mode re got pc pcre denied net ms maxms effect
  mode=$(opt mode workspace-write)
  prepare || { kind=SETUP; reasons+=("setup failed: $(tail -3 "$wd.setup.log")"); return; }
  run_confined "$wd.c" "$mode"
  if [[ $(cat "$wd.c.code") == error* ]]; then
    kind="WRONG DENIED" reasons+=("$(cat "$wd.c.code")")
    return
  fi
  re=$(topt denials '')
  re=$(subst "$re")
  got=$(jq -r '[.sandbox.denials[] | "\(.op)|\(.path)|\(.errno)|\(.source)"] | join(";")' "$wd.c.json")
  [[ $got =~ ^(${re//|/\\|})$ ]] || reasons+=("denials [$got], expected [$re]")
  denied=$(topt denied true)
  net=$(topt net false)
  [[ $(jq -r .sandbox.denied "$wd.c.json") == "$denied" ]] || reasons+=("denied $(jq -r .sandbox.denied "$wd.c.json"), expected $denied")
  [[ $(jq -r .sandbox.network_denied "$wd.c.json") == "$net" ]] || reasons+=("network_denied $(jq -r .sandbox.network_denied "$wd.c.json"), expected $net")
  pcre=$(topt pc '')
  pcre=$(subst "$pcre")
  pc=$(jq -r '[.sandbox.protected_changes // [] | .[] | "\(.path)|\(.change)|\(.restored)"] | join(";")' "$wd.c.json")
  [[ $pc =~ ^(${pcre//|/\\|})$ ]] || reasons+=("protected_changes [$pc], expected [$pcre]")
  if maxms=$(opt maxms); then
    ms=$(jq -r .duration_ms "$wd.c.json")
    ((ms < maxms)) || reasons+=("took ${ms} ms, not refused at once")
  fi
  if effect=$(opt effect); then
    (cd "$wd/ws" && env "${envs[@]}" bash -c "$effect") >/dev/null 2>&1 || reasons+=("the effect happened: not ($effect)")
  fi
  if ((${#reasons[@]})); then
    kind="WRONG DENIED"
    details+=("--- confined stderr: $(jq -r '.stderr.text' "$wd.c.json" | tail -5)")
  fi
}

# One workload, in a subshell: writes res/NNN.{line,kind,details,ms}.
run_one() {
  local i=$1 t0 t1 tool missing=""
  cur_name=${NAMES[i]} cur_expect=${EXPECTS[i]} cur_setup=${SETUPS[i]} cur_cmd=${CMDS[i]}
  cur_optv=()
  [[ -n ${OPTS[i]} ]] && mapfile -t -d $'\x1f' cur_optv < <(printf '%s' "${OPTS[i]}")
  wd=$ROOT/w/$cur_name
  local res=$ROOT/res/$(printf %03d "$i")
  for tool in ${TOOLSL[i]}; do have "$tool" || { missing=$tool; break; }; done
  if [[ -n $missing ]]; then
    echo skip >"$res.kind"
    echo "skip           $cur_name (no $missing)" >"$res.line"
    return
  fi
  t0=$(date +%s%3N)
  if [[ $cur_expect == works ]]; then run_works; else run_refused; fi
  t1=$(date +%s%3N)
  echo $((t1 - t0)) >"$res.ms"
  local label
  case $kind in
    ok) label=ok ;;
    SETUP) label="SETUP ERROR" ;;
    *) label=$kind ;;
  esac
  echo "$kind:$cur_expect" >"$res.kind"
  {
    printf '%-14s %s (%s)' "$label" "$cur_name" "$cur_expect"
    if ((${#reasons[@]})); then
      printf ': %s' "${reasons[0]}"
      for r in "${reasons[@]:1}"; do printf ' / %s' "$r"; done
    fi
    echo
  } >"$res.line"
  if ((${#details[@]})); then
    { echo "== $cur_name"; printf '%s\n' "${details[@]}" | sed 's/^/    /'; } >"$res.details"
  fi
  # Leave nothing but the result behind.
  chmod -R u+rwX "$wd" 2>/dev/null
  rm -rf "$wd" "$wd".*
}

# --- main -----------------------------------------------------------------------
# In a subshell of its own, not in a list, so that `set -e` holds in it.
(build_fixtures) >"$ROOT/fixtures.log" 2>&1
fixtures_status=$?
((fixtures_status == 0)) || { cat "$ROOT/fixtures.log" >&2; die "building the fixtures failed"; }
export HOME=$ROOT/home0

echo "corpus: ${#NAMES[@]} workloads; dsh-exec $BIN; tier: $TIER (refused writes: $WERR); uid $(id -u); $JOBS at once"
sel=()
for i in "${!NAMES[@]}"; do
  [[ -z $FILTER || ${NAMES[i]} =~ $FILTER ]] && sel+=("$i")
done

next=0 printed=0 running=0
print_ready() {
  while ((printed < ${#sel[@]})); do
    local r
    r=$ROOT/res/$(printf %03d "${sel[printed]}")
    [[ -e $r.line ]] || break
    cat "$r.line"
    printed=$((printed + 1))
  done
}
while ((next < ${#sel[@]} || running > 0)); do
  while ((running < JOBS && next < ${#sel[@]})); do
    run_one "${sel[next]}" &
    workers+=($!)
    next=$((next + 1)) running=$((running + 1))
  done
  wait -n
  running=$((running - 1))
  print_ready
done
wait
# A workload whose worker died without a result (it should not happen).
for i in "${sel[@]}"; do
  r=$ROOT/res/$(printf %03d "$i")
  [[ -e $r.line ]] && continue
  echo "NO RESULT:${EXPECTS[i]}" >"$r.kind"
  echo "NO RESULT      ${NAMES[i]} (the corpus failed to run it)" >"$r.line"
done
print_ready

works_ok=0 refused_ok=0 false_breakages=0 wrong=0 skipped=0 corpus_errors=0 limits=0
for i in "${sel[@]}"; do
  r=$ROOT/res/$(printf %03d "$i")
  case $(cat "$r.kind") in
    ok:works) works_ok=$((works_ok + 1)) ;;
    ok:refused*) refused_ok=$((refused_ok + 1)) ;;
    "FALSE BREAKAGE:"*) false_breakages=$((false_breakages + 1)) ;;
    "KNOWN LIMIT:"*) limits=$((limits + 1)) ;;
    "WRONG DENIED:"*) wrong=$((wrong + 1)) ;;
    skip) skipped=$((skipped + 1)) ;;
    *) corpus_errors=$((corpus_errors + 1)) ;;
  esac
done
detail_files=("$ROOT"/res/*.details)
if ((${#detail_files[@]})); then
  echo
  echo "details:"
  cat "${detail_files[@]}"
fi
elapsed=$((($(date +%s%3N) - started + 500) / 1000))
echo
echo "$works_ok works ok, $refused_ok refused ok, $false_breakages false breakages, $wrong wrong denied facts, $limits known limits, $skipped skipped"
((corpus_errors)) && echo "$corpus_errors workloads the corpus could not run (setup failed, or no result)"
slowest=$(for f in "$ROOT"/res/*.ms; do
  n=${f##*/}
  echo "$(cat "$f") ${NAMES[10#${n%.ms}]}"
done | sort -rn | head -3 | awk '{printf "%s%s %.1f s", (NR > 1 ? ", " : ""), $2, $1 / 1000}')
echo "corpus: ${elapsed} s, tier $TIER, uid $(id -u); slowest: ${slowest:-none}"
((false_breakages == 0 && wrong == 0 && corpus_errors == 0))
