# A binary min-heap of uint64 items over a C++ vector, shared by the encoder's
# long-chunk BPE (_encode) and SuperBPE's stage 2 (_superword); header-only.
from libc.stdint cimport uint64_t
from libcpp.vector cimport vector


cdef inline void heap_push(vector[uint64_t]& heap, uint64_t item) noexcept nogil:
    cdef Py_ssize_t i = heap.size(), parent
    heap.push_back(item)
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= item:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = item


cdef inline uint64_t heap_pop(vector[uint64_t]& heap) noexcept nogil:
    cdef uint64_t top = heap[0], item = heap.back()
    cdef Py_ssize_t n, i = 0, child
    heap.pop_back()
    n = heap.size()
    if n == 0:
        return top
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= item:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = item
    return top
