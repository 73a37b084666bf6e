"""The time-overlap graph as CSR adjacency: the kernel behind :attr:`dsa.sweep.Sweep.overlap`.

Built once per problem by :class:`dsa.sweep.Sweep` and handed to every strategy that asks for it.
"""
import numpy as np
from dsa._kernels import kernel


def overlap_csr(starts, ends):
    """CSR adjacency of the time-overlap graph of rows with lifetimes ``[starts, ends)``.

    Returns ``(indptr, indices)``; neighbours of row i are ``indices[indptr[i]:indptr[i + 1]]``.
    The sort and the searches run in numpy (numba's own ``argsort`` and ``searchsorted`` would be
    compiled anew in every process), the fill in :func:`_overlap_fill`.
    """
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    perm = np.argsort(starts, kind="mergesort")
    # rows at sorted positions (p, hi[p]) start while the row at p is alive: each overlapping pair once
    hi = np.searchsorted(starts[perm], ends[perm], side="left").astype(np.int64)
    return _overlap_fill(perm.astype(np.int64, copy=False), hi)


@kernel("i8[]r", "i8[]r")
def _overlap_fill(perm, hi):
    """The CSR fill of :func:`overlap_csr`, given the rows in start order and each one's end position."""
    n = len(perm)
    deg = np.zeros(n, dtype=np.int64)
    for p in range(n):
        deg[perm[p]] += hi[p] - p - 1
        for q in range(p + 1, hi[p]):
            deg[perm[q]] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        indptr[i + 1] = indptr[i] + deg[i]
    indices = np.empty(indptr[n], dtype=np.int32)  # row ids; callers keep n < 2**31
    fill = np.empty(n, dtype=np.int64)
    for i in range(n):
        fill[i] = indptr[i]
    for p in range(n):
        a = perm[p]
        for q in range(p + 1, hi[p]):
            b = perm[q]
            indices[fill[a]] = b
            fill[a] += 1
            indices[fill[b]] = a
            fill[b] += 1
    return indptr, indices
