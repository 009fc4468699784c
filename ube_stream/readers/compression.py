"""Byte streams of line files (JSON Lines, text), plain, gzip or zstd.

:func:`open_bytes` opens a file for streaming reads through one decoder loop
(:class:`_DecodedRaw`) with two decoders: zstd, which walks frames and blocks
itself, and gzip, which inflates members in 1 MiB steps; both notice a
truncated file and read concatenated frames or members.  :func:`scan_line_starts`
finds the unit boundaries of an uncompressed line file in one pass, and
:func:`open_at` seeks a worker straight to its unit's first row.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import zlib
from typing import Any, Generator, Optional, cast

import numpy as np

from ..executors import usable_cores
from ..progress import note_input
from ..storage import is_url, open_input
from .batch import Reporter

BLOCK_BYTES = 1 << 20          # read size for line files: bounds memory per worker


ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
_SKIPPABLE_MAGIC_BYTES = b"\x2a\x4d\x18"   # bytes 1..3 of a skippable frame's magic 0x184D2A5?


class _DecodedRaw(io.RawIOBase):
    """A raw reader over a decoder's output: a subclass's ``_step()`` decodes
    the next piece of the compressed file and returns its output (often
    empty), setting ``_eof`` at the end; ``_offset`` is the compressed offset
    read to (progress).  An error after some bytes is raised at the next
    call, so what was decoded before it is read (``read1`` hands it out)."""

    _errors: tuple = (EOFError,)   # what _step raises on a damaged stream

    def __init__(self, path: str):
        self._file = open_input(path)
        self._offset = 0
        self._pending = b""
        self._pending_pos = 0
        self._eof = False
        self._error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def _step(self) -> bytes:
        raise NotImplementedError

    def readinto(self, buffer) -> int:
        n = 0
        while n < len(buffer):
            if self._pending_pos == len(self._pending):
                if self._eof:
                    break
                if self._error is not None:
                    if n:
                        break
                    error, self._error = self._error, None
                    self._eof = True
                    raise error
                try:
                    self._pending, self._pending_pos = self._step(), 0
                except self._errors as exc:
                    self._error = exc
                continue
            take = min(len(buffer) - n, len(self._pending) - self._pending_pos)
            buffer[n:n + take] = memoryview(self._pending)[self._pending_pos:self._pending_pos + take]
            self._pending_pos += take
            n += take
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


GZIP_MAGIC = b"\x1f\x8b"
GZIP_OUT_BYTES = BLOCK_BYTES      # a gzip step decodes at most this much (bounds memory on a bomb)
GZIP_IN_BYTES = 256 << 10         # compressed bytes read at a time


def _inflate_module():
    """zlib-ng's zlib-compatible module when the optional ``fastgzip`` extra is
    installed (about 1.5-2x faster inflation, identical output), else zlib."""
    try:
        from zlib_ng import zlib_ng
        return zlib_ng
    except ImportError:
        return zlib


class _GzipRaw(_DecodedRaw):
    """Streaming gzip decoder (RFC 1952) that hands out up to
    ``GZIP_OUT_BYTES`` per step (``gzip.GzipFile`` hands out ~24 KB pieces:
    thousands of tiny batches for one reader feeding several encoders).
    Reads concatenated members and the zero padding between them, as
    ``gzip`` does; the header, CRC-32 and length of every member are checked
    by the inflater.  A file that ends inside a member is ``EOFError``; bytes
    that are not a member, or a damaged member, are ``gzip.BadGzipFile``
    naming the compressed offset."""

    _errors = (EOFError, OSError)

    def __init__(self, path: str):
        super().__init__(path)
        self._zlib = _inflate_module()
        self._dobj: Any = None     # the inflater of the member being read, None between members
        self._rest = b""           # compressed bytes read but not yet given to an inflater
        self._members = 0

    def _read(self) -> bytes:
        data = self._file.read(GZIP_IN_BYTES)
        self._offset += len(data)
        return data

    def _start_member(self) -> bool:
        """Start the next member at ``_rest``; False at the end of the file."""
        rest = self._rest
        while True:
            if self._members:
                rest = rest.lstrip(b"\x00")          # zero padding after a member
            if len(rest) >= 2:
                break
            data = self._read()
            if not data:
                if rest:
                    raise gzip.BadGzipFile(f"not a gzip member at compressed byte offset "
                                           f"{self._offset - len(rest)} (1 byte {rest!r} after the last member)")
                return False
            rest += data
        if rest[:2] != GZIP_MAGIC:
            raise gzip.BadGzipFile(f"not a gzip member at compressed byte offset {self._offset - len(rest)} "
                                   f"(bytes {rest[:2]!r}, not the gzip magic 1f 8b)")
        self._rest = rest
        self._dobj = self._zlib.decompressobj(wbits=31)
        self._members += 1
        return True

    def _step(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        try:
            while size < GZIP_OUT_BYTES:
                if self._dobj is None and not self._start_member():
                    self._eof = True
                    break
                data, self._rest = self._rest or self._read(), b""
                if not data:
                    raise EOFError(f"gzip stream ends inside a member at compressed byte offset {self._offset} "
                                   f"(the file is truncated)")
                before = self._dobj.copy()
                try:
                    out = self._dobj.decompress(data, GZIP_OUT_BYTES - size)
                except self._zlib.error:
                    self._dobj = before
                    out = self._salvage(data, GZIP_OUT_BYTES - size, parts)   # sets _rest and _dobj
                    parts.append(out)
                    size += len(out)
                    continue
                parts.append(out)
                size += len(out)
                if self._dobj.eof:
                    self._rest, self._dobj = self._dobj.unused_data, None
                else:
                    self._rest = self._dobj.unconsumed_tail
        except (EOFError, OSError) as exc:
            if not any(parts):
                raise
            self._error = exc
        return b"".join(parts)

    def _salvage(self, data: bytes, limit: int, parts: list[bytes]) -> bytes:
        """Inflate ``data`` again in small pieces (64 bytes, then single bytes
        in the piece that fails) after the inflater raised on it: the output
        before the damage is kept (``parts``) and the error raised where it
        is, so a reader counts the rows decoded before it (``gzip`` hands
        them out before its CRC check fails too)."""
        out: list[bytes] = []
        n = 0
        i = 0
        step = 64
        while i < len(data):
            before = self._dobj.copy()
            try:
                piece = self._dobj.decompress(data[i:i + step], limit - n)
            except self._zlib.error as exc:
                if step > 1:
                    self._dobj, step = before, 1
                    continue
                parts.extend(out)
                raise gzip.BadGzipFile(f"a damaged gzip member at compressed byte offset "
                                       f"{self._offset - len(data) + i}: {exc}") from None
            out.append(piece)
            n += len(piece)
            i += step
            if self._dobj.eof:            # the piece ended the member
                self._rest, self._dobj = self._dobj.unused_data + data[i:], None
                break
            if self._dobj.unconsumed_tail:   # the piece filled the step
                self._rest = self._dobj.unconsumed_tail + data[i:]
                break
        return b"".join(out)


class _ZstdRaw(_DecodedRaw):
    """Streaming zstd decoder that walks the frames' structure itself
    (RFC 8878: frame header, block headers, optional checksum) and feeds the
    decompressor one block at a time.  So no call decodes more than one block
    (at most 128 KiB), however compressible the data (a 4 GB line of one byte
    repeated is a 122 KB file), a truncated last frame is noticed
    (``EOFError``), concatenated and skippable frames are read, and bytes that
    are not a frame are ``zstandard.ZstdError`` naming their offset.

    ``start``/``stop``: read the frames from compressed byte ``start`` (a
    frame start) on, up to the first frame starting at or after ``stop``
    (the frames of a work unit, :func:`zstd_frame_units`)."""

    def __init__(self, path: str, start: int = 0, stop: int | None = None):
        import zstandard

        super().__init__(path)
        self._zstd = zstandard
        self._errors = (EOFError, zstandard.ZstdError)
        if start:
            self._file.seek(start)
        self._offset = start            # compressed offset of the next byte to read
        self._stop = stop
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj: Any = None          # the decompressor of the frame being read, None between frames
        self._last_block = False
        self._checksum = False

    def _take(self, n: int, what: str) -> bytes:
        data = self._file.read(n)
        self._offset += len(data)
        if len(data) < n:
            raise EOFError(f"zstd stream ends inside {what} at compressed byte offset {self._offset} "
                           f"(the file is truncated)")
        return data

    def _step(self) -> bytes:
        """Decode the next piece (a frame header, a block, a checksum, a
        skippable frame); returns its output (often empty).  Sets ``_eof`` at
        the end of the input, between frames."""
        if self._dobj is None:
            if self._stop is not None and self._offset >= self._stop:
                self._eof = True
                return b""
            start = self._offset
            magic = self._file.read(4)
            self._offset += len(magic)
            if not magic:
                self._eof = True
                return b""
            if len(magic) < 4:
                raise EOFError(f"zstd stream ends inside a frame header at compressed byte offset {self._offset} "
                               f"(the file is truncated)")
            if magic[1:] == _SKIPPABLE_MAGIC_BYTES and magic[0] & 0xF0 == 0x50:
                size = int.from_bytes(self._take(4, "a skippable frame"), "little")
                self._take(size, "a skippable frame")
                return b""
            if magic != ZSTD_FRAME_MAGIC:
                raise self._zstd.ZstdError(f"not a zstd frame at compressed byte offset {start} (magic {magic!r})")
            descriptor = self._take(1, "a frame header")
            header = magic + descriptor + self._take(frame_header_rest(descriptor[0]), "a frame header")
            self._checksum = bool(descriptor[0] & 0x04)
            self._last_block = False
            self._dobj = self._dctx.decompressobj()
            return self._dobj.decompress(header)
        if self._last_block:   # the frame's checksum: the decompressor checks it (ZstdError on a mismatch)
            out = self._dobj.decompress(self._take(4, "a frame checksum"))
            self._dobj = None
            return out
        head = self._take(3, "a block header")
        value = int.from_bytes(head, "little")
        kind, size = (value >> 1) & 3, value >> 3
        if kind == 3:
            raise self._zstd.ZstdError(f"reserved zstd block type at compressed byte offset {self._offset - 3}")
        self._last_block = bool(value & 1)
        body = self._take(1 if kind == 1 else size, "a block")
        out = self._dobj.decompress(head + body)
        if self._last_block and not self._checksum:
            self._dobj = None
        return out


def frame_header_rest(descriptor: int) -> int:
    """Bytes of a zstd frame header after its descriptor byte (RFC 8878 3.1.1.1):
    window descriptor, dictionary id, frame content size."""
    single_segment = bool(descriptor & 0x20)
    fcs = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    return (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + fcs


def zstd_frame_layout(path: str) -> list[tuple[int, int, int | None]] | None:
    """The data frames of a zstd file from its frame and block headers alone
    (block bodies are seeked over, nothing is decompressed): ``[(compressed
    start, compressed stop, content size or None), ...]``; skippable frames
    are left out.  ``None`` when the bytes are not whole zstd frames (not
    zstd, truncated: the reader reports the damage where it is)."""
    frames: list[tuple[int, int, int | None]] = []
    with open_input(path) as f:
        size = f.seek(0, io.SEEK_END)
        f.seek(0)
        while True:
            start = f.tell()
            if start > size:   # a frame's blocks run past the end: truncated
                return None
            magic = f.read(4)
            if not magic:
                return frames
            if magic[1:] == _SKIPPABLE_MAGIC_BYTES and magic[0] & 0xF0 == 0x50:
                f.seek(int.from_bytes(f.read(4), "little"), io.SEEK_CUR)
                continue
            descriptor = f.read(1)
            if magic != ZSTD_FRAME_MAGIC or not descriptor:
                return None
            header = f.read(frame_header_rest(descriptor[0]))
            content = _content_size(descriptor[0], header)
            while True:
                head = f.read(3)
                if len(head) < 3:
                    return None
                value = int.from_bytes(head, "little")
                f.seek(1 if (value >> 1) & 3 == 1 else value >> 3, io.SEEK_CUR)
                if value & 1:
                    break
            if descriptor[0] & 0x04:
                f.seek(4, io.SEEK_CUR)
            if f.tell() > size:
                return None
            frames.append((start, f.tell(), content))


def _content_size(descriptor: int, header: bytes) -> int | None:
    """A frame's Frame_Content_Size (RFC 8878 3.1.1.1.4), ``None`` when absent."""
    size = (1 if descriptor & 0x20 else 0, 2, 4, 8)[descriptor >> 6]
    if not size or len(header) < size:
        return None
    value = int.from_bytes(header[-size:], "little")
    return value + 256 if size == 2 else value


