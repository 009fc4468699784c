"""Dropping documents a kernel rejects as invalid text, shared by the trainer
and the shard encoder.  Internal.

The readers already reject or skip invalid rows; this is the last line of
defence when a kernel (pre-tokenizer, encoder) still finds a document that is
not valid UTF-8: raise an error naming the file and row, or with
``on_error="skip"`` count the row and process the batch without it.
"""
from __future__ import annotations

from typing import Any, Callable, Tuple

import numpy as np

from .errors import InputError, InvalidTextError


def drop_bad_documents(exc: InvalidTextError, batch, data: np.ndarray, offsets: np.ndarray,
                       process: Callable[[np.ndarray, np.ndarray], Any], path: str, on_error: str,
                       skips) -> Tuple[np.ndarray, np.ndarray, Any]:
    """``exc`` came from ``process(data, offsets)`` on ``batch``'s documents.

    With ``on_error="skip"``: count the bad document in ``skips`` as
    ``invalid_utf8``, drop it (``batch.rows`` shrinks to match) and call
    ``process`` again, until it succeeds; returns ``(data, offsets, result)``
    with offsets starting at 0.  Otherwise raise :class:`InputError` naming
    ``path`` and the row.
    """
    while True:
        row = int(batch.rows[exc.document]) if exc.document is not None else -1
        message = f"{path}: row {row}: {exc}"
        if on_error != "skip" or exc.document is None:
            raise InputError(message, path=path, row=row, offset=exc.offset, reason="invalid_utf8") from None
        skips.add("invalid_utf8", path=path, row=row, offset=exc.offset, message=message)
        keep = np.ones(len(offsets) - 1, dtype=bool)
        keep[exc.document] = False
        pieces = [data[offsets[i]:offsets[i + 1]] for i in np.flatnonzero(keep)]
        lengths = np.array([len(p) for p in pieces], dtype=np.int64)
        data = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        batch.rows = np.asarray(batch.rows)[keep]
        try:
            return data, offsets, process(data, offsets)
        except InvalidTextError as again:
            exc = again
