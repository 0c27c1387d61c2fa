#!/usr/bin/env bash
# The GPU checks quoted in issue 10's closing note, on a GPU machine with the staged
# binaries and tests (../shared/scripts/device-pack.sh --tests). Logs go to $OUT (or ./gpu-out).
#   scripts/wall-gpu.sh hostile     check-env, the sandbox probe, every tests/hostile case
#   scripts/wall-gpu.sh contention  two evals at once (lock on), then a disturbed one (lock off)
#   scripts/wall-gpu.sh honest      fast.cu, vec4.cu and the ten baselines, sandbox on and off
#   scripts/wall-gpu.sh smoke       the judge end to end: passes, each planted failure, energy, sanitizers, ncu
#   scripts/wall-gpu.sh times       judging time per candidate (softmax fast.cu, gemm_f32 against itself and
#                                   plain_tf32), three times each
set -uo pipefail
out="${OUT:-gpu-out}"; mkdir -p "$out"
ns() { bash .device/gpu-run.sh nightshift "$@"; }
summary() {  # verdict JSON on stdin -> one line
  python3 -c '
import json,sys
try: v=json.load(sys.stdin)
except Exception as e: print("NO VERDICT", e); sys.exit(0)
if "status" not in v: print("ERROR", json.dumps(v)[:300]); sys.exit(0)
t=v.get("timing") or {}; f=v.get("failure") or {}; cc=t.get("clock_check") or {}; s=v.get("speedup") or {}
c=lambda s: (t.get(s) or {}).get("cv",0)*100
print("%-9s %-16s speedup %6.3f [%s, %s] CV base %5.2f%% cand %5.2f%% figure %s gaps %.4f/%.4f tol %.4f sets %s reliable %s others %s  total %.2fs setup %.2fs  %s | %s" % (
  v["status"], f.get("class",""), t.get("speedup",0), s.get("low"), s.get("high"), c("baseline"), c("candidate"),
  cc.get("figure"), cc.get("baseline_gap_ms",0), cc.get("candidate_gap_ms",0), cc.get("tolerance_ms",0), t.get("input_sets"), t.get("reliable"),
  t.get("other_processes"), v["phases"]["total"], v["phases"]["setup"], f.get("message","")[:200], " | ".join(v.get("notes",[]))[:300]))'
}
case "${1:-}" in
  hostile)
    ns check-env > "$out/check-env.txt" 2>&1; cat "$out/check-env.txt"
    mkdir -p /tmp/probe/scratch
    ns sandbox-probe --scratch /tmp/probe/scratch --outside /tmp/probe/escaped.txt > "$out/probe.json" 2>&1
    python3 -c 'import json; r=json.load(open("'"$out"'/probe.json")); [print(l) for l in r["layers"]]; [print(a["allowed"]==a["should_be_allowed"], a["action"], a["detail"]) for a in r["attempts"]]'
    t=$(ls .device/tests/hostile-* | head -1)
    NIGHTSHIFT_BIN="$PWD/.device/bin/nightshift" PATH="$PWD/.device/bin:/usr/local/cuda/bin:$PATH" \
      "$t" --ignored --nocapture --test-threads 1 > "$out/hostile.txt" 2>&1
    echo "hostile exit $?"; grep -E "^\||files outside|MISMATCH|panicked|expected" "$out/hostile.txt" | head -80
    ;;
  contention)
    for i in 1 2; do (ns eval tasks/softmax tests/candidates/softmax/fast.cu --json > "$out/together-$i.json" 2>"$out/together-$i.err"; echo "together $i exit $?") & done; wait
    for i in 1 2; do summary < "$out/together-$i.json"; done
    for i in 1 2; do (NIGHTSHIFT_GPU_LOCK=off ns eval tasks/gemm_f32 --json > "$out/disturbed-$i.json" 2>"$out/disturbed-$i.err"; echo "disturbed $i exit $?") & done; wait
    for i in 1 2; do summary < "$out/disturbed-$i.json"; done
    for i in 1 2; do (NIGHTSHIFT_GPU_LOCK=off ns eval tasks/softmax tests/candidates/softmax/fast.cu --json > "$out/disturbed-sm-$i.json" 2>/dev/null) & done; wait
    for i in 1 2; do summary < "$out/disturbed-sm-$i.json"; done
    ;;
  smoke)
    for c in fast off_by_one wrong illegal_address writes_input reads_past_end skip_last_row exits segfault no_entry cached default_stream; do
      printf "%-18s " "$c"; ns eval tasks/softmax "tests/candidates/softmax/$c.cu" --json 2>"$out/smoke-$c.err" | tee "$out/smoke-$c.json" | summary
    done
    printf "%-18s " infinite_loop; ns eval tasks/softmax tests/candidates/softmax/infinite_loop.cu --timeout 30 --json 2>"$out/smoke-loop.err" | summary
    printf "%-18s " gemm-three; ns eval tasks/gemm_f32 tests/candidates/gemm_f32/three_tf32.cu --json 2>"$out/smoke-gemm.err" | summary
    printf "%-18s " vec4-energy; ns eval tasks/vector_add tests/candidates/vector_add/vec4.cu --energy --json 2>"$out/smoke-energy.err" | tee "$out/smoke-energy.json" | summary
    python3 -c 'import json; e=json.load(open("'"$out"'/smoke-energy.json")).get("energy"); print("energy", json.dumps(e)[:600])'
    printf "%-18s " fast-sanitize; ns eval tasks/softmax tests/candidates/softmax/fast.cu --sanitize --json 2>"$out/smoke-san.err" | summary
    printf "%-18s " oob-sanitize; ns eval tasks/softmax tests/candidates/softmax/reads_past_end.cu --sanitize --json 2>"$out/smoke-san2.err" | summary
    ns diagnose tasks/softmax tests/candidates/softmax/fast.cu --json > "$out/smoke-diagnose.json" 2>"$out/smoke-diagnose.err"; echo "diagnose exit $?"; head -c 400 "$out/smoke-diagnose.json"; echo
    ;;
  times)
    ns eval tasks/softmax --json >/dev/null 2>&1; ns eval tasks/gemm_f32 --json >/dev/null 2>&1  # builds cached
    for i in 1 2 3; do for c in "tasks/softmax tests/candidates/softmax/fast.cu" "tasks/gemm_f32" "tasks/gemm_f32 tests/candidates/gemm_f32/plain_tf32.cu"; do
      set -- $c; ns eval "$@" --json 2>/dev/null | python3 -c '
import json,sys; v=json.load(sys.stdin); p=v["phases"]; t=v.get("timing") or {}
print(sys.argv[1], v["status"], "speedup %.3f judge %.3f s (build %.3f) setup %.3f check %.3f time %.3f judge-phases %s" % (t.get("speedup",0), p["total"]-p["build"], p["build"], p["setup"], p["check"], p["time"], json.dumps({k: round(x,3) for k,x in p["worker"].items()})))' "$*"
    done; done
    ;;
  honest)
    for run in "softmax tests/candidates/softmax/fast.cu" "vector_add tests/candidates/vector_add/vec4.cu"; do
      set -- $run
      for sb in on off; do
        printf "%-10s %-5s sandbox %-3s " "$1" "$(basename "$2" .cu)" "$sb"
        NIGHTSHIFT_SANDBOX=$sb ns eval "tasks/$1" "$2" --json 2>/dev/null | summary
      done
    done
    for t in tasks/*/; do
      t=$(basename "$t")
      for sb in on off; do
        printf "%-10s base  sandbox %-3s " "$t" "$sb"
        NIGHTSHIFT_SANDBOX=$sb ns eval "tasks/$t" --json 2>/dev/null | summary
      done
    done
    ;;
esac
