"""Shard directories read where they live: TokenShards / TokenDataset on an
``s3://`` URL (moto's S3 server on 127.0.0.1, as in test_remote) fetch token
files block by block on first use into a cache of bounded size, and serve the
same tokens as the local directory they were uploaded from.  Truth: the
local directory (written with numpy from the format spec by test_loader's
``write_shard_dir``, tokens = stream positions), and the cache folder as
listed by ``os.walk``.  Hostile manifests are refused before any byte is
written locally."""
import hashlib
import json
import os
import pickle

import numpy as np
import pytest
from test_loader import write_shard_dir
from test_remote import BUCKET, s3  # noqa: F401  (the local S3 server fixture)

from ube_stream.errors import ShardFormatError, StorageError
from ube_stream.loader import TokenDataset
from ube_stream.shards import TokenShards
from ube_stream.shards import remote as remote_mod
from ube_stream.tokenizer import Tokenizer

BLOCK = 4096          # bytes per cached block in these tests (1024 tokens)
LIMIT = 48 * 1024     # the cache limit: far below the directory's token bytes
# a small vocabulary (1,281 ids): its tokenizer file is a fraction of the limit, which it counts toward
SMALL = Tokenizer(substrate="utf8", merges=[(a, b) for a in range(256) for b in range(4)],
                  special_tokens=["<|endoftext|>"])


@pytest.fixture(scope="module")
def directory(tmp_path_factory, s3):  # noqa: F811
    """12 shards of documents of 0..4000 tokens (about 400 KB of tokens), on disk and at s3://BUCKET/lazy."""
    rng = np.random.default_rng(11)
    shards, pos = [], 0
    for _ in range(12):
        docs = []
        for _ in range(int(rng.integers(3, 12))):
            n = int(rng.choice([0, 1, 7, 900, 4000]))
            docs.append([i % SMALL.vocab_size for i in range(pos, pos + n)])   # ids inside the vocabulary
            pos += n
        shards.append(docs)
    local = write_shard_dir(str(tmp_path_factory.mktemp("lazy") / "dir"), shards, tokenizer=SMALL)
    s3.put(local, f"{BUCKET}/lazy", recursive=True)
    token_bytes = 4 * pos
    assert token_bytes > 4 * LIMIT
    return local, f"s3://{BUCKET}/lazy", token_bytes


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder per test, and small blocks so that shards span several."""
    root = tmp_path / "cache"
    monkeypatch.setenv("UBE_STREAM_CACHE", str(root))
    monkeypatch.delenv("UBE_STREAM_CACHE_LIMIT", raising=False)
    monkeypatch.setattr(remote_mod, "BLOCK_BYTES", BLOCK)
    return root


def cached(root):
    """{relative path: size} of every file in the cache folder."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


def token_data(files):
    return {k: v for k, v in files.items() if ".tokens" in k}


def test_open_fetches_no_tokens_and_first_document_fetches_one_block(directory, cache):
    local_dir, url, _ = directory
    remote = TokenShards(url, cache_limit=LIMIT)
    local = TokenShards(local_dir)
    assert len(remote) == len(local) and remote.num_tokens == local.num_tokens
    assert token_data(cached(cache)) == {}              # manifest, tokenizer and indexes only
    # the first document of a shard that spans several blocks: only the first block is fetched
    k = next(k for k, s in enumerate(local.shards) if 4 * s.num_tokens > 2 * BLOCK and len(s.doc(0)))
    first = sum(s.num_docs for s in local.shards[:k])
    assert np.array_equal(remote.doc(first), local.doc(first))
    fetched = token_data(cached(cache))
    assert list(fetched.values()) == [BLOCK] * len(fetched)
    assert sorted(os.path.basename(name) for name in fetched) == [
        f"{os.path.basename(local.shards[k].tokens_path)}.block{b}" for b in range(len(fetched))]
    assert len(fetched) == 4 * len(local.doc(first)) // BLOCK + 1


