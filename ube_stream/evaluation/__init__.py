"""Evaluation on parallel text: token counts per language (``parallel_text``), token
premiums and the Gini coefficient (``metrics``), tables, JSON, CSV and plots
(``output``)."""
from .metrics import evaluation_table, gini, language_key, resolve_language, token_premiums, win_loss
from .output import format_table, plot_premiums, write_csv, write_json
from .parallel_text import (
                       ParallelSet,
                       corpus_languages,
                       count_floor,
                       count_tokens,
                       evaluate,
                       read_language_list,
                       read_parallel,
                       select_languages,
)

__all__ = [
    "ParallelSet", "read_parallel", "select_languages", "read_language_list", "corpus_languages",
    "count_tokens", "count_floor", "evaluate", "format_table", "write_json", "write_csv", "plot_premiums",
    "language_key", "resolve_language", "token_premiums", "gini", "win_loss", "evaluation_table",
]
