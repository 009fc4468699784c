"""Build the large benchmark corpus: all the real, distinct text this machine has,
then, up to ``--size``, derived passes that say exactly what they repeat.

    python benchmarks/make_large_corpus.py [--size 1GB] [--shared ../shared/data] [-o benchmarks/data/large]

Writes ``OUT/large.jsonl``, ``OUT/large.jsonl.zst`` (the same bytes, one zstd
frame, level 3) and ``OUT/large.json`` (what the corpus holds: sources,
document and byte counts, what was dropped as a duplicate, what is repeated,
sha256 of both files).  Deterministic: the same inputs give the same bytes.

Sources (each read whole; a missing one is reported and skipped):
- ``../shared/data`` (see its README.md for sources and licences):
  ``docs.jsonl.zst`` (one Debian Administrator's Handbook page per document),
  ``parallel.jsonl.zst`` (interface messages and names in 400 languages),
  ``unicode_audit.jsonl.zst`` (Unicode and emoji test strings);
- the bundled sets: ``ube_stream/data``, ``tests/data``, ``benchmarks/data``
  (every ``*.jsonl.zst`` there; they are cut from ``../shared/data``, so after
  deduplication they add next to nothing, and the report says how much);
- this Python's standard-library ``.py`` files (real code, PSF licence), one
  file per document.

Documents.  A row with a ``text`` of 2,000 bytes or more (handbook pages) is a
document.  Short rows (parallel items, Unicode strings) are deduplicated by
exact text, then grouped in file order by (file kind, ``lang`` or ``source``)
into documents of about ``--doc-bytes`` (default 4,000) bytes, items joined
by ``\\n``.  Every document is deduplicated by exact text, and a page whose
first 1,000 bytes equal an earlier page's is dropped as a near duplicate (the
bundled samples cut pages short).  The distinct
documents are shuffled with a fixed seed (every prefix is a mix of languages,
scripts and code) and written first: this is pass 0, and no byte of it repeats
a document.

Past the distinct text.  When ``--size`` is larger than pass 0, pass k >= 1
re-cuts the same text into new documents: per group (the handbook pages of one
language; the items of one group; the code files), the lines of all its
documents are shuffled with seed k and cut into documents of the original
documents' line counts.  Each derived document is distinct from every other
document written (a collision is dropped and counted), but every *line* of
pass k is a line of pass 0: no word is new.  So past pass 0 the corpus has the
vocabulary of ~130 MB of text; a real crawl keeps meeting new words, which
makes an encoder's chunk cache look better here than on a crawl of the same
size.  ``large.json`` records the byte count of each pass.
"""
import argparse
import glob
import hashlib
import io
import json
import os
import random
import sys
import sysconfig
import time

from measure import parse_sizes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LONG_ROW_BYTES = 2000
HEAD_BYTES = 1000
SEED = 20261203


def read_zst_jsonl(path):
    import zstandard

    with open(path, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        for line in reader:
            yield json.loads(line)


def source_files(shared):
    files = sorted(glob.glob(os.path.join(os.path.abspath(shared), "*.jsonl.zst")))
    if not files:
        print(f"make_large_corpus: no *.jsonl.zst under {shared}: only the bundled sets and code", file=sys.stderr)
    for folder in ("ube_stream/data", "tests/data", "benchmarks/data"):
        files += sorted(glob.glob(os.path.join(REPO, folder, "*.jsonl.zst")))
    return files


class Collector:
    """Distinct documents by group, in first-seen order, with the counts the report gives."""

    def __init__(self, doc_bytes):
        self.doc_bytes = doc_bytes
        self.groups = {}          # group -> list of documents (str)
        self.open_items = {}      # group -> (items, bytes) of the document being filled
        self.seen_items = set()
        self.seen_docs = set()
        self.seen_heads = set()   # first HEAD_BYTES of each page: a page cut short is a near duplicate
        self.stats = {}           # file -> counters

    def _stat(self, name):
        return self.stats.setdefault(name, {"rows": 0, "rows_without_text": 0, "duplicate_items": 0,
                                            "duplicate_documents": 0, "near_duplicate_pages": 0, "documents": 0,
                                            "text_bytes": 0})

    def add_document(self, name, group, text, *, page=False):
        stat = self._stat(name)
        data = text.encode("utf-8")
        key = hashlib.sha1(data).digest()
        if key in self.seen_docs:
            stat["duplicate_documents"] += 1
            return
        if page:
            head = hashlib.sha1(data[:HEAD_BYTES]).digest()
            if head in self.seen_heads:
                stat["near_duplicate_pages"] += 1
                return
            self.seen_heads.add(head)
        self.seen_docs.add(key)
        self.groups.setdefault(group, []).append(text)
        stat["documents"] += 1
        stat["text_bytes"] += len(data)

    def add_item(self, name, group, text):
        stat = self._stat(name)
        if text in self.seen_items:
            stat["duplicate_items"] += 1
            return
        self.seen_items.add(text)
        items, size = self.open_items.get((name, group), ([], 0))
        items.append(text)
        size += len(text.encode("utf-8")) + 1
        if size >= self.doc_bytes:
            self.add_document(name, group, "\n".join(items))
            items, size = [], 0
        self.open_items[(name, group)] = (items, size)

    def flush(self):
        for (name, group), (items, _) in sorted(self.open_items.items()):
            if items:
                self.add_document(name, group, "\n".join(items))
        self.open_items = {}


def valid_text(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:    # a lone surrogate: not text a corpus holds
        return False


def collect(shared, doc_bytes):
    coll = Collector(doc_bytes)
    for path in source_files(shared):
        name = os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else f"shared/data/{os.path.basename(path)}"
        kind = os.path.basename(path).split(".")[0]
        for row in read_zst_jsonl(path):
            stat = coll._stat(name)
            stat["rows"] += 1
            text = row.get("text")
            if not isinstance(text, str) or not text or not valid_text(text):
                stat["rows_without_text"] += 1
                continue
            if len(text.encode("utf-8")) >= LONG_ROW_BYTES:
                coll.add_document(name, f"pages:{row.get('lang', '')}", text, page=True)
            else:
                label = row.get("lang") or row.get("source", "")
                coll.add_item(name, f"items:{kind}:{label}", text)
        coll.flush()
    stdlib = sysconfig.get_paths()["stdlib"]
    name = f"python {sys.version.split()[0]} stdlib *.py"
    coll._stat(name)
    for path in sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True)):
        if "site-packages" in path:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            coll._stat(name)["rows_without_text"] += 1
            continue
        coll._stat(name)["rows"] += 1
        if text.strip():
            coll.add_document(name, "code", text)
    coll.seen_items = set()       # items are not needed past grouping
    return coll


