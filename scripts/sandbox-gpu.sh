#!/usr/bin/env bash
# Does the worker's allow-list sandbox hold for real CUDA runs, under ncu and under
# compute-sanitizer? On a GPU machine, from the project root, with the binaries staged by
# ../shared/scripts/device-pack.sh. Logs go to $OUT (or ./gpu-out).
#
#   scripts/sandbox-gpu.sh            every part below, in order
#   scripts/sandbox-gpu.sh report     each mode once with the seccomp filter in report mode
#                                     (NIGHTSHIFT_SECCOMP_REPORT: every refused call traps,
#                                     is written down, and is then refused as before):
#                                     eval of every task, --energy, --sanitize (memcheck,
#                                     racecheck, initcheck), diagnose (ncu). Prints, per mode,
#                                     whether the run worked and each call the filter refused.
#   scripts/sandbox-gpu.sh strace     the same four modes once more under strace -f (STRACE=
#                                     path, default .exp/strace/strace or strace on PATH), then
#                                     scripts/trace-syscalls.py --refused over the traces: the
#                                     calls made after the sandbox, and every EPERM, ENOSYS or
#                                     EACCES (Landlock's refusals are EACCES on open)
#   scripts/sandbox-gpu.sh maps       eval and diagnose with /proc/self/maps closed to the
#                                     driver (NIGHTSHIFT_SANDBOX_HIDE_MAPS=1): whether cuInit
#                                     copes, to decide if maps can be taken away for good
#   scripts/sandbox-gpu.sh probe      check-env's sandbox lines and probes on this machine
#                                     (kernel, Landlock ABI, root or not)
#
# What "worked" means: eval exits 0 (passed) with a JSON verdict whose status is
# "passed"; --sanitize also reports its sanitizer runs clean; diagnose exits 0 with at
# least one kernel diagnosed. A refused call that the run survived is still printed: it
# is either harmless (the caller copes) or a sign the list lacks something.
set -uo pipefail
out="${OUT:-gpu-out}/sandbox"; mkdir -p "$out"
out=$(cd "$out" && pwd)
ns() { bash .device/gpu-run.sh nightshift "$@"; }
tasks=$(ls -d tasks/*/ | sed 's:/$::')

# One run: MODE NAME ARGS...; its JSON, stderr and exit code under $out/MODE/NAME.
run() {
  local mode=$1 name=$2; shift 2
  local d="$out/$mode/$name"; mkdir -p "$d"
  ns "$@" --json > "$d/out.json" 2> "$d/stderr.txt"
  echo $? > "$d/rc"
}

# Whether a run worked, in one line (and the layers the worker reported, off ones named).
verdict() {
  python3 - "$1" "$2" <<'PY'
import json, sys
mode, d = sys.argv[1], sys.argv[2]
rc = open(d + "/rc").read().strip()
try:
    v = json.load(open(d + "/out.json"))
except Exception as e:
    print(f"FAILED  exit {rc}, no JSON ({e}); stderr: {open(d + '/stderr.txt').read()[-400:]!r}")
    sys.exit()
if mode == "diagnose":
    kernels = v.get("kernels", [])
    ok = rc == "0" and len(kernels) > 0
    print(("worked " if ok else "FAILED ") + f"exit {rc}, {len(kernels)} kernels diagnosed")
    sys.exit()
status = v.get("status")
ok = rc == "0" and status == "passed"
extra = ""
if mode == "sanitize":
    reports = v.get("sanitizer") or []
    clean = bool(reports) and all(r.get("errors") == 0 for r in reports)
    ok = ok and clean
    extra = "; sanitizers: " + ", ".join(f"{r.get('tool')} errors {r.get('errors')}" for r in reports)
if mode == "energy":
    ok = ok and bool(v.get("energy"))
    extra = "; energy reported" if v.get("energy") else "; no energy"
failure = v.get("failure") or {}
if failure:
    extra += f"; failure {failure.get('class')}: {str(failure.get('message', ''))[:200]}"
off = [l["name"] + ": " + l["detail"][:160] for l in (v.get("sandbox") or []) + (v.get("hosted_sandbox") or []) if not l.get("active")]
layers = ", ".join(l["name"] for l in (v.get("sandbox") or []))
extra += f"; layers: {layers}" + (f"; OFF: {off}" if off else "")
print(("worked " if ok else "FAILED ") + f"exit {rc}, status {status}{extra}")
PY
}

# The seccomp report lines of a mode, counted by call (pid and tid dropped).
refusals() {
  local logs="$out/seccomp/$1"
  if ! ls "$logs"/seccomp-*.log > /dev/null 2>&1; then
    echo "   no call refused by the filter (no report lines)"
    return
  fi
  cat "$logs"/seccomp-*.log | sed -E 's/pid [0-9]+ tid [0-9]+ //' | sort | uniq -c | sort -rn | sed 's/^/   /'
}

part_report() {
  echo "== report mode: one run per mode, every refused call written down"
  for mode in eval energy sanitize diagnose; do
    mkdir -p "$out/seccomp/$mode"
    export NIGHTSHIFT_SECCOMP_REPORT="$out/seccomp/$mode"
    case $mode in
      eval) for t in $tasks; do run eval "$(basename "$t")" eval "$t"; done ;;
      energy) run energy vector_add eval tasks/vector_add tests/candidates/vector_add/vec4.cu --energy ;;
      sanitize) run sanitize softmax eval tasks/softmax tests/candidates/softmax/fast.cu --sanitize ;;
      diagnose) run diagnose softmax diagnose tasks/softmax ;;
    esac
    unset NIGHTSHIFT_SECCOMP_REPORT
    for d in "$out/$mode"/*/; do
      echo "-- $mode $(basename "$d"): $(verdict "$mode" "${d%/}")"
    done
    echo "   calls the filter refused ($mode):"
    refusals "$mode"
  done
}

