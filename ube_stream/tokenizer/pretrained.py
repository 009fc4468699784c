"""Tokenizers of existing models as ``utf8``-substrate tokenizers with the model's ids.

Both loaders build our internal numbering (bytes 0..255, then merged tokens in
merge order, then special tokens) and an *id map* from it to the model's ids,
so ``encode`` returns and ``decode`` accepts the model's own ids.

* :func:`tokenizer_from_hf`: a HF ``tokenizer.json`` with a byte-level BPE
  model, every field read with a check (:class:`_HFDoc`).  Vocabulary strings
  go through GPT-2's ``bytes_to_unicode`` back to bytes.  Merges in creation
  order become id pairs as they are; other orders (Llama-3's, written by
  transformers' ``TikTokenConverter``, with ``ignore_merges``) are read by the
  ranks of the tokens they make (:func:`_rank_order`).  The pre-tokenizer gives
  the pattern: ``ByteLevel(use_regex=True)`` is GPT-2's; a ``Split`` regex
  followed by ``ByteLevel(use_regex=False)`` is that regex (run under the time
  budget); StarCoder's ``Digits`` + ``ByteLevel`` and DeepSeek-V3's three
  ``Split``s are one regex each that splits the same way.  Added tokens marked
  special become special tokens (recognised only when allowed); the others
  (GPT-NeoX's runs of spaces, OLMo's ``|||EMAIL_ADDRESS|||``) become the
  tokenizer's ``added_tokens``, cut out of every text as HF does.  A ``NFC``
  normalizer (Qwen2, GPT-NeoX) becomes ``normalization="nfc"``; ``Replace``
  steps that map a text to a special token (what :func:`~.export.hf_dict`
  writes for aliases) become aliases.  A vocabulary may lack the 13 bytes that
  never occur in UTF-8 (GPT-NeoX's does): they get ids after the file's.  What
  the engine cannot run (other models, other normalizers, byte fallback) is
  refused in one line naming it.
* :func:`tokenizer_from_tiktoken`: tiktoken's ``{token bytes: rank}``.  The
  merge list comes from the ranks the way tiktoken's own BPE works: the token of
  rank ``r`` is the merge of the two parts that BPE-encoding its bytes with the
  ranks below ``r`` leaves.

Every id and rank is checked to lie at most :data:`ID_SLACK` past the number of
tokens before anything is sized by it.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Tuple, TypeVar

import numpy as np

from .. import _ranks
from ..errors import TokenizerFormatError, UbeError, check_status, err_buffer
from ..pretokenizer import REGEX_PREFIX
from ..storage import MAX_JSON_BYTES, read_bounded
from ..substrate import gpt2_byte_chars

# the Tokenizer class comes in as ``cls`` (no import of .core: that would be a cycle)
T = TypeVar("T")


#: how far past the number of tokens a model id may lie (ids with gaps, e.g. special tokens after
#: reserved ranks); the id map is sized by the largest id, so a file cannot ask for gigabytes
ID_SLACK = 1 << 16


def check_ids(ids: Mapping[str, int], n_tokens: int, source: str, field: str) -> None:
    """Every id of ``ids`` (label -> id) an int in ``0 .. n_tokens + ID_SLACK - 1``, before
    anything is sized by them."""
    limit = n_tokens + ID_SLACK
    values = list(ids.values())
    if not values or (set(map(type, values)) == {int} and min(values) >= 0 and max(values) < limit):
        return   # all good (one C pass each); else the loop below names the first bad one
    for label, token_id in ids.items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < limit:
            raise TokenizerFormatError(
                f"{source}: {field}: {label} has id {token_id!r}; expected an integer in 0..{limit - 1} (the "
                f"file has {n_tokens} tokens, and ids may run at most {ID_SLACK} past that)")


_MISSING = object()

#: the bytes that never occur in UTF-8 (0xC0, 0xC1, 0xF5-0xFF): a HF vocabulary trained on text
#: may lack their tokens (GPT-NeoX's does); encoding valid text never needs them
NEVER_IN_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


def _kinds(kind: Any) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


class _HFDoc:
    """A parsed HF ``tokenizer.json`` whose fields are read with checks: every
    malformed value is a :class:`TokenizerFormatError` naming the file, the field
    and what was expected."""

    def __init__(self, doc: Any, source: str):
        self.source = source
        if not isinstance(doc, dict):
            self.fail("the file", "a JSON object", doc)
        self.doc = doc

    def fail(self, field: str, expected: str, found: Any) -> NoReturn:
        shown = json.dumps(found, ensure_ascii=False, default=str)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        raise TokenizerFormatError(f"{self.source}: {field}: expected {expected}, found {shown}")

    def get(self, obj: dict, key: str, field: str, kind: Any, expected: str, default: Any = _MISSING) -> Any:
        if key not in obj:
            if default is _MISSING:
                raise TokenizerFormatError(f"{self.source}: {field}: missing; expected {expected}")
            return default
        value = obj[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
            self.fail(field, expected, value)
        return value

    def refuse(self, component: str, why: str) -> NoReturn:
        raise TokenizerFormatError(f"{self.source}: {component} is not supported: {why}")


#: ``Sequence[Digits(individual_digits=True), ByteLevel(use_regex=True)]`` as one regex: Digits
#: isolates every numeric character (Rust's ``char::is_numeric``: ``\p{N}``), then GPT-2's regex
#: runs inside the pieces between them, where a whitespace run ends at a numeric character as at
#: the end of a piece (hence ``(?![^\s\p{N}])`` for GPT-2's ``(?!\S)``); ``\p{N}+`` for runs
DIGITS_THEN_GPT2 = (r"\p{N}|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+")
DIGIT_RUNS_THEN_GPT2 = "\\p{N}+" + DIGITS_THEN_GPT2[len("\\p{N}"):]


# DeepSeek-V3's three Splits (verbatim from its tokenizer.json) and the one regex that splits the
# same way.  HF runs each Split on every piece the previous ones left: numeric runs cut into
# threes; then runs of CJK ideographs and kana; then the third regex inside every piece (a CJK
# run is cut again by it; a numeric piece has nothing it matches and stays whole).  So the one
# regex is: numeric threes, or the third regex confined to one CJK run, or confined to the text
# between numerals and CJK runs, each with its unmatched stretches kept whole (HF keeps the text
# between matches as one piece) and its lookahead seeing a character outside as a piece end.
_DEEPSEEK_V3_SPLITS = tuple(json.loads(
    r'''["\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]'''))
_CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"


def _third_split_within(guard: str) -> str:
    """DeepSeek-V3's third Split with every character it takes passing ``guard`` (a lookahead),
    and its unmatched stretches of such characters as one match."""
    def one(cls: str) -> str:
        return f"(?:{guard}{cls})"

    space, newline = one(r"\s"), one(r"[\r\n]")
    third = "|".join([
        one(_ASCII_PUNCT) + one("[A-Za-z]") + "+",
        one(r"[^\r\n\p{L}\p{P}\p{S}]") + "?" + one(r"[\p{L}\p{M}]") + "+",
        one(" ") + "?" + one(r"[\p{P}\p{S}]") + "+" + newline + "*",
        space + "*" + newline + "+",
        space + "+(?!" + one(r"\S") + ")",
        space + "+",
    ])
    return f"{third}|(?:(?!{third}){guard}(?s:.))+"


_ASCII_PUNCT = r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"
DEEPSEEK_V3_PATTERN = "|".join([r"\p{N}{1,3}", _third_split_within(f"(?=[{_CJK}])"),
                                _third_split_within(f"(?![\\p{{N}}{_CJK}])")])
#: Sequences of Split regexes (Isolated) that one regex splits the same way
KNOWN_SPLIT_SEQUENCES = {_DEEPSEEK_V3_SPLITS: DEEPSEEK_V3_PATTERN}


def _hf_pattern(hf: _HFDoc, pre: Any) -> str:
    """Our pattern (a name or a marked regex) of a ``pre_tokenizer``."""
    def byte_level(step: dict, field: str, use_regex: bool) -> None:
        if hf.get(step, "add_prefix_space", f"{field}.add_prefix_space", bool, "true or false", False):
            hf.refuse("ByteLevel(add_prefix_space=true)", "it puts a space before the text, and ube-stream "
                      "keeps text as is")
        if hf.get(step, "use_regex", f"{field}.use_regex", bool, "true or false", True) != use_regex:
            hf.refuse(f"ByteLevel(use_regex={str(not use_regex).lower()}) here",
                      "ube-stream reads ByteLevel(use_regex=true) alone, or Split(Regex) then "
                      "ByteLevel(use_regex=false)")

    if pre is None:
        hf.refuse("a BPE without pre_tokenizer", "ube-stream needs a ByteLevel or Split pre-tokenizer")
    if not isinstance(pre, dict):
        hf.fail("pre_tokenizer", "an object with a type", pre)
    kind = hf.get(pre, "type", "pre_tokenizer.type", str, "a pre-tokenizer name")
    if kind == "ByteLevel":
        byte_level(pre, "pre_tokenizer", True)
        return "gpt2"
    if kind != "Sequence":
        hf.refuse(f"pre_tokenizer {kind}", "ube-stream reads ByteLevel(use_regex=true) or "
                  "Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)]")
    steps = hf.get(pre, "pretokenizers", "pre_tokenizer.pretokenizers", list, "a list of pre-tokenizers")
    for k, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("type"), str):
            hf.fail(f"pre_tokenizer.pretokenizers[{k}]", "an object with a type", step)
    names = [step["type"] for step in steps]
    if names == ["ByteLevel"]:
        byte_level(steps[0], "pre_tokenizer.pretokenizers[0]", True)
        return "gpt2"
    if names == ["Digits", "ByteLevel"]:    # StarCoder, StarCoder2
        byte_level(steps[1], "pre_tokenizer.pretokenizers[1]", True)
        single = hf.get(steps[0], "individual_digits", "pre_tokenizer.pretokenizers[0].individual_digits", bool,
                        "true or false", False)
        return REGEX_PREFIX + (DIGITS_THEN_GPT2 if single else DIGIT_RUNS_THEN_GPT2)
    if len(names) < 2 or names[-1] != "ByteLevel" or set(names[:-1]) != {"Split"}:
        hf.refuse(f"pre_tokenizer Sequence[{', '.join(names)}]",
                  "ube-stream runs one regex split: Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)]")
    byte_level(steps[-1], f"pre_tokenizer.pretokenizers[{len(steps) - 1}]", False)
    regexes = tuple(_split_regex(hf, step, f"pre_tokenizer.pretokenizers[{k}]") for k, step in enumerate(steps[:-1]))
    if len(regexes) > 1:
        if regexes not in KNOWN_SPLIT_SEQUENCES:
            hf.refuse(f"pre_tokenizer Sequence[{', '.join(names)}]",
                      "ube-stream runs one regex split, and this chain of Splits is not one it knows how to "
                      "write as one regex (DeepSeek-V3's is)")
        return REGEX_PREFIX + KNOWN_SPLIT_SEQUENCES[regexes]
    regex_text = regexes[0]
    from ..pretokenizer import PATTERNS
    from .export import hf_regex

    # what export_hf writes for a known pattern (Oniguruma spelling) reads back as that pattern
    known = {hf_regex(text): text for text in PATTERNS.values()}
    return REGEX_PREFIX + known.get(regex_text, regex_text)


def _portable_cl100k(pattern: str, vocab: Mapping[bytes, int]) -> str:
    """``cl100k`` for a file whose Split is :data:`~.export.CL100K_PORTABLE` (what export_hf
    writes for cl100k, and converters write) when no token crosses the one cut it makes and
    cl100k does not: the same ids; else Llama 3's regex, which splits as that spelling does."""
    from ..pretokenizer import LLAMA3_PATTERN
    from .export import CL100K_PORTABLE, crosses_last_line_break

    if pattern != REGEX_PREFIX + CL100K_PORTABLE:
        return pattern
    return REGEX_PREFIX + LLAMA3_PATTERN if crosses_last_line_break(vocab) else "cl100k"