class _Span(io.RawIOBase):
    """The next ``length`` bytes of the binary file ``f``, as a file."""

    def __init__(self, f, length: int):
        self.f, self.left = f, length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.f.read(min(len(buffer), self.left))
        buffer[:len(data)] = data
        self.left -= len(data)
        return len(data)


def _frame_lines(path: str, frames: list[tuple[int, int, int | None]]) -> list[tuple[int, int, int]]:
    """``(text bytes, newlines, last byte or -1)`` of each data frame, the
    frames decompressed in parallel on threads (zstd and the newline count
    release the GIL), each in pieces of at most one block read (bounded
    memory whatever a frame's size); the threads end here, before any worker
    is forked.  Raises ``zstandard.ZstdError`` on damage."""
    from concurrent.futures import ThreadPoolExecutor

    import zstandard

    def count(frame: tuple[int, int, int | None]) -> tuple[int, int, int]:
        text = newlines = 0
        last = -1
        with open_input(path) as f:
            f.seek(frame[0])
            # the frame's compressed bytes only: the decoder must not run on into the next frame
            compressed = io.BufferedReader(_Span(f, frame[1] - frame[0]), buffer_size=1 << 17)
            reader = zstandard.ZstdDecompressor().stream_reader(compressed, read_size=1 << 17)
            while True:
                piece = reader.read(BLOCK_BYTES)
                if not piece:
                    return text, newlines, last
                text += len(piece)
                newlines += int(np.count_nonzero(np.frombuffer(piece, np.uint8) == 10))
                last = piece[-1]

    with ThreadPoolExecutor(max_workers=min(len(frames), usable_cores(), 16)) as pool:
        return list(pool.map(count, frames))


