"""The chunk counter (ube_stream._count) against collections.Counter of byte slices."""
from __future__ import annotations

import io
import itertools
import json
import pathlib
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest
import regex
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream._count import ChunkCounter, _hash
from ube_stream._reference import GPT2_PATTERN
from ube_stream.errors import InputError
from ube_stream.training.chunk_table import TableFile, load_table, merge_tables, save_table, table_intact, table_to_dict

DATA = pathlib.Path(__file__).parent / "data"


# ----------------------------------------------------------------------------- helpers

def read_docs(name="docs_sample.jsonl.zst"):
    with open(DATA / name, "rb") as raw:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), encoding="utf-8")
        return [json.loads(line)["text"] for line in reader]


def regex_chunks(docs):
    """(buffer, ends): the documents' UTF-8 back to back, chunked by the GPT-2
    regex (the independent pre-tokenizer); ends are exclusive byte offsets and
    fall on every document boundary."""
    parts, ends, pos = [], [], 0
    for doc in docs:
        for match in regex.finditer(GPT2_PATTERN, doc):
            piece = match.group().encode("utf-8")
            parts.append(piece)
            pos += len(piece)
            ends.append(pos)
        if not doc:
            ends.append(pos)  # an empty document: an empty chunk
    return b"".join(parts), np.array(ends, dtype=np.int64)


def slices(data, ends, start=0):
    out, prev = [], start
    for end in ends:
        out.append(bytes(data[prev:end]))
        prev = int(end)
    return out


def counted(data, ends, start=0):
    """Counter of the non-empty chunks: the truth the kernel must match."""
    return Counter(s for s in slices(data, ends, start) if s)


def exported_dict(counter, min_count=1):
    return table_to_dict(counter.export(min_count))


def assert_sorted_export(table):
    key_data, key_offsets, counts = table
    assert key_data.dtype == np.uint8 and key_offsets.dtype == np.int64 and counts.dtype == np.int64
    assert key_offsets.shape == (counts.shape[0] + 1,) and key_offsets[0] == 0
    assert key_offsets[-1] == key_data.shape[0]
    keys = list(table_to_dict(table))
    assert keys == sorted(keys)  # bytes order: lexicographic, a prefix first
    assert len(set(keys)) == len(keys)


@pytest.fixture(scope="module")
def real_text():
    docs = read_docs()
    return regex_chunks(docs)


# ----------------------------------------------------------------------------- real text

def test_real_text_matches_counter(real_text):
    data, ends = real_text
    truth = counted(data, ends)
    counter = ChunkCounter(initial_capacity=16)  # start tiny: many growths on the way
    counter.add_chunks(np.frombuffer(data, np.uint8), ends)
    assert exported_dict(counter) == dict(truth)
    assert len(counter) == len(truth) > 20_000
    assert counter.total == sum(truth.values()) == len(ends)
    assert 4 * len(counter) <= 3 * counter.capacity  # grew from 16 slots, load <= 3/4
    assert counter.memory_bytes >= counter.capacity * 32 + sum(len(k) for k in truth)
    assert_sorted_export(counter.export())


def test_real_text_in_batches_with_start(real_text):
    """Batches that start mid-buffer (``start``) count the same as one call."""
    data, ends = real_text
    buffer = np.frombuffer(data, np.uint8)
    whole = ChunkCounter()
    whole.add_chunks(buffer, ends)
    batched = ChunkCounter()
    start = 0
    for cut in range(0, len(ends), 7919):
        part = ends[cut:cut + 7919]
        batched.add_chunks(buffer, part, start=start)
        start = int(part[-1])
    for a, b in zip(whole.export(), batched.export()):
        np.testing.assert_array_equal(a, b)


def test_min_count_filters(real_text):
    data, ends = real_text
    truth = counted(data, ends)
    counter = ChunkCounter()
    counter.add_chunks(data, ends)  # bytes are accepted as a read-only buffer
    assert exported_dict(counter, min_count=5) == {k: v for k, v in truth.items() if v >= 5}
    assert exported_dict(counter, min_count=0) == dict(truth)
    assert counter.export(min_count=10**18)[1].tolist() == [0]


