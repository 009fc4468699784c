"""Hostile and corrupt non-corpus files (issue 26): every row of the attack table
has a test here that failed on main and passes now.  The mutation fuzzing of
each file kind runs in a child process (tests/faults/mutate_files.py) under a
memory and a time cap."""

import base64
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ube_stream.errors import ShardFormatError, StorageError, TokenizerFormatError, UbeError

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    path = root / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": f"document {i} h\u00e9llo w\u00f6rld \u4e16\u754c " * (1 + i % 5)})
                            + "\n" for i in range(200)))
    return path


@pytest.fixture(scope="module")
def tok(corpus):
    from ube_stream import train

    return train(str(corpus), vocab_size=700, workers=1, show_progress=False)


@pytest.fixture(scope="module")
def shard_dir(corpus, tok, tmp_path_factory):
    from ube_stream import encode_corpus

    out = tmp_path_factory.mktemp("hostile_out") / "out"
    encode_corpus(str(corpus), tokenizer=tok, output=str(out), workers=1, unit_rows=50, show_progress=False)
    return str(out)


@pytest.fixture
def copy(shard_dir, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(shard_dir, dst)
    return str(dst)


def _manifest(d):
    return json.loads(Path(d, "MANIFEST.json").read_text())


def _write_manifest(d, manifest):
    Path(d, "MANIFEST.json").write_text(json.dumps(manifest))


def _limited(limit_bytes):
    """preexec_fn: cap the child's address space."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


def _child(code, *, memory=2 << 30, timeout=60, env=None):
    """Run ``code`` in a fresh interpreter (worktree first on the path) under a memory cap."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, preexec_fn=_limited(memory), env=dict(os.environ, **(env or {})))


def _refusal_in_child(call):
    """Run the statement ``call`` (``Tokenizer`` and ``as_tokenizer`` are imported) in a child under the
    memory cap; returns what it printed: ``refused: <error class> <message>`` for a UbeError."""
    out = _child(f"""
from ube_stream.errors import UbeError
from ube_stream.tokenizer import Tokenizer, as_tokenizer
try:
    {call}
except UbeError as exc:
    print("refused:", type(exc).__name__, exc)
""")
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


# ---------------------------------------------------------------- row: ids of 2**31 in tokenizer files

def test_id_map_with_a_huge_id_is_refused_before_any_allocation(tok, tmp_path):
    """Our own file: one id_map entry of 2**31 made `np.full(2**31 + 1)` (16 GiB); now
    a TokenizerFormatError naming the bound, in a child capped at 2 GiB."""
    doc = json.loads(tok.to_json())
    n = tok.vocab_size
    doc["id_map"] = list(range(n - 1)) + [2**31]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    assert path.stat().st_size < 64_000
    printed = _refusal_in_child(f"Tokenizer.load({str(path)!r})")
    assert "refused: TokenizerFormatError" in printed and "model id 2147483648" in printed \
        and f"up to {2 * n + 1023}" in printed


def test_a_sparse_id_map_within_the_bound_still_loads(tok):
    from ube_stream.tokenizer import Tokenizer
    from ube_stream.tokenizer.core import max_model_id

    doc = json.loads(tok.to_json())
    n = tok.vocab_size
    ids = list(range(n))
    ids[-1] = max_model_id(n)   # the largest id allowed: a gap, as existing models have
    loaded = Tokenizer(substrate=doc["substrate"], merges=doc["merges"],
                       special_tokens={s["text"]: s["id"] for s in doc["special_tokens"]}, id_map=ids)
    assert loaded.special_tokens["<|endoftext|>"] == max_model_id(n)
    with pytest.raises(TokenizerFormatError, match="twice its size"):
        Tokenizer(substrate=doc["substrate"], merges=doc["merges"],
                  special_tokens={s["text"]: s["id"] for s in doc["special_tokens"]},
                  id_map=ids[:-1] + [max_model_id(n) + 1])


@pytest.mark.parametrize("where", ["added_token", "vocab"])
def test_hf_id_of_2_pow_31_is_refused_under_a_memory_cap(corpus, tmp_path, where):
    from ube_stream import train

    doc = train(str(corpus), vocab_size=400, workers=1, show_progress=False, substrate="utf8").to_hf_dict()
    if where == "added_token":
        doc["added_tokens"][0]["id"] = 2**31
    else:
        doc["model"]["vocab"][list(doc["model"]["vocab"])[-1]] = 2**31
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    printed = _refusal_in_child(f"Tokenizer.from_hf({str(path)!r})")
    # refused while the file is read (pretrained.py names the field), before any table is sized by the id
    assert "refused: TokenizerFormatError" in printed and str(path) in printed and "id 2147483648" in printed


def test_rank_and_hf_files_are_read_bounded(tmp_path):
    """A gzip bomb named as a tiktoken rank file is refused while it inflates (not after), and a device
    named as a HF tokenizer.json or a rank file is refused before any byte is read."""
    import gzip

    from ube_stream.tokenizer import Tokenizer
    from ube_stream.tokenizer.pretrained import read_maybe_gzip

    bomb = tmp_path / "bomb.tiktoken.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        for _ in range(300):
            f.write(bytes(1 << 20))      # 300 MiB of zeros: about 300 KB on disk
    assert bomb.stat().st_size < 2 << 20
    with pytest.raises(TokenizerFormatError, match="inflates to more than"):
        read_maybe_gzip(bomb)
    with pytest.raises(TokenizerFormatError, match="inflates to more than"):
        Tokenizer.from_tiktoken(str(bomb), pattern="cl100k")
    truncated = tmp_path / "cut.tiktoken.gz"
    truncated.write_bytes(gzip.compress(b"IQ== 0\n" * 1000)[:-12])
    with pytest.raises(TokenizerFormatError, match="truncated gzip"):
        read_maybe_gzip(truncated)
    for load in (Tokenizer.from_hf, read_maybe_gzip):
        with pytest.raises(TokenizerFormatError, match="not a regular file"):
            load("/dev/zero")


def test_tiktoken_rank_of_2_pow_31_is_refused_under_a_memory_cap(tmp_path):
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines.append(f"{base64.b64encode(b'ab').decode()} {2**31}")
    path = tmp_path / "hostile.tiktoken"
    path.write_text("\n".join(lines) + "\n")
    assert "refused: TokenizerFormatError" in _refusal_in_child(f"as_tokenizer({str(path)!r}, pattern='gpt2')")


def test_hostile_tokenizer_in_a_shard_directory_is_a_shard_format_error(copy, tok, tmp_path):
    """`ube inspect` / TokenShards load the directory's tokenizer.json: same bound."""
    doc = json.loads(tok.to_json())
    doc["id_map"] = list(range(tok.vocab_size - 1)) + [2**31]
    Path(copy, "tokenizer.json").write_text(json.dumps(doc))
    out = _child(f"""
from ube_stream.cli.main import main
raise SystemExit(main(["inspect", {copy!r}]))
""")
    assert out.returncode == 1, (out.stdout, out.stderr[-2000:])
    assert "model id 2147483648" in out.stderr and "Traceback" not in out.stderr


# ---------------------------------------------------------------- row: MANIFEST tokenizer.file

@pytest.mark.parametrize("name", ["/dev/zero", "../../etc/passwd", "link-to-dev-zero", "fifo"])
def test_manifest_tokenizer_file_outside_or_not_a_file_is_refused_unread(copy, name):
    from ube_stream.shards import TokenShards
    from ube_stream.verification import verify_shards

    if name == "link-to-dev-zero":
        os.symlink("/dev/zero", os.path.join(copy, name))
    if name == "fifo":
        os.mkfifo(os.path.join(copy, name))   # reading it would block forever
    manifest = _manifest(copy)
    manifest["tokenizer"]["file"] = name
    _write_manifest(copy, manifest)
    started = time.perf_counter()
    with pytest.raises(ShardFormatError, match="tokenizer.file"):
        TokenShards(copy)
    with pytest.raises(ShardFormatError, match="tokenizer.file"):
        verify_shards(copy, workers=1, show_progress=False)
    assert time.perf_counter() - started < 5


def test_tokenizer_file_that_is_a_device_or_huge_is_refused_before_reading(tmp_path):
    from ube_stream import storage
    from ube_stream.tokenizer import Tokenizer

    with pytest.raises(TokenizerFormatError, match="not a regular file"):
        Tokenizer.load("/dev/zero")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(storage.MAX_JSON_BYTES + 1)   # sparse: no disk used
    with pytest.raises(TokenizerFormatError, match="more than the"):
        Tokenizer.load(str(big))


@pytest.mark.parametrize("name", ["MANIFEST.json", "tokenizer.json"])
def test_a_named_pipe_in_place_of_a_json_file_is_refused_not_waited_on(copy, name):
    """A FIFO named MANIFEST.json (or the tokenizer file) blocked ``open`` until a
    writer came (forever): ``read_bounded`` opens without blocking, then refuses
    what is not a regular file.  The alarm turns a hang into a failure."""
    from ube_stream.shards import TokenShards
    from ube_stream.tokenizer import Tokenizer

    os.unlink(os.path.join(copy, name))
    os.mkfifo(os.path.join(copy, name))
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on the pipe"))
    signal.alarm(10)
    try:
        with pytest.raises(UbeError, match=f"{name}: the .* is not a regular file"):
            if name == "MANIFEST.json":
                TokenShards(copy)
            else:
                Tokenizer.load(os.path.join(copy, name))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


# ---------------------------------------------------------------- row: corrupt tokens served

def _shard_paths(d, k=1):
    entry = _manifest(d)["shards"][k]
    return os.path.join(d, entry["tokens_file"]), os.path.join(d, entry["index_file"]), entry


def _poke(path, offset, raw):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(raw)


def _all_samples(ds):
    return [ds[k] for k in range(len(ds))]


def test_one_out_of_vocabulary_id_is_never_served(copy, tok, tmp_path):
    from ube_stream.loader import TokenDataset, export_megatron

    tokens, _, _ = _shard_paths(copy)
    _poke(tokens, 4 * 3, np.array([tok.vocab_size + 5], "<u4").tobytes())
    for verify in ("none", "header"):   # the per-sample check runs at every level
        ds = TokenDataset(copy, 16, shuffle=False, verify=verify)
        with pytest.raises(ShardFormatError, match=f"token 3 is id {tok.vocab_size + 5}, outside the vocabulary"):
            _all_samples(ds)
    with pytest.raises(ShardFormatError, match=f"holds token id {tok.vocab_size + 5} .* the vocabulary has"):
        TokenDataset(copy, 16, verify="full")
    with pytest.raises(ShardFormatError, match="outside the vocabulary"):
        export_megatron(copy, str(tmp_path / "out" / "x"))
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("damage", ["flipped_bit", "all_zero"])
def test_in_vocabulary_corruption_is_caught_by_verify_full_and_export(copy, tmp_path, damage):
    from ube_stream.loader import TokenDataset, export_megatron

    tokens, _, _ = _shard_paths(copy)
    raw = bytearray(Path(tokens).read_bytes())
    if damage == "flipped_bit":
        raw[9] ^= 0x01
    else:
        raw[:] = bytes(len(raw))
    Path(tokens).write_bytes(bytes(raw))
    with pytest.raises(ShardFormatError, match="sha256 is|holds token id 0 .*the token file is corrupt"):
        TokenDataset(copy, 16, verify="full")
    with pytest.raises(ShardFormatError, match="sha256"):
        export_megatron(copy, str(tmp_path / "out" / "x"))
    assert os.listdir(tmp_path / "out") == []


def test_a_middle_doc_offset_moved_by_one_is_caught_by_the_index_checksum(copy, tmp_path):
    from ube_stream.loader import export_megatron
    from ube_stream.shards import TokenShards
    from ube_stream.verification import verify_shards

    _, index, entry = _shard_paths(copy)
    assert entry["index_sha256"] == hashlib.sha256(Path(index).read_bytes()).hexdigest()
    at = 128 + 8 * 5
    value = int(np.frombuffer(Path(index).read_bytes()[at:at + 8], "<u8")[0])
    _poke(index, at, np.array([value + 1], "<u8").tobytes())
    TokenShards(copy, verify="header")   # still ordered: the cheap checks cannot see it
    with pytest.raises(ShardFormatError, match="index .*changed after encoding"):
        TokenShards(copy, verify="full")
    report = verify_shards(copy, workers=1, show_progress=False)
    assert not report.ok and "checksums" in report.failed
    with pytest.raises(ShardFormatError, match="changed after encoding"):
        export_megatron(copy, str(tmp_path / "out" / "x"))


def test_manifest_without_index_checksums_still_reads(copy):
    from ube_stream.shards import TokenShards

    manifest = _manifest(copy)
    for entry in manifest["shards"]:
        del entry["index_sha256"]
    _write_manifest(copy, manifest)
    reader = TokenShards(copy, verify="full")
    assert len(reader) == 200


# ---------------------------------------------------------------- row: class-table cache

CLASS_TABLE_CHILD = """
import json, sys
from ube_stream.tokenizer import Tokenizer
tok = Tokenizer.load(sys.argv[1])
texts = ["h\\u00e9llo w\\u00f6rld 123 \\u4e16\\u754c!", "Stra\\u00dfe  \\t\\n caf\\u00e9 42x"]
print(json.dumps([tok.encode(t).tolist() for t in texts]))
"""


def test_flipped_bytes_in_the_class_table_cache_never_change_encoding(tok, tmp_path):
    cache = tmp_path / "cache"
    tok_path = tmp_path / "tok.json"
    tok.save(str(tok_path))

    def encode():
        out = subprocess.run([sys.executable, "-c", CLASS_TABLE_CHILD, str(tok_path)], capture_output=True,
                             text=True, timeout=120, cwd=ROOT, env=dict(os.environ, UBE_STREAM_CACHE=str(cache)))
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)

    clean = encode()
    tables = sorted(cache.glob("classes-*.u8"))
    assert tables, "the first process writes the cache"
    for table in tables:
        raw = bytearray(table.read_bytes())
        rng = np.random.default_rng(5)
        for at in rng.choice(0x110000, size=5, replace=False):   # 5 flipped bytes, as in the issue
            raw[int(at)] ^= 0xFF
        for at in range(ord("0"), ord("z")):   # and the ASCII classes, which the texts use
            raw[at] ^= 0x03
        table.write_bytes(bytes(raw))
    assert encode() == clean
    for table in tables:   # rebuilt: the file matches its sha256 again
        raw = table.read_bytes()
        assert hashlib.sha256(raw[:0x110000]).digest() == raw[0x110000:]