def check_documents_and_samples(directory, cache, every):
    """Documents in random order, then shuffled TokenDataset samples (every
    ``every``-th): equal to the local directory's, the cache under its limit
    after each read."""
    local_dir, url, token_bytes = directory
    remote, local = TokenShards(url, cache_limit=LIMIT), TokenShards(local_dir)
    order = np.random.default_rng(5).permutation(len(local))
    for i in order[::every]:
        assert np.array_equal(remote.doc(int(i)), local.doc(int(i)))
        assert sum(cached(cache).values()) <= LIMIT
    ds_remote = TokenDataset(url, 300, seed=4, cache_limit=LIMIT)
    ds_local = TokenDataset(local_dir, 300, seed=4)
    assert len(ds_remote) == len(ds_local) > 0
    for k in range(0, len(ds_local), every):
        assert np.array_equal(ds_remote[k], ds_local[k])
        assert sum(cached(cache).values()) <= LIMIT
    return ds_remote, ds_local, token_bytes


def test_documents_and_samples_equal_local_and_cache_stays_under_limit(directory, cache):
    ds_remote, ds_local, token_bytes = check_documents_and_samples(directory, cache, every=9)
    # a DataLoader worker gets a pickled copy: it reads through the same cache
    clone = pickle.loads(pickle.dumps(ds_remote))
    assert all(np.array_equal(clone[k], ds_local[k]) for k in range(0, len(ds_local), 7))
    assert sum(token_data(cached(cache)).values()) < token_bytes


@pytest.mark.slow
def test_every_document_and_sample_equals_local_under_the_limit(directory, cache):
    check_documents_and_samples(directory, cache, every=1)


def test_whole_token_files_are_fetched_for_whole_array_readers(directory, cache, monkeypatch):
    local_dir, url, token_bytes = directory
    local = TokenShards(local_dir)
    limit = 2 * max(4 * s.num_tokens for s in local.shards) + 16384   # room for two whole token files
    assert limit < token_bytes
    monkeypatch.setenv("UBE_STREAM_CACHE_LIMIT", str(limit))    # the limit from the environment
    remote = TokenShards(url)
    for a, b in zip(remote.iter_docs(), local.iter_docs()):
        assert np.array_equal(a, b)
        assert sum(cached(cache).values()) <= limit
    assert any(name.endswith(".tokens") for name in cached(cache))
    # whole token files, one after another (as verify="full" and export-megatron read them)
    for shard, mine in zip(TokenShards(url).shards, local.shards):
        assert hashlib.sha256(shard.tokens.tobytes()).hexdigest() == mine.sha256
        shard.close()
        assert sum(cached(cache).values()) <= limit


