"""The gzip reader (``readers.compression._GzipRaw``) against Python's ``gzip``
module: the same bytes for every file ``gzip`` reads, the same kind of error
(``EOFError`` for a file that ends inside a member, ``OSError`` for bytes that
are not a member or a damaged member) after the same decoded prefix, with the
stdlib inflater and with zlib-ng's when it is installed."""
import gzip
import io
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream.readers import compression

INFLATERS = [pytest.param(zlib, id="zlib")]
try:
    from zlib_ng import zlib_ng
    INFLATERS.append(pytest.param(zlib_ng, id="zlib-ng"))
except ImportError:   # the optional fastgzip extra
    pass


@pytest.fixture(params=INFLATERS)
def inflater(request, monkeypatch):
    monkeypatch.setattr(compression, "_inflate_module", lambda: request.param)
    return request.param


def _drain(stream, size=1 << 20):
    """Everything ``stream.read1`` hands out, then the error it raised (or None)."""
    out = []
    try:
        while True:
            block = stream.read1(size)
            if not block:
                return b"".join(out), None
            out.append(block)
    except (EOFError, OSError, zlib.error) as exc:   # gzip lets some zlib.error through
        return b"".join(out), exc


def _kind(exc):
    return None if exc is None else EOFError if isinstance(exc, EOFError) else OSError


def _both(path, size=1 << 20):
    with gzip.open(path, "rb") as f:
        want = _drain(f, size)
    with compression.open_bytes(str(path), "gzip") as f:
        got = _drain(f, size)
    return want, got


def _same(path, size=1 << 20, same_kind=True):
    """The same bytes, and an error of the same kind (or, ``same_kind=False``,
    an error where ``gzip`` has one: a cut member followed by garbage is
    "truncated" to one reader and "damaged" to the other, noticed a few
    bytes apart)."""
    (want, want_exc), (got, got_exc) = _both(path, size)
    if same_kind or got_exc is None:
        assert got == want
    else:   # where the damage is noticed may differ by a few bytes: both hand out a prefix of the same text
        assert got.startswith(want) or want.startswith(got)
    assert isinstance(got_exc, (EOFError, OSError)) or got_exc is None   # only the two kinds the readers report
    if same_kind:
        assert _kind(got_exc) is _kind(want_exc), (got_exc, want_exc)
    else:
        assert (got_exc is None) == (want_exc is None), (got_exc, want_exc)
    return got, got_exc


def _member(data: bytes, flags: int = 0, extra: bytes = b"", name: bytes = b"", comment: bytes = b"") -> bytes:
    """One gzip member written by hand (RFC 1952), with the optional header fields."""
    header = b"\x1f\x8b\x08" + bytes([flags]) + struct.pack("<I", 0) + b"\x00\xff"
    if flags & 4:
        header += struct.pack("<H", len(extra)) + extra
    if flags & 8:
        header += name + b"\x00"
    if flags & 16:
        header += comment + b"\x00"
    if flags & 2:
        header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


TEXT = ("Ein Satz. 一个句子。 Предложение. वाक्य। " * 4000).encode()


@pytest.fixture
def small_steps(monkeypatch):
    """Steps of 1 KiB out and 300 bytes in, so members, errors and the ends of
    steps meet at many offsets."""
    monkeypatch.setattr(compression, "GZIP_OUT_BYTES", 1024)
    monkeypatch.setattr(compression, "GZIP_IN_BYTES", 300)


