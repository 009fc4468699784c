"""mkdocs hook: the benchmark results page is ``benchmarks/RESULTS.md``
(written by ``benchmarks/render_results.py``), published as ``results.md``
without a copy in ``docs/``."""
import os

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def on_files(files, config):
    results = File.generated(config, "results.md",
                             abs_src_path=os.path.join(ROOT, "benchmarks", "RESULTS.md"))
    files.append(results)
    return files
