"""Tokenizers of existing models as ``utf8``-substrate tokenizers with the model's ids.

Both loaders build our internal numbering (bytes 0..255, then merged tokens in
merge order, then special tokens) and an *id map* from it to the model's ids,
so ``encode`` returns and ``decode`` accepts the model's own ids.

* :func:`tokenizer_from_hf`: a HF ``tokenizer.json`` with a byte-level BPE
  model.  Vocabulary strings go through GPT-2's ``bytes_to_unicode`` back to
  bytes; merges become id pairs; the pre-tokenizer gives the pattern
  (``ByteLevel(use_regex=True)`` is the GPT-2 pattern; a ``Split`` regex
  followed by ``ByteLevel(use_regex=False)`` is that regex); added tokens
  become special tokens (recognised only when allowed).
* :func:`tokenizer_from_tiktoken`: tiktoken's ``{token bytes: rank}``.  The
  merge list comes from the ranks the way tiktoken's own BPE works: the token of
  rank ``r`` is the merge of the two parts that BPE-encoding its bytes with the
  ranks below ``r`` leaves.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Callable, Dict, List, Mapping, Optional, Tuple, TypeVar

import numpy as np

from .. import _ranks
from ..errors import TokenizerFormatError, check_status, err_buffer
from ..pretokenizer import REGEX_PREFIX
from ..storage import read_bytes
from ..substrate import gpt2_byte_chars

# the Tokenizer class comes in as ``cls`` (no import of .core: that would be a cycle)
T = TypeVar("T")


def _hf_pattern(pre: dict | None, source: str) -> str:
    def byte_level_ok(step: dict) -> None:
        if step.get("add_prefix_space"):
            raise TokenizerFormatError(
                f"{source}: ByteLevel(add_prefix_space=True) is not supported (it changes the text "
                "before encoding, and ube-stream keeps text as is)")

    if pre is None:
        raise TokenizerFormatError(f"{source}: no pre_tokenizer; ube-stream needs a byte-level BPE "
                                   "with a ByteLevel or Split pre-tokenizer")
    if pre.get("type") == "ByteLevel":
        byte_level_ok(pre)
        if pre.get("use_regex", True):
            return "gpt2"
        raise TokenizerFormatError(f"{source}: ByteLevel(use_regex=False) alone (no split) is not supported")
    if pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers", [])
        if (len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel"
                and not steps[1].get("use_regex", True) and not steps[0].get("invert", False)
                and steps[0].get("behavior", "Isolated") == "Isolated"):
            byte_level_ok(steps[1])
            pattern = steps[0].get("pattern", {})
            if "Regex" in pattern:   # marked: any regex HF writes (a known pattern's text keeps its name)
                from ..pretokenizer import PATTERNS
                from .export import hf_regex

                # what export_hf writes for a known pattern (Oniguruma spelling) reads back as that pattern
                known = {hf_regex(text): text for text in PATTERNS.values()}
                return REGEX_PREFIX + known.get(pattern["Regex"], pattern["Regex"])
    raise TokenizerFormatError(
        f"{source}: pre_tokenizer {json.dumps(pre)[:200]} is not supported; ube-stream reads "
        "ByteLevel(use_regex=True) or Sequence[Split(Regex, Isolated), ByteLevel(use_regex=False)]")


def tokenizer_from_hf(cls: Callable[..., T], path) -> T:
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise TokenizerFormatError(f"{path}: no such file; expected a HF tokenizer.json") from None
    except json.JSONDecodeError as exc:
        raise TokenizerFormatError(f"{path}: not a JSON file ({exc})") from None
    model = doc.get("model") or {}
    if model.get("type") != "BPE":
        raise TokenizerFormatError(f"{path}: model type {model.get('type')!r} is not supported; "
                                   "from_hf reads byte-level BPE models")
    if model.get("byte_fallback") or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise TokenizerFormatError(f"{path}: byte_fallback / subword prefixes are not byte-level BPE")
    if doc.get("normalizer") is not None:
        raise TokenizerFormatError(f"{path}: normalizer {doc['normalizer'].get('type')!r} is not "
                                   "supported (ube-stream keeps text as is)")
    pattern = _hf_pattern(doc.get("pre_tokenizer"), path)
    byte_of = {chr(c): b for b, c in enumerate(gpt2_byte_chars().tolist())}

    def to_bytes(token: str) -> bytes:
        try:
            return bytes(byte_of[c] for c in token)
        except KeyError as exc:
            raise TokenizerFormatError(f"{path}: token {token!r} holds {exc.args[0]!r}, which is not a "
                                       "GPT-2 byte character: not a byte-level vocabulary") from None

    vocab: Dict[bytes, int] = {to_bytes(t): int(i) for t, i in model["vocab"].items()}
    id_map: List[int] = []
    internal: Dict[bytes, int] = {}
    for b in range(256):
        token = bytes([b])
        if token not in vocab:
            raise TokenizerFormatError(f"{path}: byte {b} has no token; a byte-level BPE needs all 256")
        internal[token] = b
        id_map.append(vocab[token])
    merges: List[Tuple[int, int]] = []
    for rank, merge in enumerate(model.get("merges", [])):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        left_b, right_b = to_bytes(left), to_bytes(right)
        if left_b not in internal or right_b not in internal:
            raise TokenizerFormatError(f"{path}: merge {rank} ({left!r}, {right!r}) joins a token no "
                                       "earlier merge made")
        merges.append((internal[left_b], internal[right_b]))
        joined = left_b + right_b
        if joined not in internal:
            if joined not in vocab:
                raise TokenizerFormatError(f"{path}: merge {rank} makes {joined!r}, which is not in the vocab")
            internal[joined] = len(id_map)
            id_map.append(vocab[joined])
    used = set(id_map)
    specials: Dict[str, int] = {}
    for added in sorted(doc.get("added_tokens", []), key=lambda a: a["id"]):
        if added["id"] not in used:
            specials[added["content"]] = added["id"]
            used.add(added["id"])
    id_map.extend(specials.values())
    return cls(substrate="utf8", merges=merges, special_tokens=list(specials), pattern=pattern,
               id_map=id_map, training={"source": {"hf": os.path.abspath(path)}})


#: tiktoken's encodings that ship as rank files: pattern name and special tokens
#: (tiktoken_ext/openai_public.py)
KNOWN_TIKTOKEN: Dict[str, Tuple[str, Dict[str, int]]] = {
    "cl100k_base": ("cl100k", {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                               "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
    "o200k_base": ("o200k", {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}
_TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def known_tiktoken_name(path: str) -> Optional[str]:
    """``cl100k_base`` for ``.../cl100k_base.tiktoken(.gz)`` (or the bare name), else None."""
    name = os.path.basename(os.fspath(path))
    for suffix in (".gz", ".tiktoken"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return name if name in KNOWN_TIKTOKEN else None


def find_tiktoken_file(name: str) -> Optional[str]:
    """A local rank file of a known encoding: the ``bpe-openai`` package's copy, or
    tiktoken's download cache (``TIKTOKEN_CACHE_DIR``); None when neither has it."""
    import hashlib
    import importlib.util
    import tempfile

    spec = importlib.util.find_spec("bpe_openai")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            candidate = os.path.join(root, "data", f"{name}.tiktoken.gz")
            if os.path.isfile(candidate):
                return candidate
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "data-gym-cache")
    candidate = os.path.join(cache, hashlib.sha1(_TIKTOKEN_URL.format(name=name).encode()).hexdigest())
    return candidate if os.path.isfile(candidate) else None


