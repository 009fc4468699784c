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


def test_results_page_is_rendered_from_the_records(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import render_results
        from _record import write_record
    finally:
        sys.path.pop(0)
    assert render_results.main(["--check"]) == 0   # RESULTS.md is what benchmarks/records/ gives
    write_record("bench_x", title="A made-up benchmark", columns=["case", "MB/s"], rows=[["a", 12.5]],
                 notes=["one note"], argv=["--mb", "1"], results_dir=str(tmp_path))
    record = json.loads((tmp_path / "bench_x.json").read_text(encoding="utf-8"))
    assert record["command"] == "python benchmarks/bench_x.py --mb 1" and record["rows"] == [["a", 12.5]]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", record["date"]) and len(record["load"]) == 3
    page = render_results.render(str(tmp_path))
    assert "## A made-up benchmark" in page and "| a | 12.50 |" in page and "- one note" in page
    assert "`python benchmarks/bench_x.py --mb 1`" in page
    assert "## Scripts without a record yet" in page and "`side_by_side_train.py`" in page


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
    for difference in ("Stricter superword boundaries", "The word limit counts pattern chunks", "No `:Ġ` rule",
                       "Stage-1 merges stay inside stage-1 chunks"):
        assert difference in training
