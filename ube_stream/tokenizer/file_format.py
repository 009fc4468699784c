"""The tokenizer file: one versioned JSON document, and its fingerprint.

Plain functions over the fields of a :class:`~ube_stream.tokenizer.Tokenizer`;
the object calls them (``to_json``, ``from_json``, ``fingerprint``).

File layout (``format`` = ``"ube-stream-tokenizer"``, ``version`` = 1 or 2)::

    {
      "format": "ube-stream-tokenizer",
      "version": 1,                           # 2 with char_integrity, superbpe, nfc or aliases
      "substrate": "ube",                     # ube | utf8 | utf16
      "pattern": {"name": "gpt2", "regex": "'s|'t|..."},   # or {"name": "script"} (no regex)
      "normalization": "none",                # or "nfc" (version 2)
      "base_size": 512,                       # ids 0..base_size-1 are base symbols
      "vocab_size": 32000,                    # base + merged tokens + special tokens
      "merges": [[left, right], ...],         # in rank order
      "special_tokens": [{"id": 31999, "text": "<|endoftext|>"}],   # by id; aliases after (version 2)
      "char_integrity": true,                 # version 2, only when set: the encoder keeps characters whole
                                              # (true: the "pieces" rule; "prefix": SCRIPT's rule)
      "superbpe": {"stage1_merges": 28000, "max_words": 4},   # version 2, only when set
      "added_tokens": [{"text": "  ", "id": 50290, "normalized": true}],   # version 2, only when set
      "training": {...},                      # options and corpus totals (provenance only)
      "fingerprint": "sha256:..."             # of the canonical encoding-relevant content
    }

``pattern.name`` is a known pattern (``gpt2``, ``cl100k``, ``o200k``, recorded
with their regex, which must match this version's), ``custom`` (a regex the
tokenizer was given, ``"regex:..."``; files from ``from_hf`` of Llama 3 record
``llama3`` so), or a rule-based split with no regex (``script``: the object
holds only the name).

Merged token ids are derived from the merge list: merge ``k`` joins tokens
``left`` and ``right``; if the concatenation of their base-symbol expansions
already has an id (another merge made the same token), the merge reuses it,
otherwise the new token takes the next free id.  Special tokens follow the
merged tokens.  The fingerprint covers substrate, pattern, normalization,
merges and special tokens — not the ``training`` record — so two files that
encode identically have the same fingerprint.

Version 2 adds optional encoding-relevant content; a tokenizer that sets
neither is written as version 1 (byte-identical to earlier releases, same
fingerprint), and version-1 files still load:

- ``char_integrity`` (``true`` or ``"prefix"``): no token holds part of one
  character and anything of another, in training and in encoding (the encoder
  only applies a merge at a position where it keeps characters whole).  ``true``
  is the ``"pieces"`` rule (any two pieces of one character may merge; files
  written before ``"prefix"`` existed keep their bytes and fingerprint);
  ``"prefix"`` is SCRIPT's rule (inside a character only its prefix and the
  next piece merge, left to right).
- ``normalization`` ``"nfc"``: text is Unicode NFC-normalised before
  pre-tokenization (HF's ``NFC`` normalizer; ``tokenizer.normalization``).
- aliases: ``special_tokens`` entries whose id an earlier entry already has
  (tiktoken's ``o200k_harmony``): other names of that special token, recognised
  in text like it; ``decode`` writes the first entry's text.
- ``added_tokens``: HF's added tokens that are not special (GPT-NeoX's runs of
  spaces, OLMo's ``|||EMAIL_ADDRESS|||``), by internal id: cut out of every text
  before pre-tokenization (``normalized``: found after normalization, else in the
  text as written; ``tokenizer/added_tokens.py``).  An id after the merged tokens
  is that of the ``special_tokens`` entry of the same text.
- ``superbpe``: a SuperBPE tokenizer.  ``stage1_merges`` = k: ``merges[:k]``
  are applied inside pre-tokens (chunks), ``merges[k:]`` afterwards across the
  chunks of a span (docs/training.md, SuperBPE); ``max_words``: at most that many chunks
  in one token; ``spans``: the span rule, ``"liu"`` (absent: ``"v1"``, so files of
  the first rule keep their bytes and fingerprint).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .._version import __version__
from ..errors import TokenizerFormatError
from ..storage import local_path, read_bounded

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "canonical", "fingerprint", "dumps", "parse", "parse_doc",
           "check_recorded", "read_text"]

FORMAT_NAME = "ube-stream-tokenizer"
FORMAT_VERSION = 2
#: versions this release reads; files without version-2 fields are written as 1
READ_VERSIONS = (1, 2)


def canonical(*, substrate: str, pattern_name: str, pattern: str, normalization: str, base_size: int,
              merges: Sequence[Tuple[int, int]], special_tokens: Mapping[str, int],
              id_map: Optional[Sequence[int]], char_integrity: Optional[str] = None,
               superbpe: Optional[Mapping[str, Any]] = None,
               added_tokens: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """The encoding-relevant content, in file order (``special_tokens``: text -> internal id;
    ``char_integrity``: None, ``"pieces"`` or ``"prefix"``)."""
    from ..pretokenizer import RULE_PATTERNS

    content: Dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": 2 if (char_integrity or superbpe is not None or normalization != "none" or added_tokens
                         or len(set(special_tokens.values())) < len(special_tokens)) else 1,
        "substrate": substrate,
        "pattern": {"name": pattern_name} if pattern_name in RULE_PATTERNS else {"name": pattern_name, "regex": pattern},
        "normalization": normalization,
        "base_size": base_size,
        "merges": list(map(list, merges)),
        "special_tokens": [{"id": i, "text": t} for t, i in special_tokens.items()],
    }
    if char_integrity:
        content["char_integrity"] = True if char_integrity == "pieces" else char_integrity
    if superbpe is not None:
        content["superbpe"] = {"stage1_merges": int(superbpe["stage1_merges"]),
                               "max_words": int(superbpe["max_words"])}
        if superbpe.get("spans", "v1") != "v1":
            content["superbpe"]["spans"] = str(superbpe["spans"])
    if added_tokens:
        content["added_tokens"] = [{"text": a["text"], "id": int(a["id"]), "normalized": bool(a["normalized"])}
                                   for a in added_tokens]
    if id_map is not None:
        content["id_map"] = [int(i) for i in id_map]
    return content


def fingerprint(content: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical content (sorted keys, compact separators)."""
    blob = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def dumps(content: Mapping[str, Any], *, vocab_size: int, training: Mapping[str, Any],
          content_fingerprint: Optional[str] = None) -> str:
    """The file's text: stable key order, one merge per line, so equal tokenizers give equal bytes.
    ``content_fingerprint``: :func:`fingerprint` of ``content`` when the caller holds it (a
    tokenizer computes it once; a second serialisation of 32k merges cost ~0.01 s)."""
    doc = dict(content)
    doc["vocab_size"] = vocab_size
    doc["training"] = dict(training)
    doc["fingerprint"] = content_fingerprint or fingerprint(content)
    merges = doc.pop("merges")
    id_map = doc.pop("id_map", None)
    if id_map is not None:  # one line, like the merges: the file stays readable
        doc["id_map"] = "@ID_MAP@"
    head = json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=False)
    if id_map is not None:
        head = head.replace('"@ID_MAP@"', json.dumps(id_map))
    merge_lines = ",\n".join(f"    [{a}, {b}]" for a, b in merges)
    merges_text = "[\n" + merge_lines + "\n  ]" if merges else "[]"
    # put merges last, before the closing brace
    return head[:-2] + ',\n  "merges": ' + merges_text + "\n}\n"


