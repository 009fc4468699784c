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


cdef inline void heap_sift_down(uint64_t* heap, Py_ssize_t n, Py_ssize_t i, uint64_t item) noexcept nogil:
    """Put ``item`` at ``i`` of the heap ``heap[0:n]`` and move it down to its place."""
    cdef Py_ssize_t child
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


cdef inline uint64_t heap_pop(vector[uint64_t]& heap) noexcept nogil:
    cdef uint64_t top = heap[0], item = heap.back()
    heap.pop_back()
    if heap.size() > 0:
        heap_sift_down(heap.data(), heap.size(), 0, item)
    return top


cdef inline void heap_build(vector[uint64_t]& heap) noexcept nogil:
    """Make the items of ``heap`` (in any order) a heap: O(n), where n pushes are O(n log n)."""
    cdef Py_ssize_t n = heap.size(), i
    for i in range(n // 2 - 1, -1, -1):
        heap_sift_down(heap.data(), n, i, heap[i])