def _split_regex(hf: _HFDoc, split: dict, field: str) -> str:
    """The regex of a ``Split`` whose pieces are the regex matches: ``Isolated`` and not
    inverted, or ``Removed`` and inverted (OLMo-2's: the text between matches is dropped,
    and there is none for regexes that match every character, as cl100k's)."""
    invert = hf.get(split, "invert", f"{field}.invert", bool, "true or false", False)
    behavior = hf.get(split, "behavior", f"{field}.behavior", str, "a Split behavior", "Isolated")
    if (behavior, invert) not in (("Isolated", False), ("Removed", True)):
        hf.refuse(f"Split(behavior={behavior}, invert={str(invert).lower()})",
                  "ube-stream keeps the regex matches as the pieces (behavior=Isolated, or Removed with "
                  "invert=true)")
    pattern = hf.get(split, "pattern", f"{field}.pattern", dict, 'an object {"Regex": ...}')
    regex_text = hf.get(pattern, "Regex", f"{field}.pattern.Regex", str,
                        "a regular expression (a String pattern is not supported)")
    if not regex_text:
        hf.fail(f"{field}.pattern.Regex", "a non-empty regular expression", regex_text)
    return regex_text


def _check_model(hf: _HFDoc) -> dict:
    """The ``model`` object, refused in one line when the engine cannot run it."""
    model = hf.get(hf.doc, "model", "model", dict, "an object with the tokenizer model")
    kind = hf.get(model, "type", "model.type", str, "a model type", "BPE")
    if kind != "BPE":
        hf.refuse(f"model {kind}", "ube-stream runs byte-level BPE models (WordPiece, Unigram and WordLevel "
                  "tokenize differently)")
    if hf.get(model, "byte_fallback", "model.byte_fallback", bool, "true or false", False):
        hf.refuse("model.byte_fallback (SentencePiece-style BPE)", "its vocabulary holds characters with <0xNN> "
                  "byte tokens as fallback, not GPT-2 byte characters")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if hf.get(model, key, f"model.{key}", (str, type(None)), "a string or null", None):
            hf.refuse(f"model.{key}", "subword markers are not byte-level BPE")
    dropout = hf.get(model, "dropout", "model.dropout", (int, float, type(None)), "a number or null", None)
    if dropout:
        hf.refuse("model.dropout", "BPE dropout skips merges at random; ube-stream encodes deterministically")
    return model


