"""Writing files so that a crash never leaves a torn one: the one atomic writer.

Every file ube-stream writes whole (tokenizer files, count tables, unit
markers, MANIFEST, evaluation tables, Megatron exports) goes through
:func:`atomic_open`: the bytes go to a temporary name beside the target, are
flushed and fsynced, and the temporary file is renamed over the target with
``os.replace``.  Readers see the old file or the new one, never a part; a
failure removes the temporary file.  Files are created with the process's
umask (0644 under 022), like any ``open``.

**Remote paths.**  Any ``scheme://`` path other than ``file://`` (``s3://``,
``gs://``, ``az://``, ``hf://``, ...) goes through fsspec
(:func:`filesystem`; install the extra for the store, e.g.
``pip install "ube-stream[s3]"``).  Credentials and endpoints come from
fsspec's usual configuration (``AWS_*`` variables, ``FSSPEC_S3_ENDPOINT_URL``,
``~/.config/fsspec``).  Object stores have no rename, so
:func:`atomic_open` on a URL writes a local temporary file and uploads it in
one PUT to the final name when the block ends cleanly: the PUT is the commit
point (an object store makes an object visible whole or not at all), and a
failure uploads nothing.  ``file://`` URLs are plain local paths.

**Files ube-stream did not write** (MANIFESTs, markers, tokenizer files,
caches) are read with :func:`read_bounded` (only a regular file of bounded
size: never ``/dev/zero``, a pipe or a directory) and named inside their
directory through :func:`inside` (no absolute path, no ``..``, no symbolic
link out, checked on the *name* before anything is opened).
"""
from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import threading
from typing import IO, Any, Callable, Iterator, Tuple

from .errors import StorageError

__all__ = ["TMP_SUFFIX", "storage_error", "os_error_message", "atomic_open", "atomic_write_bytes", "atomic_write_text",
           "atomic_write_json", "create_exclusive", "dumps_json", "fsync_dir", "is_url", "local_path",
           "filesystem", "join", "exists", "isfile", "isdir", "read_bytes", "open_input", "file_size",
           "cache_root", "MAX_JSON_BYTES", "name_problem", "inside", "read_bounded", "load_json",
           "resolve_cache_limit", "DEFAULT_CACHE_LIMIT"]

TMP_SUFFIX = ".tmp"


def cache_root() -> str:
    """ube-stream's cache directory on this machine (shard directories read from
    URLs, class tables): ``$UBE_STREAM_CACHE``, else ``$XDG_CACHE_HOME/ube-stream``,
    else ``~/.cache/ube-stream``."""
    return os.environ.get("UBE_STREAM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ube-stream")


#: the shard cache's size limit when neither ``cache_limit=`` nor ``$UBE_STREAM_CACHE_LIMIT`` sets one
DEFAULT_CACHE_LIMIT = 100 << 30
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "t": 10**12, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def resolve_cache_limit(value: "int | str | None" = None) -> int:
    """The shard cache's size limit in bytes: ``value`` (bytes, or a size such as
    ``"20GB"``, ``"512MiB"``), else ``$UBE_STREAM_CACHE_LIMIT``, else
    :data:`DEFAULT_CACHE_LIMIT` (100 GiB).

    >>> resolve_cache_limit("1.5 GiB"), resolve_cache_limit(4096), resolve_cache_limit("20GB")
    (1610612736, 4096, 20000000000)
    """
    where = "cache_limit"
    if value is None:
        value, where = os.environ.get("UBE_STREAM_CACHE_LIMIT") or DEFAULT_CACHE_LIMIT, "UBE_STREAM_CACHE_LIMIT"
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        text = str(value).strip().lower().replace(" ", "").replace("_", "")
        number = text.rstrip("abcdefghijklmnopqrstuvwxyz")
        try:
            size = int(float(number) * _SIZE_UNITS[text[len(number):]])
        except (ValueError, KeyError):
            size = -1
    if size < 1:
        raise ValueError(f"{where}={value!r}: expected a positive size in bytes, such as 20GB, 512MiB or "
                         f"1000000000")
    return size


