#!/usr/bin/env bash
# Benchmark for dsh-exec: startup overhead, 1 GiB throughput with a 1 MiB budget,
# and peak memory. Prints figures only (no pass/fail), as a markdown table.
#
#   bash bench/run.sh                      # 200 startup runs, 5 runs of 1 GiB
#   BENCH_RUNS=50 BENCH_BIG_RUNS=1 bash bench/run.sh
#   BENCH_KILL_RUNS=20 BENCH_ESCAPE_RUNS=3 bash bench/run.sh   # (the defaults)
#   DSH_EXEC_BIN=/path/to/dsh-exec bash bench/run.sh   # skip the build
#   DSH_EXEC_STATIC_BIN=/path/to/static/dsh-exec ...    # and the static one
#   DSH_EXEC_BASELINE_BIN=/path/to/older/dsh-exec ...   # measured beside it, same run
#   BENCH_CURVE_MIB=1,64,1024,4096 bash bench/run.sh   # the peak-RSS curve's sizes (the default)
#   BENCH_WITH_SCRIPTS=0 bash bench/run.sh    # without bench/limits.sh and bench/network.sh
#
# Timing is done by a small embedded python3 loop (time.perf_counter_ns around
# subprocess.run, stdin/stdout/stderr on /dev/null). The loop's own fork/exec
# cost is in every figure alike, so compare figures with each other, not with
# other tools. Commands are run round-robin (A B C A B C ...) after a warm-up,
# so slow drift of the machine hits every command the same way.
# The kill-latency and escape runs end on a deadline (exit 124); the escape runs
# start processes that try to outlive it, count those still alive 200 ms after
# the run, then SIGKILL them, so nothing is left behind.
set -euo pipefail

RUNS=${BENCH_RUNS:-200}
BIG_RUNS=${BENCH_BIG_RUNS:-5}
KILL_RUNS=${BENCH_KILL_RUNS:-20}
ESCAPE_RUNS=${BENCH_ESCAPE_RUNS:-3}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything temporary lives under one directory, removed on any exit.
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dsh-bench.XXXXXX")
# The gate-cost workload runs on a tmpfs when we may mount one (root), so
# that the disk's writeback does not drown the figure.
GATE_FS=$BENCH_TMP/gatefs
mkdir -p "$GATE_FS"
if [[ $EUID -eq 0 ]] && mount -t tmpfs -o size=1G tmpfs "$GATE_FS" 2>/dev/null; then
  GATE_FS_KIND=tmpfs
else
  GATE_FS_KIND=disk
fi
trap 'mountpoint -q "$GATE_FS" && umount "$GATE_FS"; rm -rf -- "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM HUP
# Every command runs with an empty temp dir: a confined run searches
# the temp dir's subdirectories for repositories to protect, so a shared
# /tmp would make the figures depend on what else the machine keeps there.
mkdir "$BENCH_TMP/tmp"
export TMPDIR=$BENCH_TMP/tmp

# The release build (LTO) is what users install; DSH_EXEC_BIN skips the build.
# On x86_64 glibc the static-pie build is measured too (README, Install): it
# skips the dynamic linker, most of the startup cost left.
STATIC_TRIPLE=x86_64-unknown-linux-gnu
if [[ -n ${DSH_EXEC_BIN:-} ]]; then
  BIN=$DSH_EXEC_BIN
  STATIC_BIN=${DSH_EXEC_STATIC_BIN:-}
else
  echo "building dsh-exec (cargo build --release) ..." >&2
  (cd "$ROOT" && cargo build --release --quiet)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/dsh-exec
  STATIC_BIN=
  if [[ $(uname -m) == x86_64 ]] && ldd --version 2>&1 | grep -i glibc >/dev/null; then
    echo "building the static dsh-exec (crt-static, --target $STATIC_TRIPLE) ..." >&2
    (cd "$ROOT" && RUSTFLAGS="-C target-feature=+crt-static" \
      cargo build --release --quiet --target "$STATIC_TRIPLE")
    STATIC_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/$STATIC_TRIPLE/release/dsh-exec
  fi
fi
BIN=$(realpath "$BIN")
[[ -x $BIN ]] || { echo "bench: $BIN is not executable" >&2; exit 1; }
[[ -z $STATIC_BIN ]] || STATIC_BIN=$(realpath "$STATIC_BIN")
# Every dsh-exec binary is measured as a copy made the same way (cp), as
# an installed binary is: a file the linker has just written sits in the
# page cache in small folios, and mapping it costs about 6% more start-up
# (next_uptodate_folio in perf) than a copy of the same bytes.
mkdir "$BENCH_TMP/bin"
copy_bin() { cp "$1" "$BENCH_TMP/bin/$2" && echo "$BENCH_TMP/bin/$2"; }
# A baseline build (an earlier commit's release binary) measured in the
# same run: startup, confined startup and capture, each with its own ratio
# to the same peers, so a change's cost is read beside its peer's.
BASE_BIN=${DSH_EXEC_BASELINE_BIN:-}
[[ -z $BASE_BIN ]] || BASE_BIN=$(realpath "$BASE_BIN")
BIN_SHOWN=$BIN
BIN=$(copy_bin "$BIN" dsh-exec)
[[ -z $STATIC_BIN ]] || STATIC_BIN=$(copy_bin "$STATIC_BIN" dsh-exec-static)
[[ -z $BASE_BIN ]] || BASE_BIN=$(copy_bin "$BASE_BIN" dsh-exec-baseline)