@pytest.mark.parametrize("steps", ["default", "small"])
def test_members_padding_and_headers(tmp_path, inflater, request, steps):
    if steps == "small":
        request.getfixturevalue("small_steps")
    files = {
        "one": gzip.compress(TEXT),
        "members": gzip.compress(TEXT[:1000]) + gzip.compress(b"") + gzip.compress(TEXT[1000:]) + gzip.compress(b""),
        "padded": gzip.compress(TEXT[:5000]) + b"\x00" * 1000 + gzip.compress(TEXT[5000:]) + b"\x00" * 7,
        "headers": b"".join(_member(TEXT[i:i + 9000], flags, b"xtra" * (i // 9000), b"name.txt", b"a comment")
                            for i, flags in zip(range(0, len(TEXT), 9000), [4, 8, 16, 2, 30, 0] * 100)),
        "empty_file": b"",
        "stored": gzip.compress(TEXT, compresslevel=0),
    }
    for name, data in files.items():
        path = tmp_path / f"{name}.gz"
        path.write_bytes(data)
        got, exc = _same(path)
        assert exc is None and got == gzip.decompress(data), name


def test_blocks_are_large(tmp_path):
    """The point of the reader: ``read1`` hands out up to the block size, not
    gzip's ~8-32 KB pieces (a reader feeding several encoders hands out each
    block as a batch)."""
    path = tmp_path / "big.gz"
    path.write_bytes(gzip.compress(TEXT * 20))
    with compression.open_bytes(str(path), "gzip") as f:
        sizes = [len(b) for b in iter(lambda: f.read1(compression.BLOCK_BYTES), b"")]
    assert sum(sizes) == len(TEXT) * 20
    assert all(size == compression.BLOCK_BYTES for size in sizes[:-1])


def test_one_byte_reads(tmp_path, inflater, small_steps):
    data = gzip.compress(TEXT[:20000]) + gzip.compress(TEXT[20000:30000])
    path = tmp_path / "f.gz"
    path.write_bytes(data)
    with compression.open_bytes(str(path), "gzip") as f:
        assert b"".join(iter(lambda: f.read(1), b"")) == TEXT[:30000]


@pytest.mark.parametrize("steps", ["default", "small"])
def test_damage_is_the_same_error_after_the_same_prefix(tmp_path, inflater, request, steps):
    if steps == "small":
        request.getfixturevalue("small_steps")
    good = gzip.compress(TEXT)
    crc = bytearray(good)
    crc[-6] ^= 1                       # CRC-32: every byte decodes, then the check fails
    size = bytearray(good)
    size[-2] ^= 0xFF                   # ISIZE
    cases = {
        "truncated_trailer": (good[:-5], EOFError),
        "truncated_half": (good[:len(good) // 2], EOFError),
        "truncated_header": (good + good[:5], EOFError),
        "crc": (bytes(crc), OSError),
        "isize": (bytes(size), OSError),
        "garbage_after": (good + b"trailing garbage", OSError),
        "one_byte_after": (good + b"x", OSError),
        "not_gzip": (b"PK\x03\x04 a zip file", OSError),
    }
    for name, (data, kind) in cases.items():
        path = tmp_path / f"{name}.gz"
        path.write_bytes(data)
        got, exc = _same(path)
        assert isinstance(exc, kind), (name, exc)
        if name not in ("truncated_half",):
            assert len(got) == len(TEXT) or name == "not_gzip", name
        if isinstance(exc, OSError) and name != "not_gzip":
            assert "compressed byte offset" in str(exc)


def test_damage_inside_the_data(tmp_path, inflater):
    """A flipped byte in the middle: gzip and this reader stop at an error
    (which one, and where, depends on what the byte turns into), having
    handed out only a prefix of the text."""
    good = gzip.compress(TEXT)
    for at in (100, len(good) // 3, len(good) // 2):
        bad = bytearray(good)
        bad[at] ^= 0x55
        path = tmp_path / f"mid{at}.gz"
        path.write_bytes(bytes(bad))
        with compression.open_bytes(str(path), "gzip") as f:
            got, exc = _drain(f)
        assert isinstance(exc, (EOFError, OSError)), at


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=4), st.integers(0, 3), st.binary(max_size=8))
def test_hypothesis_members_and_tails(members, cut, tail):
    """Random members, cut short or followed by random bytes: the same output
    and the same kind of error as ``gzip``."""
    import tempfile

    data = b"".join(gzip.compress(m) for m in members)
    if cut:
        data = data[:len(data) - cut * 3]
    data += tail
    with tempfile.NamedTemporaryFile(suffix=".gz") as f:
        f.write(data)
        f.flush()
        _same(f.name, same_kind=not tail)


def test_bomb_is_read_in_bounded_steps(tmp_path, inflater):
    """64 MiB of zeros (about 64 KB on disk): no step decodes more than the
    step size, so memory stays bounded however compressible the data."""
    path = tmp_path / "zeros.gz"
    path.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=9))
    raw = compression._GzipRaw(str(path))
    total = 0
    while not raw._eof:
        piece = raw._step()
        assert len(piece) <= compression.GZIP_OUT_BYTES
        total += len(piece)
    raw.close()
    assert total == 64 << 20


def test_progress_offset_is_the_compressed_position(tmp_path):
    data = gzip.compress(TEXT * 10)
    path = tmp_path / "p.gz"
    path.write_bytes(data)
    with compression.open_bytes(str(path), "gzip") as f:
        on_disk = compression._disk_position(f, "gzip")
        assert on_disk() == 0
        f.read1(1 << 16)
        assert 0 < on_disk() <= len(data)
        f.read()
        assert on_disk() == len(data)


def test_inflaters_agree(tmp_path):
    if len(INFLATERS) == 1:
        pytest.skip("zlib-ng (the fastgzip extra) is not installed")
    path = tmp_path / "f.gz"
    path.write_bytes(gzip.compress(TEXT * 5, compresslevel=9))
    outputs = []
    for param in INFLATERS:
        module = param.values[0]
        raw = compression._GzipRaw(str(path))
        raw._zlib = module
        with io.BufferedReader(raw) as f:
            outputs.append(f.read())
    assert outputs[0] == outputs[1] == TEXT * 5
