"""The run engine's run directories: born locked, never removed while alive (issue 26, item 6)."""
import json
import os
import subprocess
import sys

import pytest
from _helpers import write_jsonl

from ube_stream.errors import LockError
from ube_stream.runs import RunDir, remove_dead_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each process starts `starts` trainings' work directories one after another in the shared root (as
# concurrent `ube train` runs without --work-dir do in $TMPDIR): in-memory ones (a fresh private key each,
# as the failing runs had) and one shared key (resumable, same training started many times at once).
# While it holds one, it writes a file into it, lets the others start and clean up, and checks that its
# directory and file are still there.
CHILD = r"""
import os, sys, time
from ube_stream.training.work_dir import TrainWork
from ube_stream.errors import LockError
root, starts, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lost = 0
for i in range(starts):
    key = None if i % 2 else "shared"
    work = TrainWork(root, key, {"child": me}, default_root=True, private_if_busy=True)
    try:
        with work:
            mine = os.path.join(work.tables, f"{me}-{i}.txt")
            with open(mine, "w") as f:
                f.write("counted")
            time.sleep(0.002)
            if not os.path.isfile(mine):
                lost += 1
            work.finish()
    except (OSError, LockError) as exc:
        print(f"start {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
        lost += 1
sys.exit(1 if lost else 0)
"""


def _concurrent_starts(root, processes, starts):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(starts), f"p{k}"], cwd=REPO,
                              stderr=subprocess.PIPE, text=True) for k in range(processes)]
    failed = []
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failed.append(err[-1500:])
    return failed


def test_concurrent_starts_never_remove_a_live_run(tmp_path):
    failed = _concurrent_starts(tmp_path / "ube-train", processes=5, starts=24)
    assert failed == []
    assert not os.path.exists(tmp_path / "ube-train") or os.listdir(tmp_path / "ube-train") == []


@pytest.mark.slow
def test_many_concurrent_starts_never_remove_a_live_run(tmp_path):
    failed = _concurrent_starts(tmp_path / "ube-train", processes=12, starts=150)
    assert failed == []


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, docs_rows):
    """Two JSONL files of real running text."""
    root = tmp_path_factory.mktemp("corpus")
    rows = [r for r in docs_rows if r["lang"] in ("en-US", "zh-CN", "ru-RU")]
    return [write_jsonl(root / f"part-{i}.jsonl", [line for r in rows[i::2] for line in r["text"][:8000].split("\n")])
            for i in range(2)]


@pytest.mark.slow
def test_concurrent_ube_train_commands_share_tmpdir(tmp_path, small_corpus):
    """The issue's case end to end: `ube train` started many times at once without --work-dir."""
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    os.makedirs(tmp_path / "tmp")
    procs = [subprocess.Popen([sys.executable, "-m", "ube_stream", "train", *small_corpus, "--vocab-size", "600",
                               "--unit-rows", "200", "--workers", "1", "-q", "-o", str(tmp_path / f"tok{k}.json"),
                               *(["--work-dir", str(tmp_path / "tmp" / "shared")] if k % 2 else [])],
                              cwd=REPO, env=env, stderr=subprocess.PIPE, text=True) for k in range(6)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs].count(0) >= 3, errors     # the shared --work-dir ones may be refused
    for k, p in enumerate(procs):
        if k % 2 == 0:
            assert p.returncode == 0, errors[k][-1500:]
        else:
            assert p.returncode == 0 or "LockError" in errors[k] or "is held by" in errors[k], errors[k][-1500:]
    made = {(tmp_path / f"tok{k}.json").read_bytes() for k, p in enumerate(procs) if p.returncode == 0}
    assert len(made) == 1                                          # the same training, byte-identical


def test_run_dir_is_born_with_its_lock_and_released_by_death(tmp_path):
    root = tmp_path / "root"
    run = RunDir(str(root), "run-a", "a test run").claim()
    assert os.path.isfile(run.lock_path)
    assert sorted(os.listdir(root)) == ["run-a"]          # no staging name left behind
    with pytest.raises(LockError, match=f"process {os.getpid()}"):
        RunDir(str(root), "run-a", "a test run").claim()  # flock: even this process's second claim waits
    remove_dead_runs(str(root), "run-")
    assert os.path.isdir(run.path)                        # held: kept
    run.release()
    # a holder killed with SIGKILL: the OS drops its flock, the next cleanup removes the directory
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom ube_stream.runs import RunDir\n"
                               "RunDir(sys.argv[1], 'run-b', 'b').claim()\nprint('held', flush=True)\n"
                               "time.sleep(120)", str(root)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with open(os.path.join(root, "run-b", "lock")) as f:
            assert json.load(f)["pid"] == holder.pid
        remove_dead_runs(str(root), "run-")
        assert sorted(os.listdir(root)) == ["run-b"]      # run-a had no holder; run-b's is alive
    finally:
        holder.kill()
        holder.wait()
    remove_dead_runs(str(root), "run-")
    assert os.listdir(root) == []


# --------------------------------------------------------------------------- the one lock (issue 24, item 1)

LOCK_CHILD = ("import sys, time\nfrom ube_stream.runs.lock import FileLock\n"
              "FileLock(sys.argv[1], 'a test lock').acquire()\nprint('held', flush=True)\ntime.sleep(120)")


