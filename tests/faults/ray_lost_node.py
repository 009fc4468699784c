"""Lost-node child (run by tests/test_ray.py): a Ray cluster of three nodes on this
machine (a head with no CPUs, two workers with one CPU each); one worker node is
killed (``cluster.remove_node``) while units run, then the survivor must finish.
Writes SPEC["result"] (JSON): what was killed when, and the output trees.

    python tests/faults/ray_lost_node.py SPEC.json

SPEC: {"corpus": [...], "tokenizer": path, "encode_out": dir, "train_out": path, "result": path,
       "unit_rows": n, "shard_tokens": n, "units": n, "vocab_size": n}
"""
import hashlib
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402
from _helpers import tree  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from ube_stream.shards import EncodeSummary, encode_corpus  # noqa: E402
from ube_stream.training.trainer import TrainSummary, train  # noqa: E402


def kill_a_node_when(cluster, node, ready, total, log, what):
    """Remove ``node`` once ``ready()`` units are done (some left): a node lost mid-run."""
    def watch():
        deadline = time.time() + 60
        while time.time() < deadline:
            done = ready()
            if done >= 1:
                log.append({"what": what, "killed_after_units": done, "of": total})
                cluster.remove_node(node, allow_graceful=False)
                return
            time.sleep(0.002)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def digests(directory):
    return {k: None if v is None else hashlib.sha256(v).hexdigest() for k, v in tree(directory).items()}


def count(path, suffix):
    try:
        return sum(1 for n in os.listdir(path) if n.endswith(suffix) and n[0].isdigit())
    except FileNotFoundError:
        return 0


def main():
    spec = json.load(open(sys.argv[1]))
    started = time.time()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    log = []
    out = spec["encode_out"]
    total = spec["units"]
    watcher = kill_a_node_when(cluster, nodes[0], lambda: count(os.path.join(out, "units"), ".json"), total, log,
                               "encode")
    summary = EncodeSummary()
    encode_corpus(spec["corpus"], tokenizer=spec["tokenizer"], output=out, executor="ray", summary=summary,
                  unit_rows=spec["unit_rows"], shard_tokens=spec["shard_tokens"], show_progress=False)
    watcher.join()
    result = {"log": log, "encode_units_done": summary.units_done, "encode_tree": digests(out)}
    # train: a fresh node replaces the lost one, then the other original node is lost mid phase 1
    nodes.append(cluster.add_node(num_cpus=1))
    cluster.wait_for_nodes()
    work = spec["train_out"] + ".ube-work"
    tables = lambda: sum(count(os.path.join(work, d, "tables"), ".json")   # noqa: E731
                         for d in (os.listdir(work) if os.path.isdir(work) else []))
    watcher = kill_a_node_when(cluster, nodes[1], tables, total, log, "train")
    train_summary = TrainSummary()
    train(spec["corpus"], vocab_size=spec["vocab_size"], executor="ray", unit_rows=spec["unit_rows"],
          output=spec["train_out"], show_progress=False, summary=train_summary)
    watcher.join()
    result["train_units"] = train_summary.units
    result["seconds"] = round(time.time() - started, 1)
    with open(spec["result"], "w") as f:   # not stdout: Ray's own log lines go there
        json.dump(result, f)
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main()
