# Status codes and the ``err`` out-parameter of the kernels (header-only: no
# module pairs with it).  The one convention every kernel entry follows:
#
# * Data errors are not exceptions.  An entry point that can fail on its *data*
#   (invalid UTF-8, ids that do not decode, an id outside the vocabulary or the
#   alphabet, an allocation that fails inside a nogil loop) returns its status
#   first: the bare ``status`` when it has no other result, else the tuple
#   ``(status, result, ...)`` whose results are None unless the status is
#   STATUS_OK.  A status is 0 (STATUS_OK) or one of the negative codes below.
# * Where: the last parameter of such an entry is ``err``, None or a
#   caller-allocated C-contiguous int64 array of at least ERR_SIZE entries.  On
#   a failure the kernel writes ``err[0]`` = position and ``err[1]`` = item (-1
#   where the code gives none); on success it leaves ``err`` alone.
#       STATUS_INVALID_UTF8     position: absolute byte offset into the data
#                               passed; item: the document / item index
#       STATUS_INVALID_SYMBOLS  position: base-symbol offset where the invalid
#                               sequence starts; item: token position (decoding
#                               token ids), or -1
#       STATUS_BAD_ID           position: offset of the base symbol outside the
#                               alphabet, or -1; item: token position of the id
#                               outside the vocabulary, or -1
#       STATUS_NOT_BPE          position: the parts that BPE with the lower
#                               ranks leaves of a token (not 2); item: the
#                               token's index in rank order.  A merge list
#                               (_ranks.expand_merges): position: the tokens
#                               defined at the rank of a merge joining an id
#                               not defined yet; item: that rank
#       STATUS_TOO_LARGE        position: the size over its limit (a token's or
#                               all tokens' base symbols); item: the merge's rank
#       STATUS_NO_MEMORY        position: the bytes that could not be allocated
#                               (-1: unknown); item: -1
# * Programmer errors are exceptions.  Arguments the caller got wrong (shapes,
#   buffer sizes, offsets outside the data, an unknown substrate code, a busy
#   slot or table) raise ValueError / RuntimeError before or right after the
#   nogil section, as do allocations made while the GIL is held (MemoryError).
# * Kernels never import ube_stream.  The package turns a status into its
#   exception in one place, ube_stream.errors.check_status, which mirrors
#   these codes (STATUS_*, ERR_SIZE).
#
# Inside a kernel the nogil cores (*_core.pxd) keep their own C returns (a
# count, or -(pos + 1) for invalid UTF-8 at pos; symbols_to_utf8: -1 with
# *error_at); the entry point turns them into a status with ``fail``.
from libc.stdint cimport int64_t

cdef enum:
    STATUS_OK = 0
    STATUS_INVALID_UTF8 = -1
    STATUS_INVALID_SYMBOLS = -2
    STATUS_BAD_ID = -3
    STATUS_NO_MEMORY = -4
    STATUS_NOT_BPE = -5
    STATUS_TOO_LARGE = -6
    ERR_SIZE = 2          # err[0] position, err[1] item


cdef inline int check_err(int64_t[::1] err) except -1:
    """ValueError unless ``err`` is None or holds ERR_SIZE entries (call before nogil)."""
    if err is not None and err.shape[0] < ERR_SIZE:
        raise ValueError(f"err needs {ERR_SIZE} int64 entries (position, item), got {err.shape[0]}")
    return 0


cdef inline int fail(int64_t[::1] err, int status, int64_t position, int64_t item) noexcept:
    """Write ``position``, ``item`` to ``err`` (when given) and return ``status``."""
    if err is not None:
        err[0] = position
        err[1] = item
    return status
