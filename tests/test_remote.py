"""Object storage through fsspec, against a real S3-compatible server (moto's
server mode, started here on 127.0.0.1: no network): train, encode with 2
workers, a worker killed between its shard uploads and its marker, rerun,
ranks + finalize, inspect, verify, TokenShards, TokenDataset and
export-megatron on ``s3://`` give the same bytes as the same run on local disk."""
import contextlib
import json
import os
import socket
import subprocess
import sys

import moto  # noqa: F401,E402  (test dependencies: the local S3 server and its client)
import numpy as np
import pytest
import s3fs  # noqa: F401,E402
from _helpers import kill_when, tree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "ube-test"
OPTIONS = dict(unit_rows=40, shard_tokens=3000, show_progress=False)
KILLED_UNIT = "00002-000000000030"   # c.parquet's second unit: units are whole row groups (30 rows)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on a free local port; the environment points fsspec/s3fs at it
    (inherited by spawned workers and subprocesses).  Yields the s3fs filesystem."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "UBE_STREAM_CACHE": str(tmp_path_factory.mktemp("cache"))}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import fsspec
    import fsspec.config

    fsspec.config.set_conf_env(fsspec.config.conf)
    fsspec.filesystem("s3").clear_instance_cache()
    fs = fsspec.filesystem("s3", endpoint_url=env["FSSPEC_S3_ENDPOINT_URL"])
    if not fs.exists(BUCKET):   # moto keeps its buckets per process: another module's server made it
        fs.mkdir(BUCKET)
    try:
        yield fs
    finally:
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        fsspec.config.conf.pop("s3", None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, multilingual_lines, s3):
    """The same small corpus (JSONL, gzip text, Parquet) on local disk and under s3://BUCKET/corpus/."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    local = tmp_path_factory.mktemp("corpus")
    lines = [line for line in multilingual_lines if line.strip()][:240]
    with open(local / "a.jsonl", "w", encoding="utf-8") as f:
        for line in lines[:100]:
            f.write(json.dumps({"text": line}, ensure_ascii=False) + "\n")
    with gzip.open(local / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[100:160]) + "\n")
    pq.write_table(pa.table({"text": lines[160:]}), local / "c.parquet", row_group_size=30)
    (local / "_skipped.jsonl").write_text('{"text": "not read"}\n')
    for name in ("a.jsonl", "b.txt.gz", "c.parquet", "_skipped.jsonl"):
        s3.put_file(str(local / name), f"{BUCKET}/corpus/{name}")
    return str(local), f"s3://{BUCKET}/corpus"


def s3_tree(fs, prefix):
    """relative key -> bytes of every object under ``prefix``."""
    fs.invalidate_cache()
    return {key[len(prefix) + 1:]: fs.cat_file(key) for key in fs.find(prefix)}


def without_source_paths(manifest_bytes):
    doc = json.loads(manifest_bytes)
    for s in doc["sources"] + doc["skipped_files"]:
        s["path"] = os.path.basename(s["path"])
    return doc


def without_training_inputs(tokenizer_bytes):
    doc = json.loads(tokenizer_bytes)
    doc["training"].pop("inputs")
    for s in doc["training"]["skipped_files"]:
        s["path"] = os.path.basename(s["path"])
    return doc


def same_shard_dirs(local_dir, remote):
    """Every file equal, except the input paths (local paths vs URLs) in
    MANIFEST's sources and tokenizer.json's training record."""
    local = {k: v for k, v in tree(local_dir).items() if v is not None}
    assert sorted(local) == sorted(remote)
    for key in local:
        if key == "MANIFEST.json":
            assert without_source_paths(local[key]) == without_source_paths(remote[key])
        elif key == "tokenizer.json":
            assert without_training_inputs(local[key]) == without_training_inputs(remote[key])
        else:
            assert local[key] == remote[key], key


@pytest.fixture(scope="module")
def trained(corpus, s3, tmp_path_factory):
    from ube_stream.training.trainer import train

    local_dir, url = corpus
    out = tmp_path_factory.mktemp("tok")
    local_tok = train(local_dir, vocab_size=600, workers=1, show_progress=False, unit_rows=40)
    local_tok.save(out / "tok.json")
    remote_tok = train(url, vocab_size=600, workers=1, show_progress=False, unit_rows=40)
    remote_tok.save(f"s3://{BUCKET}/tok.json")
    return str(out / "tok.json"), f"s3://{BUCKET}/tok.json"


def test_train_on_s3_matches_local(trained, corpus, s3):
    local_path, url = trained
    local = json.loads(open(local_path, "rb").read())
    remote = json.loads(s3.cat_file(url))
    assert remote["fingerprint"] == local["fingerprint"]
    # full paths / URLs recorded, the directory walk skipped _skipped.jsonl in both
    assert remote["training"].pop("inputs") == [f"{corpus[1]}/{n}" for n in ("a.jsonl", "b.txt.gz", "c.parquet")]
    assert local["training"].pop("inputs") == [os.path.join(corpus[0], n) for n in ("a.jsonl", "b.txt.gz",
                                                                                      "c.parquet")]
    # ... and listed it, with its reason, as a full path / URL
    hidden = "hidden name (starts with '.' or '_')"
    assert remote["training"].pop("skipped_files") == [{"path": f"{corpus[1]}/_skipped.jsonl", "reason": hidden}]
    assert local["training"].pop("skipped_files") == [{"path": os.path.join(corpus[0], "_skipped.jsonl"),
                                                       "reason": hidden}]
    assert remote == local


@pytest.fixture(scope="module")
def local_shards(corpus, trained, tmp_path_factory):
    from ube_stream.shards import encode_corpus

    out = str(tmp_path_factory.mktemp("local") / "shards")
    encode_corpus(corpus[0], tokenizer=trained[0], output=out, workers=2, **OPTIONS)
    return out


def _markers(fs, prefix):
    fs.invalidate_cache()
    try:
        return [k for k in fs.ls(f"{prefix}/units", detail=False, refresh=True) if not k.endswith("_plan.json")]
    except FileNotFoundError:
        return []


# slow: the local SIGKILL tests (test_shards) run by default; this one repeats it on S3
@pytest.mark.slow
def test_encode_killed_then_rerun_on_s3_is_byte_identical(corpus, trained, local_shards, s3, tmp_path):
    from ube_stream.shards import EncodeSummary, encode_corpus

    url = f"s3://{BUCKET}/shards"
    killed = str(tmp_path / "killed-once")
    code = (f"from ube_stream.shards import encode_corpus; "
            f"encode_corpus({corpus[1]!r}, tokenizer={trained[1]!r}, output={url!r}, workers=2, **{OPTIONS!r})")
    env = dict(os.environ, UBE_TEST_KILL_UNIT=f"{url}|{KILLED_UNIT}|{killed}|group")  # the whole run dies
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, start_new_session=True, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # grace: let the other worker commit what it is doing
    _, err = kill_when(proc, lambda: os.path.exists(killed), timeout=240, poll=0.05, grace=1.0)
    assert os.path.exists(killed), err.decode()[-3000:]
    prefix = f"{BUCKET}/shards"
    objects = s3_tree(s3, prefix)
    assert "MANIFEST.json" not in objects
    # the killed worker had uploaded its shard files, but not its marker: the unit is not committed
    assert any(k.startswith(f"shards/{KILLED_UNIT}-") for k in objects)
    assert f"units/{KILLED_UNIT}.json" not in objects

    summary = EncodeSummary()
    manifest = encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=2, summary=summary, **OPTIONS)
    assert summary.finalized and summary.units_done >= 1
    assert summary.units_done + summary.units_skipped == summary.units_total
    assert manifest["sources"][0]["path"] == f"{corpus[1]}/a.jsonl"
    same_shard_dirs(local_shards, s3_tree(s3, prefix))
    # a rerun on the finished directory does nothing
    again = EncodeSummary()
    encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, summary=again, **OPTIONS)
    assert again.already_complete


def test_ranks_then_finalize_on_s3(corpus, trained, local_shards, s3):
    from ube_stream.errors import ShardFormatError
    from ube_stream.shards import encode_corpus

    url = f"s3://{BUCKET}/ranked"
    assert encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, rank=0, world_size=2,
                         **OPTIONS) == {}
    with pytest.raises(ShardFormatError, match="cannot finalize: .* units are not committed"):
        encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, rank=0, world_size=2,
                      finalize=True, **OPTIONS)
    encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, rank=1, world_size=2, finalize=True,
                  **OPTIONS)
    same_shard_dirs(local_shards, s3_tree(s3, f"{BUCKET}/ranked"))


@pytest.mark.parametrize("damage", ["total", "outside", "type", "not_json"])
def test_a_damaged_remote_marker_is_an_uncommitted_unit(corpus, trained, s3, damage):
    """Issue 26: a unit marker on the store is checked as the local reader checks
    it (schema, fields that agree), not just parsed: a marker whose sizes still
    match its shard objects but whose counts disagree, whose file names leave the
    directory, whose field has the wrong type or that is not JSON counts as not
    committed, and the rerun encodes that unit again, writing the very marker
    the first run wrote."""
    from ube_stream.shards import EncodeSummary, encode_corpus
    from ube_stream.shards.remote import remote_committed_records

    url = f"s3://{BUCKET}/marker-{damage}"
    encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, rank=0, world_size=2, **OPTIONS)
    keys = sorted(_markers(s3, f"{BUCKET}/marker-{damage}"))
    unit_ids = [k.rsplit("/", 1)[-1][:-len(".json")] for k in keys]
    assert len(unit_ids) >= 2 and remote_committed_records(url, unit_ids).keys() == set(unit_ids)
    original = s3.cat_file(keys[0])
    record = json.loads(original)
    if damage == "total":        # the shard objects still have the recorded sizes
        record["documents"] += 1
    elif damage == "outside":    # the same base name, in a folder outside the directory
        record["shards"][0]["tokens_file"] = "../../elsewhere/" + record["shards"][0]["tokens_file"]
    elif damage == "type":
        record["rows_read"] = str(record["rows_read"])
    s3.pipe_file(keys[0], b"{\"unit_id\": " if damage == "not_json" else json.dumps(record).encode())
    s3.invalidate_cache()
    assert remote_committed_records(url, unit_ids).keys() == set(unit_ids[1:])

    summary = EncodeSummary()
    encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, rank=0, world_size=2, summary=summary,
                  **OPTIONS)
    assert (summary.units_done, summary.units_skipped) == (1, len(unit_ids) - 1)
    s3.invalidate_cache()
    assert s3.cat_file(keys[0]) == original


def test_json_read_from_a_url_is_bounded_before_it_is_fetched(s3, monkeypatch):
    """``index_format.read_json`` on a URL goes through ``storage.read_bounded``,
    which asks the object's size first: a MANIFEST bigger than the bound is
    refused without a GET of its body."""
    from ube_stream.errors import ShardFormatError
    from ube_stream.shards import index_format
    from ube_stream.storage import read_bounded

    s3.pipe_file(f"{BUCKET}/bounded/MANIFEST.json", b"[" + b"0," * 5000 + b"0]")
    url = f"s3://{BUCKET}/bounded/MANIFEST.json"
    with pytest.raises(ShardFormatError, match=r"MANIFEST.json: the manifest is 10,003 bytes, more than the 100 "):
        read_bounded(url, what="manifest", error=ShardFormatError, max_bytes=100)
    assert read_bounded(url, what="manifest", error=ShardFormatError, max_bytes=10_003).startswith(b"[0,0")
    fetched = []
    fs_type = type(s3)
    monkeypatch.setattr(fs_type, "cat_file", lambda self, path, *a, **k: fetched.append(path) or b"")
    with pytest.raises(ShardFormatError, match="more than the"):
        read_bounded(url, what="manifest", error=ShardFormatError, max_bytes=100)
    assert fetched == []
    monkeypatch.undo()
    with pytest.raises(ShardFormatError, match=r"bounded/MANIFEST.json: the document must be an object"):
        index_format.read_json(url, "MANIFEST.json")


def test_read_inspect_verify_dataset_export_on_s3(corpus, trained, local_shards, s3, capsys, tmp_path):
    from ube_stream.cli import main
    from ube_stream.loader import TokenDataset, export_megatron
    from ube_stream.shards import TokenShards, encode_corpus
    from ube_stream.verification import verify_shards

    url = f"s3://{BUCKET}/read"
    encode_corpus(corpus[1], tokenizer=trained[1], output=url, workers=1, **OPTIONS)
    local, remote = TokenShards(local_shards, verify="full"), TokenShards(url, verify="full")
    assert remote.location == url and remote.directory.startswith(os.environ["UBE_STREAM_CACHE"])
    assert len(remote) == len(local) > 0
    for i in range(len(local)):
        assert np.array_equal(remote.doc(i), local.doc(i))
        assert remote.source(i) == (f"{corpus[1]}/{os.path.basename(local.source(i)[0])}", local.source(i)[1])
    assert TokenShards(url).directory == remote.directory    # cached: downloaded once

    report = verify_shards(url, workers=1, show_progress=False)
    assert report.ok, report.format()

    assert main(["inspect", url]) == 0
    remote_text = capsys.readouterr().out
    assert main(["inspect", local_shards]) == 0
    local_text = capsys.readouterr().out
    assert remote_text.splitlines()[0] == url
    assert remote_text.replace(corpus[1] + "/", "").splitlines()[1:] == \
        local_text.replace(corpus[0] + "/", "").splitlines()[1:]

    a = TokenDataset(url, 16, seed=3, world_size=2, rank=1)
    b = TokenDataset(local_shards, 16, seed=3, world_size=2, rank=1)
    assert len(a) == len(b) > 0
    assert all(np.array_equal(a[k], b[k]) for k in range(len(b)))

    export_megatron(local_shards, str(tmp_path / "m"))
    export_megatron(url, f"s3://{BUCKET}/megatron/m")
    for ext in (".bin", ".idx"):
        assert s3.cat_file(f"{BUCKET}/megatron/m{ext}") == (tmp_path / f"m{ext}").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_megatron(url, f"s3://{BUCKET}/megatron/m")


def test_missing_and_unfinished_urls_are_clear(s3, corpus):
    from ube_stream.errors import InputError, ShardFormatError
    from ube_stream.readers import iter_texts, resolve_inputs
    from ube_stream.shards import TokenShards

    with pytest.raises(InputError, match="no such object or prefix"):
        resolve_inputs(f"s3://{BUCKET}/nothing-here/")
    with pytest.raises(InputError, match="no object matches"):
        resolve_inputs(f"s3://{BUCKET}/corpus/*.feather")
    globbed = resolve_inputs(f"s3://{BUCKET}/corpus/*.jsonl")
    assert [s.path for s in globbed] == [f"{corpus[1]}/_skipped.jsonl", f"{corpus[1]}/a.jsonl"]
    local_texts = list(iter_texts(os.path.join(corpus[0], "b.txt.gz")))
    assert list(iter_texts(f"{corpus[1]}/b.txt.gz")) == local_texts
    s3.pipe(f"{BUCKET}/unfinished/units/_plan.json", b"{}")
    with pytest.raises(ShardFormatError, match="unfinished"):
        TokenShards(f"s3://{BUCKET}/unfinished")
    with pytest.raises(ShardFormatError, match="no such shard directory"):
        TokenShards(f"s3://{BUCKET}/none")
    # file:// URLs are local paths
    assert [s.path for s in resolve_inputs("file://" + corpus[0])] == \
        [os.path.join(corpus[0], n) for n in ("a.jsonl", "b.txt.gz", "c.parquet")]


def test_dataset_dict_split_and_sniffing_on_s3(s3, tmp_path, multilingual_lines):
    """A DatasetDict folder and a suffix-less JSON Lines object under an s3://
    prefix: the same split rules, sniffing and skipped-file list as on disk."""
    import datasets

    from ube_stream.errors import InputError
    from ube_stream.readers import SkippedFile, iter_texts, resolve_inputs

    lines = multilingual_lines[:30]
    local = tmp_path / "dd"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": lines[:20]}),
                          "test": datasets.Dataset.from_dict({"text": lines[20:]})}).save_to_disk(str(local))
    s3.put(str(local), f"{BUCKET}/dd", recursive=True)
    url = f"s3://{BUCKET}/dd"
    with pytest.raises(InputError, match=r"splits 'train', 'test'.*split="):
        resolve_inputs(url)
    with pytest.raises(InputError, match=r"no split 'dev'"):
        resolve_inputs(url, split="dev")
    skipped = []
    sources = resolve_inputs(url, split="test", skipped_files=skipped)
    assert all(s.path.startswith(f"{url}/test/") for s in sources)
    assert list(iter_texts(url, split="test")) == lines[20:]
    assert SkippedFile(f"{url}/train/", "split 'train' of a DatasetDict, not selected (split='test')") in skipped
    body = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in lines).encode()
    s3.pipe_file(f"{BUCKET}/sniff/part-0000", body)
    s3.pipe_file(f"{BUCKET}/sniff/README", b"about this prefix\n")
    skipped = []
    assert [s.format for s in resolve_inputs(f"s3://{BUCKET}/sniff", skipped_files=skipped)] == ["jsonl"]
    assert [s.path for s in skipped] == [f"s3://{BUCKET}/sniff/README"]
    assert list(iter_texts(f"s3://{BUCKET}/sniff")) == lines


@pytest.mark.parametrize("state,field", [
    (b"{", "the datasets state.json is not valid JSON"),
    (b'{"_data_files": [{"filename": "../../corpus/a.jsonl"}]}', "field '_data_files[0].filename' must be a relative"),
    (b'{"_data_files": [{"filename": "sub/x.arrow"}]}', "names 'sub/x.arrow', not a file of the folder itself"),
])
def test_a_damaged_save_to_disk_state_on_s3_is_an_error_naming_file_and_field(s3, tmp_path, multilingual_lines,
                                                                              state, field):
    """The local rule (test_readers) where the folder is an s3:// prefix: state.json
    read bounded (its size asked first) and checked before any data file is read."""
    import datasets

    from ube_stream.errors import InputError
    from ube_stream.readers import resolve_inputs

    local = tmp_path / "hf"
    datasets.Dataset.from_dict({"text": multilingual_lines[:10]}).save_to_disk(str(local))
    (local / "state.json").write_bytes(state)
    prefix = f"{BUCKET}/hf-state-{len(state)}"
    s3.put(str(local), prefix, recursive=True)
    s3.invalidate_cache()
    with pytest.raises(InputError) as info:
        resolve_inputs(f"s3://{prefix}")
    assert str(info.value).startswith(f"s3://{prefix}/state.json: ") and field in str(info.value), str(info.value)
    assert info.value.reason == "bad_metadata"


# slow: in-memory encode is tested locally by default; here it is repeated onto S3
@pytest.mark.slow
def test_encode_in_memory_data_to_s3_matches_local(s3, trained, tmp_path, multilingual_lines):
    from ube_stream.shards import TokenShards, encode_corpus

    lines = multilingual_lines[:120]
    url = f"s3://{BUCKET}/in-memory-shards"
    local = encode_corpus(iter(lines), tokenizer=trained[0], output=str(tmp_path / "local"), workers=2, unit_rows=50,
                          show_progress=False)
    remote = encode_corpus(iter(lines), tokenizer=trained[0], output=url, workers=2, unit_rows=50,
                           show_progress=False)
    assert [s["sha256"] for s in remote["shards"]] == [s["sha256"] for s in local["shards"]]
    assert remote["sources"] == local["sources"] and remote["sources"][0]["path"].startswith("<in-memory ")
    assert not s3.exists(f"{BUCKET}/in-memory-shards/units")
    assert TokenShards(url).decode_doc(7) == lines[7]


def test_rerun_on_s3_replaces_a_run_that_committed_nothing(corpus, trained, s3, capsys, tmp_path):
    """Issue 28 on an object store: a failed first run (wrong column on a JSON Lines file: the unit fails,
    none is committed) leaves a plan and a tokenizer file; the rerun with the right options replaces them
    and writes what a local run writes.  With a committed unit, other options are refused, naming the option."""
    from ube_stream.errors import InputError, ShardFormatError
    from ube_stream.shards import encode_corpus

    url = f"s3://{BUCKET}/replaced"
    source, local_source = f"{corpus[1]}/a.jsonl", os.path.join(corpus[0], "a.jsonl")
    with pytest.raises(InputError, match="body"):
        encode_corpus(source, tokenizer=trained[1], output=url, workers=1, column="body", **OPTIONS)
    assert "units/_plan.json" in s3_tree(s3, f"{BUCKET}/replaced")
    capsys.readouterr()
    encode_corpus(source, tokenizer=trained[1], output=url, workers=1, **dict(OPTIONS, show_progress=True))
    assert "replacing an unfinished run that committed no unit (options.column: 'body' recorded" \
        in capsys.readouterr().err
    local = str(tmp_path / "local")
    encode_corpus(local_source, tokenizer=trained[0], output=local, workers=1, **OPTIONS)
    same_shard_dirs(local, s3_tree(s3, f"{BUCKET}/replaced"))

    ranked = f"s3://{BUCKET}/ranked-other"
    encode_corpus(source, tokenizer=trained[1], output=ranked, workers=1, rank=0, world_size=2, **OPTIONS)
    with pytest.raises(ShardFormatError, match=r"options.eos_token: '<\|endoftext\|>' recorded, None now"):
        encode_corpus(source, tokenizer=trained[1], output=ranked, workers=1, rank=1, world_size=2, eos=False,
                      **OPTIONS)


def test_commit_records_and_plan_on_s3(s3):
    """The object-store form of the run engine's protocol: a record is one PUT (the commit point), read back
    through one listing; the first plan uploaded stands and later ones are compared with it."""
    from ube_stream.runs.records import RunPlan, UnitRecords, list_names, remove_tree
    from ube_stream.storage import read_bytes

    url = f"s3://{BUCKET}/records-test"
    records = UnitRecords(f"{url}/units", ignore=("_plan.json",))
    assert records.committed(["a"]) == {} and not records.any_recorded() and list_names(url) is None
    plan = RunPlan(f"{url}/units/_plan.json", read=lambda path: json.loads(read_bytes(path)))
    first = {"options": {"column": "text"}, "units": ["a", "b"]}
    assert plan.create_or_compare(first) == (first, [])
    assert plan.create_or_compare(dict(first, options={"column": "body"})) == (first, ["options.column"])
    assert not records.any_recorded()
    records.commit("a", {"unit_id": "a", "text": "é"})
    records.commit("b", {"unit_id": "b"})
    assert s3.cat(f"{BUCKET}/records-test/units/a.json") == b'{\n "unit_id": "a",\n "text": "\xc3\xa9"\n}\n'
    assert records.any_recorded() and records.temporaries("a") == []
    assert records.committed(["a", "b", "c"]) == {"a": {"unit_id": "a", "text": "é"}, "b": {"unit_id": "b"}}
    assert records.committed(["a", "b"], check=lambda unit_id, record, source: unit_id == "a") == {
        "a": {"unit_id": "a", "text": "é"}}
    s3.pipe(f"{BUCKET}/records-test/units/b.json", b'{"unit_id": ')   # a damaged record: not committed
    assert records.committed(["a", "b"]).keys() == {"a"}
    records.uncommit("a")
    assert records.committed(["a"]) == {}
    remove_tree(url)
    assert list_names(url) is None


def test_staging_directories_of_killed_workers_are_removed(tmp_path, monkeypatch):
    """A worker killed mid-unit leaves $TMPDIR/ube-unit-<host>-<pid>-*; the next
    unit on the host removes it, and never a live worker's."""
    import tempfile

    from ube_stream.shards.remote import remove_dead_staging
    from ube_stream.storage import hostname

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = [f"ube-unit-{hostname()}-{dead.pid}-00001-000000000040-abc",
                 f"ube-unit-{hostname()}-{live.pid}-00002-000000000040-def",
                 f"ube-unit-otherhost-{dead.pid}-00003-000000000040-ghi", "unrelated"]
        for name in names:
            os.makedirs(tmp_path / name / "locks")
        remove_dead_staging()
        assert sorted(os.listdir(tmp_path)) == sorted(names[1:])
    finally:
        live.kill()
        live.wait()