def _hf_normalization(hf: _HFDoc, specials: Mapping[str, int]) -> Tuple[str, Dict[str, str]]:
    """Our normalization of the ``normalizer``: none, or ``NFC`` (Qwen2/2.5/3, GPT-NeoX /
    Pythia; also as the last step of a ``Sequence``), and the aliases ``{alias: special
    token}`` of the ``Replace`` steps before it that replace a text by a special token of
    ``specials`` (as :func:`~.export.hf_dict` writes aliases); any other normalizer is
    refused in one line."""
    normalizer = hf.doc.get("normalizer")
    if normalizer is None:
        return "none", {}
    if not isinstance(normalizer, dict) or not isinstance(normalizer.get("type"), str):
        hf.fail("normalizer", "null or an object with a type", normalizer)
    kind = normalizer["type"]
    if kind == "Sequence":
        steps = hf.get(normalizer, "normalizers", "normalizer.normalizers", list, "a list of normalizers")
        for k, step in enumerate(steps):
            if not isinstance(step, dict) or not isinstance(step.get("type"), str):
                hf.fail(f"normalizer.normalizers[{k}]", "an object with a type", step)
        kinds = [step["type"] for step in steps]
        aliases: Dict[str, str] = {}
        first = 0   # the steps before it are aliases
        while first < len(steps) and kinds[first] == "Replace" and _alias_step(steps[first], specials, aliases):
            first += 1
        if kinds[first:] in ([], ["NFC"]):
            return ("nfc" if kinds[first:] else "none"), aliases
        kind = f"Sequence[{', '.join(step['type'] for step in steps)}]"
    elif kind == "NFC":
        return "nfc", {}
    hf.refuse(f"normalizer {kind}", "ube-stream normalises text with NFC (Qwen2, GPT-NeoX) or not at all (a "
              "Replace is read only when it replaces a text by a special token: an alias)")


