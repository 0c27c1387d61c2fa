"""nightshift's bridge to a Ray cluster (`nightshift optimize --ray ADDRESS`, and
`nightshift optimize-all --ray ADDRESS` with --batch).

One Ray actor per GPU lane, each holding one GPU (num_gpus=1) and running
`nightshift lane-job` on its own host for every job it is given, one at a time. The
orchestrator writes jobs as JSON lines on stdin ({"job": id, "lane": k, "payload": text})
and reads one reply per job on stdout ({"job": id, "ok": ..., "stdout": ...}), after a
first line that lists the lanes. An actor lost with its node fails its jobs here, not in
the orchestrator: each is sent again to a live lane, and only that lane's answer is
written, so a job is answered once. Ray does the scheduling; this file only forwards.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

# Ray and anything it loads may print: the protocol keeps the real stdout to itself.
PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)

import ray  # noqa: E402

# A Ctrl-C at the terminal is the orchestrator's to handle: it finishes the jobs in flight,
# which this bridge must go on answering.
signal.signal(signal.SIGINT, signal.SIG_IGN)

SAY = threading.Lock()


@ray.remote(num_gpus=1, max_restarts=0, max_task_retries=0)
class Lane:
    """One GPU of the cluster: runs nightshift's own lane there."""

    def __init__(self, binary):
        self.binary = binary

    def where(self):
        gpu = ""
        # nvidia-smi ignores CUDA_VISIBLE_DEVICES: ask for the GPU Ray gave this actor.
        mine = (os.environ.get("CUDA_VISIBLE_DEVICES", "") or "0").split(",")[0]
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", mine],
                capture_output=True, text=True, timeout=20,
            )
            if out.returncode == 0:
                gpu = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
        except (OSError, subprocess.SubprocessError):
            pass
        return {
            "host": socket.gethostname(),
            "node": ray.get_runtime_context().get_node_id(),
            "gpu": gpu,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }

    def run(self, payload):
        started = time.time()
        p = subprocess.run([self.binary, "lane-job"], input=payload, capture_output=True, text=True)
        return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-4000:], "seconds": time.time() - started}


@ray.remote(num_gpus=1, max_retries=2)
def optimize_one(binary, name, files, args):
    """One task's whole optimize run on one GPU of the cluster; the run folder comes back
    as a gzipped tar. Ray runs it again elsewhere if its node is lost (max_retries)."""
    import io
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nightshift-batch-") as tmp:
        task = os.path.join(tmp, "task", name)
        for rel, text in files.items():
            path = os.path.normpath(os.path.join(task, rel))
            if not path.startswith(task + os.sep):
                raise ValueError(f"the task file {rel!r} leaves its folder")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        run = os.path.join(tmp, "run")
        started = time.time()
        p = subprocess.run([binary, "optimize", task, "--out", run, "--json", *args], capture_output=True, text=True)
        buf = io.BytesIO()
        if os.path.isdir(run):
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                tar.add(run, arcname=".")
        ctx = ray.get_runtime_context()
        return {
            "rc": p.returncode,
            "summary": p.stdout,
            "stderr": p.stderr[-4000:],
            "seconds": time.time() - started,
            "where": {"host": socket.gethostname(), "node": ctx.get_node_id(), "gpu": "",
                      "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")},
            "archive": buf.getvalue(),
        }


def batch(a):
    """optimize-all: one Ray task per task of the spec on stdin; each run is unpacked into
    --out/NAME as it finishes, and a line says so."""
    import io
    import tarfile

    spec = json.load(sys.stdin)
    refs = {optimize_one.remote(a.binary, t["name"], t["files"], spec["args"]): t["name"] for t in spec["tasks"]}
    say({"event": "started", "tasks": len(refs)})
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
        for ref in ready:
            name = refs.pop(ref)
            try:
                r = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the task's answer, whatever went wrong
                say({"task": name, "ok": False, "error": f"{type(e).__name__}: {str(e)[:1000]}"})
                continue
            dest = os.path.join(a.out, name)
            os.makedirs(dest, exist_ok=True)
            archive = r.pop("archive")
            if archive:
                with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                    tar.extractall(dest, filter="data")
            say({"task": name, "ok": True, "run_dir": dest, **r})
    return 0


def say(obj):
    with SAY:
        PROTOCOL.write(json.dumps(obj) + "\n")
        PROTOCOL.flush()


LOST = tuple(
    getattr(ray.exceptions, name)
    for name in ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError")
    if hasattr(ray.exceptions, name)
)


