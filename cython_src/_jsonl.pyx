# cython: language_level=3
"""JSON Lines text field kernel: one string field of every line, unescaped
straight into one UTF-8 buffer.

``scan_lines(block, start, stop, key, out, ends, offsets, ok)`` walks the lines
of ``block[start:stop]`` (a line ends after ``\\n``, or at ``stop``).  For each
line ``k`` it checks the whole line against the JSON grammar (an object,
nested arrays/objects up to MAX_DEPTH, strings with valid escapes, no control
characters and well-formed UTF-8, numbers of the JSON grammar, true / false /
null, JSON whitespace around the object) and, when the line is such an object
whose member ``key`` (the last one, as ``json.loads`` keeps it) holds a string
without lone surrogates, writes that string's UTF-8 to ``out`` and sets
``ok[k] = 1``.  Every other line gets ``ok[k] = 0`` and writes nothing: the
caller reads it with ``json.loads``, which says what is wrong, or parses what
this kernel does not take (``NaN``/``Infinity``, keys with escapes at the top
level, numbers longer than MAX_NUMBER characters, deeper nesting, non-string
values under ``key``...).  ``ends[k]`` is the offset in ``block`` just after
line ``k``; ``offsets[k]..offsets[k+1]`` its text in ``out`` (empty when
``ok[k] == 0``).  At most ``ends.shape[0]`` lines are read; returns how many.
No data error is raised: a line the kernel cannot prove is handed back.
The readable twin is ``_reference.jsonl_field`` (``json.loads`` per line).
"""
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

from _utf8 cimport utf8_encode