def test_merge_of_partial_tables_equals_one_table(real_text):
    data, ends = real_text
    one = ChunkCounter()
    one.add_chunks(data, ends)
    parts = []
    bounds = [0, 1000, 30_000, 31_000, len(ends)]
    for lo, hi in zip(bounds, bounds[1:]):
        part = ChunkCounter()
        part.add_chunks(data, ends[lo:hi], start=int(ends[lo - 1]) if lo else 0)
        parts.append(part.export())
    expected = one.export()
    for order in itertools.permutations(range(len(parts))):
        merged = merge_tables([parts[i] for i in order])
        for a, b in zip(expected, merged):
            np.testing.assert_array_equal(a, b)
    # min_count applies to the merged sums, not to each part
    truth = counted(data, ends)
    assert table_to_dict(merge_tables(parts, min_count=3)) == {k: v for k, v in truth.items() if v >= 3}


# ----------------------------------------------------------------------------- hypothesis

@st.composite
def buffers_and_ends(draw):
    data = draw(st.binary(max_size=300))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=60)))
    start = draw(st.integers(0, cuts[0] if cuts else len(data)))
    return data, np.array(cuts, dtype=np.int64), start


@settings(max_examples=300, deadline=None)
@given(buffers_and_ends())
def test_random_buffers_match_counter(case):
    data, ends, start = case
    counter = ChunkCounter(initial_capacity=0)
    counter.add_chunks(data, ends, start=start)
    truth = counted(data, ends, start)
    assert exported_dict(counter) == dict(truth)
    assert counter.total == sum(truth.values())
    assert len(counter) == len(truth)
    assert_sorted_export(counter.export())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=3000), st.randoms())
def test_insertion_order_does_not_change_export(keys, rng):
    """Many distinct keys (several growths from 16 slots), inserted in two orders."""
    shuffled = keys[:]
    rng.shuffle(shuffled)
    exports = []
    for order in (keys, shuffled):
        counter = ChunkCounter(initial_capacity=16)
        data = b"".join(order)
        counter.add_chunks(data, np.cumsum([len(k) for k in order]))
        exports.append(counter.export())
    for a, b in zip(*exports):
        np.testing.assert_array_equal(a, b)
    assert table_to_dict(exports[0]) == dict(Counter(keys))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.binary(max_size=12), st.integers(0, 2**40)), max_size=40),
                max_size=5), st.randoms())
def test_add_weighted_merges_any_order(tables, rng):
    truth = Counter()
    exported = []
    for items in tables:
        keys = [k for k, _ in items]
        counts = [c for _, c in items]
        offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys], dtype=np.int64)]).astype(np.int64)
        exported.append((np.frombuffer(b"".join(keys), np.uint8), offsets, np.array(counts, np.int64)))
        for key, count in items:  # repeated keys within one table are summed
            truth[key] += count
    expected = {k: v for k, v in truth.items() if v >= 1}
    order = list(range(len(exported)))
    rng.shuffle(order)
    merged = merge_tables([exported[i] for i in order])
    assert table_to_dict(merged) == expected
    for a, b in zip(merged, merge_tables(exported)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=10), st.lists(st.binary(max_size=12).map(
    lambda b: bytes(x % 3 * 0x7F for x in b)), min_size=1, max_size=80), st.randoms())
