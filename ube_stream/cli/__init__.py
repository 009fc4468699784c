"""The ``ube`` command line: ``main`` builds the parser; one module per command
group (``codec``: explain, encode-text, decode-ids; ``train``: train, demo;
``shards``: encode, inspect; ``verify``; ``evaluate``: eval, compare;
``loader``: export-megatron), and ``options`` for what they share."""
from .main import build_parser, main

__all__ = ["main", "build_parser"]
