"""The README is a guide that works (issue 28): short, its links resolve, its
recipe and Python blocks run as written on the bundled sample (offline), the
documentation site builds strictly, the results page is what the benchmark
records give, and the set-up stays light (datasets optional, parallel build)."""
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def _readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", _readme(), re.S)


def test_readme_is_a_guide_not_a_notebook():
    text = _readme()
    assert len(text.splitlines()) <= 400
    # the two commands, exactly
    assert 'pip install ".[plot]" && ube demo' in text
    assert 'pip install -e ".[test]" && python -m pytest -q' in text
    # no dated lab notes: no "this round", no load figures, no developer paths
    for notebook in ("this round", "load 3.", "/work/", "../shared/data"):
        assert notebook not in text
    for section in ("## What UBE is", "## Your corpus on the command line", "## Python quick start",
                    "## When UBE helps", "## Performance", "## Where we are behind", "## Documentation"):
        assert section in text


def _anchor(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_links_resolve():
    text = _readme()
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        if link.startswith("#"):
            assert link[1:] in anchors, link
        else:
            assert os.path.exists(os.path.join(ROOT, link.split("#")[0])), link


@pytest.fixture
def shell_env(tmp_path):
    """A shell whose `ube` and `python` are this checkout's (no install needed)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, command in (("ube", f'exec "{sys.executable}" -m ube_stream "$@"'),
                          ("python", f'exec "{sys.executable}" "$@"')):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{command}\n")
        path.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=ROOT,
               UBE_PROGRESS_SECONDS="3600")
    work = tmp_path / "work"
    work.mkdir()
    return env, str(work)


@pytest.mark.slow   # trains two tokenizers and encodes the sample (~20 s on 2 cores)
def test_readme_recipe_and_python_blocks_run_as_written(shell_env):
    env, work = shell_env
    bash = [b for b in _blocks("bash") if "pip install" not in b]
    assert bash and "ube train" in bash[0] and "ube export-megatron" in bash[0]
    for block in bash:
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, f"{block}\n--- stderr:\n{run.stderr[-3000:]}"
    assert os.path.exists(os.path.join(work, "megatron", "corpus.idx"))
    ran = 0
    for block in _blocks("python"):
        run = subprocess.run([sys.executable, "-c", block], cwd=work, env=env, capture_output=True, text=True,
                             timeout=600)
        missing = re.search(r"ModuleNotFoundError: No module named '(transformers|torch)'", run.stderr)
        if missing:
            continue   # an optional extra this environment lacks
        assert run.returncode == 0, f"{block}\n--- stderr:\n{run.stderr[-3000:]}"
        ran += 1
    assert ran >= 2


def test_the_console_compare_command_is_the_one_documented():
    """The README's `ube compare` line parses, and its numbers are the ones docs/evaluation.md gives."""
    from ube_stream.cli.main import build_parser

    line = next(line for line in _readme().splitlines() if line.startswith("$ ube compare"))
    args = build_parser().parse_args(line[len("$ ube "):].split())
    assert args.command == "compare" and args.vocab_size == [8000]
    with open(os.path.join(ROOT, "docs", "evaluation.md"), encoding="utf-8") as f:
        evaluation = f.read()
    for figure in ("0.2839 vs 0.3452", "0.0715 vs 0.1077", "318 / 4 / 20"):
        assert figure in evaluation


# ---------------------------------------------------------------- set-up
def _pyproject():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_datasets_is_an_optional_extra():
    project = _pyproject()["project"]
    assert not any(d.startswith("datasets") for d in project["dependencies"])
    assert any(d.startswith("datasets") for d in project["optional-dependencies"]["datasets"])
    assert any(d.startswith("datasets") for d in project["optional-dependencies"]["test"])
    docs_extra = project["optional-dependencies"]["docs"]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert all(f'"{d}"' in ci for d in docs_extra)   # CI installs exactly the docs extra


def test_save_to_disk_folders_are_read_without_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": ["one", "two", "three"]}).save_to_disk(str(tmp_path / "ds"))
    code = (f"import sys; sys.modules['datasets'] = None\n"          # `import datasets` now fails
            f"from ube_stream.readers.inputs import iter_texts\n"
            f"print(list(iter_texts([{str(tmp_path / 'ds')!r}])))\n"
            f"assert 'datasets' not in [m for m in sys.modules if sys.modules[m] is not None]\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['one', 'two', 'three']"


def test_kernels_build_in_parallel_by_default(monkeypatch):
    """setup.py's build_ext compiles UBE_BUILD_JOBS modules at a time (default: every core)."""
    from setuptools.dist import Distribution

    monkeypatch.setenv("UBE_BUILD_JOBS", "3")
    source = open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()
    source = source.replace('setup(ext_modules=extensions(), cmdclass={"build_ext": ParallelBuildExt})', "")
    namespace = {"__file__": os.path.join(ROOT, "setup.py"), "__name__": "setup_under_test"}
    exec(compile(source, "setup.py", "exec"), namespace)
    command = namespace["ParallelBuildExt"](Distribution({"name": "x"}))
    command.initialize_options()
    command.finalize_options()
    assert command.parallel == 3


# ---------------------------------------------------------------- docs site and results page
def test_ci_builds_the_docs_strictly():
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert "mkdocs build --strict" in ci and "mkdocstrings[python]" in ci
    assert "render_results.py --check" in ci


@pytest.mark.slow   # ~5 s: mkdocs and mkdocstrings read every page and the package
def test_docs_build_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "results" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "index.html").exists()


def _bench_modules():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import _record
        import render_results
    finally:
        sys.path.pop(0)
    return _record, render_results


def test_results_page_and_headline_are_what_the_records_give():
    _, render_results = _bench_modules()
    assert render_results.main(["--check"]) == 0   # RESULTS.md and README's headline block are current


def test_records_are_dated_self_describing_and_rendered_newest_first(tmp_path, monkeypatch):
    _record, render_results = _bench_modules()
    monkeypatch.delenv("UBE_BENCH_SMOKE", raising=False)
    monkeypatch.delenv("UBE_BENCH_NO_RECORD", raising=False)
    common = dict(title="A made-up benchmark", columns=["case", "MB/s"], records_dir=str(tmp_path))
    older = _record.write_record("bench_x", rows=[["a", 12.5]], argv=["--mb", "1"], headline="first run", **common)
    newer = _record.write_record("bench_x", rows=[["a", 13.25]], notes=["one note"], argv=["--mb", "2"],
                                 headline="1.30x the peer", peers={"peer": "1.2.3", "gone": None}, **common)
    monkeypatch.setenv("UBE_BENCH_SMOKE", "1")
    smoke = _record.write_record("bench_x", rows=[["a", 999.75]], argv=["--mb", "0.01"], **common)
    paths = sorted(os.listdir(tmp_path / "bench_x"))
    assert [os.path.join(tmp_path, "bench_x", p) for p in paths] == [older, newer, smoke]
    for path in paths:
        assert re.fullmatch(r"\d{8}T\d{12}Z\.json", path)
    record = json.loads((tmp_path / "bench_x" / paths[1]).read_text(encoding="utf-8"))
    assert record["command"] == "python benchmarks/bench_x.py --mb 2" and record["rows"] == [["a", 13.25]]
    assert record["kind"] == "real" and json.loads(open(smoke, encoding="utf-8").read())["kind"] == "smoke"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", record["date"])
    assert len(record["load_before"]) == 3 and len(record["load_after"]) == 3
    assert record["machine"]["cpus"] == os.cpu_count() and record["peers"] == {"peer": "1.2.3", "gone": None}
    page = render_results.render(str(tmp_path))
    section = page[page.index("## A made-up benchmark"):page.index("## Smoke runs")]
    assert "`python benchmarks/bench_x.py --mb 2`" in section and "| a | 13.25 |" in section
    assert "- one note" in section and "**1.30x the peer**" in section and "peers: gone not installed, peer 1.2.3" in section
    # the older real run is history, in one line and without its table
    assert "Earlier runs" in section and "first run" in section and "| a | 12.50 |" not in section
    assert "`python benchmarks/bench_x.py --mb 1`" in section
    # the smoke run is listed apart, without its figures
    smoke_part = page[page.index("## Smoke runs"):]
    assert "`python benchmarks/bench_x.py --mb 0.01`" in smoke_part and "999" not in page
    assert "## Scripts without a record yet" in page and "`side_by_side_train.py`" in page
    assert "`make_corpus.py`" not in page   # builds inputs, measures nothing
    monkeypatch.setenv("UBE_BENCH_NO_RECORD", "1")
    assert _record.write_record("bench_x", rows=[["a", 1.0]], **common) is None
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        monkeypatch.delenv("UBE_BENCH_NO_RECORD")
        _record.write_record("bench_x", rows=[["a"]], **common)


def test_targets_table_reads_each_target_from_its_newest_real_record(tmp_path, monkeypatch):
    _record, render_results = _bench_modules()
    monkeypatch.delenv("UBE_BENCH_SMOKE", raising=False)
    monkeypatch.delenv("UBE_BENCH_NO_RECORD", raising=False)

    def e2e(ube_1, ube_2):   # MB per CPU s of ube; the best other tool reads 50 at both worker counts
        rows = [[tool, w, v] for w, ube in ((1, ube_1), (2, ube_2))
                for tool, v in (("ube", ube), ("plain", 50.0), ("dolma", 2.0))]
        return _record.write_record("side_by_side_e2e", title="E2E", columns=["tool", "workers",
                                    "mb_per_cpu_s (MB/CPU s)"], rows=rows, records_dir=str(tmp_path))

    e2e(40.0, 40.0)      # older: replaced by the newer record
    e2e(80.0, 74.0)      # 1.6x and 1.48x: the 2-worker half misses
    _record.write_record("verify_vs_encode", title="Verify", columns=["repeat", "verify / encode CPU (x)"],
                         rows=[[0, 1.2], [1, 1.4], [2, 1.3]], records_dir=str(tmp_path))
    _record.write_record("scale", title="Scale", columns=["x"], rows=[[1]], records_dir=str(tmp_path))
    monkeypatch.setenv("UBE_BENCH_SMOKE", "1")   # a smoke record is never read
    _record.write_record("compressed_scaling", title="One file", columns=["kind", "command", "workers",
                         "speed-up over 1 worker (x)"], rows=[["jsonl.zst", "encode", 2, 1.99]],
                         records_dir=str(tmp_path))
    page = render_results.render(str(tmp_path))
    table = page[page.index("## Targets of the issues"):page.index("\n## ", page.index("## Targets") + 5)]
    rows = {line.split(" | ")[1]: line for line in table.splitlines() if line.startswith("| #")}
    e2e_row = next(r for what, r in rows.items() if what.startswith("`ube encode` end to end"))
    assert "1 worker 1.60x, 2 workers 1.48x" in e2e_row and "| **no** |" in e2e_row and "[why](" in e2e_row
    verify_row = next(r for what, r in rows.items() if what.startswith("`ube verify"))
    assert "1.30x the encode's CPU | yes |" in verify_row and "[why]" not in verify_row
    # a record without the columns a target needs, a smoke record and no record: not measured
    for start in ("2 workers on 2 cores", "one compressed file", "16 cores", "one pass of 300 MB"):
        assert all("| not measured |" in r for what, r in rows.items() if what.startswith(start))
    assert len(rows) == len(render_results.render_targets.__globals__["TARGETS"])


def test_readme_headline_block_comes_from_real_records_only(tmp_path, monkeypatch):
    _record, render_results = _bench_modules()
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nintro\n\n{render_results.BEGIN}\nstale numbers\n{render_results.END}\n\nafter\n",
                      encoding="utf-8")
    records, page = tmp_path / "records", tmp_path / "RESULTS.md"
    args = ["--records", str(records), "-o", str(page), "--readme", str(readme)]
    assert render_results.main([*args, "--check"]) == 1   # stale block, no page yet
    assert render_results.main(args) == 0 and render_results.main([*args, "--check"]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# x\n\nintro\n\n") and text.endswith("\n\nafter\n") and "stale numbers" not in text
    scripts = [script for _, script, *_ in render_results.HEADLINE]
    assert {"encode_corpus_scale", "side_by_side_e2e", "compressed_scaling", "verify_vs_encode", "scale"} <= set(scripts)
    assert text.count(render_results.NOT_MEASURED_SINCE) == len(scripts)
    assert "benchmarks/run_headline.sh" in text
    monkeypatch.setenv("UBE_BENCH_SMOKE", "1")   # a smoke run does not fill the table
    _record.write_record("scale", title="Scale", columns=["x"], rows=[[1]], headline="smoke figure",
                         records_dir=str(records))
    monkeypatch.delenv("UBE_BENCH_SMOKE")
    assert render_results.main([*args, "--check"]) == 1   # the page changed (smoke list), the table did not
    assert render_results.main(args) == 0 and "smoke figure" not in readme.read_text(encoding="utf-8")
    _record.write_record("scale", title="Scale", columns=["x"], rows=[[1]], headline="encode 100 MB: 9.9 MB/s",
                         records_dir=str(records), argv=["--sizes", "10MB,100MB"])
    assert render_results.main([*args, "--check"]) == 1
    assert render_results.main(args) == 0
    row = next(line for line in readme.read_text(encoding="utf-8").splitlines() if "`scale.py`" in line)
    assert "encode 100 MB: 9.9 MB/s" in row and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", row)
    assert "load average" in row and render_results.NOT_MEASURED_SINCE not in row
    readme.write_text("# no block\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="results:headline"):
        render_results.main(args)
    (records / "scale" / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SystemExit, match="broken.json"):
        render_results.render(str(records))


# ---------------------------------------------------------------- fidelity stated exactly
def test_char_integrity_is_not_scripts_left_to_right_rule():
    """docs/training.md says --char-integrity merges any two pieces of one character,
    unlike SCRIPT's left-to-right rule: here the most frequent pair is the last two
    bytes of three different 3-byte characters (B8 AD in 中 U+4E2D, 席 U+5E2D, 渭 U+6E2D),
    and it becomes a token of continuation bytes only."""
    from ube_stream.training.trainer import train

    text = "中席渭" * 50
    assert [c.encode("utf-8")[1:] for c in "中席渭"] == [b"\xb8\xad"] * 3
    tok = train(iter([text]), vocab_size=258, substrate="utf8", char_integrity=True, workers=1, show_progress=False,
                special_tokens=())
    assert tok.merges[0] == (0xB8, 0xAD)             # the first merge: no prefix of any character
    assert tok.merges[1] == (0xE4, 256)              # then the pieces join into whole characters
    with open(os.path.join(ROOT, "docs", "training.md"), encoding="utf-8") as f:
        training = f.read()
    assert "How it differs from SCRIPT" in training and "How this differs from Liu et al." in training
    for difference in ("Superword boundaries", "The word limit counts pattern chunks", "The `:Ġ` rule",
                       "Stage-1 merges stay inside stage-1 chunks", "--superbpe-spans"):
        assert difference in training