def test_export_order_when_keys_share_their_first_8_bytes(prefix, tails, rng):
    """Export sorts on the first 8 bytes read as one integer, then on the key
    bytes: keys that agree on those 8 bytes (a common prefix, NUL padding vs
    real NUL bytes, lengths 7/8/9) must still come out in bytes order."""
    keys = [prefix + tail for tail in tails]
    rng.shuffle(keys)
    counter = ChunkCounter(initial_capacity=16)
    counter.add_chunks(b"".join(keys), np.cumsum([len(k) for k in keys], dtype=np.int64))
    assert_sorted_export(counter.export())
    assert exported_dict(counter) == dict(Counter(k for k in keys if k))
    exact = [b"abcdefg", b"abcdefg\x00", b"abcdefgh", b"abcdefgh\x00", b"abcdefgh\x00\x00",
             b"abcdefgha", b"abcdefg\x01", b"abcdefg\x00\x01", b"\x00", b"\x00" * 9]
    counter = ChunkCounter()
    counter.add_chunks(b"".join(exact), np.cumsum([len(k) for k in exact], dtype=np.int64))
    assert list(exported_dict(counter)) == sorted(exact)


def test_long_runs_of_empty_and_repeated_chunks_match_counter(real_text):
    """Chunks are hashed a few ahead of the one being counted: runs of empty
    chunks (longer than that window), a buffer ending in empties, and the
    same key many times in a row must count exactly as Counter does."""
    data, ends = real_text
    rng = np.random.default_rng(5)
    ends = np.sort(np.concatenate([ends[:3000], rng.choice(ends[:3000], 2000),
                                   np.full(100, ends[1500]), np.full(50, ends[2999])]))
    counter = ChunkCounter(initial_capacity=16)
    counter.add_chunks(data, ends)
    truth = counted(data, ends)
    assert exported_dict(counter) == dict(truth) and counter.total == sum(truth.values())
    repeated = b"ab" * 500
    counter = ChunkCounter()
    counter.add_chunks(repeated, np.arange(2, 1001, 2, dtype=np.int64))
    assert exported_dict(counter) == {b"ab": 500}
    # the weighted path with zero counts scattered through more keys than the window
    keys = [bytes([i % 7, i % 11]) * (i % 5) for i in range(300)]
    weights = np.array([0 if i % 4 == 0 else i for i in range(300)], np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys])]).astype(np.int64)
    merged = ChunkCounter()
    merged.add_weighted(b"".join(keys), offsets, weights)
    truth = Counter()
    for key, weight in zip(keys, weights):
        truth[key] += int(weight)
    assert exported_dict(merged) == {k: v for k, v in truth.items() if v > 0}


# ----------------------------------------------------------------------------- edges

def test_counts_above_int32_do_not_wrap():
    counter = ChunkCounter()
    big = np.array([3_000_000_000], np.int64)
    counter.add_weighted(b"key", np.array([0, 3]), big)
    counter.add_weighted(b"key", np.array([0, 3]), big)
    counter.add_chunks(b"key", np.array([3]))
    assert exported_dict(counter) == {b"key": 6_000_000_001}
    assert counter.total == 6_000_000_001


def test_overflow_past_int64_is_refused_and_adds_nothing():
    counter = ChunkCounter()
    counter.add_weighted(b"ab", np.array([0, 1, 2]), np.array([2**62, 1]))
    before = counter.export()
    with pytest.raises(OverflowError, match=r"^adding counts\[1\] = 4611686018427387904 would take the "
                                            r"table's total past 2\*\*63 - 1; nothing was added$"):
        counter.add_weighted(b"ba", np.array([0, 1, 2]), np.array([5, 2**62]))
    assert table_to_dict(counter.export()) == table_to_dict(before)
    assert counter.total == 2**62 + 1


def test_empty_chunks_are_skipped():
    """Equal consecutive ends (an empty document) are ignored, not counted."""
    counter = ChunkCounter()
    counter.add_chunks(b"abab", np.array([0, 2, 2, 2, 4, 4]))
    assert exported_dict(counter) == {b"ab": 2}
    assert counter.total == 2
    counter.add_chunks(b"", np.array([0, 0], np.int64))
    counter.add_chunks(b"xyz", np.array([], np.int64), start=3)
    assert counter.total == 2 and len(counter) == 1


