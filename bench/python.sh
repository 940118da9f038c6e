#!/usr/bin/env bash
# Benchmark of the Python package: `dsh_exec.run("true")` beside spawning
# `dsh-exec -- true` with Python's subprocess, and `bash -c true` the same
# way, in one run, round robin after a warm-up (time.perf_counter_ns).
# Prints a markdown table, figures only.
#
#   bash bench/python.sh                                   # 200 of each
#   PY_BENCH_RUNS=50 DSH_EXEC_BIN=target/release/dsh-exec bash bench/python.sh
#
# The module is imported from python/ in this tree (it is pure Python; the
# wheel adds only the binary), with DSH_EXEC_BIN naming the binary.
set -euo pipefail

RUNS=${PY_BENCH_RUNS:-200}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
BIN=$(realpath "$BIN")
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-py-bench.XXXXXX")
trap 'rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP

echo "# dsh-exec Python package benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel: $(uname -r), nproc: $(nproc), $(python3 --version)"
echo "- binary: $BIN ($("$BIN" --version 2>&1 | head -n1))"
echo "- runs: $RUNS of each"
echo

cd "$BENCH_TMP"
DSH_EXEC_BIN=$BIN RUNS=$RUNS TMPDIR=$BENCH_TMP XDG_STATE_HOME=$BENCH_TMP \
  PYTHONPATH=$ROOT/python python3 - <<'PY'
import os, statistics, subprocess, time
import dsh_exec

BIN, RUNS = os.environ["DSH_EXEC_BIN"], int(os.environ["RUNS"])
cases = {
    "`dsh_exec.run(\"true\")`": lambda: dsh_exec.run("true"),
    "`subprocess.run([dsh-exec, \"--\", \"true\"])`": lambda: subprocess.run(
        [BIN, "--", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=True),
    "`subprocess.run([\"bash\", \"-c\", \"true\"])`": lambda: subprocess.run(
        ["bash", "-c", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=True),
}
times = {name: [] for name in cases}
for i in range(RUNS + 10):
    for name, call in cases.items():
        t0 = time.perf_counter_ns()
        call()
        if i >= 10:
            times[name].append((time.perf_counter_ns() - t0) / 1e6)
names = list(cases)
base = statistics.median(times[names[1]])
print("| Measure | Runs | Median | p90 | Difference |")
print("|---|---:|---:|---:|---|")
for name in names:
    xs = sorted(times[name])
    med, p90 = statistics.median(xs), xs[int(len(xs) * 0.9)]
    diff = f"{med - base:+.2f} ms vs the dsh-exec spawn" if name == names[0] else ""
    print(f"| {name} | {RUNS} | {med:.2f} ms | {p90:.2f} ms | {diff} |")
PY
