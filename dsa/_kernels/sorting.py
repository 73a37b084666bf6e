"""Small sorting and searching kernels shared by the other kernels.

numba compiles its own ``np.argsort``, ``np.sort``, ``np.unique`` and ``np.searchsorted`` anew in
every process for every array type they meet (0.5-1.5 s each, never cached on disk), while these
loops compile once, into numba's cache. Results equal numpy's: :func:`argsort_stable` is the stable
order (``np.argsort(kind="stable")``), the searches are ``np.searchsorted`` with ``side="left"`` and
``side="right"``, and these numpy calls are what :func:`dsa._kernels.python_version` runs in their
place while they are not compiled.
"""
import numpy as np
from dsa._kernels import kernel


def _np_argsort_stable(keys):
    return np.argsort(keys, kind="stable")


def _np_search_left(a, v):
    return int(np.searchsorted(a, v, side="left"))


def _np_search_right(a, v):
    return int(np.searchsorted(a, v, side="right"))


_RUN = 16  # runs sorted by insertion before merging


@kernel("i8[]r", pure=_np_argsort_stable)
def argsort_stable(keys):
    """Indices that sort ``keys`` ascending, equal keys in index order (bottom-up merge sort, O(n log n))."""
    n = len(keys)
    a = np.empty(n, dtype=np.int64)
    b = np.empty(n, dtype=np.int64)
    for i in range(n):
        a[i] = i
    for s in range(0, n, _RUN):
        e = min(s + _RUN, n)
        for t in range(s + 1, e):
            x = a[t]
            u = t - 1
            while u >= s and keys[a[u]] > keys[x]:
                a[u + 1] = a[u]
                u -= 1
            a[u + 1] = x
    width = _RUN
    while width < n:
        for s in range(0, n, 2 * width):
            mid = min(s + width, n)
            e = min(s + 2 * width, n)
            i = s
            j = mid
            t = s
            while i < mid and j < e:
                if keys[a[j]] < keys[a[i]]:
                    b[t] = a[j]
                    j += 1
                else:
                    b[t] = a[i]
                    i += 1
                t += 1
            while i < mid:
                b[t] = a[i]
                i += 1
                t += 1
            while j < e:
                b[t] = a[j]
                j += 1
                t += 1
        a, b = b, a
        width *= 2
    return a


@kernel("i8[]r", "i8", pure=_np_search_left)
def search_left(a, v):
    """``np.searchsorted(a, v, side="left")`` for a sorted ``a``: the first index with ``a[i] >= v``."""
    lo = 0
    hi = len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel("i8[]r", "i8", pure=_np_search_right)
def search_right(a, v):
    """``np.searchsorted(a, v, side="right")`` for a sorted ``a``: the first index with ``a[i] > v``."""
    lo = 0
    hi = len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel("i8[]", "i8[]", "i8")
def sort_pairs(lo, hi, k):
    """Sort the first ``k`` pairs ``(lo, hi)`` by ``lo`` in place (insertion sort up to 48 pairs, else
    heapsort; equal ``lo`` values may come in any order)."""
    if k <= 48:
        for t in range(1, k):
            x = lo[t]
            y = hi[t]
            u = t - 1
            while u >= 0 and lo[u] > x:
                lo[u + 1] = lo[u]
                hi[u + 1] = hi[u]
                u -= 1
            lo[u + 1] = x
            hi[u + 1] = y
        return
    for start in range(k // 2 - 1, -1, -1):
        _sift(lo, hi, start, k)
    for end in range(k - 1, 0, -1):
        x = lo[0]
        lo[0] = lo[end]
        lo[end] = x
        y = hi[0]
        hi[0] = hi[end]
        hi[end] = y
        _sift(lo, hi, 0, end)


@kernel("i8[]", "i8[]", "i8", "i8")
def _sift(lo, hi, i, n):
    """Sift ``i`` down the max-heap ``lo[:n]`` (keyed by ``lo``, ``hi`` moved along)."""
    x = lo[i]
    y = hi[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and lo[c + 1] > lo[c]:
            c += 1
        if lo[c] <= x:
            break
        lo[i] = lo[c]
        hi[i] = hi[c]
        i = c
    lo[i] = x
    hi[i] = y
