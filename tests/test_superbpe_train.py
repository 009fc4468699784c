"""SuperBPE training (README, SuperBPE): the trainer (phase-1 span tables, stage 2
in the merge kernel) == the readable twin ``train_superbpe_reference`` on
generated corpora for every substrate; the stage-2 kernel path (atoms, preloaded
expansions, max_words, long words) == ``train_bpe_reference``; a hand-worked
golden case; the options' errors; the tokenizer record; byte-identical files for
1 and 2 workers and a killed-and-rerun phase 1 that reuses the span tables."""
from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest
from _helpers import write_jsonl

from ube_stream import _count, _merge
from ube_stream import _reference as ref
from ube_stream.pretokenizer import chunk_bounds, span_ends, span_keys, superword_spans
from ube_stream.tokenizer import Tokenizer
from ube_stream.training.trainer import TrainSummary, superbpe_words, train

N_BASE = {"ube": 512, "utf8": 256, "utf16": 256}
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "a", "in", "hat", "way", "it's", "don't", "café", "naïve",
         "дом", "кот", "日本", "語", "😀", "ʼn", "e\u0301", "über", "the", "the", "on", "a"]
SEPS = [" ", " ", " ", " ", ", ", ". ", "\n", "  ", " 42 ", "! ", " ’", " - "]
#: separators that tell the span rules apart (rule liu cuts at ": " and after a line feed, joins the rest)
LIU_SEPS = SEPS + [": ", ":", ".\n", "\n\n", ", ", " (", ") ", "; "]


def corpus(seed: int, docs: int = 40, words: int = 18, seps=SEPS):
    rng = random.Random(seed)
    return ["".join(rng.choice(WORDS) + rng.choice(seps) for _ in range(rng.randint(1, words)))
            for _ in range(docs)]


def trained(texts, **options):
    tok = train(iter(texts), show_progress=False, workers=1, **options)
    return tok, [(a, b, r) for (a, b), r in zip(tok.merges, tok.merge_results)]


# ------------------------------------------------------------------ trainer == twin

CASES = [
    # (substrate, pattern, extra stage-1 ids, extra stage-2 ids, max_words, options)
    ("ube", "gpt2", 25, 40, 4, {}),
    ("utf8", "gpt2", 25, 40, 4, {}),
    ("utf16", "gpt2", 25, 40, 4, {}),
    ("ube", "gpt2", 10, 40, 2, {}),
    ("ube", "gpt2", 0, 30, 3, {}),                           # no stage-1 merge at all
    ("utf8", "script", 20, 40, 4, {}),
    ("ube", "gpt2", 25, 40, 4, {"max_token_length": 6}),
    ("utf8", "gpt2", 15, 40, 4, {"char_integrity": True}),
    ("utf8", "gpt2", 15, 40, 4, {"char_integrity": "prefix"}),   # SCRIPT's within-character rule
    ("utf16", "gpt2", 15, 30, 4, {"min_frequency": 1}),
    ("ube", "gpt2", 25, 40, 4, {"superbpe_spans": "liu"}),
    ("utf16", "gpt2", 10, 40, 2, {"superbpe_spans": "liu"}),
    ("utf8", "script", 20, 40, 4, {"superbpe_spans": "liu"}),
    ("utf8", "gpt2", 15, 40, 3, {"char_integrity": True, "superbpe_spans": "liu"}),
]


@pytest.mark.parametrize("substrate,pattern,stage1,stage2,max_words,options", CASES)
def test_trainer_equals_twin(substrate, pattern, stage1, stage2, max_words, options):
    rule = options.get("superbpe_spans", "v1")
    texts = corpus(hash((substrate, pattern, stage1, max_words)) & 0xFFFF, seps=LIU_SEPS if rule == "liu" else SEPS)
    transition = N_BASE[substrate] + 1 + stage1
    vocab = transition + stage2
    tok, merges = trained(texts, vocab_size=vocab, substrate=substrate, pattern=pattern,
                          superbpe_transition=transition, superbpe_max_words=max_words, **options)
    twin_pattern = "script" if pattern == "script" else ref.GPT2_PATTERN
    twin_options = {("spans" if key == "superbpe_spans" else key): value for key, value in options.items()}
    expected = ref.train_superbpe_reference(texts, substrate=substrate, pattern=twin_pattern, vocab_size=vocab,
                                            transition=transition, max_words=max_words, **twin_options)
    assert merges == expected
    k = tok.superbpe["stage1_merges"]
    assert tok.superbpe == {"stage1_merges": k, "max_words": max_words, **({"spans": rule} if rule == "liu" else {})}
    assert tok.training["superbpe_spans"] == rule
    assert k <= stage1 and len(merges) > k, "the corpus is expected to give superword merges"
    if "max_token_length" in options:
        assert max(len(tok._expansions[r]) for _, _, r in merges) <= options["max_token_length"]


