"""Slow, obvious pure-Python twins of the Cython kernels.

Nothing here is fast and nothing here is used on a hot path: these functions
exist so that parity tests can compare each kernel with code a reader can
check by eye.  They lean on Python's own codecs and on the ``regex`` module.

Routing (``route_symbols``), worked example::

    >>> route_symbols("GPU性能", "ube")
    [71, 80, 85, 295, 352, 509, 384]

``G P U`` are ASCII (UTF-8, ids = byte values); 性 (U+6027) and 能 (U+80FD)
take 3 bytes in UTF-8, so they are written as UTF-16LE bytes ``27 60 FD 80``
shifted by 256.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

import regex

SUBSTRATES = ("ube", "utf8", "utf16")
UTF16_BASE = 256  # id of UTF-16LE byte b under "ube" is UTF16_BASE + b

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


# --------------------------------------------------------------------------- routing

def route_symbols(text: str, substrate: str = "ube") -> List[int]:
    """Base symbol ids of ``text``: one id per byte of the routed encoding."""
    if substrate not in SUBSTRATES:
        raise ValueError(f"unknown substrate {substrate!r}; expected one of {SUBSTRATES}")
    ids: List[int] = []
    for char in text:
        utf8 = char.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate
        if substrate == "utf8":
            ids.extend(utf8)
        elif substrate == "utf16":
            ids.extend(char.encode("utf-16-le"))
        elif len(utf8) <= 2:
            ids.extend(utf8)
        else:
            ids.extend(UTF16_BASE + b for b in char.encode("utf-16-le"))
    return ids


def char_starts_reference(text: str, substrate: str = "ube") -> List[int]:
    """One flag per symbol of ``route_symbols(text, substrate)``: 1 where a
    character starts (each character routed on its own)."""
    flags: List[int] = []
    for char in text:
        n = len(route_symbols(char, substrate))
        flags.extend([1] + [0] * (n - 1))
    return flags


def decode_symbols(ids: Iterable[int], substrate: str = "ube", errors: str = "strict") -> str:
    """Inverse of :func:`route_symbols` with the dual-buffer rule for ``ube``.

    Under ``ube`` consecutive ids of one alphabet fill one buffer; an id of the
    other alphabet flushes it (decoding it with Python's UTF-8 or UTF-16LE
    codec) and starts the other buffer.  ``errors`` is passed to the codec.
    Raises ``UnicodeDecodeError`` whose ``start`` is relative to the buffer;
    :func:`decode_symbols_offset` gives the absolute symbol offset.
    """
    text, _ = _decode(list(ids), substrate, errors)
    return text


def decode_symbols_offset(ids: Sequence[int], substrate: str = "ube") -> int:
    """Offset (in symbols) of the first invalid byte sequence, or -1 if valid."""
    _, offset = _decode(list(ids), substrate, "report")
    return offset


def _decode(ids: List[int], substrate: str, errors: str):
    limit = 512 if substrate == "ube" else 256
    for i, sym in enumerate(ids):
        if not 0 <= sym < limit:
            raise ValueError(f"symbol id {sym} at offset {i} is outside 0..{limit - 1}")
    codec_of = {"utf8": "utf-8", "utf16": "utf-16-le"}
    # split into runs of one alphabet: (start offset, codec, bytes)
    runs = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or (substrate == "ube" and (ids[i] >= 256) != (ids[start] >= 256)):
            if i > start:
                if substrate == "ube":
                    codec = "utf-16-le" if ids[start] >= 256 else "utf-8"
                else:
                    codec = codec_of[substrate]
                runs.append((start, codec, bytes(s & 0xFF for s in ids[start:i])))
            start = i
    parts = []
    for start, codec, data in runs:
        if errors == "report":
            try:
                data.decode(codec)
            except UnicodeDecodeError as exc:
                return "", start + exc.start
            continue
        parts.append(data.decode(codec, errors))
    return "".join(parts), -1


def symbol_string(ids: Iterable[int]) -> str:
    """Human/export form: GPT-2 ``bytes_to_unicode`` for ids < 256,
    ``chr(0xE100 + b)`` for id ``256 + b``."""
    table = bytes_to_unicode()
    return "".join(table[i] if i < 256 else chr(0xE100 + i - 256) for i in ids)


def bytes_to_unicode() -> dict:
    """GPT-2's reversible map from bytes to printable characters (verbatim algorithm)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# --------------------------------------------------------------------- pre-tokenization

OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
_LETTER = regex.compile(r"\p{L}")
_NUMBER = regex.compile(r"\p{N}")
_SPACE = regex.compile(r"\s")
_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def char_class(char: str) -> int:
    """Class of one character as the ``regex`` module sees the GPT-2 pattern's classes."""
    if _LETTER.match(char):
        return LETTER
    if _NUMBER.match(char):
        return NUMBER
    if _SPACE.match(char):
        return SPACE
    return OTHER


