"""Contraction of tilings: groups of buffers merged into one, so that a look at the bound has fewer.

Where the bytes alive over a block are its height at every instant, a plan within that height tiles
the block's rectangle (time x bytes): no byte is free at any instant. Some groups of buffers then
fill a rectangle of their own, and can be planned as one buffer of that rectangle's lifetime and size;
the plan of the merged problem expands into one of the block by placing each member at the merged
buffer's offset plus its place inside the group (see :class:`Contraction`). The expansion is valid
whatever the merged problem's plan is: a merged buffer is exactly the union of its members. What a
merge can cost is the bound: when the group does not lie that way in any plan within the height, the
merged problem has no such plan.

Two merges cost nothing: every plan within the height makes them (they are forced).

* **Chain**: at an instant where exactly one buffer ends and one starts, the one starting takes the
  bytes the other frees, the only ones free there: one buffer over both lifetimes, of their size.
* **Stack**: at an instant where exactly one buffer ends and the buffers starting there all end
  together, they fill its bytes between them, side by side over the same lifetime: one buffer of
  their summed size (the same with time reversed: one buffer starting where several that began
  together end).

One is a guess: a **pinwheel**, five buffers wound around a centre one (no straight cut separates
them; rectangle cuts have them, :func:`dsa.generate.rectangle_cut`). Two start together and end at
``a < b`` (``l1``, ``l2``), the centre lives over ``[a, b)`` (``e``), two end together after ``b`` and
start at ``a`` and ``b`` (``r1``, ``r2``), with ``size(l1) = size(r1) + size(e)`` and ``size(r2) =
size(e) + size(l2)``: either way the pinwheel is wound, those five tile a rectangle of size
``size(l1) + size(l2)``. Five buffers can meet those equations by chance, so a pinwheel is merged only
where none of its five is in another candidate, and a plan of the merged problem is only an attempt
(its caller falls back to the whole when none is found).

Merges are repeated until none applies: each merged buffer can take part in the next ones, so that a
tiling cut recursively (guillotine splits, pinwheels) contracts from its leaves up. On rectangle cuts
of nearly continuous sizes with pinwheels, 1,361 buffers became 241 that restarted dives planned at
the bound in 0.02 s (the whole: 1.22 x the bound after 20 s of ``best``).

The pinwheel is the smallest layout of rectangles that no straight cut separates (a "wheel" among
non-slicing floorplans); P. Y. Wang and C. L. Valenzuela, "Data set generation for non-slicing
rectangular placement problems", draw test sets of known optimum from such blocks, as
:func:`dsa.generate.rectangle_cut` does.

Complexity: each round O(m) dictionary work on the m buffers left, plus for each possible centre the
buffers ending with it at its start; rounds until nothing merges (about the depth of the cut).
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict

import numpy as np

__all__ = ["Contraction", "contract"]


class Contraction:
    """The buffers of a block after merges: ``starts``, ``ends``, ``sizes`` (arrays, one per merged
    buffer), and for each input position ``node`` (the merged buffer holding it) and ``rel`` (its
    offset inside that buffer): input position ``i`` goes at ``offsets[node[i]] + rel[i]``.

    ``merges`` counts the merges made by kind (``chain``, ``stack``, ``pinwheel``)."""

    def __init__(self, starts, ends, sizes, node, rel, merges):
        self.starts, self.ends, self.sizes = starts, ends, sizes
        self.node, self.rel, self.merges = node, rel, merges

    def __len__(self) -> int:
        return len(self.sizes)

    def expand(self, offsets):
        """Offsets of the input positions from offsets of the merged buffers."""
        return np.asarray(offsets, dtype=np.int64)[self.node] + self.rel


def contract(starts, ends, sizes, *, pinwheels: bool = True, deadline: float | None = None) -> Contraction:
    """Merge the buffers of a block whose bytes alive are the same at every instant of its span.

    Parameters
    ----------
    starts, ends, sizes : arrays of int
        The block's buffers (positive sizes); its bytes alive must be the same at every instant from
        the first start to the last end (the merges rely on it; see the module's notes).
    pinwheels : bool, default True
        Also merge pinwheels (a guess, unlike chains and stacks).
    deadline : float, optional
        A ``time.perf_counter()`` value: no new round of merges starts after it.

    Returns
    -------
    Contraction
    """
    s = [int(v) for v in starts]
    e = [int(v) for v in ends]
    z = [int(v) for v in sizes]
    kids = [None] * len(z)                # per buffer: None (an input) or [(child, offset inside)]
    alive = set(range(len(z)))
    merges = Counter()

    def merge(kind, parts, start, end, size):
        for k, _ in parts:
            alive.discard(k)
        s.append(start)
        e.append(end)
        z.append(size)
        kids.append(parts)
        alive.add(len(z) - 1)
        merges[kind] += 1

    changed = True
    while changed and (deadline is None or time.perf_counter() < deadline):
        changed = False
        ending, starting = defaultdict(list), defaultdict(list)
        for k in alive:
            ending[e[k]].append(k)
            starting[s[k]].append(k)
        for t in sorted(set(ending) & set(starting)):
            out, into = ending[t], starting[t]
            if any(k not in alive for k in out + into):
                continue                  # (merged already this round)
            if len(out) == 1 and len(into) == 1 and z[out[0]] == z[into[0]]:
                a, b = out[0], into[0]                       # chain
                merge("chain", [(a, 0), (b, 0)], s[a], e[b], z[a])
                changed = True
            elif len(out) == 1 and len(into) > 1 and len({e[k] for k in into}) == 1 \
                    and sum(z[k] for k in into) == z[out[0]]:
                merge("stack", _stacked(into, z), t, e[into[0]], z[out[0]])
                changed = True
            elif len(into) == 1 and len(out) > 1 and len({s[k] for k in out}) == 1 \
                    and sum(z[k] for k in out) == z[into[0]]:
                merge("stack", _stacked(out, z), s[out[0]], t, z[into[0]])
                changed = True
        if pinwheels and not changed:
            changed = _pinwheels(s, e, z, alive, merge)
    return _flatten(s, e, z, kids, alive, len(starts), merges)


def _stacked(parts, z):
    """``[(buffer, offset)]`` of buffers stacked in the order given."""
    out, base = [], 0
    for k in parts:
        out.append((k, base))
        base += z[k]
    return out


def _pinwheels(s, e, z, alive, merge) -> bool:
    """Merge the pinwheels among ``alive`` none of whose five buffers is in another; whether any."""
    by_life, by_start_size, ending = defaultdict(list), defaultdict(list), defaultdict(list)
    for k in alive:
        by_life[(s[k], e[k])].append(k)
        by_start_size[(s[k], z[k])].append(k)
        ending[e[k]].append(k)
    found = []
    for centre in alive:
        a, b, size = s[centre], e[centre], z[centre]
        for l1 in ending.get(a, ()):
            if z[l1] <= size:
                continue
            for l2 in by_life.get((s[l1], b), ()):
                for r1 in by_start_size.get((a, z[l1] - size), ()):
                    if e[r1] <= b or r1 == centre:
                        continue
                    for r2 in by_start_size.get((b, size + z[l2]), ()):
                        if e[r2] == e[r1] and len({l1, l2, centre, r1, r2}) == 5:
                            found.append((l1, l2, centre, r1, r2))
    seen = Counter(k for group in found for k in group)
    merged = False
    for l1, l2, centre, r1, r2 in found:
        if any(seen[k] > 1 for k in (l1, l2, centre, r1, r2)):
            continue
        # l1 and r1 below (the centre on r1, l2 on l1, r2 on r1), or the mirror image: either tiles
        parts = [(l1, 0), (l2, z[l1]), (r1, 0), (centre, z[r1]), (r2, z[r1])]
        merge("pinwheel", parts, s[l1], e[r1], z[l1] + z[l2])
        merged = True
    return merged


def _flatten(s, e, z, kids, alive, n, merges) -> Contraction:
    """The :class:`Contraction` of the buffers left: each input's merged buffer and offset in it."""
    roots = sorted(alive)
    node = np.zeros(n, dtype=np.int64)
    rel = np.zeros(n, dtype=np.int64)
    for j, root in enumerate(roots):
        todo = [(root, 0)]
        while todo:
            k, base = todo.pop()
            if kids[k] is None:
                node[k], rel[k] = j, base
            else:
                todo.extend((child, base + offset) for child, offset in kids[k])
    pick = np.asarray(roots, dtype=np.int64)
    arr = lambda values: np.asarray(values, dtype=np.int64)[pick]  # noqa: E731
    return Contraction(arr(s), arr(e), arr(z), node, rel, dict(merges))