@pytest.mark.parametrize("ends, start, match", [
    ([2, 1, 4], 0, r"ends\[1\] = 1 is smaller than ends\[0\] = 2"),
    ([1, 2, 5], 0, r"ends\[2\] = 5 is beyond the end of the buffer \(4 bytes\)"),
    ([1, 2], 2, r"ends\[0\] = 1 is smaller than start = 2"),
    ([-1], 0, r"ends\[0\] = -1"),
])
def test_bad_ends_raise_with_index_and_count_nothing(ends, start, match):
    counter = ChunkCounter()
    with pytest.raises(ValueError, match=match):
        counter.add_chunks(b"abcd", np.array(ends, np.int64), start=start)
    assert len(counter) == 0 and counter.total == 0


@pytest.mark.parametrize("start", [-1, 5])
def test_bad_start_raises(start):
    with pytest.raises(ValueError, match=f"start = {start}"):
        ChunkCounter().add_chunks(b"abcd", np.array([4], np.int64), start=start)


@pytest.mark.parametrize("offsets, counts, error, match", [
    ([0, 1], [1, 2], ValueError, r"len\(counts\) \+ 1 = 3"),
    ([0, 2, 1], [1, 1], ValueError, r"key_offsets\[2\] = 1 is smaller than key_offsets\[1\] = 2"),
    ([0, 1, 9], [1, 1], ValueError, r"key_offsets\[2\] = 9 is outside key_data"),
    ([-1, 1, 2], [1, 1], ValueError, r"key_offsets\[0\] = -1 is outside"),
    ([0, 1, 2], [1, -4], ValueError, r"counts\[1\] = -4 is negative"),
])
def test_bad_weighted_tables_raise_with_index(offsets, counts, error, match):
    counter = ChunkCounter()
    with pytest.raises(error, match=match):
        counter.add_weighted(b"ab", np.array(offsets, np.int64), np.array(counts, np.int64))
    assert len(counter) == 0 and counter.total == 0


def test_wrong_dtypes_are_rejected():
    with pytest.raises(ValueError):  # int32 ends: a buffer dtype mismatch, not a silent cast
        ChunkCounter().add_chunks(b"ab", np.array([1, 2], np.int32))


def test_prefix_keys_sort_shorter_first_and_empty_key_allowed_in_weighted():
    counter = ChunkCounter()
    keys = [b"ab", b"a", b"", b"\xff", b"abc", b"b", b"a\x00"]
    offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys])]).astype(np.int64)
    counter.add_weighted(b"".join(keys), offsets, np.ones(len(keys), np.int64))
    assert list(exported_dict(counter)) == sorted(keys) == [b"", b"a", b"a\x00", b"ab", b"abc", b"b", b"\xff"]


def test_clear_releases_and_resets():
    counter = ChunkCounter(initial_capacity=16)
    counter.add_chunks(bytes(range(256)) * 4, np.arange(1, 1025, dtype=np.int64))
    assert len(counter) == 256 and counter.capacity > 16
    counter.clear()
    assert len(counter) == 0 and counter.total == 0 and counter.capacity == 16
    assert exported_dict(counter) == {}
    counter.add_chunks(b"xy", np.array([1, 2]))
    assert exported_dict(counter) == {b"x": 1, b"y": 1}


def test_hash_spreads_similar_keys():
    """Near-identical keys (one bit apart, lengths 0..40) get distinct hashes whose
    low bits (the slot index) differ often: linear probing needs it."""
    keys = [bytes(n) for n in range(41)] + [b"chunk%07d" % i for i in range(20_000)]
    hashes = [_hash(k) for k in keys]
    assert len(set(hashes)) == len(keys)
    low = Counter(h & 0xFFF for h in hashes[41:])
    assert max(low.values()) < 20  # ~4.9 expected per bucket of 4096
    assert _hash(b"abc") == _hash(bytearray(b"abc"))


