"""MkDocs hook (``hooks:`` in mkdocs.yml): the interactive heap map of the docs, rendered at build time.

``docs/concepts.md`` links to and embeds ``assets/resnet_heap_map.html``. The page is not committed:
on every build (``make docs``, ``mkdocs serve``) this hook records one forward of the example ResNet at
batch 2 with the PyTorch adapter (``dsa.adapters.torch.profile``; the ``docs`` extra installs torch,
and the adapter builds its allocator with the C++ compiler that ``make test`` needs too), plans it with
``best`` and adds the page (``dsa.plot.heap_map(..., format="html")``, every block's op stack in its
tooltip) to the site's files, so that ``mkdocs build --strict`` checks the links to it and writes it
to ``<site>/assets/``. Fixed seeds: only ``time_s`` differs between builds.

Without torch or a C++ compiler the page shows the bundled ResNet-18 trace (``dsa/data/traces``, no
op stacks) and the hook logs a warning, which fails a ``--strict`` build.
"""
from __future__ import annotations

import logging

from mkdocs.structure.files import File

PAGE = "assets/resnet_heap_map.html"
SEED = 0
log = logging.getLogger("mkdocs.hooks.heap_map_page")


def resnet_page() -> str:
    """The page: the adapter's trace of the example ResNet, or the bundled trace without torch."""
    import dsa
    from dsa.plot import heap_map

    try:
        import torch

        from dsa.adapters.torch import BuildError, profile
        from dsa.adapters.torch.examples import MODELS
    except ImportError as exc:
        return _fallback(f"the PyTorch adapter is not importable ({exc})")
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model, make_input = MODELS["resnet"]()
    try:
        with torch.inference_mode():
            trace = profile(model, *make_input(2))
    except BuildError as exc:
        return _fallback(f"the PyTorch adapter cannot build its allocator ({exc})")
    problem = trace.to_problem()
    sol = dsa.solve(problem, "best", seed=SEED)
    return heap_map(problem, sol, format="html", op_stacks=trace,
                    title=f"ResNet-like forward, batch 2: {len(problem)} planned CPU allocations (best)")


def _fallback(reason: str) -> str:
    import dsa
    from dsa.plot import heap_map

    log.warning(f"{PAGE}: {reason}; the page shows the bundled resnet18_b1_224 trace without op stacks")
    problem = dsa.data.load("resnet18_b1_224")
    sol = dsa.solve(problem, "best", seed=SEED)
    return heap_map(problem, sol, format="html",
                    title=f"torchvision resnet18, batch 1 (bundled trace): {len(problem)} buffers (best)")


def on_files(files, config):
    if files.get_file_from_path(PAGE) is not None:  # a copy under docs/ would be stale: drop it
        log.info(f"{PAGE}: replacing the file under docs/ with the page rendered now")
        files.remove(files.get_file_from_path(PAGE))
    files.append(File.generated(config, PAGE, content=resnet_page()))
    return files
