"""Type stub of the compiled kernel ube_stream._jsonl (cython_src/_jsonl.pyx).

No data errors: a line the kernel cannot prove simple gets ``ok = 0`` and is
read by ``json.loads``.  Bad arguments (sizes, ``start``/``stop``) raise ValueError.
"""
import numpy as np
import numpy.typing as npt

def scan_lines(
    block: npt.NDArray[np.uint8],  # or bytes: whole lines (the last may lack its \n)
    start: int,
    stop: int,  # the lines of block[start:stop]
    key: npt.NDArray[np.uint8],  # the member's name, UTF-8
    out: npt.NDArray[np.uint8],  # >= stop - start bytes: the texts, one after the other
    ends: npt.NDArray[np.int64],  # per line: offset in block after it; its length bounds the lines read
    offsets: npt.NDArray[np.int64],  # len(ends) + 1: line k's text is out[offsets[k]:offsets[k+1]]
    ok: npt.NDArray[np.uint8],  # len(ends): 1 when the line's text is in out, 0: read it with json.loads
) -> int: ...  # lines read
