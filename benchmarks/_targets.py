"""The performance targets the issues set, each read from the newest real
record of the benchmark that measures it (``render_results.py`` renders the
table at the top of ``benchmarks/RESULTS.md``).

A target is ``(issue, what, script, machine, read, why)``: ``machine`` is
``"small"`` (fewer than 16 cores) or ``"16"`` (16 or more); ``read(records)``
takes that script's real records from that machine, newest first, and gives
``(measured text, met, record)``, or None when no record measures it; ``why``
links the page that explains a miss.  Every figure is computed from the
record's own rows, so a record written before the target existed is read the
same way as a new one.
"""
import re
import statistics

NEAR = 1e-9   # ratios are compared as measured; the tolerance only absorbs float rounding


def _columns(record, *needed):
    """``{column name without its unit: index}``, or None when a needed column is missing
    (a record of another layout, such as an early run's, measures nothing here)."""
    col = {name.split(" (")[0]: i for i, name in enumerate(record["columns"])}
    return col if all(name in col for name in needed) else None


def _readable(records, *needed):
    """``(record, columns)`` of each record that has the needed columns, newest first."""
    for record in records:
        col = _columns(record, *needed)
        if col is not None:
            yield record, col


def _x(value, target):
    """A ratio to 2 decimals, or 3 where 2 would round it up to the target it is below
    (0.998x against 1.0x)."""
    return f"{value:.3f}x" if f"{value:.2f}" == f"{target:.2f}" and value < target else f"{value:.2f}x"


def _one_pass(records):
    """encode_corpus_scale: ours over the best peer on the one pass, per vocabulary."""
    for record, _ in _readable(records, "vocabulary", "encoder", "one pass: overall"):
        ratios = _peer_ratios(record, ["one pass: overall"])
        if ratios:
            text = ", ".join(f"{vocab} {_x(r, 1)}" for (vocab, _), r in ratios.items())
            return text, all(r >= 1 - NEAR for r in ratios.values()), record
    return None


def _language_sets(records):
    """encode_corpus_scale: ours over the best peer on every per-language set, fresh and second pass."""
    for record, col in _readable(records, "vocabulary", "encoder"):
        ratios = _peer_ratios(record, [name for name in col if re.fullmatch(r"\w+ (fresh|second)", name)])
        if not ratios:
            continue
        misses = [f"{vocab} {cell} {_x(r, 1)}" for (vocab, cell), r in ratios.items() if r < 1 - NEAR]
        text = f"{len(ratios) - len(misses)} of {len(ratios)} cells at or above 1.0x" + (
            "; below: " + ", ".join(misses) if misses else "")
        return text, not misses, record
    return None


def _peer_ratios(record, cells):
    """``{(vocabulary, cell): ube-stream / best of gigatoken and fastokens}`` for the named columns."""
    col = _columns(record)
    by_vocab = {}
    for row in record["rows"]:
        by_vocab.setdefault(row[col["vocabulary"]], {})[row[col["encoder"]]] = row
    out = {}
    for vocab, rows in by_vocab.items():
        ours = rows.get("ube-stream")
        peers = [rows[p] for p in ("gigatoken", "fastokens") if p in rows]
        for cell in cells:
            best = max((p[col[cell]] for p in peers if p[col[cell]]), default=None)
            if ours is not None and ours[col[cell]] and best:
                out[(vocab, cell)] = ours[col[cell]] / best
    return out


def _e2e(records):
    """side_by_side_e2e: ``ube encode`` over the best other tool per CPU second, per worker count."""
    for record, col in _readable(records, "tool", "workers", "mb_per_cpu_s"):
        by_workers = {}
        for row in record["rows"]:
            by_workers.setdefault(row[col["workers"]], {})[row[col["tool"]]] = row[col["mb_per_cpu_s"]]
        ratios = {w: tools["ube"] / max(v for t, v in tools.items() if t != "ube")
                  for w, tools in sorted(by_workers.items()) if "ube" in tools and len(tools) > 1}
        if ratios:
            text = ", ".join(f"{w} worker{'s' if w > 1 else ''} {_x(r, 1.5)}" for w, r in ratios.items())
            return text, all(r >= 1.5 - NEAR for r in ratios.values()), record
    return None


def _kernel_share(records):
    """encode_breakdown: the encoder kernel's CPU over the whole command's (one worker)."""
    for record, col in _readable(records, "part", "what", "cpu_s"):
        rows = {(r[col["part"]], r[col["what"]].split(" (")[0]): r[col["cpu_s"]] for r in record["rows"]}
        kernel = rows.get(("stage", "kernel, one fresh chunk cache"))
        whole = next((v for (part, _), v in rows.items() if part == "whole"), None)
        if kernel and whole:
            share = kernel / whole
            return f"{share:.0%} of the command's CPU is the kernel's", share >= 0.85 - NEAR, record
    return None


def _speedups(records, task, workers, *, units=None, counting=False):
    """scale: the speed-up of ``workers`` over 1 worker for ``task`` at the record's largest size
    (``units`` 1: the one-file runs; ``counting``: training's counting phase), newest record first."""
    for record, col in _readable(records, "task", "units", "size_mb", "workers", "speedup_vs_1_worker", "counts_s"):
        rows = [r for r in record["rows"] if r[col["task"]] == task
                and (units is None or (r[col["units"]] == 1) == (units == 1))]
        if not rows:
            continue
        size = max(r[col["size_mb"]] for r in rows)
        at = {r[col["workers"]]: r for r in rows if r[col["size_mb"]] == size}
        if 1 not in at or workers not in at:
            continue
        if counting:
            one, many = at[1][col["counts_s"]], at[workers][col["counts_s"]]
            if not one or not many:
                continue
            return one / many, size, record
        return at[workers][col["speedup_vs_1_worker"]], size, record
    return None