cdef extern from *:
    """
    #if UBE_SSE2_RUN
    /* x >= k for unsigned bytes x (k in 1..255), as a signed compare of x ^ 0x80 */
    #define UBE_JSON_GE(sx, k) _mm_cmpgt_epi8((sx), _mm_set1_epi8((char)(((k) ^ 0x80) - 1)))
    /* Blocks of 16 bytes from p[j] while a block holds no '"', backslash or control byte
       and is well-formed UTF-8 given the blocks before it: the continuation bytes are
       exactly those the lead bytes call for (bit masks; a sequence that crosses into
       the next block carries its bits there), C0, C1 and F5-FF never occur, and the
       byte after E0, ED, F0 and F4 is in range (no overlong form, surrogate or value
       above U+10FFFF).  SSE2 only.  Returns where the byte loop goes on: the first
       block not taken, moved back to the lead byte of a sequence that crosses into it
       (a character start).  Each block reads one byte past itself (j + 17 <= e). */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_json_utf8_blocks(const uint8_t* p, Py_ssize_t j, Py_ssize_t e) {
        const __m128i flip = _mm_set1_epi8((char)0x80), space = _mm_set1_epi8(0x20),
                      quote = _mm_set1_epi8(0x22), slash = _mm_set1_epi8(0x5C);
        unsigned carry = 0;
        while (j + 17 <= e) {
            __m128i v = _mm_loadu_si128((const __m128i*)(p + j));
            __m128i sv = _mm_xor_si128(v, flip);
            __m128i sn = _mm_xor_si128(_mm_loadu_si128((const __m128i*)(p + j + 1)), flip);
            unsigned high = (unsigned)_mm_movemask_epi8(v);                           /* >= 0x80 */
            unsigned stop = ((unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(v, space)) & ~high)
                            | (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                                                       _mm_cmpeq_epi8(v, slash)));
            unsigned c0 = (unsigned)_mm_movemask_epi8(UBE_JSON_GE(sv, 0xC0));
            unsigned c2 = (unsigned)_mm_movemask_epi8(UBE_JSON_GE(sv, 0xC2));
            unsigned e0 = (unsigned)_mm_movemask_epi8(UBE_JSON_GE(sv, 0xE0));
            unsigned f0 = (unsigned)_mm_movemask_epi8(UBE_JSON_GE(sv, 0xF0));
            unsigned f5 = (unsigned)_mm_movemask_epi8(UBE_JSON_GE(sv, 0xF5));
            __m128i n_a0 = UBE_JSON_GE(sn, 0xA0), n_90 = UBE_JSON_GE(sn, 0x90);
            unsigned range = (unsigned)_mm_movemask_epi8(_mm_or_si128(
                _mm_or_si128(_mm_andnot_si128(n_a0, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xE0))),
                             _mm_and_si128(n_a0, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xED)))),
                _mm_or_si128(_mm_andnot_si128(n_90, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xF0))),
                             _mm_and_si128(n_90, _mm_cmpeq_epi8(v, _mm_set1_epi8((char)0xF4))))));
            unsigned need = ((c2 << 1) | (e0 << 2) | (f0 << 3)) | carry;   /* must be continuations */
            if (stop | (c0 & ~c2) | f5 | range || (need & 0xFFFFu) != (high & ~c0))
                break;
            carry = need >> 16;
            j += 16;
        }
        if (carry)
            do { j--; } while ((p[j] & 0xC0) == 0x80);
        return j;
    }
    #endif
    /* The end of the run at p[j] of bytes a JSON string holds as they are:
       printable ASCII but '"' and '\\', and well-formed UTF-8 (as
       ube_utf8_decode takes it).  The byte there is '"', '\\', a control
       byte, the start of ill-formed UTF-8, or j == e.  ASCII goes 16 bytes a
       step with SSE2 (8 with SWAR words elsewhere); with SSE2, text with other
       characters too goes 16 bytes a step through ube_json_utf8_blocks; what
       is left one character at a time through ube_utf8_decode. */
    static UBE_ALWAYS_INLINE Py_ssize_t ube_json_plain(const uint8_t* p, Py_ssize_t j, Py_ssize_t e) {
        uint32_t c, cp;
        int n, streak;
        for (;;) {
    #if UBE_SSE2_RUN
            const __m128i c1f = _mm_set1_epi8(0x1F), quote = _mm_set1_epi8(0x22),
                          slash = _mm_set1_epi8(0x5C);
            while (j + 16 <= e) {
                __m128i v = _mm_loadu_si128((const __m128i*)(p + j));
                /* signed: 0x20-0x7F are > 0x1F, control bytes and 0x80-0xFF are not */
                __m128i plain = _mm_andnot_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)),
                                                 _mm_cmpgt_epi8(v, c1f));
                unsigned m = (unsigned)_mm_movemask_epi8(plain);
                if (m != 0xFFFFu) {
                    j += __builtin_ctz(~m);
                    break;
                }
                j += 16;
            }
            if (j + 17 <= e && p[j] >= 0x80)
                j = ube_json_utf8_blocks(p, j, e);
    #elif UBE_SWAR_RUN
            const uint64_t H = 0x8080808080808080ULL, L = 0x0101010101010101ULL;
            uint64_t w;
            while (j + 8 <= e) {
                memcpy(&w, p + j, 8);
                if ((w | (w - L * 32) | (((w ^ (L * 34)) - L) & ~(w ^ (L * 34)))
                        | (((w ^ (L * 92)) - L) & ~(w ^ (L * 92)))) & H)
                    break;
                j += 8;
            }
    #endif
            /* byte by byte (no 16-byte step per short ASCII run between words of
               non-ASCII text), back to 16 bytes a step after 16 ASCII bytes in a row */
            streak = 0;
            for (;;) {
                if (j >= e)
                    return j;
                c = p[j];
                if (c < 0x80) {
                    if (c < 0x20 || c == 0x22 || c == 0x5C)
                        return j;
                    j++;
                    if (++streak == 16)
                        break;
                    continue;
                }
                streak = 0;
                n = ube_utf8_decode(p, e, j, &cp);   /* always inlined; 3-byte sequences first */
                if (!n)
                    return j;
                j += n;
            }
        }
    }
    """
    Py_ssize_t json_plain "ube_json_plain"(const uint8_t* p, Py_ssize_t j, Py_ssize_t e) noexcept nogil

DEF MAX_DEPTH = 256        # nesting the kernel parses (json.loads: about the recursion limit)
DEF MAX_NUMBER = 1000      # characters of one number (int() refuses more than 4300 digits)

cdef int _HEX[256]         # value of a hex digit, -1 for other bytes
cdef int _b
for _b in range(256):
    _HEX[_b] = int(chr(_b), 16) if chr(_b) in "0123456789abcdefABCDEF" else -1


cdef enum:
    KEY_OR_END = 0         # after '{'
    KEY = 1                # after ',' in an object
    VALUE_OR_END = 2       # after '['
    VALUE = 3              # after ':' or ',' in an array
    AFTER = 4              # after a value