echo "# dsh-exec benchmark"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "- kernel: $(uname -r), nproc: $(nproc)"
echo "- binary: $BIN_SHOWN ($("$BIN" --version 2>&1 | head -n1)), measured as a copy"
[[ -z $STATIC_BIN ]] || echo "- static binary: $STATIC_BIN"
[[ -z $BASE_BIN ]] || echo "- baseline binary: $BASE_BIN ($("$BASE_BIN" --version 2>&1 | head -n1))"
echo "- startup runs: $RUNS, 1 GiB runs: $BIG_RUNS, kill runs: $KILL_RUNS, escape runs: $ESCAPE_RUNS"

# bwrap (Debian: bubblewrap) is the sandboxing peer; install it when we can.
if ! command -v bwrap >/dev/null && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing bubblewrap for the sandboxing peer ..." >&2
  { apt-get update -qq && apt-get install -y -qq bubblewrap; } >/dev/null 2>&1 || true
fi
BWRAP=$(command -v bwrap || true)

# The agents' sandboxes are peers too: `codex sandbox` (npm @openai/codex)
# and `srt` (npm @anthropic-ai/sandbox-runtime, which needs ripgrep and
# socat). Missing ones are installed from their registries into
# target/bench-peers (BENCH_PEERS_DIR), never globally; a peer that cannot
# be installed or does not run is reported as "peer unavailable".
PEERS_DIR=${BENCH_PEERS_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/bench-peers}
CODEX=$(command -v codex || true)
SRT=$(command -v srt || true)
if { [[ -z $CODEX ]] || [[ -z $SRT ]]; } && command -v npm >/dev/null; then
  if [[ ! -x $PEERS_DIR/node_modules/.bin/codex || ! -x $PEERS_DIR/node_modules/.bin/srt ]]; then
    echo "installing codex and srt for the agent-sandbox peers ..." >&2
    mkdir -p "$PEERS_DIR"
    npm install --prefix "$PEERS_DIR" --no-audit --no-fund --silent \
      @openai/codex @anthropic-ai/sandbox-runtime >/dev/null 2>&1 || true
  fi
  [[ -n $CODEX ]] || { [[ -x $PEERS_DIR/node_modules/.bin/codex ]] && CODEX=$PEERS_DIR/node_modules/.bin/codex; } || true
  [[ -n $SRT ]] || { [[ -x $PEERS_DIR/node_modules/.bin/srt ]] && SRT=$PEERS_DIR/node_modules/.bin/srt; } || true
fi
if [[ -n $SRT ]] && ! { command -v rg && command -v socat; } >/dev/null \
  && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "installing ripgrep and socat for srt ..." >&2
  { apt-get update -qq && apt-get install -y -qq ripgrep socat; } >/dev/null 2>&1 || true
fi
# codex makes helper links in CODEX_HOME and refuses a temporary one.
CODEX_HOME_DIR=$PEERS_DIR/codex-home
mkdir -p "$CODEX_HOME_DIR" 2>/dev/null || true
# srt: writes allowed in the workspace only, no network (its defaults
# otherwise), the same job as the other confined rows.
cat > "$BENCH_TMP/srt-settings.json" <<JSON
{"filesystem": {"denyRead": [], "allowWrite": ["$BENCH_TMP/tmp"], "denyWrite": []},
 "network": {"allowedDomains": [], "deniedDomains": []}}
JSON
peer_check() {  # peer_check NAME CMD...: prints why the peer is unavailable, or nothing
  local name=$1; shift
  local out
  if ! out=$(cd "$BENCH_TMP/tmp" && timeout 30 "$@" 2>&1 </dev/null); then
    echo "$name: peer unavailable ($(printf '%s' "$out" | tail -n1 | cut -c1-120))"
  fi
}
UNAVAILABLE=""
if [[ -n $CODEX ]]; then
  why=$(CODEX_HOME=$CODEX_HOME_DIR peer_check codex "$CODEX" sandbox -c 'sandbox_mode="workspace-write"' -- bash -c true)
  [[ -z $why ]] || { UNAVAILABLE+="$why"$'\n'; CODEX=""; }
else
  UNAVAILABLE+="codex: peer unavailable (not installed; npm install @openai/codex failed or npm missing)"$'\n'