def test_a_limit_too_small_for_one_block_is_a_clear_error(directory, cache):
    _, url, _ = directory
    with pytest.raises(StorageError, match="UBE_STREAM_CACHE_LIMIT or cache_limit="):
        TokenShards(url, cache_limit=BLOCK // 2).doc(0)
    with pytest.raises(ValueError, match="cache_limit='lots'"):
        TokenShards(url, cache_limit="lots")


def _hostile(s3, name, manifest_edit):  # noqa: F811
    """A copy of the directory at s3://BUCKET/<name> whose MANIFEST is edited by ``manifest_edit``."""
    s3.invalidate_cache()
    s3.copy(f"{BUCKET}/lazy", f"{BUCKET}/{name}", recursive=True)
    manifest = json.loads(s3.cat_file(f"{BUCKET}/lazy/MANIFEST.json"))
    manifest_edit(manifest)
    s3.pipe_file(f"{BUCKET}/{name}/MANIFEST.json", json.dumps(manifest).encode())
    s3.invalidate_cache()
    return f"s3://{BUCKET}/{name}"


@pytest.mark.parametrize("field", ["tokens_file", "index_file", "tokenizer"])
@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_hostile_names_are_refused_before_anything_is_written(directory, cache, s3, tmp_path, field,  # noqa: F811
                                                              how):
    """Issue 26: a MANIFEST naming /abs/path or ../../../path; the attacker's
    object exists in the store under that name, and its bytes must never reach
    the local disk (the cache, the absolute path, or where ../ would lead)."""
    payload = b"ATTACKER-" + os.urandom(16).hex().encode()
    target = str(tmp_path / "victim" / "owned.tokens") if how == "absolute" else "../../../owned.tokens"
    # the attacker's bytes, in the store where a naive reader would fetch them from
    s3.pipe_file(f"{BUCKET}/hostile-{field}-{how}/{target.lstrip('/')}", payload)

    def edit(manifest):
        if field == "tokenizer":
            manifest["tokenizer"]["file"] = target
        else:
            manifest["shards"][0][field] = target

    url = _hostile(s3, f"hostile-{field}-{how}", edit)
    # refused by the MANIFEST schema (the same check as a local directory's), before any download
    with pytest.raises(ShardFormatError, match="MANIFEST.json: field .* must be a relative path inside the directory"):
        TokenShards(url)
    with pytest.raises(ShardFormatError, match="must be a relative path inside the directory"):
        TokenDataset(url, 8)
    assert not os.path.exists(tmp_path / "victim")
    escaped = os.path.normpath(os.path.join(str(cache), "shards", "key", "../../../owned.tokens"))
    assert not os.path.exists(escaped)
    assert cached(cache) == {}                 # nothing at all was written locally
    for dirpath, _, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                assert payload not in f.read()


def test_a_token_file_named_like_an_index_is_refused(directory, cache, s3):  # noqa: F811
    """Token files are the evictable part of the cache, told apart by their suffix."""
    def swap(manifest):
        manifest["shards"][0]["tokens_file"] = manifest["shards"][0]["index_file"].replace(".idx", ".bin")

    with pytest.raises(ShardFormatError, match="a tokens file name ends with '.tokens'"):
        TokenShards(_hostile(s3, "bad-suffix", swap))
    assert cached(cache) == {}


def test_sizes_that_disagree_with_the_manifest_are_refused_before_download(directory, cache, s3):  # noqa: F811
    def grow(manifest):   # the manifest claims more tokens than the object holds: a bounded read could overrun
        manifest["shards"][1]["tokens"] += 10
        manifest["totals"]["tokens"] += 10

    url = _hostile(s3, "bad-size", grow)
    with pytest.raises(ShardFormatError, match="bytes in the store, MANIFEST.json implies"):
        TokenShards(url)
    assert cached(cache) == {}


# ---------------------------------------------------------------- mutation fuzzing of a remote directory

def _fuzz_remote(directory, s3, tmp_path, kind, cases, seed):  # noqa: F811
    """Mutate the MANIFEST (``kind="manifest"``: JSON values replaced by hostile
    ones, or random bytes) or one index file (``"index"``: random bytes) of a
    copy of the remote directory, then read it through ``TokenShards(url)`` and
    ``TokenDataset(url)`` with a fresh cache per case.  Tally: ``error`` (a
    UbeError), ``ok`` (served exactly what the clean local directory serves,
    checked with verify="full"), and the faults: ``traceback`` (any other
    exception), ``served_wrong`` (other documents or samples, or an id outside
    the vocabulary at verify="header"), ``hang`` (20 s a case), ``escaped``
    (a file written anywhere in ``tmp_path`` outside the case's cache folder)."""
    import random
    import signal
    import sys
    import traceback

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults"))
    from mutations import HOSTILE, mutate_bytes, mutate_json

    from ube_stream.errors import UbeError

    local_dir, _, _ = directory
    local = TokenShards(local_dir)
    clean_docs = [local.doc(i).tolist() for i in range(len(local))]
    ds_local = TokenDataset(local_dir, 64, shuffle=False)
    clean_samples = [ds_local[k].tolist() for k in range(len(ds_local))]
    victim = tmp_path / "victim"
    hostile = [v for v in HOSTILE if v not in ("/etc/passwd", "/dev/zero")] + [
        str(victim / "owned.tokens"), str(victim / "owned.idx"), "../../../owned.idx", "shards/../../owned.tokens"]
    prefix = f"{BUCKET}/fuzz-{kind}"
    s3.invalidate_cache()
    if not s3.exists(f"{prefix}/MANIFEST.json"):
        s3.copy(f"{BUCKET}/lazy", prefix, recursive=True)
    manifest = json.loads(s3.cat_file(f"{prefix}/MANIFEST.json"))
    target = "MANIFEST.json" if kind == "manifest" else manifest["shards"][1]["index_file"]
    clean = s3.cat_file(f"{prefix}/{target}")
    url = f"s3://{prefix}"
    rng = random.Random(seed)
    tally = {"cases": 0, "ok": 0, "error": 0, "traceback": 0, "served_wrong": 0, "hang": 0, "escaped": 0,
             "examples": []}

    def alarm(signum, frame):
        raise TimeoutError("case ran past 20 s")

    def before():
        return {p for p in map(str, tmp_path.rglob("*")) if not p.startswith(str(tmp_path / "cases"))}

    files_before = before()
    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for case in range(cases):
            cache = tmp_path / "cases" / f"cache{case}"
            os.environ["UBE_STREAM_CACHE"] = str(cache)
            mutated = mutate_json(clean, rng, hostile) if kind == "manifest" else mutate_bytes(clean, rng)
            s3.pipe_file(f"{prefix}/{target}", mutated)
            s3.invalidate_cache()
            signal.alarm(20)
            try:
                shards = TokenShards(url, verify="full")
                docs = [shards.doc(i).tolist() for i in range(len(shards))]
                ds = TokenDataset(url, 64, shuffle=False, verify="full")
                samples = [ds[k].tolist() for k in range(len(ds))]
                outcome = "ok" if (docs, samples) == (clean_docs, clean_samples) else "served_wrong"
                cheap = TokenDataset(url, 64, shuffle=False, verify="header")
                if any(max(cheap[k].tolist(), default=0) >= SMALL.vocab_size for k in range(len(cheap))):
                    outcome = "served_wrong"
            except TimeoutError:
                outcome = "hang"
            except UbeError:
                outcome = "error"
            except Exception:
                outcome = "traceback"
                tally["examples"].append(f"case {case}: {traceback.format_exc()[-1500:]}")
            finally:
                signal.alarm(0)
            if outcome == "served_wrong":
                tally["examples"].append(f"case {case}: served other tokens ({mutated[:300]!r})")
            if before() != files_before or victim.exists():
                tally["escaped"] += 1
                tally["examples"].append(f"case {case}: wrote {sorted(before() - files_before)[:5]}")
            tally[outcome] += 1
            tally["cases"] += 1
    finally:
        signal.signal(signal.SIGALRM, old)
        s3.pipe_file(f"{prefix}/{target}", clean)
    return tally


@pytest.mark.parametrize("kind", ["manifest", "index"])
@pytest.mark.parametrize("cases", [pytest.param(8, id="8"), pytest.param(300, id="300", marks=pytest.mark.slow)])
def test_mutated_remote_directories_are_refused_or_served_right(directory, cache, s3, tmp_path, kind,  # noqa: F811
                                                                cases):
    """Issue 26: MANIFEST and index mutations of a remote shard directory read
    through TokenShards("s3://...") and TokenDataset: 0 tracebacks, 0 hangs,
    0 wrongly served tokens, nothing written outside the cache folder."""
    tally = _fuzz_remote(directory, s3, tmp_path, kind, cases, seed=26 if cases < 300 else 2026)
    print(kind, json.dumps({k: v for k, v in tally.items() if k != "examples"}))   # the tally, with -s
    assert tally["cases"] == cases
    faults = {k: tally[k] for k in ("traceback", "served_wrong", "hang", "escaped")}
    assert faults == dict.fromkeys(faults, 0), tally["examples"]
    assert tally["error"] > 0    # the mutants do reach the checks
