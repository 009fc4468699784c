"""Fault injection child (run by tests/test_hostile_files.py): build a clean shard
directory (and an unfinished one, for markers and the run plan; for count tables
the work directory a failed training keeps), then for each
case copy it, mutate one file of KIND (random bytes, or one JSON value replaced
by a hostile one: 2**31, -1, a path out of the directory, a device, a wrong
type, deep nesting), run what reads that file, and print a JSON tally:

    ok            read and served exactly what the clean file serves (or refused nothing it should)
    error         a UbeError (the file is named, the fix given)
    traceback     any other exception (a bug: counted, examples kept)
    served_wrong  read without error but served other tokens, ids or a different table
    hang          a case ran past its time cap (SIGALRM)

A crash (or a hang inside C code: faulthandler's watchdog) ends this process,
which the parent counts.  The parent caps this process's memory (RLIMIT_AS).

    python tests/faults/mutate_files.py KIND CASES SEED WORKDIR
"""
import faulthandler
import json
import os
import random
import shutil
import signal
import sys
import traceback
from pathlib import Path

import numpy as np

faulthandler.enable()
kind, n_cases, seed, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
CASE_SECONDS = 20

from mutations import mutate_bytes, mutate_json  # noqa: E402  (this folder: the shared mutators)

from ube_stream import encode_corpus, train  # noqa: E402
from ube_stream.errors import UbeError  # noqa: E402

DETAIL: list = []   # why the last case was counted served_wrong


class Hang(Exception):
    pass


def on_alarm(signum, frame):
    raise Hang()


signal.signal(signal.SIGALRM, on_alarm)


# ---------------------------------------------------------------- clean material

corpus = workdir / "corpus.jsonl"
corpus.write_text("".join(json.dumps({"text": f"doc {i} h\u00e9llo w\u00f6rld \u4e16\u754c 42 " * (1 + i % 5)}) + "\n"
                          for i in range(120)))
tok = train(str(corpus), vocab_size=600, workers=1, show_progress=False)
tok_path = workdir / "tok.json"
tok.save(str(tok_path))
clean_dir = workdir / "clean"
encode_corpus(str(corpus), tokenizer=tok, output=str(clean_dir), workers=1, unit_rows=30, shard_tokens=2000,
              show_progress=False)
unfinished = workdir / "unfinished"   # rank 0 of 2: markers and the plan stay
encode_corpus(str(corpus), tokenizer=tok, output=str(unfinished), workers=1, unit_rows=30, shard_tokens=2000,
              show_progress=False, rank=0, world_size=2)
TEXTS = ["h\u00e9llo w\u00f6rld 123 \u4e16\u754c!", "doc 7  \t\n caf\u00e9 42x"]
CLEAN_IDS = [tok.encode(t).tolist() for t in TEXTS]
VOCAB = tok.vocab_size


def clean_docs():
    from ube_stream.shards import TokenShards

    reader = TokenShards(str(clean_dir))
    return [reader.doc(i).tolist() for i in range(len(reader))], [reader.source(i) for i in range(len(reader))]


CLEAN_DOCS, CLEAN_SOURCES = clean_docs()


def samples(directory, verify):
    from ube_stream.loader import TokenDataset

    ds = TokenDataset(str(directory), 16, shuffle=False, verify=verify, dtype="uint32")
    return [ds[k].tolist() for k in range(len(ds))]


CLEAN_SAMPLES = samples(clean_dir, "full")


def served_shards(directory) -> str:
    """'ok' or 'served_wrong' for what TokenShards(verify='full') and TokenDataset serve."""
    from ube_stream.shards import TokenShards

    reader = TokenShards(str(directory), verify="full")
    docs = [reader.doc(i).tolist() for i in range(len(reader))]
    if docs != CLEAN_DOCS:
        DETAIL.append(f"documents differ: {len(docs)} vs {len(CLEAN_DOCS)} documents")
        return "served_wrong"
    # a MANIFEST has no checksum of its own: its source paths are provenance, not served tokens
    if kind != "manifest" and [reader.source(i) for i in range(len(reader))] != CLEAN_SOURCES:
        return "served_wrong"
    if samples(directory, "full") != CLEAN_SAMPLES:
        return "served_wrong"
    return "ok"