def _two_workers(records):
    found = _speedups(records, "encode", 2)
    if found:
        value, size, record = found
        return f"encode {size:,.0f} MB: {_x(value, 1.8)}", value >= 1.8 - NEAR, record
    return None


def _sixteen(task, *, units=None, counting=False, target=12.0, label=""):
    def read(records):
        found = _speedups(records, task, 16, units=units, counting=counting)
        if found:
            value, size, record = found
            return f"{label}{size:,.0f} MB: {_x(value, target)} at 16 workers", value >= target - NEAR, record
        return None
    return read


def _compressed(records):
    """compressed_scaling: 2 workers over 1 on one compressed file, per kind and command."""
    for record, col in _readable(records, "command", "workers", "speed-up over 1 worker"):
        speed = {}
        for row in record["rows"]:
            if row[col["workers"]] == 2:
                speed.setdefault(row[col["command"]], []).append(row[col["speed-up over 1 worker"]])
        if speed:
            text = "; ".join(f"{cmd} {_x(min(v), 1.7)}-{_x(max(v), 1.7)} over {len(v)} file kinds"
                             for cmd, v in sorted(speed.items()))
            return text, all(x >= 1.7 - NEAR for v in speed.values() for x in v), record
    return None


def _verify(records):
    for record, col in _readable(records, "verify / encode CPU"):
        ratios = [r[col["verify / encode CPU"]] for r in record["rows"]]
        if ratios:
            value = statistics.median(ratios)
            return f"{_x(value, 1.5)} the encode's CPU", value <= 1.5 + NEAR, record
    return None


SCALING = "../docs/scaling.md"
TARGETS = (
    ("25", "one pass of 300 MB of mixed text, fresh process: ube-stream >= 1.0x the best of gigatoken and "
     "fastokens per CPU s", "encode_corpus_scale", "small", _one_pass,
     "../docs/encoding-performance.md#where-it-stands-and-why"),
    ("25", "each per-language set (English, Indic, CJK), fresh and second pass, each vocabulary: >= 1.0x",
     "encode_corpus_scale", "small", _language_sets,
     "../docs/encoding-performance.md#where-it-stands-and-why"),
    ("24", "`ube encode` end to end >= 1.5x the best of dolma, datatrove and a gigatoken script per CPU s, "
     "at 1 and 2 workers", "side_by_side_e2e", "small", _e2e, f"{SCALING}#side-by-side-end-to-end"),
    ("24", "`ube encode` at >= 0.85x the encoder kernel's rate (1 GB, one worker)", "encode_breakdown", "small",
     _kernel_share, f"{SCALING}#where-ube-encodes-cpu-goes"),
    ("24", "2 workers on 2 cores >= 1.8x one worker on one", "scale", "small", _two_workers,
     f"{SCALING}#per-core-w-workers-on-w-cores"),
    ("24", "one compressed file (`.jsonl.zst`, `.jsonl.gz`, `.txt.zst`, multi-frame), 2 workers >= 0.85 x 2 "
     "= 1.7x one", "compressed_scaling", "small", _compressed, f"{SCALING}#per-core-w-workers-on-w-cores"),
    ("24", "`ube verify --shards` <= 1.5x the encode's CPU", "verify_vs_encode", "small", _verify,
     f"{SCALING}#per-worker-costs"),
    ("24", "16 cores: encode >= 12x one worker", "scale", "16", _sixteen("encode", units="many", label="encode "),
     f"{SCALING}#16-cores-measured"),
    ("24", "16 cores: training's counting phase >= 12x", "scale", "16",
     _sixteen("train", counting=True, label="counting "), f"{SCALING}#16-cores-measured"),
    ("24", "16 cores: one single-stream compressed file >= 0.85 x 16 = 13.6x", "scale", "16",
     _sixteen("encode", units=1, target=13.6, label="one .jsonl.zst, "), f"{SCALING}#16-cores-measured"),
)


def _machine(record):
    cpus = record.get("machine", {}).get("cpus")
    return None if cpus is None else ("16" if cpus >= 16 else "small")


def render_targets(by_script):
    """The targets table (markdown lines) from ``{script: [record, ...] newest first}``."""
    out = ["## Targets of the issues\n",
           "Each target of issues 24 and 25, read from the newest real record of the script that "
           "measures it (the same record's section below has its command, load and machine).\n",
           "| issue | target | measured | met | record | why, when missed |", "|---|---|---|---|---|---|"]
    for issue, what, script, machine, read, why in TARGETS:
        records = [r for r in by_script.get(script, ()) if r.get("kind", "real") == "real"
                   and _machine(r) == machine]
        found = read(records)
        if found is None:
            out.append(f"| #{issue} | {what} | not measured | - | `{script}.py` | - |")
            continue
        text, met, record = found
        out.append(f"| #{issue} | {what} | {text} | {'yes' if met else '**no**'} | `{script}.py`, "
                   f"{record['date']} | {'-' if met else f'[why]({why})'} |")
    out.append("")
    return out