def parse(text: str, *, source: str = "<string>") -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Check format name, version and fields of a file's text: ``(doc, constructor keywords)``."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenizerFormatError(f"{source}: not a JSON file ({exc}); expected an ube-stream tokenizer file") from exc
    except RecursionError:
        raise TokenizerFormatError(f"{source}: JSON nested too deeply; not an ube-stream tokenizer file") from None
    except ValueError as exc:   # e.g. an integer of more than 4300 digits
        raise TokenizerFormatError(f"{source}: not a readable JSON file ({exc})") from None
    return parse_doc(doc, source=source)


def parse_doc(doc: Any, *, source: str = "<string>") -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """:func:`parse` of a file's text already read by ``json.loads`` (a caller that
    looked inside it need not parse it twice)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        hint = (" It looks like a HF tokenizer.json: load it with Tokenizer.from_hf()."
                if isinstance(doc, dict) and "model" in doc else "")
        raise TokenizerFormatError(f"{source}: format is {found!r}, expected {FORMAT_NAME!r}.{hint}")
    version = doc.get("version")
    if not _is_int(version) or version not in READ_VERSIONS:
        raise TokenizerFormatError(
            f"{source}: tokenizer format version {version!r} is not supported by ube-stream {__version__} "
            f"(it reads versions {', '.join(map(str, READ_VERSIONS))}); upgrade ube-stream or re-train")
    missing = [k for k in ("substrate", "pattern", "merges", "special_tokens", "fingerprint") if k not in doc]
    if missing:
        raise TokenizerFormatError(f"{source}: missing fields {missing}")
    check_fields(doc, source)
    pattern = doc["pattern"]
    kwargs = dict(substrate=doc["substrate"], merges=doc["merges"],
                  special_tokens={s["text"]: int(s["id"]) for s in doc["special_tokens"]},
                  pattern=_pattern_argument(pattern, source),
                  normalization=doc.get("normalization", "none"), training=doc.get("training"),
                  id_map=doc.get("id_map"), char_integrity=doc.get("char_integrity", False),
                  superbpe=doc.get("superbpe"), added_tokens=doc.get("added_tokens"))
    return doc, kwargs


def _pattern_argument(pattern: Mapping[str, Any], source: str) -> str:
    """The ``pattern`` argument of a file's pattern object: the name, or ``"regex:" + regex``
    for ``custom``; a name this version does not know is a TokenizerFormatError."""
    from ..pretokenizer import PATTERN_NAMES, pattern_spec

    name = pattern["name"]
    if name != "custom" and name not in PATTERN_NAMES:
        raise TokenizerFormatError(
            f"{source}: pattern {name!r} is not one this version of ube-stream knows ({list(PATTERN_NAMES)} "
            "or custom); upgrade ube-stream or re-train")
    return pattern_spec(name, pattern["regex"]) if name == "custom" else name


#: the largest id a tokenizer file may hold (ids are uint32; 2**32-1 is no id)
_MAX_ID = (1 << 32) - 2


def _is_int(value: Any) -> bool:
    return type(value) is int   # not bool, not float


def check_fields(doc: Mapping[str, Any], source: str) -> None:
    """The type and range of every field, before anything is built from them:
    :class:`TokenizerFormatError` naming the field."""
    from ..substrate import SUBSTRATES, base_size

    def bad(field: str, expected: str, found: Any) -> TokenizerFormatError:
        shown = repr(found)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return TokenizerFormatError(f"{source}: field {field!r} must be {expected}, found {shown}; the file is "
                                    f"corrupt or was edited. Restore it or re-train")

    substrate = doc["substrate"]
    if substrate not in SUBSTRATES:
        raise bad("substrate", f"one of {list(SUBSTRATES)}", substrate)
    from ..pretokenizer import RULE_PATTERNS

    pattern = doc["pattern"]
    if not isinstance(pattern, dict) or not isinstance(pattern.get("name"), str) \
            or not (isinstance(pattern.get("regex"), str) or pattern["name"] in RULE_PATTERNS):
        raise bad("pattern", 'an object {"name": str, "regex": str} (or {"name": "script"})', pattern)
    if "base_size" in doc and doc["base_size"] != base_size(substrate):
        raise bad("base_size", f"{base_size(substrate)} for substrate {substrate!r}", doc["base_size"])
    if "vocab_size" in doc and not (_is_int(doc["vocab_size"]) and 0 < doc["vocab_size"] < 1 << 32):
        raise bad("vocab_size", "an integer in 1..2**32-1", doc["vocab_size"])
    from .normalization import NORMALIZATIONS

    if doc.get("normalization", "none") not in NORMALIZATIONS:
        raise bad("normalization", f"one of {list(NORMALIZATIONS)}", doc.get("normalization"))
    merges = doc["merges"]
    if not isinstance(merges, list):
        raise bad("merges", "a list of [left, right] id pairs", merges)
    # the usual file passes three C-speed passes; otherwise the loop names the first bad merge
    if not (set(map(type, merges)) <= {list} and set(map(len, merges)) <= {2}
            and set(map(type, itertools.chain.from_iterable(merges))) <= {int}):
        for rank, merge in enumerate(merges):
            if not (isinstance(merge, list) and len(merge) == 2 and _is_int(merge[0]) and _is_int(merge[1])):
                raise bad(f"merges[{rank}]", "a pair of integer ids [left, right]", merge)
    ids = list(itertools.chain.from_iterable(merges))
    if ids and (min(ids) < 0 or max(ids) > _MAX_ID):   # before numpy sees them (an int64 overflows)
        rank = next(r for r, m in enumerate(merges) if not (0 <= m[0] <= _MAX_ID and 0 <= m[1] <= _MAX_ID))
        raise bad(f"merges[{rank}]", f"a pair of ids in 0..{_MAX_ID}", merges[rank])
    specials = doc["special_tokens"]
    if not isinstance(specials, list):
        raise bad("special_tokens", 'a list of {"id": int, "text": str}', specials)
    for i, special in enumerate(specials):
        if not (isinstance(special, dict) and _is_int(special.get("id")) and isinstance(special.get("text"), str)
                and 0 <= special["id"] <= _MAX_ID):
            raise bad(f"special_tokens[{i}]", f'an object {{"id": 0..{_MAX_ID}, "text": str}}', special)
    texts = [special["text"] for special in specials]
    if len(set(texts)) < len(texts):
        seen: set = set()
        repeated = next(t for t in texts if t in seen or seen.add(t))  # type: ignore[func-returns-value]
        raise bad("special_tokens", "each text once (several texts may share an id)", repeated)
    id_map = doc.get("id_map")
    if id_map is not None and not (isinstance(id_map, list) and set(map(type, id_map)) <= {int}
                                   and (not id_map or (min(id_map) >= 0 and max(id_map) <= _MAX_ID))):
        raise bad("id_map", f"a list of integer model ids in 0..{_MAX_ID}", id_map)
    added = doc.get("added_tokens")
    if added is not None and not (isinstance(added, list) and all(
            isinstance(a, dict) and set(a) == {"text", "id", "normalized"} and isinstance(a["text"], str)
            and _is_int(a["id"]) and 0 <= a["id"] <= _MAX_ID and isinstance(a["normalized"], bool) for a in added)):
        raise bad("added_tokens", '[{"text": str, "id": int, "normalized": bool}, ...]', added)
    v2_fields = [k for k in ("char_integrity", "superbpe", "added_tokens") if k in doc]
    if doc.get("normalization", "none") != "none":
        v2_fields.append("normalization")
    if len({special["id"] for special in specials}) < len(specials):
        v2_fields.append("special_tokens sharing an id")
    if v2_fields and doc["version"] < 2:
        raise bad("version", f"2 for a file with {v2_fields}", doc["version"])
    if "char_integrity" in doc and doc["char_integrity"] is not True and doc["char_integrity"] != "prefix":
        raise bad("char_integrity", 'true or "prefix" (or absent)', doc["char_integrity"])
    if "superbpe" in doc:
        sb = doc["superbpe"]
        if isinstance(sb, dict) and "spans" in sb:
            from ..pretokenizer import SPAN_RULES

            if sb["spans"] not in SPAN_RULES[1:]:
                raise TokenizerFormatError(
                    f"{source}: field 'superbpe' names the span rule {sb['spans']!r}, which this version does not "
                    f"know (it reads {', '.join(map(repr, SPAN_RULES[1:]))}, or no 'spans' for 'v1'); encoding "
                    "by another rule would not give the tokens the file was trained for. Upgrade ube-stream or "
                    "re-train")
            sb = {k: v for k, v in sb.items() if k != "spans"}
        if not (isinstance(sb, dict) and set(sb) == {"stage1_merges", "max_words"}
                and _is_int(sb["stage1_merges"]) and 0 <= sb["stage1_merges"] <= len(merges)
                and _is_int(sb["max_words"]) and sb["max_words"] >= 1):
            raise bad("superbpe", f'an object {{"stage1_merges": 0..{len(merges)}, "max_words": >= 1}}', sb)
    if doc.get("training") is not None and not isinstance(doc["training"], dict):
        raise bad("training", "an object", doc["training"])
    if not isinstance(doc["fingerprint"], str):
        raise bad("fingerprint", "a 'sha256:<hex>' string", doc["fingerprint"])


def check_recorded(doc: Mapping[str, Any], *, pattern: str, fingerprint: str, vocab_size: int,
                   source: str) -> None:
    """The tokenizer built from ``doc`` must have the pattern, fingerprint and size the file records."""
    from ..pretokenizer import RULE_PATTERNS

    recorded = doc["pattern"]
    if recorded["name"] not in RULE_PATTERNS and pattern != recorded.get("regex"):
        raise TokenizerFormatError(
            f"{source}: pattern {recorded.get('name')!r} is recorded with a regex that differs from this "
            "version's; the file was edited or written by an incompatible version")
    if fingerprint != doc["fingerprint"]:
        raise TokenizerFormatError(
            f"{source}: fingerprint mismatch: the file records {doc['fingerprint']} but its content hashes "
            f"to {fingerprint}; the merges, special tokens or pattern were edited after training. "
            "Re-train, or restore the original file")
    if "vocab_size" in doc and doc["vocab_size"] != vocab_size:
        raise TokenizerFormatError(
            f"{source}: records vocab_size {doc['vocab_size']} but its merges and special tokens give {vocab_size}")


def read_text(path: str | os.PathLike) -> str:
    """The text of a tokenizer file, with the fix when it does not exist.  A local
    file is read only when it is a regular file of at most
    :data:`~ube_stream.storage.MAX_JSON_BYTES` (``/dev/zero``, a pipe or a
    huge file named as a tokenizer is refused before it is read)."""
    path = local_path(path)
    try:
        data = read_bounded(path, what="tokenizer file", error=TokenizerFormatError,
                            fix="pass an ube-stream tokenizer file")
        return data.decode("utf-8")
    except FileNotFoundError:
        raise TokenizerFormatError(f"{path}: no such tokenizer file; train one with `ube train`") from None
    except UnicodeDecodeError as exc:
        raise TokenizerFormatError(f"{path}: not UTF-8 text ({exc}); not an ube-stream tokenizer file") from None
