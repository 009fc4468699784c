"""UbeTokenizer the way transformers users load it: registered with AutoTokenizer at
import (no remote code), remote code that works in a process that never imported
ube_stream, load -> save_pretrained -> reload by every path, a real Trainer writing
checkpoints, and overflow windows with stride equal to a fast tokenizer's."""
import json
import os
import subprocess
import sys

import pytest
import transformers

import ube_stream
from ube_stream import train
from ube_stream.sample import sample_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ube_stream.__file__)))
SPECIALS = ["<|endoftext|>", "<|pad|>"]


@pytest.fixture(scope="module")
def toks():
    train_file = sample_paths()["train"]
    return {s: train([train_file], vocab_size=600, substrate=s, special_tokens=SPECIALS, workers=1,
                     show_progress=False) for s in ("ube", "utf8")}


@pytest.fixture(scope="module")
def texts(docs_rows):
    by_lang = {}
    for row in docs_rows:
        by_lang.setdefault(row["lang"], row["text"])
    return [t[:300] for t in by_lang.values()][:8]


@pytest.fixture
def saved(toks, tmp_path):
    from ube_stream.hf import UbeTokenizer

    folder = tmp_path / "tok"
    UbeTokenizer(tokenizer=toks["ube"]).save_pretrained(folder)
    return folder


def _python(code, tmp_path):
    """Run ``code`` in a fresh interpreter that imports this checkout's ube_stream (if it imports it)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               HF_MODULES_CACHE=str(tmp_path / "hf_modules"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_import_registers_with_auto_tokenizer_without_remote_code(saved, toks, texts, tmp_path):
    """``import ube_stream`` (before or after transformers) is enough for a plain from_pretrained."""
    expected = json.dumps([toks["ube"].encode(t).tolist() for t in texts])
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    for order in ("import ube_stream, transformers", "import transformers, ube_stream"):
        out = _python(f"""
import json, sys
{order}
assert 'ube_stream.hf' not in sys.modules or 'transformers.models.auto.tokenization_auto' in sys.modules
tok = transformers.AutoTokenizer.from_pretrained({str(saved)!r})
texts = json.load(open('texts.json'))
print(type(tok).__name__)
print(json.dumps([tok(t)['input_ids'] for t in texts]))
""", tmp_path)
        name, ids = out.strip().split("\n")
        assert name == "UbeTokenizer" and ids == expected


def test_import_ube_stream_alone_does_not_import_transformers(tmp_path):
    out = _python("import sys, ube_stream; print('transformers' in sys.modules, "
                  "any(type(f).__name__ == '_RegisterWithTransformers' for f in sys.meta_path))", tmp_path)
    assert out.split() == ["False", "True"]


def test_remote_code_in_a_process_that_never_imported_ube_stream(saved, toks, texts, tmp_path):
    """trust_remote_code=True runs the folder's tokenization_ube.py; the loaded tokenizer
    saves (the Trainer does at every checkpoint) and the copy reloads by every path."""
    module = (saved / "tokenization_ube.py").read_text()
    assert "from ube_stream.hf import UbeTokenizer" in module and "from ." not in module
    out = _python(f"""
