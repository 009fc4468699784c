"""The chunk cache's eviction rule, measured: hits, misses and CPU time of one pass over a
mixed corpus through a cache bounded to ``--entries`` chunks (far fewer than the corpus's
distinct chunks, so it is full most of the pass), in the checkout ``--repo`` (built).

    python benchmarks/cache_eviction.py --repo /path/to/checkout [--mb 30] [--entries 65536]

Run it in two checkouts (e.g. one whose cache clears when full and one that sweeps to its
most-hit chunks) and compare ``hit_rate`` and ``mb_per_s``: same corpus (the mixed corpus
of ``encode_corpus_scale.py``), cl100k (``bpe-openai``), one thread, 1 MB calls, the
``Encoder`` built directly (``cache_entries`` bounds both; ``cache_bytes`` is left large).
Each run leaves a record (``_record.py``) naming the checkout measured.
"""
import argparse
import json
import os
import sys
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=os.path.dirname(HERE))
    parser.add_argument("--shared", default="/work/shared/data")
    parser.add_argument("--mb", type=float, default=30.0)
    parser.add_argument("--entries", type=int, default=1 << 16)
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from encode_corpus_scale import mixed_corpus, rank_file

    texts, corpus = mixed_corpus(args.shared, args.mb)
    sys.path.insert(0, os.path.abspath(args.repo))   # the checkout measured (its compiled kernels)
    import tempfile

    import numpy as np

    from ube_stream import Tokenizer, _encode
    from ube_stream.pretokenizer import encoder_split, tiktoken_class_table

    with tempfile.TemporaryDirectory() as tmp:
        _, ranks = rank_file("cl100k_base", tmp)
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    encoder = _encode.Encoder(np.array(tok.merges, dtype=np.uint32).reshape(-1, 2),
                              np.array(tok.merge_results, dtype=np.uint32), tok.base_size, 1, tiktoken_class_table(),
                              split=encoder_split(tok.pattern), id_map=tok._id_map, cache_entries=args.entries,
                              cache_bytes=64 << 20)
    spent, done, i = 0.0, 0, 0
    while i < len(texts):
        batch, size = [], 0
        while i < len(texts) and size < 1e6:
            batch.append(texts[i].encode())
            size += len(batch[-1])
            i += 1
        data = np.frombuffer(b"".join(batch), np.uint8)
        offsets = np.cumsum([0] + [len(b) for b in batch]).astype(np.int64)
        started = time.process_time()
        status, _, _ = encoder.encode_utf8(data, offsets)
        spent += time.process_time() - started
        assert status == 0
        done += size
    stats = encoder.cache_stats()
    hit_rate = stats["hits"] / max(stats["hits"] + stats["misses"], 1)
    print(json.dumps({"stats": stats, "hit_rate": hit_rate, "mb_per_s": done / 1e6 / spent}))
    write_record("cache_eviction", title="The chunk cache's eviction rule: hits, misses and CPU of one pass "
                 "(cl100k, one thread)",
                 columns=["checkout", "entries bound", "hits", "misses", "hit rate", "MB/s (CPU)"],
                 rows=[[os.path.abspath(args.repo), args.entries, stats.get("hits"), stats.get("misses"),
                        round(hit_rate, 4), round(done / 1e6 / spent, 2)]],
                 notes=[f"{done / 1e6:.1f} MB of the mixed corpus of encode_corpus_scale.py ({corpus}); kernel "
                        f"{_encode.__file__}"], data={"stats": stats, "corpus": corpus}, argv=argv)


if __name__ == "__main__":
    main()