def pretokenize_gpt2(text: str) -> List[str]:
    """The GPT-2 pattern written out as a state machine, one rule per alternative.

    1. ``'s|'t|'re|'ve|'m|'ll|'d`` (ASCII apostrophe, lower case);
    2. `` ?\\p{L}+`` / `` ?\\p{N}+`` / `` ?[^\\s\\p{L}\\p{N}]+``: an optional
       U+0020 then a maximal run of one class;
    3. ``\\s+(?!\\S)``: a whitespace run, less its last character when a
       non-space follows (that character starts the next chunk);
    4. ``\\s+``: a single whitespace character followed by a non-space.
    """
    chunks: List[str] = []
    classes = [char_class(c) for c in text]
    i, n = 0, len(text)
    while i < n:
        if text[i] == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                chunks.append(text[i:i + 1 + len(suffix)])
                i += 1 + len(suffix)
                continue
        start = i
        if text[i] == " " and i + 1 < n and classes[i + 1] != SPACE:
            i += 1  # the optional leading space of rule 2
        cls = classes[i]
        end = i
        while end < n and classes[end] == cls:
            end += 1
        if cls == SPACE and end < n and end - start >= 2:
            end -= 1  # rule 3: leave the last space for the next chunk
        chunks.append(text[start:end])
        i = end
    return chunks


def pretokenize(text: str, pattern: str = GPT2_PATTERN) -> List[str]:
    """Chunks of ``text`` by ``regex.findall`` (the independent truth)."""
    return regex.findall(pattern, text)


# ------------------------------------------------------------ SCRIPT pre-tokenization
# Land & Arnett's rules as their code states them (group the text into runs of one
# (script, supercategory), then join runs), with each character's class asked of the
# regex module one property at a time: the twin of _pretok_script.pxd.

#: the paper's scripts written with spaces: their letters take one leading space
SCRIPTS_WITH_SPACES = ("Latin", "Arabic", "Devanagari", "Hangul", "Ethiopic", "Cyrillic", "Greek", "Hebrew",
                       "Bengali", "Syriac", "Oriya", "Tamil", "Telugu", "Gurmukhi", "Gujarati", "Sinhala",
                       "Malayalam", "Armenian", "Kannada", "Georgian")
_SCRIPT_OVERRIDES = {"\n": ("Common", "Z"), "\t": ("Common", "Z"), "\u30fc": ("Inherited", "LM"),
                     "\uff70": ("Inherited", "LM"), "\u0640": ("Arabic", "LM")}
_SUPERCATEGORIES = (("LM", regex.compile(r"[\p{L}\p{M}]")), ("N", regex.compile(r"\p{N}")),
                    ("PS", regex.compile(r"[\p{P}\p{S}]")), ("Z", regex.compile(r"\p{Z}")),
                    ("C", regex.compile(r"\p{C}")))


def _script_matchers() -> List[Tuple[str, Any]]:
    from regex import _regex_core

    values = _regex_core.PROPERTY_NAMES[_regex_core.PROPERTIES["SCRIPT"][0]][1]
    return [(str(name), regex.compile(rf"\p{{Script={name}}}")) for name in values.values()]


_SCRIPTS: List[Tuple[str, Any]] = []


@functools.lru_cache(maxsize=None)
def script_char_class(char: str) -> Tuple[str, str]:
    """``(script, supercategory)`` of one character: the Script property value the
    ``regex`` module matches (upper case, its canonical name: ``"LATIN"``,
    ``"HANI"``), and ``LM`` / ``N`` / ``PS`` / ``Z`` / ``C``; the paper's
    overrides first (``\\n`` and ``\\t`` are Common whitespace...)."""
    if char in _SCRIPT_OVERRIDES:
        script, supercategory = _SCRIPT_OVERRIDES[char]
        return _canonical_script(script), supercategory
    if not _SCRIPTS:
        _SCRIPTS.extend(_script_matchers())
    script = next(name for name, matcher in _SCRIPTS if matcher.match(char))
    supercategory = next(name for name, matcher in _SUPERCATEGORIES if matcher.match(char))
    return script, supercategory


def _canonical_script(name: str) -> str:
    """The regex module's canonical name of a Script value given by any name (``"Han"`` -> ``"HANI"``)."""
    from regex import _regex_core

    pid, by_name = _regex_core.PROPERTIES["SCRIPT"]
    return str(_regex_core.PROPERTY_NAMES[pid][1][by_name[name.upper()]])


def pretokenize_script(text: str, classify=script_char_class) -> List[str]:
    """SCRIPT chunks of ``text``, the paper's way (``chunk_script_encoding``).

    1. Group the characters into maximal runs of one class (``classify``:
       ``(script, supercategory)``).
    2. Walk the groups: a chunk starts with a group; if that group is exactly
       one U+0020 and the next group's class takes a space (letters of
       :data:`SCRIPTS_WITH_SPACES`, Common punctuation/symbols), the next group
       joins and its class becomes the chunk's; then each following group joins
       while its script is Inherited, or its supercategory is the chunk's and
       its script is the chunk's (or the pair is Han and Hiragana).

        >>> pretokenize_script("Hello  world, 42 日本です")
        ['Hello', '  ', 'world', ',', ' ', '42', ' ', '日本です']
    """
    han, hiragana, inherited, common = (_canonical_script(n) for n in ("Han", "Hiragana", "Inherited", "Common"))
    with_spaces = {_canonical_script(n) for n in SCRIPTS_WITH_SPACES}
    groups: List[Tuple[Tuple[str, str], str]] = []
    for char in text:
        cls = classify(char)
        if groups and groups[-1][0] == cls:
            groups[-1] = (cls, groups[-1][1] + char)
        else:
            groups.append((cls, char))

    def takes_space(cls):
        return (cls[1] == "LM" and cls[0] in with_spaces) or cls == (common, "PS")

    def joins(cur, nxt):
        if nxt[0] == inherited:
            return True
        return cur[1] == nxt[1] and (cur[0] == nxt[0] or {cur[0], nxt[0]} == {han, hiragana})

    chunks: List[str] = []
    i = 0
    while i < len(groups):
        cur, chunk = groups[i]
        i += 1
        if chunk == " " and i < len(groups) and takes_space(groups[i][0]):
            cur, chunk = groups[i][0], chunk + groups[i][1]
            i += 1
        while i < len(groups) and joins(cur, groups[i][0]):
            chunk += groups[i][1]
            i += 1
        chunks.append(chunk)
    return chunks


