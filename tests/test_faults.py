"""Fault injection: corrupt inputs, dead workers, hostile tokenizer files.

Every case must end in a clean error (InputError, TokenizerFormatError,
ShardFormatError, WorkerDiedError) or a counted skip; never a crash, a hang
or wrong data.  Mutation runs happen in a child process, so a segfault or an
abort fails the test instead of killing pytest.
"""
import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from ube_stream import readers
from ube_stream.errors import InputError, TokenizerFormatError
from ube_stream.tokenizer import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = os.path.join(ROOT, "tests", "faults", "mutate_inputs.py")


def _child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_mutations(fmt, cases, seed, tmp_path):
    proc = subprocess.run([sys.executable, CHILD, fmt, str(cases), str(seed), str(tmp_path)],
                          check=False, capture_output=True, text=True, timeout=600, env=_child_env(), cwd=ROOT)
    assert proc.returncode == 0, f"the reader crashed the process (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- random byte mutations, per format

@pytest.mark.parametrize("fmt", ["arrow", "arrows", "feather", "parquet", "jsonl.gz", "jsonl.zst"])
def test_mutated_files_never_crash_small(fmt, tmp_path):
    """40 mutants per format in the default suite (the slow test runs 300)."""
    result = run_mutations(fmt, 40, 7, tmp_path)
    assert result["n_bad"] == 0, result["bad"]
    tally = result["tally"]
    assert sum(v for k, v in tally.items() if k.startswith("skip/")) == 40
    assert not any("OTHER" in k for k in tally), tally
    _no_silent_change_where_checksummed(fmt, tally)


def _no_silent_change_where_checksummed(fmt, tally):
    """Formats with checksums (Parquet with page CRCs, gzip, zstd with its frame checksum) never
    give other text than written without an error or a count; Arrow IPC/Feather have none."""
    if fmt in ("parquet", "jsonl.gz", "jsonl.zst"):
        assert not any(k.endswith("/ok_changed") for k in tally), tally


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["arrow", "arrows", "feather", "parquet", "jsonl.gz", "jsonl.zst"])
def test_mutated_files_never_crash(fmt, tmp_path):
    result = run_mutations(fmt, 300, 1, tmp_path)
    print(fmt, json.dumps(result["tally"]))
    assert result["n_bad"] == 0, result["bad"]
    assert not any("OTHER" in k for k in result["tally"]), result["tally"]
    _no_silent_change_where_checksummed(fmt, result["tally"])


def _arrow_with_bad_offsets(path):
    """An Arrow IPC file whose string offsets point far past the data buffer."""
    import pyarrow as pa
    from pyarrow import ipc

    table = pa.table({"text": ["alpha", "beta", "gamma", "delta"]})
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table)
    raw = bytearray(Path(path).read_bytes())
    # the offsets buffer holds int32 0,5,9,14,19: make the third one huge
    needle = (0).to_bytes(4, "little") + (5).to_bytes(4, "little") + (9).to_bytes(4, "little")
    at = raw.index(needle)
    raw[at + 8:at + 12] = (0x7FFFFF00).to_bytes(4, "little")
    Path(path).write_bytes(bytes(raw))


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_arrow_offsets_beyond_data_are_a_corrupt_file(tmp_path, on_error):
    path = str(tmp_path / "bad.arrow")
    _arrow_with_bad_offsets(path)
    code = textwrap.dedent(f"""
        from ube_stream import readers
        from ube_stream.errors import InputError
        skips = readers.SkipCounter()
        try:
            got = list(readers.iter_texts({path!r}, on_error={on_error!r}, skips=skips))
            print("ok", len(got), dict(skips.counts))
        except InputError as exc:
            print("InputError", exc.reason, str(exc)[:300])
    """)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                          env=_child_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if on_error == "raise":
        assert proc.stdout.startswith("InputError corrupt_file") and path in proc.stdout
    else:
        assert proc.stdout.split()[:2] == ["ok", "0"] and "corrupt_file" in proc.stdout


