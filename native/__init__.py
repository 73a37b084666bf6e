"""C++ sources of dsa's native allocator, installed as ``dsa._native`` (data only, no Python API).

:mod:`dsa.adapters.torch` compiles ``dsa_alloc.cpp`` and ``dsa_fast.cpp`` into one library at first use against the installed torch.
"""
if __name__ != "dsa._native":
    raise ImportError("this package is part of dsa and holds only C++ sources; "
                      "it is used by dsa.adapters.torch")
