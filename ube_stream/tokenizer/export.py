"""Exports of a tokenizer for other tools: GPT-2 style ``vocab.json`` / ``merges.txt``,
and for the ``utf8`` substrate a HF ``tokenizers`` ``tokenizer.json``."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from ..storage import atomic_write_json, atomic_write_text
from ..substrate import symbol_string

__all__ = ["vocab", "export_vocab_merges", "hf_dict", "export_hf", "default_roles"]

#: special-token names that take a role (eos/bos/pad/unk), in order of preference
ROLE_NAMES = {
    "eos_token": ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "<|im_end|>", "<|eot_id|>"),
    "bos_token": ("<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>", "<|bos|>"),
    "pad_token": ("<|pad|>", "<pad>", "<|padding|>", "<|finetune_right_pad_id|>"),
    "unk_token": ("<unk>", "<|unk|>"),
}


def default_roles(special_tokens: Dict[str, int]) -> Dict[str, Optional[str]]:
    """``eos_token``/``bos_token``/``pad_token``/``unk_token`` from the names of the
    special tokens (``None`` where none fits; pad falls back to EOS)."""
    roles: Dict[str, Optional[str]] = {}
    for role, names in ROLE_NAMES.items():
        roles[role] = next((n for n in names if n in special_tokens), None)
    if roles["pad_token"] is None:
        roles["pad_token"] = roles["eos_token"]
    return roles


class _Exportable(Protocol):
    """What the exports read of a :class:`~ube_stream.tokenizer.Tokenizer`."""

    @property
    def substrate(self) -> str: ...
    @property
    def pattern(self) -> str: ...
    @property
    def pattern_name(self) -> str: ...
    @property
    def merges(self) -> List[Tuple[int, int]]: ...
    @property
    def special_tokens(self) -> Dict[str, int]: ...
    @property
    def special_aliases(self) -> Dict[str, int]: ...
    @property
    def added_tokens(self) -> Dict[str, int]: ...
    @property
    def _added_tokens(self) -> Dict[str, Tuple[int, bool]]: ...
    @property
    def _expansions(self) -> Sequence[Tuple[int, ...]]: ...
    @property
    def superbpe(self) -> Optional[Dict[str, Any]]: ...
    @property
    def normalization(self) -> str: ...

    def _model_id(self, internal: int) -> int: ...


def vocab(tok: _Exportable) -> Dict[str, int]:
    """Symbol string -> id for every token, special tokens (and added tokens that are not
    BPE tokens) as their text."""
    table = {symbol_string(e, tok.substrate): tok._model_id(i) for i, e in enumerate(tok._expansions)}
    table.update(_text_tokens(tok))
    return table


def _text_tokens(tok: _Exportable) -> Dict[str, int]:
    """The tokens after the merged ones, by model id: special tokens and the added tokens
    that are not BPE tokens (text -> id)."""
    n_tokens = len(tok._expansions)
    out = dict(tok.special_tokens)
    out.update({t: tok._model_id(i) for t, (i, _) in tok._added_tokens.items() if i >= n_tokens})
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def export_vocab_merges(tok: _Exportable, directory: str | os.PathLike) -> Tuple[str, str]:
    """Write GPT-2 style ``vocab.json`` and ``merges.txt`` into ``directory``.

    The ``#version`` header names the substrate; for a SuperBPE tokenizer it also
    says where stage 2 starts (``superbpe_stage1_merges=k superbpe_max_words=W``, and
    ``superbpe_spans=liu`` for that span rule:
    the first ``k`` merge lines apply inside chunks, the rest across the chunks of
    a span), since a plain BPE reading the file would apply all of them inside
    chunks."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    vocab_path = os.path.join(directory, "vocab.json")
    merges_path = os.path.join(directory, "merges.txt")
    atomic_write_text(vocab_path, json.dumps(vocab(tok), ensure_ascii=False, indent=1) + "\n")
    header = f"#version: 0.2 ube-stream substrate={tok.substrate}"
    if tok.superbpe is not None:
        header += (f" superbpe_stage1_merges={tok.superbpe['stage1_merges']}"
                   f" superbpe_max_words={tok.superbpe['max_words']}"
                   + (f" superbpe_spans={tok.superbpe['spans']}" if "spans" in tok.superbpe else ""))
    lines = [header]
    for left, right in tok.merges:
        lines.append(f"{symbol_string(tok._expansions[left], tok.substrate)} "
                     f"{symbol_string(tok._expansions[right], tok.substrate)}")
    atomic_write_text(merges_path, "\n".join(lines) + "\n")
    return vocab_path, merges_path


_INTERVAL = re.compile(r"\{\d+(?:,\d*)?\}")

#: cl100k as transformers' converters write it and gigatoken (0.10) recognises it (its regexes
#: are known by their text): Llama 3's regex, which gives cl100k's chunks except at the end of a
#: text, where a whitespace run holding a line break is cut after its last one ("\n  " ->
#: "\n", "  "); no other spelling of cl100k loads in gigatoken and runs as cl100k in HF
CL100K_PORTABLE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                   r"|\s*[\r\n]|\s+(?!\S)|\s+")
_AFTER_LAST_BREAK = re.compile(rb"[\r\n][ \t\x0b\x0c\x80-\xff]+\Z")