@pytest.mark.parametrize("substrate", ["ube", "utf16"])
def test_superbpe_with_char_integrity_is_refused_off_utf8(substrate):
    """The stage-2 encoder does not check characters (utf8 needs no check: it resynchronises),
    so the combination is refused before any work, and a file holding it does not load."""
    with pytest.raises(ValueError, match="utf8 substrate only"):
        train(iter(["a b"]), vocab_size=700, substrate=substrate, superbpe_transition=650,
              char_integrity=True, show_progress=False)
    with pytest.raises(ValueError, match="utf8 substrate only"):
        Tokenizer(substrate=substrate, merges=[], superbpe={"stage1_merges": 0, "max_words": 4},
                  char_integrity=True)


def test_transition_at_vocab_size_is_plain_bpe():
    texts = corpus(7)
    vocab = 512 + 1 + 40
    tok, merges = trained(texts, vocab_size=vocab, superbpe_transition=vocab)
    _, plain = trained(texts, vocab_size=vocab)
    assert merges == plain and tok.superbpe == {"stage1_merges": len(plain), "max_words": 4}


def test_superwords_cross_chunks_and_respect_max_words():
    texts = corpus(11, docs=80)
    tok, merges = trained(texts, vocab_size=256 + 1 + 20 + 80, substrate="utf8",
                          superbpe_transition=256 + 1 + 20, superbpe_max_words=2)
    k = tok.superbpe["stage1_merges"]
    superwords = []
    for _, _, r in merges[k:]:
        try:
            superwords.append(bytes(tok._expansions[r]).decode("utf-8"))
        except UnicodeDecodeError:
            pass                  # part of a character (a subword merge)
    assert any(" " in w.strip() for w in superwords), superwords   # a token across a word boundary
    for word in superwords:       # at most 2 chunks each (the chunks of the token's own text)
        chunks = ref.pretokenize(word)
        assert len(chunks) <= 2, word
        if len(chunks) > 1:       # a superword: joinable chunks only (no punctuation, digits, newlines)
            assert all(ref.superword_joinable_reference(c) for c in chunks), word


# ------------------------------------------------------------------ the stage-2 kernel path

def span_table(texts, pattern="gpt2"):
    counter = _count.ChunkCounter()
    for text in texts:
        data = np.frombuffer(text.encode(), np.uint8)
        ends = chunk_bounds(data, pattern)
        keys, key_ends = span_keys(data, ends, span_ends(data, ends))
        counter.add_chunks(keys, key_ends)
    return counter.export()


@pytest.mark.parametrize("long_word", [2, 3, 64])
@pytest.mark.parametrize("max_words,max_len,integrity", [(4, -1, False), (2, -1, False), (1, -1, False),
                                                        (3, 5, False), (4, -1, True)])
