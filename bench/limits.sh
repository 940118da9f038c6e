#!/usr/bin/env bash
# Benchmark of the resource limits: what a run's own cgroups cost at
# spawn, beside a run without limits and beside the peers doing the same
# job by hand (prlimit(1) for an rlimit; a cgroup made, joined and removed
# by a shell, as cgexec(1) or a wrapper script does; systemd-run --scope
# where systemd runs). Prints a markdown table, figures only.
#
#   bash bench/limits.sh                        # 10 rounds of 20 runs each
#   LIMITS_BENCH_ROUNDS=5 DSH_EXEC_BIN=target/release/dsh-exec bash bench/limits.sh
#
# Each row is measured as wall time per run (time.perf_counter_ns around a
# shell loop of 20 runs) and CPU time per run (user + system of the whole
# loop, getrusage(RUSAGE_CHILDREN)), and as the wall time of isolated runs
# (one at a time, 150 ms apart); rows are run round-robin after a warm-up
# round. A cgroup's removal is partly the kernel's work after
# rmdir(2) returns (memory cgroups go offline in a worker), which neither
# figure sees. Needs root (cgroups); without it the cgroup rows say why.
set -euo pipefail

ROUNDS=${LIMITS_BENCH_ROUNDS:-10}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
fi
BIN=$(realpath "$BIN")
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-limits-bench.XXXXXX")
trap 'rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP

echo "# dsh-exec limits benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel: $(uname -r), nproc: $(nproc)"
echo "- binary: $BIN ($("$BIN" --version 2>&1 | head -n1))"
echo "- rounds: $ROUNDS of 20 runs per row"
echo

BIN=$BIN ROUNDS=$ROUNDS TMP=$BENCH_TMP python3 - <<'PY'
import json, os, resource, statistics, subprocess, time

BIN, ROUNDS, TMP = os.environ["BIN"], int(os.environ["ROUNDS"]), os.environ["TMP"]
BATCH = 20
env = dict(os.environ, TMPDIR=TMP)

def mechanism(flag, value, limit):
    out = subprocess.run([BIN, "explain", "--json", flag, value, "--", "true"],
                         capture_output=True, text=True, env=env)
    m = json.loads(out.stdout)["limit_mechanisms"][limit]
    return m["mechanism"], m["detail"]

rows = [("`dsh-exec -- true` (no limit: the containment cgroup only, a v2 cgroup without controllers)", [BIN, "--", "true"])]
for flag, value, limit in [("--cpu-max", "1h", "cpu"), ("--pids-max", "4096", "pids"),
                           ("--memory-max", "4GiB", "memory")]:
    name, detail = mechanism(flag, value, limit)
    if name == "none":
        print(f"- `{flag}`: not measured: {detail}")
        continue
    rows.append((f"`dsh-exec {flag} {value} -- true` ({name})", [BIN, flag, value, "--", "true"]))
all_three = [BIN, "--memory-max", "4GiB", "--pids-max", "4096", "--cpu-max", "1h", "--", "true"]
if len(rows) == 4:
    rows.append(("`dsh-exec --memory-max 4GiB --pids-max 4096 --cpu-max 1h -- true`", all_three))
rows.append(("`bash -c true`", ["bash", "-c", "true"]))
rows.append(("`prlimit --cpu=3600 bash -c true` (rlimit peer)", ["prlimit", "--cpu=3600", "bash", "-c", "true"]))

# The hand-made peer: a memory cgroup made beside this process's own, a
# shell that joins it and execs bash, then rmdir (what cgexec does).
own = None
for line in open("/proc/self/cgroup"):
    _, ctrls, path = line.rstrip("\n").split(":", 2)
    if "memory" in ctrls.split(","):
        own = "/sys/fs/cgroup/memory" + path
    elif ctrls == "" and own is None and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        own = "/sys/fs/cgroup" + os.path.dirname(path)
if own and os.access(own, os.W_OK):
    limit = "memory.limit_in_bytes" if "/memory" in own else "memory.max"
    script = (f'd={own}/limits-bench-$$; mkdir "$d" && echo 4294967296 > "$d/{limit}" && '
              f'sh -c "echo 0 > $d/cgroup.procs && exec bash -c true"; rmdir "$d"')
    rows.append(("hand-made memory cgroup: mkdir, join, `bash -c true`, rmdir", ["sh", "-c", script]))
else:
    print("- hand-made cgroup peer: not measured: no writable memory cgroup")
if os.path.isdir("/run/systemd/system"):
    rows.append(("`systemd-run --scope -q -p MemoryMax=4G bash -c true`",
                 ["systemd-run", "--scope", "-q", "-p", "MemoryMax=4G", "bash", "-c", "true"]))
else:
    print("- `systemd-run --scope`: not measured: systemd is not running here")
print()

def batched(argv):
    return ["bash", "-c", f'for i in $(seq {BATCH}); do "$@" >/dev/null 2>&1 || exit 1; done', "batch"] + argv

wall = {label: [] for label, _ in rows}
cpu = {label: [] for label, _ in rows}
for r in range(ROUNDS + 1):
    for label, argv in rows:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter_ns()
        subprocess.run(batched(argv), stdin=subprocess.DEVNULL, check=True, env=env)
        t1 = time.perf_counter_ns()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r == 0:
            continue  # warm-up
        wall[label].append((t1 - t0) / BATCH / 1e6)
        cpu[label].append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e3 / BATCH)

# Isolated runs: one at a time, 150 ms apart, as an agent's or a CI
# step's runs come. Moving a process into a cgroup after its start (a
# write to cgroup.procs, which v1 hierarchies need) waits for an RCU grace
# period when no other migration happened just before; back-to-back runs
# share one, isolated runs each pay it. clone3(CLONE_INTO_CGROUP), which
# dsh-exec uses for a v2 cgroup, takes no such wait.
alone = {label: [] for label, _ in rows}
for r in range(ROUNDS * 2 + 1):
    for label, argv in rows:
        time.sleep(0.15)
        t0 = time.perf_counter_ns()
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env)
        if r:
            alone[label].append((time.perf_counter_ns() - t0) / 1e6)

base = rows[0][0]
mw, mc, ma = (statistics.median(x[base]) for x in (wall, cpu, alone))
print("| Run | Wall, back to back | CPU, back to back | Wall, isolated | Added to no limit (back to back wall / CPU; isolated wall) | Target |")
print("|---|---:|---:|---:|---:|---|")
for label, _ in rows:
    w, c, a = (statistics.median(x[label]) for x in (wall, cpu, alone))
    added, target = "", ""
    if label.startswith("`dsh-exec") and label != base:
        added = f"{w - mw:+.2f} / {c - mc:+.2f}; {a - ma:+.2f} ms"
        target = "<= +0.5 ms"
    print(f"| {label} | {w:.2f} ms | {c:.2f} ms | {a:.2f} ms | {added} | {target} |")
PY