def _alias_step(step: dict, specials: Mapping[str, int], aliases: Dict[str, str]) -> bool:
    """Whether ``step`` is ``Replace(String alias -> special token text)``; adds it to ``aliases``."""
    pattern, content = step.get("pattern"), step.get("content")
    if not (isinstance(pattern, dict) and set(pattern) == {"String"} and isinstance(pattern["String"], str)
            and pattern["String"] and content in specials and pattern["String"] not in specials
            and pattern["String"] not in aliases):
        return False
    aliases[pattern["String"]] = str(content)
    return True


def _byte_level_table() -> List[int]:
    """A ``str.translate`` table from GPT-2 byte characters to bytes: each byte's character
    becomes the Latin-1 character of that byte, and every other character ``encode("latin-1")``
    would take becomes U+FFFF, so ``token.translate(table).encode("latin-1")`` is the token's
    bytes or a :class:`UnicodeEncodeError` at its first character that is not a byte character
    (one C pass per token instead of a Python step per character)."""
    chars = gpt2_byte_chars().tolist()
    table = [0xFFFF] * (max(chars) + 1)
    for byte, char in enumerate(chars):
        table[char] = byte
    return table


_BYTE_LEVEL = _byte_level_table()


def _byte_level_bytes(token: str) -> Optional[bytes]:
    """The bytes of a token spelled in GPT-2 byte characters; None when it holds another character."""
    try:
        return token.translate(_BYTE_LEVEL).encode("latin-1")
    except UnicodeEncodeError:
        return None


def _hf_vocab(hf: _HFDoc, model: dict, added_ids: set) -> Tuple[Dict[bytes, int], Dict[str, bytes]]:
    """``model.vocab`` as token bytes -> id, every id bounded and used once; entries that are
    added tokens spelled outside the byte alphabet (DeepSeek's ``<｜begin▁of▁sentence｜>``)
    are left to the added tokens.  Also returns each kept token's bytes by its text (the
    merges are looked up there)."""
    table = hf.get(model, "vocab", "model.vocab", dict, "an object {token: id}")
    check_ids(table, len(table), hf.source, "model.vocab")
    vocab: Dict[bytes, int] = {}
    bytes_of: Dict[str, bytes] = {}
    for token, token_id in table.items():
        try:
            token_bytes = token.translate(_BYTE_LEVEL).encode("latin-1")
        except UnicodeEncodeError as exc:
            if token_id in added_ids:
                continue
            _refuse_id_twice(hf, vocab, bytes_of)   # an earlier fault first, as the file reads
            raise TokenizerFormatError(f"{hf.source}: model.vocab: token {token!r} holds {token[exc.start]!r}, "
                                       "which is not a GPT-2 byte character: not a byte-level vocabulary") from None
        if not token_bytes:
            _refuse_id_twice(hf, vocab, bytes_of)
            hf.fail("model.vocab", "non-empty tokens", token)
        vocab[token_bytes] = token_id
        bytes_of[token] = token_bytes
    _refuse_id_twice(hf, vocab, bytes_of)
    for b in range(256):
        if bytes([b]) not in vocab and b not in NEVER_IN_UTF8:
            raise TokenizerFormatError(f"{hf.source}: model.vocab: byte {b} has no token; a byte-level BPE "
                                       "needs all 256 (all but the 13 that never occur in UTF-8)")
    return vocab, bytes_of


