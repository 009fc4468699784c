"""Offline verification: exact round trips, checked end to end.

Three checks, each returning a :class:`VerifyReport` (``report.ok``,
``report.format()``; counts per category and the first mismatches, with
source, row, the character offset of the first difference and both texts
around it)::

    verify_unicode()                         # every scalar value, normal forms, emoji, mixed scripts,
    verify_unicode("tok.json")               #   the bundled audit strings; + encode -> decode
    verify_corpus("corpus/", "tok.json")     # decode(encode(doc)) == doc for every document
    verify_shards("shards/")                 # headers, checksums, row accounting; every stored
                                             #   document decodes to its source row and re-encodes
                                             #   to exactly the stored tokens

Work is spread over ``workers`` processes (the local executor); the reports of
the tasks are merged in task order, so the output does not depend on scheduling.

Modules: ``report`` (reports, mismatches, running the tasks), ``unicode``,
``corpus``, ``shards`` (the three checks) and ``shard_files`` (an independent
reading of the shard format, so a reader bug cannot hide a writer bug).
"""
from .corpus import verify_corpus
from .report import Mismatch, VerifyReport, first_difference
from .shards import verify_shards
from .unicode import verify_unicode

__all__ = ["VerifyReport", "Mismatch", "first_difference", "verify_unicode", "verify_corpus", "verify_shards"]
