"""The schemas of a shard directory's JSON files (MANIFEST.json, unit markers
``units/<unit_id>.json``, the run plan ``units/_plan.json``) and the one small
checker that matches a document against a schema.

A file's fields are *trusted* only after :func:`check` has matched the whole
document against its schema: a type, a range, a length or a nesting level that
is not what the schema says is the error class the caller passes (a
:class:`~ube_stream.errors.UbeError` subclass), naming the file, the field
(``shards[3].tokens_file``) and what was expected.  Schemas are plain objects::

    SHARD = Obj({"name": Str(), "documents": Int(), "sha256": Hex(64)},
                optional={"index_sha256": Hex(64)})
    check(doc, Obj({"shards": List(SHARD)}), source="DIR/MANIFEST.json", error=ShardFormatError, fix="...")

Names of files inside the directory are :class:`RelPath` (checked on the name:
:func:`ube_stream.storage.name_problem`), then resolved with
:func:`ube_stream.storage.inside` where the directory is known.  The code that
writes these files and every reader check one definition
(:func:`check_shard_file`; ``index_format.read_json`` applies it).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..readers.batch import ON_ERROR_CHOICES, TEXT_MODES
from ..readers.formats import FORMAT_CHOICES
from ..storage import ErrorFactory, name_problem

__all__ = ["Schema", "Any_", "Int", "Str", "Hex", "RelPath", "Nullable", "List", "Map", "Obj", "check", "check_shard_file", "SHARD", "MANIFEST", "MARKER", "PLAN", "MAX_DEPTH"]

#: deepest nesting a free-form field (``skipped_files``) may have
MAX_DEPTH = 32
_INT_MAX = (1 << 63) - 1


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else \
        f"{type(value).__name__} of {len(value)} entries"
    return text if len(text) <= 60 else text[:57] + "..."


class Invalid(Exception):
    """Raised inside :func:`check`: ``field`` and ``expected`` (turned into the caller's error)."""

    def __init__(self, field: str, expected: str, found: Any):
        super().__init__(field)
        self.field, self.expected, self.found = field, expected, found


class Schema:
    """One node of a schema: :meth:`check` raises :class:`Invalid` naming ``where``."""

    expected = "a value"

    def check(self, value: Any, where: str, depth: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def fail(self, where: str, value: Any) -> Invalid:
        return Invalid(where, self.expected, value)


class Any_(Schema):
    """Any JSON value nested at most :data:`MAX_DEPTH` levels (provenance fields)."""

    expected = f"JSON nested at most {MAX_DEPTH} levels"

    def check(self, value: Any, where: str, depth: int) -> None:
        stack = [(value, depth)]
        while stack:
            item, level = stack.pop()
            if level > MAX_DEPTH:
                raise self.fail(where, value)
            if isinstance(item, dict):
                stack.extend((v, level + 1) for v in item.values())
            elif isinstance(item, list):
                stack.extend((v, level + 1) for v in item)


class Int(Schema):
    """An integer (not a bool) in ``lo..hi``."""

    def __init__(self, lo: int = 0, hi: int = _INT_MAX):
        self.lo, self.hi = lo, hi
        self.expected = (f"an integer in {lo}..{hi}" if hi != _INT_MAX else
                         "a non-negative integer" if lo == 0 else f"an integer >= {lo}")

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise self.fail(where, value)


class Str(Schema):
    """A string of at most ``max_len`` characters, one of ``choices`` when given."""

    def __init__(self, max_len: int = 1 << 16, choices: Optional[Sequence[str]] = None):
        self.max_len, self.choices = max_len, tuple(choices) if choices else None
        self.expected = f"one of {list(self.choices)}" if self.choices else f"a string of at most {max_len} characters"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not str or len(value) > self.max_len or (self.choices and value not in self.choices):
            raise self.fail(where, value)


class Hex(Schema):
    """Lowercase hex digits, exactly ``n`` of them, after an optional ``prefix``."""

    def __init__(self, n: int, prefix: str = ""):
        self.n, self.prefix = n, prefix
        self.expected = f"'{prefix}' and {n} hex digits" if prefix else f"{n} hex digits"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not str or not value.startswith(self.prefix):
            raise self.fail(where, value)
        digits = value[len(self.prefix):]
        if len(digits) != self.n or digits.strip("0123456789abcdef"):
            raise self.fail(where, value)


class RelPath(Schema):
    """A relative ``/``-separated path that stays inside its directory (by name)."""

    expected = "a relative path inside the directory (no absolute path, no '..')"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not str or name_problem(value) is not None:
            raise self.fail(where, value)


class Nullable(Schema):
    def __init__(self, inner: Schema):
        self.inner = inner
        self.expected = f"{inner.expected} or null"

    def check(self, value: Any, where: str, depth: int) -> None:
        if value is not None:
            try:
                self.inner.check(value, where, depth)
            except Invalid as exc:
                if exc.field == where:
                    raise self.fail(where, value) from None
                raise


class List(Schema):
    def __init__(self, item: Schema, max_len: int = 1 << 28):
        self.item, self.max_len = item, max_len
        self.expected = f"a list (of {item.expected})"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not list or len(value) > self.max_len:
            raise self.fail(where, value)
        if depth + 1 > MAX_DEPTH:
            raise Invalid(where, f"at most {MAX_DEPTH} nesting levels", value)
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]", depth + 1)


class Map(Schema):
    """An object with any string keys and values of one schema."""

    def __init__(self, value: Schema, max_len: int = 1 << 20):
        self.value, self.max_len = value, max_len
        self.expected = f"an object (of {value.expected})"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not dict or len(value) > self.max_len:
            raise self.fail(where, value)
        for key, item in value.items():
            self.value.check(item, f"{where}.{key}", depth + 1)


class Obj(Schema):
    """An object with ``fields`` (required) and ``optional`` fields; other keys are
    allowed (newer writers may add provenance)."""

    def __init__(self, fields: Mapping[str, Schema], optional: Optional[Mapping[str, Schema]] = None):
        self.fields, self.optional = dict(fields), dict(optional or {})
        self.expected = "an object with " + ", ".join(repr(k) for k in self.fields) if self.fields else "an object"

    def check(self, value: Any, where: str, depth: int) -> None:
        if type(value) is not dict:
            raise self.fail(where, value)
        prefix = f"{where}." if where else ""
        for key, schema in self.fields.items():
            if key not in value:
                raise Invalid(f"{prefix}{key}", f"present ({schema.expected})", "nothing")
            schema.check(value[key], prefix + key, depth + 1)
        for key, schema in self.optional.items():
            if key in value:
                schema.check(value[key], prefix + key, depth + 1)


def check(doc: Any, schema: Schema, *, source: str, error: ErrorFactory, fix: str) -> None:
    """Match ``doc`` against ``schema``: ``error(message)`` naming ``source``, the
    field, what was expected and what was found, followed by ``fix``."""
    try:
        schema.check(doc, "", 0)
    except Invalid as exc:
        field = f"field {exc.field!r}" if exc.field else "the document"
        raise error(f"{source}: {field} must be {exc.expected}, found {_shown(exc.found)}; {fix}") from None


# --------------------------------------------------------------------------- the files

_COUNT = Int()
_SHA256 = Hex(64)
_SOURCE = Obj({"path": Str(1 << 16), "source_id": _COUNT},
              optional={"size": Nullable(_COUNT), "format": Nullable(Str(choices=FORMAT_CHOICES)),
                        "rows_read": _COUNT, "documents": _COUNT, "skipped": Map(_COUNT),
                        "skipped_in_memory": Map(_COUNT)})
_TOKENIZER = Obj({"fingerprint": Hex(64, "sha256:")},
                 optional={"file": RelPath(), "substrate": Str(16), "vocab_size": Int(1, (1 << 32) - 1)})
_SPECIAL_IDS = Map(Nullable(Int(0, (1 << 32) - 1)))
# the reading options a rerun or `verify --shards` hands back to the readers: each must be one they accept
_OPTIONS = Obj({}, optional={"unit_rows": Nullable(Int(1)), "unit_bytes": Nullable(Int(1)),
                             "shard_tokens": Nullable(Int(1)), "column": Nullable(Str()),
                             "text_mode": Nullable(Str(choices=TEXT_MODES)),
                             "on_error": Nullable(Str(choices=ON_ERROR_CHOICES)),
                             "format": Nullable(Str(choices=FORMAT_CHOICES)), "split": Nullable(Str()),
                             "max_document_bytes": Nullable(Int(1)),
                             "unit_split": Nullable(Str(32)), "eos_token": Nullable(Str()),
                             "bos_token": Nullable(Str())})
#: one shard's entry in MANIFEST.json (``index_sha256``: written since the index checksum was added)
SHARD = Obj({"name": Str(256), "unit_id": Str(256), "tokens_file": RelPath(), "index_file": RelPath(),
             "documents": _COUNT, "tokens": _COUNT, "sha256": _SHA256},
            optional={"index_sha256": _SHA256, "index_bytes": _COUNT})
MANIFEST = Obj({"format": Str(choices=["ube-stream-shards"]), "version": Int(1, 1),
                "dtype": Str(choices=["uint32"]), "tokenizer": _TOKENIZER, "special_ids": _SPECIAL_IDS,
                "options": _OPTIONS, "sources": List(_SOURCE), "shards": List(SHARD),
                "totals": Obj({"documents": _COUNT, "tokens": _COUNT, "shards": _COUNT},
                              optional={"rows_read": _COUNT, "skipped": Map(_COUNT),
                                        "special_text": Map(_COUNT)})},
               optional={"ube_stream_version": Str(64), "skipped_files": Any_()})
#: ``units/<unit_id>.json``: a committed unit's record
MARKER = Obj({"unit_id": Str(256), "source_id": _COUNT, "documents": _COUNT, "tokens": _COUNT,
              "rows_read": _COUNT, "skipped": Map(_COUNT),
              "shards": List(Obj(dict(SHARD.fields, index_bytes=_COUNT, index_sha256=_SHA256)))},
             optional={"row_start": _COUNT, "row_stop": Nullable(_COUNT), "bytes": _COUNT,
                       "skip_examples": List(Str(1 << 20)), "special_text": Map(_COUNT)})
#: ``units/_plan.json``: the options of an unfinished run
#: (every field optional: the run compares the plan it would write with this one, field by field)
PLAN = Obj({}, optional={"format": Str(choices=["ube-stream-shards"]), "version": Int(1, 1),
                         "tokenizer": _TOKENIZER, "special_ids": _SPECIAL_IDS, "options": _OPTIONS,
                         "sources": List(_SOURCE), "skipped_files": Any_(), "units": List(Str(256))})

_KINDS: Dict[str, Tuple[Schema, str]] = {
    "MANIFEST.json": (MANIFEST, "the manifest is corrupt or was edited. Re-encode the directory"),
    "unit marker": (MARKER, "the unit will be encoded again on the next run"),
    "run plan": (PLAN, "delete the output directory's units/ folder (or the whole directory) and rerun"),
}


def check_shard_file(doc: Any, what: str, *, source: str, error: ErrorFactory) -> None:
    """Check a MANIFEST (``what="MANIFEST.json"``), unit marker or run plan against its
    schema (``index_format.read_json`` adds what a marker's fields must agree on)."""
    schema, fix = _KINDS[what]
    check(doc, schema, source=source, error=error, fix=fix)
