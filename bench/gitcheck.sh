#!/usr/bin/env bash
# What the git check (the snapshot of every git directory under the writable
# roots before a confined run, and the walk after it) costs a run, measured on
# a repository with 20 submodules and 50,000 files beside the same run in an
# empty workspace, interleaved, in one run of this script.
#
#   bash bench/gitcheck.sh                      # builds the release binary
#   DSH_EXEC_BIN=/path/to/dsh-exec BENCH_RUNS=40 bash bench/gitcheck.sh
#
# Rows: `true` in the empty workspace; `true` in the big one (both walks, the
# second reusing every unchanged directory); a command that adds a file to
# every one of the 2,500 directories (the walk after the run reads them all
# again; the command's own cost is measured unconfined beside it and taken
# off). Medians of wall time, milliseconds.
set -euo pipefail
RUNS=${BENCH_RUNS:-30}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-gitbench.XXXXXX")
trap 'rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
[[ $BIN == /* ]] || BIN=$PWD/$BIN
export GIT_CONFIG_GLOBAL=/dev/null GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b \
  GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
mkdir "$BENCH_TMP/tmp" "$BENCH_TMP/empty" "$BENCH_TMP/up" "$BENCH_TMP/ws"
export TMPDIR=$BENCH_TMP/tmp
echo "building the workspace: 20 submodules, 50,000 files ..." >&2
git -C "$BENCH_TMP/up" init -q && git -C "$BENCH_TMP/up" commit -q --allow-empty -m up
WS=$BENCH_TMP/ws
python3 - "$WS" <<'EOF'
import os, sys
ws = sys.argv[1]
for d in range(2500):
    p = os.path.join(ws, f"d{d // 100}", f"e{d % 100}")
    os.makedirs(p, exist_ok=True)
    for f in range(20):
        with open(os.path.join(p, f"f{f}.txt"), "w") as fh:
            fh.write("x\n")
EOF
(
  cd "$WS"
  git init -q
  for i in $(seq 1 20); do
    git -c protocol.file.allow=always submodule add -q "$BENCH_TMP/up" "sub/s$i" 2>/dev/null
  done
  git add -A >/dev/null
  git commit -q -m ws
)
files=$(find "$WS" -path '*/.git' -prune -o -type f -print | wc -l)
echo "workspace: $files files, $(find "$WS" -name .git | wc -l) .git entries" >&2

python3 - "$BIN" "$WS" "$BENCH_TMP/empty" "$RUNS" <<'EOF'
import statistics, subprocess, sys, time
bin, ws, empty, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
touch_all = "for d in d*/e*; do : > $d/.bench; done"
rows = [
    ("true, empty workspace", [bin, "-s", "workspace-write", "-C", empty, "--", "true"]),
    ("true, 20 submodules + 50k files", [bin, "-s", "workspace-write", "-C", ws, "--", "true"]),
    ("every directory changed", [bin, "-s", "workspace-write", "-C", ws, "--", touch_all]),
    ("(the same, unconfined)", ["bash", "-c", touch_all]),
]
times = {name: [] for name, _ in rows}
def once(cmd, cwd):
    t = time.perf_counter_ns()
    r = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        sys.exit(f"failed: {cmd}")
    return (time.perf_counter_ns() - t) / 1e6
for _ in range(3):
    for name, cmd in rows:
        once(cmd, ws)
for _ in range(runs):
    for name, cmd in rows:
        times[name].append(once(cmd, ws))
med = {n: statistics.median(v) for n, v in times.items()}
print("| run | median ms |")
print("|---|---|")
for name, _ in rows:
    print(f"| {name} | {med[name]:.1f} |")
walk = med["true, 20 submodules + 50k files"] - med["true, empty workspace"]
changed = med["every directory changed"] - med["(the same, unconfined)"] - med["true, empty workspace"]
print(f"\ngit check, nothing changed: {walk:.1f} ms per run")
print(f"git check, every directory changed: {changed:.1f} ms per run")
EOF
