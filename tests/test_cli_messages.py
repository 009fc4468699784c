"""The command line in its own words (issue 28): flags instead of Python keywords,
a description for every command and a default for every option, suggestions for
typos and the usual slips, and one line for an unreachable remote path."""
import argparse
import json

import pytest

from ube_stream.cli.main import build_parser
from ube_stream.cli.main import main as ube_main
from ube_stream.cli.options import remote_failure, render_error
from ube_stream.errors import InputError, OptionError


def run(argv, capsys):
    """(exit status, stdout, stderr) of `ube ARGV`, parse errors included."""
    try:
        code = ube_main(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"line {i} of a small corpus"}) + "\n" for i in range(50)),
                    encoding="utf-8")
    return str(path)


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_has_a_description_and_every_option_its_default(name):
    command = _commands()[name]
    assert command.description and len(command.description) > 20
    text = command.format_help()
    assert command.description.split()[0] in text
    for action in command._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS or action.dest == "help":
            continue
        assert action.help, f"{name} {action.option_strings[-1]} has no help"
        if action.default not in (None, False) and not action.required:
            shown = command.formatter_class(prog="x")._get_help_string(action)
            assert "default" in shown.lower(), f"{name} {action.option_strings[-1]}: no default in {shown!r}"


def test_train_help_shows_defaults_it_lacked(capsys):
    code, out, _ = run(["train", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "(default: ube)" in flat and "at least this often (default: 2)" in flat
    assert "Train a byte-level BPE tokenizer" in flat


def test_command_typo_is_suggested(capsys):
    code, _, err = run(["trian"], capsys)
    assert code == 2 and "did you mean train?" in err
    code, _, err = run(["verfy"], capsys)
    assert "did you mean verify" in err


def test_option_typo_is_suggested(corpus, capsys):
    code, _, err = run(["train", corpus, "--vocab-sise", "600", "-o", "x.json"], capsys)
    assert code == 2 and "--vocab-sise is not an option of `ube train`; did you mean --vocab-size?" in err
    code, _, err = run(["compare", corpus, "--holdot-langs", "2"], capsys)
    assert code == 2 and "did you mean --holdout-langs" in err


def test_verify_dir_without_shards_flag(tmp_path, capsys):
    code, _, err = run(["verify", str(tmp_path)], capsys)
    assert code == 2 and "unrecognized arguments" in err
    assert f"did you mean `ube verify --shards {tmp_path}`?" in err


def test_train_with_several_vocab_sizes(corpus, capsys):
    code, _, err = run(["train", corpus, "--vocab-size", "8000", "32000", "-o", "x.json"], capsys)
    assert code == 2
    assert "--vocab-size takes one value" in err and "ube compare CORPUS --vocab-size 8000 32000" in err


def test_library_errors_name_flags_on_the_command_line(corpus, tmp_path, capsys):
    from ube_stream.training.trainer import train

    # Python callers read keywords, the command line flags: the same structured error
    with pytest.raises(OptionError, match="vocab_size 300 is below") as info:
        train([corpus], vocab_size=300, workers=1, show_progress=False)
    assert info.value.option == "vocab_size"
    code, _, err = run(["train", corpus, "--vocab-size", "300", "-o", str(tmp_path / "t.json"), "-q"], capsys)
    assert code == 1 and "ube train: error: --vocab-size 300 is below" in err and "vocab_size" not in err

    missing = str(tmp_path / "nothere.jsonl")
    with pytest.raises(InputError) as info:
        train([missing], vocab_size=600, workers=1, show_progress=False)
    assert "iter(texts)" in str(info.value)                 # advice for Python callers ...
    code, _, err = run(["train", missing, "--vocab-size", "600", "-o", str(tmp_path / "t.json")], capsys)
    assert code == 1 and "no such file or directory" in err and "iter(texts)" not in err   # ... not on the CLI

    code, _, err = run(["train", corpus, "--split", "train", "--vocab-size", "600", "-o", str(tmp_path / "t.json")],
                       capsys)
    assert code == 1 and "--split train was given" in err and "drop --split" in err and "split=" not in err

    weird = tmp_path / "data.bin"
    weird.write_bytes(b"\x00\x01\x02 not a known format")
    code, _, err = run(["train", str(weird), "--vocab-size", "600", "-o", str(tmp_path / "t.json")], capsys)
    assert code == 1 and "or pass --format with one of" in err and "format=" not in err


def test_render_error_keeps_words_that_merely_contain_the_option():
    exc = OptionError("split='validation' names no split; drop split= (the splits: train)", option="split")
    assert render_error(exc) == "--split validation names no split; drop --split (the splits: train)"
    exc = OptionError("format 'xml' is unknown; pass format=\"jsonl\" or name the file's format", option="format")
    # a plain word is left alone (only a keyword with = or an identifier with _ is the option)
    assert render_error(exc) == "format 'xml' is unknown; pass --format jsonl or name the file's format"
    exc = OptionError("superbpe_transition 100 is below 513", option="superbpe_transition")
    assert render_error(exc) == "--superbpe-transition 100 is below 513"


def test_remote_failures_are_one_line(capsys, monkeypatch):
    botocore = pytest.importorskip("botocore.exceptions")
    line = remote_failure(botocore.NoCredentialsError(), ["encode", "s3://bucket/corpus.jsonl", "-o", "out"])
    assert line.startswith("cannot read s3://bucket/corpus.jsonl: NoCredentialsError")
    assert "AWS_ACCESS_KEY_ID" in line and "\n" not in line
    # through `ube`: the command's failure, wrapped as s3fs wraps it, is one line on stderr
    from ube_stream.cli import train as cli_train

    def fails(args):
        try:
            raise botocore.NoCredentialsError()
        except Exception as exc:
            raise RuntimeError("s3fs could not open the file") from exc

    monkeypatch.setattr(cli_train, "cmd_train", fails)
    code, _, err = run(["train", "s3://bucket/corpus.jsonl", "--vocab-size", "600", "-o", "t.json"], capsys)
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("ube train: error: cannot read s3://bucket/corpus.jsonl: NoCredentialsError")
    hub = pytest.importorskip("huggingface_hub.errors")
    line = remote_failure(hub.OfflineModeIsEnabled("Cannot reach https://huggingface.co: offline mode is "
                                                   "enabled.\nTo disable it, ..."), ["hf://datasets/a/b"])
    assert line.startswith("cannot read hf://datasets/a/b: OfflineModeIsEnabled: Cannot reach")
    assert "HF_HUB_OFFLINE" in line and "\n" not in line
    assert remote_failure(KeyError("x"), ["s3://b/x"]) is None


@pytest.mark.slow   # ~5 s: s3fs/botocore look for credentials before giving up
def test_s3_without_credentials_is_one_line(tmp_path):
    """A real `ube train s3://...` with no credentials anywhere: one line naming the
    URL and the fix (was a 79-line traceback)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("s3fs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-m", "ube_stream", "train", "s3://some-bucket/corpus.jsonl",
                          "--vocab-size", "600", "-o", str(tmp_path / "t.json")],
                         env=env, capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("ube train: error: cannot read s3://some-bucket/corpus.jsonl: NoCredentialsError")
    assert "AWS_ACCESS_KEY_ID" in run.stderr
