"""The interactive HTML heap map: a self-contained page, safe with any string, checked in a real browser.

The browser tests run headless Chromium (Debian package ``chromium``) and are skipped without it.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import dsa
from dsa.cli import main
from dsa.plot import heap_map

HOSTILE_ID = "</script><b>x"
STACKS = [("aten::conv2d", "aten::convolution", "aten::mkldnn_convolution"), None,
          ("aten::relu", "aten::clamp_min</script>"), ("model.forward", 'aten::add"<&>'), ()]


def _problem():
    ids = ["in", HOSTILE_ID, 'q"<!--', 3, "out"]
    return dsa.Problem([0, 0, 3, 1, 5], [3, 5, 6, 4, 7], [4096, 2048, 4096, 1536, 3 * 2**20], ids=ids,
                       capacity=2**22)


class _Page(HTMLParser):
    """Collects the script elements and the text and tags inside the element with id ``tooltip``."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.tooltip, self.tooltip_tags, self.attrs = [], [], [], {}
        self._script, self._depth = None, 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.attrs.setdefault(tag, attrs)
        if tag == "script":
            self._script = []
        if self._depth:
            self._depth += 1
            self.tooltip_tags.append(tag)
            if tag == "div":
                self.tooltip.append("\n")
        elif attrs.get("id") == "tooltip":
            self._depth = 1

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._script is not None:
            self._script.append(data)
        if self._depth:
            self.tooltip.append(data)


def _parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def _data(page: str) -> dict:
    scripts = _parse(page).scripts
    assert len(scripts) == 2  # the JSON and the code: nothing broke out of either
    return json.loads(scripts[0])


# ---------------------------------------------------------------------------------------------- unit


def test_page_is_self_contained():
    problem = _problem()
    page = heap_map(problem, dsa.solve(problem), format="html", op_stacks=STACKS)
    assert page.startswith("<!DOCTYPE html>")
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    tags = _parse(page).attrs
    assert not any(("src" in tags.get(tag, {}) or "href" in tags.get(tag, {})) for tag in tags)
    assert not re.search(r"<(link|iframe|img|object|embed)\b|\bsrc\s*=|\bhref\s*=|@import|url\(", page, re.I)


TEMPLATES = ("heap_map.html", "heap_map.css", "heap_map.js")


def test_the_template_is_package_data_inlined_into_the_page():
    from importlib import resources

    folder = resources.files("dsa") / "templates"
    html_, css, js = ((folder / name).read_text(encoding="utf-8") for name in TEMPLATES)
    page = heap_map(_problem(), [0, 4096, 0, 8192, 16384], format="html", title="__DSA_JS__ <t>")
    # the style sheet and the script of the installed package, whole and inside their elements
    assert f"<style>\n{css}</style>\n" in page and f"<script>\n{js}</script>\n" in page
    assert _parse(page).scripts[1] == "\n" + js
    # every line of the HTML file but the four markers, in order; no marker is left
    skeleton = [line for line in html_.splitlines() if "__DSA_" not in line]
    assert [line for line in page.splitlines() if line in set(skeleton)][:len(skeleton)] == skeleton
    assert "<title>__DSA_JS__ &lt;t&gt;</title>" in page and _data(page)["title"] == "__DSA_JS__ <t>"
    assert re.findall(r"__DSA_\w*", page) == ["__DSA_JS__"] * 2  # the title's, in <title> and the JSON


def test_the_templates_are_listed_as_package_data():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from fnmatch import fnmatch

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["dsa"]
    shipped = sorted(p.name for p in (root / "dsa" / "templates").iterdir()
                     if any(fnmatch(f"templates/{p.name}", pat) for pat in patterns))
    assert shipped == sorted(TEMPLATES)


def test_a_broken_template_fails_loudly(monkeypatch, tmp_path):
    from dsa import _heap_html

    for name in TEMPLATES:
        (tmp_path / "templates").mkdir(exist_ok=True)
        text = (_heap_html.resources.files("dsa") / "templates" / name).read_text(encoding="utf-8")
        if name.endswith(".js"):
            text += "var s = '</script>';\n"  # would close the element early
        (tmp_path / "templates" / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(_heap_html.resources, "files", lambda package: tmp_path)
    _heap_html.template.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="heap_map.js cannot be inlined"):
            _heap_html.template()
    finally:
        _heap_html.template.cache_clear()


