"""Encoding and training on a Ray cluster give the same bytes as the local executor,
and survive what clusters do: a killed worker, a killed driver, a lock left by a lost
node; a corrupt input stops at once with the local error.

The cluster is a local one started here (``ray.init(num_cpus=2)``); the lost-node
test starts its own three-node cluster in a child (tests/faults/ray_lost_node.py).  Related tests
elsewhere: ``--rank/--world-size`` + ``--finalize`` equal to one run, and SIGKILL of a
local run then rerun (tests/test_shards.py: test_three_ranks_and_finalize_equal_a_single_run,
test_sigkill_then_rerun_is_byte_identical); ``import ube_stream`` does not import Ray
(tests/test_executors.py: test_import_does_not_import_ray).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from _helpers import kill_when, tree

from ube_stream.cli import shards as _cli_shards
from ube_stream.errors import InputError, LockError
from ube_stream.shards import EncodeSummary, encode_corpus
from ube_stream.training.trainer import train

# a Ray cluster per module: these run with the slow tests (CI runs them)
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNIT_ROWS = 150
OPTIONS = dict(unit_rows=UNIT_ROWS, shard_tokens=4000, show_progress=False)
KILLED_UNIT = f"00000-{UNIT_ROWS:012d}"      # the second unit of the first source


def markers(out):
    try:
        return [n for n in os.listdir(os.path.join(out, "units")) if n.endswith(".json") and n[0].isdigit()]
    except FileNotFoundError:
        return []


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, multilingual_lines):
    """Real multilingual running text (tests/data docs sample): two JSONL files and a .jsonl.zst."""
    import zstandard

    root = tmp_path_factory.mktemp("corpus")
    lines = multilingual_lines[::2]
    paths = []
    for i, part in enumerate((lines[0::3], lines[1::3], lines[2::3])):
        raw = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in part).encode("utf-8")
        path = root / (f"part-{i}.jsonl" + (".zst" if i == 2 else ""))
        path.write_bytes(zstandard.ZstdCompressor().compress(raw) if i == 2 else raw)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """Output dir and marker of the worker-kill test (the hook must be in the env before Ray starts)."""
    base = tmp_path_factory.mktemp("killed")
    return str(base / "shards"), str(base / "killed-once")


@pytest.fixture(scope="module")
def ray_cluster(killed_run):
    ray = pytest.importorskip("ray")
    old = os.environ.get("UBE_TEST_KILL_UNIT")
    os.environ["UBE_TEST_KILL_UNIT"] = f"{killed_run[0]}|{KILLED_UNIT}|{killed_run[1]}"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("UBE_TEST_KILL_UNIT", None)
        else:
            os.environ["UBE_TEST_KILL_UNIT"] = old


@pytest.fixture(scope="module")
def tokenizers(ray_cluster, corpus, tmp_path_factory):
    """The same tokenizer trained locally and on Ray: file paths."""
    root = tmp_path_factory.mktemp("tok")
    kw = dict(vocab_size=512 + 300 + 1, show_progress=False, unit_rows=UNIT_ROWS)
    local, on_ray = str(root / "local.json"), str(root / "ray.json")
    train(corpus, workers=2, **kw).save(local)
    train(corpus, executor="ray", **kw).save(on_ray)
    return local, on_ray


@pytest.fixture(scope="module")
def reference(corpus, tokenizers, tmp_path_factory):
    """The local executor's shard directory (one worker) and its tree."""
    out = str(tmp_path_factory.mktemp("ref") / "shards")
    manifest = encode_corpus(corpus, tokenizer=tokenizers[0], output=out, workers=1, **OPTIONS)
    assert manifest["totals"]["documents"] > 10 * UNIT_ROWS and len(manifest["shards"]) > 10
    return out, tree(out)


def cli_encode(argv):
    parser = argparse.ArgumentParser()
    _cli_shards.register(parser.add_subparsers())
    args = parser.parse_args(["encode"] + argv)
    return args.func(args)


def test_train_and_encode_on_ray_byte_identical_to_local(ray_cluster, corpus, tokenizers, reference, tmp_path):
    with open(tokenizers[0], "rb") as a, open(tokenizers[1], "rb") as b:
        assert a.read() == b.read()
    out = str(tmp_path / "ray")
    assert cli_encode(list(corpus) + ["--tokenizer", tokenizers[1], "-o", out, "--executor", "ray",
                                      "--ray-address", ray_cluster, "--unit-rows", str(UNIT_ROWS),
                                      "--shard-tokens", "4000", "-q"]) == 0
    assert tree(out) == reference[1]


