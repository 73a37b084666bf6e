"""Random numbers inside kernels: the xorshift64* generator on a one-element uint64 state array.

G. Marsaglia, "Xorshift RNGs", Journal of Statistical Software 8(14), 2003, with the multiplicative
output step of S. Vigna, "An experimental exploration of Marsaglia's xorshift generators, scrambled",
ACM TOMS 42(4), 2016. The state lives in an array that the caller seeds (never 0), so that kernels
stay deterministic for a seed and need no numba random state. Shared by the local search and the
skyline search kernels.
"""
import numpy as np

from dsa._kernels import njit

__all__ = ["next_bits", "randint", "uniform"]


@njit(cache=True)
def next_bits(rng):
    """Advance the xorshift64* state ``rng[0]`` and return 64 random bits (as uint64)."""
    x = rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[0] = x
    return x * np.uint64(2685821657736338717)


@njit(cache=True)
def randint(rng, n):
    """A random integer in ``[0, n)`` (``n >= 1``)."""
    return np.int64((next_bits(rng) >> np.uint64(11)) % np.uint64(n))


@njit(cache=True)
def uniform(rng):
    """A random float in ``[0, 1)``."""
    return np.float64(next_bits(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