cdef inline Py_ssize_t _ws(const uint8_t* p, Py_ssize_t i, Py_ssize_t e) noexcept nogil:
    while i < e and (p[i] == 32 or p[i] == 9 or p[i] == 10 or p[i] == 13):
        i += 1
    return i


cdef inline int _hex4(const uint8_t* p, Py_ssize_t i, Py_ssize_t e, uint32_t* cp) noexcept nogil:
    """The 4 hex digits at p[i:i+4] into cp; 0 when they are not 4 hex digits."""
    cdef int a, b, c, d
    if i + 4 > e:
        return 0
    a = _HEX[p[i]]
    b = _HEX[p[i + 1]]
    c = _HEX[p[i + 2]]
    d = _HEX[p[i + 3]]
    if (a | b | c | d) < 0:
        return 0
    cp[0] = <uint32_t>((a << 12) | (b << 8) | (c << 4) | d)
    return 1


cdef Py_ssize_t _string(const uint8_t* p, Py_ssize_t i, Py_ssize_t e, uint8_t* out,
                        Py_ssize_t* written, bint* escaped) noexcept nogil:
    """The JSON string starting at the quote p[i]: returns the offset after its
    closing quote, or -1 when it is not a valid string (or, with ``out``, holds a
    lone surrogate).  With ``out`` its UTF-8 is written there (``written``
    bytes); ``escaped`` says whether it held a backslash."""
    cdef Py_ssize_t j = i + 1, o = 0, run
    cdef uint8_t c
    cdef uint32_t cp, low
    escaped[0] = False
    while j < e:
        run = j
        j = json_plain(p, j, e)   # printable ASCII but '"' and '\\', and well-formed UTF-8
        if out != NULL and j > run:
            memcpy(out + o, p + run, j - run)
            o += j - run
        if j >= e:
            return -1
        c = p[j]
        if c == 34:   # '"'
            written[0] = o
            return j + 1
        if c == 92:   # '\\'
            escaped[0] = True
            if j + 1 >= e:
                return -1
            c = p[j + 1]
            if c == 117:   # 'u'
                if not _hex4(p, j + 2, e, &cp):
                    return -1
                j += 6
                if out != NULL:
                    if 0xDC00 <= cp <= 0xDFFF:
                        return -1            # a lone low surrogate
                    if 0xD800 <= cp <= 0xDBFF:
                        if (j + 6 > e or p[j] != 92 or p[j + 1] != 117 or not _hex4(p, j + 2, e, &low)
                                or not (0xDC00 <= low <= 0xDFFF)):
                            return -1        # a lone high surrogate
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                        j += 6
                    o += utf8_encode(cp, out + o)
                continue
            if c == 34 or c == 92 or c == 47:
                pass
            elif c == 98:
                c = 8
            elif c == 102:
                c = 12
            elif c == 110:
                c = 10
            elif c == 114:
                c = 13
            elif c == 116:
                c = 9
            else:
                return -1
            if out != NULL:
                out[o] = c
                o += 1
            j += 2
            continue
        return -1                            # a control character (json.loads is strict)
    return -1


cdef inline Py_ssize_t _number(const uint8_t* p, Py_ssize_t i, Py_ssize_t e) noexcept nogil:
    """The offset after the JSON number at p[i], or -1."""
    cdef Py_ssize_t j = i
    if j < e and p[j] == 45:   # '-'
        j += 1
    if j < e and p[j] == 48:
        j += 1
    elif j < e and 49 <= p[j] <= 57:
        while j < e and 48 <= p[j] <= 57:
            j += 1
    else:
        return -1
    if j < e and p[j] == 46:   # '.'
        j += 1
        if not (j < e and 48 <= p[j] <= 57):
            return -1
        while j < e and 48 <= p[j] <= 57:
            j += 1
    if j < e and (p[j] == 101 or p[j] == 69):   # 'e' 'E'
        j += 1
        if j < e and (p[j] == 43 or p[j] == 45):
            j += 1
        if not (j < e and 48 <= p[j] <= 57):
            return -1
        while j < e and 48 <= p[j] <= 57:
            j += 1
    if j - i > MAX_NUMBER:
        return -1
    return j