def test_json_round_trips_the_plan():
    problem = _problem()
    sol = dsa.solve(problem, "greedy_by_size")
    doc = _data(heap_map(problem, sol, format="html"))
    assert doc["ids"] == [str(i) if not isinstance(i, int) else i for i in problem.ids]
    assert doc["offset"] == sol.offsets.tolist()
    assert doc["size"] == problem.sizes.tolist()
    assert doc["start"] == problem.starts.tolist() and doc["end"] == problem.ends.tolist()
    assert doc["peak"] == sol.peak and doc["load"] == dsa.load(problem)
    assert doc["lower_bound"] == sol.lower_bound and doc["capacity"] == 2**22
    assert doc["strategy"] == "greedy_by_size" and doc["status"] == sol.status.value
    assert doc["title"] == "heap map: greedy_by_size"
    assert doc["stack"] is None  # no op stacks given
    times, live = dsa.bounds.live_bytes(problem)
    assert doc["live_t"] == times.tolist() and doc["live_b"] == live.tolist()


def test_values_beyond_2_53_travel_as_exact_text():
    big = 2**60
    problem = dsa.Problem([0, big], [big, big + 5], [2**61, 7], ids=[2**62, "b"])
    doc = _data(heap_map(problem, [0, 0], format="html"))
    assert doc["start"] == ["0", str(big)] and doc["size"] == [str(2**61), "7"]
    assert doc["ids"] == [str(2**62), "b"] and doc["peak"] == str(2**61)
    assert [int(v) for v in doc["offset"]] == [0, 0]


def test_hostile_strings_are_escaped():
    problem = _problem()
    title = "</title><script>alert(1)</script> & <!--"
    page = heap_map(problem, dsa.solve(problem), format="html", op_stacks=STACKS, title=title)
    assert page.lower().count("</script") == 2  # the ends of the two script elements, nothing else
    assert "<b>x" not in page and "<!--" not in page and "alert(1)</script>" not in page
    assert page.count("</title>") == 1
    assert "<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;!--</title>" in page
    doc = _data(page)
    assert doc["ids"][1] == HOSTILE_ID and doc["ids"][2] == 'q"<!--' and doc["title"] == title
    assert doc["stacks"][doc["stack"][2]] == ["aten::relu", "aten::clamp_min</script>"]


def test_op_stacks_per_row_are_deduplicated_and_appear():
    problem = _problem()
    stacks = list(STACKS)
    stacks[4] = STACKS[0]  # the same stack twice: stored once
    doc = _data(heap_map(problem, dsa.solve(problem), format="html", op_stacks=stacks))
    assert doc["stack"][0] == doc["stack"][4] >= 0 and doc["stack"][1] == -1
    assert [doc["stacks"][k] if k >= 0 else None for k in doc["stack"]] == \
        [list(STACKS[0]), None, list(STACKS[2]), list(STACKS[3]), list(STACKS[0])]
    single = _data(heap_map(problem, dsa.solve(problem), format="html", op_stacks=["a", "", None, "b", "c"]))
    assert single["stacks"] == [["a"], ["b"], ["c"]] and single["stack"] == [0, -1, -1, 1, 2]


def _trace_class():
    try:
        from dsa.adapters.torch import Trace
    except ImportError as exc:  # the adapter package imports torch
        pytest.skip(f"the torch adapter is not importable: {exc}")
    return Trace


def test_op_stacks_from_a_trace_follow_the_row_ids():
    Trace = _trace_class()
    stacks = (("aten::linear", "aten::addmm"), ("aten::relu",), ("aten::empty",), ("aten::cat",))
    trace = Trace(np.array([64, 128, 256, 32]), np.array([0, 1, 2, 4]), np.array([3, -1, 5, 6]),
                  np.zeros(4, np.uint64), stacks, 7)
    problem = trace.to_problem()  # drops allocation 1 (it escapes): ids 0, 2, 3
    sol = dsa.solve(problem)
    doc = _data(heap_map(problem, sol, format="html", op_stacks=trace))
    assert doc["ids"] == [0, 2, 3]
    assert [doc["stacks"][k] for k in doc["stack"]] == [list(stacks[0]), list(stacks[2]), list(stacks[3])]
    as_text = problem.replace(ids=["0", "2", "3"])  # ids as read back from Trace.to_csv
    assert _data(heap_map(as_text, sol, format="html", op_stacks=trace))["stack"] == doc["stack"]
    with pytest.raises(ValueError, match="pass the Trace itself"):
        heap_map(problem, sol, format="html", op_stacks=trace.stacks)
    with pytest.raises(ValueError, match="not an allocation"):
        heap_map(problem.replace(ids=[0, 2, 9]), sol, format="html", op_stacks=trace)