class Bridge:
    def __init__(self, actors, wheres):
        self.actors = actors
        self.wheres = wheres
        self.alive = [True] * len(actors)
        self.load = [0] * len(actors)
        # Which actor a lane's jobs go to: its own until that one is lost.
        self.route = list(range(len(actors)))
        self.inflight = {}
        self.lock = threading.Lock()
        self.stopping = False

    def submit(self, job, lane, payload, tries=1, avoid=None):
        with self.lock:
            k = self.route[lane] if 0 <= lane < len(self.route) else 0
            if not self.alive[k] or k == avoid:
                live = [i for i, a in enumerate(self.alive) if a]
                if not live:
                    say({"job": job, "ok": False, "error": "every Ray lane is lost"})
                    return
                k = min(live, key=lambda i: self.load[i])
                self.route[lane] = k
            ref = self.actors[k].run.remote(payload)
            self.load[k] += 1
            self.inflight[ref] = (job, lane, k, payload, tries)

    def reap(self):
        try:
            self._reap()
        except BaseException as e:  # noqa: BLE001 - no job may wait for an answer that never comes
            with self.lock:
                waiting = list(self.inflight.values())
                self.inflight.clear()
            for job, *_ in waiting:
                say({"job": job, "ok": False, "error": f"the Ray bridge failed: {type(e).__name__}: {str(e)[:400]}"})
            say({"event": "error", "message": f"the Ray bridge failed: {type(e).__name__}: {e}"})
            os._exit(3)

    def lose(self, k, error):
        """Actor k is lost, and with it every actor on its node (idle ones look alive
        until their next job fails)."""
        with self.lock:
            node = self.wheres[k].get("node")
            gone = [i for i, w in enumerate(self.wheres) if self.alive[i] and (i == k or w.get("node") == node)]
            for i in gone:
                self.alive[i] = False
        for i in gone:
            say({"event": "lane-lost", "actor": i, "where": self.wheres[i], "error": error[:400]})

    def _reap(self):
        while not (self.stopping and not self.inflight):
            with self.lock:
                refs = list(self.inflight)
            if not refs:
                time.sleep(0.05)
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.2)
            for ref in ready:
                with self.lock:
                    job, lane, k, payload, tries = self.inflight.pop(ref)
                    self.load[k] -= 1
                try:
                    r = ray.get(ref)
                except LOST as e:
                    # The job may or may not have run there; its answer is lost either way,
                    # so it runs again on a live lane and only that answer counts.
                    self.lose(k, str(e))
                    say({"event": "job-requeued", "job": job, "lane": lane, "from_actor": k})
                    self.submit(job, lane, payload, tries + 1, avoid=k)
                    continue
                except Exception as e:  # noqa: BLE001 - any other failure is this job's answer
                    say({"job": job, "ok": False, "error": f"{type(e).__name__}: {str(e)[:1000]}"})
                    continue
                say({"job": job, "ok": True, "lane": lane, "actor": k, "where": self.wheres[k], "tries": tries, **r})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--gpus", type=int, default=0, help="at most this many lanes (0: one per GPU)")
    ap.add_argument("--binary", required=True, help="nightshift on the workers' hosts")
    ap.add_argument("--ready-timeout", type=float, default=300.0)
    ap.add_argument("--batch", action="store_true", help="optimize-all: whole runs as Ray tasks")
    ap.add_argument("--out", help="with --batch: where the runs are unpacked")
    a = ap.parse_args()
    # Ray keeps retrying an address nobody answers at for minutes: a plain host:port that
    # refuses a TCP connection is said at once.
    host, sep, port = a.address.rpartition(":")
    if sep and host and port.isdigit() and "://" not in a.address:
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
        except OSError as e:
            say({"event": "error", "message": f"nothing answers at {a.address}: {e}"})
            return 3
    try:
        ray.init(address=a.address, logging_level="ERROR", log_to_driver=False)
    except Exception as e:  # noqa: BLE001
        say({"event": "error", "message": f"cannot join the Ray cluster at {a.address}: {e}"})
        return 3
    if a.batch:
        return batch(a)
    total = int(ray.cluster_resources().get("GPU", 0))
    n = total if a.gpus <= 0 else min(a.gpus, total)
    if n == 0:
        say({"event": "error", "message": f"the Ray cluster at {a.address} offers no GPU"})
        return 3
    actors = [Lane.options(scheduling_strategy="SPREAD").remote(a.binary) for _ in range(n)]
    try:
        wheres = ray.get([x.where.remote() for x in actors], timeout=a.ready_timeout)
    except Exception as e:  # noqa: BLE001
        say({"event": "error", "message": f"{n} GPU lanes did not start within {a.ready_timeout:.0f} s: {e}"})
        return 3
    say({"event": "lanes", "lanes": wheres})
    bridge = Bridge(actors, wheres)
    reaper = threading.Thread(target=bridge.reap, daemon=True)
    reaper.start()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = None
        try:
            msg = json.loads(line)
            bridge.submit(int(msg["job"]), int(msg["lane"]), msg["payload"])
        except (ValueError, KeyError, TypeError) as e:
            job = msg.get("job") if isinstance(msg, dict) else None
            if isinstance(job, int):
                say({"job": job, "ok": False, "error": f"a job the bridge cannot read: {e}"})
            else:
                say({"event": "bad-line", "message": f"a line the bridge cannot read: {e}"})
    bridge.stopping = True
    reaper.join()
    for x in actors:
        try:
            ray.kill(x)
        except Exception:  # noqa: BLE001
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
