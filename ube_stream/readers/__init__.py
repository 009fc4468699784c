"""Corpus readers: input paths -> sources -> work units -> batches of documents.

``inputs`` resolves paths, directories and globs into sources and cuts them
into work units; one module per format family reads a unit (``jsonl``,
``text``, ``columnar`` for Parquet/Arrow/Feather/HF datasets), over the byte
streams of ``compression``; ``formats`` tells which format a file is;
``batch`` holds the batches of documents and the accounting of skipped rows.
See :mod:`ube_stream.readers.inputs` for the rules (documents, units, errors).
"""
from .batch import Reporter, SkipCounter, SkipExample, TextBatch, drop_bad_documents
from .inputs import (
                     ARROW_FORMATS,
                     DEFAULT_BATCH_ROWS,
                     DEFAULT_MAX_DOCUMENT_BYTES,
                     DEFAULT_UNIT_BYTES,
                     DEFAULT_UNIT_ROWS,
                     FORMATS,
                     MEMORY_PREFIX,
                     TEXT_MODES,
                     SkippedFile,
                     Source,
                     WorkUnit,
                     is_paths,
                     iter_batches,
                     iter_texts,
                     memory_name,
                     plan_units,
                     read_unit,
                     read_unit_blocks,
                     resolve_inputs,
                     skipped_files_lines,
                     spill_to_arrow,
)

__all__ = [
    "Source", "WorkUnit", "TextBatch", "SkipCounter", "SkipExample", "Reporter", "drop_bad_documents",
    "SkippedFile", "is_paths", "resolve_inputs", "spill_to_arrow", "memory_name", "plan_units", "read_unit", "read_unit_blocks",
    "iter_batches", "iter_texts", "DEFAULT_UNIT_ROWS", "DEFAULT_UNIT_BYTES", "DEFAULT_BATCH_ROWS", "DEFAULT_MAX_DOCUMENT_BYTES",
    "FORMATS", "ARROW_FORMATS", "TEXT_MODES",
    "MEMORY_PREFIX", "skipped_files_lines",
]
