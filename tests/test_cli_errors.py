"""The command line never shows a traceback: every failure is one ``error:`` line and exit code 2.

Also: what it prints is what it did (``--plot heap`` writes and reports ``heap.png``), a CSV saved by
Excel ("CSV UTF-8", which starts with a byte-order mark) reads, and a closed stdout (``| head``) ends
the command quietly.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

import dsa
from dsa.cli import main

GOOD_CSV = "id,lower,upper,size\na,0,3,4\nb,1,4,8\nc,3,6,4\n"
BOM = "\ufeff"


def _run(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's errors (one line too, see dsa.cli._Parser)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code, err):
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(GOOD_CSV)
    return path


# ---------------------------------------------------------------- any exception: one line, exit 2
@pytest.mark.parametrize("exc", [
    OverflowError("Python int too large to convert to C long"),
    ZeroDivisionError("division by zero"),
    UnicodeEncodeError("utf-8", "x\ud800", 1, 2, "surrogates not allowed"),
    ImportError("the mip strategy needs scipy: pip install 'dsa-planner[mip]'"),
    RecursionError("maximum recursion depth exceeded"),
    MemoryError(),
    RuntimeError("line one\nline two"),
    KeyError("k"),
    AssertionError(),
    TypeError("unsupported operand"),
])
def test_any_exception_is_one_line_and_exit_2(src, capsys, monkeypatch, exc):
    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(dsa, "solve", boom)
    code, _, err = _run(capsys, "solve", src)
    _one_line_error(code, err)
    if isinstance(exc, (RuntimeError, KeyError, AssertionError, TypeError)) \
            and not isinstance(exc, RecursionError):
        assert f"internal error ({type(exc).__name__})" in err and "DSA_TRACEBACK" in err
    if isinstance(exc, MemoryError):
        assert "out of memory" in err


def test_keyboard_interrupt_is_not_swallowed(src, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dsa, "solve", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["solve", str(src)])


def test_dsa_traceback_shows_an_internal_error(src, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(dsa, "solve", boom)
    monkeypatch.setenv("DSA_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(["solve", str(src)])


def test_an_alignment_of_2_62_written_as_a_csv_is_one_line(tmp_path, capsys):
    path = tmp_path / "align.csv"
    path.write_text("id,lower,upper,size,alignment\n" + "".join(f"{k},0,1,3,{2**62}\n" for k in "abc"))
    code, _, err = _run(capsys, "solve", path)
    _one_line_error(code, err)
    assert "align.csv" in err


@pytest.mark.parametrize("argv", [
    ["--time-limit", "nan"], ["--time-limit", "-1"], ["--time-limit", "1e400"], ["--time-limit", "inf"],
    ["--capacity", str(10**30)], ["--capacity", "-1"], ["--seed", str(10**30)], ["--seed", "-3"],
    ["--strategy", "nope"], ["--strategy", ""], ["--plot", "heap.unknown-format"], ["-o", "."],
    ["-o", "missing/plan.csv"], ["--time-limit", "x"], ["--capacity", "1.5"],
])
def test_odd_options_give_a_plan_or_one_line(src, capsys, monkeypatch, tmp_path, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "solve", src, *argv)
    if code == 2:
        _one_line_error(code, err)
    else:
        assert code in (0, 1) and "peak=" in out and "Traceback" not in err


def test_a_missing_folder_names_the_path_given_not_a_temporary_file(src, capsys, tmp_path):
    target = tmp_path / "missing" / "plan.csv"
    code, out, err = _run(capsys, "solve", src, "-o", target)
    _one_line_error(code, err)
    assert str(target) in err and ".tmp" not in err and "plan written" not in out


# ---------------------------------------------------------------- what it prints is what it did
def test_plot_without_a_suffix_reports_the_png_it_writes(src, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    heap = tmp_path / "heap"
    code, out, _ = _run(capsys, "solve", src, "--plot", heap)
    assert code == 0 and f"heap map written to {heap}.png\n" in out
    assert (tmp_path / "heap.png").read_bytes()[:4] == b"\x89PNG" and not heap.exists()
    worst = tmp_path / "worst"
    code, out, _ = _run(capsys, "compare", src, "--strategies", "gbs", "--plot", worst)
    assert code == 0 and out.rstrip().endswith(f"written to {worst}.png")
    assert (tmp_path / "worst.png").read_bytes()[:4] == b"\x89PNG" and not worst.exists()


def test_plot_into_a_fifo_without_a_suffix_writes_a_png_into_it(src, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()), daemon=True)
    thread.start()
    code, out, _ = _run(capsys, "solve", src, "--plot", fifo)
    thread.join(timeout=20)
    assert code == 0 and f"heap map written to {fifo}\n" in out
    assert got["data"][:4] == b"\x89PNG" and not (tmp_path / "fifo.png").exists()


def test_dash_o_into_a_fifo_reaches_its_reader(src, capsys, tmp_path):
    fifo = tmp_path / "plan.csv"
    os.mkfifo(fifo)
    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()), daemon=True)
    thread.start()
    code, out, _ = _run(capsys, "solve", src, "-o", fifo)
    thread.join(timeout=20)
    assert code == 0 and f"plan written to {fifo}" in out
    assert got["data"].startswith(b"id,lower,upper,size,offset")


# ---------------------------------------------------------------- a BOM, names that are not UTF-8, | head
def test_a_csv_with_a_utf8_bom_reads(tmp_path, capsys):
    path = tmp_path / "excel.csv"
    path.write_bytes((BOM + GOOD_CSV.replace("\n", "\r\n")).encode("utf-8"))
    code, out, err = _run(capsys, "solve", path)
    assert code == 0 and "peak=12" in out and err == ""


def test_a_trace_with_a_bom_keeps_its_op_stacks_in_the_html_map(tmp_path, capsys):
    path = tmp_path / "trace.csv"
    path.write_bytes((BOM + "stack,id,lower,upper,size\naten::linear > aten::addmm,0,0,2,64\n"
                      "aten::relu,1,1,3,64\n").encode("utf-8"))
    page = tmp_path / "heap.html"
    code, _, _ = _run(capsys, "solve", path, "--plot", page)
    assert code == 0 and "aten::addmm" in page.read_text(encoding="utf-8")


def test_a_file_name_that_is_not_utf8_is_printed_escaped(tmp_path):
    name = os.fsdecode(b"in\xff.csv")
    (tmp_path / name).write_text(GOOD_CSV)
    # stdout strict UTF-8, as in a locale such as en_US.UTF-8 (in "C" and "C.UTF-8" Python itself
    # writes such names back as the bytes they came from)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    proc = subprocess.run([sys.executable, "-m", "dsa", "solve", name, "-o", os.fsdecode(b"out\xff.csv")],
                          cwd=tmp_path, capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert proc.stdout.startswith(b"in\\udcff.csv: n=3") and b"plan written to out\\udcff.csv" in proc.stdout
    assert (tmp_path / os.fsdecode(b"out\xff.csv")).read_text().startswith("id,")


def test_a_closed_stdout_ends_the_command_quietly(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(GOOD_CSV)
    # a table longer than a pipe's buffer, so that printing meets the closed pipe
    proc = subprocess.Popen([sys.executable, "-m", "dsa", "compare", *[str(path)] * 800, "--strategies", "bump"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"instance")
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    proc.stderr.close()
    assert err == b"", err.decode(errors="replace")
    assert proc.returncode == 2