def test_killed_worker_is_retried_and_output_identical(ray_cluster, corpus, tokenizers, reference, killed_run):
    out, killed_once = killed_run
    summary = EncodeSummary()
    encode_corpus(corpus, tokenizer=tokenizers[0], output=out, executor="ray", summary=summary, **OPTIONS)
    assert os.path.exists(killed_once)            # the worker on KILLED_UNIT really SIGKILLed itself
    assert summary.units_done == summary.units_total
    assert tree(out) == reference[1]


def test_lock_left_on_another_host(ray_cluster, corpus, tokenizers, reference, tmp_path):
    """A unit lock from another host (a lost node): a Ray-dispatched unit takes it over; a
    local run cannot tell whether that holder is alive, so it stops and says so."""
    for executor in ("local", "ray"):
        out = str(tmp_path / executor)
        os.makedirs(os.path.join(out, "locks"))
        with open(os.path.join(out, "locks", f"{KILLED_UNIT}.lock"), "w") as f:
            json.dump({"host": "lost-node", "pid": 4242}, f)
        if executor == "local":
            with pytest.raises(LockError, match="lost-node"):
                encode_corpus(corpus, tokenizer=tokenizers[0], output=out, workers=1, **OPTIONS)
        else:
            encode_corpus(corpus, tokenizer=tokenizers[0], output=out, executor="ray", **OPTIONS)
            assert tree(out) == reference[1]