def test_gzip_damage_discards_the_whole_unit_under_skip(tmp_path):
    import gzip

    texts = [f"line {i} " * 20 for i in range(500)]
    raw = bytearray(gzip.compress("".join(json.dumps({"text": t}) + "\n" for t in texts).encode()))
    raw[-6] ^= 0xFF          # the CRC-32 trailer: every byte of the content decodes, the checksum fails
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(bytes(raw))
    skips = readers.SkipCounter()
    assert list(readers.iter_texts(str(path), on_error="skip", skips=skips)) == []
    assert skips.counts == {"corrupt_file": 500}
    with pytest.raises(InputError, match="bad.jsonl.gz"):
        list(readers.iter_texts(str(path)))


# ---------------------------------------------------------------- hostile JSON Lines rows

@pytest.mark.parametrize("line", ['{"text": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"text": "a", "n": ' + "7" * 5000 + "}"],
                         ids=["deep-nesting", "5000-digit-int"])
def test_hostile_json_row_is_one_counted_skip(tmp_path, line):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "before"}\n' + line + '\n{"text": "after"}\n')
    skips = readers.SkipCounter()
    assert list(readers.iter_texts(str(path), on_error="skip", skips=skips)) == ["before", "after"]
    assert skips.counts == {"invalid_json": 1}
    assert skips.examples[0].row == 1 and skips.examples[0].offset == len('{"text": "before"}\n')
    with pytest.raises(InputError, match=r"rows\.jsonl: row 1 \(byte offset 19\)"):
        list(readers.iter_texts(str(path)))


# ---------------------------------------------------------------- hostile tokenizer files

def _tokenizer_doc(merges, pattern=("gpt2", None)):
    tok = Tokenizer(substrate="ube", merges=[])
    doc = json.loads(tok.to_json())
    doc["merges"] = merges
    if pattern[0] == "custom":
        doc["pattern"] = {"name": "custom", "regex": pattern[1]}
    return doc


def _refit(doc):
    """Give a hand-edited document the fingerprint and vocab_size of its content (a hostile file
    would do the same), so only the new checks can refuse it."""
    from ube_stream.tokenizer import file_format

    content = {k: doc[k] for k in ("format", "version", "substrate", "pattern", "normalization", "base_size",
                                   "merges", "special_tokens")}
    doc["fingerprint"] = file_format.fingerprint(content)
    return doc


def test_doubling_merge_bomb_is_refused_quickly(tmp_path):
    merges = [[97, 97]] + [[512 + i, 512 + i] for i in range(39)]
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(_refit(_tokenizer_doc(merges))))
    assert path.stat().st_size < 2000
    t0 = time.perf_counter()
    with pytest.raises(TokenizerFormatError, match=r"merge 16 .* makes a token of 131072 base symbols"):
        Tokenizer.load(path)
    assert time.perf_counter() - t0 < 1.0


def test_redos_pattern_from_a_file_is_stopped_within_a_second(tmp_path):
    doc = _refit(_tokenizer_doc([], pattern=("custom", r"(a|a)*$")))
    doc["vocab_size"] = 513
    path = tmp_path / "redos.json"
    path.write_text(json.dumps(doc))
    tok = Tokenizer.load(path)
    text = "a" * 40 + "b"
    t0 = time.perf_counter()
    with pytest.raises(TokenizerFormatError, match="time budget.*trust_pattern=True"):
        tok.encode(text)
    assert time.perf_counter() - t0 < 3.0   # budget 0.1 s; the regex module checks its clock coarsely
    # the same pattern on harmless text works, and a trusted load runs without a budget
    assert tok.decode(tok.encode("xyz")) == "xyz"
    assert Tokenizer.load(path, trust_pattern=True).trust_pattern is True


@pytest.mark.parametrize("field,value,named", [
    ("merges", [[97, 97.0]], "merges[0]"),
    ("merges", [[True, 97]], "merges[0]"),
    ("merges", [[97]], "merges[0]"),
    ("merges", {"a": 1}, "merges"),
    ("substrate", "utf32", "substrate"),
    ("base_size", 256, "base_size"),
    ("special_tokens", [{"id": "512", "text": "x"}], "special_tokens[0]"),
    ("pattern", "gpt2", "pattern"),
    ("vocab_size", 10 ** 40, "vocab_size"),
    ("id_map", [0.5], "id_map"),
])
def test_malformed_tokenizer_fields_name_the_field(tmp_path, field, value, named):
    doc = _tokenizer_doc([])
    doc[field] = value
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFormatError) as info:
        Tokenizer.load(path)
    assert f"field {named!r}" in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"format": ' + "9" * 5000 + "}"])
