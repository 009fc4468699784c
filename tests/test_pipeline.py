"""The one-command pipeline (``ube demo``) end to end on the bundled sample."""
import json
import os
import subprocess
import sys

from ube_stream.shards import TokenShards
from ube_stream.tokenizer import Tokenizer


def test_demo_end_to_end(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "demo", "--out", str(out), "--vocab-size", "2000",
                           "--workers", "1", "-q"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for substrate in ("ube", "utf8", "utf16"):
        tok = Tokenizer.load(out / f"tokenizer-{substrate}-2000.json")
        assert tok.substrate == substrate and tok.vocab_size == 2000
        shards = TokenShards(out / f"shards-{substrate}", verify="full")
        assert len(shards) > 0 and shards.tokenizer == tok
        assert f"[verify] {substrate:<5} OK" in proc.stderr
    # the table printed: Gini per tokenizer, English tokens, wins
    assert "Gini" in proc.stdout and "en tokens" in proc.stdout and "ube vs utf8: won" in proc.stdout
    table = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    gini = {name: table["summary"][name]["gini"] for name in ("ube", "utf8", "utf16")}
    assert gini["ube"] < gini["utf8"]
    assert os.path.getsize(out / "eval.csv") > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "premiums.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
