"""mkdocs hooks: the benchmark results page is ``benchmarks/RESULTS.md``
(written by ``benchmarks/render_results.py``), published as ``results.md``
without a copy in ``docs/``, its links written for the repository (``../docs/X``)
and the pages' links to it (``../benchmarks/RESULTS.md``) made the site's; and every page under ``docs/`` that ``mkdocs.yml``'s
nav does not list is added to it (titled by its first heading), so a new page
needs no edit of the nav."""
import glob
import os

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def on_files(files, config):
    results = File.generated(config, "results.md",
                             abs_src_path=os.path.join(ROOT, "benchmarks", "RESULTS.md"))
    files.append(results)
    return files


def on_page_markdown(markdown, page, config, files):
    markdown = markdown.replace("](../benchmarks/RESULTS.md", "](results.md")
    if page.file.src_uri == "results.md":
        markdown = markdown.replace("](../docs/", "](")
    return markdown


def _listed(nav):
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            yield from _listed(value)
        else:
            yield value


def on_config(config):
    nav = config.get("nav")
    if not nav:
        return config
    listed = set(_listed(nav))
    extra = []
    for path in sorted(glob.glob(os.path.join(config["docs_dir"], "*.md"))):
        name = os.path.basename(path)
        if name in listed:
            continue
        with open(path, encoding="utf-8") as f:
            title = next((line[2:].strip() for line in f if line.startswith("# ")), name[:-3])
        extra.append({title: name})
    if extra:
        at = next((i for i, item in enumerate(nav) if "results.md" in set(_listed([item]))), len(nav))
        nav[at:at] = extra
    return config
