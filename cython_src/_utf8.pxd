# Header-only UTF-8 helpers shared by the kernels (cdef inline, noexcept nogil).
from libc.stdint cimport uint8_t, uint32_t


cdef extern from *:
    """
    #ifndef UBE_ALWAYS_INLINE
    #if defined(__GNUC__) || defined(__clang__)
    #define UBE_ALWAYS_INLINE inline __attribute__((always_inline))
    #define UBE_LIKELY(x) __builtin_expect(!!(x), 1)
    #elif defined(_MSC_VER)
    #define UBE_ALWAYS_INLINE __forceinline
    #define UBE_LIKELY(x) (x)
    #else
    #define UBE_ALWAYS_INLINE inline
    #define UBE_LIKELY(x) (x)
    #endif
    #endif
    #ifndef UBE_UTF8_DECODE_DEFINED
    #define UBE_UTF8_DECODE_DEFINED
    /* utf8_decode below, in C so that it is always inlined (the split kernels call it
       once per non-ASCII character; as a Cython inline function the compiler kept it
       out of line). */
    static UBE_ALWAYS_INLINE int ube_utf8_decode(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                                 uint32_t* codepoint) {
        uint32_t b0 = data[i], b1, b2, b3, cp;
        if (b0 < 0x80) { *codepoint = b0; return 1; }
        if (b0 < 0xC2) return 0;
        if (b0 < 0xE0) {
            if (i + 1 >= n) return 0;
            b1 = data[i + 1];
            if ((b1 & 0xC0) != 0x80) return 0;
            *codepoint = ((b0 & 0x1F) << 6) | (b1 & 0x3F);
            return 2;
        }
        if (b0 < 0xF0) {
            if (i + 2 >= n) return 0;
            b1 = data[i + 1];
            b2 = data[i + 2];
            if (((b1 & 0xC0) != 0x80) | ((b2 & 0xC0) != 0x80)) return 0;
            cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F);
            if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
            *codepoint = cp;
            return 3;
        }
        if (b0 < 0xF5) {
            if (i + 3 >= n) return 0;
            b1 = data[i + 1];
            b2 = data[i + 2];
            b3 = data[i + 3];
            if (((b1 & 0xC0) != 0x80) | ((b2 & 0xC0) != 0x80) | ((b3 & 0xC0) != 0x80)) return 0;
            cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F);
            if (cp < 0x10000 || cp > 0x10FFFF) return 0;
            *codepoint = cp;
            return 4;
        }
        return 0;
    }
    #endif
    #ifndef UBE_ASCII_RUN_DEFINED
    #define UBE_ASCII_RUN_DEFINED
    #include <string.h>
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define UBE_SWAR_RUN 1
    #else
    #define UBE_SWAR_RUN 0
    #endif
    /* ascii_run below: 8 bytes per step, so a word costs one predictable test per 8
       letters and no branch per byte (a per-byte loop mispredicts at every word end). */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_ascii_run(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                                      uint32_t fold, uint32_t lo, uint32_t hi) {
    #if UBE_SWAR_RUN
        const uint64_t H = 0x8080808080808080ULL, L = 0x0101010101010101ULL;
        uint64_t w, x, ge, gt, in;
        while (i + 8 <= n) {
            memcpy(&w, data + i, 8);
            x = (w | (fold * L)) & ~H;                 /* the low 7 bits of each byte, folded */
            ge = (x + (0x80 - lo) * L) & H;            /* bit 7: x >= lo (no carry: x <= 0x7F) */
            gt = (x + (0x7F - hi) * L) & H;            /* bit 7: x > hi */
            in = ge & ~gt & ~w & H;                    /* ... and the byte itself is ASCII */
            if (in != H)
                return i + (__builtin_ctzll(~in & H) >> 3);
            i += 8;
        }
    #endif
        while (i < n && data[i] < 0x80 && (uint32_t)((data[i] | fold) - lo) <= hi - lo)
            i++;
        return i;
    }
    #endif
    """
    int utf8_decode "ube_utf8_decode"(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                      uint32_t* codepoint) noexcept nogil
    Py_ssize_t ascii_run "ube_ascii_run"(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                         uint32_t fold, uint32_t lo, uint32_t hi) noexcept nogil
    # End of the run of ASCII bytes ``b`` with ``lo <= (b | fold) <= hi`` from ``i``
    # (``lo`` >= 1, ``hi`` <= 0x7F): fold 0x20, 0x61..0x7A is [A-Za-z]; 0, 0x30..0x39 [0-9].
    # Decode the scalar value starting at data[i] (i < n).
    #
    # Returns its length in bytes (1..4) and stores it in ``codepoint``, or 0 when
    # the bytes at ``i`` are not well-formed UTF-8 (stray continuation byte,
    # overlong form, surrogate, value above U+10FFFF, or truncated sequence).


cdef inline int utf8_encode(uint32_t cp, uint8_t* out) noexcept nogil:
    """Write the UTF-8 bytes of a scalar value to ``out``; return their number."""
    if cp < 0x80:
        out[0] = <uint8_t>cp
        return 1
    if cp < 0x800:
        out[0] = <uint8_t>(0xC0 | (cp >> 6))
        out[1] = <uint8_t>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <uint8_t>(0xE0 | (cp >> 12))
        out[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <uint8_t>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <uint8_t>(0xF0 | (cp >> 18))
    out[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <uint8_t>(0x80 | (cp & 0x3F))
    return 4
