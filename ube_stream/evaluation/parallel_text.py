"""Evaluate tokenizers on a parallel file: token premium, Gini, wins.

A parallel file is JSON Lines (plain or ``.zst``), one item per line::

    {"lang": "hi", "key": "cldr:territories/001", "text": "विश्व", "script": "Deva"}

The same ``key`` in several languages is the same message; ``script`` is
optional (a label for tables and plots, and the script of a Chinese tag that
has none); a language without it gets the main script of its text
(:func:`~ube_stream.evaluation.scripts.main_script`), and
``ParallelSet.script_source`` / ``table["script_source"]`` say which.  Every item is encoded with each tokenizer
(:meth:`Tokenizer.encode_batch`) and the counts go to
:func:`ube_stream.metrics.evaluation_table`::

    table = evaluate(["ube.json", "bbpe.json"], "parallel.jsonl.zst",
                     seen_langs=corpus_languages(["train.jsonl.zst"]))
    print(format_table(table))

Output writers (terminal table, JSON, CSV, PNG plot) live in
:mod:`ube_stream.evaluation.output` and are re-exported here.
"""
from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from ..errors import InputError
from .metrics import add_context, evaluation_table, language_key, resolve_language
from .output import format_table, plot_premiums, write_csv, write_json

__all__ = [
    "ParallelSet",
    "read_parallel",
    "select_languages",
    "read_language_list",
    "corpus_languages",
    "unlabelled_inputs",
    "withhold_languages",
    "count_tokens",
    "count_floor",
    "context_capacity",
    "evaluate",
    "format_table",
    "write_json",
    "write_csv",
    "plot_premiums",
]

_REQUIRED = ("lang", "key", "text")


@dataclasses.dataclass
class ParallelSet:
    """Items of a parallel file: ``items[lang][key] = text`` (languages and keys
    in file order), ``scripts[lang]`` the most frequent ``script`` label, or the
    main script inferred from the text; ``script_source[lang]``: ``"field"`` or
    ``"inferred"`` (``None`` when neither gave one)."""

    path: str
    items: Dict[str, Dict[str, str]]
    scripts: Dict[str, Optional[str]]
    script_source: Dict[str, Optional[str]] = dataclasses.field(default_factory=dict)

    @property
    def languages(self) -> List[str]:
        return list(self.items)

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values())


def _open_lines(path: str):
    """Binary line iterator of a plain or ``.zst`` file."""
    raw = open(path, "rb")
    if path.endswith(".zst"):
        import zstandard

        return raw, io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=False))
    return raw, raw