@functools.lru_cache(maxsize=None)
def hostname() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it (on POSIX from
    ``uname``, as glibc's ``gethostname`` does, without importing ``socket``)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def temp_name(path: str, *, unique: bool = False) -> str:
    """``path + ".tmp"``; with ``unique``, ``path + ".tmp.<host>.<pid>"``, for
    files that several processes (ranks, maybe on other hosts) may write at once."""
    tmp = path + TMP_SUFFIX
    return f"{tmp}.{hostname()}.{os.getpid()}" if unique else tmp


# --------------------------------------------------------------------------- URLs and filesystems

def is_url(path: Any) -> bool:
    """True for a remote URL (``scheme://...`` other than ``file://``)."""
    if not isinstance(path, str):
        return False
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.lower() != "file" and scheme.replace("+", "").replace("-", "").isalnum()


def local_path(path: str | os.PathLike) -> str:
    """``path`` as a string, with a ``file://`` prefix removed (URLs are kept as they are)."""
    text = os.fspath(path)
    if text.lower().startswith("file://"):
        return text[len("file://"):]
    return text


def filesystem(url: str) -> Tuple[Any, str]:
    """``(fs, path)``: the fsspec filesystem of ``url`` and the path inside it."""
    try:
        import fsspec.core
    except ImportError:  # pragma: no cover - fsspec ships with datasets
        raise ImportError(f"{url}: remote paths need fsspec: pip install 'ube-stream[remote]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        scheme = url.partition("://")[0]
        extra = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "hf": "hf"}.get(scheme, "remote")
        raise ImportError(f"{url}: cannot open {scheme}:// paths ({exc}); install the filesystem for it: "
                          f"pip install 'ube-stream[{extra}]'") from None


def object_sizes(fs: Any, prefix: str) -> dict[str, int]:
    """``{name: size}`` of the objects directly under ``prefix`` of the fsspec
    filesystem ``fs`` (one fresh listing; sub-directories left out; {} when absent)."""
    try:
        entries = fs.ls(prefix, detail=True, refresh=True)
    except FileNotFoundError:
        return {}
    return {str(e["name"]).rsplit("/", 1)[-1]: int(e.get("size") or 0) for e in entries
            if e.get("type") != "directory"}


def join(base: str, *parts: str) -> str:
    """``os.path.join`` for local paths, ``/``-joining for URLs."""
    if is_url(base):
        return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])
    return os.path.join(base, *parts)


def exists(path: str) -> bool:
    if is_url(path):
        fs, inner = filesystem(path)
        return bool(fs.exists(inner))
    return os.path.exists(path)


def isfile(path: str) -> bool:
    if is_url(path):
        fs, inner = filesystem(path)
        return bool(fs.isfile(inner))
    return os.path.isfile(path)


def isdir(path: str) -> bool:
    if is_url(path):
        fs, inner = filesystem(path)
        return bool(fs.isdir(inner))
    return os.path.isdir(path)


def read_bytes(path: str) -> bytes:
    """The whole content of a local file or an object (FileNotFoundError when missing;
    no permission, too many open files...: :class:`StorageError`, an ``OSError``)."""
    if is_url(path):
        fs, inner = filesystem(path)
        return bytes(fs.cat_file(inner))
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        translated = storage_error(exc, path, reading=True)
        if translated is exc:
            raise
        raise translated from None


def file_size(path: str) -> int:
    if is_url(path):
        fs, inner = filesystem(path)
        return int(fs.size(inner))
    return os.path.getsize(path)


def open_input(path: str) -> IO[bytes]:
    """A binary reader of a local file or a remote object (streamed, seekable); no
    permission, too many open files...: :class:`StorageError` (an ``OSError``)."""
    if is_url(path):
        fs, inner = filesystem(path)
        return fs.open(inner, "rb", block_size=1 << 22)
    try:
        return open(path, "rb")
    except OSError as exc:
        translated = storage_error(exc, path, reading=True)
        if translated is exc:
            raise
        raise translated from None


# --------------------------------------------------------------------------- atomic writes

@contextlib.contextmanager
def _remote_atomic_open(url: str, mode: str, encoding: str | None) -> Iterator[IO[Any]]:
    import tempfile

    fs, inner = filesystem(url)
    fd, tmp = tempfile.mkstemp(prefix="ube-upload-", suffix=TMP_SUFFIX)
    os.close(fd)
    text = mode == "w"
    try:
        with open(tmp, mode, encoding=(encoding or "utf-8") if text else None,
                  newline="\n" if text else None) as f:
            yield f
        fs.put_file(tmp, inner)   # one PUT: the commit point
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


