"""The whole job in one call: train -> shards -> verify -> evaluate.

``ube demo`` runs it on the bundled real multilingual sample
(:func:`ube_stream.sample_paths`): running text of the Debian Administrator's
Handbook in 9 languages for training, parallel items in ~350 languages for
evaluation.  It trains ``ube``, ``utf8`` (BBPE) and ``utf16`` (BBPE16)
tokenizers of the same size, encodes the training corpus to token shards with
each, verifies every shard against its source rows, evaluates the three on the
parallel set (token premium vs English, Gini, wins; languages seen in training
vs unseen), prints the table and writes JSON, CSV and a plot.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, TextIO

SUBSTRATES = ("ube", "utf8", "utf16")


@dataclass
class PipelineResult:
    out_dir: str
    tokenizers: Dict[str, str] = field(default_factory=dict)      # substrate -> tokenizer file
    shards: Dict[str, str] = field(default_factory=dict)          # substrate -> shard directory
    verified: Dict[str, bool] = field(default_factory=dict)       # substrate -> verify_shards ok
    table: Optional[dict] = None
    table_text: str = ""
    outputs: List[str] = field(default_factory=list)
    seconds: Dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.verified) and all(self.verified.values())


def run_pipeline(train_inputs: Sequence[str], parallel: str, out_dir: str, *, vocab_size: int = 8000,
                 substrates: Sequence[str] = SUBSTRATES, workers: Optional[int] = None,
                 seen_langs: Optional[Sequence[str]] = None, reference: str = "en", plot: bool = True,
                 show_progress: bool = True, log: TextIO = sys.stderr) -> PipelineResult:
    """Train, shard, verify and evaluate; see the module docstring."""
    from .evaluation.output import format_table, plot_premiums, write_csv, write_json
    from .evaluation.parallel_text import corpus_languages, evaluate, read_parallel
    from .shards.encode import encode_corpus
    from .training.trainer import TrainSummary, train
    from .verification import verify_shards

    os.makedirs(out_dir, exist_ok=True)
    result = PipelineResult(out_dir=out_dir)
    tokenizers = []

    def step(name: str, started: float) -> None:
        result.seconds[name] = result.seconds.get(name, 0.0) + time.perf_counter() - started

    for substrate in substrates:
        started = time.perf_counter()
        summary = TrainSummary()
        tok = train(train_inputs, vocab_size=vocab_size, substrate=substrate, workers=workers,
                    show_progress=show_progress, summary=summary)
        path = os.path.join(out_dir, f"tokenizer-{substrate}-{vocab_size}.json")
        tok.save(path)
        tokenizers.append(tok)
        result.tokenizers[substrate] = path
        step("train", started)
        print(f"[train]  {substrate:<5} vocab {tok.vocab_size:,}: {summary.documents:,} documents, "
              f"{summary.bytes / 1e6:.2f} MB, {summary.unique_chunks:,} unique chunks, "
              f"{summary.wall_seconds:.1f} s -> {path}", file=log)

        started = time.perf_counter()
        shard_dir = os.path.join(out_dir, f"shards-{substrate}")
        manifest = encode_corpus(train_inputs, tokenizer=path, output=shard_dir, workers=workers,
                                 show_progress=show_progress)
        result.shards[substrate] = shard_dir
        step("encode", started)
        totals = manifest.get("totals", {}) if manifest else {}
        print(f"[encode] {substrate:<5} {totals.get('documents', 0):,} documents, "
              f"{totals.get('tokens', 0):,} tokens -> {shard_dir}", file=log)

        started = time.perf_counter()
        report = verify_shards(shard_dir, workers=workers, show_progress=show_progress)
        result.verified[substrate] = report.ok
        step("verify", started)
        print(f"[verify] {substrate:<5} {'OK' if report.ok else 'MISMATCH'}: every document decodes to its "
              "source row and re-encodes to the stored tokens" if report.ok else report.format(), file=log)

    started = time.perf_counter()
    if seen_langs is None:
        seen_langs = corpus_languages(list(train_inputs), field="lang")
    table = evaluate(tokenizers, read_parallel(parallel), reference=reference, seen_langs=seen_langs,
                     names=list(substrates))
    table["vocab_size"] = vocab_size
    result.table = table
    json_path = os.path.join(out_dir, "eval.json")
    csv_path = os.path.join(out_dir, "eval.csv")
    write_json(table, json_path)
    write_csv(table, csv_path)
    result.outputs += [json_path, csv_path]
    if plot:
        plot_path = os.path.join(out_dir, "premiums.png")
        try:
            plot_premiums(table, plot_path, title=f"Token premium vs English, vocab {vocab_size}")
            result.outputs.append(plot_path)
        except ImportError as exc:
            print(f"[eval]   no plot: {exc}", file=log)
    step("evaluate", started)
    result.table_text = format_table(table, max_rows=None)
    return result


def run_demo(out_dir: str = "ube-demo", *, vocab_size: int = 8000, workers: Optional[int] = None,
             plot: bool = True, show_progress: bool = True, log: TextIO = sys.stderr) -> PipelineResult:
    """:func:`run_pipeline` on the bundled sample."""
    from .sample import sample_paths

    paths = sample_paths()
    return run_pipeline([paths["train"]], paths["parallel"], out_dir, vocab_size=vocab_size, workers=workers,
                        plot=plot, show_progress=show_progress, log=log)