def crosses_last_line_break(tokens) -> bool:
    """Whether a token (bytes) can hold the cut :data:`CL100K_PORTABLE` makes and cl100k does not
    (a line break, then only other whitespace, possibly part of a character, to the token's
    end).  When none can, BPE never merges across that cut, and both regexes give the same
    ids (true of cl100k's and o200k's own ranks)."""
    return any(_AFTER_LAST_BREAK.search(t) for t in tokens)


def hf_regex(pattern: str) -> str:
    """``pattern`` as HF tokenizers' regex engine (Oniguruma, Ruby syntax) reads it the same way.

    Oniguruma takes ``X{n,m}+`` not as a possessive interval (as ``regex`` and
    tiktoken do) but as ``(?:X{n,m})+``: cl100k's ``\\p{N}{1,3}+`` would match a
    whole digit run instead of at most three digits.  The same meaning in both
    engines is the atomic group ``(?>X{n,m})``; everything else is left as is."""
    out: List[str] = []
    atom_start = 0       # index in ``out`` where the last atom begins
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        start = i
        m = _INTERVAL.match(pattern, i) if c == "{" else None
        if m is not None and out:                       # a quantifier of the last atom
            if pattern[m.end():m.end() + 1] == "+":
                atom = "".join(out[atom_start:])
                del out[atom_start:]
                out.append(f"(?>{atom}{m.group()})")
                i = m.end() + 1
            else:
                out.append(m.group())
                i = m.end()
            continue
        if c in "?*+":
            out.append(c)
            i += 1
            continue
        if c == "\\":
            i += 2
            if pattern[i - 1:i] in ("p", "P") and pattern[i:i + 1] == "{":
                i = pattern.index("}", i) + 1
        elif c == "[":
            i = _class_end(pattern, i)
        elif c == "(":
            depth, i = 1, i + 1
            while i < n and depth:
                if pattern[i] == "\\":
                    i += 2
                elif pattern[i] == "[":                  # a class may hold parentheses
                    i = _class_end(pattern, i)
                else:
                    depth += {"(": 1, ")": -1}.get(pattern[i], 0)
                    i += 1
        else:
            i += 1
        atom_start = len(out)
        out.append(pattern[start:i])
    return "".join(out)


def _class_end(pattern: str, i: int) -> int:
    """The index after the character class that starts at ``pattern[i] == "["``."""
    i += 1
    if pattern[i:i + 1] == "^":
        i += 1
    if pattern[i:i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def hf_dict(tok: _Exportable) -> Dict[str, Any]:
    """HF ``tokenizers`` JSON (byte-level BPE, no prefix space, this tokenizer's pattern)."""
    if tok.substrate != "utf8":
        raise ValueError(
            f"export_hf needs the utf8 substrate (HF's byte-level BPE is UTF-8 BBPE); this tokenizer is "
            f"{tok.substrate!r}. For transformers use ube_stream.hf.UbeTokenizer (every substrate; "
            "pip install \"ube-stream[hf]\")")
    from ..pretokenizer import RULE_PATTERNS

    if tok.superbpe is not None:
        raise ValueError(
            f"export_hf: this is a SuperBPE tokenizer (stage-1 merges 0..{tok.superbpe['stage1_merges'] - 1} "
            "inside each chunk, then the stage-2 merges across the chunks of a span, a token covering at most "
            f"{tok.superbpe['max_words']} chunks), and HF tokenizers cannot express it exactly: its BPE model "
            "applies every merge by rank inside each pre-token, so it can neither keep the stage-1 merges "
            "inside chunks while the stage-2 merges cross them, nor apply a merge at some occurrences and not "
            "others (the max_words rule counts chunk starts, which depend on the text around a token), and its "
            "pre-tokenizer has no span rule (one Split regex would have to give both the pattern's chunks and "
            "the joinable-chunk runs). An export would encode differently from this tokenizer, so none is written. For "
            "transformers use ube_stream.hf.UbeTokenizer (it encodes with both stages; pip install "
            "\"ube-stream[hf]\"); for the vocabulary alone, export_vocab_merges")
    if tok.pattern_name in RULE_PATTERNS:
        raise ValueError(
            f"export_hf: the {tok.pattern_name!r} pre-tokenization is a rule-based split that HF tokenizers' "
            "pre-tokenizers (Split on one regex) cannot express; export vocab.json/merges.txt "
            "(export_vocab_merges) or use ube_stream.hf.UbeTokenizer")
    table = {symbol_string(e, "utf8"): tok._model_id(i) for i, e in enumerate(tok._expansions)}
    # "a b" strings (GPT-2's layout; byte-level symbols hold no space): every tokenizers release reads them
    merges = [f"{symbol_string(tok._expansions[a], 'utf8')} {symbol_string(tok._expansions[b], 'utf8')}"
              for a, b in tok.merges]
    text_tokens = _text_tokens(tok)
    if list(text_tokens.values()) != list(range(len(table), len(table) + len(text_tokens))):
        # ids with gaps (an existing model's numbering): HF tokenizers renumbers added tokens that
        # are not in the model's vocab, so they go in it too (no merge ever makes them)
        table.update(text_tokens)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _hf_added_tokens(tok, text_tokens),
        "normalizer": _hf_normalizer(tok),
        "pre_tokenizer": _hf_pre_tokenizer(tok),
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": table, "merges": merges,
        },
    }


