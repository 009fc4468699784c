"""Progress that tells the truth (issue 28): one unit (documents) for every corpus
pass, single lines instead of frames when stderr is not a terminal, a last line
equal to the summary, and a percentage from the bytes on disk when the rows of a
compressed input are unknown."""
import io
import json
import re

import zstandard

from ube_stream import progress
from ube_stream.progress import DocumentProgress, LineProgress, planned_rows, progress_bar, unit_input_bytes
from ube_stream.readers.inputs import plan_units, resolve_inputs


def _corpus(tmp_path, n=300, compress=False):
    lines = "".join(json.dumps({"text": f"document {i}: héllo wörld 性能 " * (1 + i % 5)}, ensure_ascii=False) + "\n"
                    for i in range(n)).encode("utf-8")
    path = tmp_path / ("c.jsonl.zst" if compress else "c.jsonl")
    path.write_bytes(zstandard.ZstdCompressor().compress(lines) if compress else lines)
    return str(path), lines


def test_public_functions_keep_their_signatures():
    bar = progress_bar(total=3, desc="x", unit="doc", unit_scale=True, enabled=False)
    bar.update(1), bar.set_postfix({"MB": "1"}, refresh=False), bar.close()
    p = DocumentProgress(desc="x", expected_rows=None, enabled=False)
    p.add(documents=1, skipped=0, utf8_bytes=5)
    p.close()
    assert planned_rows([]) == 0


def test_log_gets_single_lines_and_a_last_line_with_the_final_counts(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", log)
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "0")
    p = DocumentProgress(desc="encoding", expected_rows=980, enabled=True)   # 4 units of 245 rows
    assert isinstance(p.bar, LineProgress)   # a StringIO is no terminal
    for _ in range(4):
        p.add(documents=240, skipped=5, utf8_bytes=2_500_000, tokens=700)
    p.close()
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert len(lines) == 4                   # one per update here (interval 0), no repeated last line
    assert lines[-1].startswith("encoding: 960 doc of 960 (100%), 10.0 MB, 2,800 tokens, 20 skipped")
    assert "ETA" in lines[0] and "ETA" not in lines[-1]


def test_lines_are_periodic(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", log)
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "3600")
    p = DocumentProgress(desc="counting chunks", expected_rows=None, enabled=True)
    for _ in range(100):
        p.add(documents=1, skipped=0, utf8_bytes=10)
    p.close()
    assert log.getvalue().splitlines() == [log.getvalue().splitlines()[-1]]   # only the last line
    assert log.getvalue().startswith("counting chunks: 100 doc, 0.0 MB")


def test_compressed_input_gets_a_share_of_its_bytes_on_disk(tmp_path, monkeypatch):
    zst, _ = _corpus(tmp_path, compress=True)
    plain, raw = _corpus(tmp_path / ".." / tmp_path.name, n=50)
    units = plan_units(resolve_inputs([zst, plain]), unit_rows=20)
    assert planned_rows(units) is None       # the compressed file's rows are unknown
    shares = unit_input_bytes(units)
    import os
    assert sum(shares.values()) == os.path.getsize(zst) + os.path.getsize(plain)
    log = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", log)
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "0")
    p = DocumentProgress(desc="encoding", expected_rows=None, units=units)
    zst_unit = next(u for u in units if u.source.path.endswith(".zst"))
    p.add(documents=300, skipped=0, utf8_bytes=1, unit_id=zst_unit.unit_id)
    share = round(100 * os.path.getsize(zst) / sum(shares.values()))
    assert f"300 doc ({share}%, ETA" in log.getvalue()
    for u in units:
        if u is not zst_unit:
            p.add(documents=10, skipped=0, utf8_bytes=1, unit_id=u.unit_id)
    p.close()
    assert "(100%)" in log.getvalue().splitlines()[-1]