def test_corrupt_input_is_the_local_error_not_retried(ray_cluster, corpus, tokenizers, tmp_path):
    with open(corpus[2], "rb") as f:
        blob = f.read()
    bad = tmp_path / "broken.jsonl.zst"
    bad.write_bytes(blob[: len(blob) // 2])
    inputs = [corpus[0], str(bad)]
    with pytest.raises(InputError) as local_error:
        encode_corpus(inputs, tokenizer=tokenizers[0], output=str(tmp_path / "local"), workers=1, **OPTIONS)
    started = time.perf_counter()
    with pytest.raises(InputError) as ray_error:
        encode_corpus(inputs, tokenizer=tokenizers[0], output=str(tmp_path / "ray"), executor="ray", **OPTIONS)
    assert str(ray_error.value) == str(local_error.value)
    assert "broken.jsonl.zst" in str(ray_error.value)
    assert time.perf_counter() - started < 30


def test_ranks_on_mixed_executors_equal_one_run(ray_cluster, corpus, tokenizers, reference, tmp_path):
    out = str(tmp_path / "ranked")
    for rank, executor in ((0, "ray"), (1, "local"), (2, "ray")):
        manifest = encode_corpus(corpus, tokenizer=tokenizers[0], output=out, workers=1, executor=executor,
                                 rank=rank, world_size=3, finalize=rank == 2, **OPTIONS)
    assert manifest["totals"]["shards"] == sum(1 for n in reference[1] if n.endswith(".tokens"))
    assert tree(out) == reference[1]


@pytest.mark.slow
def test_killed_driver_then_rerun_resumes(ray_cluster, corpus, tokenizers, reference, tmp_path):
    out = str(tmp_path / "driver-killed")
    code = (f"from ube_stream.shards import encode_corpus; "
            f"encode_corpus({corpus!r}, tokenizer={tokenizers[0]!r}, output={out!r}, executor='ray', "
            f"ray_address={ray_cluster!r}, **{OPTIONS!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    code, err = kill_when(proc, lambda: len(markers(out)) >= 3, timeout=60)
    assert code == -signal.SIGKILL, err.decode()[-2000:]
    assert not os.path.exists(os.path.join(out, "MANIFEST.json"))
    done_before = len(markers(out))
    summary = EncodeSummary()
    encode_corpus(corpus, tokenizer=tokenizers[0], output=out, executor="ray", summary=summary, **OPTIONS)
    assert summary.units_skipped >= min(done_before, 3) > 0
    assert summary.units_done == summary.units_total - summary.units_skipped
    assert tree(out) == reference[1]


def test_without_ray_the_cli_says_how_to_install(tmp_path, corpus):
    """No Ray installed (simulated): a clear message, nothing written; the shard modules never import Ray."""
    out = str(tmp_path / "out")
    code = ("import sys; sys.modules['ray'] = None\n"
            "import ube_stream.shards, ube_stream.cli.shards\n"
            "from ube_stream.cli import main\n"
            f"sys.exit(main(['encode', {corpus[0]!r}, '--tokenizer', 'missing.json', '-o', {out!r}, "
            f"'--executor', 'ray']))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert 'pip install "ube-stream[ray]"' in run.stderr and "Traceback" not in run.stderr
    assert not os.path.exists(out)
    check = "import sys, ube_stream.shards, ube_stream.cli.shards; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_lost_node_is_survived_byte_identical(corpus, tokenizers, reference, tmp_path):
    """A three-node cluster on this machine (head without CPUs, two one-CPU workers): a worker
    node is removed while encode units run, and later one while train counts; Ray re-runs the
    lost tasks on the surviving node and both outputs equal the local executor's bytes.
    Runs in a child process (its own cluster, not this module's)."""
    import hashlib

    from ube_stream import readers

    spec = {"corpus": corpus, "tokenizer": tokenizers[0], "encode_out": str(tmp_path / "enc"),
            "train_out": str(tmp_path / "tok.json"), "result": str(tmp_path / "result.json"),
            "unit_rows": UNIT_ROWS, "shard_tokens": 4000,
            "units": len(readers.plan_units(readers.resolve_inputs(corpus), unit_rows=UNIT_ROWS)),
            "vocab_size": 512 + 300 + 1}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != "UBE_TEST_KILL_UNIT"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "faults", "ray_lost_node.py"),
                           str(tmp_path / "spec.json")], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(spec["result"]) as f:
        result = json.load(f)
    # each node was lost mid-run: after its first finished unit, with units still to run
    assert [(e["what"], e["killed_after_units"] < e["of"]) for e in result["log"]] == [("encode", True),
                                                                                       ("train", True)]
    assert result["encode_units_done"] == spec["units"]
    expected = {k: None if v is None else hashlib.sha256(v).hexdigest() for k, v in reference[1].items()}
    assert result["encode_tree"] == expected
    with open(tokenizers[0], "rb") as a, open(spec["train_out"], "rb") as b:
        assert a.read() == b.read()


def die_first_time(task):
    """Ray task function: SIGKILL the worker on the first attempt of each task (a marker file
    remembers it), return the task's number on the next."""
    marker, value = task
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return value * 10
    os.kill(os.getpid(), signal.SIGKILL)


def test_lost_tasks_past_rays_retries_are_resubmitted_then_named(ray_cluster, tmp_path):
    """With Ray's own retries off, a worker killed mid-task comes back as WorkerCrashedError:
    the driver submits the task again (same result as one clean run), and once its
    resubmissions are spent too the run stops with WorkerDiedError naming the task."""
    import ray.cloudpickle

    from ube_stream.executors import RayExecutor, WorkerDiedError

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # Ray workers cannot import tests/
    tasks = [(str(tmp_path / f"attempt-{i}"), i) for i in range(3)]
    with pytest.warns(RuntimeWarning, match="was lost .*WorkerCrashedError.*submitting it again"):
        assert RayExecutor(max_retries=0, resubmits=1).map(die_first_time, tasks) == [0, 10, 20]
    again = [(str(tmp_path / f"fresh-{i}"), i) for i in range(1)]
    with pytest.raises(WorkerDiedError, match=r"task .*fresh-0.* was lost 1 times.*WorkerCrashedError"):
        RayExecutor(max_retries=0, resubmits=0).map(die_first_time, again)


def test_verify_on_ray_reports_as_locally(ray_cluster, corpus, tokenizers, reference):
    """verify --shards / --corpus run their units as Ray tasks (each worker loads the tokenizer once from
    its file): the same report as the local pool."""
    from ube_stream.verification import verify_corpus, verify_shards

    local = verify_shards(reference[0], workers=2, show_progress=False)
    on_ray = verify_shards(reference[0], executor="ray", ray_address=ray_cluster, show_progress=False)
    assert local.ok and on_ray.ok and on_ray.to_dict() == local.to_dict()
    assert on_ray.checked["decoded documents"] > 10 * UNIT_ROWS
    report = verify_corpus(corpus, tokenizers[0], executor="ray", ray_address=ray_cluster, show_progress=False)
    assert report.ok and report.checked["documents"] == on_ray.checked["decoded documents"]


@pytest.mark.slow
def test_killed_verification_on_ray_resumes_with_the_same_json(ray_cluster, reference, tmp_path):
    """verify --shards --executor ray, its driver SIGKILLed right after committing one unit's
    result: the same command again dispatches to Ray only the units without a record (never
    the killed one, whose kill point would fire again), and its --json report is byte-identical
    to an uninterrupted local run's."""
    from _helpers import verify_killed_then_resumed

    from ube_stream.cli import main

    clean = str(tmp_path / "clean.json")
    assert main(["verify", "--shards", reference[0], "--json", clean, "-q", "--workers", "1"]) == 0
    with open(os.path.join(reference[0], "MANIFEST.json"), encoding="utf-8") as f:
        units = sorted({r["unit_id"] for r in json.load(f)["shards"]})
    records, first, second, killed_again, (code, err), resumed = verify_killed_then_resumed(
        reference[0], str(tmp_path / "tmp"), units[1], ["--executor", "ray", "--ray-address", ray_cluster])
    assert sorted(first[0]) == units and 0 < records < len(units)
    assert code == 0 and not killed_again, err
    assert len(second) == 1 and units[1] not in second[0] and len(second[0]) == len(units) - records
    with open(clean, "rb") as f:
        assert resumed == f.read()
