"""The datatrove step (ube_stream.integrations.datatrove) run in datatrove's own
LocalPipelineExecutor, against `ube encode` of the same documents: the `.ds`
files (read here with numpy from datatrove's TokenizedFile layout: little-endian
uint16/uint32 ids, a `.ds.index` of uint64 document ends) hold, document for
document, the ids `ube encode` stored; datatrove's DatatroveFolderDataset reads
them.  datatrove runs in a child process (it leaves threads behind, and a
process with threads must not fork: tests/test_executors.py checks forking).
Skipped where datatrove is not installed (pip install datatrove)."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ube_stream.shards import TokenShards, encode_corpus
from ube_stream.training.trainer import train

pytestmark = pytest.mark.skipif(importlib.util.find_spec("datatrove") is None,
                                reason="datatrove is not installed (pip install datatrove)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the child: runs the pipeline given as JSON in argv[1], then reads `windows` samples with DatatroveFolderDataset
CHILD = r"""
import json, sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import JsonlReader
from datatrove.utils.dataset import DatatroveFolderDataset
from ube_stream.integrations.datatrove import UbeDocumentTokenizer

job = json.loads(sys.argv[1])
step = UbeDocumentTokenizer(job["out"], tokenizer=job["tokenizer"], **job["options"])
LocalPipelineExecutor(pipeline=[JsonlReader(job["folder"], shuffle_files=False), step], tasks=job["tasks"],
                      workers=1, logging_dir=job["logs"]).run()
dataset = DatatroveFolderDataset(job["out"], seq_len=job["seq_len"], token_size=2)
print(json.dumps([dataset[i]["input_ids"].tolist() for i in range(job["windows"])]))
"""


def run_step(tmp_path, folder, tokenizer, *, tasks=1, seq_len=31, windows=3, **options):
    out = str(tmp_path / "ds")
    job = {"out": out, "tokenizer": tokenizer, "options": options, "folder": folder, "tasks": tasks,
           "logs": str(tmp_path / "logs"), "seq_len": seq_len, "windows": windows}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads(proc.stdout.strip().splitlines()[-1])


def read_ds(path, token_size=2):
    ids = np.fromfile(path, dtype="<u2" if token_size == 2 else "<u4")
    ends = np.fromfile(path + ".index", dtype="<u8").tolist()
    return [ids[a:b].tolist() for a, b in zip([0] + ends[:-1], ends)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, multilingual_lines):
    """Two JSON Lines files of real multilingual text (one per datatrove rank)."""
    root = tmp_path_factory.mktemp("dt-corpus")
    lines = multilingual_lines[:240]
    for i, part in enumerate((lines[:130], lines[130:])):
        with open(root / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in part)
    return str(root), lines


# slow: a datatrove child process and a training each (about 6 s)
@pytest.mark.slow
@pytest.mark.parametrize("substrate", ["ube", "utf16"])
def test_datatrove_step_equals_ube_encode(corpus, substrate, tmp_path):
    folder, lines = corpus
    tok_path = str(tmp_path / "tok.json")
    train(folder, vocab_size=700, substrate=substrate, workers=1, show_progress=False).save(tok_path)
    shards = str(tmp_path / "shards")
    encode_corpus(folder, tokenizer=tok_path, output=shards, workers=1, show_progress=False)
    expected = [ids.tolist() for ids in TokenShards(shards).iter_docs()]
    assert len(expected) == len(lines)

    seq_len = 31
    out, windows = run_step(tmp_path, folder, tok_path, tasks=2, seq_len=seq_len, shuffle_documents=False)
    files = sorted(f for f in os.listdir(out) if f.endswith(".ds"))
    assert files == ["00000_unshuffled.ds", "00001_unshuffled.ds"]
    got = read_ds(os.path.join(out, files[0])) + read_ds(os.path.join(out, files[1]))
    assert got == expected                       # document for document, EOS included
    with open(os.path.join(out, files[0] + ".metadata")) as f:
        assert f.read().splitlines()[0] == f"{tok_path}|2"
    # datatrove's own reader: windows of seq_len + 1 tokens over the first file's stream
    stream = [t for doc in read_ds(os.path.join(out, files[0])) for t in doc]
    assert windows == [stream[i * (seq_len + 1):(i + 1) * (seq_len + 1)] for i in range(3)]


@pytest.mark.slow
def test_datatrove_step_shuffles_whole_documents(corpus, tmp_path):
    from ube_stream import Tokenizer

    folder, lines = corpus
    tok = Tokenizer(substrate="utf8", merges=[], special_tokens=["<|endoftext|>", "<s>"])
    tok_path = str(tmp_path / "tok.json")
    tok.save(tok_path)
    out, _ = run_step(tmp_path, folder, tok_path, bos_token="<s>", eos_token=None, seed=3, windows=0)
    (name,) = [f for f in os.listdir(out) if f.endswith(".ds")]
    got = read_ds(os.path.join(out, name))
    # utf8 substrate, no merges: the ids are the UTF-8 bytes, after the BOS id
    bos = tok.special_tokens["<s>"]
    expected = [[bos] + list(t.encode("utf-8")) for t in lines]
    assert sorted(got) == sorted(expected) and got != expected      # shuffled, documents whole


def test_datatrove_step_refuses_what_it_cannot_do(tmp_path):
    code = ("from ube_stream import Tokenizer\n"
            "from ube_stream.integrations.datatrove import UbeDocumentTokenizer\n"
            "tok = Tokenizer(substrate='utf8', merges=[], special_tokens=['<|endoftext|>'])\n"
            "for options in ({'eos_token': '<|eot|>'}, {'save_loss_metadata': True}):\n"
            "    try:\n"
            "        UbeDocumentTokenizer('out', tokenizer=tok, **options)\n"
            "    except ValueError as exc:\n"
            "        print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = proc.stdout.strip().splitlines()
    assert "'<|eot|>' is not a special token of this tokenizer" in first
    assert "save_loss_metadata" in second