#: errors of the file system an output lives on (not of the data): translated by :func:`storage_error`
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                   errno.EMFILE, errno.ENFILE, errno.ENOTDIR, errno.EISDIR}
#: what to do about each (``{where}``: the path); the fallback is the last entry
_FIXES = {
    errno.ENOSPC: "free space (or raise the quota) there, or use another path",
    errno.EDQUOT: "free space (or raise the quota) there, or use another path",
    errno.EFBIG: "free space (or raise the quota) there, or use another path",
    errno.EROFS: "the file system is mounted read-only: use a path on a writable one",
    errno.EIO: "check the disk or the network file system",
    errno.EMFILE: "too many open files in this process: raise the limit (`ulimit -n 4096`) or use fewer workers",
    errno.ENFILE: "too many open files on this machine: close other programs or raise fs.file-max",
    errno.ENOTDIR: "a part of the path is a file, not a directory: fix the path",
    errno.EISDIR: "the path is a directory: name a file",
    errno.ENOENT: "a directory on the path does not exist: create it or fix the path",
}


def _free_space(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    while directory and not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    try:
        st = os.statvfs(directory or ".")
    except OSError:
        return "free space unknown"
    free = float(st.f_bavail * st.f_frsize)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if free < 1024 or unit == "TiB":
            return f"{free:,.0f} {unit} free" if unit == "B" else f"{free:,.1f} {unit} free"
        free /= 1024
    return ""


def storage_error(exc: OSError, path: str, *, reading: bool = False) -> OSError:
    """``exc`` as a :class:`StorageError` naming ``path``, the free space and
    the fix, when it is a file-system problem (disk full, quota, read-only,
    permission, too many open files); other errors are returned as they are.
    ``reading``: ``path`` is an input or a cache being read (no free space shown)."""
    if isinstance(exc, StorageError) or exc.errno not in _STORAGE_ERRNOS | ({errno.ENOENT} if not reading else set()):
        return exc
    if exc.errno in (errno.EACCES, errno.EPERM):
        fix = ("make the file readable for this user (chmod, or run as its owner)" if reading else
               "make the directory writable for this user, or write to another output path")
    else:
        fix = _FIXES[exc.errno]
    if reading:
        return StorageError(exc.errno, f"{path}: cannot read: {exc.strerror}; {fix}, then rerun", path)
    return StorageError(exc.errno, f"{path}: cannot write: {exc.strerror} ({_free_space(path)} on that file "
                                   f"system); {fix}, then rerun. Files already committed are unchanged, and a "
                                   f"rerun resumes", path)


def os_error_message(exc: OSError) -> str:
    """One line for an operating-system error that reached the command line untranslated:
    the path, what failed and the fix."""
    if isinstance(exc, StorageError) or exc.errno is None:
        return str(exc)
    path = exc.filename if exc.filename is not None else "?"
    if exc.errno in (errno.EACCES, errno.EPERM):
        fix = "check its permissions (inputs readable, the output directory writable) or use another path"
    else:
        fix = _FIXES.get(exc.errno, "check the path and its permissions")
    return f"{path}: {exc.strerror}; {fix}, then rerun"


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", *, unique: bool = False,
                encoding: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file for ``path``; on a clean exit fsync it and rename it
    over ``path``, on an exception remove it (a URL: see the module).  ``mode`` is ``"wb"`` or ``"w"``
    (text: UTF-8, ``\\n`` line ends)."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes whole files: mode must be 'wb' or 'w', got {mode!r}")
    path = local_path(path)
    if is_url(path):
        with _remote_atomic_open(path, mode, encoding) as f:
            yield f
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = temp_name(path, unique=unique)
    text = mode == "w"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(tmp, mode, encoding=(encoding or "utf-8") if text else None,
                  newline="\n" if text else None) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        translated = storage_error(exc, path)
        if translated is exc:
            raise
        raise translated from exc
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, unique: bool = False) -> None:
    with atomic_open(path, "wb", unique=unique) as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike, text: str, *, unique: bool = False) -> None:
    with atomic_open(path, "w", unique=unique) as f:
        f.write(text)


def dumps_json(doc: Any) -> str:
    """Deterministic JSON text (insertion key order, 1-space indent, trailing newline)."""
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def atomic_write_json(path: str | os.PathLike, doc: Any, *, unique: bool = False) -> None:
    atomic_write_bytes(path, dumps_json(doc).encode("utf-8"), unique=unique)