fi
if [[ -n $SRT ]]; then
  why=$(peer_check srt "$SRT" -s "$BENCH_TMP/srt-settings.json" -c true)
  [[ -z $why ]] || { UNAVAILABLE+="$why"$'\n'; SRT=""; }
else
  UNAVAILABLE+="srt: peer unavailable (not installed; npm install @anthropic-ai/sandbox-runtime failed or npm missing)"$'\n'
fi
[[ -z $BWRAP ]] && UNAVAILABLE+="bwrap: peer unavailable (not installed)"$'\n'
export CODEX SRT CODEX_HOME_DIR UNAVAILABLE
peers="timeout ($(timeout --version 2>/dev/null | head -n1))"
[[ -z $BWRAP ]] || peers+=", bwrap ($("$BWRAP" --version 2>/dev/null | head -n1))"
[[ -z $CODEX ]] || peers+=", codex ($(CODEX_HOME=$CODEX_HOME_DIR "$CODEX" --version 2>/dev/null | head -n1))"
[[ -z $SRT ]] || peers+=", srt ($("$SRT" --version 2>/dev/null | head -n1))"
echo "- peers: $peers"
echo

GATE_RUNS=${BENCH_GATE_RUNS:-3}
export BIN STATIC_BIN BASE_BIN RUNS BIG_RUNS KILL_RUNS ESCAPE_RUNS BENCH_TMP BWRAP GATE_FS GATE_FS_KIND GATE_RUNS
python3 - <<'PY'
import math, os, resource, shutil, signal, statistics, subprocess, sys, tempfile, time

BIN, TMP, BWRAP = os.environ["BIN"], os.environ["BENCH_TMP"], os.environ["BWRAP"]
STATIC_BIN = os.environ["STATIC_BIN"]
BASE_BIN = os.environ["BASE_BIN"]
RUNS, BIG_RUNS = int(os.environ["RUNS"]), int(os.environ["BIG_RUNS"])
KILL_RUNS, ESCAPE_RUNS = int(os.environ["KILL_RUNS"]), int(os.environ["ESCAPE_RUNS"])
GIB, MIB = 1 << 30, 1 << 20