def _refuse_id_twice(hf: _HFDoc, vocab: Dict[bytes, int], bytes_of: Dict[str, bytes]) -> None:
    """Refuse the first id (in file order) that two tokens of ``vocab`` have (``bytes_of``:
    their texts in file order); one set of the ids says whether there is one."""
    if len(set(vocab.values())) == len(vocab):
        return
    owner: Dict[int, str] = {}
    for token, token_bytes in bytes_of.items():
        token_id = vocab[token_bytes]
        if token_id in owner:
            raise TokenizerFormatError(f"{hf.source}: model.vocab: tokens {owner[token_id]!r} and {token!r} both "
                                       f"have id {token_id}; expected one id per token")
        owner[token_id] = token


def _hf_merges(hf: _HFDoc, model: dict, vocab: Dict[bytes, int],
               bytes_of: Dict[str, bytes]) -> List[Tuple[bytes, bytes]]:
    """``model.merges`` (``"a b"`` strings or ``[a, b]`` pairs) as byte pairs whose parts and
    result are tokens of the vocabulary (``bytes_of``: the vocabulary's bytes by text, from
    :func:`_hf_vocab`).  A merge not made of two such tokens is refused by
    :func:`_check_merge`, which says what is wrong with it."""
    merges = hf.get(model, "merges", "model.merges", list, "a list of merges", [])
    out: List[Tuple[bytes, bytes]] = []
    for rank, merge in enumerate(merges):
        parts = merge.split(" ") if type(merge) is str else merge
        if type(parts) is list and len(parts) == 2 and type(parts[0]) is str and type(parts[1]) is str:
            left, right = bytes_of.get(parts[0]), bytes_of.get(parts[1])
            if left is not None and right is not None and left + right in vocab:
                out.append((left, right))
                continue
        _check_merge(hf, rank, merge, parts, vocab)
    return out


def _check_merge(hf: _HFDoc, rank: int, merge: Any, parts: Any, vocab: Dict[bytes, int]) -> NoReturn:
    """Refuse ``model.merges[rank]``, which is not two byte-level tokens of the vocabulary
    that join into one, in one line saying which part is wrong."""
    spelled = (parts if isinstance(parts, list) and len(parts) == 2
               and all(isinstance(p, str) and p for p in parts) else None)
    left, right = (None, None) if spelled is None else (_byte_level_bytes(p) for p in spelled)
    if spelled is None or left is None or right is None:
        hf.fail(f"model.merges[{rank}]", "two byte-level tokens ('a b' or [a, b])", merge)
    for part, text in ((left, spelled[0]), (right, spelled[1]), (left + right, spelled[0] + spelled[1])):
        if part not in vocab:
            raise TokenizerFormatError(f"{hf.source}: model.merges[{rank}] ({spelled[0]!r}, {spelled[1]!r}): "
                                       f"{text!r} is not in model.vocab; expected merges of vocabulary tokens "
                                       "into a vocabulary token")
    raise AssertionError(f"model.merges[{rank}] is a merge of vocabulary tokens")   # pragma: no cover


def _creation_order(merges: List[Tuple[bytes, bytes]]) -> Optional[List[bytes]]:
    """The tokens the merges make, when each merge joins tokens already made and makes a
    new one (GPT-2's order: the merge list *is* the BPE); else None."""
    made = {bytes([b]) for b in range(256)}
    order: List[bytes] = []
    for left, right in merges:
        joined = left + right
        if left not in made or right not in made or joined in made:
            return None
        made.add(joined)
        order.append(joined)
    return order


def _rank_order(hf: _HFDoc, merges: List[Tuple[bytes, bytes]], vocab: Dict[bytes, int]) -> Dict[bytes, int]:
    """Token ranks of a merge list not in creation order (Llama-3's, as transformers'
    ``TikTokenConverter`` writes: every split of every token, ordered by the rank of
    the token they make): the rank of a token is the first merge that makes it.

    HF's BPE (apply the adjacent pair of lowest merge index) is then tiktoken's BPE
    over these ranks (merge the adjacent pair whose join has the lowest rank) when the
    merges follow the ranks of what they make and list every split of a token into two
    vocabulary tokens; both are checked."""
    rank: Dict[bytes, int] = {}
    last = -1
    for index, (left, right) in enumerate(merges):
        joined = left + right
        r = rank.setdefault(joined, index)
        if r < last:
            raise TokenizerFormatError(
                f"{hf.source}: model.merges[{index}] makes {joined!r}, which an earlier merge already made, after "
                "merges of later tokens: the merges are neither in creation order (each merge joins tokens that "
                "earlier merges made) nor ordered by the tokens they make (Llama-3's order)")
        last = r
    listed = set(merges)
    for token in rank:
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in vocab and right in vocab and (left, right) not in listed:
                raise TokenizerFormatError(
                    f"{hf.source}: model.merges: the merges are not in creation order, and they do not list the "
                    f"split ({left!r}, {right!r}) of {token!r}: ube-stream reads such files by the ranks of the "
                    "tokens, which needs every split of a token into two vocabulary tokens listed")
    return rank


