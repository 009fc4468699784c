"""Training quality against HF tokenizers: same corpus, utf8 substrate, same vocab.

    python benchmarks/quality_vs_hf.py [CORPUS.jsonl[.zst]] [--vocab-size 4096 ...]

Trains ube-stream (utf8 substrate) and HF ``BpeTrainer`` (ByteLevel, no prefix
space, GPT-2 pattern) on the same documents (one per line of each text), then
counts the corpus's tokens under both merge lists with HF's own encoder (ours
loaded through ``export_hf``), and prints the totals and their ratio.
"""
import argparse
import io
import json
import os
import sys
import tempfile

from _record import peer_versions, write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def read_texts(path):
    with open(path, "rb") as f:
        stream = f
        if path.endswith(".zst"):
            import zstandard

            stream = zstandard.ZstdDecompressor().stream_reader(f)
        for line in io.TextIOWrapper(stream, encoding="utf-8"):
            yield from json.loads(line)["text"].split("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "..", "tests", "data", "docs_sample.jsonl.zst"))
    parser.add_argument("--vocab-size", type=int, action="append")
    args = parser.parse_args(argv)
    import tokenizers
    from tokenizers import Regex, models, pre_tokenizers, trainers

    import ube_stream
    from ube_stream.pretokenizer import GPT2_PATTERN

    texts = list(read_texts(args.corpus))
    size = sum(len(t.encode("utf-8")) for t in texts)
    print(f"corpus: {args.corpus}: {len(texts):,} documents, {size / 1e6:.1f} MB")
    print(f"{'vocab':>7}{'ube-stream tokens':>20}{'HF tokens':>12}{'ours/HF':>10}")
    rows = []
    for vocab in args.vocab_size or [4096, 16384]:
        ours = ube_stream.train(iter(texts), vocab_size=vocab, substrate="utf8", workers=1, show_progress=False)
        hf = tokenizers.Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2_PATTERN), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        hf.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=vocab, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ours.json")
            ours.export_hf(path)
            ours_hf = tokenizers.Tokenizer.from_file(path)
        n_ours = sum(len(e.ids) for e in ours_hf.encode_batch(texts))
        n_hf = sum(len(e.ids) for e in hf.encode_batch(texts))
        print(f"{vocab:>7}{n_ours:>20,}{n_hf:>12,}{n_ours / n_hf:>10.4f}")
        rows.append([vocab, n_ours, n_hf, round(n_ours / n_hf, 4)])
    write_record("quality_vs_hf", title="Training quality vs HF tokenizers' BpeTrainer (utf8, same corpus and vocab)",
                 columns=["vocab", "ube-stream tokens", "HF tokens", "ours / HF"], rows=rows,
                 peers=peer_versions("tokenizers"),
                 notes=[f"corpus {os.path.relpath(args.corpus)}: {len(texts):,} documents, {size / 1e6:.1f} MB; "
                        "both counted with HF's encoder (ours through export_hf)"], argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