def _hf_added_tokens(tok: _Exportable, text_tokens: Dict[str, int]) -> List[Dict[str, Any]]:
    """HF's ``added_tokens``: the special tokens, and the non-special added tokens with their
    ``normalized`` flag, by id.  A special token with aliases is ``normalized``: HF finds it
    after the normalizer's ``Replace`` steps turned every alias into it (HF gives every
    added token its own id, so an alias cannot be an added token of its own)."""
    aliased = set(tok.special_aliases.values())
    added = {t: n for t, (_, n) in tok._added_tokens.items()}
    entries = [(i, t) for t, i in text_tokens.items()]
    entries += [(i, t) for t, i in tok.added_tokens.items() if t not in text_tokens]
    return [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": added[t] if t in added else i in aliased, "special": t not in added}
            for i, t in sorted(entries)]


def _hf_normalizer(tok: _Exportable) -> Optional[Dict[str, Any]]:
    """``NFC`` for ``nfc``; before it, one ``Replace`` per special-token alias (the alias's text
    by its token's: HF then finds the token, ``normalized``, in the replaced text)."""
    name_of = {i: t for t, i in tok.special_tokens.items()}
    steps: List[Dict[str, Any]] = [{"type": "Replace", "pattern": {"String": alias}, "content": name_of[i]}
                                   for alias, i in tok.special_aliases.items()]
    if tok.normalization == "nfc":
        steps.append({"type": "NFC"})
    if len(steps) == 1 and not tok.special_aliases:
        return steps[0]
    return {"type": "Sequence", "normalizers": steps} if steps else None


def _hf_pre_tokenizer(tok: _Exportable) -> Dict[str, Any]:
    """GPT-2's own pre-tokenizer for the ``gpt2`` pattern (``ByteLevel`` with its regex: the
    layout every reader of GPT-2's file knows, gigatoken included), else a ``Split`` on the
    pattern (Oniguruma spelling; for ``cl100k`` :data:`CL100K_PORTABLE` when no token crosses
    its one cut, which gigatoken reads too) then ``ByteLevel`` without regex."""
    if tok.pattern_name == "gpt2":
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    regex = hf_regex(tok.pattern)
    if tok.pattern_name == "cl100k" and not crosses_last_line_break(bytes(e) for e in tok._expansions[256:]):
        regex = CL100K_PORTABLE
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        ],
    }


def export_hf(tok: _Exportable, path: str | os.PathLike, **roles: Optional[str]) -> str:
    """Write a HF tokenizer (utf8 substrate only); returns the path written.

    ``path`` ending in ``.json``: a bare ``tokenizer.json`` that HF ``tokenizers``
    loads.  Otherwise a folder that ``PreTrainedTokenizerFast.from_pretrained``
    and ``AutoTokenizer.from_pretrained`` load: ``tokenizer.json``,
    ``tokenizer_config.json`` and ``special_tokens_map.json`` with the roles
    (``eos_token=...`` etc. override :func:`default_roles`).
    """
    path = os.fspath(path)
    doc = hf_dict(tok)
    if path.endswith(".json") and not os.path.isdir(path):
        if roles:
            raise ValueError("roles (eos_token, ...) need a folder: export_hf(tokenizer, 'folder/')")
        atomic_write_text(path, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        return path
    chosen = default_roles(tok.special_tokens)
    for role, text in roles.items():
        if role not in chosen:
            raise ValueError(f"unknown role {role!r}; roles are {sorted(chosen)}")
        if text is not None and text not in tok.special_tokens:
            raise ValueError(f"{role} {text!r} is not a special token of this tokenizer "
                             f"(it has {list(tok.special_tokens) or 'none'})")
        chosen[role] = text
    os.makedirs(path, exist_ok=True)
    atomic_write_text(os.path.join(path, "tokenizer.json"), json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    present = {role: text for role, text in chosen.items() if text is not None}
    config: Dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1 << 62,
        "added_tokens_decoder": {str(entry["id"]): {k: v for k, v in entry.items() if k != "id"}
                                 for entry in doc["added_tokens"]},
    }
    config.update({role: chosen[role] for role in ROLE_NAMES})
    atomic_write_json(os.path.join(path, "tokenizer_config.json"), config)
    atomic_write_json(os.path.join(path, "special_tokens_map.json"), present)
    return path