# ---------------------------------------------------------------- row: OS errors

def _cli(args, **kw):
    return subprocess.run([sys.executable, "-m", "ube_stream", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, **kw)


def test_output_under_a_file_is_one_line_naming_the_path(corpus, tok, tmp_path):
    tok.save(str(tmp_path / "tok.json"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = _cli(["encode", str(corpus), "--tokenizer", str(tmp_path / "tok.json"), "-o", str(blocker / "out"), "-q"])
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and str(blocker) in out.stderr and "not a directory" in out.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the mode says")
def test_unreadable_input_and_read_only_output_are_clean_errors_for_real(corpus, tok, tmp_path):
    tok.save(str(tmp_path / "tok.json"))
    locked = tmp_path / "locked.jsonl"
    shutil.copy(corpus, locked)
    locked.chmod(0)
    out = _cli(["encode", str(locked), "--tokenizer", str(tmp_path / "tok.json"), "-o", str(tmp_path / "o"), "-q"])
    assert out.returncode == 1 and "Traceback" not in out.stderr and str(locked) in out.stderr
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o500)
    out = _cli(["encode", str(corpus), "--tokenizer", str(tmp_path / "tok.json"), "-o", str(readonly / "o"), "-q"])
    assert out.returncode == 1 and "Traceback" not in out.stderr and str(readonly) in out.stderr


@pytest.mark.parametrize("errno_name", ["EACCES", "EROFS", "EMFILE", "EDQUOT"])
@pytest.mark.parametrize("side", ["input", "output"])
def test_os_errors_are_one_line_with_the_path_and_the_fix(corpus, tok, tmp_path, capsys, monkeypatch,
                                                        errno_name, side):
    """The operating system's answer is injected where the file is opened (this
    suite may run as root, which no file mode stops)."""
    import builtins
    import errno as errno_module

    from ube_stream import storage
    from ube_stream.cli.main import main

    tok.save(str(tmp_path / "tok.json"))
    out_dir = tmp_path / "out"
    code = getattr(errno_module, errno_name)
    target = str(corpus) if side == "input" else str(out_dir)
    real_open = builtins.open

    def failing_open(file, *args, **kwargs):
        if str(file).startswith(target):
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(storage, "open", failing_open, raising=False)
    rc = main(["encode", str(corpus), "--tokenizer", str(tmp_path / "tok.json"), "-o", str(out_dir), "-q",
               "--workers", "1"])
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert target in lines[0] and os.strerror(code) in lines[0] and "rerun" in lines[0]


def test_storage_error_is_an_os_error_and_an_ube_error(tmp_path, monkeypatch):
    import builtins
    import errno

    from ube_stream import storage

    real_open = builtins.open

    def denied(file, *args, **kwargs):
        if str(file).startswith(str(tmp_path)):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(storage, "open", denied, raising=False)
    with pytest.raises(StorageError) as info:
        storage.read_bytes(str(tmp_path / "x"))
    assert isinstance(info.value, OSError) and isinstance(info.value, UbeError)
    assert info.value.errno == errno.EACCES and str(info.value).startswith(f"{tmp_path / 'x'}: cannot read")


# ---------------------------------------------------------------- row: malformed MANIFEST under verify --shards

@pytest.mark.parametrize("field,value", [
    ("shards", 7), ("sources", [{"path": 3}]), ("totals", []), ("special_ids", {"eos": "x"}),
    ("tokenizer", {"fingerprint": 5}), ("options", {"unit_rows": "many"}), ("shards", [[1]]),
    ("shards", [{"name": "x"}]),
])
def test_malformed_manifest_under_verify_shards_is_a_format_error(copy, field, value):
    from ube_stream.verification import verify_shards

    manifest = _manifest(copy)
    manifest[field] = value
    _write_manifest(copy, manifest)
    with pytest.raises(ShardFormatError, match=f"MANIFEST.json: field '{field}"):
        verify_shards(copy, workers=1, show_progress=False)


@pytest.mark.parametrize("value", ["", "/dev/zero", "csv"])
def test_a_source_format_that_is_no_format_is_a_format_error(copy, value):
    """Found by the slow MANIFEST fuzz: a source's ``format`` reached the reader's
    option check (a plain ValueError) under verify --shards."""
    from ube_stream.verification import verify_shards

    manifest = _manifest(copy)
    manifest["sources"][0]["format"] = value
    _write_manifest(copy, manifest)
    with pytest.raises(ShardFormatError, match=r"MANIFEST.json: field 'sources\[0\].format' must be one of "):
        verify_shards(copy, workers=1, show_progress=False)


def test_deeply_nested_manifest_is_a_format_error(copy):
    from ube_stream.shards import TokenShards

    Path(copy, "MANIFEST.json").write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ShardFormatError, match="MANIFEST.json"):
        TokenShards(copy)


def test_schema_checker_names_the_deepest_field_and_what_was_expected():
    """Hand-worked cases of the one checker (shards/schema.py)."""
    from ube_stream.shards.schema import Hex, Int, List, Map, Nullable, Obj, RelPath, Str, check

    schema = Obj({"shards": List(Obj({"file": RelPath(), "n": Int()})), "ids": Map(Nullable(Int(0, 9)))},
                 optional={"sha": Hex(4, "s:"), "kind": Str(choices=["a", "b"])})
    good = {"shards": [{"file": "x/y", "n": 3}], "ids": {"eos": None, "bos": 9}, "sha": "s:00af", "kind": "b"}
    check(good, schema, source="F", error=ShardFormatError, fix="fix it")
    for doc, field, expected in [
        ({**good, "shards": [{"file": "x", "n": 3}, {"file": "../x", "n": 1}]}, "shards[1].file", "a relative path"),
        ({**good, "shards": [{"file": "x", "n": True}]}, "shards[0].n", "a non-negative integer"),
        ({**good, "shards": [{"file": "/etc/passwd", "n": 1}]}, "shards[0].file", "a relative path"),
        ({**good, "ids": {"eos": 10}}, "ids.eos", "an integer in 0..9 or null"),
        ({**good, "sha": "s:00AF"}, "sha", "'s:' and 4 hex digits"),
        ({**good, "kind": "c"}, "kind", "one of ['a', 'b']"),
        ({"ids": {}}, "shards", "present"),
    ]:
        with pytest.raises(ShardFormatError) as info:
            check(doc, schema, source="F", error=ShardFormatError, fix="fix it")
        message = str(info.value)
        assert message.startswith(f"F: field '{field}' must be {expected}") and message.endswith("; fix it"), message


# ---------------------------------------------------------------- row: Ctrl-C

def _interrupted(args, env, started, *, wait_s):
    """Run the ``ube`` command ``args`` in its own process group and press Ctrl-C (SIGINT to
    the whole group) once ``started()`` holds (or after ``wait_s``); its stderr, once it
    exited 130 without a traceback (skipped when the run finished before the interrupt)."""
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + wait_s
    while time.time() < deadline and not started() and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)   # what Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt arrived")
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    return err


