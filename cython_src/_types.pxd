# Shared typedefs of the ube-stream kernels (header-only: no module pairs with it).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

ctypedef uint16_t symbol_t      # a base symbol id: 0..511 (ube) or 0..255 (utf8, utf16)
ctypedef uint32_t token_t       # a token id in a trained vocabulary
ctypedef int64_t offset_t       # byte / symbol / token offsets and counts

# substrate codes shared by every kernel (see ube_stream/substrate.py)
cdef enum:
    SUBSTRATE_UBE = 0
    SUBSTRATE_UTF8 = 1
    SUBSTRATE_UTF16 = 2

# character classes of the GPT-2 pattern (see ube_stream/_unicode_classes.py)
cdef enum:
    CLASS_OTHER = 0
    CLASS_LETTER = 1
    CLASS_NUMBER = 2
    CLASS_SPACE = 3
