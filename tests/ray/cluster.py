"""A local Ray cluster for tests/ray.rs: a head without GPUs and two worker nodes with one
fake GPU each (`num_gpus=1`, as `ray start --num-gpus 1` declares them), all on this
machine. Prints {"address": ...} once the nodes are up, then obeys lines on stdin:
`kill N` removes worker N at once (its raylet and every process on it die), `stop` ends.
"""

import json
import sys

from ray.cluster_utils import Cluster

MB = 1024 * 1024


def main():
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "num_gpus": 0, "object_store_memory": 80 * MB},
    )
    workers = [cluster.add_node(num_cpus=2, num_gpus=1, object_store_memory=80 * MB) for _ in range(2)]
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["kill"]:
            cluster.remove_node(workers[int(words[1])], allow_graceful=False)
            print(json.dumps({"killed": int(words[1])}), flush=True)
        elif words[:1] == ["stop"]:
            break
    cluster.shutdown()


if __name__ == "__main__":
    main()