def test_unreadable_tokenizer_json_is_a_format_error(tmp_path, text):
    path = tmp_path / "tok.json"
    path.write_text(text)
    with pytest.raises(TokenizerFormatError, match=str(path)):
        Tokenizer.load(path)


def test_missing_special_token_field_is_a_format_error(tmp_path):
    doc = _tokenizer_doc([])
    doc["special_tokens"] = [{"text": "<|endoftext|>"}]
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFormatError, match=r"special_tokens\[0\]"):
        Tokenizer.load(path)


# ---------------------------------------------------------------- dead workers

def die_once(task):
    """Task function: the worker running ``task[1] == 3`` SIGKILLs itself (once, or always)."""
    import signal

    marker, x, always = task
    if x == 3:
        try:
            if not always:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.kill(os.getpid(), signal.SIGKILL)
        except FileExistsError:
            pass
    return x * 10


def exit_with_code(task):
    if task == 2:
        os._exit(3)
    return task


START_METHODS = pytest.mark.parametrize("method", ["spawn", "fork"])


@START_METHODS
def test_killed_worker_is_retried_once_and_results_are_identical(tmp_path, method):
    from ube_stream.executors import LocalExecutor, start_method

    marker = str(tmp_path / "died")
    tasks = [(marker, x, False) for x in range(8)]
    with start_method(method), pytest.warns(RuntimeWarning, match=r"died \(it was killed by SIGKILL"):
        assert LocalExecutor(2).map(die_once, tasks) == [x * 10 for x in range(8)]
    assert os.path.exists(marker)


@START_METHODS
def test_worker_killed_twice_stops_the_run_fast_naming_task_and_signal(tmp_path, method):
    from ube_stream.executors import LocalExecutor, WorkerDiedError, start_method

    t0 = time.perf_counter()
    with start_method(method), pytest.warns(RuntimeWarning), \
            pytest.raises(WorkerDiedError, match=r"running task \(.*, 3, True\) died \(it was killed by SIGKILL"):
        LocalExecutor(2).map(die_once, [(str(tmp_path / "m"), x, True) for x in range(8)])
    assert time.perf_counter() - t0 < 60


@START_METHODS
def test_worker_exit_code_is_named(method):
    from ube_stream.executors import LocalExecutor, WorkerDiedError, start_method

    with start_method(method), pytest.warns(RuntimeWarning), \
            pytest.raises(WorkerDiedError, match="task 2 died .it exited with code 3"):
        LocalExecutor(2).map(exit_with_code, range(4))


@START_METHODS
def test_encode_with_a_sigkilled_worker_is_byte_identical(tmp_path, monkeypatch, docs_rows, method):
    from _helpers import tree

    from ube_stream import encode_corpus, train
    from ube_stream.executors import start_method

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        rows = docs_rows[i::3][:60]
        (corpus / f"part-{i}.jsonl").write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in rows))
    tok = train(str(corpus), vocab_size=600, workers=1, show_progress=False)
    clean = tmp_path / "clean"
    encode_corpus(str(corpus), tokenizer=tok, output=str(clean), workers=1, unit_rows=20, show_progress=False)
    killed = tmp_path / "killed"
    unit = "00001-000000000020"
    monkeypatch.setenv("UBE_TEST_KILL_UNIT", f"{killed}|{unit}|{tmp_path / 'marker'}")
    with start_method(method), pytest.warns(RuntimeWarning, match=f"unit {unit}"):
        encode_corpus(str(corpus), tokenizer=tok, output=str(killed), workers=2, unit_rows=20,
                      show_progress=False)
    assert (tmp_path / "marker").exists()
    assert tree(str(killed)) == tree(str(clean))


def test_unguarded_main_script_fails_once_with_the_guard(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"line {i} alpha beta\n" for i in range(400)))
    script = tmp_path / "quick.py"
    script.write_text(textwrap.dedent(f"""
        import ube_stream
        tok = ube_stream.train({str(corpus)!r}, vocab_size=600, workers=2, unit_rows=100, show_progress=False)
        print("trained", tok.vocab_size)
    """))
    proc = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120,
                          env=_child_env(), cwd=str(tmp_path))
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr
    assert "WorkerDiedError" in proc.stderr
    assert len(proc.stderr.splitlines()) < 200, proc.stderr[-2000:]


# ---------------------------------------------------------------- ranks racing with different options

