"""``verify_shards``: a finished shard directory checked against its sources.

The directory is read straight from the format spec with numpy
(``verification.shard_files``, not through ``ube_stream.shards``), so a bug in the
shard reader cannot hide one in the writer; the package reader
(``TokenShards``) is then checked against that reading.  One task per work unit (the plan is rebuilt from MANIFEST's sources
and ``unit_rows``): check the unit's shard files (header, sizes, sha256,
fingerprint, offsets), read the unit's rows with the readers, and compare
every stored document with its row: the stored tokens minus the BOS/EOS the
encoding added must decode to the row and equal ``encode(row)``.  The parent
then checks the row accounting of every source.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import pickle
import tempfile
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .._faults import kill_point
from .._version import __version__
from ..errors import LockError, TokenizerFormatError
from ..executors import worker_state
from ..runs.corpus import source_fingerprint
from ..runs.engine import seed_tokenizer, tokenizer_file, worker_tokenizer
from ..runs.records import UnitRecords
from ..runs.run_dir import RunDir, make_root, remove_dead_runs
from ..storage import dumps_json, is_url, local_path
from ..storage import isfile as storage_isfile
from ..tokenizer import as_tokenizer
from .report import Mismatch, VerifyReport, default_workers, run_tasks
from .shard_files import ShardData, check_shard, read_manifest

# --------------------------------------------------------------------------- one unit

@dataclasses.dataclass
class UnitTask:
    directory: str
    unit_id: str
    unit: Any                      # readers.WorkUnit, or None when no source unit has this id
    shards: List[Dict[str, Any]]
    selected: Optional[np.ndarray]  # None: every document; else unit-local document indices to check
    read_source: bool


@dataclasses.dataclass
class UnitResult:
    report: VerifyReport
    documents_by_source: Dict[int, int]
    rows_read: Optional[int] = None
    documents_read: Optional[int] = None
    skipped: Optional[Dict[str, int]] = None


def shard_unit(task: UnitTask, directory: str, manifest: Dict[str, Any], tokenizer: Optional[Tuple[str, str]],
               max_examples: int) -> UnitResult:
    """The unit function: :func:`unit_task` with the tokenizer ``(file, fingerprint)``
    loaded once per worker process (never sent with the task).  It writes
    nothing: the driver commits each result it returns (:func:`_verify_shards`),
    so resuming works the same on any executor."""
    tok = None if tokenizer is None else worker_state(worker_tokenizer, *tokenizer)
    return unit_task(task, directory, manifest, tok, max_examples)


def _results(records: str) -> UnitRecords:
    """The finished units' results under ``records``: ``<hash of unit id>.pickle``."""
    return UnitRecords(records, suffix=".pickle", hashed_names=True, dump=pickle.dumps,
                       load=lambda data, source: pickle.loads(data))


@contextlib.contextmanager
def _resumable(parts: Dict[str, Any]) -> Iterator[str]:
    """A run directory for one verification (``$TMPDIR/ube-verify-<uid>/run-<key>/``
    on the driver's machine, ``<key>`` hashing ``parts``: the MANIFEST's bytes, the
    tokenizer, the options and every source's size and modification time, not the
    executor): yields its ``units/`` folder, where the driver records each
    finished unit's result.  Removed when the verification
    finishes; kept when it fails or is killed, so the same call again checks only
    the units without a record.  Born locked and removed only when dead
    (:mod:`ube_stream.runs.run_dir`); a second live run of the same key works apart."""
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    root = os.path.join(tempfile.gettempdir(), f"ube-verify-{uid}")
    key = hashlib.sha256(dumps_json(parts).encode("utf-8")).hexdigest()[:24]
    make_root(root)
    remove_dead_runs(root, "run-", keep=os.path.join(root, f"run-{key}"))   # ours is resumed, not removed
    what = "the verification's work directory"
    try:
        run = RunDir(root, f"run-{key}", what).claim()
    except LockError:
        run = RunDir(root, f"run-private-{uuid.uuid4().hex[:16]}", what).claim()
    records = os.path.join(run.path, "units")
    try:
        os.makedirs(records, exist_ok=True)
        yield records
    except BaseException:
        run.release()
        raise
    run.remove()
    with contextlib.suppress(OSError):
        os.rmdir(root)      # only when empty


