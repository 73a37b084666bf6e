"""Sweep kernels shared by strategies: the time-overlap graph of a problem as CSR adjacency.

Built once per problem by :class:`dsa.sweep.Sweep` and handed to every strategy that asks for it.
"""
import numpy as np
from dsa._kernels import njit


@njit(cache=True)
def overlap_csr(starts, ends):
    """CSR adjacency of the time-overlap graph of rows with lifetimes ``[starts, ends)``.

    Returns ``(indptr, indices)``; neighbours of row i are ``indices[indptr[i]:indptr[i + 1]]``.
    """
    n = len(starts)
    perm = np.argsort(starts, kind="mergesort")
    sorted_starts = starts[perm]
    # rows at sorted positions (p, hi[p]) start while the row at p is alive: each overlapping pair once
    hi = np.searchsorted(sorted_starts, ends[perm], side="left")
    deg = np.zeros(n, dtype=np.int64)
    for p in range(n):
        deg[perm[p]] += hi[p] - p - 1
        for q in range(p + 1, hi[p]):
            deg[perm[q]] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        indptr[i + 1] = indptr[i] + deg[i]
    indices = np.empty(indptr[n], dtype=np.int32)  # row ids; callers keep n < 2**31
    fill = indptr[:-1].copy()
    for p in range(n):
        a = perm[p]
        for q in range(p + 1, hi[p]):
            b = perm[q]
            indices[fill[a]] = b
            fill[a] += 1
            indices[fill[b]] = a
            fill[b] += 1
    return indptr, indices