cdef int _line(const uint8_t* p, Py_ssize_t i, Py_ssize_t e, const uint8_t* key, Py_ssize_t klen,
               uint8_t* out, Py_ssize_t* written) noexcept nogil:
    """1 when p[i:e] is a JSON object (see the module) whose last member ``key``
    is a string without lone surrogates, its UTF-8 written to ``out``; else 0."""
    cdef uint8_t stack[MAX_DEPTH]
    cdef int sp = 0, state = KEY_OR_END, found = 0
    cdef bint target = False, escaped, match
    cdef Py_ssize_t j, n
    cdef uint8_t c
    i = _ws(p, i, e)
    if i >= e or p[i] != 123:   # '{'
        return 0
    stack[0] = 123
    i += 1
    while True:
        i = _ws(p, i, e)
        if i >= e:
            return 0
        c = p[i]
        if state == KEY_OR_END or state == KEY:
            if c == 125 and state == KEY_OR_END:   # '}'
                pass
            else:
                if c != 34:
                    return 0
                j = _string(p, i, e, NULL, &n, &escaped)
                if j < 0:
                    return 0
                match = False
                if sp == 0:
                    if escaped:
                        return 0                    # a top-level key with escapes: json.loads decides
                    match = j - i - 2 == klen and memcmp(p + i + 1, key, klen) == 0
                i = _ws(p, j, e)
                if i >= e or p[i] != 58:   # ':'
                    return 0
                i += 1
                target = match
                state = VALUE
                continue
        elif state == VALUE or state == VALUE_OR_END:
            if c == 93 and state == VALUE_OR_END:   # ']'
                pass
            else:
                if c == 34:
                    if target:
                        j = _string(p, i, e, out, written, &escaped)
                        found = 1
                    else:
                        j = _string(p, i, e, NULL, &n, &escaped)
                elif target:
                    return 0                        # not a string under key: json.loads reports it
                elif c == 123 or c == 91:   # '{' '['
                    sp += 1
                    if sp >= MAX_DEPTH:
                        return 0
                    stack[sp] = c
                    state = KEY_OR_END if c == 123 else VALUE_OR_END
                    i += 1
                    continue
                elif c == 116:
                    j = i + 4 if i + 4 <= e and memcmp(p + i, b"true", 4) == 0 else -1
                elif c == 102:
                    j = i + 5 if i + 5 <= e and memcmp(p + i, b"false", 5) == 0 else -1
                elif c == 110:
                    j = i + 4 if i + 4 <= e and memcmp(p + i, b"null", 4) == 0 else -1
                else:
                    j = _number(p, i, e)
                if j < 0:
                    return 0
                i = j
                target = False
                state = AFTER
                continue
        else:   # AFTER
            if c == 44:   # ','
                state = KEY if stack[sp] == 123 else VALUE
                i += 1
                continue
            if not ((c == 125 and stack[sp] == 123) or (c == 93 and stack[sp] == 91)):
                return 0
        # c closes the container stack[sp]
        i += 1
        if sp == 0:
            return found if _ws(p, i, e) == e else 0
        sp -= 1
        state = AFTER


def scan_lines(const uint8_t[::1] block, Py_ssize_t start, Py_ssize_t stop, const uint8_t[::1] key,
               uint8_t[::1] out, int64_t[::1] ends, int64_t[::1] offsets, uint8_t[::1] ok):
    """See the module: returns the number of lines read (at most ``ends.shape[0]``)."""
    cdef Py_ssize_t cap = ends.shape[0], n = 0, i = start, e, written = 0, o = 0, klen = key.shape[0]
    cdef const uint8_t* p = &block[0] if block.shape[0] else NULL
    cdef const uint8_t* k = &key[0] if klen else <const uint8_t*>b""
    cdef const void* hit
    if not 0 <= start <= stop <= block.shape[0]:
        raise ValueError(f"need 0 <= start <= stop <= len(block), got {start}, {stop}, {block.shape[0]}")
    if out.shape[0] < stop - start:
        raise ValueError(f"out needs {stop - start} bytes, got {out.shape[0]}")
    if offsets.shape[0] < cap + 1 or ok.shape[0] < cap:
        raise ValueError("offsets needs len(ends) + 1 entries and ok len(ends)")
    if cap == 0:
        return 0
    offsets[0] = 0
    if start == stop:
        return 0
    with nogil:
        while i < stop and n < cap:
            hit = memchr(p + i, 10, stop - i)
            e = (<const uint8_t*>hit - p) + 1 if hit != NULL else stop
            if _line(p, i, e, k, klen, &out[o], &written):
                ok[n] = 1
                o += written
            else:
                ok[n] = 0
            ends[n] = e
            offsets[n + 1] = o
            n += 1
            i = e
    return n

