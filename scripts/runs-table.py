#!/usr/bin/env python3
"""One markdown row per optimize run directory: the task, the baseline's time and share of
the physical floor, the best speedup and time, the techniques on the path from the
baseline to the best node, nodes judged, nodes that landed within their parent's
interval, evaluations to 95% of the best, and why it
stopped. Reads only the run directories (summary.json, events.jsonl).

usage: scripts/runs-table.py RUN_DIR...
"""
import json
import sys
from pathlib import Path


def row(run: Path) -> str:
    s = json.loads((run / "summary.json").read_text())
    parent, technique = {}, {}
    for line in (run / "events.jsonl").read_text().splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if e.get("event") == "node-started":
            parent[e["id"]] = e["parent"]
        elif e.get("event") == "node-proposed":
            technique[e["id"]] = e.get("technique", "")
    best = s.get("best") or {}
    path, n = [], best.get("node", 0)
    while n:
        path.append(technique.get(n, "?"))
        n = parent.get(n, 0)
    path.reverse()
    task = json.loads((run / "run.json").read_text()).get("config", {}).get("task_dir", run.name)
    fmt = lambda x, f: (f % x) if isinstance(x, (int, float)) else "-"
    interval = ""
    if isinstance(best.get("speedup_low"), (int, float)) and isinstance(best.get("speedup_high"), (int, float)):
        interval = " [%.3f, %.3f]" % (best["speedup_low"], best["speedup_high"])
    return "| {} | {} | {} | {}x{}{} | {} | {} | {} | {} | {} | {} |".format(
        Path(task).name,
        fmt(best.get("baseline_ms"), "%.4f"),
        fmt(best.get("baseline_pct_of_floor"), "%.1f%%"),
        fmt(best.get("speedup"), "%.3f"),
        interval,
        "" if best.get("verified") else " (no faster kernel confirmed)",
        fmt(best.get("ms"), "%.4f"),
        " -> ".join(path) or "baseline",
        s.get("judged", "-"),
        s.get("within_parent_interval", "-"),
        s.get("evaluations_to_95pct", "-"),
        s.get("stop_reason", s.get("stopped", "-")),
    )


print("| kernel | baseline ms | % of floor | best speedup | best ms | recipes and moves on the best path | nodes judged | within the parent's interval | evals to 95% | stopped |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for d in sys.argv[1:]:
    try:
        print(row(Path(d)))
    except Exception as e:  # a run that did not finish still gets a line
        print(f"| {Path(d).name} | - | - | - | - | ({type(e).__name__}: {e}) | - | - | - | - |")