def test_stage2_kernel_equals_reference(long_word, max_words, max_len, integrity):
    texts = corpus(3, docs=50)
    stage1_tok, stage1 = trained(texts, vocab_size=256 + 1 + 20, substrate="utf8", min_frequency=1)
    stage1 = np.asarray(stage1, dtype=np.int32).reshape(-1, 3)
    symbols, offsets, counts, chunk_starts, starts, expansions = superbpe_words(
        span_table(texts), stage1, substrate="utf8", n_base=256, char_integrity=integrity)
    made = expansions[256:]
    lengths = [len(e) for e in made]
    status, merges = _merge.train_merges(
        symbols, offsets, counts, len(expansions), len(expansions) + 60, 1, max_len, None, None,
        long_word=long_word, char_starts=starts, chunk_starts=chunk_starts, max_words=max_words, n_atoms=256,
        expansions=np.array([s for e in made for s in e], np.int32),
        expansion_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    assert status == 0
    words = [(tuple(symbols[a:b].tolist()), int(c)) for a, b, c in zip(offsets[:-1], offsets[1:], counts)]
    chunks = [chunk_starts[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]
    chars = [starts[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] if integrity else None
    expected = ref.train_bpe_reference(words, n_base=len(expansions), max_vocab=len(expansions) + 60,
                                       min_frequency=1, max_token_length=None if max_len < 0 else max_len,
                                       char_starts=chars, chunk_starts=chunks, max_words=max_words,
                                       base_expansions=made)
    assert [tuple(m) for m in merges.tolist()] == expected
    assert len(expected) > 5


def test_stage2_merge_that_spells_a_stage1_token_reuses_its_id():
    # stage 1 (utf8): (b, c) then (a, b): "abc" encodes as a|bc, "ab" as ab.  The span
    # ["x", " ab", "c"]... is not built from text here: the kernel is given words whose
    # stage-1 ids leave (a, b) apart, so its stage-2 merge (a, b) must give ab's id.
    a, b, c = 97, 98, 99
    words = np.array([a, 256, a, 256, a, b], np.uint16)   # (a, bc) twice... then (a, b)
    offsets = np.array([0, 2, 4, 6], np.int64)
    counts = np.array([1, 1, 5], np.int64)
    chunk_starts = np.array([1, 0, 1, 0, 1, 0], np.uint8)
    status, merges = _merge.train_merges(words, offsets, counts, 258, 262, 1, -1, None, None,
                                         chunk_starts=chunk_starts, max_words=4, n_atoms=256,
                                         expansions=np.array([b, c, a, b], np.int32),
                                         expansion_offsets=np.array([0, 2, 4], np.int64))
    assert status == 0
    assert merges.tolist()[0] == [a, b, 257]       # (a, b) x5 spells "ab": id 257, no new token
    assert merges.tolist()[1] == [a, 256, 258]     # (a, bc) x2 spells "abc": the first new id


# ------------------------------------------------------------------ hand-worked

def test_golden_superbpe_by_hand():
    """Corpus (utf8, gpt2, min_frequency 2): "ab ab ab" twice and "ab, ab" once.

    Chunks: "ab", " ab", " ab" (x2) and "ab", ",", " ab": counts "ab" 3, " ab" 5, "," 1.
    Stage 1 (T = 256 + 1 special + 2, so k = 2 merges):
      pairs (a, b) 3 + 5 = 8, (" ", a) 5  -> merge 1: (97, 98) -> 256 "ab";
      then (" ", ab) 5                     -> merge 2: (32, 256) -> 257 " ab".
    Spans (rule v1): ["ab", " ab", " ab"] x2 (all joinable); "ab", ",", " ab" are
    three spans (the comma is not joinable), each once.
    Stage-2 words (stage-1 ids): [256, 257, 257] x2 (chunk starts 1 1 1), [256], [44], [257].
      pairs (256, 257) 2, (257, 257) 2: a tie, the smaller pair wins
                                           -> merge 3: (256, 257) -> 258 "ab ab" (2 chunks);
      the words are now [258, 257] x2: (258, 257) would cover 3 chunks (2 chunk
      starts inside):
        W = 3: allowed, count 2           -> merge 4: (258, 257) -> 259 "ab ab ab";
        W = 2: refused, and no other pair -> stage 2 ends after merge 3;
        W = 1: even (256, 257) covers 2 chunks -> no stage-2 merge.
    """
    texts = ["ab ab ab", "ab ab ab", "ab, ab"]
    stage1 = [(97, 98, 256), (32, 256, 257)]
    for max_words, stage2 in ((3, [(256, 257, 258), (258, 257, 259)]), (2, [(256, 257, 258)]), (1, [])):
        tok, merges = trained(texts, vocab_size=256 + 1 + 4, substrate="utf8", superbpe_transition=259,
                              superbpe_max_words=max_words)
        assert merges == stage1 + stage2, max_words
        assert tok.superbpe == {"stage1_merges": 2, "max_words": max_words}
        assert ref.train_superbpe_reference(texts, substrate="utf8", vocab_size=261, transition=259,
                                            max_words=max_words) == stage1 + stage2
    assert bytes(tok._expansions[257]) == b" ab"


# ------------------------------------------------------------------ options, record

@pytest.mark.parametrize("options,message", [
    (dict(superbpe_transition=512), "below the 512 base symbols"),
    (dict(superbpe_transition=700), "above vocab_size 600"),
    (dict(superbpe_transition=550, superbpe_max_words=0), "superbpe_max_words must be an int in 1..63"),
    (dict(superbpe_transition=550, superbpe_max_words=64), "1..63"),
    (dict(superbpe_transition=550.5), "must be an int"),
    (dict(superbpe_max_words=3), "needs superbpe_transition"),
    (dict(superbpe_spans="liu"), "needs superbpe_transition"),
    (dict(superbpe_transition=550, superbpe_spans="v2"), "superbpe_spans must be one of 'v1', 'liu'"),
    (dict(superbpe_transition=550, superbpe_spans=None), "superbpe_spans must be one of"),
])
def test_option_errors(options, message):
    with pytest.raises(ValueError, match=message):
        train(iter(["a b"]), vocab_size=600, show_progress=False, **options)


def test_merge_kernel_takes_uint32_symbols_past_65536_ids():
    """Stage 2 over a stage-1 vocabulary of more than 65536 ids reads its words as uint32: the
    same words under a 70,000-symbol alphabet learn the same merges as under a 600-symbol one,
    only numbered from 70,000."""
    from ube_stream import _merge

    rnd = np.random.default_rng(7)
    lengths = rnd.integers(1, 90, size=400)              # short and long (linked-list) words
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    symbols = rnd.zipf(1.6, size=int(offsets[-1])) % 600
    counts = rnd.integers(1, 50, size=400).astype(np.int64)
    small, big = 600, 70_000
    st16, m16 = _merge.train_merges(symbols.astype(np.uint16), offsets, counts, small, small + 300, 2, -1)
    st32, m32 = _merge.train_merges(symbols.astype(np.uint32), offsets, counts, big, big + 300, 2, -1)
    assert st16 == st32 == 0 and len(m16) == 300
    shifted = np.where(m16 >= small, m16 - small + big, m16)
    assert np.array_equal(shifted, m32)
    with pytest.raises(ValueError, match="n_base is 70000"):
        _merge.train_merges(symbols.astype(np.uint16), offsets, counts, big, big + 10, 2, -1)


def test_tokenizer_file_records_superbpe(tmp_path):
    texts = corpus(5)
    tok, _ = trained(texts, vocab_size=600, superbpe_transition=560, superbpe_max_words=3)
    tok.save(tmp_path / "tok.json")
    back = Tokenizer.load(tmp_path / "tok.json")
    assert back.superbpe == tok.superbpe and back.merges == tok.merges
    assert json.loads((tmp_path / "tok.json").read_text())["version"] == 2
    training = back.training
    assert training["superbpe_transition"] == 560 and training["superbpe_max_words"] == 3
    assert training["superbpe_spans"] == "v1" and training["unique_spans"] > 0
    # rule v1 is the default and writes no "spans": files of earlier releases keep their bytes
    assert "spans" not in json.loads((tmp_path / "tok.json").read_text())["superbpe"]
    explicit, _ = trained(texts, vocab_size=600, superbpe_transition=560, superbpe_max_words=3, superbpe_spans="v1")
    explicit.save(tmp_path / "explicit.json")
    assert (tmp_path / "explicit.json").read_bytes() == (tmp_path / "tok.json").read_bytes()


def test_liu_spans_are_fewer_and_longer_and_make_other_merges():
    texts = corpus(8, docs=60, seps=LIU_SEPS)
    summaries = {}
    toks = {}
    for rule in ("v1", "liu"):
        summaries[rule] = TrainSummary()
        toks[rule], _ = trained(texts, vocab_size=700, superbpe_transition=600, superbpe_spans=rule,
                                summary=summaries[rule])
    # fewer, longer spans (more distinct ones: longer spans repeat less)
    occurrences = {rule: sum(len(superword_spans(t, rule=rule)) for t in texts) for rule in ("v1", "liu")}
    assert occurrences["liu"] < occurrences["v1"] / 2
    assert summaries["liu"].unique_spans > summaries["v1"].unique_spans
    k = toks["v1"].superbpe["stage1_merges"]
    assert toks["liu"].merges[:k] == toks["v1"].merges[:k]          # stage 1 does not depend on the rule
    assert toks["liu"].merges[k:] != toks["v1"].merges[k:]
    made = [toks["liu"].decode_bytes([toks["liu"]._model_id(r)], errors="replace")
            for r in toks["liu"].merge_results[k:]]
    assert any(b", " in t or b". " in t for t in made) and not any(b": " in t for t in made)


# ------------------------------------------------------------------ workers, work directory

@pytest.fixture(scope="module")
def files(tmp_path_factory, docs_rows):
    root = tmp_path_factory.mktemp("sbpe")
    rows = [r for r in docs_rows if r["lang"] in ("en-US", "ru-RU", "ja-JP", "ar-MA")]
    return [write_jsonl(root / f"part-{i}.jsonl", [line for r in rows[i::2] for line in r["text"][:8000].split("\n")])
            for i in range(2)]


SBPE = ["--vocab-size", "900", "--superbpe-transition", "700", "--superbpe-max-words", "3", "--unit-rows", "60"]


def test_cli_superbpe_spans_flag(files, tmp_path, capsys):
    """``ube train --superbpe-spans liu`` trains what ``train(superbpe_spans="liu")`` does;
    the flag without --superbpe-transition, or with another rule, is refused."""
    from ube_stream.cli.main import main as ube_main

    out = tmp_path / "cli.json"
    assert ube_main(["train", *files, *SBPE, "--superbpe-spans", "liu", "--workers", "1", "-q", "-o", str(out)]) == 0
    direct = train(files, vocab_size=900, superbpe_transition=700, superbpe_max_words=3, unit_rows=60,
                   superbpe_spans="liu", workers=1, show_progress=False)
    loaded = Tokenizer.load(out)
    assert loaded.superbpe_spans == "liu" and loaded.merges == direct.merges
    assert ube_main(["train", *files, "--vocab-size", "900", "--superbpe-spans", "liu", "-q",
                     "-o", str(tmp_path / "no.json")]) != 0
    assert "needs superbpe_transition" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ube_main(["train", *files, *SBPE, "--superbpe-spans", "v2", "-o", str(tmp_path / "no.json")])
    assert "invalid choice: 'v2'" in capsys.readouterr().err


@pytest.mark.slow
def test_byte_identical_for_1_and_2_workers(files, tmp_path):
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"tok-{workers}.json"
        train(files, vocab_size=900, superbpe_transition=700, superbpe_max_words=3, unit_rows=60,
              workers=workers, show_progress=False, output=str(out))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert Tokenizer.load(tmp_path / "tok-1.json").superbpe["max_words"] == 3


@pytest.mark.slow
def test_killed_phase1_reruns_reusing_span_tables(files, tmp_path):
    from ube_stream import readers

    clean = tmp_path / "clean.json"
    train(files, vocab_size=900, superbpe_transition=700, superbpe_max_words=3, unit_rows=60, workers=1,
          show_progress=False, output=str(clean))
    out = tmp_path / "tok.json"
    units = readers.plan_units(readers.resolve_inputs(files), unit_rows=60)
    killed = len(units) // 2
    env = dict(os.environ, UBE_TEST_KILL_UNIT=f"{out}.ube-work/*|{units[killed].unit_id}|{tmp_path / 'k'}|group")
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", *files, *SBPE, "--workers", "1", "-q",
                           "-o", str(out)], capture_output=True, text=True, env=env, start_new_session=True,
                          timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    spans = glob.glob(str(out) + ".ube-work/run-*/tables/*.spans.npz")
    assert len(spans) == killed > 0                      # the finished units kept their span tables
    summary = TrainSummary()
    train(files, vocab_size=900, superbpe_transition=700, superbpe_max_words=3, unit_rows=60, workers=2,
          show_progress=False, output=str(out), summary=summary)
    assert summary.units_reused == killed
    assert out.read_bytes() == clean.read_bytes()


@pytest.mark.parametrize("first,second", [({}, dict(superbpe_transition=700)),
                                          (dict(superbpe_transition=700),
                                           dict(superbpe_transition=700, superbpe_spans="liu"))])
def test_runs_with_other_span_tables_never_share_them(files, tmp_path, monkeypatch, first, second):
    """The work key covers SuperBPE and its span rule: a plain run's tables (no span
    tables) are not reused by a SuperBPE run, nor a v1 run's span tables by a liu run."""
    from ube_stream.training import trainer

    out = tmp_path / "tok.json"

    def broken(*args, **kwargs):
        raise MemoryError("phase 2 failed (injected)")

    monkeypatch.setattr(trainer, "_train_merges", broken)
    with pytest.raises(MemoryError):
        train(files, vocab_size=900, unit_rows=60, workers=1, show_progress=False, output=str(out), **first)
    monkeypatch.undo()
    summary = TrainSummary()
    train(files, vocab_size=900, unit_rows=60, workers=1, show_progress=False, output=str(out), summary=summary,
          **second)
    assert summary.units_reused == 0


# ------------------------------------------------------------------ the paper's claims on the bundled sample

@pytest.mark.slow   # four trainings on the bundled sample and the parallel evaluation (~20 s on 2 cores)
def test_superbpe_claims_on_the_bundled_sample(docs_rows):
    """Trained on the bundled sample (vocab 8000, SuperBPE transition 6400, W = 4):

    * on running text held out from training (Debian Handbook pages of
      tests/data in 26 languages whose text is not in the training sample),
      SuperBPE needs fewer tokens than plain BPE for English and most languages;
    * on the bundled parallel sample (356 languages), UBE+SuperBPE has a lower
      Gini than BBPE+SuperBPE (and SuperBPE lowers the Gini of both).
    The parallel items are short (names, UI strings), so SuperBPE does not save
    tokens there (README, SuperBPE: measured)."""
    import zstandard

    from ube_stream.evaluation.parallel_text import evaluate
    from ube_stream.sample import sample_paths

    train_path = sample_paths()["train"]
    with open(train_path, "rb") as f:
        blob = zstandard.ZstdDecompressor().stream_reader(f).read().decode("utf-8")
    held_out = {}
    for row in docs_rows:
        text = row["text"][:20000]
        if text[1000:1200] not in blob and text[:200] not in blob:
            held_out.setdefault(row["lang"], []).append(text)
    assert "en-US" in held_out and len(held_out) >= 20
    toks = {}
    for substrate in ("ube", "utf8"):
        for transition in (None, 6400):
            toks[substrate, transition] = train([train_path], vocab_size=8000, substrate=substrate,
                                                superbpe_transition=transition, workers=2, show_progress=False)
    for substrate in ("ube", "utf8"):
        plain, sbpe = toks[substrate, None], toks[substrate, 6400]
        counts = {lang: (sum(len(plain.encode(t)) for t in texts), sum(len(sbpe.encode(t)) for t in texts))
                  for lang, texts in held_out.items()}
        assert counts["en-US"][1] < 0.95 * counts["en-US"][0], counts["en-US"]
        fewer = sum(s < p for p, s in counts.values())
        assert fewer >= 0.8 * len(counts), (substrate, fewer, len(counts))
    table = evaluate([toks["ube", 6400], toks["utf8", 6400], toks["ube", None], toks["utf8", None]],
                     sample_paths()["parallel"], names=["ube+sbpe", "utf8+sbpe", "ube", "utf8"])
    g = {name: table["summary"][name]["gini"] for name in table["tokenizers"]}
    assert g["ube+sbpe"] < g["utf8+sbpe"]
    assert g["ube+sbpe"] < g["ube"] and g["utf8+sbpe"] < g["utf8"]


# ------------------------------------------------------------------ training and encoding agree (after sbpe-encode)

@pytest.mark.parametrize("substrate,rule", [("ube", "v1"), ("utf8", "v1"), ("utf16", "v1"), ("ube", "liu"),
                                            ("utf8", "liu")])
def test_encoding_a_training_span_gives_the_trainers_segmentation(substrate, rule):
    """Each distinct training span, encoded by the tokenizer, comes out as the
    trainer segmented it: its chunks' stage-1 encodings, rewritten by every
    stage-2 merge in rank order under the max_words rule (the twin's training
    rewrite).  Decode and the stream decoder give the text back."""
    texts = corpus(21, docs=60, seps=LIU_SEPS if rule == "liu" else SEPS)
    n_base = N_BASE[substrate]
    transition = n_base + 1 + 30
    tok, merges = trained(texts, vocab_size=transition + 60, substrate=substrate, superbpe_transition=transition,
                          superbpe_max_words=3, superbpe_spans=rule)
    k = tok.superbpe["stage1_merges"]
    stage1, stage2 = merges[:k], merges[k:]
    spans = set()
    for text in texts:
        chunks, first = ref.pretokenize(text), 0
        for stop in ref.superword_span_ends_reference(chunks, rule):
            spans.add(tuple(chunks[first:stop]))
            first = stop
    checked = 0
    for span in sorted(spans):
        text = "".join(span)
        if ref.pretokenize(text) != list(span):
            continue              # chunked otherwise out of its context
        ids, starts = [], []
        for chunk in span:
            tokens = ref.encode_chunk_reference(ref.route_symbols(chunk, substrate), stage1)
            starts += [1] + [0] * (len(tokens) - 1)
            ids += tokens
        positions = list(range(len(ids)))
        for left, right, result in stage2:
            ids, positions = ref._merge_pair_training(ids, (left, right), result, positions, None,
                                                      [starts[p] for p in range(len(starts))], 3)
        assert tok.encode(text).tolist() == [tok._model_id(i) for i in ids], span
        checked += 1
    assert checked > 20
    for text in texts:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        stream = tok.stream_decoder()
        assert "".join(stream.feed(int(i)) for i in ids) + stream.flush() == text
