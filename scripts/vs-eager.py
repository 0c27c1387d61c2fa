#!/usr/bin/env python3
"""PyTorch eager against a run's best kernel and the task's baseline, in one process on one
GPU, timed alike: L2 flushed by a read-only reduction before each call (as the wall
flushes it), CUDA events around the call alone, the sides interleaved over 7 rounds of
100 calls; the median per side. For vector_add, also a device-to-device copy that moves
the same bytes (the ceiling a copy reaches on this GPU).

Needs PyTorch and nvcc (the GPU machine has both). The README's eager figures come from it.

usage: scripts/vs-eager.py RUN_DIR...   (runs of tasks/vector_add, reduce_sum, softmax)
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys

import torch

dev = torch.device("cuda")
flush = torch.rand(150 * 1024 * 1024 // 4, device=dev)


def build(cu, defines, flags, tag):
    so = f"/tmp/vs_eager_{tag}.so"
    cmd = ["nvcc", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-o", so, cu]
    subprocess.run(cmd + flags + [f"-D{k}={v}" for k, v in defines.items()], check=True)
    return ctypes.CDLL(so)


def time_sides(sides, rounds=7, reps=100):
    times = {k: [] for k in sides}
    for r in range(rounds):
        order = list(sides.items())
        for name, fn in order if r % 2 == 0 else reversed(order):
            for _ in range(5):
                fn()
            for _ in range(reps):
                flush.amax()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                times[name].append(s.elapsed_time(e))
    return {k: (statistics.median(v), statistics.pstdev(v) / statistics.mean(v)) for k, v in times.items()}


def sides_for(task, ours, base, stream):
    p = lambda t: ctypes.c_void_p(t.data_ptr())
    torch.manual_seed(0)
    if task == "vector_add":
        n = 16777216
        a, b, c1, c2 = (torch.randn(n, device=dev) for _ in range(4))
        src, dst = torch.empty(3 * n // 2, device=dev), torch.empty(3 * n // 2, device=dev)
        return (
            {
                "eager": lambda: torch.add(a, b, out=c1),
                "best": lambda: ours.vector_add(p(a), p(b), p(c2), ctypes.c_int(n), stream),
                "baseline": lambda: base.vector_add(p(a), p(b), p(c2), ctypes.c_int(n), stream),
                "same bytes as a copy": lambda: dst.copy_(src),
            },
            lambda: torch.equal(c1, c2),
            12 * n,
        )
    if task == "reduce_sum":
        n = 67108864
        x, out = torch.rand(n, device=dev), torch.zeros(1, device=dev)
        return (
            {
                "eager": lambda: torch.sum(x),
                "best": lambda: ours.reduce_sum(p(x), p(out), ctypes.c_int(n), stream),
                "baseline": lambda: base.reduce_sum(p(x), p(out), ctypes.c_int(n), stream),
            },
            lambda: abs(torch.sum(x).item() - out.item()) <= 1e-5 * abs(out.item()) + 1e-6,
            4 * n,
        )
    if task == "softmax":
        rows, cols = 8192, 4096
        x, y = torch.randn(rows, cols, device=dev), torch.empty(rows, cols, device=dev)
        return (
            {
                # One kernel, as eager runs it (softmax with out= adds a copy).
                "eager": lambda: torch._softmax(x, 1, False),
                "best": lambda: ours.softmax(p(x), p(y), ctypes.c_int(rows), ctypes.c_int(cols), stream),
                "baseline": lambda: base.softmax(p(x), p(y), ctypes.c_int(rows), ctypes.c_int(cols), stream),
            },
            lambda: torch.allclose(torch._softmax(x, 1, False), y, rtol=1e-5, atol=1e-7),
            8 * rows * cols,
        )
    return None


for run in sys.argv[1:]:
    cfg = json.load(open(os.path.join(run, "run.json")))["config"]
    task = os.path.basename(cfg["task_dir"].rstrip("/"))
    cand = json.load(open(os.path.join(run, "best.json"))).get("candidate") or {}
    ours = build(os.path.join(run, "best.cu"), cand.get("defines") or {}, cand.get("flags") or [], task + "_best")
    base = build(os.path.join(cfg["task_dir"], "baseline.cu"), {}, [], task + "_base")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    got = sides_for(task, ours, base, stream)
    if got is None:
        print(f"{run}: task {task} has no eager twin here")
        continue
    sides, agrees, traffic = got
    for fn in sides.values():
        fn()
    torch.cuda.synchronize()
    ok = agrees()
    t = time_sides(sides)
    print(f"{task}: best agrees with eager: {ok}; eager/best {t['eager'][0] / t['best'][0]:.3f}", flush=True)
    for name, (ms, cv) in t.items():
        print(f"  {name:22s} {ms:.4f} ms  CV {100 * cv:4.1f}%  {traffic / ms / 1e9:.3f} TB/s", flush=True)
