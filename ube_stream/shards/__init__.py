"""Token shards: ``encode_corpus`` (the run: plan, ranks, MANIFEST), the unit
``writer``, the memory-mapped ``reader`` (:class:`TokenShards`), the binary
``index_format`` and the unit and rank ``locks``."""
from .encode import DEFAULT_SHARD_TOKENS, EncodeSummary, encode_corpus
from .reader import Shard, TokenShards
from .writer import encode_unit

__all__ = ["encode_corpus", "encode_unit", "TokenShards", "Shard", "EncodeSummary", "DEFAULT_SHARD_TOKENS"]
