"""The scaling benchmarks' ``--pin`` (benchmarks/measure.py): a run with W
workers is measured on W cores, and the whole process tree it starts, threads
and grandchildren included, stays on them (what the kernel reports through
``os.sched_getaffinity`` in each process is the truth checked)."""
from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _measure():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import measure
    finally:
        sys.path.pop(0)
    return measure


measure = _measure()
pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")

TREE = """
import json, os, subprocess, sys, threading
seen = {}
thread = threading.Thread(target=lambda: seen.update(thread=sorted(os.sched_getaffinity(0))))
thread.start(); thread.join()
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, check=True).stdout
print(json.dumps({"main": sorted(os.sched_getaffinity(0)), "thread": seen["thread"], "child": json.loads(child)}))
"""


def test_a_pinned_run_and_everything_it_starts_stay_on_its_cores():
    mine = sorted(os.sched_getaffinity(0))
    cores = measure.pinned_cores(1, True)
    assert cores == mine[:1]
    run = measure.run_measured([sys.executable, "-c", TREE], cores=cores)
    assert run["returncode"] == 0, run["output_tail"]
    seen = json.loads(run["output_tail"].strip().splitlines()[-1])
    assert seen == {"main": cores, "thread": cores, "child": cores}
    # unpinned: the run has every core this process has
    run = measure.run_measured([sys.executable, "-c", TREE])
    assert json.loads(run["output_tail"].strip().splitlines()[-1])["child"] == mine
    assert measure.pinned_cores(len(mine), False) is None and measure.pinned_cores(len(mine), True) == mine


def test_pinning_more_workers_than_cores_is_an_error_naming_both():
    mine = sorted(os.sched_getaffinity(0))
    with pytest.raises(SystemExit) as info:
        measure.pinned_cores(len(mine) + 1, True)
    assert f"{len(mine) + 1} workers need {len(mine) + 1} cores" in str(info.value)
    assert f"may use {len(mine)}" in str(info.value)


def test_cores_label():
    assert measure.cores_label([0]) == "0"
    assert measure.cores_label([3, 1, 2]) == "1-3"
    assert measure.cores_label([0, 2]) == "0,2"
    assert measure.cores_label(None) == f"all {len(os.sched_getaffinity(0))}"
