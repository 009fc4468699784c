"""The mutators of the file fuzzers (tests/faults/mutate_files.py for local shard
directories, tests/test_remote_lazy.py for remote ones): random bytes, or JSON
values replaced by hostile ones (2**31, -1, a path out of the directory, a
device, a wrong type, deep nesting)."""
import copy
import json
import random

#: the hostile JSON values (callers may pass their own: ``hostile=``)
HOSTILE = [2**31, 2**63, -1, 0, 10**30, 1.5, "", "../../etc/passwd", "/dev/zero", "/etc/passwd", "x" * 300,
           None, True, [], {}, [[[[[[]]]]]], {"a": {"b": {"c": []}}}, "sha256:" + "0" * 64, "shards/../../x"]


def mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    what = rng.random()
    if what < 0.15 and data:
        return bytes(data[:rng.randrange(len(data))])   # truncated
    if what < 0.25:
        at = rng.randrange(len(data) + 1)
        return bytes(data[:at] + bytes(rng.randrange(256) for _ in range(rng.choice([1, 8, 64]))) + data[at:])
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        if data:
            at = rng.randrange(len(data))
            data[at] = rng.randrange(256) if rng.random() < 0.5 else data[at] ^ (1 << rng.randrange(8))
    return bytes(data)


def _nodes(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _nodes(value, path + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:50]):
            yield from _nodes(value, path + (i,))


def mutate_json(raw: bytes, rng: random.Random, hostile: list = HOSTILE) -> bytes:
    if rng.random() < 0.4:
        return mutate_bytes(raw, rng)
    doc = json.loads(raw)
    paths = [p for p in _nodes(doc) if p]
    for _ in range(rng.choice([1, 1, 2])):
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = rng.random()
        if action < 0.15 and isinstance(parent, dict):
            del parent[path[-1]]
            paths = [p for p in _nodes(doc) if p]
            continue
        if action < 0.3 and isinstance(parent[path[-1]], int) and not isinstance(parent[path[-1]], bool):
            parent[path[-1]] += rng.choice([-1, 1, 2**31, -(2**31)])
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(hostile))
        paths = [p for p in _nodes(doc) if p]
    return json.dumps(doc).encode()