def create_exclusive(path: str | os.PathLike, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if it does not exist yet, atomically:
    of several processes (on several hosts) racing, exactly one creates it and
    every other sees the whole file.  The bytes go to a unique temporary file
    that is hard-linked to ``path`` (``link`` fails when ``path`` exists).
    Returns ``True`` when this call created the file."""
    path = os.fspath(path)
    tmp = f"{temp_name(path, unique=True)}.{threading.get_ident()}"
    with atomic_open(tmp, "wb") as f:
        f.write(data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def fsync_dir(path: str) -> None:
    """fsync a directory so the renames inside it survive a power loss (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- reading files ube-stream did not write

#: an error class, or any callable of a message that returns the exception to raise
ErrorFactory = Callable[[str], BaseException]

#: the largest JSON file read whole (MANIFEST, marker, plan, tokenizer file): 256 MiB
MAX_JSON_BYTES = 256 << 20


def name_problem(name: str) -> "str | None":
    """Why ``name`` cannot name a file inside a directory, or None (checked on the name alone)."""
    if not name or len(name) > 4096:
        return "an empty or over-long name"
    if "\0" in name or "\\" in name:
        return "a name with a NUL or a backslash"
    if os.path.isabs(name) or name.startswith("/"):
        return "an absolute path"
    if ".." in name.split("/"):
        return "a path with '..'"
    return None


def _os_message(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def inside(directory: str, name: Any, *, where: str, field: str, error: ErrorFactory, fix: str) -> str:
    """``directory/name``, refused unless ``name`` passes :func:`name_problem` and,
    when it exists, resolves inside ``directory`` to a regular file."""
    problem = name_problem(name) if isinstance(name, str) else "not a string"
    if problem is not None:
        shown = repr(name) if len(repr(name)) <= 60 else repr(name)[:57] + "..."
        raise error(f"{where}: field {field!r} names {shown}, {problem}; files must lie inside "
                    f"{directory}. {fix}")
    path = os.path.join(directory, name)
    real_dir = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.commonpath([real_dir, real]) != real_dir:
        raise error(f"{where}: field {field!r} names {name!r}, which resolves to {real}, outside {directory} "
                    f"(a symbolic link out); files must lie inside it. {fix}")
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise error(f"{where}: field {field!r}: cannot inspect {path} ({_os_message(exc)}). {fix}") from None
    if not stat.S_ISREG(mode):
        raise error(f"{where}: field {field!r} names {name!r}, which is not a regular file (a directory, "
                    f"device or pipe). {fix}")
    return path


def read_bounded(path: str, *, what: str, error: ErrorFactory, max_bytes: int = MAX_JSON_BYTES,
                 fix: str = "") -> bytes:
    """The bytes of the regular file ``path`` (local, or an object at a URL) of at
    most ``max_bytes``; ``error`` for a device, pipe or directory, or a larger
    file (before reading: an object's size is asked first, and at most
    ``max_bytes + 1`` bytes are fetched).  ``FileNotFoundError`` passes through
    (callers say how to make the file)."""
    if is_url(path):
        fs, inner = filesystem(path)
        size = int(fs.size(inner) or 0)
        if size > max_bytes:
            raise error(f"{path}: the {what} is {size:,} bytes, more than the {max_bytes:,} such a "
                        f"file can hold; it is corrupt or not a {what}. {fix}".rstrip())
        data = bytes(fs.cat_file(inner, start=0, end=max_bytes + 1))
        if len(data) > max_bytes:
            raise error(f"{path}: the {what} grew past {max_bytes:,} bytes while being read. {fix}".rstrip())
        return data
    try:
        # open (never blocking: a named pipe would wait for a writer), then fstat the file
        # opened: no race with a rename
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{path}: the {what} is not a regular file (a device, pipe or directory); "
                            f"refusing to read it. {fix}".rstrip())
            if info.st_size > max_bytes:
                raise error(f"{path}: the {what} is {info.st_size:,} bytes, more than the {max_bytes:,} such a "
                            f"file can hold; it is corrupt or not a {what}. {fix}".rstrip())
            data = f.read(max_bytes + 1)
    except IsADirectoryError:
        raise error(f"{path}: the {what} is a directory, not a file. {fix}".rstrip()) from None
    if len(data) > max_bytes:
        raise error(f"{path}: the {what} grew past {max_bytes:,} bytes while being read. {fix}".rstrip())
    return data


def load_json(data: bytes, *, source: str, what: str, error: ErrorFactory, fix: str) -> Any:
    """``json.loads`` of ``data`` with every way it can fail turned into ``error``."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{source}: the {what} is not UTF-8 text ({exc}). {fix}") from None
    except RecursionError:
        raise error(f"{source}: the {what} is JSON nested too deeply. {fix}") from None
    except ValueError as exc:   # JSONDecodeError, integers of more than 4300 digits
        raise error(f"{source}: the {what} is not valid JSON ({exc}). {fix}") from None