# ------------------------------------------------------------ SuperBPE spans (rules v1, liu)

_SPAN_LETTER = regex.compile(r"[\p{L}\p{M}]")
_SPAN_GLUE = (" ", "'", "\u2019")
_SPAN_NUMBER = regex.compile(r"\p{N}")


def superword_joinable_reference(chunk: str, rule: str = "v1") -> bool:
    """A chunk joins its neighbours in a span iff, by rule ``"v1"``, it holds a
    letter or mark and every other character is U+0020 or an apostrophe (U+0027,
    U+2019); by rule ``"liu"``, iff it holds no number (``\\p{N}``)."""
    if rule == "liu":
        return _SPAN_NUMBER.search(chunk) is None
    letters = [bool(_SPAN_LETTER.match(c)) for c in chunk]
    return any(letters) and all(is_letter or c in _SPAN_GLUE for c, is_letter in zip(chunk, letters))


def superword_span_ends_reference(chunks: Sequence[str], rule: str = "v1") -> List[int]:
    r"""Exclusive end chunk index of each span: a maximal run of joinable chunks
    is one span, every other chunk a span of its own; no span goes on past a
    chunk that ends with a line feed, nor from a chunk ending with ":" into one
    starting with a space.

        >>> superword_span_ends_reference(["Hello", " world", ",", " it", "'s", "\n"])
        [2, 3, 5, 6]
        >>> superword_span_ends_reference(["Note", ":", " it", " 4", ".", "\n", "Bye"], "liu")
        [2, 3, 4, 6, 7]
    """
    ends: List[int] = []
    for c, chunk in enumerate(chunks):
        cut = c > 0 and (chunks[c - 1].endswith("\n") or (chunks[c - 1].endswith(":") and chunk.startswith(" ")))
        if ends and ends[-1] == c and not cut and superword_joinable_reference(chunk, rule) \
                and superword_joinable_reference(chunks[c - 1], rule):
            ends[-1] = c + 1
        else:
            ends.append(c + 1)
    return ends


# ------------------------------------------------------------------ BPE merge training

def _threshold(min_frequency: int) -> int:
    # a pair must occur at least once, whatever min_frequency says
    return max(1, int(min_frequency))