def _hf_added(hf: _HFDoc, n_tokens: int) -> Dict[str, Tuple[int, bool, bool]]:
    """``added_tokens`` as text -> (id, special, normalized) (the first entry of a text wins),
    ids bounded.  A non-special token with ``lstrip``, ``rstrip`` or ``single_word`` is
    refused (HF moves its match over the spaces around it; ube-stream cuts the text at
    the token only).  Special tokens are found by tiktoken's rules (``allowed_special``),
    whatever their flags."""
    added = hf.get(hf.doc, "added_tokens", "added_tokens", list, "a list of added tokens", [])
    out: Dict[str, Tuple[int, bool, bool]] = {}
    for k, entry in enumerate(added):
        field = f"added_tokens[{k}]"
        if not isinstance(entry, dict):
            hf.fail(field, 'an object {"id": ..., "content": ...}', entry)
        token_id = hf.get(entry, "id", f"{field}.id", int, "an integer id")
        content = hf.get(entry, "content", f"{field}.content", str, "the token's text")
        if not content:
            hf.fail(f"{field}.content", "a non-empty text", content)
        check_ids({repr(content): token_id}, n_tokens, hf.source, field)
        special = hf.get(entry, "special", f"{field}.special", bool, "true or false", False)
        normalized = hf.get(entry, "normalized", f"{field}.normalized", bool, "true or false", not special)
        for flag in ("lstrip", "rstrip", "single_word"):
            if hf.get(entry, flag, f"{field}.{flag}", bool, "true or false", False) and not special:
                hf.refuse(f"{field} ({content!r}) with {flag}=true",
                          "ube-stream cuts a non-special added token out of the text as written, without "
                          "the spaces HF's lstrip/rstrip take with it or the word test of single_word")
        out.setdefault(content, (token_id, special, normalized))
    return out


def _hf_extra_tokens(added: Mapping[str, Tuple[int, bool, bool]], aliases: Mapping[str, str],
                     id_map: List[int]) -> Tuple[Dict[str, int], List[Dict[str, Any]]]:
    """The tokens after the merged ones and the non-special added tokens; ``id_map`` (the
    model ids of the bytes and merged tokens) gets theirs.

    Returns ``({text: internal id}`` of the added tokens whose ids no BPE token has (the
    special tokens, one text per id, then ``aliases``, and the non-special ones), and the
    non-special ones as the tokenizer's ``added_tokens`` (internal ids)``)``.  A special
    token whose id a BPE token has is not recognised (as before); a non-special one is
    cut out of the text with that token's id."""
    internal_of = {model_id: k for k, model_id in enumerate(id_map)}
    by_id = sorted(added.items(), key=lambda kv: kv[1][0])
    after = sorted({token_id for _, (token_id, _, _) in by_id if token_id not in internal_of})
    n_tokens = len(id_map)
    internal_of.update({token_id: n_tokens + k for k, token_id in enumerate(after)})
    id_map.extend(after)
    extra: Dict[str, int] = {}
    named: set = set()
    added_tokens: List[Dict[str, Any]] = []
    for special_pass in (True, False):   # the special tokens name their ids first
        for content, (token_id, special, normalized) in by_id:
            if special != special_pass:
                continue
            internal = internal_of[token_id]
            if not special:
                added_tokens.append({"text": content, "id": internal, "normalized": normalized})
            if internal >= n_tokens and internal not in named:
                extra[content] = internal
                named.add(internal)
    extra = dict(sorted(extra.items(), key=lambda kv: kv[1]))
    for alias, name in aliases.items():
        if name in extra:
            extra[alias] = extra[name]
    return extra, [a for a in added_tokens if a["id"] < n_tokens or extra.get(a["text"]) == a["id"]]


def _load_hf_json(path: str) -> Any:
    try:
        text = read_bounded(path, what="HF tokenizer.json", error=TokenizerFormatError,
                            fix="pass a HF tokenizer.json").decode("utf-8")
    except FileNotFoundError:
        raise TokenizerFormatError(f"{path}: no such file; expected a HF tokenizer.json") from None
    except UnicodeDecodeError as exc:
        raise TokenizerFormatError(f"{path}: not UTF-8 text ({exc}); expected a HF tokenizer.json") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenizerFormatError(f"{path}: not a JSON file ({exc})") from None
    except RecursionError:
        raise TokenizerFormatError(f"{path}: JSON nested too deeply to be a tokenizer.json") from None