def test_racing_plans_with_different_options_never_both_pass(tmp_path):
    """Many rounds of two ranks checking their run plans at the same instant: exactly one passes."""
    import threading

    from ube_stream.errors import ShardFormatError
    from ube_stream.shards.encode import _check_or_write_plan

    tok = types.SimpleNamespace(to_json=lambda: "{}")   # only its file is written
    for round_ in range(30):
        out = tmp_path / f"out{round_}"
        (out / "units").mkdir(parents=True)
        barrier = threading.Barrier(2)
        outcome = {}

        def rank(name, eos, out=out, barrier=barrier, outcome=outcome):
            barrier.wait()
            try:
                _check_or_write_plan(str(out), {"options": {"eos_token": eos}, "units": ["u0", "u1"]}, tok)
                outcome[name] = "ok"
            except ShardFormatError as exc:
                assert "options.eos_token differ" in str(exc)
                outcome[name] = "refused"

        threads = [threading.Thread(target=rank, args=("a", "<|endoftext|>")),
                   threading.Thread(target=rank, args=("b", None))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcome.values()) == ["ok", "refused"], (round_, outcome)
        recorded = json.loads((out / "units" / "_plan.json").read_text())
        winner = "a" if outcome["a"] == "ok" else "b"
        assert recorded["options"]["eos_token"] == {"a": "<|endoftext|>", "b": None}[winner]
        assert [p.name for p in (out / "units").iterdir()] == ["_plan.json"]   # no temp files left


# ---------------------------------------------------------------- corrupt shard directories

@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    from ube_stream import encode_corpus, train

    root = tmp_path_factory.mktemp("shards")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i} h\u00e9llo w\u00f6rld \u4e16\u754c " * (1 + i % 5)}) + "\n"
                              for i in range(200)))
    tok = train(str(corpus), vocab_size=700, workers=1, show_progress=False)
    out = root / "out"
    encode_corpus(str(corpus), tokenizer=tok, output=str(out), workers=1, unit_rows=50, show_progress=False)
    return str(out)


def _copy(src, tmp_path):
    import shutil

    dst = str(tmp_path / "copy")
    shutil.copytree(src, dst)
    return dst


def _index_of(d, k=1):
    manifest = json.loads(Path(os.path.join(d, "MANIFEST.json")).read_text())
    entry = manifest["shards"][k]
    return manifest, entry, os.path.join(d, entry["index_file"]), os.path.join(d, entry["tokens_file"])


def _poke(path, offset, array):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(array.tobytes())


def _middle_offset_decreases(d):
    import numpy as np

    _, _, idx, _ = _index_of(d)
    _poke(idx, 128 + 8 * 3, np.array([1], "<u8"))
    return "doc_offsets decrease at document 2"


def _rows_repeat(d):
    import numpy as np

    _, entry, idx, _ = _index_of(d)
    n = entry["documents"]
    _poke(idx, 128 + 8 * (n + 1) + 8 * 4, np.array([0], "<u8"))
    return "rows are not increasing"


def _source_id_out_of_range(d):
    import numpy as np

    _, entry, idx, _ = _index_of(d)
    n = entry["documents"]
    _poke(idx, 128 + 16 * n + 8 + 4 * 2, np.array([7], "<u4"))
    return "source id 7"


def _bound_beyond_vocab(d):
    import numpy as np

    _, _, idx, _ = _index_of(d)
    _poke(idx, 96, np.array([0xFFFFFFFF + 1], "<u8"))
    return "token ids up to 4294967295"


def _path_outside(relative):
    def corrupt(d):
        manifest, _, _, _ = _index_of(d)
        manifest["shards"][1]["tokens_file"] = relative
        Path(os.path.join(d, "MANIFEST.json")).write_text(json.dumps(manifest))
        return "inside the directory"
    corrupt.__name__ = f"path_{relative}"
    return corrupt


def _documents_not_int(d):
    manifest, _, _, _ = _index_of(d)
    manifest["shards"][0]["documents"] = "12"
    Path(os.path.join(d, "MANIFEST.json")).write_text(json.dumps(manifest))
    return r"field 'shards\[0\]\.documents' must be a non-negative integer"


def _shards_not_list(d):
    manifest, _, _, _ = _index_of(d)
    manifest["shards"] = {"a": 1}
    Path(os.path.join(d, "MANIFEST.json")).write_text(json.dumps(manifest))
    return "field 'shards' must be a list"