def train_bpe_reference(word_counts: dict | list, *, n_base: int, max_vocab: int,
                        min_frequency: int = 2,
                        max_token_length: int | None = None,
                        char_starts: dict | list | None = None, char_rule: str = "pieces",
                        chunk_starts: dict | list | None = None, max_words: int | None = None,
                        base_expansions: Sequence[tuple] = ()) -> List[tuple]:
    """The obvious quadratic BPE trainer: recount every pair at every step.

    ``word_counts`` maps a word (a tuple of base symbol ids, one unique
    pre-tokenized chunk) to how often it occurs.  Returns the merges in rank
    order as ``(left_id, right_id, result_id)``.  The rules (docs/DESIGN.md,
    Training semantics):

    * pairs are counted at every adjacent position of a word, weighted by the
      word's count (``aaa`` holds ``(a, a)`` twice);
    * the next merge is the pair with the highest count, ties broken by the
      smallest ``(left_id, right_id)``;
    * a merge rewrites each word left to right without overlap;
    * a merge whose result (its expansion to base symbols) already has an id
      reuses that id; otherwise the new token takes the next id (base symbols
      first, then new tokens in order of creation);
    * training stops when the vocabulary (base + new tokens) reaches
      ``max_vocab`` or when no pair reaches ``min_frequency``;
    * a pair whose merged token would be longer than ``max_token_length``
      base symbols is never a candidate;
    * character integrity (``char_starts`` maps each word to its flags, 1 where
      a character starts, as :func:`char_starts_reference` gives): a pair
      occurrence counts and merges only when both tokens are whole-character
      sequences or both lie inside one character (``char_rule="prefix"``,
      SCRIPT's rule: and then the left one starts the character); others are
      skipped (left as they are) by counting and rewriting alike;
    * SuperBPE stage 2: ``base_expansions`` holds the atoms of the alphabet ids
      ``n_base - len(base_expansions) .. n_base - 1`` (tokens made by stage 1;
      lower ids are atoms); ``chunk_starts`` (per word, 1 where a chunk starts)
      with ``max_words`` W: an occurrence counts and merges only when fewer
      than W chunk starts lie strictly inside the token it would make.

    Worked example (minbpe's golden test, ``a b c d`` = 97 98 99 100)::

        >>> word = tuple(b"aaabdaaabac")
        >>> train_bpe_reference({word: 1}, n_base=256, max_vocab=259)
        [(97, 97, 256), (97, 98, 257), (256, 257, 258)]
    """
    threshold = _threshold(min_frequency)
    if (chunk_starts is None) != (max_words is None):
        raise ValueError("chunk_starts and max_words go together")
    words: List[List[Any]] = []  # [tokens, count, start of each token in word symbols, flags, chunk flags]
    # a list of (word, count) (flags: lists by index) lets equal words with other flags stay apart
    items = list(word_counts.items()) if isinstance(word_counts, dict) else list(word_counts)
    for index, (word, count) in enumerate(items):
        word_chars = None if char_starts is None else (
            char_starts[word] if isinstance(char_starts, dict) else char_starts[index])
        word_chunks = None if chunk_starts is None else (
            chunk_starts[word] if isinstance(chunk_starts, dict) else chunk_starts[index])
        if count < 1:
            raise ValueError(f"word {word!r} has count {count}; counts must be >= 1 "
                             "(drop words that do not occur)")
        if any(not 0 <= s < n_base for s in word):
            raise ValueError(f"word {word!r} holds a symbol outside 0..{n_base - 1}")
        if word_chars is not None and len(word_chars) != len(word):
            raise ValueError(f"word {word!r} has {len(word_chars)} character-start flags")
        # flags + a final 1 (end of word)
        flags = list(word_chars) + [1] if word_chars is not None else None
        chunks = list(word_chunks) if word_chunks is not None else None
        words.append([list(word), int(count), list(range(len(word))), flags, chunks])
    n_atoms = n_base - len(base_expansions)
    expansions: List[tuple] = [(s,) for s in range(n_atoms)] + [tuple(e) for e in base_expansions]
    id_of_expansion = {e: i for i, e in enumerate(expansions)}
    merges: List[tuple] = []
    while len(expansions) < max_vocab:
        pair_counts: dict = {}
        for symbols, count, spans, flags, chunks in words:
            constrained = flags is not None or chunks is not None
            for k, pair in enumerate(zip(symbols, symbols[1:])):
                if not constrained or _may_merge(k, symbols, spans, flags, chunks, max_words, char_rule):
                    pair_counts[pair] = pair_counts.get(pair, 0) + count
        if max_token_length is not None:  # too long to merge: never a candidate
            pair_counts = {p: c for p, c in pair_counts.items()
                           if len(expansions[p[0]]) + len(expansions[p[1]]) <= max_token_length}
        if not pair_counts:
            break
        # highest count; among equal counts the smallest (left, right)
        pair = min(pair_counts, key=lambda p: (-pair_counts[p], p))
        if pair_counts[pair] < threshold:
            break
        expansion = expansions[pair[0]] + expansions[pair[1]]
        result = id_of_expansion.get(expansion)
        if result is None:
            result = len(expansions)
            expansions.append(expansion)
            id_of_expansion[expansion] = result
        merges.append((pair[0], pair[1], result))
        for entry in words:
            if pair[0] in entry[0]:      # (a word without the left token has nothing to rewrite)
                entry[0], entry[2] = _merge_pair_training(entry[0], pair, result, entry[2], entry[3], entry[4],
                                                          max_words, char_rule)
    return merges


def _may_merge(k: int, symbols: List[int], spans: List[int], flags: List[int] | None,
               chunks: List[int] | None = None, max_words: int | None = None, char_rule: str = "pieces") -> bool:
    """May the tokens at k, k + 1 merge?  Character integrity (with ``flags``):
    both are sequences of whole characters, or both lie inside one character
    (:func:`_keeps_characters` by ``char_rule``).
    max_words (with ``chunks``): fewer than ``max_words`` chunk starts lie
    strictly inside the merged token."""
    left_start = spans[k]
    right_start = spans[k + 1]
    right_end = spans[k + 2] if k + 2 < len(spans) else (len(flags) - 1 if flags is not None else len(chunks or ()))
    if chunks is not None and max_words is not None:
        if sum(chunks[left_start + 1:right_end]) >= max_words:
            return False
    if flags is None:
        return True
    return _keeps_characters(flags, left_start, right_start, right_end, char_rule)


def _keeps_characters(flags: Sequence[int], left_start: int, right_start: int, right_end: int,
                      char_rule: str = "pieces") -> bool:
    """Tokens ``[left_start, right_start)`` and ``[right_start, right_end)`` (base
    symbol positions; ``flags``: 1 where a character starts, plus a final 1) may
    merge: both are sequences of whole characters, or both lie inside one
    (``char_rule="pieces"``: any two pieces of it; ``"prefix"``, SCRIPT's rule:
    the left one starts it, so inside a character only its prefix grows).

        >>> flags = [1, 0, 0, 1]         # one 3-byte character: E3 81 82
        >>> _keeps_characters(flags, 1, 2, 3), _keeps_characters(flags, 1, 2, 3, "prefix")
        (True, False)
        >>> _keeps_characters(flags, 0, 1, 2, "prefix")
        True
    """
    left_start_ok = flags[left_start] == 1
    boundary_between = flags[right_start] == 1
    right_end_ok = flags[right_end] == 1
    both_whole = left_start_ok and boundary_between and right_end_ok
    same_character = not boundary_between
    if char_rule == "prefix":
        same_character = same_character and left_start_ok
    return both_whole or same_character


