#!/usr/bin/env bash
# Issue 21's GPU checks, on a GPU machine with the staged binaries and tests
# (../shared/scripts/device-pack.sh --tests). Logs go to $OUT (or ./gpu-out).
#   scripts/hosted-gpu.sh twins     diagnose the hostile write_outside and network cases
#            and their honest twin (tests/candidates/vector_add/honest_twin.cu) under ncu,
#            with a live listener on the host's loopback: files outside, connections,
#            ncu's numbers side by side, and the profiling time per candidate against
#            OLD (a binary from before the hosted arrangement, default .device/bin/nightshift-old)
#   scripts/hosted-gpu.sh contrast  the hostile cases under ncu with this binary and with OLD:
#            the connections and files that get out of each
#   scripts/hosted-gpu.sh optimize  an optimize run with profiling (--guidance tools) on a
#            copy of vector_add whose baseline is the hostile network + write_outside code
#            (NODES=4 nodes at most, stopped after LIMIT=300 seconds; the checks run either way)
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out" runs
ns() { bash .device/gpu-run.sh nightshift "$@"; }
old="${OLD:-.device/bin/nightshift-old}"
escape=nightshift-hostile-escape.txt
escapes() { find /tmp /var/tmp /dev/shm "$HOME" "$PWD" -maxdepth 4 -name "$escape" 2>/dev/null; }
# A listener on the host's loopback that counts the connections it accepts.
listen() {
  python3 -u -c '
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
n = 0
while True:
    c, _ = s.accept(); n += 1; open(sys.argv[1], "w").write(str(n)); c.close()
' "$1" > "$1.port" & echo $! > "$1.pid"; sleep 1
}
# The network case with the listener's port written in, as tests/hostile.rs does.
staged_network() {
  sed "s/^#define NIGHTSHIFT_LISTENER_PORT.*/#define NIGHTSHIFT_LISTENER_PORT $(cat "$1.port")/" tests/hostile/network.cu > "$2"
}
case "${1:-}" in
  twins)
    rm -f $(escapes); mkdir -p runs/twins
    listen runs/twins/arrivals; staged_network runs/twins/arrivals runs/twins/network.cu
    twin=tests/candidates/vector_add/honest_twin.cu
    # Warm the build cache for every candidate and both binaries, so the times are ncu's.
    # (The old binary only profiles the honest twin: under it the hostile ones get out, see `contrast`.)
    for c in $twin tests/hostile/write_outside.cu runs/twins/network.cu; do
      ns diagnose tasks/vector_add "$c" --json > /dev/null 2>&1
    done
    "$old" diagnose tasks/vector_add $twin --json > /dev/null 2>&1
    for i in 1 2 3; do
      for who in honest-new honest-old write-new network-new; do
        case $who in
          honest-new) bin=ns; c=$twin ;;
          honest-old) bin="bash .device/gpu-run.sh $old"; c=$twin ;;
          write-new) bin=ns; c=tests/hostile/write_outside.cu ;;
          network-new) bin=ns; c=runs/twins/network.cu ;;
        esac
        d="runs/twins/$who-$i"; mkdir -p "$d"
        s=$(date +%s.%N)
        $bin diagnose tasks/vector_add "$c" --out "$d" --json > "$d/diagnoses.json" 2> "$d/stderr.txt"
        rc=$?; e=$(date +%s.%N)
        echo "$who $i exit $rc seconds $(python3 -c "print(round($e-$s,2))")" | tee -a runs/twins/times.txt
      done
    done
    echo "connections that reached the listener: $(cat runs/twins/arrivals 2>/dev/null || echo 0)" | tee "$out/twins.txt"
    echo "files outside the scratch folders: $(escapes | tr '\n' ' ')" | tee -a "$out/twins.txt"
    kill "$(cat runs/twins/arrivals.pid)" 2>/dev/null
    grep -h "ran in" runs/twins/*-1/stderr.txt | sort | uniq -c | tee -a "$out/twins.txt"
    python3 - runs/twins <<'PY' | tee -a "$out/twins.txt"
import csv, glob, json, os, statistics, sys
root = sys.argv[1]
metrics = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "smsp__inst_executed.sum", "launch__registers_per_thread"]
def row(d):
    rows = list(csv.reader(open(os.path.join(d, "ncu_raw.csv"))))
    head = rows[0]; data = [r for r in rows[2:] if len(r) == len(head)]
    out = {}
    for m in metrics:
        if m in head:
            out[m] = sum(float(r[head.index(m)].replace(",", "")) for r in data)
    return out
def ids(d):
    try: v = json.load(open(os.path.join(d, "diagnoses.json")))
    except Exception: return "?"
    return ",".join(sorted(g.get("tool", g.get("id", "?")) for k in v.get("kernels", []) for g in k.get("diagnoses", [])))
for who in ["honest-new", "honest-old", "write-new", "network-new"]:
    dirs = sorted(glob.glob(f"{root}/{who}-*"))
    vals = [row(d) for d in dirs if os.path.exists(os.path.join(d, "ncu_raw.csv"))]
    print(f"== {who}: {len(vals)} profiles; diagnoses: {sorted(set(ids(d) for d in dirs))}")
    for m in metrics:
        xs = [v[m] for v in vals if m in v]
        if xs: print(f"   {m:55s} " + "  ".join(f"{x:,.1f}" for x in xs))
times = {}
for line in open(f"{root}/times.txt"):
    w = line.split(); times.setdefault(w[0], []).append(float(w[-1]))
for who, xs in times.items():
    print(f"seconds per diagnose {who:12s} " + " ".join(f"{x:.2f}" for x in xs) + f"  median {statistics.median(xs):.2f}")
PY
    ;;
  contrast)
    # The hostile cases under ncu with this binary, then with OLD: what gets out of each.
    mkdir -p runs/contrast
    for who in new old; do
      bin=.device/bin/nightshift; [ $who = old ] && bin="$old"
      rm -f $(escapes); listen runs/contrast/$who-arrivals
      staged_network runs/contrast/$who-arrivals runs/contrast/network-$who.cu
      for c in tests/hostile/write_outside.cu runs/contrast/network-$who.cu; do
        bash .device/gpu-run.sh "$bin" diagnose tasks/vector_add "$c" --json > /dev/null 2> runs/contrast/$who-stderr.txt
        echo "$who diagnose $(basename "$c") exit $?"
      done
      echo "$who: connections that reached the listener: $(cat runs/contrast/$who-arrivals 2>/dev/null || echo 0); files outside the scratch folders: $(escapes | tr '\n' ' ')" | tee -a "$out/contrast.txt"
      kill "$(cat runs/contrast/$who-arrivals.pid)" 2>/dev/null
    done
    rm -f $(escapes)
    ;;
  optimize)
    rm -f $(escapes); rm -rf runs/tasks/vector_add_hostile runs/hostile-optimize; mkdir -p runs/tasks
    cp -r tasks/vector_add runs/tasks/vector_add_hostile
    listen runs/hostile-arrivals
    # The baseline is both attacks at once: every child the tuner makes keeps them.
    staged_network runs/hostile-arrivals runs/network.cu
    { sed -n '/^#include/p' runs/network.cu tests/hostile/write_outside.cu | sort -u
      sed -e '/^#include/d' -e '/^\/\//d' -e 's/extern "C" void vector_add(/static void attack_network(/' \
          -e 's/^  if (n > 0) add<<<.*$//' -e 's/__global__ void add(/__global__ void add_unused(/' runs/network.cu
      sed -e '/^#include/d' -e '/^\/\//d' -e 's/extern "C" void vector_add(\(.*\)) {/extern "C" void vector_add(\1) {\n  attack_network(a, b, c, n, s);/' tests/hostile/write_outside.cu
    } > runs/tasks/vector_add_hostile/baseline.cu
    timeout "${LIMIT:-300}" bash .device/gpu-run.sh nightshift optimize runs/tasks/vector_add_hostile --guidance tools \
      --max-nodes "${NODES:-4}" --seed 1 --out runs/hostile-optimize > runs/hostile-optimize.log 2>&1
    echo "hostile optimize exit $?" | tee "$out/hostile-optimize.txt"
    tail -16 runs/hostile-optimize.log | tee -a "$out/hostile-optimize.txt"
    echo "profiles: $(find runs/hostile-optimize -name ncu_raw.csv | wc -l)" | tee -a "$out/hostile-optimize.txt"
    echo "connections that reached the listener: $(cat runs/hostile-arrivals 2>/dev/null || echo 0)" | tee -a "$out/hostile-optimize.txt"
    echo "files outside the scratch folders: $(escapes | tr '\n' ' ')" | tee -a "$out/hostile-optimize.txt"
    kill "$(cat runs/hostile-arrivals.pid)" 2>/dev/null
    ;;
esac
