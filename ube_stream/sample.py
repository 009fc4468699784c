"""The bundled real multilingual sample (package data; see ``data/README.md``).

``sample_paths()`` gives the installed files::

    >>> from ube_stream.sample import sample_paths
    >>> paths = sample_paths()
    >>> sorted(paths)
    ['parallel', 'train']

``train``: running text (Debian Administrator's Handbook pages) in 9 languages
(``lang``, ``source``, ``text``), about 1 MB of UTF-8, English the largest share.
``parallel``: parallel items (``lang``, ``script``, ``key``, ``text``,
``source``) in 356 languages and 42 scripts, every key present in English;
the input of ``ube eval --parallel``.  Both are cut from public, licensed data
by ``examples/make_sample.py``; the text keeps its own licences (NOTICE).
"""
from __future__ import annotations

import os
from typing import Dict

__all__ = ["sample_paths", "SAMPLE_FILES"]

SAMPLE_FILES = {"train": "sample_train.jsonl.zst", "parallel": "sample_parallel.jsonl.zst"}


def sample_paths() -> Dict[str, str]:
    """Filesystem paths of the bundled sample: ``{"train": ..., "parallel": ...}``.

    Raises FileNotFoundError when the package was installed without its data
    files (a packaging error: ``ube_stream/data/*`` is package data).
    """
    from importlib import resources

    root = resources.files("ube_stream") / "data"
    paths = {}
    for name, filename in SAMPLE_FILES.items():
        entry = root / filename
        path = str(entry)  # a real file: the package is never imported from a zip here
        if not os.path.isfile(path):
            raise FileNotFoundError(f"the bundled sample file {filename} is missing from {root}: "
                                    "reinstall ube-stream (its data files are package data), or rebuild it "
                                    "with examples/make_sample.py")
        paths[name] = path
    return paths
