"""Small helpers shared by several test modules (importable: tests/ is on sys.path)."""
import os


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