def test_short_keys_hash_apart_within_their_length():
    """Keys of at most 8 bytes skip the byte compare on a hash-and-length match, which is
    only right if no two such keys of one length share a hash: every 1- and 2-byte key,
    and 50,000 random keys of each length 3..8."""
    rng = np.random.default_rng(8)
    for n in range(0, 9):
        if n <= 2:
            keys = [bytes(k) for k in itertools.product(range(256), repeat=n)]
        else:
            keys = list({rng.integers(0, 256, n, dtype=np.uint8).tobytes() for _ in range(50_000)})
        assert len({_hash(k) for k in keys}) == len(keys), n


def test_a_short_key_counts_as_one_wherever_it_lies_in_the_buffer():
    """The word of a short key is one masked load inside the buffer and a byte loop in its
    last 8 bytes: both read the same key alike."""
    counter = ChunkCounter()
    data = np.frombuffer(b"abc" + b"x" * 10 + b"abc" + b"hello w" + b"hello w", np.uint8)
    counter.add_chunks(data, np.array([3, 13, 16, 23, 30], np.int64))
    assert exported_dict(counter) == {b"abc": 2, b"x" * 10: 1, b"hello w": 2}
    again = ChunkCounter()
    again.add_weighted(*counter.export())
    assert exported_dict(again) == exported_dict(counter)


def test_threads_count_in_parallel_tables(real_text):
    """add_chunks releases the GIL; one table per thread, merged, equals one table."""
    data, ends = real_text
    halves = [(ends[:20_000], 0), (ends[20_000:], int(ends[19_999]))]
    tables = [ChunkCounter(), ChunkCounter()]
    threads = [threading.Thread(target=t.add_chunks, args=(data, e), kwargs={"start": s})
               for t, (e, s) in zip(tables, halves)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert table_to_dict(merge_tables(tables)) == dict(counted(data, ends))


def test_concurrent_use_of_one_table_is_refused_not_corrupting(real_text):
    """A second thread calling into a table that is counting without the GIL gets
    RuntimeError; every call that succeeded is counted exactly."""
    data, ends = real_text
    counter = ChunkCounter()
    refused = threading.Event()
    passes = []  # the worker's calls that succeeded

    def count_passes():  # at least 3 passes, and on until a side call was refused
        while len(passes) < 3 or not refused.is_set() and len(passes) < 500:
            try:
                counter.add_chunks(data, ends)
                passes.append(1)
            except RuntimeError:  # a side call held the table: this pass counted nothing
                pass

    truth = Counter()
    calls = 0

    def side_call():  # each call inserts 300 new keys: growths race if unguarded
        nonlocal calls
        keys = [b"~side %d.%d" % (calls, j) for j in range(300)]
        calls += 1
        counter.add_chunks(b"".join(keys), np.cumsum([len(k) for k in keys]))
        truth.update(keys)

    worker = threading.Thread(target=count_passes)
    worker.start()
    try:
        with pytest.raises(RuntimeError, match="^ChunkCounter is in use by another thread; use one table "
                                               "per thread and merge their exports with add_weighted$"):
            while worker.is_alive():
                side_call()
        refused.set()
        while worker.is_alive():
            try:
                side_call()
            except RuntimeError as exc:
                assert "one table per thread" in str(exc)
    finally:
        refused.set()
        worker.join()
    assert len(passes) >= 3
    truth.update({k: len(passes) * v for k, v in counted(data, ends).items()})
    assert exported_dict(counter) == dict(truth)
    assert counter.total == sum(truth.values())


def test_absurd_initial_capacity_is_a_memory_error():
    with pytest.raises(MemoryError, match="hash table"):
        ChunkCounter(initial_capacity=2**62)
    with pytest.raises(ValueError, match="initial_capacity"):
        ChunkCounter(initial_capacity=-1)


OUT_OF_MEMORY = """
import resource, numpy as np
from ube_stream._count import ChunkCounter
from ube_stream.errors import check_status, err_buffer
keys = np.arange(6_000_000, dtype=np.uint64).view(np.uint8)     # 6 M distinct 8-byte keys
ends = np.arange(8, keys.shape[0] + 1, 8, dtype=np.int64)
counter = ChunkCounter()
counter.add_chunks(keys[:800], ends[:100])                        # warm up the code paths
with open("/proc/self/statm") as f:
    virtual = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (virtual + 64 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
try:
    err = err_buffer()
    check_status(counter.add_chunks(keys, ends, 0, err), err, what="counting chunks")
    print("no error")
except MemoryError as exc:
    assert "out of memory" in str(exc), exc
    assert err[0] > 0 and err[1] == -1, list(err)                  # the bytes it could not allocate
    assert 100 < len(counter) < 6_000_000 and counter.total == len(counter) + 100, (len(counter), counter.total)
    counter.clear()
    counter.add_chunks(b"ok", np.array([2], np.int64))
    assert counter.export()[2].tolist() == [1]
    print("clean MemoryError")
"""


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="needs Linux RLIMIT_AS")
def test_out_of_memory_inside_nogil_is_a_clean_memory_error():
    """A table that cannot grow (address-space limit) stops with MemoryError, keeps
    the chunks counted so far consistent, and is usable after clear()."""
    out = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY], capture_output=True, text=True,
                         cwd=pathlib.Path(__file__).parents[1], timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean MemoryError"