def test_ctrl_c_is_one_line_exit_130_nothing_in_tmpdir_and_the_rerun_resumes(tok, tmp_path):
    corpus = tmp_path / "big.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i} h\u00e9llo w\u00f6rld \u4e16\u754c " * (1 + i % 9)})
                              + "\n" for i in range(150_000)))
    tok.save(str(tmp_path / "tok.json"))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out_dir = tmp_path / "out"
    args = [sys.executable, "-m", "ube_stream", "encode", str(corpus), "--tokenizer", str(tmp_path / "tok.json"),
            "-o", str(out_dir), "--unit-rows", "5000", "--workers", "2"]
    env = dict(os.environ, TMPDIR=str(tmpdir))
    err = _interrupted(args, env, lambda: bool(list((out_dir / "units").glob("0*.json"))), wait_s=60)
    assert err.rstrip().endswith("interrupted; rerun the same command to resume")
    assert os.listdir(tmpdir) == []
    rerun = subprocess.run(args + ["-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    from ube_stream.shards import TokenShards

    assert len(TokenShards(str(out_dir), verify="full")) == 150_000


@pytest.mark.slow
def test_ctrl_c_in_ube_train_is_one_line_nothing_in_tmpdir_and_the_rerun_resumes(tmp_path):
    """The ``ube encode`` test above, for ``ube train``: interrupted once some
    units are counted (their records in the work directory), it prints one line,
    exits 130, leaves nothing in $TMPDIR, and the rerun reuses the counted units
    and writes the tokenizer an uninterrupted run writes (truth: its fingerprint)."""
    corpus = tmp_path / "big.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i} h\u00e9llo w\u00f6rld \u4e16\u754c " * (1 + i % 9)})
                              + "\n" for i in range(150_000)))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "out" / "tok.json"
    out.parent.mkdir()
    args = [sys.executable, "-m", "ube_stream", "train", str(corpus), "--vocab-size", "700", "-o", str(out),
            "--unit-rows", "5000", "--workers", "2"]
    env = dict(os.environ, TMPDIR=str(tmpdir))
    work = Path(str(out) + ".ube-work")
    err = _interrupted(args, env, lambda: len(list(work.glob("run-*/tables/*.json"))) >= 2, wait_s=120)
    assert err.rstrip().splitlines()[-1] == "ube train: interrupted; rerun the same command to resume", err[-2000:]
    assert os.listdir(tmpdir) == []
    counted = len(list(work.glob("run-*/tables/*.json")))
    assert counted >= 2 and not out.exists()
    rerun = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    reused = [line for line in (rerun.stdout + rerun.stderr).splitlines() if "counted by an earlier run" in line]
    assert reused and int(reused[0].split("(")[1].split()[0].replace(",", "")) >= counted, reused
    assert os.listdir(tmpdir) == [] and not work.exists()
    clean = tmp_path / "clean.json"
    subprocess.run([*args[:-5], str(clean), *args[-4:], "-q"], cwd=ROOT, env=env, check=True, timeout=600)
    assert json.loads(out.read_text())["fingerprint"] == json.loads(clean.read_text())["fingerprint"]


# ---------------------------------------------------------------- mutation fuzzing of every file kind

KINDS = ["manifest", "marker", "plan", "tokenizer", "index", "tokens", "class_table", "count_table"]


def run_file_mutations(kind, cases, seed, tmp_path):
    """The child fuzzes one file kind; a crash or a hang ends the child (counted here)."""
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "faults" / "mutate_files.py"), kind, str(cases),
                          str(seed), str(tmp_path)], capture_output=True, text=True, timeout=900, cwd=ROOT,
                         preexec_fn=_limited(3 << 30),
                         env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert out.returncode == 0, f"child died ({out.returncode}): {out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_clean(tally):
    assert tally["crash"] == 0 and tally["hang"] == 0, tally
    assert tally["traceback"] == 0, tally["examples"]
    assert tally["served_wrong"] == 0, tally["examples"]


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_files_small(kind, tmp_path):
    tally = run_file_mutations(kind, 12, 1, tmp_path)
    _assert_clean(tally)
    assert tally["cases"] == 12


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_mutated_files_300(kind, tmp_path):
    tally = run_file_mutations(kind, 300, 2026, tmp_path)
    _assert_clean(tally)
