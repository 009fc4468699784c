# Hashing and prefetch helpers shared by the kernels (header-only: no module
# pairs with it).  Hashes never leave a process (tables are exported sorted by
# key), so they may read native-endian words.
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define UBE_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define UBE_PREFETCH(p) ((void)0)
    #endif
    #define UBE_XXH_P1 0x9E3779B185EBCA87ULL
    #define UBE_XXH_P2 0xC2B2AE3D27D4EB4FULL
    #define UBE_XXH_P3 0x165667B19E3779F9ULL
    #define UBE_XXH_P4 0x85EBCA77C2B2AE63ULL
    #define UBE_XXH_P5 0x27D4EB2F165667C5ULL
    /* The 128-bit product of a and b folded to 64 bits (low half ^ high half): every
       output bit, the low ones included, depends on every bit of both inputs; one
       multiply instruction where __int128 exists (wyhash's "mum"). */
    static inline unsigned long long ube_fold_mul(unsigned long long a, unsigned long long b) {
    #if defined(__SIZEOF_INT128__)
        unsigned __int128 r = (unsigned __int128)a * b;
        return (unsigned long long)r ^ (unsigned long long)(r >> 64);
    #else
        unsigned long long al = a & 0xFFFFFFFFULL, ah = a >> 32, bl = b & 0xFFFFFFFFULL, bh = b >> 32;
        unsigned long long ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
        unsigned long long mid = (ll >> 32) + (lh & 0xFFFFFFFFULL) + (hl & 0xFFFFFFFFULL);
        unsigned long long lo = (ll & 0xFFFFFFFFULL) | (mid << 32);
        unsigned long long hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
        return lo ^ hi;
    #endif
    }
    """
    void prefetch "UBE_PREFETCH"(const void* p) noexcept nogil
    const uint64_t P1 "UBE_XXH_P1"
    const uint64_t P2 "UBE_XXH_P2"
    const uint64_t P3 "UBE_XXH_P3"
    const uint64_t P4 "UBE_XXH_P4"
    const uint64_t P5 "UBE_XXH_P5"
    uint64_t fold_mul "ube_fold_mul"(uint64_t a, uint64_t b) noexcept nogil


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t hash_bytes(const uint8_t* p, int64_t n) noexcept nogil:
    """64-bit hash of ``n`` bytes at ``p``: xxHash64's short-input path (8-byte
    lanes with the XXH64 round, then 4-byte and 1-byte tails, then the XXH64
    avalanche), applied to keys of any length."""
    cdef uint64_t h = P5 + <uint64_t>n
    cdef uint64_t k
    cdef uint32_t k32
    while n >= 8:
        memcpy(&k, p, 8)
        k = _rotl(k * P2, 31) * P1
        h = _rotl(h ^ k, 27) * P1 + P4
        p += 8
        n -= 8
    if n >= 4:
        memcpy(&k32, p, 4)
        h = _rotl(h ^ (<uint64_t>k32 * P1), 23) * P2 + P3
        p += 4
        n -= 4
    while n > 0:
        h = _rotl(h ^ (<uint64_t>p[0] * P5), 11) * P1
        p += 1
        n -= 1
    h ^= h >> 33
    h *= P2
    h ^= h >> 29
    h *= P3
    h ^= h >> 32
    return h


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    """A 64-bit integer key mixed by one multiply-xorshift round (the first half
    of MurmurHash3's fmix64): the high bits depend on every input bit (a tag, or
    a home slot by the top bits) and the final shift folds them into the low
    bits (a home slot by ``& mask``)."""
    x ^= x >> 33
    x *= 0xFF51AFD7ED558CCDULL
    x ^= x >> 33
    return x