# ----------------------------------------------------------------------------- files

def test_save_load_round_trip(tmp_path, real_text):
    data, ends = real_text
    counter = ChunkCounter()
    counter.add_chunks(data, ends[:5000])
    table = counter.export()
    path = tmp_path / "counts.npz"
    save_table(path, table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.npz"]  # no temp file left
    loaded = load_table(path)
    for a, b in zip(table, loaded):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    save_table(path, merge_tables([table, table]))  # replaces atomically
    assert table_to_dict(load_table(path)) == {k: 2 * v for k, v in table_to_dict(table).items()}


def test_load_rejects_foreign_files(tmp_path):
    other = tmp_path / "other.npz"
    np.savez(other, key_data=np.zeros(0, np.uint8))
    with pytest.raises(InputError, match="ube-stream-chunk-counts"):
        load_table(other)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="junk.npz"):
        load_table(junk)


def test_save_rejects_inconsistent_table(tmp_path):
    with pytest.raises(ValueError, match="len\\(counts\\) \\+ 1"):
        save_table(tmp_path / "x.npz", (np.zeros(2, np.uint8), np.array([0, 2]), np.array([1, 1])))
    assert list(tmp_path.iterdir()) == []


def _table_of(counts):
    """An exported table of ``{key bytes: count}`` (sorted by key, as export gives it)."""
    keys = sorted(counts)
    return (np.frombuffer(b"".join(keys), np.uint8).copy(), np.cumsum([0] + [len(k) for k in keys]).astype(np.int64),
            np.array([counts[k] for k in keys], np.int64))


keys_st = st.dictionaries(st.binary(max_size=6), st.integers(1, 10**12), max_size=60)


@settings(max_examples=60, deadline=None)
@given(counts=keys_st, lo=st.none() | st.binary(max_size=4), hi=st.none() | st.binary(max_size=4),
       n=st.integers(1, 70))
def test_table_file_reads_keys_ranges_and_samples_as_the_sorted_table_holds_them(tmp_path_factory, counts, lo, hi,
                                                                                   n):
    path = tmp_path_factory.mktemp("table") / "t.npz"
    save_table(path, _table_of(counts))
    keys = sorted(counts)          # bytes order: what export sorts by (a proper prefix first)
    with TableFile(path) as table:
        assert table.n_keys == len(keys)
        assert [table.key(i) for i in range(len(keys))] == keys
        for probe in (lo, hi):
            if probe is not None:
                assert table.lower_bound(probe) == sum(k < probe for k in keys)
        part = table.range(lo, hi)
        assert table_to_dict(part) == {k: v for k, v in counts.items()
                                       if (lo is None or k >= lo) and (hi is None or k < hi)}
        assert part[1][0] == 0 and all(a.flags.c_contiguous and a.flags.aligned for a in part)
        sample = table.sample(n)
        assert sample == sorted(sample) and set(sample) <= set(keys) and len(sample) == min(n, len(keys))
    assert table_to_dict(load_table(path)) == counts


