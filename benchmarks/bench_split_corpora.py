"""CPU throughput of the split kernels alone (``chunk_bounds_batch``) per pattern on the
corpora of side_by_side_encode.py: ``mixed`` (the first ``--mb`` MB), ``english`` (its
documents >= 97% ASCII) and ``cjk``, ``--side-mb`` MB each.  One document buffer per
corpus, ``--repeat`` passes per pattern; prints MB/s of UTF-8 input from the median
CPU time (``time.process_time``) of the passes.

``--encode cl100k,o200k`` adds the warm encode (``encode_utf8_batch`` after one
untimed pass, so every chunk is a cache hit) with bpe-openai's real ranks, the
split's share of which is what the split kernels change.

Run it on two builds in alternating processes to compare them (``--root`` is the
checkout whose package is imported, built in place)::

    for i in 1 2 3 4 5; do
      python benchmarks/bench_split_corpora.py --root /tmp/before
      python benchmarks/bench_split_corpora.py
    done
"""
import argparse
import os
import pickle
import statistics
import sys
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--root", default=os.path.dirname(HERE), help="checkout to import ube_stream from")
    parser.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--side-mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--patterns", default="gpt2,cl100k,llama3,o200k")
    parser.add_argument("--encode", default="", help="vocabularies to time warm encode with: cl100k,o200k")
    parser.add_argument("--cache", default="", help="pickle of the corpora, written on first use")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.root))
    import numpy as np

    from ube_stream import pretokenizer

    if args.cache and os.path.exists(args.cache):
        with open(args.cache, "rb") as f:
            texts_by_corpus = pickle.load(f)
    else:
        sys.path.insert(0, HERE)
        from side_by_side_encode import corpora

        texts_by_corpus = corpora(args.corpus, args.shared, args.mb, args.side_mb)
        if args.cache:
            with open(args.cache, "wb") as f:
                pickle.dump(texts_by_corpus, f)
    print(f"# ube_stream from {os.path.dirname(pretokenizer.__file__)}")
    tokenizers = {}
    if args.encode:
        import tempfile

        sys.path.insert(0, HERE)
        from side_by_side_encode import rank_file

        from ube_stream import Tokenizer

        with tempfile.TemporaryDirectory() as tmp:
            for vocab in args.encode.split(","):
                tokenizers[vocab] = Tokenizer.from_tiktoken(rank_file(f"{vocab}_base", tmp)[1], vocab)
    rows = []
    for label, texts in texts_by_corpus.items():
        blobs = [t.encode("utf-8") for t in texts]
        data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in blobs], out=offsets[1:])
        for pattern in args.patterns.split(","):
            pretokenizer.chunk_bounds_batch(data, offsets, pattern)  # warm
            times = []
            for _ in range(args.repeat):
                start = time.process_time()
                pretokenizer.chunk_bounds_batch(data, offsets, pattern)
                times.append(time.process_time() - start)
            print(f"{label:8s} {pattern:7s} {len(data) / 1e6 / statistics.median(times):8.1f} MB/s", flush=True)
            rows.append([label, f"split {pattern}", len(data) / 1e6 / statistics.median(times)])
        for vocab, tok in tokenizers.items():
            tok.encode_utf8_batch(data, offsets)  # fills the chunk cache
            times = []
            for _ in range(args.repeat):
                start = time.process_time()
                tok.encode_utf8_batch(data, offsets)
                times.append(time.process_time() - start)
            print(f"{label:8s} enc-{vocab:7s} {len(data) / 1e6 / statistics.median(times):8.1f} MB/s", flush=True)
            rows.append([label, f"encode {vocab}", len(data) / 1e6 / statistics.median(times)])
    sys.path.insert(0, HERE)
    write_record("bench_split_corpora", title="Pre-tokenizer split and encode by corpus (one thread, CPU time)",
                 columns=["corpus", "what", "MB/s (CPU)"], rows=rows,
                 notes=[f"ube_stream from {os.path.dirname(pretokenizer.__file__)}; medians of {args.repeat}"],
                 argv=argv)


if __name__ == "__main__":
    main()