def zstd_frame_units(path: str, unit_rows: int, unit_bytes: int | None) -> list[tuple[int, tuple]] | None:
    """Units of a multi-frame zstd line file (``pzstd``, ``zstd --block-size``,
    the seekable format), cut at frame boundaries: ``[(row_start, (compressed
    start, compressed stop, text offset, starts inside a line)), ...]``.

    A unit owns the lines that start in its frames' decompressed bytes; one
    starting inside a line skips to the next line start, and the last line
    may run on into the next unit's frames.  A unit ends at the first frame
    start at or past ``unit_rows`` rows or ``unit_bytes`` decompressed bytes
    from its start.  The frames are found from their headers
    (:func:`zstd_frame_layout`); row numbers come from one decompression of
    the frames here, on threads (:func:`_frame_lines`: newlines counted per
    frame), so rows number as in a whole-file read.  ``None`` (one unit for
    the file, as for any compressed file) when the file is remote, has one
    data frame, or does not decode whole (the reader then reports the damage
    where it is)."""
    import zstandard

    frames = None if is_url(path) else zstd_frame_layout(path)
    if frames is None or len(frames) < 2:
        return None
    try:
        lines = _frame_lines(path, frames)
    except (EOFError, zstandard.ZstdError):
        return None
    starts = []   # per data frame: (compressed start, text offset, newlines before it, inside a line)
    text = newlines = 0
    last = 10
    for (at, _, _), (size, count, end) in zip(frames, lines):
        starts.append((at, text, newlines, text > 0 and last != 10))
        if size:
            text, newlines, last = text + size, newlines + count, end
    num_rows = newlines + (text > 0 and last != 10)
    units: list[tuple[int, int, int, bool]] = []   # (row_start, compressed start, text offset, inside a line)
    for at, offset, before, inside in starts:
        row = before + inside
        if units and (offset - units[-1][2] < (unit_bytes or offset + 1) and row - units[-1][0] < unit_rows):
            continue
        if units and row == units[-1][0]:   # the unit before owns no line start: this one replaces it
            units.pop()
        if units and row >= num_rows:      # no line starts here or after
            break
        units.append((row, at, offset, inside))
    if not units:
        return None
    units[0] = (0, 0, 0, False)             # the first unit reads from the start (skippable frames too)
    stops = [u[1] for u in units[1:]] + [os.path.getsize(path)]
    return [(row, (at, stop, offset, inside)) for (row, at, offset, inside), stop in zip(units, stops)]