def _merge_pair(symbols: List[int], pair: tuple, result: int) -> List[int]:
    """Rewrite ``symbols`` left to right, replacing non-overlapping ``pair`` by ``result``."""
    out: List[int] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            out.append(result)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _merge_pair_training(symbols: List[int], pair: tuple, result: int, spans: List[int],
                         flags: List[int] | None, chunks: List[int] | None = None,
                         max_words: int | None = None, char_rule: str = "pieces") -> Tuple[List[int], List[int]]:
    """:func:`_merge_pair` where :func:`_may_merge` allows it, keeping each
    token's start (in word symbols): returns the new tokens and starts."""
    return _rewrite_where(symbols, spans, pair, result,
                          lambda i: _may_merge(i, symbols, spans, flags, chunks, max_words, char_rule))


def _rewrite_where(symbols: List[int], starts: List[int], pair: tuple, result: int,
                   allowed: Callable[[int], bool]) -> Tuple[List[int], List[int]]:
    """Rewrite ``symbols`` left to right, replacing non-overlapping ``pair`` by
    ``result`` where ``allowed(i)`` (the tokens at i, i + 1 may merge), keeping
    each token's start: returns the new tokens and starts."""
    out: List[int] = []
    out_starts: List[int] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1] and allowed(i):
            out.append(result)
            out_starts.append(starts[i])
            i += 2
        else:
            out.append(symbols[i])
            out_starts.append(starts[i])
            i += 1
    return out, out_starts


def train_superbpe_reference(texts: Iterable[str], *, substrate: str = "ube", pattern: str = GPT2_PATTERN,
                             vocab_size: int, transition: int, n_special: int = 1, max_words: int = 4,
                             min_frequency: int = 2, max_token_length: int | None = None,
                             char_integrity: bool | str = False, spans: str = "v1") -> List[tuple]:
    """SuperBPE training the slow way (twin of ``train(..., superbpe_transition=)``).

    1. Chunk every text (``pattern``: a regex, or ``"script"``); count chunks,
       and spans (:func:`superword_span_ends_reference`) as tuples of chunks.
    2. Stage 1: :func:`train_bpe_reference` on the routed chunks up to
       ``transition - n_special`` ids.
    3. Stage 2: each distinct span -> each chunk encoded with the stage-1
       merges (:func:`encode_chunk_reference`) -> the span's stage-1 ids, 1
       where a token starts a chunk (and, with ``char_integrity``, 1 where a
       token starts a character) -> :func:`train_bpe_reference` over them with
       every stage-1 id as an alphabet symbol (``base_expansions``) up to
       ``vocab_size - n_special``, at most ``max_words`` chunks per token.

    ``char_integrity``: False, True / ``"pieces"`` or ``"prefix"`` (the rule of
    both stages).  ``spans``: the span rule, ``"v1"`` or ``"liu"``.

    Returns all merges, stage 1 then stage 2, as ``(left, right, result)``.
    """
    n_base = 512 if substrate == "ube" else 256
    char_rule = "prefix" if char_integrity == "prefix" else "pieces"
    chunk_counts: Dict[str, int] = {}
    span_counts: Dict[tuple, int] = {}
    for text in texts:
        chunks = pretokenize_script(text) if pattern == "script" else _chunks_reference(text, pattern)
        for chunk in chunks:
            chunk_counts[chunk] = chunk_counts.get(chunk, 0) + 1
        first = 0
        for stop in superword_span_ends_reference(chunks, spans):
            span = tuple(chunks[first:stop])
            span_counts[span] = span_counts.get(span, 0) + 1
            first = stop
    words = {tuple(route_symbols(c, substrate)): n for c, n in chunk_counts.items()}
    flags = {tuple(route_symbols(c, substrate)): char_starts_reference(c, substrate) for c in chunk_counts}
    stage1 = train_bpe_reference(words, n_base=n_base, max_vocab=transition - n_special,
                                 min_frequency=min_frequency, max_token_length=max_token_length,
                                 char_starts=flags if char_integrity else None, char_rule=char_rule)
    expansions = token_expansions(stage1, n_base)
    n_alphabet = max(expansions) + 1
    span_words: List[tuple] = []
    chunk_flags: List[List[int]] = []
    char_flags: List[List[int]] = []
    for span, count in span_counts.items():
        ids: List[int] = []
        starts: List[int] = []
        chars: List[int] = []
        for chunk in span:
            base_flags = char_starts_reference(chunk, substrate)
            tokens = encode_chunk_reference(route_symbols(chunk, substrate), stage1)
            position = 0
            for k, token in enumerate(tokens):
                starts.append(1 if k == 0 else 0)
                chars.append(base_flags[position])
                position += len(expansions[token])
            ids.extend(tokens)
        span_words.append((tuple(ids), count))
        chunk_flags.append(starts)
        char_flags.append(chars)
    stage2 = train_bpe_reference(span_words, n_base=n_alphabet, max_vocab=vocab_size - n_special,
                                 min_frequency=min_frequency, max_token_length=max_token_length,
                                 char_starts=char_flags if char_integrity else None, char_rule=char_rule,
                                 chunk_starts=chunk_flags, max_words=max_words,
                                 base_expansions=[expansions[i] for i in range(n_base, n_alphabet)])
    return stage1 + stage2


