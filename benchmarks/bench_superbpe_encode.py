"""SuperBPE encoding cost: a SuperBPE tokenizer vs the same tokenizer without stage 2.

    python benchmarks/bench_superbpe_encode.py [--substrate utf8] [--vocab 8000] [--stage2 2000] [--repeat 5]

Trains a plain tokenizer on the bundled sample (``ube_stream/data/sample_train``),
then builds from it (``tests/_helpers.superbpe_from_plain``: its merges as stage 1,
stage-2 merges from the most frequent adjacent token pairs, several rounds):

  plain      the stage-1 merges alone (the path every plain tokenizer takes);
  sbpe-0     SuperBPE with no stage-2 merges (the two-pass machinery alone);
  superbpe   SuperBPE with ``--stage2`` stage-2 merges.

Encodes the sample with ``encode_ordinary_batch`` at 1 thread, interleaved rounds
(warm caches), and prints medians in MB/s of UTF-8 input and the ratios to ``plain``.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from _helpers import superbpe_from_plain  # noqa: E402
from _record import write_record  # noqa: E402

from ube_stream import Tokenizer, train  # noqa: E402
from ube_stream.readers import iter_texts  # noqa: E402
from ube_stream.sample import sample_paths  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--substrate", default="utf8")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--stage2", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    texts = list(iter_texts([sample_paths()["train"]]))
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    plain = train(iter(texts), vocab_size=args.vocab, substrate=args.substrate, workers=1, show_progress=False)
    rounds = 4
    sbpe = superbpe_from_plain(plain, texts[: len(texts) // 4], rounds=rounds, per_round=args.stage2 // rounds)
    zero = Tokenizer(substrate=plain.substrate, merges=plain.merges, special_tokens=list(plain.special_tokens),
                     pattern=plain.pattern_name, superbpe={"stage1_merges": len(plain.merges), "max_words": 4})
    cases = {"plain": plain, "sbpe-0": zero, "superbpe": sbpe}
    n_tokens = {}
    for name, tok in cases.items():  # warm-up, untimed
        n_tokens[name] = sum(ids.size for ids in tok.encode_ordinary_batch(texts, num_threads=args.threads))
    times = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, tok in cases.items():
            t0 = time.perf_counter()
            tok.encode_ordinary_batch(texts, num_threads=args.threads)
            times[name].append(time.perf_counter() - t0)
    print(f"{mb:.2f} MB, {len(texts)} documents, {args.substrate}, {len(plain.merges)} stage-1 merges, "
          f"{len(sbpe.merges) - len(plain.merges)} stage-2 merges, {args.threads} thread(s), "
          f"medians of {args.repeat} interleaved rounds; load {os.getloadavg()[0]:.2f}")
    base = statistics.median(times["plain"])
    rows = []
    for name in cases:
        med = statistics.median(times[name])
        print(f"  {name:9s} {mb / med:8.2f} MB/s  {med / base:5.2f}x plain's time  "
              f"{n_tokens[name]:9d} tokens ({n_tokens[name] / n_tokens['plain']:.3f}x)")
        rows.append([name, mb / med, med / base, n_tokens[name], n_tokens[name] / n_tokens["plain"]])
    write_record("bench_superbpe_encode", title="SuperBPE encoding cost vs the same tokenizer without stage 2",
                 columns=["case", "MB/s (wall)", "x plain's time", "tokens", "x plain's tokens"], rows=rows,
                 notes=[f"{mb:.2f} MB of the bundled sample, {len(texts)} documents, {args.substrate}, "
                        f"{len(plain.merges)} stage-1 merges, {len(sbpe.merges) - len(plain.merges)} stage-2 merges, "
                        f"{args.threads} thread(s), medians of {args.repeat} interleaved rounds"])


if __name__ == "__main__":
    main()
