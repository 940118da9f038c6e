#!/usr/bin/env bash
# Benchmark of transactions (--transaction): what the overlays cost a run,
# what reading a change set costs, and what a commit costs beside `cp -a`
# of the same files, each measured beside its peer in one run. Prints a
# markdown table, figures only. Needs root (a mount namespace).
#
#   bash bench/transaction.sh
#   TX_BENCH_RUNS=50 DSH_EXEC_BIN=target/release/dsh-exec bash bench/transaction.sh
#
# Rows:
# - start-up: `dsh-exec --sandbox workspace-write -- true` against
#   `dsh-exec --transaction -- true` (the overlays made, attached, read and
#   recorded, then removed by `--on-exit discard`), interleaved, wall and
#   CPU (user + system of the whole tree) medians; target: at most +2 ms.
# - change set: a pending transaction whose command touched 10,000 files
#   of a 200,000-file tree; `dsh-exec transaction list --json` (which
#   reads every pending transaction's change set) against the same with
#   no transaction pending; target: the difference at most 50 ms.
# - commit of 10,000 changed files (4 KiB each, in 100 directories)
#   against `cp -a` of the same files into a fresh directory on the same
#   file system; target: at most 1.5x.
set -euo pipefail

RUNS=${TX_BENCH_RUNS:-30}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
BIN=$(realpath "$BIN")
if [[ $(id -u) != 0 ]]; then
  echo "transactions need root (a mount namespace): not measured" >&2
  exit 0
fi
# Outside the temp dir: the workspace must not lie inside another root,
# and the state directory (the upper layers) must be on the same file
# system as `cp -a`'s copy for a fair comparison.
BENCH_TMP=$(mktemp -d "/var/tmp/dsh-tx-bench.XXXXXX")
trap 'rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP

echo "# dsh-exec transaction benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel: $(uname -r), nproc: $(nproc), file system: $(findmnt -no FSTYPE -T "$BENCH_TMP")"
echo "- binary: $BIN ($("$BIN" --version 2>&1 | head -n1))"
echo "- runs: $RUNS per start-up row, 5 per change-set and commit row"
echo

BIN=$BIN RUNS=$RUNS TMP=$BENCH_TMP python3 - <<'PY'
import json, os, resource, shutil, statistics, subprocess, time

BIN, RUNS, TMP = os.environ["BIN"], int(os.environ["RUNS"]), os.environ["TMP"]
home = os.path.join(TMP, "home")
os.makedirs(home)
env = dict(os.environ, HOME=home)
env.pop("XDG_STATE_HOME", None)
env.pop("XDG_RUNTIME_DIR", None)

def timed(argv, cwd):
    """Wall and CPU (children's user + system) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu

def med(xs):
    return statistics.median(xs)

rows = []
ws = os.path.join(TMP, "ws")
os.makedirs(ws)
for i in range(50):
    with open(os.path.join(ws, f"f{i}"), "w") as f:
        f.write("x" * 100)

plain = [BIN, "--sandbox", "workspace-write", "--", "true"]
tx = [BIN, "--transaction", "--on-exit", "discard", "--", "true"]
for _ in range(3):
    timed(plain, ws); timed(tx, ws)
a, b = [], []
for _ in range(RUNS):
    a.append(timed(plain, ws)); b.append(timed(tx, ws))
for name, xs in [("`dsh-exec --sandbox workspace-write -- true`", a),
                 ("`dsh-exec --transaction --on-exit discard -- true`", b)]:
    rows.append((f"start-up, wall: {name}", RUNS, med([x[0] for x in xs]) * 1e3, "ms"))
    rows.append((f"start-up, CPU: {name}", RUNS, med([x[1] for x in xs]) * 1e3, "ms"))
dw = (med([x[0] for x in b]) - med([x[0] for x in a])) * 1e3
dc = (med([x[1] for x in b]) - med([x[1] for x in a])) * 1e3
print(f"start-up: the transaction adds {dw:+.2f} ms wall, {dc:+.2f} ms CPU (target <= +2 ms)\n")

# A 200,000-file tree: 2,000 directories of 100 files.
big = os.path.join(TMP, "big")
os.makedirs(big)
subprocess.run(["bash", "-c", "for d in $(seq 1 2000); do mkdir d$d; (cd d$d && "
                "touch $(seq -f f%g 1 100)); done"], cwd=big, check=True)
touch10k = "for d in $(seq 1 100); do (cd d$d && for f in $(seq 1 100); do echo y >> f$f; done); done"
out = subprocess.run([BIN, "--transaction", "--json", "--", touch10k], cwd=big, env=env,
                     capture_output=True, text=True, check=True)
t = json.loads(out.stdout)["transaction"]
assert t["modified"] == 10000, t
list_cmd = [BIN, "transaction", "list", "--json"]
with_tx = [timed(list_cmd, TMP)[0] for _ in range(5)]
subprocess.run([BIN, "discard", t["id"]], env=env, check=True, stdout=subprocess.DEVNULL)
without = [timed(list_cmd, TMP)[0] for _ in range(5)]
rows.append(("change set of 10,000 modified files in a 200,000-file tree "
             "(`transaction list`, one pending)", 5, med(with_tx) * 1e3, "ms"))
rows.append(("`transaction list`, none pending", 5, med(without) * 1e3, "ms"))
print(f"change set: {(med(with_tx) - med(without)) * 1e3:.1f} ms for 10,000 changes "
      f"(target <= 50 ms)\n")
shutil.rmtree(big)

# 10,000 new files of 4 KiB in 100 directories: commit against cp -a.
src = os.path.join(TMP, "src")
os.makedirs(src)
subprocess.run(["bash", "-c", "for d in $(seq 1 100); do mkdir n$d; for f in $(seq 1 100); do "
                "head -c 4096 /dev/zero > n$d/f$f; done; done"], cwd=src, check=True)
commits, copies = [], []
for i in range(5):
    w = os.path.join(TMP, f"cw{i}")
    os.makedirs(w)
    out = subprocess.run([BIN, "--transaction", "--json", "--", f"cp -a {src}/. ."], cwd=w,
                         env=env, capture_output=True, text=True, check=True)
    tid = json.loads(out.stdout)["transaction"]["id"]
    commits.append(timed([BIN, "commit", tid], TMP))
    dst = os.path.join(TMP, f"cp{i}")
    copies.append(timed(["cp", "-a", src + "/.", dst], TMP))
    shutil.rmtree(w); shutil.rmtree(dst)
cw, cc = med([c[0] for c in commits]), med([c[0] for c in copies])
rows.append(("commit of 10,000 created files (4 KiB)", 5, cw * 1e3, "ms"))
rows.append(("`cp -a` of the same 10,000 files", 5, cc * 1e3, "ms"))
print(f"commit: {cw / cc:.2f}x cp -a (target <= 1.5x)\n")

print("| Measure | Runs | Median |")
print("|---|---:|---:|")
for name, n, v, unit in rows:
    print(f"| {name} | {n} | {v:.2f} {unit} |")
PY
