"""MkDocs hooks (``hooks:`` in mkdocs.yml): included Markdown keeps its own relative links.

``pymdownx.snippets`` pastes a file into a page as it is, so a link or image written relative to the
included file (``![plot](strategy_quality.png)`` in ``docs/results/strategies.md``) would be resolved
relative to the page that includes it, and ``mkdocs build --strict`` would fail on it. Around every
one-line include ``--8<-- "path"`` of a page, these hooks

* rewrite the relative link and image targets of the included text so that they point at the same
  files from the including page (``strategy_quality.png`` -> ``results/strategy_quality.png``), and
* move its headings one level down, so that an included page's ``# Title`` becomes a section of
  the including page.

Absolute URLs, anchors (``#...``) and site-absolute paths (``/...``) are left alone. Only the
single-line form of a snippet is handled; ``base_path`` of the snippets extension must be the
repository root (the directory of mkdocs.yml), as configured.

The docstrings of ``dsa`` use Sphinx roles (``:func:`dsa.solve```), which mkdocstrings renders
literally; a last hook drops the role and keeps the name as code (``~a.b.C`` shows ``C``, as in
Sphinx).
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

_INCLUDE = re.compile(r'^(\s*)--8<--\s+"([^"]+)"\s*$')
_BEGIN = re.compile(r"^<!-- dsa-include-begin (\S+) -->$")
_END = "<!-- dsa-include-end -->"
# [text](target "title"), ![alt](target), and reference definitions [id]: target
_INLINE = re.compile(r"(\]\()(<?)([^)\s>]+)(>?)((?:\s+\"[^\"]*\")?\))")
_REFDEF = re.compile(r"^(\s{0,3}\[[^\]]+\]:\s*)(\S+)")
_HEADING = re.compile(r"^(#{1,5})(\s)")
_FENCE = re.compile(r"^\s*(```|~~~)")

_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj|const):<code>(~?)([^<]*)</code>")
_state = {"page": "", "root": Path("."), "docs": Path("docs")}


def _is_relative(target: str) -> bool:
    return not (target.startswith(("#", "/", "mailto:", "data:")) or "://" in target)


class _Mark(Preprocessor):
    """Before the snippets extension: put markers around every one-line include."""

    def run(self, lines):
        out = []
        for line in lines:
            m = _INCLUDE.match(line)
            if m:
                out += [f"<!-- dsa-include-begin {m.group(2)} -->", line, _END]
            else:
                out.append(line)
        return out


class _Rewrite(Preprocessor):
    """After the snippets extension: rewrite links and headings between the markers."""

    def run(self, lines):
        out, source, fenced = [], None, False
        for line in lines:
            begin = _BEGIN.match(line)
            if begin:
                source = begin.group(1)
                continue
            if line == _END:
                source, fenced = None, False
                continue
            if source is None:
                out.append(line)
                continue
            if _FENCE.match(line):
                fenced = not fenced
            if not fenced:
                line = self._rewrite(line, source)
            out.append(line)
        return out

    @staticmethod
    def _rewrite(line: str, source: str) -> str:
        # the included file's folder, relative to docs/, and the page's folder
        src_dir = posixpath.relpath(posixpath.dirname((_state["root"] / source).resolve().as_posix()),
                                    _state["docs"].resolve().as_posix())
        page_dir = posixpath.dirname(_state["page"]) or "."

        def move(target: str) -> str:
            if not _is_relative(target):
                return target
            path, sep, anchor = target.partition("#")
            moved = posixpath.relpath(posixpath.normpath(posixpath.join(src_dir, path)), page_dir)
            return moved + sep + anchor

        line = _INLINE.sub(lambda m: m.group(1) + m.group(2) + move(m.group(3)) + m.group(4) + m.group(5), line)
        line = _REFDEF.sub(lambda m: m.group(1) + move(m.group(2)), line)
        return _HEADING.sub(lambda m: "#" + m.group(1) + m.group(2), line)


class _IncludeLinks(Extension):
    def extendMarkdown(self, md):
        # pymdownx.snippets runs at priority 32: mark just before it, rewrite just after it
        md.preprocessors.register(_Mark(md), "dsa_include_mark", 33)
        md.preprocessors.register(_Rewrite(md), "dsa_include_rewrite", 31)


def on_config(config):
    _state["root"] = Path(config.config_file_path).resolve().parent
    _state["docs"] = Path(config.docs_dir).resolve()
    config.markdown_extensions.append(_IncludeLinks())
    return config


def on_page_markdown(markdown, page, config, files):
    _state["page"] = page.file.src_uri
    return markdown


def on_page_content(html, page, config, files):
    return _ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)
