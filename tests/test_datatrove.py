"""The datatrove step (ube_stream.integrations.datatrove) run in datatrove's own
LocalPipelineExecutor, against `ube encode` of the same documents: the `.ds`
files (read here with numpy from datatrove's TokenizedFile layout: little-endian
uint16/uint32 ids, a `.ds.index` of uint64 document ends) hold, document for
document, the ids `ube encode` stored; datatrove's DatatroveFolderDataset reads
them.  Skipped where datatrove is not installed (pip install datatrove)."""
import json
import os

import numpy as np
import pytest

pytest.importorskip("datatrove")

from ube_stream.shards import TokenShards, encode_corpus  # noqa: E402
from ube_stream.training.trainer import train  # noqa: E402


def read_ds(path, token_size):
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


@pytest.mark.parametrize("substrate", ["ube", "utf16"])
def test_datatrove_step_equals_ube_encode(corpus, substrate, tmp_path):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.utils.dataset import DatatroveFolderDataset

    from ube_stream.integrations.datatrove import UbeDocumentTokenizer

    folder, lines = corpus
    tok_path = str(tmp_path / "tok.json")
    train(folder, vocab_size=700, substrate=substrate, workers=1, show_progress=False).save(tok_path)
    shards = str(tmp_path / "shards")
    encode_corpus(folder, tokenizer=tok_path, output=shards, workers=1, show_progress=False)
    expected = [ids.tolist() for ids in TokenShards(shards).iter_docs()]
    assert len(expected) == len(lines)

    out = str(tmp_path / "ds")
    LocalPipelineExecutor(pipeline=[JsonlReader(folder, shuffle_files=False),
                                    UbeDocumentTokenizer(out, tokenizer=tok_path, shuffle_documents=False)],
                          tasks=2, workers=1, logging_dir=str(tmp_path / "logs")).run()
    files = sorted(f for f in os.listdir(out) if f.endswith(".ds"))
    assert files == ["00000_unshuffled.ds", "00001_unshuffled.ds"]
    got = read_ds(os.path.join(out, files[0]), 2) + read_ds(os.path.join(out, files[1]), 2)
    assert got == expected                       # document for document, EOS included
    with open(os.path.join(out, files[0] + ".metadata")) as f:
        assert f.read().splitlines()[0] == f"{tok_path}|2"

    # datatrove's own reader: windows of seq_len + 1 tokens over each file's stream
    seq_len = 31
    dataset = DatatroveFolderDataset(out, seq_len=seq_len, token_size=2)
    stream = [t for doc in read_ds(os.path.join(out, files[0]), 2) for t in doc]
    for i in range(3):
        sample = dataset[i]["input_ids"]
        assert sample.tolist() == stream[i * (seq_len + 1):(i + 1) * (seq_len + 1)]


def test_datatrove_step_shuffles_whole_documents_and_refuses_what_it_cannot_do(corpus, tmp_path):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader

    from ube_stream import Tokenizer
    from ube_stream.integrations.datatrove import UbeDocumentTokenizer

    folder, lines = corpus
    tok = Tokenizer(substrate="utf8", merges=[], special_tokens=["<|endoftext|>", "<s>"])
    out = str(tmp_path / "ds")
    step = UbeDocumentTokenizer(out, tokenizer=tok, bos_token="<s>", eos_token=None, seed=3)
    LocalPipelineExecutor(pipeline=[JsonlReader(folder, shuffle_files=False), step], tasks=1, workers=1,
                          logging_dir=str(tmp_path / "logs")).run()
    (name,) = [f for f in os.listdir(out) if f.endswith(".ds")]
    got = read_ds(os.path.join(out, name), 2)
    # utf8 substrate, no merges: the ids are the UTF-8 bytes, after the BOS id
    bos = tok.special_tokens["<s>"]
    expected = [[bos] + list(t.encode("utf-8")) for t in lines]
    assert sorted(got) == sorted(expected) and got != expected      # shuffled, documents whole
    with pytest.raises(ValueError, match="not a special token of this tokenizer"):
        UbeDocumentTokenizer(out, tokenizer=tok, eos_token="<|eot|>")
    with pytest.raises(ValueError, match="save_loss_metadata"):
        UbeDocumentTokenizer(out, tokenizer=tok, save_loss_metadata=True)