def token_expansions(merges: Iterable[Sequence[int]], n_base: int) -> dict:
    """Base-symbol expansion of every token id: ``{id: (base ids...)}``.

    Base symbol ``s`` expands to ``(s,)``; a merge ``(left, right, result)``
    gives ``result`` the expansion of ``left`` followed by that of ``right``.
    """
    expansions: Dict[int, Tuple[int, ...]] = {s: (s,) for s in range(n_base)}
    for left, right, result in merges:
        expansions[int(result)] = expansions[int(left)] + expansions[int(right)]
    return expansions


def encode_chunk_reference(symbols: Sequence[int], merges: Iterable[Sequence[int]],
                           char_starts: Sequence[int] | None = None, char_rule: str = "pieces") -> List[int]:
    """Encode one chunk (base symbol ids) with trained merges, the slow way.

    Repeatedly take the adjacent pair with the lowest merge rank (its row in
    ``merges``; the first row wins when a pair repeats) and replace all its
    non-overlapping occurrences, left to right, by the merge's result; stop
    when no adjacent pair has a rank.  Merges never cross chunk boundaries.

        >>> merges = [(97, 97, 256), (97, 98, 257), (256, 257, 258)]
        >>> encode_chunk_reference(list(b"aaabdaaabac"), merges)
        [258, 100, 258, 97, 99]

    ``char_starts`` (one flag per symbol, 1 where a character starts, as
    :func:`char_starts_reference` gives): the trainer's character-integrity
    rule, per occurrence.  A pair occurrence has its rank only when its two
    tokens are both whole-character sequences or both inside one character
    (:func:`_keeps_characters` by ``char_rule``); the others are left as they are.  In ``utf16``
    "た一" (``5F 30 00 4E``) the token ``30 00`` ("0") is not made across た and 一::

        >>> encode_chunk_reference([0x5F, 0x30, 0x00, 0x4E], [(0x30, 0x00, 256)])
        [95, 256, 78]
        >>> encode_chunk_reference([0x5F, 0x30, 0x00, 0x4E], [(0x30, 0x00, 256)], [1, 0, 1, 0])
        [95, 48, 0, 78]
    """
    rows = [tuple(int(x) for x in merge) for merge in merges]
    return _encode_chunk(list(symbols), rows, _first_ranks(rows), char_starts, char_rule)


def _encode_chunk(ids: List[int], merges: Sequence[Sequence[int]], rank_of: Dict[Tuple[int, int], int],
                  char_starts: Sequence[int] | None, char_rule: str = "pieces") -> List[int]:
    """:func:`encode_chunk_reference` with the rank table built (:func:`_first_ranks`)."""
    if char_starts is None:
        return _lowest_rank_first(ids, merges, rank_of)
    if len(char_starts) != len(ids):
        raise ValueError(f"{len(char_starts)} character-start flags for {len(ids)} symbols")
    flags = list(char_starts) + [1]
    total = len(ids)
    starts = list(range(total))  # each token's first symbol (the next token's is its end)

    def may_merge(k: int) -> bool:  # the tokens at k, k + 1
        right_end = starts[k + 2] if k + 2 < len(starts) else total
        return _keeps_characters(flags, starts[k], starts[k + 1], right_end, char_rule)

    while len(ids) >= 2:
        ranked = [rank_of[p] for k, p in enumerate(zip(ids, ids[1:])) if p in rank_of and may_merge(k)]
        if not ranked:
            break
        rank = min(ranked)
        pair, result = tuple(merges[rank][:2]), merges[rank][2]
        # left to right, without overlap, where characters stay whole
        ids, starts = _rewrite_where(ids, starts, pair, result, may_merge)
    return ids


