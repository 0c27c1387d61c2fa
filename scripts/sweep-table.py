#!/usr/bin/env python3
"""Issue 34's table from what scripts/sweep-gpu.sh leaves in runs/: per kernel the first
version, the best the default optimize run found (the judge's figures, with its interval
and share of the physical floor), eager PyTorch and torch.compile, how many times faster
than torch.compile the best is, and the hand rewrite where the example has one (its time, and
the best's speed as a share of its speed). The timings beside the judge's come from
scripts/vs-torch.py, where baseline, best, eager, torch.compile and the hand rewrite ran in one
process on one GPU, timed alike. Also the
nodes judged and those that landed within their parent's interval; then the geomean of
"best vs torch.compile" and the kernels below 0.9x of it.

usage: scripts/sweep-table.py RUN_DIR...     (each RUN_DIR beside its RUN_DIR.vs.json)
"""
import json
import math
import sys
from pathlib import Path


def side(task: dict, kind: str) -> dict:
    return next((s for s in task.get("sides", []) if s.get("kind") == kind), {})


def fmt(x, f: str) -> str:
    return (f % x) if isinstance(x, (int, float)) else "-"


def row(run: Path):
    """One markdown row and the best's ratio to torch.compile (None when not measured)."""
    s = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    best = s.get("best") or {}
    vs_file = run.parent / f"{run.name}.vs.json"
    vs = json.loads(vs_file.read_text()) if vs_file.is_file() else {}
    task = (vs.get("tasks") or [{}])[0]
    base = side(task, "baseline")
    # The run's best; the hand rewrite is a candidate side too, never the run's.
    cand = next((x for x in task.get("sides", []) if x.get("kind") == "candidate" and x.get("side") != "hand.cu"), {})
    eager, comp = side(task, "eager"), side(task, "compile")
    hand = next((x for x in task.get("sides", []) if x.get("side") == "hand.cu"), {})
    of_hand = None
    if isinstance(hand.get("median_ms"), (int, float)) and isinstance(cand.get("median_ms"), (int, float)) \
            and cand.get("median_ms"):
        of_hand = hand["median_ms"] / cand["median_ms"]
    ratio = cand.get("x_faster_than_compile")
    if best.get("verified"):
        interval = ""
        if isinstance(best.get("speedup_low"), (int, float)) and isinstance(best.get("speedup_high"), (int, float)):
            interval = " [%.3f, %.3f]" % (best["speedup_low"], best["speedup_high"])
        best_text = "%s ms, %sx%s" % (fmt(best.get("ms"), "%.4f"), fmt(best.get("speedup"), "%.3f"), interval)
    elif s:
        best_text = "no faster kernel"
    else:
        best_text = "(no finished run)"
    floor = "%s -> %s" % (fmt(best.get("baseline_pct_of_floor"), "%.1f%%"), fmt(best.get("pct_of_floor"), "%.1f%%"))
    cells = [
        run.name,
        fmt(base.get("median_ms") or best.get("baseline_ms"), "%.4f ms"),
        best_text,
        floor,
        fmt(eager.get("median_ms"), "%.4f ms"),
        fmt(comp.get("median_ms"), "%.4f ms") + old_timing(comp) + (" (syncs inside)" if comp.get("syncs") else ""),
        fmt(ratio, "%.3fx"),
        fmt(hand.get("median_ms"), "%.4f ms") + (" (best at %.0f%%)" % (100 * of_hand) if of_hand else ""),
        str(s.get("judged", "-")),
        str(s.get("within_parent_interval", "-")),
        vs.get("device", "-"),
    ]
    return "| " + " | ".join(cells) + " |", ratio


def old_timing(side: dict) -> str:
    """vs-torch timed the call with its launch before it timed the GPU's work apart (a
    .vs.json without call_median_ms): such figures are not comparable with newer ones."""
    return " (with launch)" if side and "call_median_ms" not in side else ""


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print(
        "| kernel | first version | best (judge) | % of floor, first -> best | eager | torch.compile "
        "| best vs torch.compile | hand rewrite (the best's speed as a share of it) | nodes judged | within the parent's interval | GPU |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios = []
    for d in argv:
        try:
            line, ratio = row(Path(d))
        except (OSError, ValueError, KeyError, TypeError) as e:  # a broken run still gets a line
            line, ratio = f"| {Path(d).name} | ({type(e).__name__}: {e}) | | | | | | | | | |", None
        print(line)
        if isinstance(ratio, (int, float)) and ratio > 0:
            ratios.append(ratio)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        below = sum(r < 0.9 for r in ratios)
        print(f"\ngeomean of best vs torch.compile over {len(ratios)} kernels: {geo:.3f}x; below 0.9x: {below}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
