# Shared constants of the ube-stream kernels (header-only: no module pairs with it).

# substrate codes shared by every kernel (see ube_stream/substrate.py)
cdef enum:
    SUBSTRATE_UBE = 0
    SUBSTRATE_UTF8 = 1
    SUBSTRATE_UTF16 = 2

# character classes of the GPT-2 pattern (see ube_stream/pretokenizer.py)
cdef enum:
    CLASS_OTHER = 0
    CLASS_LETTER = 1
    CLASS_NUMBER = 2
    CLASS_SPACE = 3
