"""The Unicode round-trip audit behind :func:`ube_stream.verify_unicode`.

Item sets (each a list of strings, built deterministically in any process):

``scalar``        every Unicode scalar value (U+0000..U+10FFFF minus the
                  surrogates: 1,112,064), in code point order
``nfc`` ... ``nfkd``  ``unicodedata.normalize(form, c)`` of every scalar value
                  ``c``, where it differs from ``c``
``emoji``         every key of ``emoji.EMOJI_DATA`` (ZWJ sequences, flags,
                  skin tones, keycaps)
``mixed``         every ordered pair and triple of characters picked from
                  many scripts and every UTF-8 / UTF-16 length (alphabet
                  switches at every position), plus mixed-script sentences
``audit``         the bundled ``data/unicode_audit.jsonl.zst`` (Unicode and
                  CLDR test files, emoji files): ``text`` and, where present,
                  ``nfc``, ``nfd``, ``nfkc``, ``nfkd``

Each set is checked by each substrate and, with a tokenizer, by ``encode ->
decode``, two ways:

``alone``  every item as its own text: its base symbols (``route_batch``) must
           equal what Python's codecs give, and decoding them alone must give
           the item back; with a tokenizer, ``encode_utf8_batch`` with one
           document per item, decoded with a special token between documents
           (a special token flushes both buffers, so each item decodes alone)
``runs``   items joined into blocks of about ``RUN_CHARS`` characters
           (consecutive code points for ``scalar``) through the public
           ``encode_symbols`` / ``decode_symbols`` (or ``Tokenizer.encode`` /
           ``decode``)
"""
from __future__ import annotations

import functools
import io
import json
import os
import unicodedata
from typing import Iterable, List, Literal, Optional, Tuple

import numpy as np

from .. import _route
from .. import substrate as _substrate  # looked up at call time (tests swap in broken twins)
from ..errors import check_status, err_buffer
from ..substrate import SUBSTRATES, substrate_code
from ..tokenizer import as_tokenizer
from .report import Mismatch, VerifyReport, default_workers, run_tasks

ITEM_SETS = ("scalar", "nfc", "nfd", "nfkc", "nfkd", "emoji", "mixed", "audit")
NUM_SCALAR_VALUES = 0x110000 - 0x800
RUN_CHARS = 4096
AUDIT_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "unicode_audit.jsonl.zst")
AUDIT_FIELDS = ("text", "nfc", "nfd", "nfkc", "nfkd")

# one character of many scripts and of every UTF-8 length (1..4) / UTF-16 length (2, 4),
# with the edges of the UBE alphabets (U+07FF is the last 2-byte one, U+0800 the first 3-byte one)
MIXED_CHARS = ("a", "Z", "0", " ", "\n", "\t", "'", "\x00", "\x7f", "\x80", "é", "ß", "Ж", "Ω", "א", "ع",
               "\u0301", "\u07ff", "\u0800", "क", "ก", "中", "한", "ア", "\u200d", "\ufe0f", "\ufeff",
               "\ufffd", "\uffff", "\U00010000", "𝕏", "😀", "𠀀", "\U000e0041", "\U0010ffff")
MIXED_WORDS = ("GPU", "性能", "тест", "اختبار", "परीक्षण", "テスト", "시험", "ทดสอบ", "δοκιμή", "בדיקה",
               "ტესტი", "ሙከራ", "ᏣᎳᎩ", "𝕏𝕐", "😀👩‍💻🇫🇷", "e\u0301", "1️⃣", "ﷺ", "ǅ", "'s", "  ", "\r\n")


@functools.lru_cache(maxsize=1)
def scalar_values() -> Tuple[str, ...]:
    """Every Unicode scalar value, as one-character strings in code point order."""
    chars = tuple(map(chr, range(0xD800))) + tuple(map(chr, range(0xE000, 0x110000)))
    assert len(chars) == NUM_SCALAR_VALUES
    return chars


