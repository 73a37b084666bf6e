"""Private numba kernels: functions on arrays and scalars only, compiled on first use (``cache=True``).

Nothing here is imported by ``import dsa``; modules import a kernel module when they first need it.
"""