def test_file_lock_names_a_live_holder_and_is_free_once_it_is_killed(tmp_path):
    from ube_stream.runs.lock import HOST, FileLock, lock_holder

    path = str(tmp_path / "locks" / "rank-0.lock")
    holder = subprocess.Popen([sys.executable, "-c", LOCK_CHILD, path], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_holder(path)["pid"] == holder.pid
        with pytest.raises(LockError) as info:
            FileLock(path, "rank 0").acquire()
        assert str(info.value).startswith(f"{path}: rank 0 is held by process {holder.pid} on host {HOST}; wait")
    finally:
        holder.kill()
        holder.wait()
    with open(path) as f:
        assert json.load(f)["pid"] == holder.pid     # the record stays, the flock went with the process
    assert lock_holder(path) is None
    with FileLock(path, "rank 0") as lock:           # at once: no pid is consulted
        assert lock.held
        with open(path) as f:
            assert json.load(f)["pid"] == os.getpid()
    assert not os.path.exists(path)                  # released: removed while still held


def test_lock_files_of_earlier_versions(tmp_path):
    """An earlier version created lock files exclusively and did not flock them: such a record still
    stops a second writer while its process lives here (or lives on another host, which cannot be checked),
    and is taken over when its process is gone, its pid reused, or the file empty."""
    from ube_stream.runs.lock import HOST, FileLock, start_time

    path = str(tmp_path / "old.lock")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = start_time(sleeper.pid)
        cases = [({"host": HOST, "pid": dead.pid}, None),
                 ({}, None),
                 ({"host": HOST, "pid": sleeper.pid}, f"process {sleeper.pid} on host {HOST}; wait"),
                 ({"host": "node-7", "pid": 1}, f"process 1 on host node-7; if that process is gone, delete {path}")]
        if started is not None:
            cases += [({"host": HOST, "pid": sleeper.pid, "started": started}, f"process {sleeper.pid}"),
                      ({"host": HOST, "pid": sleeper.pid, "started": started - 1}, None)]   # a reused pid
        for record, refused in cases:
            with open(path, "w") as f:
                f.write(json.dumps(record) if record else "")
            lock = FileLock(path, "an old lock", wait_s=0)
            if refused is None:
                lock.acquire()
                lock.release()
            else:
                with pytest.raises(LockError) as info:
                    lock.acquire()
                assert refused in str(info.value), (record, str(info.value))
    finally:
        sleeper.kill()
        sleeper.wait()


# --------------------------------------------------------------------------- plan and commit records

def test_unit_records_commit_point(tmp_path):
    import pickle

    from ube_stream.runs.records import UnitRecords

    units = tmp_path / "units"
    records = UnitRecords(str(units), ignore=("_plan.json",))
    assert records.committed(["a"]) == {} and not records.any_recorded()
    units.mkdir()
    (units / "_plan.json").write_text("{}")
    (units / "a.json.tmp").write_text('{"unit_id": "a"}')    # a commit killed before its rename
    assert records.committed(["a"]) == {} and not records.any_recorded()
    assert records.temporaries("a") == [str(units / "a.json.tmp")]
    records.commit("a", {"unit_id": "a", "text": "é"})
    records.commit("b", {"unit_id": "b"}, unique=True)
    assert (units / "a.json").read_bytes() == b'{\n "unit_id": "a",\n "text": "\xc3\xa9"\n}\n'   # as markers were
    assert records.any_recorded() and not [n for n in os.listdir(units) if n.startswith("b.json.")]
    assert records.committed(["a", "b", "c"]) == {"a": {"unit_id": "a", "text": "é"}, "b": {"unit_id": "b"}}
    assert records.committed(["a", "b"], check=lambda unit_id, record, source: unit_id == "b") == {
        "b": {"unit_id": "b"}}
    (units / "b.json").write_bytes(b'{"unit_id": "b"')        # a torn record (a file system without rename)
    assert records.committed(["b"]) == {}
    records.uncommit("a")
    assert records.committed(["a"]) == {} and records.temporaries("a") == []
    results = UnitRecords(str(tmp_path / "results"), suffix=".pickle", hashed_names=True, dump=pickle.dumps,
                          load=lambda data, source: pickle.loads(data))
    results.commit("corpus/a b.jsonl:0-97", {"ok": True})
    assert [len(n) for n in os.listdir(tmp_path / "results")] == [24 + len(".pickle")]
    assert results.committed(["corpus/a b.jsonl:0-97", "other"]) == {"corpus/a b.jsonl:0-97": {"ok": True}}
    with open(results.path("corpus/a b.jsonl:0-97"), "wb") as f:
        f.write(b"\x80\x04garbage")
    assert results.committed(["corpus/a b.jsonl:0-97"]) == {}


def test_run_plan_is_created_once_then_compared(tmp_path):
    from ube_stream.runs.records import RunPlan, shown_differences

    def read(path):
        with open(path) as f:
            return json.load(f)

    plan = RunPlan(str(tmp_path / "_plan.json"), read=read)
    assert plan.recorded() is None
    first = {"options": {"column": "text", "eos": 1}, "units": ["u0", "u1"]}
    assert plan.create_or_compare(first) == (first, [])
    other = {"options": {"column": "body", "eos": 1}, "units": ["u0", "u1"]}
    recorded, different = plan.create_or_compare(other)
    assert recorded == first and different == ["options.column"] and plan.recorded() == first
    assert shown_differences(recorded, other, different) == "options.column: 'text' recorded, 'body' now"