def tokenizer_from_hf(cls: Callable[..., T], path, doc: Any = None) -> T:
    """The HF ``tokenizer.json`` at ``path`` as a ``cls`` tokenizer; ``doc``: the file's
    JSON when the caller has parsed it already (:func:`~.core.as_tokenizer` reads a file
    once to tell its kind: parsing 1 MB of JSON again cost a command ~0.02 CPU s)."""
    path = os.fspath(path)
    if doc is None:
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        doc = _load_hf_json(path)
    hf = _HFDoc(doc, path)
    model = _check_model(hf)
    pattern = _hf_pattern(hf, hf.doc.get("pre_tokenizer"))
    table = hf.get(model, "vocab", "model.vocab", dict, "an object {token: id}")
    added = _hf_added(hf, len(table))
    normalization, aliases = _hf_normalization(hf, {t: a[0] for t, a in added.items() if a[1]})
    vocab, bytes_of = _hf_vocab(hf, model, {a[0] for a in added.values()})
    merges = _hf_merges(hf, model, vocab, bytes_of)
    pattern = _portable_cl100k(pattern, vocab)
    ignore_merges = hf.get(model, "ignore_merges", "model.ignore_merges", bool, "true or false", False)
    order = None if ignore_merges else _creation_order(merges)
    # a byte the vocabulary lacks (one never in UTF-8) gets an id after every id of the file
    next_free = max([*vocab.values(), *(a[0] for a in added.values())]) + 1
    id_map = []
    for b in range(256):
        id_map.append(vocab.get(bytes([b]), next_free))
        next_free += bytes([b]) not in vocab
    if order is not None:
        internal = {bytes([b]): b for b in range(256)}
        for token in order:
            internal[token] = len(internal)
        pairs = [(internal[left], internal[right]) for left, right in merges]
        id_map.extend(vocab[token] for token in order)
    else:   # Llama-3's merges: by the ranks of the tokens they make
        ranks = _rank_order(hf, merges, vocab)
        ranks.update({bytes([b]): -1 for b in range(256)})
        pairs = _merges_of(ranks, path)
        id_map.extend(vocab[token] for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1)
    extra, added_tokens = _hf_extra_tokens(added, aliases, id_map)
    try:
        tok = cls(substrate="utf8", merges=pairs, special_tokens=extra, pattern=pattern,
                  normalization=normalization, id_map=id_map, training={"source": {"hf": os.path.abspath(path)}},
                  added_tokens=added_tokens)
    except TokenizerFormatError as exc:
        raise TokenizerFormatError(f"{path}: {exc}") from None
    except ValueError as exc:   # the pattern does not compile
        raise TokenizerFormatError(f"{path}: pre_tokenizer: {exc}") from None
    tok.trust_pattern = False  # type: ignore[attr-defined]  # a regex read from a file: under the time budget
    return tok


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
    """The bytes of a file (a regular file of at most ``MAX_JSON_BYTES``), gunzipped
    when it starts with the gzip magic, never to more than ``MAX_JSON_BYTES`` (a
    gzip bomb named as a rank file is refused while it is inflated)."""
    import zlib

    path = os.fspath(path)
    data = read_bounded(path, what="rank file", error=TokenizerFormatError, fix="pass a tiktoken rank file")
    if data[:2] != b"\x1f\x8b":
        return data
    out, rest = bytearray(), data
    try:
        while rest[:2] == b"\x1f\x8b":   # every gzip member, each inflated at most to what is left
            member = zlib.decompressobj(wbits=31)
            out += member.decompress(rest, MAX_JSON_BYTES + 1 - len(out))
            if len(out) > MAX_JSON_BYTES or member.unconsumed_tail:
                raise TokenizerFormatError(f"{path}: inflates to more than {MAX_JSON_BYTES:,} bytes; not a "
                                           f"tiktoken rank file (the largest real ones are a few MB)")
            if not member.eof:
                raise TokenizerFormatError(f"{path}: a truncated gzip file; download it again")
            rest = member.unused_data
    except zlib.error as exc:
        raise TokenizerFormatError(f"{path}: a corrupt gzip file ({exc}); download it again") from None
    return bytes(out)


