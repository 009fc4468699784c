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

import dataclasses
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..errors import TokenizerFormatError
from ..storage import is_url, local_path
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
    from ..readers.inputs import SkipCounter, read_unit

    unit = task.unit
    path = unit.source.path
    options = manifest.get("options", {})
    special = manifest.get("special_ids", {})
    eos, bos = special.get("eos"), special.get("bos")
    where = [(k, d) for k, data in enumerate(shards) for d in range(data.rows.shape[0])]
    rows = np.concatenate([d.rows for d in shards]) if shards else np.zeros(0, np.int64)
    sids = np.concatenate([d.source_ids for d in shards]) if shards else np.zeros(0, np.int64)
    position_of: Dict[int, int] = {}
    for i, (row, sid) in enumerate(zip(rows.tolist(), sids.tolist())):
        k, d = where[i]
        if sid != unit.source.source_id or row < unit.row_start or (unit.row_stop is not None and row >= unit.row_stop):
            report.fail(Mismatch("provenance", path, row, f"document recorded as source {sid} row {row}, outside "
                                 f"its unit {task.unit_id} (source {unit.source.source_id}, rows {unit.row_start}.."
                                 f"{'' if unit.row_stop is None else unit.row_stop - 1})",
                                 shard=shards[k].name, document=d))
        elif row in position_of:
            report.fail(Mismatch("provenance", path, row, "two documents record the same source row",
                                 shard=shards[k].name, document=d))
        else:
            position_of[row] = i
    selected = None if task.selected is None else set(task.selected.tolist())
    reader = _open_reader(task.directory, report)
    skips = SkipCounter()
    seen = set()
    documents_read = 0
    for batch in read_unit(unit, column=options.get("column", "text"), text_mode=options.get("text_mode", "line"),
                           on_error=options.get("on_error", "raise"), skips=skips):
        texts = batch.to_pylist()
        batch_rows = batch.rows.tolist()
        documents_read += len(texts)
        picks = []
        for j, row in enumerate(batch_rows):
            position = position_of.get(row)
            if position is None:
                report.fail(Mismatch("documents", path, row, "the source row was read but no stored document "
                                     "records it (missing from the shards)"))
                continue
            seen.add(row)
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
            if decoded != text:
                report.fail(Mismatch.of_texts("decoded documents", path, batch_rows[j], text, decoded,
                                              message="stored tokens do not decode to the source row", **where_kw))
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
            if reader is not None:
                _check_reader(reader, data.first_doc + d, stored, inner, (path, batch_rows[j]), report, where_kw)
    for row, i in position_of.items():
        if row not in seen:
            k, d = where[i]
            report.fail(Mismatch("documents", path, row, "stored document's source row was not read from the "
                                 "source (gone, or skipped now)", shard=shards[k].name, document=d))
    result.documents_read = documents_read
    result.skipped = dict(skips.counts)
    result.rows_read = documents_read + skips.total


def _open_reader(directory: str, report: VerifyReport):
    """The package's own reader (``TokenShards``), to check it against the spec reading here."""
    from ..shards import TokenShards

    try:
        return TokenShards(directory, verify="none")
    except ValueError as exc:
        report.fail(Mismatch("reader", directory, "-", f"TokenShards cannot open the directory: {exc}"))
        return None


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
                                                      unit_bytes=unit_bytes, even_bytes=even)}
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
                  show_progress: bool = True, max_examples: int = 10) -> VerifyReport:
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
    """
    directory = local_path(directory)
    if is_url(directory):   # checked on the local copy TokenShards reads (downloaded bytes, sha256 and all)
        from ..shards.remote import cached_directory

        directory = cached_directory(directory)
    tokenizer = None if tokenizer is None else as_tokenizer(tokenizer)
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
    sources = _sources(manifest, report)
    tasks = _plan(directory, manifest, sources, sample, report)
    weights = [sum(int(r["documents"]) for r in t.shards) for t in tasks]   # documents, as every corpus pass counts
    results = run_tasks(unit_task, tasks, (directory, manifest, tok, max_examples),
                        workers=default_workers(workers, len(tasks)), desc="verify shards",
                        show_progress=show_progress, weights=weights, unit="doc")
    for result in results:
        report.merge(result.report)
    _check_accounting(manifest, results, tasks, report)
    return report