def test_train_encode_verify_count_documents_and_end_on_the_summary(tmp_path, capsys, monkeypatch):
    from ube_stream.cli.main import main

    corpus, raw = _corpus(tmp_path, n=120, compress=True)
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "0")
    assert main(["train", corpus, "--vocab-size", "600", "--workers", "1", "-o", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    last = [line for line in err.splitlines() if line.startswith("counting chunks:")][-1]
    summary_docs = int(re.search(r"^documents\s+([\d,]+)", err, re.M).group(1).replace(",", ""))
    summary_bytes = int(re.search(r"^bytes\s+([\d,]+)", err, re.M).group(1).replace(",", ""))
    assert summary_docs == 120 and last.startswith(f"counting chunks: {summary_docs} doc")
    assert f"{summary_bytes / 1e6:,.1f} MB" in last and summary_bytes == len(raw) - 120 * len('{"text": ""}\n')
    assert main(["encode", corpus, "--tokenizer", str(tmp_path / "t.json"), "-o", str(tmp_path / "sh"),
                 "--workers", "1"]) == 0
    err = capsys.readouterr().err
    last = [line for line in err.splitlines() if line.startswith("encoding:")][-1]
    tokens = re.search(r"^tokens\s+([\d,]+)", err, re.M).group(1)
    assert last.startswith("encoding: 120 doc (100%)") and f"{tokens} tokens" in last
    assert main(["verify", "--shards", str(tmp_path / "sh"), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("verify shards:")][-1].startswith(
        "verify shards: 120 doc of 120 (100%)")


def _big_zst(path, n, seed=0):
    """``n`` JSON lines (about 100 bytes each: many 1 MiB read blocks, so many batches) as one zstd frame."""
    lines = "".join(json.dumps({"text": f"doc {seed}-{i}: the quick brown fox {i % 97} jumps over " * 2})
                    + "\n" for i in range(n)).encode()
    path.write_bytes(zstandard.ZstdCompressor().compress(lines))
    return str(path)


def _progress_lines(err, prefix):
    return [line for line in err.splitlines() if line.startswith(prefix)]


def _docs(line):
    """The document count of a progress line (``1.02k`` read as 1020)."""
    text = re.match(r"[^:]+: ([\d,.]+[kMG]?) doc", line).group(1).replace(",", "")
    scale = {"k": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1)
    return round(float(text.rstrip("kMG")) * scale)


def test_one_large_compressed_unit_reports_while_it_runs(tmp_path, capsys, monkeypatch):
    """Issue 28 item 6: one big .jsonl.zst (one unit, rows unknown) used to show
    nothing until it ended.  Now lines appear while it runs, with the documents
    so far and a percentage and ETA from the compressed bytes consumed; the
    last line equals the summary.  In train's counting and in encode, in process."""
    from ube_stream.cli.main import main

    n = 30_000
    corpus = _big_zst(tmp_path / "big.jsonl.zst", n)
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "0")
    assert main(["train", corpus, "--vocab-size", "600", "--workers", "1", "-o", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    lines = _progress_lines(err, "counting chunks:")
    running = [line for line in lines if 0 < _docs(line) < n]
    assert len(running) >= 3                                      # reported before the unit ended
    assert [_docs(line) for line in lines] == sorted(_docs(line) for line in lines)
    shares = [int(m.group(1)) for line in running for m in [re.search(r"\((\d+)%, ETA ", line)] if m]
    assert shares and 0 < shares[0] < 100 and shares == sorted(shares)   # compressed bytes read / on disk
    summary_bytes = int(re.search(r"^bytes\s+([\d,]+)", err, re.M).group(1).replace(",", ""))
    assert lines[-1].startswith(f"counting chunks: {progress._count(n, True)} doc (100%), "
                                f"{summary_bytes / 1e6:,.1f} MB")

    assert main(["encode", corpus, "--tokenizer", str(tmp_path / "t.json"), "-o", str(tmp_path / "sh"),
                 "--workers", "1"]) == 0
    err = capsys.readouterr().err
    lines = _progress_lines(err, "encoding:")
    running = [line for line in lines if 0 < _docs(line) < n]
    assert len(running) >= 3 and all("tokens" in line for line in running)
    tokens = re.search(r"^tokens\s+([\d,]+)", err, re.M).group(1)
    assert lines[-1].startswith(f"encoding: {progress._count(n, True)} doc (100%)")
    assert f"{tokens} tokens" in lines[-1]


def test_running_units_in_worker_processes_report_to_the_driver(tmp_path, capsys, monkeypatch):
    """Two large compressed files on two worker processes: the driver's lines show
    counts no set of finished units adds up to (the running units' reports came
    over the pool's pipes), and the last line is the summary's."""
    from ube_stream.cli.main import main

    sizes = (24_000, 17_000)
    corpora = [_big_zst(tmp_path / f"c{i}.jsonl.zst", n, seed=i) for i, n in enumerate(sizes)]
    tok = tmp_path / "t.json"
    assert main(["train", corpora[1], "--vocab-size", "600", "--workers", "1", "-o", str(tok)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("UBE_PROGRESS_SECONDS", "0")
    assert main(["encode", *corpora, "--tokenizer", str(tok), "-o", str(tmp_path / "sh"), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    lines = _progress_lines(err, "encoding:")
    finished_sums = {progress._count(n, True) for n in (0, sizes[0], sizes[1], sum(sizes))}
    assert [line for line in lines if line.split(": ")[1].split(" doc")[0] not in finished_sums]
    assert lines[-1].startswith(f"encoding: {progress._count(sum(sizes), True)} doc (100%)")
    tokens = re.search(r"^tokens\s+([\d,]+)", err, re.M).group(1)
    assert f"{tokens} tokens" in lines[-1]


def test_a_terminal_bar_shows_a_running_units_share_of_the_input(monkeypatch):
    """On a terminal (tqdm) a running unit's report moves the bar: its documents,
    and the input share and ETA in the postfix when the rows are unknown."""
    screen = io.StringIO()
    monkeypatch.setattr(progress, "_is_terminal", lambda stream: True)
    monkeypatch.setattr(progress.sys, "stderr", screen)
    p = DocumentProgress(desc="encoding", expected_rows=None, expected_input_bytes=1000)
    progress.deliver({"unit_id": "u", "documents": 10, "utf8_bytes": 10, "tokens": 4, "input_bytes": 250})
    p.bar.start_t -= 5    # five seconds in
    progress.deliver({"unit_id": "u", "documents": 20, "utf8_bytes": 20, "tokens": 9, "input_bytes": 500})
    assert p.bar.n == 20 and p.bar.postfix.split(", ")[-2:] == ["input=50%", "ETA=00:05"]
    p.add(documents=40, skipped=0, utf8_bytes=40, tokens=15, input_bytes=1000, unit_id="u")
    assert p.bar.n == 40 and "input=100%" in p.bar.postfix and "tokens=15" in p.bar.postfix
    p.close()
