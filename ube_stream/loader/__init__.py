"""The training feed over token shards: :class:`TokenDataset` (and its torch
wrapper) in ``dataset``, and the Megatron-LM ``.bin/.idx`` exporter in ``megatron``."""
from .dataset import TokenDataset, collate, inputs_targets, torch_dataset
from .megatron import MEGATRON_DTYPE_CODES, MEGATRON_INDEX_HEADER, export_megatron

__all__ = ["TokenDataset", "collate", "inputs_targets", "torch_dataset", "export_megatron",
           "MEGATRON_INDEX_HEADER", "MEGATRON_DTYPE_CODES"]
