"""Framework adapters of dsa, imported as ``dsa.adapters`` (for example ``dsa.adapters.torch``).

The sources live in the repository's top-level ``adapters/`` directory and are installed as the
``dsa.adapters`` package; they are never importable as a top-level ``adapters`` module.
"""
if __name__ != "dsa.adapters":
    raise ImportError("this package is part of dsa: import it as dsa.adapters (e.g. dsa.adapters.torch), "
                      "not as a top-level 'adapters' module")