@functools.lru_cache(maxsize=4)
def normalized_forms(form: "Literal['NFC', 'NFD', 'NFKC', 'NFKD']") -> Tuple[str, ...]:
    """``unicodedata.normalize(form, c)`` of every scalar value where it is not ``c``."""
    normalize = unicodedata.normalize
    is_normalized = unicodedata.is_normalized
    return tuple(normalize(form, c) for c in scalar_values() if not is_normalized(form, c))


def emoji_sequences() -> Tuple[str, ...]:
    import emoji

    return tuple(sorted(emoji.EMOJI_DATA))


def mixed_strings() -> Tuple[str, ...]:
    chars = MIXED_CHARS
    items = [a + b for a in chars for b in chars]
    items += [a + b + c for a in chars for b in chars for c in chars]
    rng = np.random.default_rng(0)
    words = MIXED_WORDS
    for n in range(2, 12):
        for _ in range(60):
            picks = rng.integers(0, len(words), size=n)
            seps = rng.integers(0, 3, size=n)
            items.append("".join(words[w] + ("", " ", "\n")[s] for w, s in zip(picks.tolist(), seps.tolist())))
    return tuple(items)


@functools.lru_cache(maxsize=1)
def audit_strings() -> Tuple[str, ...]:
    import zstandard

    items: List[str] = []
    with open(AUDIT_FILE, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        for line in reader:
            row = json.loads(line)
            items.extend(row[k] for k in AUDIT_FIELDS if isinstance(row.get(k), str))
    return tuple(items)


def items_of(name: str) -> Tuple[str, ...]:
    if name == "scalar":
        return scalar_values()
    if name in ("nfc", "nfd", "nfkc", "nfkd"):
        return normalized_forms(name.upper())
    if name == "emoji":
        return emoji_sequences()
    if name == "mixed":
        return mixed_strings()
    if name == "audit":
        return audit_strings()
    raise ValueError(f"unknown item set {name!r}; expected one of {ITEM_SETS}")


def runs_of(items: Tuple[str, ...], run_chars: int = RUN_CHARS) -> List[Tuple[int, str]]:
    """``(first item index, text)`` of blocks of consecutive items of about ``run_chars`` characters."""
    runs, start, size = [], 0, 0
    for i, item in enumerate(items):
        size += len(item)
        if size >= run_chars:
            runs.append((start, "".join(items[start:i + 1])))
            start, size = i + 1, 0
    if start < len(items):
        runs.append((start, "".join(items[start:])))
    return runs


# --------------------------------------------------------------------------- expected symbols (Python codecs)

def expected_symbols(text: str, substrate: str) -> Tuple[np.ndarray, np.ndarray]:
    """Base ids of ``text`` from Python's codecs, and the number of ids of each character."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    utf8_len = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    utf16_len = np.where(points >= 0x10000, 4, 2)
    if substrate == "utf8":
        return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.uint16), utf8_len
    utf16 = np.frombuffer(text.encode("utf-16-le"), np.uint8).astype(np.uint16)
    if substrate == "utf16":
        return utf16, utf16_len
    low = points < 0x800
    lengths = np.where(low, utf8_len, utf16_len)
    out = np.empty(int(lengths.sum()), dtype=np.uint16)
    low_symbol = np.repeat(low, lengths)
    out[low_symbol] = np.frombuffer(text.encode("utf-8"), np.uint8)[np.repeat(low, utf8_len)]
    out[~low_symbol] = utf16[np.repeat(~low, utf16_len)] + 256
    return out, lengths


def _utf8_batch(items) -> Tuple[np.ndarray, np.ndarray]:
    encoded = [item.encode("utf-8") for item in items]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), offsets


# --------------------------------------------------------------------------- checks

def check_substrate(name: str, items: Tuple[str, ...], substrate: str, report: VerifyReport) -> None:
    """``alone`` and ``runs`` checks of one item set through one substrate's symbols."""

    code = substrate_code(substrate)
    category = f"{name}/alone/{substrate}"
    data, offsets = _utf8_batch(items)
    err = err_buffer()
    status, symbols, symbol_offsets = _route.route_batch(data, offsets, code, err)
    check_status(status, err, what="routing", offsets=offsets)
    assert symbols is not None and symbol_offsets is not None  # STATUS_OK carries the results
    expected, char_lengths = expected_symbols("".join(items), substrate)
    item_chars = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(item) for item in items], out=item_chars[1:])
    char_ends = np.concatenate(([0], np.cumsum(char_lengths)))
    expected_offsets = char_ends[item_chars]
    if not (np.array_equal(symbol_offsets, expected_offsets) and np.array_equal(symbols, expected)):
        bad = _first_bad_item(symbols, symbol_offsets, expected, expected_offsets)
        a, b = int(symbol_offsets[bad]), int(symbol_offsets[bad + 1])
        ea, eb = int(expected_offsets[bad]), int(expected_offsets[bad + 1])
        report.fail(Mismatch(category, name, bad, f"encode_symbols gives {symbols[a:b].tolist()[:16]}, Python's "
                             f"codecs give {expected[ea:eb].tolist()[:16]}", expected=repr(items[bad]),
                             found=repr(items[bad])))
    decode = _route.decode_text
    bounds = symbol_offsets.tolist()
    failures = 0
    for i, item in enumerate(items):
        _, text = decode(symbols[bounds[i]:bounds[i + 1]], code)  # text None: a decode error
        if text != item:
            failures += 1
            if failures <= 3:
                report.fail(Mismatch.of_texts(category, name, i, item, "<decode error>" if text is None else text,
                                              message="decode_symbols of the item alone differs"))
    if failures > 3:
        report.failed[category] += failures - 3
    report.count(category, len(items))

    category = f"{name}/runs/{substrate}"
    runs = runs_of(items, RUN_CHARS)
    for first, run in runs:
        ids = _substrate.encode_symbols(run, substrate)
        expected_ids, _ = expected_symbols(run, substrate)
        if not np.array_equal(ids, expected_ids):
            report.fail(Mismatch(category, name, f"items from {first}", "encode_symbols of the run differs from "
                                 "Python's codecs", expected=repr(run[:32]), found=repr(run[:32])))
            continue
        try:
            text = _substrate.decode_symbols(ids, substrate)
        except ValueError as exc:
            text = f"<{type(exc).__name__}: {exc}>"
        if text != run:
            report.fail(Mismatch.of_texts(category, name, f"items from {first}", run, text,
                                          message="decode_symbols(encode_symbols(run)) differs"))
    report.count(category, len(runs))