def derived_pass(groups, k, seen_docs):
    """Pass k: per group, the lines of all its documents shuffled with seed k and
    cut into documents of the original line counts; collisions dropped."""
    out, dropped = [], 0
    for group in sorted(groups):
        docs = groups[group]
        lines = [line for doc in docs for line in doc.split("\n")]
        random.Random(f"{SEED}:{k}:{group}").shuffle(lines)
        start = 0
        for doc in docs:
            n = doc.count("\n") + 1
            text = "\n".join(lines[start:start + n])
            start += n
            key = hashlib.sha1(text.encode("utf-8")).digest()
            if not text.strip() or key in seen_docs:
                dropped += 1
                continue
            seen_docs.add(key)
            out.append((group, text))
    random.Random(f"{SEED}:{k}").shuffle(out)
    return out, dropped


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="1GB", help="target UTF-8 text bytes (default 1GB; 1GB = 10^9)")
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "..", "shared", "data"),
                        help="the shared data folder (default ../shared/data beside the checkout)")
    parser.add_argument("--doc-bytes", type=int, default=4000, help="size of a document of grouped short items")
    parser.add_argument("-o", "--output", default=os.path.join(HERE, "data", "large"), help="output folder")
    parser.add_argument("--no-zst", action="store_true", help="skip large.jsonl.zst")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.shared):
        alt = "/work/shared/data"
        args.shared = alt if os.path.isdir(alt) else args.shared
    (target,) = parse_sizes(args.size)
    t0 = time.perf_counter()
    coll = collect(args.shared, args.doc_bytes)
    groups = coll.groups
    base = [(group, doc) for group in sorted(groups) for doc in groups[group]]
    random.Random(SEED).shuffle(base)
    distinct_bytes = sum(len(doc.encode("utf-8")) for _, doc in base)
    os.makedirs(args.output, exist_ok=True)
    jsonl = os.path.join(args.output, "large.jsonl")
    passes = []
    written = 0
    n = 0
    with open(jsonl + ".part", "w", encoding="utf-8") as out:
        k = 0
        docs, dropped = base, 0
        while written < target:
            if k > 0:
                docs, dropped = derived_pass(groups, k, coll.seen_docs)
            pass_bytes = pass_docs = 0
            for group, text in docs:
                size = len(text.encode("utf-8"))
                out.write(json.dumps({"id": f"p{k}-{n}", "text": text, "group": group}, ensure_ascii=False) + "\n")
                n += 1
                pass_docs += 1
                pass_bytes += size
                written += size
                if written >= target:
                    break
            passes.append({"pass": k, "documents": pass_docs, "text_bytes": pass_bytes,
                           "collisions_dropped": dropped,
                           "what": "distinct documents" if k == 0 else
                           f"pass 0's lines re-cut into new documents (seed {k}): no new line"})
            k += 1
    os.replace(jsonl + ".part", jsonl)

    def sha256(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
        return h.hexdigest()

    files = {"large.jsonl": {"bytes": os.path.getsize(jsonl), "sha256": sha256(jsonl)}}
    if not args.no_zst:
        import zstandard

        zst = jsonl + ".zst"
        with open(jsonl, "rb") as src, open(zst + ".part", "wb") as dst:
            zstandard.ZstdCompressor(level=3, write_content_size=True).copy_stream(src, dst, size=os.path.getsize(jsonl))
        os.replace(zst + ".part", zst)
        files["large.jsonl.zst"] = {"bytes": os.path.getsize(zst), "sha256": sha256(zst)}
    report = {
        "title": "Large benchmark corpus (benchmarks/make_large_corpus.py)",
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "target_text_bytes": target,
        "text_bytes": written,
        "documents": n,
        "distinct_text_bytes": distinct_bytes,
        "distinct_documents": len(base),
        "repeated_text_bytes": max(0, written - distinct_bytes),
        "note": ("the first distinct_text_bytes are pass 0: every document distinct; beyond it, passes >= 1 "
                 "re-cut pass 0's lines into new distinct documents (no new line, no new word)"),
        "passes": passes,
        "sources": coll.stats,
        "files": files,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    with open(os.path.join(args.output, "large.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
    print(f"{jsonl}: {written / 1e6:.1f} MB of text in {n:,} documents; distinct: {distinct_bytes / 1e6:.1f} MB "
          f"in {len(base):,} documents; passes: " + ", ".join(f"{p['pass']}: {p['text_bytes'] / 1e6:.1f} MB"
                                                               for p in passes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