def open_bytes(path: str, compression: str | None):
    """A buffered binary reader of the (decompressed) bytes of ``path``."""
    if compression is None:
        return open_input(path)
    if compression == "gzip":
        return io.BufferedReader(_GzipRaw(path), buffer_size=BLOCK_BYTES)
    if compression == "zstd":
        return io.BufferedReader(_ZstdRaw(path), buffer_size=BLOCK_BYTES)
    raise ValueError(f"unknown compression {compression!r}")


def broken_errors(compression: str | None) -> tuple:
    """The exceptions a damaged stream of ``compression`` raises while it is read
    (``zstandard``, imported only for a zstd stream, adds its own)."""
    if compression != "zstd":
        return (EOFError, OSError, zlib.error)
    import zstandard
    return (EOFError, OSError, zlib.error, zstandard.ZstdError)


def report_broken(reporter: Reporter, exc: BaseException, compression: str | None, row: int, pos: int) -> None:
    reason = "truncated_file" if isinstance(exc, EOFError) else "corrupt_file"
    what = "is truncated" if reason == "truncated_file" else "is corrupt"
    reporter.problem(reason, f"{reporter.path}: the {compression or 'file'} stream {what} at decompressed byte "
                             f"offset {pos} (row {row}): {exc}. Re-download or re-compress the file, "
                             f"or read with on_error='skip' to skip the whole file and count its rows",
                     row=row, offset=pos)


