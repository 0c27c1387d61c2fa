#!/usr/bin/env bash
# Issue 22's figures for one task, on a GPU machine with the staged binary
# (../shared/scripts/device-pack.sh). Everything lands in $OUT (or ./gpu-out).
#   BUDGET=5m scripts/bench-gpu.sh TASK_DIR [diagnose|optimize|all]
#   diagnose: three `diagnose --timings` runs with the tools' metric set and one with
#             `--full`: seconds end to end, the phases, and whether the diagnoses agree
#   optimize: `optimize --budget $BUDGET` with each --guidance in $GUIDANCE (default
#             "tools none"): judged per minute, lane busy fractions, profile and build
#             seconds
# Each optimize run fits one device call when BUDGET is 8m or less (search, baseline and
# final check together).
set -uo pipefail
task="${1:?usage: scripts/bench-gpu.sh TASK_DIR [diagnose|optimize|all]}"; what="${2:-all}"
out="${OUT:-gpu-out}"; mkdir -p "$out" runs
name=$(basename "$task")
ns() { bash .device/gpu-run.sh nightshift "$@"; }
if [ "$what" = diagnose ] || [ "$what" = all ]; then
  ns diagnose "$task" --json > /dev/null 2>&1   # builds once, so the times below are profiling
  for run in reduced-1 reduced-2 reduced-3 full; do
    flag=(--timings); [ "$run" = full ] && flag=(--timings --full)
    s=$(date +%s.%N)
    ns diagnose "$task" "${flag[@]}" --json > "runs/$name-diagnose-$run.json" 2> "runs/$name-diagnose-$run.err"
    rc=$?; e=$(date +%s.%N)
    echo "$run exit $rc seconds $(python3 -c "print(round($e-$s,2))")" >> "runs/$name-diagnose-times.txt"
  done
  python3 - "$name" <<'PY' | tee "$out/$name-diagnose.txt"
import json, sys
name = sys.argv[1]
def load(run):
    try: return json.load(open(f"runs/{name}-diagnose-{run}.json"))
    except Exception as e: return {"error": str(e)}
def verdicts(d):
    return [(k.get("name"), [(g.get("tool"), g.get("severity")) for g in k.get("diagnoses", [])]) for k in d.get("kernels", [])]
print(f"== diagnose {name}")
for line in open(f"runs/{name}-diagnose-times.txt"): print("  " + line.strip())
full = verdicts(load("full"))
for run in ["reduced-1", "reduced-2", "reduced-3", "full"]:
    d = load(run)
    t = d.get("timings") or {}
    phases = "  ".join(f"{k} {v:.2f}" if isinstance(v, (int, float)) else f"{k} {v}" for k, v in t.items())
    same = "same diagnoses as --full" if verdicts(d) == full else "DIFFERENT diagnoses from --full"
    print(f"  {run:10s} {same}; phases (s): {phases}")
PY
fi
if [ "$what" = optimize ] || [ "$what" = all ]; then
  for g in ${GUIDANCE:-tools none}; do
    rm -rf "runs/$name-bench-$g"
    ns optimize "$task" --guidance "$g" --budget "${BUDGET:-5m}" --seed 1 --out "runs/$name-bench-$g" \
      > "runs/$name-bench-$g.log" 2>&1
    echo "optimize --guidance $g exit $?" | tee -a "$out/$name-optimize.txt"
  done
  python3 - "$name" "${GUIDANCE:-tools none}" <<'PY' | tee -a "$out/$name-optimize.txt"
import json, sys
name = sys.argv[1]
for g in sys.argv[2].split():
    try: s = json.load(open(f"runs/{name}-bench-{g}/summary.json"))
    except Exception as e: print(f"  --guidance {g}: no summary ({e})"); continue
    p = s.get("phases", {})
    lanes = ", ".join(f"gpu{l['device']} busy {100*l['busy_fraction']:.0f}% ({l['jobs']} jobs)" for l in s.get("gpus", []))
    per_profile = p.get("profile_s", 0) / max(p.get("profiles", 0), 1)
    print(f"  --guidance {g}: {s.get('judged')} judged in {s.get('search_s', 0)/60:.1f} min = "
          f"{s.get('judged_per_minute', 0):.1f} per minute; {lanes}; {p.get('profiles', 0)} profiles, "
          f"{per_profile:.1f} s each, {p.get('profiles_shared', 0)} shared; builds {p.get('build_s', 0):.0f} s; stopped: {s.get('stop_reason')}")
PY
fi
tar czf "$out/$name-bench.tgz" --exclude='*/profile' --exclude='*.so' runs/"$name"-* 2>/dev/null
ls -la "$out"
