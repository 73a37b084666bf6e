"""Every file dsa writes (plans as CSV or JSON, heap maps as HTML or images) goes through one helper,
``dsa.io.write_file``: whole or not at all for regular files, through symbolic links (the link stays a
link), and directly into FIFOs, devices and the process's own descriptors (``/dev/stdout``).

Devices and ``/proc/self/fd/1`` are reached through links made in ``tmp_path``: were the link replaced
(the bug these tests guard against), only the test's own link would be lost, never ``/dev/null``.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import dsa
import dsa.io
from dsa.cli import main

PROBLEM = dsa.Problem([0, 1, 3], [3, 4, 6], [4, 8, 4], ids=["a", "b", "c"])
GOOD_CSV = "id,lower,upper,size\na,0,3,4\nb,1,4,8\nc,3,6,4\n"


def _plan_csv(problem=PROBLEM) -> bytes:
    """The bytes of the plan file of ``problem`` (greedy by size), as write_csv writes them."""
    sol = dsa.solve(problem)
    rows = ["id,lower,upper,size,offset"] + [
        f"{problem.ids[i]},{problem.starts[i]},{problem.ends[i]},{problem.sizes[i]},{sol.offsets[i]}"
        for i in range(len(problem))]
    return ("\r\n".join(rows) + "\r\n").encode()


def _writers():
    """(name, write(path) -> None, check(bytes) -> bool) for each kind of file dsa writes."""
    sol = dsa.solve(PROBLEM)

    def html(path):
        from dsa.plot import heap_map
        heap_map(PROBLEM, sol, path, format="html")

    return [
        ("csv", lambda p: dsa.write_csv(p, PROBLEM, sol), lambda b: b.startswith(b"id,lower,upper,size,offset")),
        ("json", lambda p: dsa.write_json(p, PROBLEM, sol), lambda b: json.loads(b)["solution"]["offsets"]
         == sol.offsets.tolist()),
        ("html", html, lambda b: b.startswith(b"<!DOCTYPE html>") and b.rstrip().endswith(b"</html>")),
    ]


WRITERS = ["csv", "json", "html"]


def _writer(name):
    return next((w, c) for n, w, c in _writers() if n == name)


def _read_fifo_in_thread(fifo: Path):
    got = {}

    def reader():
        with open(fifo, "rb") as f:
            got["data"] = f.read()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread, got


# ---------------------------------------------------------------- links, FIFOs, devices, descriptors
@pytest.mark.parametrize("kind", WRITERS)
def test_a_symlink_stays_a_link_and_its_target_is_written(tmp_path, kind):
    write, check = _writer(kind)
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "target"
    target.write_text("old\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    write(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert check(target.read_bytes())
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["target"]  # no temporary file left


def test_a_relative_and_a_chained_link_are_followed_to_the_end(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "plan.csv").write_text("old\n")
    (tmp_path / "d" / "rel").symlink_to("plan.csv")        # relative to the link's own folder
    (tmp_path / "chain").symlink_to(tmp_path / "d" / "rel")
    dsa.write_csv(tmp_path / "chain", PROBLEM, dsa.solve(PROBLEM))
    assert (tmp_path / "chain").is_symlink() and (tmp_path / "d" / "rel").is_symlink()
    assert dsa.read_plan(tmp_path / "d" / "plan.csv")[1].tolist() == dsa.solve(PROBLEM).offsets.tolist()


def test_a_dangling_link_creates_its_target(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    dsa.write_json(link, PROBLEM)
    assert link.is_symlink() and dsa.read_json(tmp_path / "new.json").sizes.tolist() == [4, 8, 4]


@pytest.mark.parametrize("kind", WRITERS)
def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path, kind):
    write, check = _writer(kind)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    thread, got = _read_fifo_in_thread(fifo)
    write(fifo)
    thread.join(timeout=20)
    assert not thread.is_alive(), "the reader of the FIFO got nothing"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert check(got["data"])


def test_a_link_to_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "plan.csv"
    link.symlink_to(fifo)
    thread, got = _read_fifo_in_thread(fifo)
    dsa.write_csv(link, PROBLEM, dsa.solve(PROBLEM))
    thread.join(timeout=20)
    assert not thread.is_alive() and link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got["data"] == _plan_csv()


def test_a_link_to_a_character_device_is_written_through(tmp_path):
    link = tmp_path / "null.csv"
    link.symlink_to(os.devnull)
    dsa.write_csv(link, PROBLEM)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.csv"]


def test_a_full_device_raises_and_names_the_path(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    link = tmp_path / "full.csv"
    link.symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left on device: .*full.csv") as info:
        dsa.write_csv(link, PROBLEM)
    assert info.value.errno == errno.ENOSPC and link.is_symlink()


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        dsa.write_csv(tmp_path, PROBLEM)


def test_a_missing_folder_is_reported_with_the_path_given_not_a_temporary_name(tmp_path):
    path = tmp_path / "missing" / "plan.csv"
    with pytest.raises(FileNotFoundError) as info:
        dsa.write_csv(path, PROBLEM)
    assert info.value.filename == str(path) and ".tmp" not in str(info.value)


def _run_cli_with_stdout_in_a_file(tmp_path, output: str) -> tuple[bytes, Path]:
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    captured = tmp_path / "captured.txt"
    with open(captured, "wb") as out:
        out.write(b"before\n")
        out.flush()
        proc = subprocess.run([sys.executable, "-m", "dsa", "solve", str(src), "-o", output],
                              stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    return captured.read_bytes(), captured


def test_a_link_to_proc_self_fd_1_writes_to_stdout_after_what_was_printed(tmp_path):
    link = tmp_path / "stdout.csv"
    link.symlink_to("/proc/self/fd/1")
    data, _ = _run_cli_with_stdout_in_a_file(tmp_path, str(link))
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    text = data.decode()
    # in order: what the shell wrote, the summary, the plan, the last line; nothing overwritten
    assert text.startswith("before\nin.csv: n=3")
    assert data.index(_plan_csv()) < text.index("plan written to")


@pytest.mark.skipif(os.geteuid() == 0 or not os.path.islink("/dev/stdout"),
                    reason="as root a regression would replace the system's /dev/stdout; the test above "
                           "checks the same path through a link of its own")
def test_dash_o_dev_stdout_with_stdout_redirected_to_a_file(tmp_path):
    data, _ = _run_cli_with_stdout_in_a_file(tmp_path, "/dev/stdout")
    assert data.startswith(b"before\nin.csv: n=3") and _plan_csv() in data
    assert os.path.islink("/dev/stdout")


def test_dash_o_dev_stdout_into_a_pipe(tmp_path):
    if not os.path.islink("/dev/stdout"):
        pytest.skip("no /dev/stdout link")
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    link = tmp_path / "out.csv"  # /dev/stdout through a link of the test's own (see the module docstring)
    link.symlink_to("/dev/stdout")
    proc = subprocess.run([sys.executable, "-m", "dsa", "solve", str(src), "-o", str(link)],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == b""
    assert _plan_csv() in proc.stdout and proc.stdout.index(_plan_csv()) < proc.stdout.index(b"plan written")
    assert link.is_symlink()


# ---------------------------------------------------------------- regular files: whole or not at all
def test_replacing_a_file_keeps_its_permission_bits(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_text("old\n")
    path.chmod(0o640)
    dsa.write_csv(path, PROBLEM)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text().startswith("id,")


def _fail_mid_write(monkeypatch, how: str):
    """Make the next file write fail with ENOSPC: after one chunk (``write``) or at the flush (``fsync``)."""
    if how == "write":
        monkeypatch.setattr(dsa.io, "_CHUNK", 16)
        real = os.write
        calls = []

        def write(fd, data):
            if fd > 2:  # leave the test's own stdout and stderr alone
                calls.append(len(data))
                if len(calls) > 1:
                    raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)
        return calls
    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    return None


@pytest.mark.parametrize("how", ["write", "fsync"])
@pytest.mark.parametrize("kind", WRITERS)
def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch, kind, how):
    write, check = _writer(kind)
    path = tmp_path / f"out.{kind}"
    path.write_bytes(b"the old contents\n")
    with monkeypatch.context() as m:
        calls = _fail_mid_write(m, how)
        with pytest.raises(OSError, match="No space left on device") as info:
            write(path)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    if calls is not None:
        assert len(calls) == 2  # it failed mid-write, after a first chunk went out
    assert path.read_bytes() == b"the old contents\n"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    write(path)  # and with room on the disk it works
    assert check(path.read_bytes())


@pytest.mark.parametrize("name", ["heap.png", "heap.svg", "heap.pdf"])
def test_a_full_disk_leaves_an_old_image_whole(tmp_path, monkeypatch, name):
    pytest.importorskip("matplotlib")
    from dsa.plot import heap_map

    path = tmp_path / name
    path.write_bytes(b"the old image\n")
    with monkeypatch.context() as m:
        _fail_mid_write(m, "write")
        with pytest.raises(OSError, match="No space left on device"):
            heap_map(PROBLEM, dsa.solve(PROBLEM), path)
    assert path.read_bytes() == b"the old image\n"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_cli_reports_a_full_disk_on_one_line_and_keeps_the_old_heap_map(tmp_path, monkeypatch, capsys):
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    page = tmp_path / "heap.html"
    page.write_text("old page")
    monkeypatch.setattr(dsa.io, "_CHUNK", 16)
    _fail_mid_write(monkeypatch, "write")
    assert main(["solve", str(src), "--plot", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "No space left on device" in err
    assert str(page) in err and ".tmp" not in err
    assert page.read_text() == "old page" and sorted(p.name for p in tmp_path.iterdir()) == ["heap.html", "in.csv"]


# ---------------------------------------------------------------- text that UTF-8 cannot encode
LONE = "x\ud800y"          # an unpaired surrogate (from "\ud800" in a JSON file, say)
PAIR = "\ud83d\ude00"      # a surrogate pair: U+1F600 as JSON and JavaScript spell it


def test_a_heap_map_title_and_ids_with_surrogates_give_a_whole_valid_page(tmp_path):
    from dsa.plot import heap_map

    problem = dsa.Problem([0, 1], [2, 3], [4, 4], ids=[LONE, PAIR])
    path = tmp_path / "heap.html"
    heap_map(problem, dsa.solve(problem), path, title=f"title {LONE}",
             op_stacks=[("aten::" + LONE,), PAIR])
    raw = path.read_bytes()
    page = raw.decode("utf-8")  # strict: valid UTF-8 throughout
    assert page.rstrip().endswith("</html>")
    assert "<title>title x\ufffdy</title>" in page
    data = page.split('<script type="application/json" id="dsa-heap-data">', 1)[1].split("</script>", 1)[0]
    doc = json.loads(data)  # a valid pair may stay escaped in the JSON (ASCII): it reads back as one character
    assert doc["title"] == "title x\ufffdy"
    assert doc["ids"] == ["x\ufffdy", "\U0001F600"]
    assert doc["stacks"] == [["aten::x\ufffdy"], ["\U0001F600"]]
    for text in (doc["title"], *doc["ids"], *doc["stacks"][0], *doc["stacks"][1]):
        text.encode("utf-8")  # strict: no unpaired surrogate left for the browser


def test_a_png_title_with_a_surrogate_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from dsa.plot import heap_map

    path = tmp_path / "heap.svg"
    heap_map(PROBLEM, dsa.solve(PROBLEM), path, title=f"title {LONE}")
    assert "title x\ufffdy" in path.read_text(encoding="utf-8")


def test_a_plan_csv_with_a_surrogate_id_is_refused_before_anything_is_written(tmp_path):
    problem = dsa.Problem([0, 1], [2, 3], [4, 4], ids=["ok", LONE])
    path = tmp_path / "plan.csv"
    path.write_text("old\n")
    with pytest.raises(ValueError, match=r"cannot write .*plan.csv: line 3 holds '\\ud800', which UTF-8 "
                                         r"cannot encode"):
        dsa.write_csv(path, problem)
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["plan.csv"]
    dsa.write_json(tmp_path / "plan.json", problem)  # JSON escapes it, and reads it back as it was
    assert list(dsa.read_json(tmp_path / "plan.json").ids) == ["ok", LONE]