def read_maybe_gzip(path) -> bytes:
    """The bytes of a file, gunzipped when it starts with the gzip magic."""
    import gzip

    data = read_bytes(os.fspath(path))
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TokenizerFormatError(f"{path}: a corrupt gzip file ({exc}); download it again") from None
    return data


def parse_tiktoken_ranks(data: bytes, source: str) -> Dict[bytes, int]:
    """A ``.tiktoken`` file's bytes: one ``base64(token) rank`` per line."""
    ranks: Dict[bytes, int] = {}
    offset = 0
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except (ValueError, binascii.Error):
                raise TokenizerFormatError(
                    f"{source}: line {number} (byte offset {offset}) is not 'base64-token rank': "
                    f"{line[:60]!r}; a tiktoken rank file has one such line per token") from None
        offset += len(line) + 1
    return ranks


def load_tiktoken_ranks(path) -> Dict[bytes, int]:
    """A ``.tiktoken`` file (plain or gzipped): one ``base64(token) rank`` per line."""
    return parse_tiktoken_ranks(read_maybe_gzip(path), os.fspath(path))


def _merges_of(ranks: Mapping[bytes, int]) -> List[Tuple[int, int]]:
    """The merge list of a rank vocabulary (multi-byte tokens in rank order get
    internal ids 256, 257, ...): the ``_ranks`` kernel runs, for every token, the
    BPE of the ranks below it, as tiktoken's encoder would."""
    tokens = [token for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1]
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tokens], out=offsets[1:])
    err = err_buffer()
    status, merges = _ranks.merges_from_ranks(b"".join(tokens), offsets, err)
    check_status(status, err, what="converting ranks", data=tokens, ids=[ranks[t] for t in tokens])
    assert merges is not None
    return [(int(a), int(b)) for a, b in merges.tolist()]


def tokenizer_from_tiktoken(cls: Callable[..., T], ranks, pattern: str, special_tokens: Mapping[str, int], *,
                            source: Optional[str] = None) -> T:
    source = os.path.abspath(source) if source else None
    if isinstance(ranks, (str, os.PathLike)):
        source = os.path.abspath(os.fspath(ranks))
        ranks = load_tiktoken_ranks(ranks)
    ranks = {bytes(k): int(v) for k, v in ranks.items()}
    id_map: List[int] = []
    for b in range(256):
        token = bytes([b])
        if token not in ranks:
            raise TokenizerFormatError(f"byte {b} has no rank; a byte-level BPE needs all 256")
        id_map.append(ranks[token])
    merges = _merges_of(ranks)
    id_map.extend(rank for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1)
    specials = dict(sorted(special_tokens.items(), key=lambda kv: kv[1]))
    taken = set(ranks.values())
    for text, sid in specials.items():
        if int(sid) in taken:
            raise TokenizerFormatError(f"special token {text!r} has id {sid}, which a token of the ranks "
                                       "already has; give it an unused id")
        taken.add(int(sid))
    id_map.extend(int(v) for v in specials.values())
    return cls(substrate="utf8", merges=merges, special_tokens=list(specials), pattern=pattern,
               id_map=id_map, training={"source": {"tiktoken": source}} if source else {"source": "tiktoken"})