def merges_from_ranks_reference(tokens: Sequence[bytes]) -> List[Tuple[int, int]]:
    """Twin of ``_ranks.merges_from_ranks``: the merges of the multi-byte
    ``tokens`` given in rank order (single bytes are ids 0..255, token ``k`` is
    ``256 + k``).  Token ``k`` is the merge of the two parts that tiktoken's BPE
    (lowest rank of the concatenated bytes first) leaves of its bytes with the
    ranks below it; raises ValueError naming the token when it leaves another
    number of parts."""
    rank = {bytes([b]): b for b in range(256)}
    merges = []
    for k, token in enumerate(tokens):
        parts = [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 1:
            found = [(rank[parts[i] + parts[i + 1]], i) for i in range(len(parts) - 1)
                     if parts[i] + parts[i + 1] in rank]
            if not found:
                break
            i = min(found)[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2:
            raise ValueError(f"token {k} ({token!r}) leaves {len(parts)} parts")
        merges.append((rank[parts[0]], rank[parts[1]]))
        rank[token] = 256 + k
    return merges


# ------------------------------------------------------------ tokenizer encode / decode
# Twins of Tokenizer.encode / decode (the Cython encoder and decoder): regex
# pre-tokenization, reference routing, encode_chunk_reference's rule per chunk,
# Python's codecs for decoding.  They read the tokenizer's merges, special
# tokens and id map, and return / accept the model's ids like the real thing.

def _chunks_reference(text: str, pattern: str) -> List[str]:
    """``regex`` chunks; a character the pattern leaves unmatched is a chunk of its own."""
    chunks: List[str] = []
    previous = 0
    for match in regex.finditer(pattern, text):
        start, end = match.span()
        if end == start:
            continue
        chunks.extend(text[previous:start])
        chunks.append(match.group())
        previous = end
    chunks.extend(text[previous:])
    return chunks


def _lowest_rank_first(symbols: List[int], merges: Sequence[Sequence[int]],
                       rank_of: Dict[Tuple[int, int], int]) -> List[int]:
    """Merge the adjacent pair of lowest rank (all its occurrences, left to right) until none has one."""
    while len(symbols) >= 2:
        ranked = [rank_of[p] for p in zip(symbols, symbols[1:]) if p in rank_of]
        if not ranked:
            break
        rank = min(ranked)
        symbols = _merge_pair(symbols, tuple(merges[rank][:2]), merges[rank][2])
    return symbols


def _pieces_reference(tokenizer, text: str, allowed_special) -> List[Tuple[str, Any]]:
    """``(piece, None)`` for ordinary text and ``(text, internal id)`` for each allowed
    special token (leftmost, longest)."""
    specials = dict(tokenizer._special_internal)
    allowed = specials if allowed_special == "all" else {t: specials[t] for t in allowed_special}
    if not allowed:
        return [(text, None)]
    alternatives = "|".join(regex.escape(t) for t in sorted(allowed, key=len, reverse=True))
    return [(piece, allowed[piece] if k % 2 == 1 else None)
            for k, piece in enumerate(regex.split(f"({alternatives})", text))]


def _piece_chunks_reference(tokenizer, piece: str) -> List[str]:
    return (pretokenize_script(piece) if tokenizer.pattern_name == "script"
            else _chunks_reference(piece, tokenizer.pattern))


def encode_reference(tokenizer, text: str, allowed_special=()) -> List[int]:
    """Model ids of ``text``: allowed special tokens first (leftmost, longest), then
    chunks by the pattern, each routed and merged with the lowest rank first
    (where characters stay whole, for a ``char_integrity`` tokenizer of any
    substrate: the twin states the rule, the kernel skips it where it cannot
    matter).  A SuperBPE tokenizer is encoded by :func:`encode_superbpe_reference`."""
    if getattr(tokenizer, "superbpe", None) is not None:
        return encode_superbpe_reference(tokenizer, text, allowed_special)
    merges = [(a, b, r) for (a, b), r in zip(tokenizer.merges, tokenizer.merge_results)]
    rank_of = _first_ranks(merges)
    ids: List[int] = []
    for piece, special in _pieces_reference(tokenizer, text, allowed_special):
        if special is not None:
            ids.append(special)
            continue
        flags_of = char_starts_reference if tokenizer.char_integrity else None
        for chunk in _piece_chunks_reference(tokenizer, piece):
            flags = None if flags_of is None else flags_of(chunk, tokenizer.substrate)
            ids.extend(_encode_chunk(route_symbols(chunk, tokenizer.substrate), merges, rank_of, flags,
                                     tokenizer.char_rule or "pieces"))
    return [tokenizer._model_id(i) for i in ids]


def decode_reference(tokenizer, ids: Iterable[int], errors: str = "strict") -> str:
    """Text of model ids: expand each token to base symbols; a special token flushes
    (decoding what came before with the dual-buffer rule) and is written as its text."""
    special_text = {i: t for t, i in tokenizer._special_internal.items()}
    parts: List[str] = []
    symbols: List[int] = []
    for position, token in enumerate(int(t) for t in ids):
        internal = tokenizer._internal_id(token)
        if internal < 0:
            raise ValueError(f"token id {token} at position {position} is outside the vocabulary")
        if internal in special_text:
            parts.append(decode_symbols(symbols, tokenizer.substrate, errors))
            symbols = []
            parts.append(special_text[internal])
        else:
            symbols.extend(tokenizer._expansions[internal])
    parts.append(decode_symbols(symbols, tokenizer.substrate, errors))
    return "".join(parts)


# ------------------------------------------------------------ SuperBPE stage 2
# Twin of _superword.Stage2: BPE across the chunks of one span with the stage-2
# merges, a merge occurrence allowed only where the token it makes covers at
# most ``max_words`` chunks.

def superbpe_stage2_reference(tokens: Sequence[int], chunk_starts: Sequence[int],
                              merges: Iterable[Sequence[int]], max_words: int) -> List[int]:
    """Stage 2 over one span, the slow way.

    ``tokens``: the span's stage-1 ids (its chunks' ids, concatenated);
    ``chunk_starts[i]``: 1 when ``tokens[i]`` begins a chunk; ``merges``:
    ``(left, right, result)`` of the stage-2 merges in rank order (the first
    row wins when a pair repeats).  Repeatedly take the lowest rank that some
    adjacent pair holds *and may merge*, and merge its occurrences left to
    right, non-overlapping, skipping those not allowed.  An occurrence is
    allowed iff fewer than ``max_words`` chunk starts lie strictly inside the
    token it makes (the per-occurrence max_words rule).

        >>> # " of" (1) + " the" (2) -> 10, then 10 + " cat" (3) -> 11
        >>> superbpe_stage2_reference([1, 2, 3], [1, 1, 1], [(1, 2, 10), (10, 3, 11)], 2)
        [10, 3]
    """
    table = [tuple(int(x) for x in m) for m in merges]
    return _stage2_reference(tokens, chunk_starts, table, _first_ranks(table), max_words)


def _first_ranks(table: Sequence[Sequence[int]]) -> Dict[Tuple[int, int], int]:
    """``(left, right) -> rank`` of ``(left, right, result)`` rows, the first row of a repeated pair."""
    rank_of: Dict[Tuple[int, int], int] = {}
    for rank, (left, right, _) in enumerate(table):
        rank_of.setdefault((left, right), rank)
    return rank_of


def _stage2_reference(tokens: Sequence[int], chunk_starts: Sequence[int], table: Sequence[Sequence[int]],
                      rank_of: Dict[Tuple[int, int], int], max_words: int) -> List[int]:
    # each token: (id, chunk starts strictly inside it, whether it begins a chunk)
    toks = [(int(t), 0, bool(s)) for t, s in zip(tokens, chunk_starts)]

    def pair_rank(a, b):
        if a[1] + b[1] + int(b[2]) >= max_words:
            return None
        return rank_of.get((a[0], b[0]))

    while len(toks) >= 2:
        ranks = [pair_rank(a, b) for a, b in zip(toks, toks[1:])]
        present = [r for r in ranks if r is not None]
        if not present:
            break
        best = min(present)
        result = table[best][2]
        out, i = [], 0
        while i < len(toks):
            if i + 1 < len(toks) and ranks[i] == best:
                a, b = toks[i], toks[i + 1]
                out.append((result, a[1] + b[1] + int(b[2]), a[2]))
                i += 2
            else:
                out.append(toks[i])
                i += 1
        toks = out
    return [t[0] for t in toks]


def encode_superbpe_reference(tokenizer, text: str, allowed_special=()) -> List[int]:
    """Twin of ``Tokenizer.encode`` for a SuperBPE tokenizer (``tokenizer.superbpe``):
    allowed special tokens first, then the pattern's chunks; each chunk routed and
    merged with the stage-1 merges ``merges[:k]`` only (lowest rank first); then,
    for each span (:func:`superword_span_ends_reference`, the tokenizer's span rule), the chunks' stage-1 ids
    concatenated and merged with the stage-2 merges ``merges[k:]`` by
    :func:`superbpe_stage2_reference` (``max_words`` per occurrence)."""
    k, max_words = tokenizer.superbpe["stage1_merges"], tokenizer.superbpe["max_words"]
    rule = tokenizer.superbpe.get("spans", "v1")
    merges = [(a, b, r) for (a, b), r in zip(tokenizer.merges, tokenizer.merge_results)]
    stage1, stage2 = merges[:k], merges[k:]
    rank1, rank2 = _first_ranks(stage1), _first_ranks(stage2)
    ids: List[int] = []
    for piece, special in _pieces_reference(tokenizer, text, allowed_special):
        if special is not None:
            ids.append(special)
            continue
        chunks = _piece_chunks_reference(tokenizer, piece)
        first = 0
        for end in superword_span_ends_reference(chunks, rule):
            tokens: List[int] = []
            starts: List[int] = []
            for chunk in chunks[first:end]:
                flags = char_starts_reference(chunk, tokenizer.substrate) if tokenizer.char_integrity else None
                chunk_ids = _encode_chunk(route_symbols(chunk, tokenizer.substrate), stage1, rank1, flags,
                                          tokenizer.char_rule or "pieces")
                tokens += chunk_ids
                starts += [1] + [0] * (len(chunk_ids) - 1)
            ids += _stage2_reference(tokens, starts, stage2, rank2, max_words)
            first = end
    return [tokenizer._model_id(i) for i in ids]


# ------------------------------------------------------------------ JSON Lines text field

def jsonl_field(line: bytes, key: str) -> bytes | None:
    """The UTF-8 of the string ``json.loads(line)[key]``, or None when the line
    is not valid UTF-8, not a JSON object, has no member ``key``, or the member
    is not a string or holds a lone surrogate (the rows the reader reports).
    The kernel ``_jsonl.scan_lines`` returns this or hands the line back."""
    import json

    try:
        record = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    value = record.get(key) if isinstance(record, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:   # a lone surrogate, from a \uD800-\uDFFF escape
        return None


# ------------------------------------------------------------------ special-token text in a buffer

def find_first_reference(data: bytes, start: int, stop: int, texts: Sequence[bytes]) -> int:
    """Twin of ``_encode.find_first``: the leftmost offset in ``data[start:stop]``
    where one of ``texts`` occurs, or -1."""
    found = [data.find(t, start, stop) for t in texts]
    found = [f for f in found if f >= 0]
    return min(found) if found else -1


# ------------------------------------------------------------------ merge list -> tokens

def derive_tokens_reference(merges: Sequence[Sequence[int]], base_size: int) -> Tuple[List[int], List[tuple]]:
    """Twin of ``_ranks.expand_merges``: ``(results, expansions)``, the id each merge
    makes (an earlier token with the same expansion is reused) and every token's
    base symbols; None for a merge joining an id not defined at its rank."""
    expansions: List[tuple] = [(i,) for i in range(base_size)]
    id_of: Dict[tuple, int] = {}
    results: List[int] = []
    for left, right in merges:
        if not (0 <= left < len(expansions) and 0 <= right < len(expansions)):
            return None   # type: ignore[return-value]
        expansion = expansions[left] + expansions[right]
        if expansion not in id_of:
            id_of[expansion] = len(expansions)
            expansions.append(expansion)
        results.append(id_of[expansion])
    return results, expansions