def _first_bad_item(symbols, symbol_offsets, expected, expected_offsets) -> int:
    differs = np.flatnonzero(symbol_offsets != expected_offsets)
    if differs.size:
        return max(0, int(differs[0]) - 1)
    n = min(symbols.size, expected.size)
    position = np.flatnonzero(symbols[:n] != expected[:n])
    at = int(position[0]) if position.size else n
    return int(np.searchsorted(symbol_offsets, at, side="right")) - 1


def check_tokenizer(name: str, items: Tuple[str, ...], tokenizer, report: VerifyReport,
                    batch_items: int = 4096) -> None:
    """``decode(encode(item)) == item`` for each item alone and for runs of items."""
    category = f"{name}/alone/tokenizer"
    separator: Optional[Tuple[str, int]] = next(iter(tokenizer.special_tokens.items()), None)
    failures = 0
    for start in range(0, len(items), batch_items):
        block = items[start:start + batch_items]
        data, offsets = _utf8_batch(block)
        ids, token_offsets = tokenizer.encode_utf8_batch(data, offsets)
        texts = _decode_each(tokenizer, ids, token_offsets, block, separator)
        for i, (item, text) in enumerate(zip(block, texts)):
            if text != item:
                failures += 1
                if failures <= 3:
                    report.fail(Mismatch.of_texts(category, name, start + i, item, text,
                                                  message="decode(encode(item)) differs"))
    if failures > 3:
        report.failed[category] += failures - 3
    report.count(category, len(items))

    category = f"{name}/runs/tokenizer"
    runs = runs_of(items, RUN_CHARS)
    encoded = tokenizer.encode_ordinary_batch([run for _, run in runs])
    for (first, run), ids in zip(runs, encoded):
        text = _decode(tokenizer, ids)
        if text != run:
            report.fail(Mismatch.of_texts(category, name, f"items from {first}", run, text,
                                          message="decode(encode(run)) differs"))
    report.count(category, len(runs))


