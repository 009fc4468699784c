"""Side by side, one process: encode and decode throughput, ours vs tiktoken vs HF tokenizers.

    python benchmarks/make_corpus.py --mb 60                 # once: the mixed corpus
    python benchmarks/side_by_side_encode.py [CORPUS.jsonl] [--mb 60] [--repeat 3]

One ``utf8`` tokenizer is trained on the first ``--train-mb`` MB of the corpus
(``--vocab`` tokens, GPT-2 pattern); tiktoken gets the same merges as
``mergeable_ranks`` (token bytes -> id) and HF ``tokenizers`` the exported
``tokenizer.json``, so all three give the same ids (checked).  On the first
``--mb`` MB of the corpus (its documents), it times:

encode  ours 1 thread (``encode_batch``, str in; and ``encode_utf8_batch`` on
        a UTF-8 buffer), ours N threads, tiktoken ``encode_ordinary`` in a loop
        and ``encode_ordinary_batch(num_threads=1)``, HF ``encode_batch``
        (``RAYON_NUM_THREADS``, default 1, set before import);
decode  ours ``decode`` per document vs tiktoken ``decode_bytes`` per document
        (and ``decode`` to str);
and the same for an ``ube`` tokenizer (ours only).  MB/s of UTF-8 input,
median of ``--repeat`` runs (our chunk cache stays warm across runs, as it does
in a long job; the first, cold run is printed too).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository (a built, not installed, checkout)


def load_corpus(path, mb):
    texts, size = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text.encode("utf-8"))
            if size >= mb * 1e6:
                break
    return texts, size


def timed(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--mb", type=float, default=60.0, help="MB of the corpus to encode (>= 50 for the report)")
    parser.add_argument("--train-mb", type=float, default=8.0)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--hf-threads", default=os.environ.get("RAYON_NUM_THREADS", "1"))
    parser.add_argument("--skip-hf", action="store_true")
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py` first")
    os.environ["RAYON_NUM_THREADS"] = str(args.hf_threads)  # before tokenizers is imported

    import numpy as np
    import tiktoken

    from ube_stream import train
    from ube_stream.pretokenizer import GPT2_PATTERN

    texts, size = load_corpus(args.corpus, args.mb)
    mb = size / 1e6
    train_texts, _ = load_corpus(args.corpus, args.train_mb)
    print(f"corpus: {args.corpus}: {len(texts):,} documents, {mb:.1f} MB; training on {args.train_mb} MB, "
          f"vocab {args.vocab}; {args.threads} threads for 'N threads'", flush=True)
    rows = []

    def row(name, times, base=None):
        median = statistics.median(times)
        rows.append((name, mb / median, mb / times[0], base))
        print(f"  {name:<44} {mb / median:9.1f} MB/s (first run {mb / times[0]:.1f})", flush=True)

    for substrate in ("utf8", "ube"):
        started = time.perf_counter()
        tok = train(iter(train_texts), vocab_size=args.vocab, substrate=substrate, workers=1,
                    show_progress=False)
        print(f"[{substrate}] trained {tok!r} in {time.perf_counter() - started:.1f} s", flush=True)
        encoded_docs = [t.encode("utf-8") for t in texts]
        data = np.frombuffer(b"".join(encoded_docs), np.uint8)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded_docs], out=offsets[1:])
        del encoded_docs

        times, ours = timed(lambda: tok.encode_batch(texts, num_threads=1), args.repeat)
        row(f"{substrate} encode ours encode_batch 1 thread", times)
        times, _ = timed(lambda: tok.encode_utf8_batch(data, offsets), args.repeat)
        row(f"{substrate} encode ours encode_utf8_batch 1 thread", times)
        times, threaded = timed(lambda: tok.encode_batch(texts, num_threads=args.threads), args.repeat)
        row(f"{substrate} encode ours encode_batch {args.threads} threads", times)
        assert all(np.array_equal(a, b) for a, b in zip(ours, threaded))
        n_tokens = sum(len(a) for a in ours)
        print(f"  ({n_tokens:,} tokens, {size / n_tokens:.2f} bytes/token)")
        ours_lists = [a.tolist() for a in ours]
        times, _ = timed(lambda: [tok.decode(a) for a in ours], args.repeat)
        row(f"{substrate} decode ours decode (str)", times)

        if substrate == "utf8":
            n = tok.vocab_size - len(tok.special_tokens)
            ranks = {bytes(tok.token_expansion(i)): i for i in range(n)}
            enc = tiktoken.Encoding("ube-bench", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                    special_tokens=dict(tok.special_tokens))
            times, theirs = timed(lambda: [enc.encode_ordinary(t) for t in texts], args.repeat)
            row("utf8 encode tiktoken encode_ordinary loop", times)
            assert theirs == ours_lists, "tiktoken ids differ"
            times, _ = timed(lambda: enc.encode_ordinary_batch(texts, num_threads=1), args.repeat)
            row("utf8 encode tiktoken encode_ordinary_batch 1 thread", times)
            times, _ = timed(lambda: [enc.decode_bytes(a) for a in ours_lists], args.repeat)
            row("utf8 decode tiktoken decode_bytes", times)
            times, _ = timed(lambda: [enc.decode(a) for a in ours_lists], args.repeat)
            row("utf8 decode tiktoken decode (str)", times)
            if not args.skip_hf:
                import tokenizers

                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "tokenizer.json")
                    tok.export_hf(path)
                    hf = tokenizers.Tokenizer.from_file(path)
                times, hf_out = timed(lambda: hf.encode_batch(texts, add_special_tokens=False), 1)
                row(f"utf8 encode HF encode_batch (RAYON_NUM_THREADS={args.hf_threads})", times)
                assert [e.ids for e in hf_out] == ours_lists, "HF ids differ"
                del hf_out

    by_name = {name: value for name, value, _, _ in rows}
    tik = by_name.get("utf8 encode tiktoken encode_ordinary loop")
    tik_batch = by_name.get("utf8 encode tiktoken encode_ordinary_batch 1 thread")
    tik_dec = by_name.get("utf8 decode tiktoken decode_bytes")
    print(f"\n{'':<52}{'MB/s':>9}{'cold':>9}{'x tiktoken':>12}")
    for name, value, cold, _ in rows:
        ref = tik_dec if " decode " in name else max(filter(None, [tik, tik_batch]), default=None)
        ratio = f"{value / ref:10.1f}x" if ref else ""
        print(f"{name:<52}{value:9.1f}{cold:9.1f}{ratio:>12}")
    print("(x tiktoken: encode vs the faster of tiktoken's two single-thread encodes, "
          "decode vs tiktoken decode_bytes)")


if __name__ == "__main__":
    main()