@pytest.mark.parametrize("corrupt", [_middle_offset_decreases, _rows_repeat, _source_id_out_of_range,
                                     _bound_beyond_vocab, _path_outside("../../etc/passwd"),
                                     _path_outside("/etc/passwd"), _documents_not_int, _shards_not_list],
                         ids=lambda f: f.__name__)
def test_corrupt_index_is_rejected_at_verify_header(shard_dir, tmp_path, corrupt):
    from ube_stream.errors import ShardFormatError
    from ube_stream.shards import TokenShards

    d = _copy(shard_dir, tmp_path)
    TokenShards(d)   # the copy is fine before the damage
    words = corrupt(d)
    with pytest.raises(ShardFormatError, match=words):
        TokenShards(d, verify="header")


def test_ids_beyond_vocab_with_consistent_checksums_rejected(shard_dir, tmp_path):
    """A token file rewritten with id 2**32-1 and every checksum updated to match."""
    import hashlib

    import numpy as np

    from ube_stream.errors import ShardFormatError
    from ube_stream.shards import TokenShards

    d = _copy(shard_dir, tmp_path)
    manifest, _, idx, tokens_path = _index_of(d)
    _poke(tokens_path, 4 * 5, np.array([0xFFFFFFFF], "<u4"))
    digest = hashlib.sha256(Path(tokens_path).read_bytes()).digest()
    _poke(idx, 32, np.frombuffer(digest, np.uint8))
    manifest["shards"][1]["sha256"] = digest.hex()
    Path(os.path.join(d, "MANIFEST.json")).write_text(json.dumps(manifest))
    TokenShards(d, verify="header")          # the header's bound is still honest: cheap check passes
    with pytest.raises(ShardFormatError, match="holds token id 4294967295"):
        TokenShards(d, verify="full")
    _poke(idx, 96, np.array([0xFFFFFFFF + 1], "<u8"))   # a header that tells the truth is refused cheaply
    with pytest.raises(ShardFormatError, match="token ids up to 4294967295"):
        TokenShards(d, verify="header")


def test_version_1_indexes_are_still_read(shard_dir, tmp_path):
    import numpy as np

    from ube_stream.shards import TokenShards

    d = _copy(shard_dir, tmp_path)
    manifest = json.loads(Path(os.path.join(d, "MANIFEST.json")).read_text())
    for entry in manifest["shards"]:
        idx = os.path.join(d, entry["index_file"])
        _poke(idx, 8, np.array([1], "<u4"))
        _poke(idx, 96, np.zeros(8, np.uint8))
        del entry["index_sha256"]   # a version-1 directory's MANIFEST records no index checksum
    Path(os.path.join(d, "MANIFEST.json")).write_text(json.dumps(manifest))
    new, old = TokenShards(d, verify="full"), TokenShards(shard_dir)
    assert len(new) == len(old) and all(np.array_equal(new.doc(i), old.doc(i)) for i in range(len(old)))


# ---------------------------------------------------------------- disk full

@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs (needs root: mount); skipped with the reason otherwise."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the disk-full test needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_disk_full_names_path_free_space_and_keeps_committed_files(tiny_disk):
    from ube_stream.errors import StorageError

    tok = Tokenizer(substrate="ube", merges=[(97, 98)])
    target = tiny_disk / "tok.json"
    tok.save(target)
    before = target.read_bytes()
    (tiny_disk / "filler").write_bytes(b"x" * (256 * 1024 - len(before) - 4096 * 2))
    big = Tokenizer(substrate="ube", merges=[(a, b) for a in range(100) for b in range(200)])
    with pytest.raises(StorageError) as info:
        big.save(target)
    message = str(info.value)
    assert str(target) in message and "No space left on device" in message
    assert "free on that file system" in message and "free space" in message
    assert isinstance(info.value, OSError) and info.value.errno == 28
    assert target.read_bytes() == before                      # the committed file is untouched
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler", "tok.json"]   # no temp file left


def test_encode_onto_a_full_disk_is_a_storage_error(tiny_disk, tmp_path):
    from ube_stream import encode_corpus
    from ube_stream.errors import StorageError

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i} abcdefghijklmnopqrstuvwxyz\n" for i in range(20000)))
    tok = Tokenizer(substrate="ube", merges=[(97, 98)])
    with pytest.raises(StorageError, match=r"No space left on device .* free on that file system"):
        encode_corpus(str(corpus), tokenizer=tok, output=str(tiny_disk / "out"), workers=1, unit_rows=5000,
                      show_progress=False)