@pytest.fixture(scope="module")
def ray_start_cluster(s3):
    """A Ray cluster started the way clusters are (`ray start --head`), from an
    environment WITHOUT the store's credentials or endpoint: only this (driver)
    process has them.  Stopped by killing the process group this fixture started."""
    import shutil
    import signal
    import tempfile
    import time

    ray = pytest.importorskip("ray")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FSSPEC_", "BOTO_"))}
    env.update(PYTHONPATH=ROOT, AWS_EC2_METADATA_DISABLED="true", RAY_USAGE_STATS_ENABLED="0")
    temp_dir = tempfile.mkdtemp(prefix="ube-ray-", dir="/tmp")
    proc = subprocess.Popen(["ray", "start", "--head", f"--port={port}", "--num-cpus=2", "--block",
                             "--include-dashboard=false", f"--temp-dir={temp_dir}", "--disable-usage-stats"],
                            env=env, cwd=temp_dir, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while True:
            try:
                ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
                break
            except Exception:
                if time.time() > deadline or proc.poll() is not None:
                    raise
                time.sleep(1)
        yield ray
    finally:
        ray.shutdown()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


# slow: starts a Ray cluster with `ray start`
@pytest.mark.slow
def test_ray_cluster_gets_the_drivers_storage_settings(ray_start_cluster, corpus, trained, local_shards, s3):
    """Credentials and endpoint set only in the driver reach the `ray start`
    workers (runtime_env env_vars): the S3 run equals the local one.  Without
    them (forward_storage_env=False) the failure is one StorageError line naming
    the unit and the URLs, not a botocore traceback."""
    from ube_stream.errors import StorageError
    from ube_stream.executors import RayExecutor
    from ube_stream.shards import encode_corpus

    url = f"s3://{BUCKET}/ray-start"
    encode_corpus(corpus[1], tokenizer=trained[0], output=url, executor=RayExecutor(), **OPTIONS)
    same_shard_dirs(local_shards, s3_tree(s3, f"{BUCKET}/ray-start"))

    with pytest.raises(StorageError) as info:
        encode_corpus(corpus[1], tokenizer=trained[0], output=f"s3://{BUCKET}/ray-nocreds",
                      executor=RayExecutor(forward_storage_env=False), **OPTIONS)
    message = str(info.value)
    assert "\n" not in message
    assert "unit 0000" in message and f"{corpus[1]}/" in message and f"s3://{BUCKET}/ray-nocreds" in message
    assert "NoCredentialsError" in message and "storage_options" in message