def read_parallel(path: Union[str, os.PathLike]) -> ParallelSet:
    """Read a parallel JSONL file (plain or ``.zst``).

    Each non-blank line must be a JSON object with string fields ``lang``,
    ``key``, ``text`` (``script`` optional); a ``(lang, key)`` pair may appear
    once.  Anything else raises :class:`~ube_stream.errors.InputError` naming
    the file and the line (1-based).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{path}: no such parallel file", path=path, reason="missing_file")
    items: Dict[str, Dict[str, str]] = {}
    script_votes: Dict[str, collections.Counter] = {}
    first_line: Dict[tuple, int] = {}
    raw, lines = _open_lines(path)
    line_no = 0
    try:
        for line_no, data in enumerate(lines, start=1):
            if not data.strip():
                continue
            where = f"{path}: line {line_no}"
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{where}: invalid UTF-8 at byte {exc.start} of the line; "
                                 "fix the file (parallel files are UTF-8 JSON Lines)",
                                 path=path, row=line_no, reason="invalid_utf8") from None
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                                 "each line must be one JSON object", path=path, row=line_no,
                                 reason="bad_json") from None
            if not isinstance(row, dict):
                raise InputError(f"{where}: expected a JSON object with fields lang, key, text, "
                                 f"got {type(row).__name__}", path=path, row=line_no, reason="bad_json")
            for field in _REQUIRED:
                if not isinstance(row.get(field), str):
                    found = "no such field" if field not in row else f"got {type(row[field]).__name__}"
                    raise InputError(f"{where}: field {field!r} must be a string ({found}); a parallel "
                                     "item needs lang, key and text", path=path, row=line_no,
                                     reason="missing_field")
            lang, key = row["lang"], row["key"]
            if (lang, key) in first_line:
                raise InputError(f"{where}: key {key!r} repeats for language {lang!r} (first at line "
                                 f"{first_line[lang, key]}); keep one item per language and key",
                                 path=path, row=line_no, reason="duplicate_key")
            first_line[lang, key] = line_no
            items.setdefault(lang, {})[key] = row["text"]
            script = row.get("script")
            if isinstance(script, str) and script:
                script_votes.setdefault(lang, collections.Counter())[script] += 1
    except InputError:
        raise
    except Exception as exc:  # corrupt compression, I/O errors
        raise InputError(f"{path}: cannot read after line {line_no}: {exc}", path=path, row=line_no,
                         reason="corrupt") from exc
    finally:
        raw.close()
    if not items:
        raise InputError(f"{path}: no items (an empty parallel file)", path=path, reason="empty")
    from .scripts import main_script

    scripts: Dict[str, Optional[str]] = {}
    source: Dict[str, Optional[str]] = {}
    for lang, keyed in items.items():
        if lang in script_votes:
            scripts[lang], source[lang] = script_votes[lang].most_common(1)[0][0], "field"
        else:
            scripts[lang] = main_script(keyed.values())
            source[lang] = None if scripts[lang] is None else "inferred"
    return ParallelSet(path=path, items=items, scripts=scripts, script_source=source)


def read_language_list(spec: Union[str, Iterable[str], None]) -> Optional[List[str]]:
    """Language tags from a list, a comma/space-separated string, or a file
    (one or more tags per line, ``#`` starts a comment).  ``None`` stays ``None``."""
    if spec is None:
        return None
    parts = [spec] if isinstance(spec, str) else list(spec)
    tags: List[str] = []
    for part in parts:
        if os.path.isfile(part):
            with open(part, encoding="utf-8") as f:
                text = " ".join(line.split("#", 1)[0] for line in f)
        else:
            text = part
        tags.extend(t for t in text.replace(",", " ").split() if t)
    return tags


def select_languages(parallel: ParallelSet, eval_langs: Optional[Sequence[str]], *,
                     reference: str = "en") -> ParallelSet:
    """Keep the languages ``eval_langs`` names (see
    :func:`~ube_stream.metrics.resolve_language`), always with the reference.
    A tag that names no language of the file is an error."""
    if not eval_langs:
        return parallel
    available = parallel.languages
    keep = set(resolve_language(reference, available))
    for tag in eval_langs:
        found = resolve_language(tag, available)
        if not found:
            raise ValueError(f"eval_langs: {tag!r} names no language of {parallel.path} "
                             f"(it has {len(available)}: {', '.join(available[:15])}"
                             f"{', ...' if len(available) > 15 else ''})")
        keep.update(found)
    return ParallelSet(path=parallel.path,
                       items={lang: v for lang, v in parallel.items.items() if lang in keep},
                       scripts={lang: s for lang, s in parallel.scripts.items() if lang in keep},
                       script_source={lang: s for lang, s in parallel.script_source.items() if lang in keep})


def corpus_languages(inputs, *, field: str = "lang", format: Optional[str] = None,
                     split: Optional[str] = None) -> Optional[List[str]]:
    """Distinct values of the ``field`` of a training corpus (the languages it
    holds, in order of appearance), from the inputs that have the field, or
    ``None`` when none has it (plain text has none; :func:`unlabelled_inputs`
    names the inputs without it).  ``format``/``split``: as for
    :func:`~ube_stream.readers.resolve_inputs`."""
    seen: Dict[str, None] = {}
    labelled = False
    for item in _input_items(inputs):
        values = _field_values(item, field, format=format, split=split)
        if values is not None:
            labelled = True
            seen.update(dict.fromkeys(v for v in values if v))
    return list(seen) if labelled and seen else None


def unlabelled_inputs(inputs, *, field: str = "lang", format: Optional[str] = None,
                      split: Optional[str] = None) -> List[str]:
    """The items of ``inputs`` (paths, globs, folders) whose documents have no ``field``."""
    return [item for item in _input_items(inputs) if _field_values(item, field, format=format, split=split) is None]


def _input_items(inputs) -> list:
    return [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)


def _field_values(item, field: str, *, format: Optional[str], split: Optional[str]) -> Optional[List[str]]:
    """Every document's ``field`` in one input item, or ``None`` when it has no such field."""
    from ..readers.inputs import iter_texts

    try:
        return list(iter_texts([item], column=field, on_error="raise", format=format, split=split))
    except InputError:
        return None


def withhold_languages(inputs, path: str, holdout: Sequence[str], *, field: str = "lang", column: str = "text",
                       format: Optional[str] = None, split: Optional[str] = None) -> Dict[str, int]:
    """Write the documents of ``inputs`` whose ``field`` is not one of
    ``holdout`` (compared by :func:`~ube_stream.evaluation.metrics.language_key`)
    to ``path`` as JSON Lines (``{"text": ...}``): the training corpus of a run
    that leaves those languages unseen.  Inputs without the field are copied
    whole.  Returns ``{"kept": documents written, "withheld": documents left out}``."""
    import itertools

    from ..readers.inputs import iter_texts
    from ..storage import atomic_open

    withheld_keys = {language_key(tag) for tag in holdout}
    kept = withheld = 0
    end = object()
    with atomic_open(path, "w") as out:
        for item in _input_items(inputs):
            langs = _field_values(item, field, format=format, split=split)
            texts = iter_texts([item], column=column, on_error="raise", format=format, split=split)
            for lang, text in itertools.zip_longest(langs if langs is not None else [], texts, fillvalue=end):
                if text is end or (langs is not None and lang is end):
                    raise InputError(f"{item}: the {field!r} and {column!r} fields have different numbers of "
                                     f"values (a null in one of them?); fix the rows or train without a holdout",
                                     path=os.fspath(item), reason="field_mismatch")
                if langs is not None and lang and language_key(str(lang)) in withheld_keys:
                    withheld += 1
                    continue
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                kept += 1
    return {"kept": kept, "withheld": withheld}


def language_groups(parallel: ParallelSet, seen_langs: Optional[Sequence[str]]) -> Optional[Dict[str, str]]:
    """``"seen"`` or ``"unseen"`` per language of ``parallel``, by
    :func:`~ube_stream.metrics.language_key` against ``seen_langs``."""
    if seen_langs is None:
        return None
    seen_keys = {language_key(tag) for tag in seen_langs}
    return {lang: ("seen" if language_key(lang, _field_script(parallel, lang)) in seen_keys else "unseen")
            for lang in parallel.languages}


def _field_script(parallel: ParallelSet, lang: str) -> Optional[str]:
    """The file's own ``script`` label of ``lang`` (an inferred ``Hani`` says
    nothing about Simplified or Traditional Chinese)."""
    return parallel.scripts.get(lang) if parallel.script_source.get(lang, "field") == "field" else None


def _flat(parallel: ParallelSet):
    order = [(lang, key) for lang, keyed in parallel.items.items() for key in keyed]
    texts = [parallel.items[lang][key] for lang, key in order]
    return order, texts


def _regroup(order, values) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {}
    for (lang, key), value in zip(order, values):
        out.setdefault(lang, {})[key] = int(value)
    return out


def count_tokens(tokenizer, parallel: ParallelSet, *, encoded=None) -> Dict[str, Dict[str, int]]:
    """Tokens of every item: ``counts[lang][key]`` (one ``encode_batch`` call, or the
    ids ``encoded`` already holds, in :func:`_flat` order)."""
    order, texts = _flat(parallel)
    if encoded is None:
        encoded = tokenizer.encode_ordinary_batch(texts)
    return _regroup(order, (len(ids) for ids in encoded))


def context_capacity(tokenizer, items: Sequence[str], window: int, *,
                     encoded: Optional[Sequence[Any]] = None) -> Dict[str, int]:
    """How much of a language's text fits in a window of ``window`` tokens.

    The window is filled from the token stream of the language's items in file
    order, each item encoded on its own (as the premiums count them) and the
    streams concatenated; when the items run out before the window is full they
    start again from the first (``passes`` counts the complete passes).  The
    item the window ends in counts the characters its first tokens cover
    completely: the longest prefix of its text that the decoded tokens spell
    (a character whose bytes straddle the window's end does not fit).  Returns
    ``{"characters", "bytes" (UTF-8), "tokens" (the window), "passes"}``.
    """
    if window < 1:
        raise ValueError(f"the context window must be >= 1 token, got {window}")
    if encoded is None:
        encoded = tokenizer.encode_ordinary_batch(list(items))
    lengths = [len(ids) for ids in encoded]
    total_tokens = sum(lengths)
    chars = [len(t) for t in items]
    nbytes = [len(t.encode("utf-8")) for t in items]
    if total_tokens == 0:
        return {"characters": 0, "bytes": 0, "tokens": window, "passes": 0}
    passes, left = divmod(window, total_tokens)
    characters, size = passes * sum(chars), passes * sum(nbytes)
    for text, ids, n_tokens, n_chars, n_bytes in zip(items, encoded, lengths, chars, nbytes):
        if left >= n_tokens:
            left -= n_tokens
            characters, size = characters + n_chars, size + n_bytes
            continue
        if left > 0:
            decoded = tokenizer.decode([int(i) for i in ids[:left]], errors="replace")
            covered = _common_prefix(decoded, text)
            characters, size = characters + covered, size + len(text[:covered].encode("utf-8"))
        break
    return {"characters": characters, "bytes": size, "tokens": window, "passes": passes}


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def count_floor(substrate: str, parallel: ParallelSet) -> Dict[str, Dict[str, int]]:
    """Base symbols of every item under ``substrate`` (the no-merge floor)."""
    from ..substrate import floor_cost

    order, texts = _flat(parallel)
    return _regroup(order, (floor_cost(t, substrate) for t in texts))


def _tokenizer_names(tokenizers, names: Optional[Sequence[str]]) -> List[str]:
    if names is not None:
        names = list(names)
        if len(names) != len(tokenizers) or len(set(names)) != len(names):
            raise ValueError(f"names {names} must be distinct, one per tokenizer ({len(tokenizers)})")
        return names
    out: List[str] = []
    for tok, source in tokenizers:
        base = os.path.splitext(os.path.basename(source))[0] if source else tok.substrate
        name, n = base, 2
        while name in out:
            name, n = f"{base}-{n}", n + 1
        out.append(name)
    return out


def evaluate(tokenizers: Sequence, parallel, *, reference: str = "en",
             eval_langs: Optional[Sequence[str]] = None, seen_langs: Optional[Sequence[str]] = None,
             names: Optional[Sequence[str]] = None, context: Optional[int] = None) -> dict:
    """Evaluate tokenizers (objects or tokenizer file paths) on a parallel file
    (path or :class:`ParallelSet`) and return the table of
    :func:`~ube_stream.metrics.evaluation_table`, plus ``"ube_stream_version"``,
    ``"parallel"`` (the path) and ``"tokenizer_info"`` (substrate, vocabulary size, fingerprint per name).
    ``seen_langs`` (the training corpus's languages) splits the languages into
    ``seen`` / ``unseen`` groups.  ``context`` (a window in tokens, e.g. 2048)
    adds :func:`context_capacity` per language and tokenizer (``context_chars``,
    ``context_bytes``) and, per pair, the gain of A over B in characters
    (``table["context"]``)."""
    from ..tokenizer import as_tokenizer

    loaded = []
    for tok in tokenizers:
        if isinstance(tok, (str, os.PathLike)):
            loaded.append((as_tokenizer(tok), os.fspath(tok)))
        else:
            loaded.append((tok, None))
    if not loaded:
        raise ValueError("evaluate needs at least one tokenizer")
    labels = _tokenizer_names(loaded, names)
    if not isinstance(parallel, ParallelSet):
        parallel = read_parallel(parallel)
    parallel = select_languages(parallel, eval_langs, reference=reference)
    order, texts = _flat(parallel)
    encoded = {label: tok.encode_ordinary_batch(texts) for label, (tok, _) in zip(labels, loaded)}
    counts = {label: count_tokens(tok, parallel, encoded=encoded[label]) for label, (tok, _) in zip(labels, loaded)}
    floors_by_substrate = {s: count_floor(s, parallel) for s in {tok.substrate for tok, _ in loaded}}
    floors = {label: floors_by_substrate[tok.substrate] for label, (tok, _) in zip(labels, loaded)}
    characters = {lang: {k: len(t) for k, t in keyed.items()} for lang, keyed in parallel.items.items()}
    table = evaluation_table(counts, characters=characters, floor_costs=floors, scripts=parallel.scripts,
                             groups=language_groups(parallel, seen_langs), reference=reference)
    from .._version import __version__

    table["ube_stream_version"] = __version__
    table["parallel"] = parallel.path
    table["script_source"] = dict(parallel.script_source)
    if "inferred" in parallel.script_source.values():
        from .scripts import HOW

        table["script_inference"] = HOW
    table["tokenizer_info"] = {label: {"substrate": tok.substrate, "vocab_size": tok.vocab_size,
                                       "fingerprint": tok.fingerprint, "path": src}
                               for label, (tok, src) in zip(labels, loaded)}
    if seen_langs is not None:
        table["seen_langs"] = list(seen_langs)
    if context is not None:
        capacities = {}
        for label, (tok, _) in zip(labels, loaded):
            start = 0
            for lang, keyed in parallel.items.items():
                ids = encoded[label][start:start + len(keyed)]
                capacities[label, lang] = context_capacity(tok, list(keyed.values()), context, encoded=ids)
                start += len(keyed)
        add_context(table, capacities, context)
    return table
