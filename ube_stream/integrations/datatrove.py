"""A datatrove pipeline step that tokenizes with any ube-stream tokenizer.

datatrove's own :class:`~datatrove.pipeline.tokens.DocumentTokenizer` loads
HF ``tokenizers`` files only, so a UBE tokenizer (or a ``utf16`` one) cannot
run in it.  :class:`UbeDocumentTokenizer` is that step with the ube-stream
encoder inside::

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from ube_stream.integrations.datatrove import UbeDocumentTokenizer

    LocalPipelineExecutor(pipeline=[
        JsonlReader("data/"),
        UbeDocumentTokenizer("tokens/", tokenizer="tok.json"),
    ], tasks=4).run()

It writes what ``DocumentTokenizer`` writes, through datatrove's own writer
(``TokenizedFile``): per rank a ``.ds`` file of little-endian ``uint16`` ids
(``uint32`` for vocabularies over 65,536), its ``.ds.index`` (uint64 document
ends) and ``.ds.metadata``, shuffled per file unless
``shuffle_documents=False``; so ``DatatroveFolderDataset``, datatrove's
``DocumentTokenizerMerger`` and nanotron read the output as they read
datatrove's.  The ids of each document are exactly those ``ube encode``
stores for it: the text encoded as plain text (special-token text is not
matched) by the same entry point (``Tokenizer.encode_utf8_batch``), then
``eos_token`` (default ``<|endoftext|>``; ``None`` for none) appended and
``bos_token`` (default none) prepended.

Why ``.ds`` and not ube-stream shards: a step inside a datatrove pipeline
feeds datatrove's tools downstream (merger, shufflers, ``DatatroveFolderDataset``),
and datatrove's writer is reused as it is, so the format stays datatrove's
by construction.  For ube-stream shards, write the pipeline's output with
datatrove's ``JsonlWriter`` and run ``ube encode`` on it (the ids are the same).

``tokenizer``: anything :func:`~ube_stream.tokenizer.as_tokenizer` takes (an
ube-stream tokenizer file, an HF ``tokenizer.json``, a tiktoken rank file or
name, a :class:`~ube_stream.Tokenizer`).  It is resolved when the step is
built, so a wrong path fails before the pipeline starts, and travels to
datatrove's workers as its JSON text.  ``save_loss_metadata`` is not
supported (it needs per-character offsets the encoder does not keep).
Other keyword arguments are ``DocumentTokenizer``'s.  Needs ``pip install
datatrove`` (the ``datatrove`` extra).
"""
from __future__ import annotations

import functools
from typing import Any, List, Optional

import numpy as np

__all__ = ["UbeDocumentTokenizer"]  # noqa: F822  (built on first use: the module __getattr__)


class _Encoded:
    """What datatrove reads from an HF ``Encoding``: ``ids``."""

    __slots__ = ("ids",)

    def __init__(self, ids: List[int]):
        self.ids = ids


class _DatatroveTokenizer:
    """The part of an HF ``tokenizers.Tokenizer`` that ``DocumentTokenizer``
    calls (``encode_batch``, ``get_vocab_size``), over an ube-stream tokenizer."""

    def __init__(self, tokenizer: Any, bos_id: Optional[int], eos_id: Optional[int]):
        self.tokenizer, self.bos_id, self.eos_id = tokenizer, bos_id, eos_id

    def get_vocab_size(self) -> int:
        return int(self.tokenizer.vocab_size)

    def encode_batch(self, texts: List[str]) -> List[_Encoded]:
        # lone surrogates reach the encoder, which names the document and byte offset
        raw = [text.encode("utf-8", "surrogatepass") for text in texts]
        offsets = np.zeros(len(raw) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in raw], out=offsets[1:])
        data = np.frombuffer(b"".join(raw), dtype=np.uint8)
        ids, token_offsets = self.tokenizer.encode_utf8_batch(data, offsets, bos_id=self.bos_id, eos_id=self.eos_id)
        bounds = token_offsets.tolist()
        return [_Encoded(ids[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:])]


def _special_id(tokenizer: Any, name: Optional[str], role: str) -> Optional[int]:
    if name is None:
        return None
    if name not in tokenizer.special_tokens:
        raise ValueError(f"{role} {name!r} is not a special token of this tokenizer (it has "
                         f"{list(tokenizer.special_tokens) or 'none'}); name one of those, or {role}=None")
    return int(tokenizer.special_tokens[name])


@functools.lru_cache(maxsize=None)
def _step_class() -> type:
    try:
        from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("UbeDocumentTokenizer is a datatrove pipeline step: pip install datatrove "
                          "(or pip install 'ube-stream[datatrove]')") from None

    class UbeDocumentTokenizer(DocumentTokenizer):
        """datatrove's ``DocumentTokenizer`` with an ube-stream tokenizer (see the module)."""

        name = "✍️ ube-stream tokenizer"
        _requires_dependencies: List[str] = []

        def __init__(self, output_folder: Any, tokenizer: Any, *, eos_token: Optional[str] = "<|endoftext|>",
                     bos_token: Optional[str] = None, **options: Any):
            from ..tokenizer.core import as_tokenizer

            if options.get("save_loss_metadata"):
                raise ValueError("UbeDocumentTokenizer does not write loss metadata (save_loss_metadata=True): the "
                                 "encoder keeps no character offsets; drop the option")
            tok = as_tokenizer(tokenizer)
            label = tokenizer if isinstance(tokenizer, str) else f"ube-stream {tok.fingerprint}"
            super().__init__(output_folder, tokenizer_name_or_path=label, **options)
            self.ube_tokenizer_json = tok.to_json()
            self.ube_bos_id = _special_id(tok, bos_token, "bos_token")
            self.ube_eos_id = _special_id(tok, eos_token, "eos_token")

        @functools.cached_property
        def tokenizer(self) -> Any:   # replaces DocumentTokenizer's HF tokenizer
            from ..tokenizer.core import Tokenizer

            return _DatatroveTokenizer(Tokenizer.from_json(self.ube_tokenizer_json), self.ube_bos_id,
                                       self.ube_eos_id)

        def __getstate__(self) -> dict:
            # sent to datatrove's workers: the tokenizer as JSON text, loaded again there
            state = dict(self.__dict__)
            state.pop("tokenizer", None)
            return state

    # picklable by reference (datatrove's worker processes): resolved through the module __getattr__ below
    UbeDocumentTokenizer.__module__ = __name__
    UbeDocumentTokenizer.__qualname__ = "UbeDocumentTokenizer"
    return UbeDocumentTokenizer


def __getattr__(name: str) -> Any:
    if name == "UbeDocumentTokenizer":
        return _step_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