def target(directory: Path) -> Path:
    manifest = json.loads((clean_dir / "MANIFEST.json").read_text())
    entry = manifest["shards"][min(1, len(manifest["shards"]) - 1)]
    return {"manifest": directory / "MANIFEST.json", "index": directory / entry["index_file"],
            "tokens": directory / entry["tokens_file"], "tokenizer": directory / "tokenizer.json"}[kind]


def run_case(case_dir: Path, rng: random.Random) -> str:
    if kind in ("manifest", "index", "tokens"):
        shutil.copytree(clean_dir, case_dir)
        path = target(case_dir)
        raw = path.read_bytes()
        path.write_bytes(mutate_json(raw, rng) if kind == "manifest" else mutate_bytes(raw, rng))
        outcome = served_shards(case_dir)
        if kind == "tokens":   # the cheap level: an id outside the vocabulary is never served
            for sample in samples(case_dir, "header"):
                if sample and max(sample) >= VOCAB:
                    return "served_wrong"
        if kind == "manifest":
            from ube_stream.verification import verify_shards

            verify_shards(str(case_dir), workers=1, show_progress=False)
        return outcome
    if kind == "tokenizer":
        from ube_stream.tokenizer import Tokenizer

        case_dir.mkdir()
        path = case_dir / "tok.json"
        path.write_bytes(mutate_json(tok_path.read_bytes(), rng))
        loaded = Tokenizer.load(str(path))
        return "ok" if [loaded.encode(t).tolist() for t in TEXTS] == CLEAN_IDS else "served_wrong"
    if kind in ("marker", "plan"):
        from ube_stream.shards.writer import committed_record

        shutil.copytree(unfinished, case_dir)
        names = sorted(p.name for p in (case_dir / "units").glob("*.json") if p.name != "_plan.json")
        name = "_plan.json" if kind == "plan" else rng.choice(names)
        path = case_dir / "units" / name
        clean_record = json.loads(path.read_text())
        path.write_bytes(mutate_json(path.read_bytes(), rng))
        if kind == "marker":
            record = committed_record(str(case_dir), name[:-len(".json")])
            if record is not None and (record["shards"] != clean_record["shards"]
                                       or record["unit_id"] != clean_record["unit_id"]):
                DETAIL.append(f"{name}: marker trusted: {json.dumps(record)[:600]}")
                return "served_wrong"   # a marker whose files are not the unit's was trusted
        for rank in (0, 1):   # finish the run: a refused marker is re-encoded, a bad plan refused
            encode_corpus(str(corpus), tokenizer=tok, output=str(case_dir), workers=1, unit_rows=30,
                          shard_tokens=2000, show_progress=False, rank=rank, world_size=2)
        encode_corpus(str(corpus), tokenizer=tok, output=str(case_dir), workers=1, unit_rows=30,
                      shard_tokens=2000, show_progress=False, rank=0, world_size=2, finalize=True)
        return served_shards(case_dir)
    if kind == "class_table":
        from ube_stream import pretokenizer as p

        tables = sorted(Path(os.environ["UBE_STREAM_CACHE"]).glob("classes-*.u8"))
        path = rng.choice(tables)
        path.write_bytes(mutate_bytes(path.read_bytes(), rng))
        p.gpt2_class_table.cache_clear()
        p.tiktoken_class_table.cache_clear()
        same = (np.array_equal(p.gpt2_class_table(), CLEAN_TABLES[0])
                and np.array_equal(p.tiktoken_class_table(), CLEAN_TABLES[1]))
        return "ok" if same else "served_wrong"
    if kind == "count_table":
        from ube_stream.training.chunk_table import TableFile

        work = case_dir / "tok.json.ube-work"
        shutil.copytree(counted_work, work)
        path = rng.choice(sorted(work.glob("run-*/tables/*.npz")))
        path.write_bytes(mutate_bytes(path.read_bytes(), rng))
        try:   # read directly, CRC not checked: whatever it reads is structurally sound, or a UbeError
            with TableFile(path) as table:
                keys = table.sample(8)
                for lo, hi in ((None, None), (None, keys[len(keys) // 2] if keys else None),
                               (keys[0] if keys else None, None)):
                    key_data, key_offsets, counts = table.range(lo, hi)
                    if not (key_offsets[0] == 0 and key_offsets[-1] == len(key_data)
                            and len(counts) == len(key_offsets) - 1 and (np.diff(key_offsets) >= 0).all()):
                        DETAIL.append(f"{path.name}: a range of {len(counts)} keys with broken offsets")
                        return "served_wrong"
        except UbeError:
            pass
        # a rerun reuses only the tables whose CRCs match: the damaged unit is counted again
        from ube_stream.training.trainer import TrainSummary

        summary = TrainSummary()
        got = train(str(corpus), output=str(case_dir / "tok.json"), summary=summary, **COUNT_OPTIONS)
        if (got.merges, got.merge_results) != CLEAN_MERGES:
            DETAIL.append(f"{path.name}: the rerun trained other merges")
            return "served_wrong"
        if summary.units_reused < summary.units - 1:    # the harness's own check: the copy was resumed
            raise AssertionError(f"{summary.units_reused} of {summary.units} units reused, not the others")
        return "ok"
    raise SystemExit(f"unknown kind {kind!r}")


if kind == "class_table":
    from ube_stream import pretokenizer as p

    os.environ["UBE_STREAM_CACHE"] = str(workdir / "table-cache")
    p.gpt2_class_table.cache_clear()
    p.tiktoken_class_table.cache_clear()
    CLEAN_TABLES = (p._probe_gpt2_classes(), p._probe_tiktoken_classes())
    p.gpt2_class_table(), p.tiktoken_class_table()   # written to the cache

if kind == "count_table":   # a training whose merge phase failed keeps its unit tables (four ranges reduce them)
    from ube_stream.training import trainer as _trainer

    _trainer.PARTITION_MIN_BYTES = 0
    COUNT_OPTIONS = dict(vocab_size=600, workers=1, show_progress=False, unit_rows=30)
    clean = train(str(corpus), **COUNT_OPTIONS)
    CLEAN_MERGES = (clean.merges, clean.merge_results)
    counted_out = workdir / "counted" / "tok.json"
    counted_out.parent.mkdir()
    train_merges = _trainer._train_merges

    def failing_merges(*args, **kwargs):
        raise MemoryError("the merge phase failed (injected)")

    _trainer._train_merges = failing_merges
    try:
        train(str(corpus), output=str(counted_out), **COUNT_OPTIONS)
    except MemoryError:
        pass
    finally:
        _trainer._train_merges = train_merges
    counted_work = Path(str(counted_out) + ".ube-work")
    assert len(list(counted_work.glob("run-*/tables/*.npz"))) >= 4

rng = random.Random(seed)
tally = {"cases": 0, "ok": 0, "error": 0, "traceback": 0, "served_wrong": 0, "hang": 0, "crash": 0,
         "examples": []}
faulthandler.dump_traceback_later(CASE_SECONDS * n_cases + 120, exit=True)   # a hang inside C code
for case in range(n_cases):
    case_dir = workdir / f"case{case}"
    signal.alarm(CASE_SECONDS)
    try:
        outcome = run_case(case_dir, rng)
    except Hang:
        outcome = "hang"
    except UbeError:
        outcome = "error"
    except Exception:
        outcome = "traceback"
        tally["examples"].append(f"case {case}: {traceback.format_exc()[-1500:]}")
    finally:
        signal.alarm(0)
    if outcome == "served_wrong":
        tally["examples"].append(f"case {case}: served wrong {' '.join(DETAIL)}")
    DETAIL.clear()
    tally[outcome] += 1
    tally["cases"] += 1
    shutil.rmtree(case_dir, ignore_errors=True)
tally["examples"] = tally["examples"][:5]
print(json.dumps(tally))