def unit_task(task: UnitTask, directory: str, manifest: Dict[str, Any], tok, max_examples: int) -> UnitResult:
    report = VerifyReport("shards", max_examples=max_examples)
    fingerprint = manifest["tokenizer"]["fingerprint"]
    n_sources = len(manifest["sources"])
    shards = [check_shard(directory, record, fingerprint, n_sources, tok.vocab_size if tok else None, report)
              for record in task.shards]
    documents_by_source: Dict[int, int] = {}
    for data in shards:
        if data is not None:
            ids, counts = np.unique(data.source_ids, return_counts=True)
            for s, n in zip(ids.tolist(), counts.tolist()):
                documents_by_source[s] = documents_by_source.get(s, 0) + n
    result = UnitResult(report, documents_by_source)
    if task.unit is None or not task.read_source or tok is None:
        return result
    if any(data is None for data in shards):
        report.note("documents of shards that failed their structural checks were not compared")
    _compare_documents(task, [d for d in shards if d is not None], manifest, tok, report, result)
    return result


def _compare_documents(task: UnitTask, shards: List[ShardData], manifest: Dict[str, Any], tok,
                       report: VerifyReport, result: UnitResult) -> None:
    """Every stored document of the unit against its source row.

    A batch whose rows are stored in order in one shard (the normal case) is
    checked in bulk, at about the cost of encoding it: one re-encode of the
    batch (with the BOS/EOS the encoder adds) equal to the stored slice and
    its offsets, and one decode of the stored slice equal to the batch's bytes
    with the special tokens' texts between documents (a special token ends a
    character, so each document decodes on its own).  Any other batch, or one
    that fails in bulk, is checked document by document, which names each
    mismatch.  The package reader is checked per shard (see :func:`_check_reader_shard`)."""
    unit = task.unit
    path = unit.source.path
    options = manifest.get("options", {})
    special = manifest.get("special_ids", {})
    eos, bos = special.get("eos"), special.get("bos")
    where = _Where(shards)
    rows = np.concatenate([d.rows for d in shards]).astype(np.int64) if shards else np.zeros(0, np.int64)
    sids = np.concatenate([d.source_ids for d in shards]) if shards else np.zeros(0, np.int64)
    position_of = _positions(task, shards, rows, sids, where, report)
    selected = None if task.selected is None else set(task.selected.tolist())
    reader = _open_reader(task.directory, report)
    reader_ok = [reader is not None and _check_reader_shard(reader, data, path, report) for data in shards]
    separators = _separator_bytes(tok, bos, eos)
    from ..readers.inputs import SkipCounter

    skips = SkipCounter()
    seen = np.zeros(len(rows), dtype=bool)
    documents_read = 0
    for batch in _batches(unit, options, skips):
        documents_read += len(batch)
        if selected is None and _bulk_batch(batch, rows, position_of, where, shards, tok, bos, eos, separators,
                                            report):
            first = position_of[int(batch.rows[0])]
            seen[first:first + len(batch)] = True
            n = len(batch)
            if reader_ok[where[first][0]]:
                report.count("reader documents", n)
            else:
                for i in range(first, first + n):
                    k, d = where[i]
                    data = shards[k]
                    stored = np.asarray(data.tokens[data.doc_offsets[d]:data.doc_offsets[d + 1]])
                    inner = stored[(bos is not None):stored.size - (eos is not None)]
                    _check_reader(reader, data.first_doc + d, stored, inner, (path, int(rows[i])), report,
                                  dict(shard=data.name, document=d))
            continue
        texts = batch.to_pylist()
        batch_rows = batch.rows.tolist()
        picks = []
        for j, row in enumerate(batch_rows):
            position = position_of.get(row)
            if position is None:
                report.fail(Mismatch("documents", path, row, "the source row was read but no stored document "
                                     "records it (missing from the shards)"))
                continue
            seen[position] = True
            if selected is None or position in selected:
                picks.append((j, position))
        if not picks:
            continue
        chosen = [texts[j] for j, _ in picks]
        encoded = tok.encode_ordinary_batch(chosen)   # corpus text: special-token text is text
        for (j, i), text, expected in zip(picks, chosen, encoded):
            k, d = where[i]
            data = shards[k]
            stored = np.asarray(data.tokens[data.doc_offsets[d]:data.doc_offsets[d + 1]])
            where_kw: Dict[str, Any] = dict(shard=data.name, document=d)
            inner = stored
            if bos is not None:
                if inner.size == 0 or int(inner[0]) != bos:
                    report.fail(Mismatch("special tokens", path, batch_rows[j], f"document does not start with "
                                         f"BOS {bos}: {stored[:4].tolist()}", **where_kw))
                inner = inner[1:]
            if eos is not None:
                if inner.size == 0 or int(inner[-1]) != eos:
                    report.fail(Mismatch("special tokens", path, batch_rows[j], f"document does not end with "
                                         f"EOS {eos}: {stored[-4:].tolist()}", **where_kw))
                inner = inner[:-1]
            try:
                decoded = tok.decode(inner)
            except ValueError as exc:
                decoded = f"<{type(exc).__name__}: {exc}>"
            expected_text = tok.normalize(text)   # the row as the encoder saw it (NFC for nfc tokenizers)
            if decoded != expected_text:
                report.fail(Mismatch.of_texts("decoded documents", path, batch_rows[j], expected_text, decoded,
                                              message="stored tokens do not decode to the source row"
                                              + (" (NFC-normalised)" if expected_text is not text else ""),
                                              **where_kw))
            report.count("decoded documents", 1)
            if not np.array_equal(inner, expected):
                n = min(inner.size, expected.size)
                diff = np.flatnonzero(inner[:n] != expected[:n])
                at = int(diff[0]) if diff.size else n
                report.fail(Mismatch("re-encoded documents", path, batch_rows[j],
                                     f"re-encoding the source row differs from the stored tokens at token {at}: "
                                     f"stored {inner[at:at + 6].tolist()}, re-encoded {expected[at:at + 6].tolist()} "
                                     f"({inner.size} vs {expected.size} tokens)", **where_kw))
            report.count("re-encoded documents", 1)
            report.count("tokens", int(stored.size))
            if reader is not None and (not reader_ok[k] or selected is not None):
                _check_reader(reader, data.first_doc + d, stored, inner, (path, batch_rows[j]), report, where_kw)
            elif reader is not None:
                report.count("reader documents", 1)
    for i in np.flatnonzero(~seen).tolist():
        if int(rows[i]) in position_of and position_of[int(rows[i])] == i:
            k, d = where[i]
            report.fail(Mismatch("documents", path, int(rows[i]), "stored document's source row was not read "
                                 "from the source (gone, or skipped now)", shard=shards[k].name, document=d))
    result.documents_read = documents_read
    result.skipped = dict(skips.counts)
    result.rows_read = documents_read + skips.total