# ---------------------------------------------------------------- Parquet damage, by row group

def _parquet_with_a_damaged_row_group(path, compression, damaged=2, rows=1000, group_rows=200):
    """A Parquet file of ``rows // group_rows`` row groups whose group ``damaged`` has its
    pages overwritten in the middle (byte ranges from the file's own metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"row {i}: h\u00e9llo \u4e16\u754c " + "xyz" * (i % 50) for i in range(rows)]
    pq.write_table(pa.table({"n": list(range(rows)), "text": texts}), path, row_group_size=group_rows,
                   compression=compression, write_page_checksum=compression == "none")
    chunk = pq.ParquetFile(path).metadata.row_group(damaged).column(1)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    raw = bytearray(Path(path).read_bytes())
    middle = start + chunk.total_compressed_size // 2
    for k in range(middle, middle + 32):
        raw[k] ^= 0x5A
    Path(path).write_bytes(bytes(raw))
    return texts


@pytest.mark.parametrize("compression", ["snappy", "zstd", "none"])
def test_parquet_damage_drops_only_its_row_group(tmp_path, compression):
    path = str(tmp_path / "groups.parquet")
    texts = _parquet_with_a_damaged_row_group(path, compression)
    skips = readers.SkipCounter()
    got = list(readers.iter_texts(path, on_error="skip", skips=skips))
    assert got == texts[:400] + texts[600:]                 # the groups before and after are kept
    assert skips.counts == {"corrupt_row_group": 200}       # counted by its rows, not one corrupt_file
    assert "row group 2 (rows 400..599)" in skips.examples[0].message
    with pytest.raises(InputError, match=r"groups\.parquet: Parquet row group 2 \(rows 400\.\.599\) is damaged") as info:
        list(readers.iter_texts(path))
    assert info.value.reason == "corrupt_row_group" and info.value.row == 400


def test_parquet_damaged_row_group_split_across_units(tmp_path):
    """Units cut inside row groups: each unit drops (and counts) only its own rows of the damaged group.
    (plan_units cuts Parquet at row groups only; a unit of any row range is still read right.)"""
    path = str(tmp_path / "groups.parquet")
    texts = _parquet_with_a_damaged_row_group(path, "snappy")
    (source,) = readers.resolve_inputs(path)
    units = [readers.WorkUnit(source, start, min(start + 150, source.num_rows))
             for start in range(0, source.num_rows, 150)]
    kept, counted = [], {}
    for unit in units:
        skips = readers.SkipCounter()
        for batch in readers.read_unit(unit, column="text", text_mode="line", on_error="skip", skips=skips):
            kept.extend(batch.texts if isinstance(batch.texts, list) else batch.texts.to_pylist())
        counted[unit.row_start] = skips.total
    assert kept == texts[:400] + texts[600:]
    assert {r: n for r, n in counted.items() if n} == {300: 50, 450: 150}


def test_parquet_big_row_group_passes_on_parts_and_counts_the_rest(tmp_path, monkeypatch):
    """A group bigger than the hold is passed on as it decodes; damage then drops (and counts)
    the rest of it, so rows kept + rows counted is still every row, each kept row as written."""
    from ube_stream.readers import columnar

    monkeypatch.setattr(columnar, "ROW_GROUP_HOLD_BYTES", 1)
    path = str(tmp_path / "groups.parquet")
    texts = _parquet_with_a_damaged_row_group(path, "none")
    (unit,) = readers.plan_units(readers.resolve_inputs(path), unit_rows=None)
    skips = readers.SkipCounter()
    kept = [t for batch in readers.read_unit(unit, column="text", text_mode="line", on_error="skip", skips=skips,
                                             batch_rows=50)
            for t in (batch.texts if isinstance(batch.texts, list) else batch.texts.to_pylist())]
    assert len(kept) + skips.counts["corrupt_row_group"] == len(texts) and set(skips.counts) == {"corrupt_row_group"}
    passed = len(kept) - 800                       # rows of the damaged group 2 passed on before the damage
    assert 0 <= passed < 200 and kept == texts[:400 + passed] + texts[600:]
