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
        if ((b0 & 0xF0) == 0xE0) {
            /* 3 bytes first: CJK, Indic, most punctuation, and all of the BMP above U+07FF */
            if (i + 2 >= n) return 0;
            b1 = data[i + 1];
            b2 = data[i + 2];
            if (((b1 & 0xC0) != 0x80) | ((b2 & 0xC0) != 0x80)) return 0;
            cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F);
            if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
            *codepoint = cp;
            return 3;
        }
        if (b0 < 0xC2) return 0;
        if (b0 < 0xE0) {
            if (i + 1 >= n) return 0;
            b1 = data[i + 1];
            if ((b1 & 0xC0) != 0x80) return 0;
            *codepoint = ((b0 & 0x1F) << 6) | (b1 & 0x3F);
            return 2;
        }
        if (b0 < 0xF5) {                           /* 0xF0-0xF4: 4 bytes */
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
    /* SSE2 is part of x86-64 itself: no -m flag, and the wheels run on every x86-64 CPU. */
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__SSE2__) || defined(__x86_64__))
    #include <emmintrin.h>
    #define UBE_SSE2_RUN 1
    #else
    #define UBE_SSE2_RUN 0
    #endif
    /* ascii_run below: 16 bytes per step with SSE2 (x86-64), else 8 with SWAR words
       (little-endian GCC/clang), then byte by byte: a word costs one predictable test and
       no branch per byte (a per-byte loop mispredicts at every word end). */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_ascii_run(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                                      uint32_t fold, uint32_t lo, uint32_t hi) {
    #if UBE_SSE2_RUN
        /* 16 bytes a step: b | fold is in [lo, hi] iff (uint8)((b | fold) - lo) <= hi - lo, a
           signed compare after flipping bit 7; a byte >= 0x80 is never in (hi <= 0x7F). */
        const __m128i f = _mm_set1_epi8((char)fold), shift = _mm_set1_epi8((char)(0x80 - lo)),
                      lim = _mm_set1_epi8((char)(hi - lo + 1 - 0x80));
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i*)(data + i));
            unsigned m = (unsigned)_mm_movemask_epi8(
                _mm_cmplt_epi8(_mm_add_epi8(_mm_or_si128(v, f), shift), lim));
            if (m != 0xFFFFu)
                return i + __builtin_ctz(~m);
            i += 16;
        }
    #endif
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
    #ifndef UBE_WORD_START_DEFINED
    #define UBE_WORD_START_DEFINED
    /* One byte of ASCII facts per byte value (0 for 0x80-0xFF): bit 0 [A-Za-z] (the
       ASCII part of \\p{L}), bit 1 none of [A-Za-z0-9\\r\\n] (tiktoken's
       [^\\r\\n\\p{L}\\p{N}] on ASCII), bit 2 [a-z], bit 3 [A-Z].  The class tables
       agree (test_pretok_tiktoken / test_pretok check every ASCII byte). */
    static const uint8_t ube_ascii_kind[256] = {
        2,2,2,2,2,2,2,2,2,2,0,2,2,0,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,
        2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,0,0,0,0,0,0,0,0,0,0,2,2,2,2,2,2,
        2,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,2,2,2,2,2,
        2,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,2,2,2,2,2,
        0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
        0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
        0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
        0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    };
    /* Where the ASCII letter run of a word chunk at ``pos`` starts: ``pos`` when an
       ASCII letter is there, ``pos + 1`` when one follows a one-byte prefix
       (``space_only``: U+0020, GPT-2's " ?\\p{L}+"; else any ASCII byte of bit 1,
       tiktoken's "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"), else -1.  One table load
       per byte and no decode: the fast entry of the split kernels. */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_word_start(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                                       int space_only) {
        uint8_t k0 = ube_ascii_kind[data[pos]];
        if (k0 & 1) return pos;
        if (pos + 1 < n && (ube_ascii_kind[data[pos + 1]] & 1)
                && (space_only ? data[pos] == 32 : (k0 & 2)))
            return pos + 1;
        return -1;
    }
    /* End of the ASCII letter run of a word chunk at ``pos`` (word_start's rule), or -1.
       With SSE2 and 16 bytes left, one load gives the letter bits of pos..pos+15 and the
       start and end come from bit arithmetic: one unpredictable branch per chunk (word
       or not) instead of three. */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_word_end(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                                     int space_only) {
        Py_ssize_t s;
        if (data[pos] >= 0x80) return -1;           /* CJK, Cyrillic...: straight to the general path */
    #if UBE_SSE2_RUN
        if (pos + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i*)(data + pos));
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                _mm_add_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8((char)(0x80 - 0x61))),
                _mm_set1_epi8((char)(26 - 0x80))));
            unsigned l0 = m & 1u;
            unsigned pre = (m >> 1) & 1u & (space_only ? (unsigned)(data[pos] == 32)
                                                     : (unsigned)(ube_ascii_kind[data[pos]] >> 1));
            Py_ssize_t end;
            if (!(l0 | pre)) return -1;
            s = pos + (Py_ssize_t)(l0 ^ 1u);
            end = s + __builtin_ctz(~(m >> (l0 ^ 1u)));
            if (end == pos + 16)
                end = ube_ascii_run(data, n, end, 0x20, 0x61, 0x7A);
            return end;
        }
    #endif
        s = ube_word_start(data, n, pos, space_only);
        return s < 0 ? -1 : ube_ascii_run(data, n, s + 1, 0x20, 0x61, 0x7A);
    }
    /* End of the ASCII letters of an o200k word chunk at ``pos``: after word_start's
       prefix, [a-z]+ or [A-Z]+[a-z]* (the only HEAD*TAIL+ / HEAD+TAIL* forms in ASCII:
       [a-z] is TAIL only, [A-Z] HEAD only); -1 when there is none, or when [A-Z]+ ends
       at a byte >= 0x80 (that character may be HEAD: the general path decides). */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_case_word_end(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos) {
        Py_ssize_t s;
        if (data[pos] >= 0x80) return -1;
    #if UBE_SSE2_RUN
        if (pos + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i*)(data + pos));
            const __m128i lim = _mm_set1_epi8((char)(26 - 0x80));
            unsigned lm = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                _mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - 0x61))), lim));
            unsigned um = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                _mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - 0x41))), lim));
            unsigned m = lm | um, l0 = m & 1u, sh = l0 ^ 1u, ku;
            Py_ssize_t end;
            if (!(l0 | ((m >> 1) & 1u & (unsigned)(ube_ascii_kind[data[pos]] >> 1)))) return -1;
            s = pos + (Py_ssize_t)sh;
            lm >>= sh;
            um >>= sh;
            if (!(lm & 1u)) {                       /* [A-Z] first */
                ku = (unsigned)__builtin_ctz(~um);
                if (ku < 16u - sh) {                /* else the run reaches past the window */
                    s += ku;
                    lm >>= ku;
                    if (!(lm & 1u)) return data[s] >= 0x80 ? -1 : s;
                    end = s + __builtin_ctz(~lm);
                    return end == pos + 16 ? ube_ascii_run(data, n, end, 0, 0x61, 0x7A) : end;
                }
            } else {
                end = s + __builtin_ctz(~lm);
                return end == pos + 16 ? ube_ascii_run(data, n, end, 0, 0x61, 0x7A) : end;
            }
        }
    #endif
        s = ube_word_start(data, n, pos, 0);
        if (s < 0) return -1;
        if (data[s] < 0x61) {                       /* [A-Z]+, then [a-z]* */
            s = ube_ascii_run(data, n, s + 1, 0, 0x41, 0x5A);
            if (s == n) return s;
            if (data[s] >= 0x80) return -1;
            if ((uint8_t)(data[s] - 0x61) >= 26) return s;
        }
        return ube_ascii_run(data, n, s + 1, 0, 0x61, 0x7A);
    }
    #endif
    """
    int utf8_decode "ube_utf8_decode"(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                      uint32_t* codepoint) noexcept nogil
    Py_ssize_t ascii_run "ube_ascii_run"(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                         uint32_t fold, uint32_t lo, uint32_t hi) noexcept nogil
    Py_ssize_t word_start "ube_word_start"(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                           int space_only) noexcept nogil
    Py_ssize_t word_end "ube_word_end"(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                       int space_only) noexcept nogil
    Py_ssize_t case_word_end "ube_case_word_end"(const uint8_t* data, Py_ssize_t n,
                                                 Py_ssize_t pos) noexcept nogil
    const uint8_t* ascii_kind "ube_ascii_kind"
    # word_start: where the ASCII letter run of a word chunk at ``pos`` starts (``pos``, or
    # ``pos + 1`` after a one-byte prefix: U+0020 when ``space_only``, else any ASCII byte
    # not in [A-Za-z0-9\r\n]), or -1.  ascii_kind: its per-byte table (bits: 1 [A-Za-z],
    # 2 not [A-Za-z0-9\r\n] and ASCII, 4 [a-z], 8 [A-Z]).  word_end: the end of that
    # ASCII letter run, or -1 (the kernels go on past it when a byte >= 0x80 follows).
    # case_word_end: o200k's ASCII word ([a-z]+ or [A-Z]+[a-z]* after that prefix) or -1.
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
