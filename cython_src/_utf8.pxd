# Header-only UTF-8 helpers shared by the kernels (cdef inline, noexcept nogil).
from libc.stdint cimport int64_t, uint8_t, uint32_t


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
    /* -DUBE_NO_SSE2 builds the portable paths on x86-64 too (to test them there) */
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__SSE2__) || defined(__x86_64__)) \\
        && !defined(UBE_NO_SSE2)
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
    #ifndef UBE_BLOCK_SPLIT_DEFINED
    #define UBE_BLOCK_SPLIT_DEFINED
    /* block_split below: the chunk starts of 64 ASCII bytes at once, as bit masks (bit i:
       byte pos + i).  Its kinds are the split codes (_pretok_tiktoken.pxd SPLIT_*). */
    #define UBE_BLOCK 64
    /* Used with SSE2 only: the portable masks (a table load per byte) are not shown to pay
       (not timed against the state machine without SSE2; with every SSE2 path off, English
       cl100k split 134 MB/s vs main's 231 with them).  -DUBE_NO_SSE2 -DUBE_BLOCK_SPLIT=1
       builds them on x86-64, to test them. */
    #ifndef UBE_BLOCK_SPLIT
    #define UBE_BLOCK_SPLIT UBE_SSE2_RUN
    #endif
    #define UBE_BS_GPT2 0
    #define UBE_BS_O200K 3
    /* per byte value for the portable path: 1 [A-Za-z], 2 [a-z], 4 [0-9], 8 U+0020, 16 \\n,
       32 for what the masks leave to the state machine: bytes >= 0x80, controls other than
       \\n (\\t \\r ...) and DEL; 64 the apostrophe */
    static const uint8_t ube_block_kind[128] = {
        32,32,32,32,32,32,32,32,32,32,16,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,
        8,0,0,0,0,0,0,64,0,0,0,0,0,0,0,0,4,4,4,4,4,4,4,4,4,4,0,0,0,0,0,0,
        0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0,0,0,0,0,
        0,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,0,0,0,0,32,
    };
    /* The class masks of data[0:64]: letters, [a-z] (o200k only), digits, U+0020, \\n, and
       "bad": what the masks do not decide (see ube_block_kind).  Every other byte is ASCII
       punctuation or a symbol, [^\\s\\p{L}\\p{N}] for all four patterns. */
    static UBE_ALWAYS_INLINE void ube_block_masks(const uint8_t* p, int o200k, uint64_t* letter,
                                                  uint64_t* lower, uint64_t* slash, uint64_t* digit,
                                                  uint64_t* space, uint64_t* newline, uint64_t* apos,
                                                  uint64_t* bad) {
    #if UBE_SSE2_RUN
        uint64_t l = 0, lo = 0, sl = 0, d = 0, s = 0, nl = 0, a = 0, b = 0;
        int k;
        for (k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i*)(p + 16 * k));
            unsigned sh = 16u * (unsigned)k;
            __m128i ok = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F)),
                                          _mm_cmpgt_epi8(v, _mm_set1_epi8(0x1F)));   /* signed: >= 0x80 fail */
            __m128i n = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x0A));
            l |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                _mm_add_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8((char)(0x80 - 0x61))),
                _mm_set1_epi8((char)(26 - 0x80)))) << sh;
            if (o200k) {
                lo |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                    _mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - 0x61))), _mm_set1_epi8((char)(26 - 0x80)))) << sh;
                sl |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x2F))) << sh;
            }
            d |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(
                _mm_add_epi8(v, _mm_set1_epi8((char)(0x80 - 0x30))), _mm_set1_epi8((char)(10 - 0x80)))) << sh;
            s |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x20))) << sh;
            nl |= (uint64_t)(unsigned)_mm_movemask_epi8(n) << sh;
            a |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x27))) << sh;
            b |= (uint64_t)(unsigned)(~_mm_movemask_epi8(_mm_or_si128(ok, n)) & 0xFFFF) << sh;
        }
        *letter = l; *lower = lo; *slash = sl; *digit = d; *space = s; *newline = nl; *apos = a; *bad = b;
    #else
        uint64_t l = 0, lo = 0, sl = 0, d = 0, s = 0, nl = 0, a = 0, b = 0, bit;
        int i;
        uint8_t c, k;
        for (i = 0; i < UBE_BLOCK; i++) {
            c = p[i];
            k = c < 0x80 ? ube_block_kind[c] : 32;
            bit = (uint64_t)1 << i;
            l |= (k & 1) ? bit : 0;
            lo |= (k & 2) ? bit : 0;
            d |= (k & 4) ? bit : 0;
            s |= (k & 8) ? bit : 0;
            nl |= (k & 16) ? bit : 0;
            b |= (k & 32) ? bit : 0;
            a |= (k & 64) ? bit : 0;
            sl |= c == 0x2F ? bit : 0;
        }
        (void)o200k;
        *letter = l; *lower = lo; *slash = sl; *digit = d; *space = s; *newline = nl; *apos = a; *bad = b;
    #endif
    }
    static UBE_ALWAYS_INLINE int ube_ctz64(uint64_t x) {
    #if defined(__GNUC__) || defined(__clang__)
        return __builtin_ctzll(x);
    #else
        int k = 0;
        while (!(x & 1)) { x >>= 1; k++; }
        return k;
    #endif
    }
    static UBE_ALWAYS_INLINE int ube_top64(uint64_t x) {      /* the highest set bit (x != 0) */
    #if defined(__GNUC__) || defined(__clang__)
        return 63 - __builtin_clzll(x);
    #else
        int k = 63;
        while (!(x >> k)) k--;
        return k;
    #endif
    }
    /* With ``pos`` a chunk start and 64 bytes from it, the chunks that the masks decide
       exactly, for split code ``kind``: their ends go to ends[*nchunks...] and the last of
       them (where the state machine is at a chunk start again) is returned; ``pos`` when
       they decide none.  Bit i of ``st`` says "a chunk starts at pos + i", worked out from
       bytes i - 2 .. i + 1 alone: the regex restarts at pos, so the block needs nothing
       before it.  Positions from the first "bad" byte f on are left to the state machine,
       and so is f - 1 when what it is depends on the byte at f.
       gpt2:  a letter / digit / punctuation run starts a chunk unless U+0020 precedes it;
              a whitespace (U+0020, \\n) run starts one, and its last character does when
              the run has two or more and a non-space follows (\\s+(?!\\S)).
       cl100k, llama3, o200k: a letter run starts one unless U+0020 or a lone punctuation
              character (itself after none of punctuation, U+0020) precedes it ([^\\r\\n\\p{L}
              \\p{N}]?\\p{L}+); digits start one every three from the run's start
              (\\p{N}{1,3}); punctuation starts one unless it follows punctuation or U+0020
              ( ?[^\\s\\p{L}\\p{N}]+); the \\n right after punctuation belong to it ([\\r\\n]*);
              another whitespace run starts one and goes up to its last \\n, a U+0020 run
              after that \\n or with none starts one only when a non-space follows it (else a
              later \\n takes it), and its last space does, as for gpt2.
       o200k: also a capital after a lower-case letter ([A-Z]*[a-z]+ ends there). */
    /* one end of block_split's chunk-start bits ``st`` (see there) */
    #define UBE_BS_EMIT { ends[k] = pos + ube_ctz64(st | ((uint64_t)1 << 63)); k += st != 0; st &= st - 1; }
    static UBE_ALWAYS_INLINE Py_ssize_t ube_block_split(const uint8_t* data, Py_ssize_t pos, int kind,
                                                        int64_t* ends, Py_ssize_t* nchunks) {
        uint64_t L, Lo, SL, D, S, N, A, B, P, W, st, dep, t, d3, rs, nx, tail;
        Py_ssize_t k;
        int f, r, e, len, after = -1;
        uint8_t c1, c2;
        if (!UBE_BLOCK_SPLIT) return pos;
        ube_block_masks(data + pos, kind == UBE_BS_O200K, &L, &Lo, &SL, &D, &S, &N, &A, &B);
        P = ~(L | D | S | N | B);
        if (kind == UBE_BS_GPT2) {
            W = S | N;
            st = (L & ~((L | S) << 1)) | (D & ~((D | S) << 1)) | (P & ~((P | S) << 1))
                 | (W & ~(W << 1)) | (W & (W << 1) & ~(W >> 1));
            dep = W & (W << 1);
        } else {
            /* the [\\r\\n]* (o200k: [\\r\\n/]*) right after punctuation: a carry from each \\n
               that follows punctuation runs through the rest of the tail */
            tail = kind == UBE_BS_O200K ? N | SL : N;
            t = N & (P << 1);                            /* o200k: more than one in a run */
            t = (((tail + t) ^ tail) & tail) | t;        /* the later ones add no carry */
            P &= ~t;                                     /* a / of the tail starts nothing */
            W = (S | N) & ~t;                            /* whitespace runs of rule 5 */
            st = (L & ~((L | S) << 1) & ~((P << 1) & ~((P | S) << 2)))
                 | (P & ~((P | S) << 1))
                 | (W & ~(W << 1))
                 | (S & (S << 1) & ~((S | N) >> 1));
            /* a U+0020 run after a \\n: a chunk start when a non-space (not \\n) follows it */
            rs = S & ~(S << 1) & ((N & W) << 1);
            while (rs) {
                r = ube_ctz64(rs);
                nx = ~(S >> r);
                e = r + ube_ctz64(nx);                   /* nx != 0: its top bit is set */
                if (e >= UBE_BLOCK || ((B >> e) & 1))
                    B |= (uint64_t)1 << r;
                else if (!((N >> e) & 1))
                    st |= (uint64_t)1 << r;
                rs &= rs - 1;
            }
            if (kind == UBE_BS_O200K)
                st |= L & ~Lo & (Lo << 1);
            /* \\p{N}{1,3}: a run's start, then every third digit while the run goes on */
            t = D & ~(D << 1);
            st |= t;
            d3 = D & (D << 1) & (D << 2);
            while ((t = (t << 3) & d3))
                st |= t;
            dep = S & (S << 1);
        }
        /* contractions: at an apostrophe that starts a chunk (o200k: that ends a word, which
           takes them), 's 't 'm 'd 're 've 'll (gpt2: lower case only) make one chunk or
           join the word, and a chunk starts after them.  A byte >= 0x80 after it may fold to
           one of their letters (ſ is s): the state machine decides.  o200k: an apostrophe right
           after a contraction starts a chunk (as punctuation), it ends no word. */
        t = kind == UBE_BS_O200K ? A & (L << 1) : A & ~((P | S) << 1);
        while (t) {
            r = ube_ctz64(t);
            t &= t - 1;
            if (kind == UBE_BS_O200K && r == after)
                continue;
            if (r + 2 >= UBE_BLOCK) {
                B |= (uint64_t)1 << r;
                continue;
            }
            c1 = data[pos + r + 1];
            c2 = data[pos + r + 2];
            if (kind != UBE_BS_GPT2) {
                if (c1 >= 0x80 || (c2 >= 0x80 && ((c1 | 0x20) == 'r' || (c1 | 0x20) == 'v' || (c1 | 0x20) == 'l'))) {
                    B |= (uint64_t)1 << r;
                    continue;
                }
                c1 |= 0x20;                 /* (?i:...): an ASCII letter's lower case, else no letter */
                c2 |= 0x20;
            }
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
                len = 2;
            else if (((c1 == 'r' || c1 == 'v') && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
                len = 3;
            else
                continue;                   /* an apostrophe as any punctuation */
            st &= ~((((uint64_t)1 << len) - 1) << r) | (uint64_t)(kind != UBE_BS_O200K) << r;
            after = r + len;
            if (after < UBE_BLOCK)
                st |= (uint64_t)1 << after;
        }
        if (!B) {
            f = UBE_BLOCK;
        } else {
            f = ube_ctz64(B);
            if (f <= 1) return pos;
        }
        /* bits 1 .. f - 1, less f - 1 when it needs the byte at f */
        st &= ((((uint64_t)1 << (f - 1)) - 1) | (((uint64_t)1 << (f - 1)) & ~dep)) & ~(uint64_t)1;
        if (!st) return pos;
        r = ube_top64(st);
        k = *nchunks;
        /* eight ends a step, with no branch per end: once ``st`` is empty the step goes on
           writing ends[k] (bit 63's offset) without advancing k.  A loop per end mispredicted
           its exit on nearly every block (10 to 16 chunks in 64 bytes of running text); this
           one takes one or two steps.  ends[k] is in bounds: the ends before ``pos`` are at
           most ``pos`` and this block adds at most r, so k <= pos + 63 < n (the callers'
           ``ends`` hold n entries), and it is the next end's place anyway. */
        do {
            UBE_BS_EMIT UBE_BS_EMIT UBE_BS_EMIT UBE_BS_EMIT
            UBE_BS_EMIT UBE_BS_EMIT UBE_BS_EMIT UBE_BS_EMIT
        } while (st);
        *nchunks = k;
        return pos + r;
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
    Py_ssize_t block_split "ube_block_split"(const uint8_t* data, Py_ssize_t pos, int kind,
                                             int64_t* ends, Py_ssize_t* nchunks) noexcept nogil
    # block_split: with ``pos`` a chunk start and ``pos + 64 <= n``, the chunks of split
    # code ``kind`` that the class masks of those 64 bytes decide: their ends are appended
    # at ``ends[nchunks[0]]`` and the new chunk start is returned, or ``pos`` (none decided).
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