part_strace() {
  local st="${STRACE:-}"
  [ -z "$st" ] && [ -x .exp/strace/strace ] && st=.exp/strace/strace
  [ -z "$st" ] && st=$(command -v strace || true)
  if [ -z "$st" ]; then echo "== strace: none found (set STRACE=...)"; return; fi
  echo "== strace -f of one run per mode ($st)"
  local T="$out/traces"; rm -rf "$T"; mkdir -p "$T"
  trace() {
    local name=$1; shift; mkdir -p "$T/$name"
    "$st" -f -ff -qq -s 96 -o "$T/$name/t" -e 'trace=!futex,sched_yield,clock_gettime,gettimeofday,clock_nanosleep,nanosleep' \
      bash .device/gpu-run.sh nightshift "$@" --json > "$T/$name.out" 2>&1
    echo "-- traced $name: exit $?"
  }
  trace eval-softmax eval tasks/softmax tests/candidates/softmax/fast.cu
  trace eval-gemm_bf16 eval tasks/gemm_bf16
  trace energy-vector_add eval tasks/vector_add tests/candidates/vector_add/vec4.cu --energy
  trace sanitize-softmax eval tasks/softmax tests/candidates/softmax/fast.cu --sanitize
  trace diagnose-softmax diagnose tasks/softmax
  python3 scripts/trace-syscalls.py "$T" --refused > "$out/trace-summary.txt"
  # The per-mode headers and the refused calls; the whole summary is in the file.
  grep -E '^== |refused or failed|^      [0-9]+ .*-> (EPERM|ENOSYS|EACCES)' "$out/trace-summary.txt"
  echo "   (full summary: $out/trace-summary.txt)"
}

part_maps() {
  echo "== /proc/self/maps closed to the driver (NIGHTSHIFT_SANDBOX_HIDE_MAPS=1)"
  export NIGHTSHIFT_SANDBOX_HIDE_MAPS=1
  run maps eval-vector_add eval tasks/vector_add
  run maps eval-softmax eval tasks/softmax tests/candidates/softmax/fast.cu
  run maps-diagnose softmax diagnose tasks/softmax
  unset NIGHTSHIFT_SANDBOX_HIDE_MAPS
  for d in "$out/maps"/*/; do echo "-- maps $(basename "$d"): $(verdict eval "${d%/}")"; done
  echo "-- maps diagnose softmax: $(verdict diagnose "$out/maps-diagnose/softmax")"
}

part_probe() {
  echo "== check-env's sandbox lines"
  uname -r
  ns check-env 2>&1 | grep -E '^(sandbox|hosted)' | tee "$out/check-env.txt"
}

case "${1:-all}" in
  report) part_report ;;
  strace) part_strace ;;
  maps) part_maps ;;
  probe) part_probe ;;
  all) part_probe; part_report; part_maps; part_strace ;;
  *) sed -n '2,28p' "$0"; exit 2 ;;
esac 2>&1 | tee -a "$out/summary.txt"
