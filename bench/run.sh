#!/usr/bin/env bash
# Benchmark for dsh-exec: startup overhead, 1 GiB throughput with a 1 MiB budget,
# and peak memory. Prints figures only (no pass/fail), as a markdown table.
#
#   bash bench/run.sh                      # N=200 startup runs, 3 big runs
#   BENCH_RUNS=50 BENCH_BIG_RUNS=1 bash bench/run.sh
#   DSH_EXEC_BIN=/path/to/dsh-exec bash bench/run.sh   # skip the build
#
# Timing is done by a small embedded python3 loop (time.perf_counter_ns around
# subprocess.run, stdin/stdout/stderr on /dev/null). The loop's own fork/exec
# cost is in every figure alike, so compare figures with each other, not with
# other tools. Commands are run round-robin (A B C A B C ...) after a warm-up,
# so slow drift of the machine hits every command the same way.
set -euo pipefail

RUNS=${BENCH_RUNS:-200}
BIG_RUNS=${BENCH_BIG_RUNS:-3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything temporary lives under one directory, removed on any exit.
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-bench.XXXXXX")
trap 'rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP

# The release build (LTO) is what users install; DSH_EXEC_BIN skips the build.
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
BIN=$(realpath "$BIN")
[[ -x $BIN ]] || { echo "bench: $BIN is not executable" >&2; exit 1; }

echo "# dsh-exec benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel: $(uname -r), nproc: $(nproc)"
echo "- binary: $BIN ($("$BIN" --version 2>&1 | head -n1))"
echo "- startup runs: $RUNS, 1 GiB runs: $BIG_RUNS"
echo

# bwrap (Debian: bubblewrap) is the sandboxing peer; install it when we can.
if ! command -v bwrap >/dev/null && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing bubblewrap for the sandboxing peer ..." >&2
  { apt-get update -qq && apt-get install -y -qq bubblewrap; } >/dev/null 2>&1 || true
fi
BWRAP=$(command -v bwrap || true)

export BIN RUNS BIG_RUNS BENCH_TMP BWRAP
python3 - <<'PY'
import math, os, shutil, statistics, subprocess, sys, tempfile, time

BIN, TMP, BWRAP = os.environ["BIN"], os.environ["BENCH_TMP"], os.environ["BWRAP"]
RUNS, BIG_RUNS = int(os.environ["RUNS"]), int(os.environ["BIG_RUNS"])
GIB, MIB = 1 << 30, 1 << 20

def run_once(argv):
    """Wall time (ns) of one run. '@DIR@' in argv becomes a fresh directory
    (mktemp -d) that is deleted right after the run, with whatever the command
    left in it (dsh-exec's dsh-exec-XXXXXX spill dir, the peer's spill file)."""
    d = tempfile.mkdtemp(dir=TMP)
    try:
        argv = [a.replace("@DIR@", d) for a in argv]
        t0 = time.perf_counter_ns()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        dt = time.perf_counter_ns() - t0
        if rc != 0:  # a failing command would make its timing meaningless
            sys.exit(f"bench: command failed with exit {rc}: {argv}")
        rss = None
        if os.path.exists(os.path.join(d, "rss")):
            with open(os.path.join(d, "rss")) as f:
                rss = int(f.read().split()[-1])  # /usr/bin/time %M: KiB
        return dt, rss
    finally:
        shutil.rmtree(d, ignore_errors=True)

def bench(cmds, runs, warmup):
    """Round-robin over cmds; returns {label: ([wall ns...], [rss KiB...])}."""
    for _ in range(warmup):
        for _, argv in cmds:
            run_once(argv)
    out = {label: ([], []) for label, _ in cmds}
    for _ in range(runs):
        for label, argv in cmds:
            dt, rss = run_once(argv)
            out[label][0].append(dt)
            if rss is not None:
                out[label][1].append(rss)
    return out

def med(xs): return statistics.median(xs)
def p90(xs): return sorted(xs)[max(0, math.ceil(0.9 * len(xs)) - 1)]  # nearest rank

rows = []  # (measure, runs, median, p90, ratio, target)

# 1. Startup overhead: wall time of a do-nothing command, median and p90 (ms).
#    dsh-exec runs `bash -c true` itself, so "dsh-exec / timeout" is the cost of
#    dsh-exec relative to the usual "run with a deadline" wrapper.
start = [("`bash -c true`", ["bash", "-c", "true"]),
         ("`timeout 10 bash -c true`", ["timeout", "10", "bash", "-c", "true"]),
         ("`dsh-exec -- true`", [BIN, "--", "true"])]
if BWRAP:  # a sandboxing peer (namespaces + bind mounts), for scale
    start.append(("`bwrap --ro-bind / / --dev /dev --proc /proc -- bash -c true`",
                  [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                   "--", "bash", "-c", "true"]))
res = bench(start, RUNS, warmup=min(10, RUNS))
t_base = med(res["`timeout 10 bash -c true`"][0])
for label, _ in start:
    xs = res[label][0]
    ratio, target = "", ""
    if "dsh-exec" in label:
        ratio, target = f"{med(xs) / t_base:.2f}x timeout", "<= 1.2x timeout"
    elif "bwrap" in label:
        ratio = f"{med(xs) / t_base:.2f}x timeout"
    rows.append((f"startup: {label}", RUNS, f"{med(xs) / 1e6:.2f} ms",
                 f"{p90(xs) / 1e6:.2f} ms", ratio, target))

# 2. Throughput: 1 GiB on stdout, 1 MiB tail budget, full stream spilled to a
#    file. The peer does the same job with coreutils: tee the stream to a file,
#    keep the last 1 MiB. Both run under /usr/bin/time -f %M, whose peak RSS is
#    the largest of the process and its descendants (KiB).
time_rss = ["/usr/bin/time", "-f", "%M", "-o", "@DIR@/rss"]
big = [("peer: `head -c 1G /dev/zero \\| tee FILE \\| tail -c 1M`",
        time_rss + ["bash", "-c",
                    f"head -c {GIB} /dev/zero | tee @DIR@/spill | tail -c {MIB}"]),
       ("`dsh-exec --stdout-max-bytes 1MiB -- 'head -c 1G /dev/zero'`",
        time_rss + [BIN, "--timeout", "0", "--stdout-max-bytes", "1MiB",
                    "--spill-dir", "@DIR@", "--", f"head -c {GIB} /dev/zero"])]
res = bench(big, BIG_RUNS, warmup=0)
(peer_label, _), (dsh_label, _) = big
t_peer = med(res[peer_label][0])
for label, _ in big:
    xs = res[label][0]
    mine = label == dsh_label
    rows.append((f"1 GiB stdout: {label}", BIG_RUNS, f"{med(xs) / 1e9:.2f} s",
                 f"{p90(xs) / 1e9:.2f} s",
                 f"{med(xs) / t_peer:.2f}x peer" if mine else "",
                 "<= 1.0x peer" if mine else ""))
# 3. Peak memory during the 1 GiB run (max over runs), MiB.
for label, _ in big:
    mib = max(res[label][1]) / 1024
    mine = label == dsh_label
    rows.append((f"peak RSS: {'dsh-exec' if mine else 'peer pipeline'}", BIG_RUNS,
                 f"{mib:.1f} MiB", "", "", "< 16 MiB" if mine else ""))

print("| Measure | Runs | Median | p90 | Ratio | Target |")
print("|---|---:|---:|---:|---:|---|")
for r in rows:
    print("| " + " | ".join(str(c) for c in r) + " |")
if not BWRAP:
    print("\nbwrap: not installed")
PY
