"""Executors: local pool and Ray give the same results, in unit order; Ray is optional."""
import json
import os
import subprocess
import sys

import pytest
from _helpers import wait_for_other_threads, write_jsonl

from ube_stream.executors import LocalExecutor, get_executor, worker_state
from ube_stream.training.trainer import train


def square(x):
    return x * x


def fail_on_three(x):
    if x == 3:
        raise ValueError(f"bad input {x}")
    return x


def _setup(n):
    return {"loaded": n, "pid": os.getpid()}


def uses_state(x):
    return worker_state(_setup, 7)["loaded"] + x


def _counted_setup(log_dir):
    """Setup that leaves a trace of each call: one line with this process id."""
    with open(os.path.join(log_dir, "setup-calls.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    return {"pid": os.getpid()}


def uses_counted_state(task):
    log_dir, x = task
    state = worker_state(_counted_setup, log_dir)
    assert worker_state(_counted_setup, log_dir) is state
    return state["pid"], x


@pytest.mark.parametrize("workers", [1, 2])
def test_local_map_in_task_order(workers):
    seen = []
    with LocalExecutor(workers) as runner:
        assert runner.map(square, range(20), on_result=seen.append) == [x * x for x in range(20)]
    assert sorted(seen) == sorted(x * x for x in range(20))


def test_local_application_error_propagates():
    with pytest.raises(ValueError, match="bad input 3"):
        LocalExecutor(2).map(fail_on_three, range(6))


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_state_cached_per_process(workers, tmp_path):
    """setup runs once in each process that runs tasks, however many tasks it runs."""
    assert LocalExecutor(workers).map(uses_state, [1, 2]) == [8, 9]
    results = LocalExecutor(workers).map(uses_counted_state, [(str(tmp_path), x) for x in range(12)])
    assert [x for _, x in results] == list(range(12))
    task_pids = [pid for pid, _ in results]
    setup_pids = (tmp_path / "setup-calls.txt").read_text().split()
    # one setup call per process that ran a task, and none anywhere else
    assert sorted(setup_pids) == sorted({str(pid) for pid in task_pids})
    assert len(setup_pids) <= workers < len(task_pids)


def test_worker_state_keeps_the_most_recently_used_setups(monkeypatch):
    """A process that runs many jobs keeps only the last WORKER_STATE_ENTRIES setups
    (each may hold a tokenizer and its chunk caches), dropping the least recently
    used; one still in use is kept and not set up again."""
    from ube_stream import executors

    monkeypatch.setattr(executors, "_WORKER_STATE", executors.collections.OrderedDict())
    calls = []

    def setup(name):
        calls.append(name)
        return object()

    first = executors.worker_state(setup, "job-0")
    for k in range(1, 10):
        executors.worker_state(setup, f"job-{k}")
        assert executors.worker_state(setup, "job-0") is first   # used every time: never dropped
    assert calls == [f"job-{k}" for k in range(10)]
    assert len(executors._WORKER_STATE) == executors.WORKER_STATE_ENTRIES
    executors.worker_state(setup, "job-1")                       # dropped long ago: set up again
    assert calls[-1] == "job-1" and len(calls) == 11
    seeded = object()
    executors.seed_worker_state(seeded, setup, "job-seeded")
    assert executors.worker_state(setup, "job-seeded") is seeded and len(calls) == 11


def pid_of(_task):
    return os.getpid()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


def test_workers_outlive_a_map_until_the_executor_closes():
    """A second map reuses the first one's workers (training's reduce after its counting);
    a failed map stops them and the next starts new ones; close() and garbage
    collection stop them."""
    import gc

    with LocalExecutor(2) as runner:
        first = set(runner.map(pid_of, range(8)))
        assert len(first) == 2 and os.getpid() not in first
        assert set(runner.map(pid_of, range(8))) == first
        with pytest.raises(ValueError, match="bad input 3"):
            runner.map(fail_on_three, range(6))
        assert not any(_alive(p) for p in first)
        second = set(runner.map(pid_of, range(8)))
        assert len(second) == 2 and not second & first
    assert not any(_alive(p) for p in second)
    unclosed = set(LocalExecutor(2).map(pid_of, range(4)))   # never closed: collected at once
    gc.collect()
    assert not any(_alive(p) for p in unclosed)


def test_unknown_executor():
    with pytest.raises(ValueError, match="unknown executor"):
        get_executor("dask")


def test_import_does_not_import_ray():
    code = "import sys, ube_stream, ube_stream.executors, ube_stream.training; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


@pytest.mark.slow  # starts a Ray cluster; tests/test_ray.py covers Ray too
def test_ray_train_byte_identical_to_local(ray_cluster, tmp_path, docs_rows):
    rows = [r for r in docs_rows if r["lang"] in ("en-US", "zh-CN", "ja-JP", "hr-HR", "el-GR")]
    paths = [write_jsonl(tmp_path / f"part-{i}.jsonl",
                         [line for r in rows[i::2] for line in r["text"][:15000].split("\n")]) for i in range(2)]
    local = train(paths, vocab_size=900, workers=2, show_progress=False, unit_rows=30)
    on_ray = train(paths, vocab_size=900, executor="ray", show_progress=False, unit_rows=30,
                   work_dir=str(tmp_path / "work"))
    assert on_ray.to_json() == local.to_json()
    # >8 units, so the count tables went through reduce tasks
    assert local.training["documents"] > 30 * 9
    assert os.listdir(tmp_path / "work") == []


@pytest.mark.slow  # starts a Ray cluster: with the other Ray tests
def test_ray_bad_input_is_clear_error_not_retried(ray_cluster, tmp_path):
    """A corrupt input fails with the same error as locally, at once (no retry loop)."""
    import time

    import zstandard

    from ube_stream.errors import InputError

    raw = "".join(json.dumps({"text": f"line {i} ok"}) + "\n" for i in range(2000)).encode()
    blob = zstandard.ZstdCompressor().compress(raw)
    bad = tmp_path / "broken.jsonl.zst"
    bad.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(InputError) as local_error:
        train([str(bad)], vocab_size=600, workers=1, show_progress=False)
    started = time.perf_counter()
    with pytest.raises(InputError) as ray_error:
        train([str(bad)], vocab_size=600, executor="ray", show_progress=False)
    assert str(ray_error.value) == str(local_error.value)
    assert "broken.jsonl.zst" in str(ray_error.value)
    assert time.perf_counter() - started < 60


# ---------------------------------------------------------------- fork start method

def pid_and_state(task):
    log_dir, x = task
    return os.getpid(), worker_state(_counted_setup, log_dir)["pid"], x


def test_forked_workers_inherit_the_seeded_state(tmp_path):
    """Under start_method("fork") the workers start with the driver's worker_state:
    the seeded value is used there and setup never runs."""
    from ube_stream.executors import seed_worker_state, start_method, will_fork

    wait_for_other_threads()
    log_dir = str(tmp_path)
    seed_worker_state({"pid": os.getpid()}, _counted_setup, log_dir)
    assert not will_fork()   # spawn unless asked for
    with start_method("fork"):
        assert will_fork()
        results = LocalExecutor(2).map(pid_and_state, [(log_dir, x) for x in range(6)])
    assert [x for _, _, x in results] == list(range(6))
    assert {state for _, state, _ in results} == {os.getpid()}       # the driver's value, inherited
    assert os.getpid() not in {pid for pid, _, _ in results}          # run in the workers
    assert not (tmp_path / "setup-calls.txt").exists()


def test_no_fork_while_another_thread_runs(tmp_path):
    """A thread alive at the start of the pool means spawn: each worker runs setup itself."""
    import threading

    from ube_stream.executors import seed_worker_state, start_method, will_fork

    log_dir = str(tmp_path)
    seed_worker_state({"pid": os.getpid()}, _counted_setup, log_dir)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with start_method("fork"):
            assert not will_fork()
            results = LocalExecutor(2).map(pid_and_state, [(log_dir, x) for x in range(6)])
    finally:
        stop.set()
        thread.join()
    assert os.getpid() not in {state for _, state, _ in results}
    assert sorted((tmp_path / "setup-calls.txt").read_text().split()) == sorted({str(p) for p, _, _ in results})


def test_start_method_is_checked():
    from ube_stream.executors import start_method

    with pytest.raises(ValueError, match="'spawn' or 'fork'"):
        with start_method("forkserver"):
            pass


_ORPHAN_DRIVER = '''
import os, sys, time
from ube_stream.executors import LocalExecutor, start_method

def task(x):
    with open(os.path.join(sys.argv[1], f"worker-{os.getpid()}"), "w"):
        pass
    time.sleep(1.5)
    return x

if __name__ == "__main__":
    with start_method(sys.argv[2]):
        LocalExecutor(2).map(task, range(50))
'''


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_workers_exit_when_the_driver_is_killed(tmp_path, method):
    """SIGKILL the driver while both workers run a task: each worker finds its pipe
    closed when its task ends and exits (a forked worker must not hold the driver's
    ends of the other workers' pipes, or none would ever see the driver die)."""
    import signal
    import time

    script = tmp_path / "driver.py"
    script.write_text(_ORPHAN_DRIVER)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path), method], env=env, cwd=str(tmp_path))
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("worker-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]
    assert len(pids) == 2
    driver.send_signal(signal.SIGKILL)
    driver.wait()

    deadline = time.monotonic() + 20
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftover = [p for p in pids if _alive(p)]
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    assert not leftover, f"workers {leftover} outlived their driver"


def test_a_progress_bar_leaves_no_thread_that_rules_out_forking():
    """tqdm starts a monitor thread that outlives its bar; ours run without it, so a
    run after one that showed progress in the same process still forks its workers."""
    import threading

    from ube_stream.executors import start_method, will_fork
    from ube_stream.progress import progress_bar

    wait_for_other_threads()
    bar = progress_bar(total=3, desc="test", enabled=True)
    for _ in range(3):
        bar.update(1)
    assert threading.active_count() == 1
    bar.close()
    with start_method("fork"):
        assert will_fork()
