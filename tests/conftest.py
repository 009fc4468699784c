"""Shared fixtures: real multilingual text from tests/data (see its README)."""

import atexit
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# child scripts that tests run in a subprocess (not test modules; --doctest-modules must not import them)
collect_ignore_glob = ["faults/*"]

# A shared 2-core machine (and CI) can be slow at any moment: no per-example
# deadline, so a property test fails on a wrong answer, never on a slow one.
settings.register_profile("ube", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ube")

# the class-table cache of this run (pretokenizer._cached_table) lives in a temporary
# directory, for this process and every process a test starts, not in ~/.cache
_TABLE_CACHE = tempfile.mkdtemp(prefix="ube-table-cache-")
os.environ["UBE_STREAM_CACHE"] = _TABLE_CACHE
atexit.register(shutil.rmtree, _TABLE_CACHE, True)

from _helpers import read_jsonl_zst  # noqa: E402  (the one reader of the fixtures)


@pytest.fixture(scope="session")
def docs_rows():
    """Running text: Debian Handbook pages in 26 languages (dicts with lang, source, text)."""
    return read_jsonl_zst("docs_sample.jsonl.zst")


@pytest.fixture(scope="session")
def parallel_rows():
    """Parallel items: the same key in up to ~270 languages (lang, script, key, text, source)."""
    return read_jsonl_zst("parallel_sample.jsonl.zst")


@pytest.fixture(scope="session")
def unicode_rows():
    """Unicode test strings (normalization, segmentation, bidi, emoji)."""
    return read_jsonl_zst("unicode_sample.jsonl.zst")


@pytest.fixture(scope="session")
def multilingual_lines(docs_rows):
    """Running text split into lines (one document per line), empty lines dropped."""
    return [line for row in docs_rows for line in row["text"].split("\n") if line.strip()]


@pytest.fixture(scope="session")
def train_text(parallel_rows):
    """Training text for the HF-trained tokenizer families (parallel items); their checks run on
    ``held_out``."""
    return [row["text"] for row in parallel_rows]


@pytest.fixture(scope="session")
def held_out(multilingual_lines, unicode_rows):
    """Held-out multilingual lines: the Debian Handbook in 26 languages plus Unicode test strings."""
    return multilingual_lines[::3][:1200] + [row["text"] for row in unicode_rows][:300]


@pytest.fixture(scope="session")
def sample_tokenizer_files():
    """Tokenizer files (text) trained on the bundled sample's training file, vocab 4000, per
    ``(substrate, char_integrity)``: trained once for test_char_integrity and
    test_char_integrity_encode; each module loads its own Tokenizer objects from them."""
    from ube_stream import sample_paths, train

    return {(substrate, integrity): train([sample_paths()["train"]], vocab_size=4000, substrate=substrate,
                                          workers=1, show_progress=False, char_integrity=integrity).to_json()
            for substrate in ("ube", "utf8", "utf16") for integrity in (False, True)}