def _decode(tokenizer, ids) -> str:
    try:
        return tokenizer.decode(ids)
    except ValueError as exc:  # SymbolDecodeError, ids outside the vocabulary
        return f"<{type(exc).__name__}: {exc}>"


def _decode_each(tokenizer, ids: np.ndarray, token_offsets: np.ndarray, block, separator) -> List[str]:
    """Decode every document of a batch on its own; with a special token, in one call
    (a special token between documents flushes both buffers)."""
    bounds = token_offsets.tolist()
    if separator is not None and not any(separator[0] in item for item in block):
        text_sep, id_sep = separator
        joined = np.insert(np.asarray(ids, dtype=np.uint32), token_offsets[1:], np.uint32(id_sep))
        texts = _decode(tokenizer, joined).split(text_sep)
        if len(texts) == len(block) + 1 and texts[-1] == "":
            return texts[:-1]
    return [_decode(tokenizer, ids[bounds[i]:bounds[i + 1]]) for i in range(len(block))]


def run_task(task: Tuple[str, str], tokenizer=None) -> VerifyReport:
    """One ``(item set, checker)`` task: checker is a substrate name or ``"tokenizer"``."""
    name, checker = task
    report = VerifyReport("unicode")
    items = items_of(name)
    if checker == "tokenizer":
        check_tokenizer(name, items, tokenizer, report)
    else:
        check_substrate(name, items, checker, report)
    return report


# --------------------------------------------------------------------------- the check

def verify_unicode(tokenizer=None, *, substrates: Iterable[str] = SUBSTRATES,
                   item_sets: Optional[Iterable[str]] = None, workers: Optional[int] = None,
                   show_progress: bool = True, max_examples: int = 10) -> VerifyReport:
    """Round-trip every Unicode scalar value (1,112,064) alone and in runs of
    consecutive code points, their NFC/NFD/NFKC/NFKD forms, every ``emoji``
    package sequence, mixed-script strings and the bundled audit strings,
    through each substrate's symbols (``encode_symbols`` / ``decode_symbols``,
    compared with Python's codecs) and, with a ``tokenizer`` (object or file),
    through ``encode -> decode``.  ``item_sets`` picks a subset of
    ``("scalar", "nfc", "nfd", "nfkc", "nfkd", "emoji", "mixed", "audit")``.
    """

    substrates = list(substrates)
    for name in substrates:
        substrate_code(name)
    names = list(item_sets) if item_sets is not None else list(ITEM_SETS)
    for name in names:
        if name not in ITEM_SETS:
            raise ValueError(f"unknown item set {name!r}; expected some of {', '.join(ITEM_SETS)}")
    tok = None if tokenizer is None else as_tokenizer(tokenizer)
    checkers = substrates + (["tokenizer"] if tok is not None else [])
    if not checkers:
        raise ValueError("nothing to check: pass at least one substrate or a tokenizer")
    tasks = [(name, checker) for name in names for checker in checkers]
    # the scalar set and the tokenizer checks are the long ones: weigh them for the bar
    weights = [(20 if name == "scalar" else 2) * (3 if checker == "tokenizer" else 1) for name, checker in tasks]
    workers = default_workers(workers, len(tasks))
    results = run_tasks(run_task, tasks, (tok,), workers=workers, desc="verify unicode",
                        show_progress=show_progress, weights=weights, unit="")
    report = VerifyReport("unicode", max_examples=max_examples)
    for result in results:
        report.merge(result)
    if tok is not None:
        report.note(f"tokenizer {tok.fingerprint} ({tok.substrate}, vocab {tok.vocab_size})")
    return report