class _Where:
    """``where[i]``: ``(shard k, document d in it)`` of the unit's ``i``-th stored document."""

    def __init__(self, shards: List[ShardData]):
        self.starts = np.cumsum([0] + [data.rows.shape[0] for data in shards])

    def __getitem__(self, i: int) -> Tuple[int, int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return k, int(i - self.starts[k])


def _batches(unit, options: Dict[str, Any], skips):
    from ..readers.inputs import DEFAULT_MAX_DOCUMENT_BYTES, read_unit

    return read_unit(unit, column=options.get("column", "text"), text_mode=options.get("text_mode", "line"),
                     on_error=options.get("on_error", "raise"), skips=skips,
                     max_document_bytes=options.get("max_document_bytes", DEFAULT_MAX_DOCUMENT_BYTES))


def _positions(task: UnitTask, shards: List[ShardData], rows: np.ndarray, sids: np.ndarray, where,
               report: VerifyReport) -> Dict[int, int]:
    """``{source row: position among the unit's stored documents}``, failing the
    documents that lie outside the unit or repeat a row (checked in bulk first)."""
    unit = task.unit
    path = unit.source.path
    stop = unit.row_stop if unit.row_stop is not None else np.iinfo(np.int64).max
    inside = (sids == unit.source.source_id) & (rows >= unit.row_start) & (rows < stop)
    if inside.all() and (rows.size < 2 or bool((np.diff(rows) > 0).all())):
        return dict(zip(rows.tolist(), range(rows.size)))
    position_of: Dict[int, int] = {}
    for i, (row, sid) in enumerate(zip(rows.tolist(), sids.tolist())):
        k, d = where[i]
        if not inside[i]:
            report.fail(Mismatch("provenance", path, row, f"document recorded as source {sid} row {row}, outside "
                                 f"its unit {task.unit_id} (source {unit.source.source_id}, rows {unit.row_start}.."
                                 f"{'' if unit.row_stop is None else unit.row_stop - 1})",
                                 shard=shards[k].name, document=d))
        elif row in position_of:
            report.fail(Mismatch("provenance", path, row, "two documents record the same source row",
                                 shard=shards[k].name, document=d))
        else:
            position_of[row] = i
    return position_of


def _separator_bytes(tok, bos: Optional[int], eos: Optional[int]) -> Optional[Tuple[bytes, bytes]]:
    """The UTF-8 texts of the BOS / EOS tokens the encoder added (None: neither, no bulk decode)."""
    if bos is None and eos is None:
        return None
    try:
        return (b"" if bos is None else tok.decode_bytes([bos]), b"" if eos is None else tok.decode_bytes([eos]))
    except ValueError:
        return None


def _bulk_batch(batch, rows: np.ndarray, position_of: Dict[int, int], where, shards: List[ShardData], tok,
                bos: Optional[int], eos: Optional[int], separators, report: VerifyReport) -> bool:
    """Check a whole batch at once when its rows are stored in order in one
    shard; False (nothing counted) when it is not, or when anything differs."""
    n = len(batch)
    if n == 0 or separators is None:
        return False
    first = position_of.get(int(batch.rows[0]))
    if first is None or first + n > len(rows) or where[first][0] != where[first + n - 1][0]:
        return False
    if not np.array_equal(rows[first:first + n], batch.rows):
        return False
    k, d = where[first]
    data = shards[k]
    offsets_stored = np.asarray(data.doc_offsets[d:d + n + 1], dtype=np.int64)
    stored = np.asarray(data.tokens[offsets_stored[0]:offsets_stored[-1]])
    from ..tokenizer.normalization import normalize_utf8

    text, offsets = normalize_utf8(tok.normalization, *batch.utf8())   # the rows as the encoder sees them
    ids, token_offsets = tok.encode_utf8_batch(text, offsets, bos_id=bos, eos_id=eos)
    if not (np.array_equal(token_offsets, offsets_stored - offsets_stored[0]) and np.array_equal(ids, stored)):
        return False
    try:
        decoded = tok.decode_bytes(stored)
    except ValueError:
        return False
    if not _decodes_to(decoded, text, offsets, *separators):
        return False
    report.count("decoded documents", n)
    report.count("re-encoded documents", n)
    report.count("tokens", int(stored.size))
    return True


def _decodes_to(decoded: bytes, data: np.ndarray, offsets: np.ndarray, before: bytes, after: bytes) -> bool:
    """Whether ``decoded == b"".join(before + doc + after for doc in the batch)``,
    checked with numpy: the separators at their places, the rest equal to the
    batch's bytes."""
    got = np.frombuffer(decoded, np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    n, extra = lengths.size, len(before) + len(after)
    if got.size != int(offsets[-1] - offsets[0]) + n * extra:
        return False
    starts = offsets[:-1] - offsets[0] + np.arange(n, dtype=np.int64) * extra   # of each document's `before`
    places = np.concatenate([starts[:, None] + np.arange(len(before)),
                             (starts + len(before) + lengths)[:, None] + np.arange(len(after))], axis=1).ravel()
    content = np.ones(got.size, dtype=bool)
    content[places] = False
    return (np.array_equal(got[places], np.tile(np.frombuffer(before + after, np.uint8), n))
            and np.array_equal(got[content], data[offsets[0]:offsets[-1]]))


def _open_reader(directory: str, report: VerifyReport):
    """The package's own reader (``TokenShards``), to check it against the spec reading here."""
    from ..shards import TokenShards

    try:
        return TokenShards(directory, verify="none")
    except ValueError as exc:
        report.fail(Mismatch("reader", directory, "-", f"TokenShards cannot open the directory: {exc}"))
        return None


def _check_reader_shard(reader, data: ShardData, path: str, report: VerifyReport) -> bool:
    """The package reader's arrays of one shard equal the spec reading (tokens,
    offsets, rows, sources), and its per-document calls (``doc``,
    ``content_ids``, ``source``) agree on the shard's first 8 and every 1009th
    document; False when anything differs (each document is then checked with
    :func:`_check_reader`, which names it)."""
    if not data.rows.shape[0]:
        return True
    starts = np.cumsum([0] + [len(s) for s in reader.shards])
    try:
        k = int(np.searchsorted(starts, data.first_doc, side="right")) - 1
        shard = reader.shards[k]
        same = (int(starts[k]) == data.first_doc and shard.name == data.name
                and np.array_equal(np.asarray(shard.doc_offsets), np.asarray(data.doc_offsets))
                and np.array_equal(np.asarray(shard.rows), np.asarray(data.rows))
                and np.array_equal(np.asarray(shard.source_ids), np.asarray(data.source_ids))
                and np.array_equal(np.asarray(shard.tokens), np.asarray(data.tokens)))
    except (ValueError, IndexError, OSError, AttributeError):
        return False
    if not same:
        return False
    n = data.rows.shape[0]
    bos = reader.special_ids.get("bos") is not None
    eos = reader.special_ids.get("eos") is not None
    for d in sorted(set(range(min(n, 8))) | set(range(0, n, 1009))):
        stored = np.asarray(data.tokens[data.doc_offsets[d]:data.doc_offsets[d + 1]])
        try:
            found = (np.asarray(reader.doc(data.first_doc + d)), np.asarray(reader.content_ids(data.first_doc + d)),
                     tuple(reader.source(data.first_doc + d)))
        except (ValueError, IndexError, OSError):
            return False
        if not (np.array_equal(found[0], stored) and np.array_equal(found[1], stored[bos:stored.size - eos])
                and found[2] == (path, int(data.rows[d]))):
            return False
    return True


def _check_reader(reader, i: int, stored: np.ndarray, inner: np.ndarray, source, report: VerifyReport,
                  where_kw) -> None:
    """``TokenShards.doc / content_ids / source`` of document ``i`` agree with the spec reading."""
    try:
        found: Tuple[Any, Any, Any] = (np.asarray(reader.doc(i)), np.asarray(reader.content_ids(i)),
                                       reader.source(i))
    except (ValueError, IndexError, OSError) as exc:
        found = (None, None, f"<{type(exc).__name__}: {exc}>")
    if found[0] is None or not np.array_equal(found[0], stored) or not np.array_equal(found[1], inner) \
            or tuple(found[2]) != tuple(source):
        report.fail(Mismatch("reader", source[0], source[1], f"TokenShards document {i} differs from the index "
                             f"read by the spec: source {found[2]}, tokens "
                             f"{None if found[0] is None else found[0][:6].tolist()}", **where_kw))
    report.count("reader documents", 1)


# --------------------------------------------------------------------------- the directory

def _sources(manifest: Dict[str, Any], report: VerifyReport):
    """``readers.Source`` of every MANIFEST source that still exists (by source id)."""
    from .. import readers

    options = manifest.get("options", {})
    found = {}
    for record in manifest["sources"]:
        path, sid = record["path"], int(record["source_id"])
        report.count("sources", 1)
        if path.startswith(readers.MEMORY_PREFIX):
            report.note(f"source {sid} is {path}: data held in memory when encoding is not kept, so its "
                        "documents are checked by decode / re-encode only, not against a source")
            continue
        if not (storage_isfile(path)):
            report.fail(Mismatch("sources", path, "-", "source file is missing: its documents cannot be "
                                 "compared (restore it at this path)"))
            continue
        source = readers.resolve_inputs([path], column=options.get("column", "text"),
                                        text_mode=options.get("text_mode", "line"), format=record.get("format"),
                                        on_error=options.get("on_error", "raise"))[0]
        if record.get("size") is not None and source.size != int(record["size"]):
            report.fail(Mismatch("sources", path, "-", f"source file is {source.size} bytes, MANIFEST recorded "
                                 f"{record['size']}: it changed after encoding"))
        found[sid] = dataclasses.replace(source, source_id=sid)
    return found


def _plan(directory: str, manifest: Dict[str, Any], sources, sample: Optional[int], report: VerifyReport) -> List[UnitTask]:
    from .. import readers

    options = manifest.get("options", {})
    unit_rows = options.get("unit_rows") or readers.DEFAULT_UNIT_ROWS
    unit_bytes = options.get("unit_bytes")   # absent: a directory written before units were cut by bytes too
    even = options.get("unit_split") == "even"   # absent: written before units of a file were made even
    units = {u.unit_id: u for u in readers.plan_units(list(sources.values()), unit_rows=unit_rows,
                                                      unit_bytes=unit_bytes, even_bytes=even,
                                                      arrow_batches=options.get("arrow_units") == "batches")}
    by_unit: Dict[str, List[Dict[str, Any]]] = {}
    for record in manifest.get("shards", []):
        by_unit.setdefault(record.get("unit_id", ""), []).append(record)
    unit_ids = sorted(set(units) | set(by_unit))
    missing_source = {int(r["source_id"]) for r in manifest["sources"]} - set(sources)
    selected: Dict[str, Optional[np.ndarray]] = {u: None for u in unit_ids}
    total = int(sum(int(r["documents"]) for r in manifest.get("shards", [])))
    if sample is not None and sample < total:
        picks = np.sort(np.random.default_rng(0).choice(total, size=sample, replace=False))
        start = 0
        for u in unit_ids:
            n = sum(int(r["documents"]) for r in by_unit.get(u, []))
            local = picks[(picks >= start) & (picks < start + n)] - start
            selected[u] = local if local.size else np.zeros(0, np.int64)
            start += n
        report.note(f"content compared for a sample of {sample} of {total} documents (seed 0); headers, "
                    "checksums and MANIFEST accounting checked in full")
    first = 0
    for record in manifest.get("shards", []):  # global document index of each shard's first document
        record["_first_doc"] = first
        first += int(record["documents"])
    tasks = []
    for u in unit_ids:
        unit = units.get(u)
        if unit is None and not any(u.startswith(f"{s:05d}-") for s in missing_source):
            report.fail(Mismatch("unit plan", "-", "-", f"shards of unit {u} match no unit of the plan rebuilt "
                                 f"from MANIFEST (unit_rows {unit_rows}); their documents are not compared"))
        chosen = selected[u]
        read = unit is not None and (chosen is None or chosen.size > 0)
        tasks.append(UnitTask(directory, u, unit, sorted(by_unit.get(u, []), key=lambda r: r["name"]), selected[u], read))
    return tasks


def _run_resumable(tasks: List[UnitTask], weights: List[int], args: Tuple, store: UnitRecords, directory: str, *,
                   workers: Optional[int], show_progress: bool, executor, ray_address: Optional[str]
                   ) -> List[UnitResult]:
    """:func:`shard_unit` over the tasks whose result ``store`` does not hold
    (those of an earlier, interrupted run are taken from it), the driver
    committing each result as its unit finishes, on any executor; the results in task order."""
    results: Dict[str, UnitResult] = store.committed([t.unit_id for t in tasks])
    todo = [t for t in tasks if t.unit_id not in results]
    todo_weights = [w for t, w in zip(tasks, weights) if t.unit_id not in results]

    def commit(index: int, result: UnitResult) -> None:
        unit_id = todo[index].unit_id
        store.commit(unit_id, result)      # the unit's commit point
        kill_point(directory, unit_id)
        results[unit_id] = result

    run_tasks(shard_unit, todo, args, workers=default_workers(workers, len(todo)), desc="verify shards",
              show_progress=show_progress, weights=todo_weights,
              unit="doc", executor=executor, ray_address=ray_address, on_result=commit)
    return [results[t.unit_id] for t in tasks]


def _check_accounting(manifest: Dict[str, Any], results: List[UnitResult], tasks: List[UnitTask],
                      report: VerifyReport) -> None:
    in_index: Dict[int, int] = {}
    for result in results:
        for s, n in result.documents_by_source.items():
            in_index[s] = in_index.get(s, 0) + n
    totals = {"documents": 0, "rows_read": 0}
    for record in manifest["sources"]:
        sid, path = int(record["source_id"]), record["path"]
        documents, rows_read = int(record.get("documents", 0)), int(record.get("rows_read", 0))
        skipped = {k: int(v) for k, v in record.get("skipped", {}).items()}
        totals["documents"] += documents
        totals["rows_read"] += rows_read
        report.count("row accounting", 1)
        if rows_read != documents + sum(skipped.values()):
            report.fail(Mismatch("row accounting", path, "-", f"MANIFEST: rows_read {rows_read} != documents "
                                 f"{documents} + skipped {sum(skipped.values())} {skipped}"))
        if in_index.get(sid, 0) != documents:
            report.fail(Mismatch("row accounting", path, "-", f"the shard indexes hold {in_index.get(sid, 0)} "
                                 f"documents of this source, MANIFEST says {documents}"))
        mine = [r for t, r in zip(tasks, results) if t.unit is not None and t.unit.source.source_id == sid]
        if mine and all(t.read_source and t.selected is None for t, r in zip(tasks, results)
                        if t.unit is not None and t.unit.source.source_id == sid) \
                and all(r.rows_read is not None for r in mine):
            read = sum(r.rows_read for r in mine if r.rows_read is not None)
            docs = sum(r.documents_read for r in mine if r.documents_read is not None)
            now_skipped: Dict[str, int] = {}
            for r in mine:
                for k, v in (r.skipped or {}).items():
                    now_skipped[k] = now_skipped.get(k, 0) + v
            if (read, docs, dict(sorted(now_skipped.items()))) != (rows_read, documents, dict(sorted(skipped.items()))):
                report.fail(Mismatch("row accounting", path, "-", f"reading the source now gives {read} rows: "
                                     f"{docs} documents, skipped {now_skipped}; MANIFEST recorded {rows_read} rows: "
                                     f"{documents} documents, skipped {skipped}"))
    recorded = manifest.get("totals", {})
    shard_docs = sum(int(r["documents"]) for r in manifest.get("shards", []))
    shard_tokens = sum(int(r["tokens"]) for r in manifest.get("shards", []))
    for key, value in (("documents", totals["documents"]), ("rows_read", totals["rows_read"]),
                       ("tokens", shard_tokens), ("shards", len(manifest.get("shards", [])))):
        if key in recorded and int(recorded[key]) != value:
            report.fail(Mismatch("row accounting", "MANIFEST.json", "totals", f"totals.{key} is {recorded[key]}, "
                                 f"the sources/shards add up to {value}"))
    if shard_docs != totals["documents"]:
        report.fail(Mismatch("row accounting", "MANIFEST.json", "shards", f"shards hold {shard_docs} documents, "
                             f"sources record {totals['documents']}"))


def verify_shards(directory, *, tokenizer=None, workers: Optional[int] = None, sample: Optional[int] = None,
                  show_progress: bool = True, max_examples: int = 10, keep_going: bool = False,
                  executor: Any = "local", ray_address: Optional[str] = None) -> VerifyReport:
    """Check a finished shard directory against its sources.

    Always: MANIFEST format, every index header (magic, version, width, counts,
    tokenizer fingerprint, token-file sha256 against the bytes on disk and
    MANIFEST), index sizes and offsets, the row accounting (per source: rows
    read = documents + skipped, and what the readers find now), and the
    tokenizer file's fingerprint against MANIFEST.  Then, for every document
    (or a deterministic ``sample`` of about ``sample`` documents): its source row
    (MANIFEST ``sources`` + per-document ``(source_id, row)``, read by work unit
    with the readers) must decode from the stored tokens minus the EOS/BOS the
    encoding added, and re-encoding the row must give exactly the stored tokens.
    ``tokenizer`` overrides ``DIR/tokenizer.json``.

    A tokenizer that is not the one the shards were encoded with (another
    fingerprint, or other special-token ids) stops the check there, with that
    one failure: every document would differ.  ``keep_going=True``
    (``--keep-going``) compares every document anyway.
    """
    directory = local_path(directory)
    if is_url(directory):   # checked on the local copy TokenShards reads (downloaded bytes, sha256 and all)
        from ..shards.remote import cached_directory

        directory = cached_directory(directory)
    with tempfile.TemporaryDirectory(prefix="ube-verify-") as scratch:
        return _verify_shards(directory, tokenizer, workers=workers, sample=sample, show_progress=show_progress,
                              max_examples=max_examples, keep_going=keep_going, executor=executor,
                              ray_address=ray_address, scratch=scratch)


def _verify_shards(directory: str, tokenizer, *, workers: Optional[int], sample: Optional[int],
                   show_progress: bool, max_examples: int, keep_going: bool, executor, ray_address: Optional[str],
                   scratch: str) -> VerifyReport:
    tok_file = None
    if tokenizer is not None:
        tokenizer, tok_file = tokenizer_file(tokenizer, scratch)
    if sample is not None and sample < 0:
        raise ValueError(f"sample must be a non-negative number of documents, got {sample}")
    report = VerifyReport("shards", max_examples=max_examples)
    manifest = read_manifest(directory)
    fingerprint = manifest["tokenizer"]["fingerprint"]
    tok_path = os.path.join(directory, manifest["tokenizer"].get("file", "tokenizer.json"))
    tok = tokenizer
    report.count("tokenizer", 1)
    if tok is None:
        try:
            tok = as_tokenizer(tok_path)
            tok_file = tok_path
        except TokenizerFormatError as exc:
            report.fail(Mismatch("tokenizer", tok_path, "-", f"{exc}; the documents cannot be compared"))
    if tok is not None:
        if tok.fingerprint != fingerprint:
            report.fail(Mismatch("tokenizer", tok_path if tokenizer is None else "<tokenizer argument>", "-",
                                 f"tokenizer fingerprint {tok.fingerprint} differs from MANIFEST {fingerprint}: "
                                 "not the tokenizer these shards were encoded with"))
        options, special = manifest.get("options", {}), manifest.get("special_ids", {})
        for role in ("eos", "bos"):
            name = options.get(f"{role}_token")
            if special.get(role) is not None and tok.special_tokens.get(name) != special[role]:
                report.fail(Mismatch("tokenizer", tok_path, "-", f"MANIFEST {role} id {special[role]} ({name!r}) is "
                                     f"{tok.special_tokens.get(name)} in this tokenizer"))
    if report.failed.get("tokenizer") and not keep_going:
        report.note("stopped at the tokenizer mismatch: no document was compared (each would differ); pass "
                    "the tokenizer the shards were encoded with, or keep_going=True (--keep-going) to compare "
                    "every document anyway")
        return report
    sources = _sources(manifest, report)
    tasks = _plan(directory, manifest, sources, sample, report)
    weights = [sum(int(r["documents"]) for r in t.shards) for t in tasks]   # documents, as every corpus pass counts
    worker_tok = None
    if tok is not None and tok_file is not None:
        worker_tok = (tok_file, tok.fingerprint)
        seed_tokenizer(tok, tok_file)      # units run here (one worker) use it; workers load the file once
    slim = {k: manifest[k] for k in ("tokenizer", "sources", "options", "special_ids") if k in manifest}
    with open(os.path.join(directory, "MANIFEST.json"), "rb") as f:
        manifest_sha = hashlib.sha256(f.read()).hexdigest()
    parts = {"ube_stream_version": __version__, "directory": os.path.abspath(directory), "manifest": manifest_sha,
             "tokenizer": None if tok is None else tok.fingerprint, "sample": sample, "max_examples": max_examples,
             "sources": [source_fingerprint(s.path) for _, s in sorted(sources.items())]}
    with _resumable(parts) as records:
        results = _run_resumable(tasks, weights, (directory, slim, worker_tok, max_examples), _results(records),
                                 directory, workers=workers, show_progress=show_progress, executor=executor,
                                 ray_address=ray_address)
    for result in results:
        report.merge(result.report)
    _check_accounting(manifest, results, tasks, report)
    return report