def test_table_file_refuses_damage_before_reading_the_arrays(tmp_path, real_text):
    data, ends = real_text
    counter = ChunkCounter()
    counter.add_chunks(data, ends[:3000])
    good = tmp_path / "good.npz"
    save_table(good, counter.export())
    raw = good.read_bytes()
    with TableFile(good) as table:
        counts_at, offsets_at = table._data_at["counts"], table._data_at["key_offsets"]
        n_keys = table.n_keys
    assert table_intact(good)

    def damaged(name, mutate):
        path = tmp_path / name
        buf = bytearray(raw)
        mutate(buf)
        path.write_bytes(bytes(buf))
        return path

    # cut anywhere: the zip directory, a header or an array is missing
    for cut in (len(raw) - 10, counts_at + 8, offsets_at - 40, 100):
        path = tmp_path / f"cut-{cut}.npz"
        path.write_bytes(raw[:cut])
        with pytest.raises(InputError, match=f"cut-{cut}.npz"):
            TableFile(path)
        assert not table_intact(path)
    # a header that claims 10**15 counts is refused before anything is sized by it
    header = raw.rindex(b"{'descr'", 0, counts_at)   # the counts array's .npy header
    end = raw.index(b"\n", header)
    claim = raw[header:end].replace(b"(%d,)" % n_keys, b"(%d,)" % 10**15).rstrip()
    claim += b" " * (end - header - len(claim))     # the header keeps its length: only the shape changes
    huge = damaged("huge.npz", lambda b: b.__setitem__(slice(header, end), claim))
    with pytest.raises(InputError, match="huge.npz.*runs past"):
        TableFile(huge)
    # a header that is not a dict literal
    broken = damaged("broken.npz", lambda b: b.__setitem__(slice(header, header + 1), b"("))
    with pytest.raises(InputError, match="broken.npz.*header"):
        TableFile(broken)
    # offsets that run backwards are refused when read, naming the keys
    back = damaged("back.npz", lambda b: b.__setitem__(slice(offsets_at + 8 * 5, offsets_at + 8 * 6),
                                                       (10**9).to_bytes(8, "little")))
    with TableFile(back) as table, pytest.raises(InputError, match="back.npz.*not increasing"):
        table.range(None, None)
    with pytest.raises(InputError, match="back.npz"):
        load_table(back)
    # a flipped count passes the structure checks (TableFile reads only what is asked) but not the CRC
    flipped = damaged("flipped.npz", lambda b: b.__setitem__(counts_at + 3, b[counts_at + 3] ^ 0x10))
    with TableFile(flipped) as table:
        assert table.n_keys == n_keys
    assert not table_intact(flipped)
    # compressed members are not what save_table writes
    table = counter.export()
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, format=np.array("ube-stream-chunk-counts"), version=np.array(1, np.int64),
                        key_data=table[0], key_offsets=table[1], counts=table[2])
    with pytest.raises(InputError, match="packed.npz.*compressed"):
        TableFile(packed)


# ----------------------------------------------------------------------------- status convention

def test_adding_returns_the_status():
    from ube_stream.errors import err_buffer

    counter = ChunkCounter()
    err = err_buffer()
    assert counter.add_chunks(b"abab", np.array([2, 4], np.int64), 0, err) == 0
    assert counter.add_weighted(b"ab", np.array([0, 2], np.int64), np.array([3], np.int64), err) == 0
    assert counter.add_chunks(b"ab", np.array([2], np.int64)) == 0  # err is optional
    assert list(err) == [-1, -1] and table_to_dict(counter.export()) == {b"ab": 6}
    with pytest.raises(ValueError, match="err needs 2 int64 entries"):
        counter.add_chunks(b"ab", np.array([2], np.int64), 0, np.zeros(1, np.int64))
    assert counter.total == 6  # refused before counting anything