def skip_if_broken(unit, reporter: Reporter) -> bool:
    """Under ``on_error="skip"``, check a compressed unit's whole stream before
    anything is yielded: gzip (and a zstd frame's optional checksum) is checked
    only at the end of the stream, so rows read before the damage may already
    be garbage.  A broken stream is discarded whole: counted as
    ``corrupt_file``/``truncated_file`` with its row count (the lines decoded
    before the damage, at least 1), and ``True`` is returned.  Costs one more
    decompression of the file, only in skip mode."""
    compression = unit.source.compression
    if compression is None or reporter.raise_errors:
        return False
    rows = pos = 0
    last = b"\n"
    frames = unit.zstd_frames
    try:
        with (open_bytes(unit.source.path, compression) if frames is None else
              io.BufferedReader(_ZstdRaw(unit.source.path, start=frames[0], stop=frames[1]), BLOCK_BYTES)) as stream:
            while True:
                block = stream.read1(BLOCK_BYTES)   # read1: what was decoded before an error is counted
                if not block:
                    return False
                rows += block.count(b"\n")
                pos += len(block)
                last = block[-1:]
    except broken_errors(compression) as exc:
        reason = "truncated_file" if isinstance(exc, EOFError) else "corrupt_file"
        what = "is truncated" if reason == "truncated_file" else "is corrupt"
        count = max(1, rows + (last != b"\n"))
        reporter.skips.add(reason, path=reporter.path, row=0, offset=pos, count=count,
                           message=f"{reporter.path}: the {compression} stream {what} at decompressed byte offset "
                                   f"{pos}: {exc}; the whole file ({count} rows decoded before the damage) was "
                                   f"skipped. Re-download or re-compress it")
        return True


def scan_line_starts(path: str, unit_rows: int, unit_bytes: int | None = None) -> tuple[int, list[tuple[int, int]]]:
    """One pass over an uncompressed line file: ``(num_rows, [(row, byte), ...])``
    with the row and byte offset where every unit starts.  A unit ends after
    ``unit_rows`` rows or at the end of the first line that reaches
    ``unit_bytes`` bytes from its start (``None``: rows only), whichever comes
    first; the cuts depend on the file alone."""
    starts = [(0, 0)]
    lines, pos, last = 0, 0, b"\n"
    # one buffer and one mask for the whole pass: a fresh 1 MiB block and mask per read cost more in page
    # faults than the newline search itself (0.57 -> ~0.2 CPU s per GB)
    buffer = bytearray(BLOCK_BYTES)
    data = np.frombuffer(buffer, dtype=np.uint8)
    mask = np.empty(BLOCK_BYTES, dtype=bool)
    with open_input(path) as f:
        while True:
            size = cast(io.BufferedIOBase, f).readinto(buffer)   # local files and fsspec's have readinto
            if not size:
                break
            row0, byte0 = starts[-1]
            newline = np.equal(data[:size], 10, out=mask[:size])
            count = int(np.count_nonzero(newline))   # (bytes.count is a byte loop: 4x slower)
            if lines + count < row0 + unit_rows and (unit_bytes is None or pos + size < byte0 + unit_bytes):
                lines, pos, last = lines + count, pos + size, bytes(buffer[size - 1:size])   # no cut in this block
                continue
            ends = np.flatnonzero(newline) + (pos + 1)   # byte after each \n
            while True:
                row0, byte0 = starts[-1]
                cut = row0 + unit_rows - lines - 1          # index in ends of the row cut
                if unit_bytes is not None:
                    cut = min(cut, int(np.searchsorted(ends, byte0 + unit_bytes, side="left")))
                if cut >= len(ends):
                    break
                starts.append((lines + cut + 1, int(ends[cut])))
            lines += len(ends)
            pos += size
            last = bytes(buffer[size - 1:size])
    num_rows = lines + (1 if last != b"\n" else 0)
    return num_rows, [(row, byte) for row, byte in starts if row < num_rows or row == 0]