import json, sys, transformers
tok = transformers.AutoTokenizer.from_pretrained({str(saved)!r}, trust_remote_code=True)
tok.save_pretrained('resaved')
print(json.dumps(tok({texts[0]!r})['input_ids']))
""", tmp_path)
    assert json.loads(out) == toks["ube"].encode(texts[0]).tolist()
    resaved = tmp_path / "resaved"
    assert {"ube_tokenizer.json", "tokenization_ube.py", "tokenizer_config.json"} <= set(os.listdir(resaved))
    assert (resaved / "tokenization_ube.py").read_text() == module
    assert not [n for n in os.listdir(resaved) if n.endswith(".py") and n != "tokenization_ube.py"]
    from ube_stream.hf import UbeTokenizer

    for loaded in (UbeTokenizer.from_pretrained(resaved), transformers.AutoTokenizer.from_pretrained(resaved),
                   transformers.AutoTokenizer.from_pretrained(resaved, trust_remote_code=True)):
        assert type(loaded).__name__ == "UbeTokenizer"
        assert [loaded(t)["input_ids"] for t in texts] == [toks["ube"].encode(t).tolist() for t in texts]
        assert loaded.pad_token == "<|pad|>" and loaded.eos_token == "<|endoftext|>"


def test_auto_loaded_tokenizer_saves_again_in_process(saved, toks, texts, tmp_path):
    from ube_stream.hf import UbeTokenizer

    first = transformers.AutoTokenizer.from_pretrained(saved, trust_remote_code=True)
    assert isinstance(first, UbeTokenizer)
    first.save_pretrained(tmp_path / "again")
    second = transformers.AutoTokenizer.from_pretrained(tmp_path / "again")
    second.save_pretrained(tmp_path / "third")
    third = UbeTokenizer.from_pretrained(tmp_path / "third")
    assert len(first) == len(second) == len(third) == toks["ube"].vocab_size
    for t in texts:
        assert first(t)["input_ids"] == second(t)["input_ids"] == third(t)["input_ids"] == \
            toks["ube"].encode(t).tolist()


@pytest.mark.slow
def test_trainer_checkpoints_hold_the_tokenizer(toks, texts, tmp_path):
    """A real Trainer (tiny GPT-2 from a config, CPU, save_steps=1) with the UBE class as
    processing_class: every checkpoint holds a tokenizer that reloads with the same ids."""
    torch = pytest.importorskip("torch")
    from ube_stream.hf import UbeTokenizer

    hf = UbeTokenizer(tokenizer=toks["ube"])
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(hf), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                     pad_token_id=hf.pad_token_id, eos_token_id=hf.eos_token_id,
                                     bos_token_id=hf.eos_token_id)
    model = transformers.GPT2LMHeadModel(config)
    rows = [hf(t, truncation=True, max_length=32)["input_ids"] for t in texts]
    dataset = [{"input_ids": r} for r in rows]
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=3, save_steps=1,
                                          per_device_train_batch_size=4, report_to=[], use_cpu=True,
                                          logging_steps=1, disable_tqdm=True)
    collator = transformers.DataCollatorForLanguageModeling(hf, mlm=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                                   processing_class=hf)
    trainer.train()
    checkpoints = sorted(p for p in os.listdir(tmp_path / "run") if p.startswith("checkpoint-"))
    assert checkpoints == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    for name in checkpoints:
        folder = tmp_path / "run" / name
        assert {"ube_tokenizer.json", "tokenizer_config.json", "tokenization_ube.py"} <= set(os.listdir(folder))
        loaded = transformers.AutoTokenizer.from_pretrained(folder)
        assert [loaded(t)["input_ids"] for t in texts] == [toks["ube"].encode(t).tolist() for t in texts]


# --------------------------------------------------------------------------- overflow with stride

def _plain(batch):
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in batch.items()}


@pytest.mark.parametrize("side", ["right", "left"])
def test_overflow_windows_equal_a_fast_tokenizer(toks, texts, tmp_path, side):
    """Same rows, masks and overflow_to_sample_mapping as PreTrainedTokenizerFast over the utf8 export."""
    from ube_stream.hf import UbeTokenizer

    tok = toks["utf8"]
    tok.export_hf(tmp_path / "hf")
    fast = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "hf"), truncation_side=side)
    ours = UbeTokenizer(tokenizer=tok, truncation_side=side)
    batch = [texts[0][:120], "short", texts[3][:200], ""]
    cases = [dict(max_length=16, stride=4), dict(max_length=16, stride=4, padding=True),
             dict(max_length=9, stride=0, padding="max_length"), dict(max_length=33, stride=32 - 1)]
    for kwargs in cases:
        for inputs in (batch, batch[0], batch[1]):
            want = _plain(fast(inputs, truncation=True, return_overflowing_tokens=True, return_token_type_ids=False,
                               **kwargs))
            got = _plain(ours(inputs, truncation=True, return_overflowing_tokens=True, **kwargs))
            assert got == want, (kwargs, inputs)
            assert len(set(want["overflow_to_sample_mapping"])) == (len(inputs) if isinstance(inputs, list) else 1)
    # tensors keep every window (the overflow rows were dropped before)
    want = fast(batch, truncation=True, max_length=16, stride=4, padding=True, return_overflowing_tokens=True,
                return_tensors="np")
    got = ours(batch, truncation=True, max_length=16, stride=4, padding=True, return_overflowing_tokens=True,
               return_tensors="np")
    assert got["input_ids"].shape == want["input_ids"].shape and (got["input_ids"] == want["input_ids"]).all()
    assert got["overflow_to_sample_mapping"].tolist() == want["overflow_to_sample_mapping"].tolist()
    with pytest.raises(ValueError, match="stride"):
        ours(batch, truncation=True, max_length=8, stride=8, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="text pairs"):
        ours(batch[0], batch[2], truncation=True, max_length=8, return_overflowing_tokens=True)


def test_overflow_windows_with_bos_eos(toks, texts):
    """Each window gets the special tokens and max_length counts them, as a fast tokenizer's post-processor."""
    from ube_stream.hf import UbeTokenizer

    tok = toks["ube"]
    hf = UbeTokenizer(tokenizer=tok, bos_token="<|pad|>", add_bos=True, add_eos=True)
    ids = tok.encode(texts[1][:150]).tolist()
    out = hf(texts[1][:150], truncation=True, max_length=10, stride=3, return_overflowing_tokens=True,
             return_special_tokens_mask=True)
    bos, eos = tok.special_tokens["<|pad|>"], tok.special_tokens["<|endoftext|>"]
    rows = out["input_ids"]
    assert all(r[0] == bos and r[-1] == eos and len(r) <= 10 for r in rows)
    inner = [r[1:-1] for r in rows]
    # windows of 8 starting every 5 tokens, the last reaching the end; together they cover ids
    assert inner == [ids[s:s + 8] for s in range(0, len(ids), 5) if s == 0 or s + 3 < len(ids)][:len(inner)]
    assert inner[-1][-1] == ids[-1] and out["overflow_to_sample_mapping"] == [0] * len(rows)
    assert out["special_tokens_mask"] == [[1] + [0] * len(r) + [1] for r in inner]
