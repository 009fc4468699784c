"""Small helpers shared by several test modules (importable: tests/ is on sys.path)."""
import io
import json
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read_jsonl_zst(name):
    """The rows of a zstd JSON Lines fixture in tests/data (they ship with the repository)."""
    import zstandard

    path = os.path.join(DATA, name)
    assert os.path.exists(path), f"fixture {path} is missing (it ships with the repository)"
    with open(path, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        return [json.loads(line) for line in reader]


def tree(directory):
    """Every file and directory under ``directory``: relative path -> bytes (None for a directory)."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), directory)] = None
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(os.path.join(root, name), directory)] = f.read()
    return out