def parse_tiktoken_ranks(data: bytes, source: str) -> Dict[bytes, int]:
    """A ``.tiktoken`` file's bytes: one ``base64(token) rank`` per line; every rank
    used once and at most :data:`ID_SLACK` past the number of lines."""
    ranks: Dict[bytes, int] = {}
    where: Dict[int, int] = {}
    offset = 0
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                token, rank_text = line.split()
                if not rank_text.isdigit():
                    raise ValueError(rank_text)
                token_bytes, rank = base64.b64decode(token, validate=True), int(rank_text)
            except (ValueError, binascii.Error):
                raise TokenizerFormatError(
                    f"{source}: line {number} (byte offset {offset}) is not 'base64-token rank': "
                    f"{line[:60]!r}; a tiktoken rank file has one such line per token") from None
            if not token_bytes or token_bytes in ranks or rank in where:
                what = ("an empty token" if not token_bytes else f"token {token_bytes!r} again"
                        if token_bytes in ranks else f"rank {rank} again (line {where.get(rank)} has it)")
                raise TokenizerFormatError(f"{source}: line {number} (byte offset {offset}) holds {what}; "
                                           "expected each token and each rank once")
            ranks[token_bytes] = rank
            where[rank] = number
        offset += len(line) + 1
    limit = len(ranks) + ID_SLACK
    for rank, number in where.items():
        if rank >= limit:
            raise TokenizerFormatError(f"{source}: line {number}: rank {rank}; expected ranks below {limit} (the "
                                       f"file has {len(ranks)} tokens, and ranks may run at most {ID_SLACK} "
                                       "past that)")
    return ranks


def load_tiktoken_ranks(path) -> Dict[bytes, int]:
    """A ``.tiktoken`` file (plain or gzipped): one ``base64(token) rank`` per line."""
    return parse_tiktoken_ranks(read_maybe_gzip(path), os.fspath(path))


def _merges_of(ranks: Mapping[bytes, int], source: Optional[str] = None) -> List[Tuple[int, int]]:
    """The merge list of a rank vocabulary (multi-byte tokens in rank order get
    internal ids 256, 257, ...): the ``_ranks`` kernel runs, for every token, the
    BPE of the ranks below it, as tiktoken's encoder would."""
    tokens = [token for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1]
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tokens], out=offsets[1:])
    err = err_buffer()
    status, merges = _ranks.merges_from_ranks(b"".join(tokens), offsets, err)
    try:
        check_status(status, err, what="converting ranks", data=tokens, ids=[ranks[t] for t in tokens])
    except UbeError as exc:
        if source is None:
            raise
        raise TokenizerFormatError(f"{source}: {exc}") from None
    assert merges is not None
    return [(int(a), int(b)) for a, b in merges.tolist()]


def tokenizer_from_tiktoken(cls: Callable[..., T], ranks, pattern: str, special_tokens: Mapping[str, int], *,
                            source: Optional[str] = None) -> T:
    source = os.path.abspath(source) if source else None
    if isinstance(ranks, (str, os.PathLike)):
        source = os.path.abspath(os.fspath(ranks))
        ranks = load_tiktoken_ranks(ranks)
    where = source or "the ranks"
    if not isinstance(ranks, Mapping):
        raise TokenizerFormatError(f"{where}: expected {{token bytes: rank}}, got {type(ranks).__name__}")
    if not all(isinstance(k, (bytes, bytearray)) for k in ranks):
        raise TokenizerFormatError(f"{where}: expected bytes tokens, got {next(type(k).__name__ for k in ranks)}")
    check_ids({repr(bytes(k)): v for k, v in ranks.items()}, len(ranks), where, "ranks")
    ranks = {bytes(k): int(v) for k, v in ranks.items()}
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerFormatError(f"{where}: two tokens have the same rank; expected each rank once")
    id_map: List[int] = []
    for b in range(256):
        token = bytes([b])
        if token not in ranks:
            raise TokenizerFormatError(f"{where}: byte {b} has no rank; a byte-level BPE needs all 256")
        id_map.append(ranks[token])
    check_ids({repr(t): i for t, i in special_tokens.items()}, len(ranks), where, "special_tokens")
    merges = _merges_of(ranks, source)
    id_map.extend(rank for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1)
    taken = set(ranks.values())
    n_internal = len(id_map)
    internal: Dict[int, int] = {}           # model id -> internal id of its special token
    specials: Dict[str, int] = {}           # text -> internal id; a later text on an id is an alias
    for text, sid in sorted(special_tokens.items(), key=lambda kv: kv[1]):
        if not isinstance(text, str) or not text:
            raise TokenizerFormatError(f"{where}: special token {text!r}: expected a non-empty string")
        if sid not in internal:   # tiktoken's o200k_harmony: several names on one id (the first is its name)
            if sid in taken:
                raise TokenizerFormatError(f"{where}: special token {text!r} has id {sid}, which a token of the "
                                           "ranks already has; give it an unused id")
            internal[sid] = n_internal + len(internal)
            id_map.append(sid)
        specials[text] = internal[sid]
    training: Dict[str, Any] = {"source": {"tiktoken": source} if source else "tiktoken"}
    tok = cls(substrate="utf8", merges=merges, special_tokens=specials, pattern=pattern,
              id_map=id_map, training=training)
    from ..pretokenizer import PATTERNS

    if pattern not in PATTERNS:
        tok.trust_pattern = False  # type: ignore[attr-defined]  # a regex given with a file: under the time budget
    return tok
