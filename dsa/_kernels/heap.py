"""The binary min-heap of the kernels (buchsbaum's interval colouring, gergov's skyline, mincost_flow's
shortest paths): entries are pairs ``(key, value)`` of int64 held in two parallel arrays, ordered
lexicographically (by key, then by value).

The caller owns the arrays (of room for every entry it will push) and the size. :func:`heap_pop`
moves the minimum to the slot just past the new size, so that the caller reads it there (or reads
slot 0 before the pop). Entries of equal pairs are indistinguishable, so the sequence of minima
popped depends only on the pairs pushed, not on how the heap arranges them.

Complexity O(log n) per push or pop. Functions on arrays and scalars only.
"""
from dsa._kernels import kernel


@kernel("i8[]", "i8[]", "i8", "i8", "i8")
def heap_push(keys, values, size, key, value):
    """Add ``(key, value)`` to the heap of the first ``size`` slots; return the new size."""
    t = size
    while t > 0:
        par = (t - 1) >> 1
        if keys[par] < key or (keys[par] == key and values[par] <= value):
            break
        keys[t] = keys[par]
        values[t] = values[par]
        t = par
    keys[t] = key
    values[t] = value
    return size + 1


@kernel("i8[]", "i8[]", "i8")
def heap_pop(keys, values, size):
    """Remove the minimum of the heap of the first ``size`` slots (``size > 0``) and return the new
    size ``size - 1``; the minimum is left in slot ``size - 1``."""
    size -= 1
    top_key = keys[0]
    top_value = values[0]
    key = keys[size]
    value = values[size]
    t = 0
    while True:
        c = 2 * t + 1
        if c >= size:
            break
        if c + 1 < size and (keys[c + 1] < keys[c] or (keys[c + 1] == keys[c] and values[c + 1] < values[c])):
            c += 1
        if key < keys[c] or (key == keys[c] and value <= values[c]):
            break
        keys[t] = keys[c]
        values[t] = values[c]
        t = c
    keys[t] = key
    values[t] = value
    keys[size] = top_key
    values[size] = top_value
    return size