def test_bad_arguments_raise_value_error():
    problem = _problem()
    sol = dsa.solve(problem)
    with pytest.raises(ValueError, match="'jpeg'"):
        heap_map(problem, sol, format="jpeg")
    with pytest.raises(ValueError, match="'htm'"):
        heap_map(problem, sol, "x.html", format="htm")
    with pytest.raises(ValueError, match="5 rows"):
        heap_map(problem, sol, format="html", op_stacks=[("a",)])
    with pytest.raises(ValueError, match=r"op_stacks\[0\]"):
        heap_map(problem, sol, format="html", op_stacks=[1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="expected 5 offsets"):
        heap_map(problem, [0, 1], format="html")
    with pytest.raises(ValueError, match="ax"):
        heap_map(problem, sol, format="html", ax=object())


def test_format_follows_the_suffix_and_the_html_path_skips_matplotlib(tmp_path):
    code = (
        "import sys, dsa\n"
        "from dsa.plot import heap_map\n"
        "p = dsa.Problem([0, 1], [2, 3], [8, 8])\n"
        f"out = heap_map(p, dsa.solve(p), {str(tmp_path / 'a.HTML')!r})\n"
        "assert isinstance(out, __import__('pathlib').Path), out\n"
        "assert heap_map(p, [0, 8], format='HTML').startswith('<!DOCTYPE html>')\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    page = (tmp_path / "a.HTML").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'data-status="loading"' in page


def test_explicit_matplotlib_format_wins_over_the_suffix(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    problem = dsa.Problem([0, 1], [2, 3], [8, 8])
    path = tmp_path / "figure.html"
    heap_map(problem, dsa.solve(problem), path, format="svg")
    assert b"<svg" in path.read_bytes()[:2000]


def test_cli_writes_html_for_solve_and_compare(tmp_path, capsys):
    src = tmp_path / "trace.csv"
    src.write_text("id,lower,upper,size,alignment,thread,op,stack\n"
                   "0,0,2,64,64,1,aten::addmm,aten::linear > aten::addmm\n"
                   "\n"
                   "1,1,4,128,64,1,aten::relu,aten::relu\n"
                   "2,3,5,64,64,1,,\n")
    out = tmp_path / "solve.html"
    assert main(["solve", str(src), "--plot", str(out)]) == 0
    assert f"heap map written to {out}" in capsys.readouterr().out
    doc = _data(out.read_text(encoding="utf-8"))
    assert doc["ids"] == ["0", "1", "2"] and doc["title"] == "trace: greedy_by_size"
    assert [doc["stacks"][k] if k >= 0 else None for k in doc["stack"]] == \
        [["aten::linear", "aten::addmm"], ["aten::relu"], None]
    cmp = tmp_path / "sub" / "compare.html"
    assert main(["compare", str(src), "--strategies", "gbs", "--plot", str(cmp)]) == 0
    assert "written to" in capsys.readouterr().out
    assert _data(cmp.read_text(encoding="utf-8"))["strategy"] == "greedy_by_size"


# ------------------------------------------------------------------------------------------- browser


def _chromium():
    for exe in (shutil.which("chromium"), "/usr/bin/chromium"):
        if exe and os.access(exe, os.X_OK):
            return exe
    pytest.skip("headless browser test: no chromium (Debian: apt-get install -y chromium)")


def _browse(tmp_path, url, *extra, timeout=90):
    args = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--mute-audio", f"--user-data-dir={tmp_path / 'chromium-profile'}",
            *extra, url]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _body(dom: str) -> dict:
    return _parse(dom).attrs["body"]


@pytest.mark.parametrize("row", [0, 1, 3])
def test_browser_hover_fills_the_tooltip(tmp_path, row):
    problem = _problem()
    sol = dsa.solve(problem, "greedy_by_size")
    path = heap_map(problem, sol, tmp_path / "map.html", op_stacks=STACKS)
    dom = _browse(tmp_path, f"{path.as_uri()}#hover={row}", "--dump-dom")
    body = _body(dom)
    assert body.get("data-status") == "ok", body.get("data-error")
    assert body.get("data-hover-row") == str(row)
    page = _parse(dom)
    tooltip = "".join(page.tooltip)
    assert "b" not in page.tooltip_tags  # the hostile id stays text
    assert f"id{problem.ids[row]}\n" in tooltip
    size = int(problem.sizes[row])
    assert f"size{size:,} B" in tooltip
    offset = int(sol.offsets[row])
    assert f"offset{offset:,} B" in tooltip and f"to {offset + size:,}" in tooltip
    assert f"[{problem.starts[row]:,}, {problem.ends[row]:,})" in tooltip
    for op in STACKS[row] or ():
        assert op in tooltip
    assert ("op stack" in tooltip) == bool(STACKS[row])


def test_browser_screenshot_of_a_bundled_instance_is_not_blank(tmp_path):
    mpimg = pytest.importorskip("matplotlib.image")
    problem = dsa.data.load("A.1048576")
    path = heap_map(problem, dsa.solve(problem, "greedy_by_size"), tmp_path / "A.html")
    shot = tmp_path / "A.png"
    _browse(tmp_path, f"{path.as_uri()}#hover=40", f"--screenshot={shot}", "--window-size=900,600",
            "--hide-scrollbars")
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[:2] == (600, 900)
    assert pixels.std() > 0.1  # not one flat colour
    colours = np.unique((pixels.reshape(-1, 3) * 255).round().astype(np.uint8), axis=0)
    assert len(colours) > 50  # rectangles in several colours, text, lines
    dom = _browse(tmp_path, f"{path.as_uri()}#hover=40", "--dump-dom")
    assert _body(dom).get("data-status") == "ok" and _body(dom).get("data-hover-row") == "40"


_INTERACT = """<script>
(function () {
  var over = document.getElementById("overlay"), plot = document.getElementById("plot"), r = over.getBoundingClientRect();
  var views = [plot.getAttribute("data-view")];
  function send(type, x, y, extra, target) {
    var init = Object.assign({bubbles: true, cancelable: true, view: window, button: 0,
                              clientX: r.left + x, clientY: r.top + y}, extra || {});
    (target || over).dispatchEvent(type === "wheel" ? new WheelEvent(type, init) : new MouseEvent(type, init));
    views.push(plot.getAttribute("data-view"));
  }
  send("wheel", 300, 200, {deltaY: -400});                 // both axes
  send("wheel", 300, 200, {deltaY: -400, shiftKey: true}); // time only
  send("wheel", 300, 200, {deltaY: -400, altKey: true});   // address only
  send("mousedown", 300, 200); send("mousemove", 340, 230, {}, window); send("mouseup", 340, 230, {}, window);
  send("mousedown", 150, 100, {shiftKey: true}); send("mousemove", 450, 300, {}, window);
  send("mouseup", 450, 300, {}, window);                   // zoom to the box
  document.getElementById("reset").click();
  views.push(plot.getAttribute("data-view"));
  document.body.setAttribute("data-views", views.join(";"));
})();
</script>
</body>"""


def test_browser_wheel_drag_and_reset_change_the_view(tmp_path):
    problem = dsa.data.load("A.1048576")
    page = heap_map(problem, dsa.solve(problem, "greedy_by_size"), format="html")
    path = tmp_path / "interact.html"
    path.write_text(page.replace("</body>", _INTERACT), encoding="utf-8")
    body = _body(_browse(tmp_path, path.as_uri(), "--dump-dom", "--window-size=900,600"))
    assert body.get("data-status") == "ok", body.get("data-error")
    views = [tuple(map(float, v.split(","))) for v in body["data-views"].split(";")]
    home, both, time_only, address_only = views[0], views[1], views[2], views[3]
    span = lambda v: (v[1] - v[0], v[3] - v[2])  # noqa: E731
    assert span(both)[0] < span(home)[0] and span(both)[1] < span(home)[1]
    assert span(time_only)[0] < span(both)[0] and span(time_only)[1] == pytest.approx(span(both)[1])
    assert span(address_only)[1] < span(time_only)[1] and span(address_only)[0] == pytest.approx(span(time_only)[0])
    panned = views[6]  # after mousedown, mousemove, mouseup
    assert panned[0] < address_only[0] and panned[2] > address_only[2]  # dragged right and down
    assert span(panned) == pytest.approx(span(address_only))
    boxed = views[9]
    assert span(boxed)[0] < span(panned)[0] and span(boxed)[1] < span(panned)[1]
    assert views[-1] == pytest.approx(home)


def test_browser_renders_an_empty_plan(tmp_path):
    path = heap_map(dsa.Problem([], [], []), np.zeros(0, np.int64), tmp_path / "empty.html")
    body = _body(_browse(tmp_path, f"{path.as_uri()}#hover=0", "--dump-dom"))
    assert body.get("data-status") == "ok", body.get("data-error")
    assert body.get("data-hover") == "none"
