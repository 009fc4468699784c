"""BPE training: count the chunks of a corpus per work unit (``chunk_table``
holds the count tables), merge the tables, then learn the merges (``trainer``)."""
from .trainer import CountRecord, TrainSummary, count_unit, train

__all__ = ["train", "TrainSummary", "CountRecord", "count_unit"]