def alive(pid):
    """True when pid exists and is not a zombie (state Z or X in /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False

def reap(d):
    """Counts the pids listed in d/pids that are still alive, and SIGKILLs them."""
    try:
        with open(os.path.join(d, "pids")) as f:
            pids = [int(x) for x in f.read().split()]
    except OSError:
        return 0
    survivors = [p for p in pids if alive(p)]
    for p in survivors:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return len(survivors)

def run_once(argv, ok=(0,), pids=False):
    """Wall time (ns) of one run. '@DIR@' in argv becomes a fresh directory
    (mktemp -d) that is deleted right after the run, with whatever the command
    left in it (dsh-exec's dsh-exec-XXXXXX spill dir, the peer's spill file).
    ok: the accepted exit statuses (death by signal S counts as 128+S, as in sh).
    pids: the command lists pids in @DIR@/pids; 200 ms after the run, count
    those still alive (the third value returned), then SIGKILL them."""
    d = tempfile.mkdtemp(dir=TMP)
    try:
        argv = [a.replace("@DIR@", d) for a in argv]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter_ns()
        try:
            rc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=120).returncode
        except subprocess.TimeoutExpired:
            sys.exit(f"bench: command still running after 120 s: {argv}")
        dt = time.perf_counter_ns() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = int(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e9)
        rc = 128 - rc if rc < 0 else rc
        if rc not in ok:  # a failing command would make its timing meaningless
            sys.exit(f"bench: command exited {rc} (expected {ok}): {argv}")
        rss = None
        if os.path.exists(os.path.join(d, "rss")):
            with open(os.path.join(d, "rss")) as f:
                rss = int(f.read().split()[-1])  # /usr/bin/time %M: KiB
        survivors = None
        if pids:
            time.sleep(0.2)
            survivors = reap(d)
        return dt, rss, survivors, cpu
    finally:
        if pids:
            reap(d)  # on any early exit too: nothing outlives the benchmark
        shutil.rmtree(d, ignore_errors=True)

def bench(cmds, runs, warmup, pids=False):
    """Round-robin over cmds, each (label, argv[, accepted exit statuses]);
    returns {label: ([wall ns...], [rss KiB...], [survivors...], [cpu ns...])}."""
    cmds = [(label, argv, ok[0] if ok else (0,)) for label, argv, *ok in cmds]
    for _ in range(warmup):
        for _, argv, ok in cmds:
            run_once(argv, ok, pids)
    out = {label: ([], [], [], []) for label, _, _ in cmds}
    for i in range(runs):
        # Each round starts one command later, so that no command always
        # runs right after the same one (a 1 GiB file write leaves the
        # next run to share the machine with its writeback).
        for label, argv, ok in cmds[i % len(cmds):] + cmds[:i % len(cmds)]:
            dt, rss, surv, cpu = run_once(argv, ok, pids)
            out[label][0].append(dt)
            out[label][3].append(cpu)
            if rss is not None:
                out[label][1].append(rss)
            if surv is not None:
                out[label][2].append(surv)
    return out

def med(xs): return statistics.median(xs)
def p90(xs): return sorted(xs)[max(0, math.ceil(0.9 * len(xs)) - 1)]  # nearest rank

rows = []  # (measure, runs, median, p90, ratio, target)

# 1. Startup overhead: wall time of a do-nothing command, median and p90 (ms).
#    dsh-exec runs `bash -c true` itself, so "dsh-exec / timeout" is the cost of
#    dsh-exec relative to the usual "run with a deadline" wrapper.
UNSANDBOXED = "`dsh-exec -- true`"
STATIC = "`dsh-exec -- true` (static-pie build)"
STATIC_SANDBOXED = "`dsh-exec --sandbox workspace-write -- true` (static-pie build)"
SANDBOXED = "`dsh-exec --sandbox workspace-write -- true`"
NO_DENY = "`dsh-exec --sandbox workspace-write --allow-read / -- true` (no read deny list)"
BWRAP_WS = "`bwrap --ro-bind / / --dev /dev --bind WS WS -- bash -c true`"
BASE_UNSANDBOXED = "baseline: `dsh-exec -- true`"
BASE_SANDBOXED = "baseline: `dsh-exec --sandbox workspace-write -- true`"
start = [("`bash -c true`", ["bash", "-c", "true"]),
         ("`timeout 10 bash -c true`", ["timeout", "10", "bash", "-c", "true"]),
         (UNSANDBOXED, [BIN, "--", "true"]),
         *([(STATIC, [STATIC_BIN, "--", "true"])] if STATIC_BIN else []),
         # The sandboxed run: Landlock ruleset, no-new-privs, capabilities
         # dropped; the workspace is a fresh directory (@DIR@).
         (SANDBOXED, [BIN, "--sandbox", "workspace-write", "-C", "@DIR@", "--", "true"]),
         *([(STATIC_SANDBOXED, [STATIC_BIN, "--sandbox", "workspace-write", "-C", "@DIR@", "--", "true"])]
           if STATIC_BIN else []),
         # The same with the read deny list lifted: its cost is the split
         # of the Landlock grants along the way to each denied entry.
         (NO_DENY, [BIN, "--sandbox", "workspace-write", "--allow-read", "/", "-C", "@DIR@", "--", "true"])]
# A confined run walks its writable roots, the temp dir among them, for
# git directories to snapshot (docs/sandbox.md): with a temp dir as full
# as a developer's (here: 2,000 directories, 16,000 files, two
# repositories), that walk is most of the run's cost.
FULL_TMP = os.path.join(TMP, "fulltmp")
for d in range(2000):
    sub = os.path.join(FULL_TMP, f"t{d // 100}", f"d{d}")
    os.makedirs(sub, exist_ok=True)
    for f in range(8):
        open(os.path.join(sub, f"f{f}"), "w").close()
for r in ("repo1", "repo2"):
    subprocess.run(["git", "init", "-q", os.path.join(FULL_TMP, r)], check=True)
FULL_TMP_LABEL = "`dsh-exec --sandbox workspace-write -- true`, temp dir of 2,000 dirs and 16,000 files"
start.append((FULL_TMP_LABEL, [BIN, "--sandbox", "workspace-write", "-C", "@DIR@", "--", "true"]))
ENV_FOR = {FULL_TMP_LABEL: {**os.environ, "TMPDIR": FULL_TMP}}
if BASE_BIN:
    start += [(BASE_UNSANDBOXED, [BASE_BIN, "--", "true"]),
              (BASE_SANDBOXED, [BASE_BIN, "--sandbox", "workspace-write", "-C", "@DIR@", "--", "true"])]
if BWRAP:  # the sandboxing peer (namespaces + bind mounts), same job
    start.append((BWRAP_WS, [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev",
                             "--bind", "@DIR@", "@DIR@", "--", "bash", "-c", "true"]))
# Wall time of one short process, timed from here, comes out quantized on
# this virtual machine (clusters near 3.5, 5.7 and 7.6 ms whatever the
# command: wake-ups wait for a tick), so startup is measured as CPU time
# (user + system of the command and everything it started, from
# getrusage(RUSAGE_CHILDREN)), which is not. Each sample is a batch of
# BATCH runs in a shell loop, divided by BATCH.
BATCH = 20
# The confined rows' workspace: an empty directory of its own (the rest
# of the benchmark's directory, the full temp dir among it, is not walked).
START_WS = os.path.join(TMP, "ws")
os.makedirs(START_WS, exist_ok=True)
def batched(argv):
    return ["bash", "-c", f'for i in $(seq {BATCH}); do "$@" >/dev/null; done', "batch"] + argv
def cpu_bench(cmds, batches):
    out = {label: ([], [], []) for label, _ in cmds}
    for _ in range(batches + 1):  # the first round warms up
        for label, argv in cmds:
            argv = [a.replace("@DIR@", START_WS) for a in argv]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(batched(argv), stdin=subprocess.DEVNULL, check=True,
                           env=ENV_FOR.get(label))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            out[label][0].append(cpu * 1e9 / BATCH)
    return {k: (v[0][1:], v[1], v[2]) for k, v in out.items()}
res = cpu_bench(start, max(1, RUNS // BATCH))
# The agents' sandboxes take 0.1 to 0.3 s a run: a quarter of the batches,
# measured right after, beside the confined run once more.
CODEX_WS = "`codex sandbox -c sandbox_mode=\"workspace-write\" -- bash -c true`"
SRT_WS = "`srt -s SETTINGS -c true` (writes: the workspace only)"
agents = []
if os.environ["CODEX"]:
    agents.append((CODEX_WS, ["env", f"CODEX_HOME={os.environ['CODEX_HOME_DIR']}", os.environ["CODEX"],
                              "sandbox", "-c", 'sandbox_mode="workspace-write"',
                              "--", "bash", "-c", "true"]))
if os.environ["SRT"]:
    agents.append((SRT_WS, [os.environ["SRT"], "-s", os.path.join(TMP, "srt-settings.json"),
                            "-c", "true"]))
agent_batches = max(1, RUNS // BATCH // 4)
if agents:
    SANDBOXED_AGAIN = SANDBOXED + " (beside the agents' sandboxes)"
    ares = cpu_bench([(SANDBOXED_AGAIN, start[[l for l, _ in start].index(SANDBOXED)][1]), *agents],
                     agent_batches)
t_base = med(res["`timeout 10 bash -c true`"][0])
for label, _ in start:
    xs = res[label][0]
    ratio, target = "", ""
    if label in (UNSANDBOXED, STATIC, BASE_UNSANDBOXED):
        ratio, target = f"{med(xs) / t_base:.2f}x timeout", "<= 1.0x timeout"
    elif label in (SANDBOXED, BASE_SANDBOXED, STATIC_SANDBOXED):
        plain = {SANDBOXED: UNSANDBOXED, BASE_SANDBOXED: BASE_UNSANDBOXED,
                 STATIC_SANDBOXED: STATIC}[label]
        ratio = f"{med(xs) / med(res[plain][0]):.2f}x unsandboxed"
        target = "<= 1.5x unsandboxed"
        if BWRAP:
            ratio += f", {med(xs) / med(res[BWRAP_WS][0]):.2f}x bwrap"
            target += ", <= 0.8x bwrap"
    elif label == FULL_TMP_LABEL:
        ratio = f"{(med(xs) - med(res[SANDBOXED][0])) / 1e6:+.2f} ms over an empty temp dir"
        if BWRAP:
            ratio += f", {med(xs) / med(res[BWRAP_WS][0]):.2f}x bwrap"
    elif label == BWRAP_WS:
        ratio = f"{med(xs) / t_base:.2f}x timeout"
    elif label == NO_DENY:
        ratio = f"deny list: {(med(res[SANDBOXED][0]) - med(xs)) / 1e6:+.2f} ms"
        target = "deny list <= +0.3 ms"
    rows.append((f"startup CPU: {label}", f"{RUNS // BATCH}x{BATCH}", f"{med(xs) / 1e6:.2f} ms",
                 f"{p90(xs) / 1e6:.2f} ms", ratio, target))
if agents:
    mine = med(ares[SANDBOXED_AGAIN][0])
    for label, _ in [(SANDBOXED_AGAIN, None), *agents]:
        xs = ares[label][0]
        ratio = "" if label == SANDBOXED_AGAIN else f"dsh-exec confined: {mine / med(xs):.3f}x"
        rows.append((f"startup CPU: {label}", f"{agent_batches}x{BATCH}", f"{med(xs) / 1e6:.2f} ms",
                     f"{p90(xs) / 1e6:.2f} ms", ratio, ""))

# 2. Throughput: 1 GiB on stdout, 1 MiB tail budget, full stream spilled to a
#    file. Two baselines do the same writing: the producer straight into a
#    file (`> FILE`: one process, no pipe), and coreutils keeping the tail
#    (`tee FILE | tail -c 1M`). All run under /usr/bin/time -f %M, whose peak
#    RSS is the largest of the process and its descendants (KiB); CPU is
#    user + system of the whole tree (getrusage(RUSAGE_CHILDREN)). Each run's
#    files are removed right after it (@DIR@).
time_rss = ["/usr/bin/time", "-f", "%M", "-o", "@DIR@/rss"]
FILE_LABEL = "`head -c 1G /dev/zero > FILE`"
TEE_LABEL = "`head -c 1G /dev/zero \\| tee FILE \\| tail -c 1M`"
DSH_LABEL = "`dsh-exec --stdout-max-bytes 1MiB -- 'head -c 1G /dev/zero'`"
FILES_LABEL = "`dsh-exec --output-files --stdout-max-bytes 1MiB -- 'head -c 1G /dev/zero'`"
big = [(FILE_LABEL, time_rss + ["bash", "-c", f"head -c {GIB} /dev/zero > @DIR@/spill"]),
       (TEE_LABEL, time_rss + ["bash", "-c",
                               f"head -c {GIB} /dev/zero | tee @DIR@/spill | tail -c {MIB}"]),
       (DSH_LABEL, time_rss + [BIN, "--timeout", "0", "--stdout-max-bytes", "1MiB",
                               "--spill-dir", "@DIR@", "--", f"head -c {GIB} /dev/zero"]),
       (FILES_LABEL, time_rss + [BIN, "--timeout", "0", "--output-files", "--stdout-max-bytes",
                                 "1MiB", "--spill-dir", "@DIR@", "--", f"head -c {GIB} /dev/zero"])]
BASE_DSH_LABEL = "baseline: " + DSH_LABEL
if BASE_BIN:
    big.append((BASE_DSH_LABEL, time_rss + [BASE_BIN, "--timeout", "0", "--stdout-max-bytes", "1MiB",
                                            "--spill-dir", "@DIR@", "--", f"head -c {GIB} /dev/zero"]))
res = bench(big, BIG_RUNS, warmup=0)
t_file, c_file = med(res[FILE_LABEL][0]), med(res[FILE_LABEL][3])
t_tee = med(res[TEE_LABEL][0])
for label, _ in big:
    xs, cpus = res[label][0], res[label][3]
    ratio, target = "", ""
    if label in (DSH_LABEL, FILES_LABEL, BASE_DSH_LABEL):
        ratio = f"{med(xs) / t_file:.2f}x > FILE, {med(xs) / t_tee:.2f}x tee"
        target = "<= 1.0x > FILE"
    rows.append((f"1 GiB stdout, wall: {label}", BIG_RUNS, f"{med(xs) / 1e9:.2f} s",
                 f"{p90(xs) / 1e9:.2f} s", ratio, target))
    ratio, target = "", ""
    if label in (DSH_LABEL, FILES_LABEL, BASE_DSH_LABEL):
        ratio, target = f"{med(cpus) / c_file:.2f}x > FILE", "<= 1.05x > FILE"
    rows.append((f"1 GiB stdout, CPU: {label}", BIG_RUNS, f"{med(cpus) / 1e9:.2f} s",
                 f"{p90(cpus) / 1e9:.2f} s", ratio, target))
# 3. Peak memory during the 1 GiB run (max over runs), MiB.
for label, _ in big:
    mib = max(res[label][1]) / 1024
    mine = label in (DSH_LABEL, FILES_LABEL, BASE_DSH_LABEL)
    rows.append((f"peak RSS: {label}", BIG_RUNS,
                 f"{mib:.1f} MiB", "", "", "<= 8 MiB" if mine else ""))
# 3b. Peak memory as the output grows through the same 1 MiB budget: flat.
CURVE = [int(x) for x in os.environ.get("BENCH_CURVE_MIB", "1,64,1024,4096").split(",") if x]
for mib_out in CURVE:
    label = f"peak RSS, {mib_out} MiB through a 1 MiB budget: `dsh-exec`"
    argv = time_rss + [BIN, "--timeout", "0", "--stdout-max-bytes", "1MiB", "--spill-dir", "@DIR@",
                       "--", f"head -c {mib_out}M /dev/zero"]
    got = bench([(label, argv)], 1, warmup=0)[label]
    rows.append((label, 1, f"{got[1][0] / 1024:.1f} MiB", "", "", "<= 8 MiB"))
# 3c. The same curve as the heap's peak, counted by valgrind's massif
#     (instrumented, so exact and the same from run to run; peak RSS moves
#     by up to 1 MiB between runs of the same binary: the pages of the
#     binary and libraries mapped in by fault-around).
if shutil.which("valgrind"):
    for mib_out in CURVE:
        label = f"peak heap (massif), {mib_out} MiB through a 1 MiB budget: `dsh-exec`"
        d = tempfile.mkdtemp(dir=TMP)
        try:
            out = os.path.join(d, "massif.out")
            subprocess.run(["valgrind", "--tool=massif", f"--massif-out-file={out}", BIN,
                            "--timeout", "0", "--stdout-max-bytes", "1MiB", "--spill-dir", d,
                            "--", f"head -c {mib_out}M /dev/zero"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            with open(out) as f:
                peak = max(int(l.split("=")[1]) for l in f if l.startswith("mem_heap_B="))
        finally:
            shutil.rmtree(d, ignore_errors=True)
        # massif sees the heap by replacing malloc in the dynamic linker's
        # libraries: of a statically linked binary it sees nothing.
        figure = f"{peak / MIB:.2f} MiB" if peak else "n/a (a static binary: massif cannot see its heap)"
        rows.append((label, 1, figure, "", "", "flat"))

# 4. Kill latency: a command that outlives a 200 ms deadline; both exit 124.
#    The difference of medians is dsh-exec's cost of killing over timeout's.
kill = [("`timeout 0.2 sleep 100`", ["timeout", "0.2", "sleep", "100"], (124,)),
        ("`dsh-exec --timeout 200ms -- 'sleep 100'`",
         [BIN, "--timeout", "200ms", "--", "sleep 100"], (124,))]
res = bench(kill, KILL_RUNS, warmup=min(2, KILL_RUNS))
t_peer = med(res[kill[0][0]][0])
for label, _, _ in kill:
    xs = res[label][0]
    mine = label == kill[1][0]
    rows.append((f"kill latency: {label}", KILL_RUNS, f"{med(xs) / 1e6:.1f} ms",
                 f"{p90(xs) / 1e6:.1f} ms",
                 f"{round((med(xs) - t_peer) / 1e6, 1) + 0.0:+.1f} ms vs timeout" if mine else "",
                 "within 20 ms of timeout" if mine else ""))

# 5. The gate's cost: a metadata-heavy workload (tar -xpf of 20,000 small
#    files: a chown, a chmod and a utime each; then git add -A and commit)
#    confined against unconfined, and the round trip of one gated chmod.
GATE_FS, GATE_RUNS = os.environ["GATE_FS"], int(os.environ["GATE_RUNS"])
src = os.path.join(GATE_FS, "src")
for d in range(100):
    os.makedirs(os.path.join(src, f"d{d}"))
    for f in range(200):
        with open(os.path.join(src, f"d{d}", f"f{f}.txt"), "w") as fh:
            fh.write(f"{d} {f}\n")
subprocess.run(["tar", "-cf", os.path.join(GATE_FS, "files.tar"), "-C", GATE_FS, "src"], check=True)
shutil.rmtree(src)
# Each run extracts into a fresh directory, removed (from outside) after it:
# a confined run cannot remove a repository an earlier run left, since its
# .git/config and hooks are protected.
work = ("cd \"$(mktemp -d -p .)\" && tar -xpf ../files.tar && git init -q && git add -A "
        "&& git -c user.name=b -c user.email=b@b commit -qm x")
kind = os.environ["GATE_FS_KIND"]
gate = [(f"unconfined ({kind})", []), (f"`--sandbox workspace-write` ({kind})", ["-s", "workspace-write"])]
times = {label: [] for label, _ in gate}
for i in range(GATE_RUNS + 1):  # the first round warms up
    for label, extra in gate:
        t0 = time.perf_counter_ns()
        subprocess.run([BIN, "--timeout", "0", *extra, "-C", GATE_FS, "--", work],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        dt = time.perf_counter_ns() - t0
        if i:
            times[label].append(dt)
        for e in os.listdir(GATE_FS):
            if e != "files.tar":
                shutil.rmtree(os.path.join(GATE_FS, e), ignore_errors=True)
t_free = med(times[gate[0][0]])
for label, _ in gate:
    xs = times[label]
    mine = "sandbox" in label
    rows.append((f"tar -xpf 20,000 files + git commit: {label}", GATE_RUNS, f"{med(xs) / 1e9:.2f} s",
                 f"{p90(xs) / 1e9:.2f} s", f"{med(xs) / t_free:.2f}x unconfined" if mine else "",
                 "<= 1.05x unconfined" if mine else ""))
loop = ("python3 -c 'import os, time\nopen(\"f\", \"w\").close()\nt = time.perf_counter()\n"
        "for i in range(20000): os.chmod(\"f\", 0o644)\n"
        "print((time.perf_counter() - t) / 20000 * 1e6)'")
per_call = {}
for label, extra in [("unconfined", []), ("gated", ["-s", "workspace-write"])]:
    out = subprocess.run([BIN, "--timeout", "0", *extra, "-C", GATE_FS, "--json", "--", loop],
                         capture_output=True, text=True, check=True)
    import json as _json
    per_call[label] = float(_json.loads(out.stdout)["stdout"]["text"].split()[0])
rows.append(("chmod round trip: unconfined", 20000, f"{per_call['unconfined']:.1f} us", "", "", ""))
rows.append(("chmod round trip: through the gate", 20000, f"{per_call['gated']:.1f} us", "",
             f"+{per_call['gated'] - per_call['unconfined']:.1f} us", ""))

# 6. A build: cargo build --offline of a small crate (no dependencies, 40
#    modules of generic functions), from clean, confined against unconfined.
#    The compiler's writes and reads go through Landlock; nothing is gated.
crate = os.path.join(GATE_FS, "crate")
os.makedirs(os.path.join(crate, "src"))
with open(os.path.join(crate, "Cargo.toml"), "w") as fh:
    fh.write('[package]\nname = "benchcrate"\nversion = "0.1.0"\nedition = "2021"\n')
with open(os.path.join(crate, "src", "lib.rs"), "w") as fh:
    fh.write("".join(f"pub mod m{i};\n" for i in range(40)))
for i in range(40):
    with open(os.path.join(crate, "src", f"m{i}.rs"), "w") as fh:
        for j in range(30):
            fh.write(f"pub fn f{j}<T: Clone + std::fmt::Debug>(x: &[T]) -> Vec<String> "
                     f"{{ x.iter().cloned().map(|v| format!(\"{{:?}}{i}{j}\", v)).collect() }}\n")
have_cargo = shutil.which("cargo") is not None
build = [("unconfined", []), ("`--sandbox workspace-write`", ["-s", "workspace-write"])]
btimes = {label: [] for label, _ in build}
# The crate builds into its own target/ (removed with it), whatever
# CARGO_TARGET_DIR the caller has: a confined build could not write there.
build_env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
for i in range(GATE_RUNS + 1 if have_cargo else 0):
    for label, extra in build:
        shutil.rmtree(os.path.join(crate, "target"), ignore_errors=True)
        t0 = time.perf_counter_ns()
        subprocess.run([BIN, "--timeout", "0", *extra, "-C", crate, "--", "cargo build --offline -q"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       env=build_env)
        if i:
            btimes[label].append(time.perf_counter_ns() - t0)
if have_cargo:
    b_free = med(btimes[build[0][0]])
    for label, _ in build:
        xs = btimes[label]
        mine = "sandbox" in label
        rows.append((f"cargo build (40 modules, clean): {label}", GATE_RUNS, f"{med(xs) / 1e9:.2f} s",
                     f"{p90(xs) / 1e9:.2f} s", f"{med(xs) / b_free:.2f}x unconfined" if mine else "",
                     "<= 1.05x unconfined" if mine else ""))
shutil.rmtree(crate, ignore_errors=True)

print("| Measure | Runs | Median | p90 | Ratio | Target |")
print("|---|---:|---:|---:|---:|---|")
for r in rows:
    print("| " + " | ".join(str(c) for c in r) + " |")

# 5. Escapes: hostile commands that try to outlive the deadline. Each lists the
#    pids of its would-be escapees in @DIR@/pids; run_once counts those alive
#    200 ms after the run (then kills them). The peer is timeout(1) with a
#    300 ms grace period; when its SIGKILL reaches its own process group it
#    dies of it too (137), so it may end with 124 or 137.
escapes = [("setsid escapee", "setsid sh -c 'while :; do sleep 0.05; done' & "
            "echo $! >> @DIR@/pids; sleep 60"),
           ("TERM-ignoring", "(trap '' TERM; exec sleep 98) & echo $! >> @DIR@/pids; "
            "trap '' TERM; sleep 99 & echo $! >> @DIR@/pids; wait")]
cmds = []
for case, cmd in escapes:
    cmds.append((f"{case}: `timeout -k 0.3 1 bash -c CMD`",
                 ["timeout", "-k", "0.3", "1", "bash", "-c", cmd], (124, 137)))
    cmds.append((f"{case}: `dsh-exec --timeout 1s --kill-after 300ms -- CMD`",
                 [BIN, "--timeout", "1s", "--kill-after", "300ms", "--", cmd], (124,)))
res = bench(cmds, ESCAPE_RUNS, warmup=0, pids=True)
print()
print("| Escape | Runs | Median wall | Survivors (total) | Target |")
print("|---|---:|---:|---:|---|")
for label, _, _ in cmds:
    xs, _, surv, _ = res[label]
    print(f"| {label} | {ESCAPE_RUNS} | {med(xs) / 1e9:.2f} s | {sum(surv)} | "
          f"{'0 survivors' if 'dsh-exec' in label else ''} |")
missing = os.environ["UNAVAILABLE"].strip().splitlines()
if not shutil.which("valgrind"):
    missing.append("valgrind: not installed (the peak heap rows are left out)")
if missing:
    print()
    for line in missing:
        print(f"- {line}")
PY

# The cgroup v1 limits and the proxy's tunnel are measured by their own
# scripts (bench/limits.sh, bench/network.sh), run here after the table
# above with the same binary, so that one command measures every row of
# the performance targets. BENCH_WITH_SCRIPTS=0 skips them.
if [[ ${BENCH_WITH_SCRIPTS:-1} == 1 ]]; then
  echo
  echo "## Limits (bench/limits.sh)"
  DSH_EXEC_BIN=$BIN bash "$ROOT/bench/limits.sh"
  echo
  echo "## Network (bench/network.sh)"
  DSH_EXEC_BIN=$BIN bash "$ROOT/bench/network.sh"
fi
