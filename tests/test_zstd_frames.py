"""Multi-frame zstd files are planned from their frame headers (issue 24 item 2):
the frames are found without decompressing (``zstd_frame_layout``), their
lines are counted by decompressing them on threads, and the units read
together give every line once, numbered as a whole-file read numbers it.
Truth: ``zstandard`` decompressing the whole file, split on ``\\n``."""
from __future__ import annotations

import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import readers
from ube_stream.readers import compression

_SKIPPABLE = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!"


def _build(pieces, sized, skippable_at):
    """zstd frames holding ``pieces`` (with or without their content size), a
    skippable frame before frame ``skippable_at``; returns (bytes, layout written)."""
    out, layout = b"", []
    for k, piece in enumerate(pieces):
        if k == skippable_at:
            out += _SKIPPABLE
        frame = zstandard.ZstdCompressor(write_content_size=sized[k], write_checksum=k % 2 == 0).compress(piece)
        layout.append((len(out), len(out) + len(frame), len(piece) if sized[k] else None))
        out += frame
    return out, layout


def _lines(raw: bytes):
    text = raw.decode("utf-8")
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


_chars = st.sampled_from(["a", "b", " ", "\n", "\n", "é", "性", "😀", "\r\n"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(_chars, min_size=1, max_size=400).map("".join).filter(lambda t: len(t) > 2),
       cuts=st.lists(st.floats(0, 1), max_size=8),
       sized=st.lists(st.booleans(), min_size=10, max_size=10),
       skippable_at=st.integers(0, 9), unit_rows=st.sampled_from([1, 2, 5, 1000]),
       unit_bytes=st.sampled_from([None, 1, 7, 64]))
def test_frame_units_cover_every_line_once(tmp_path_factory, text, cuts, sized, skippable_at, unit_rows,
                                           unit_bytes):
    raw = text.encode("utf-8")
    bounds = sorted({0, len(raw), *[int(c * len(raw)) for c in cuts]})   # anywhere: inside a line, a character
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:])]
    data, layout = _build(pieces, sized, skippable_at)
    path = tmp_path_factory.mktemp("z") / "f.txt.zst"
    path.write_bytes(data)
    assert compression.zstd_frame_layout(str(path)) == layout
    (source,) = readers.resolve_inputs([str(path)])
    units = readers.plan_units([source], unit_rows=unit_rows, unit_bytes=unit_bytes)
    if len(pieces) > 1 and len(_lines(raw)) > 1:
        assert sum(u.zstd_frames is not None for u in units) == len(units)
    got = [(int(r), t) for u in units for b in readers.read_unit(u) for r, t in zip(b.rows, b.to_pylist())]
    assert got == [(r, line.removesuffix("\r")) for r, line in enumerate(_lines(raw))]


def test_layout_refuses_a_truncated_or_foreign_file(tmp_path):
    data, _ = _build([b"one\ntwo\n", b"three\n"], [True, False], 5)
    (tmp_path / "t.zst").write_bytes(data[:-3])
    (tmp_path / "x.zst").write_bytes(b"not zstd at all")
    assert compression.zstd_frame_layout(str(tmp_path / "t.zst")) is None
    assert compression.zstd_frame_layout(str(tmp_path / "x.zst")) is None


def test_a_frame_whose_content_disagrees_with_its_header_is_one_unit(tmp_path):
    """A header stating a content size the frame does not decode to: the plan
    does not trust it (one unit; the reader reports the damage)."""
    frame = zstandard.ZstdCompressor().compress(b"alpha\nbeta\n")
    # Frame_Content_Size sits right after the descriptor and (no single segment) window byte
    descriptor = frame[4]
    assert descriptor >> 6 == 0 and descriptor & 0x20   # 1-byte size, single segment: byte 5
    lying = frame[:5] + bytes([frame[5] + 3]) + frame[6:]
    path = tmp_path / "l.txt.zst"
    path.write_bytes(lying + zstandard.ZstdCompressor().compress(b"gamma\n"))
    (source,) = readers.resolve_inputs([str(path)])
    assert len(readers.plan_units([source], unit_rows=1)) == 1