def line_blocks(unit, reporter: Reporter) -> Generator[tuple[bytes, int, int, int], Optional[int], None]:
    """The unit's line file as blocks of whole lines: ``(block, cut, row,
    pos)``, where ``block[:cut]`` holds whole lines (the last one may lack its
    ``\n`` at the end of the file), the first of them row ``row`` at
    decompressed byte offset ``pos``.  Reading starts at the unit's first row
    when its byte offset is known (else at row 0: readers pass over the rows
    before ``row_start``) and stops once ``row_stop`` is reached.

    A line never spans blocks only while it is short: the blocks that do not
    end it are carried and joined once it ends (linear time).  A line whose
    bytes (without its ``\n``) pass ``reporter.max_document_bytes`` is never
    held whole: once the carried bytes pass the limit it is reported
    (:meth:`~.batch.Reporter.too_large`) and the rest of it is read and
    dropped, so memory stays within the limit plus a block; its row is still
    numbered.  A shorter line over the limit lies inside one block: the
    reader checks those.  A damaged stream is reported
    at the row and offset it broke at (:func:`report_broken`).

    A reader that has found every line of ``block[:cut]`` (or stopped at
    ``row_stop``) may ``send`` the row after them, so the lines are not
    counted a second time here (the JSON Lines kernel finds them)."""
    source = unit.source
    broken = broken_errors(source.compression)
    cap = reporter.max_document_bytes
    stream, row, pos = open_at(unit, source.compression)
    dropping = unit.zstd_frames is not None and unit.zstd_frames[3]   # starts inside a line: skip to its end
    row -= dropping   # (that line is the row before the unit's first)
    # read1 returns what was decoded before a damaged stream raises, so the rows before it are read
    read = stream.read1 if source.compression is not None else stream.read
    carry: list[bytes] = []   # the start of a line the blocks read so far do not end
    carried = 0               # dropping: inside a line over the limit, its bytes are read and dropped
    on_disk = _disk_position(stream, source.compression)
    first = on_disk()
    with stream, _noting_input(unit.unit_id):
        while unit.row_stop is None or row < unit.row_stop:
            try:
                block = read(BLOCK_BYTES)   # read at call time: tests shrink it
            except broken as exc:
                report_broken(reporter, exc, source.compression, row, pos + carried)
                return
            note_input(unit.unit_id, on_disk() - first)
            final = not block
            if dropping:
                end = block.find(b"\n")
                if end < 0 and not final:
                    carried += len(block)
                    continue
                end = len(block) if final else end + 1
                row, pos, carried, dropping = row + 1, pos + carried + end, 0, False
                block = block[end:]
                if final:
                    return
                if not block:
                    continue
            if not final and b"\n" not in block:
                carry.append(block)
                carried += len(block)
                if carried > cap:
                    if row >= unit.row_start:
                        reporter.too_large(row, carried, offset=pos, what="line", at_least=True)
                    carry, dropping = [], True
                continue
            if carry:
                block = b"".join(carry + [block])
            cut = len(block) if final else block.rfind(b"\n") + 1   # complete lines only, but at the end
            carry = [block[cut:]] if cut < len(block) else []
            carried = len(block) - cut
            if cut:
                counted = yield block, cut, row, pos   # a reader that read every line sends the next row
                row = counted if counted is not None else row + block.count(b"\n", 0, cut) + (block[cut - 1] != 10)
                pos += cut
            if final:
                return


def _disk_position(stream, compression: str | None):
    """A function giving the offset in the file on disk that ``stream`` (from
    :func:`open_bytes` / :func:`open_at`) has read to: the compressed offset
    for gzip and zstd (the progress of a running unit, :func:`note_input`)."""
    if compression is not None:
        raw = stream.raw
        return lambda: raw._offset
    return stream.tell


@contextlib.contextmanager
def _noting_input(unit_id: str):
    try:
        yield
    finally:
        note_input(unit_id, None)


def open_at(unit, compression):
    """Open a line file at the unit's first row when a byte offset is known
    (at its first frame for a unit of zstd frames): returns ``(stream, row, pos)``."""
    if unit.zstd_frames is not None and compression == "zstd":
        start, _, text, _ = unit.zstd_frames
        return io.BufferedReader(_ZstdRaw(unit.source.path, start=start), buffer_size=BLOCK_BYTES), \
            unit.row_start, text
    stream = open_bytes(unit.source.path, compression)
    if unit.byte_start and compression is None:
        stream.seek(unit.byte_start)
        return stream, unit.row_start, unit.byte_start
    return stream, 0, 0
