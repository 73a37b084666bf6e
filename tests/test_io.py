"""CSV / JSON reading and writing, and the bundled instances."""
from __future__ import annotations

import json

import numpy as np
import pytest

import dsa
from dsa import Problem
from naive import naive_load


def write(tmp_path, text, name="p.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- CSV
def test_csv_round_trip(tmp_path):
    p = Problem([0, 2, 5], [4, 9, 6], [10, 20, 0], ids=["a", "b", "c"], alignments=[1, 4, 8],
                fixed_offsets=[None, 16, None])
    path = tmp_path / "p.csv"
    dsa.write_csv(path, p)
    header = path.read_text().splitlines()[0]
    assert header == "id,lower,upper,size,alignment,offset"
    assert dsa.read_csv(path) == p


def test_csv_round_trip_plain_and_numeric_ids(tmp_path):
    p = Problem([0, 2], [4, 9], [10, 20])
    path = tmp_path / "p.csv"
    dsa.write_csv(path, p)
    assert path.read_text().splitlines() == ["id,lower,upper,size", "0,0,4,10", "1,2,9,20"]
    q = dsa.read_csv(path)
    for field in ("starts", "ends", "sizes", "alignments", "fixed_offsets"):
        assert np.array_equal(getattr(q, field), getattr(p, field))
    assert [str(i) for i in q.ids] == ["0", "1"]  # CSV cells are text: ids come back as labels


def test_csv_round_trip_with_capacity(tmp_path):
    p = Problem([0, 2], [4, 9], [10, 20], ids=["x", "y"], capacity=64)
    path = tmp_path / "p.csv"
    dsa.write_csv(path, p)
    assert dsa.read_csv(path) == p.replace(capacity=None)  # capacity is not stored in CSV
    assert dsa.read_csv(path, capacity=64) == p
    assert dsa.read(path, capacity=64) == p


def test_minimalloc_header_and_aliases(tmp_path):
    base = dsa.read_csv(write(tmp_path, "id,lower,upper,size\n0,0,3,8\n1,3,5,4\n"))
    assert base.starts.tolist() == [0, 3] and base.ends.tolist() == [3, 5] and base.sizes.tolist() == [8, 4]
    for header in ("buffer,start,upper,size", "buffer_id,begin,upper,size", "ID, Lower , UPPER,Size"):
        alias = dsa.read_csv(write(tmp_path, f"{header}\n0,0,3,8\n1,3,5,4\n"))
        assert alias == base, header


def test_end_column_is_inclusive(tmp_path):
    p = dsa.read_csv(write(tmp_path, "id,start,end,size\na,0,2,8\nb,3,4,4\n"))
    assert p.ends.tolist() == [3, 5]   # end 2 inclusive -> upper 3
    assert dsa.solve(p).offsets.tolist() == [0, 0]


def test_column_order_and_hint_ignored(tmp_path):
    p = dsa.read_csv(write(tmp_path, "size,upper,hint,lower,id\n8,3,99,0,a\n4,5,7,2,b\n"))
    assert list(p.ids) == ["a", "b"]
    assert p.starts.tolist() == [0, 2] and p.ends.tolist() == [3, 5] and p.sizes.tolist() == [8, 4]


def test_alignment_column(tmp_path):
    p = dsa.read_csv(write(tmp_path, "id,lower,upper,size,alignment\n0,0,3,8,16\n1,0,3,4,\n"))
    assert p.alignments.tolist() == [16, 1]   # a blank cell means 1
    sol = dsa.solve(p)
    assert sol.offsets[0] % 16 == 0


def test_offset_column_fixes_buffers(tmp_path):
    p = dsa.read_csv(write(tmp_path, "id,lower,upper,size,offset\n0,0,3,8,4\n1,0,3,4,\n2,1,2,2,\n"))
    assert p.fixed_offsets.tolist() == [4, -1, -1]
    sol = dsa.solve(p)
    assert sol.offsets[0] == 4 and sol.success
    dsa.validate(p, sol)


def test_blank_lines_skipped(tmp_path):
    p = dsa.read_csv(write(tmp_path, "id,lower,upper,size\n\n0,0,3,8\n\n1,3,5,4\n\n"))
    assert len(p) == 2


def test_read_plan_of_written_plan(tmp_path):
    p = Problem([0, 1, 4], [3, 5, 6], [4, 4, 2], ids=["a", "b", "c"])
    sol = dsa.solve(p)
    path = tmp_path / "plan.csv"
    dsa.write_csv(path, p, sol)
    assert path.read_text().splitlines()[0] == "id,lower,upper,size,offset"
    q, offsets = dsa.read_plan(path)
    assert q == p
    assert offsets.dtype == np.int64 and offsets.tolist() == sol.offsets.tolist()
    dsa.validate(q, offsets)
    # a plan file read as a problem pins every buffer where the plan put it
    pinned = dsa.read_csv(path)
    assert pinned.fixed_offsets.tolist() == sol.offsets.tolist()
    assert dsa.solve(pinned).offsets.tolist() == sol.offsets.tolist()


def test_write_csv_with_offsets_array(tmp_path):
    p = Problem([0, 0], [1, 1], [2, 3])
    path = tmp_path / "plan.csv"
    dsa.write_csv(path, p, np.array([3, 0]))
    assert dsa.read_plan(path)[1].tolist() == [3, 0]
    with pytest.raises(ValueError, match="expected 2 offsets"):
        dsa.write_csv(path, p, [0])


def test_read_plan_errors(tmp_path):
    with pytest.raises(ValueError, match="no 'offset' column"):
        dsa.read_plan(write(tmp_path, "id,lower,upper,size\n0,0,3,8\n"))
    with pytest.raises(ValueError, match="row 1 has no offset"):
        dsa.read_plan(write(tmp_path, "id,lower,upper,size,offset\n0,0,3,8,0\n1,0,3,8,\n"))


@pytest.mark.parametrize("text, match", [
    ("id,lower,upper,size,colour\n0,0,3,8,red\n", r"unknown column 'colour'"),
    ("id,lower,size\n0,0,8\n", r"missing columns \['upper \(or end\)'\]"),
    ("id,upper,size\n0,3,8\n", r"missing columns \['lower'\]"),
    ("id,lower,upper\n0,0,3\n", r"missing columns \['size'\]"),
    ("id,lower,upper,size\n0,0,3,8\n1,0,3\n", r"row 1 has 3 fields, the header has 4"),
    ("id,lower,upper,size\n0,0,3,8,9\n", r"row 0 has 5 fields, the header has 4"),
    ("", r"empty file"),
    ("id,lower,upper,size,gaps\n0,0,3,8,1-2\n", r"'gaps' column is not supported"),
    ("id,lower,upper,size\n0,0,3,\n", r"row 0: empty size"),
    ("id,lower,upper,size\n0,0,3,8\n1,0,3,big\n", r"row 1 \(id '1'\): size must be an integer, got 'big'"),
    ("id,lower,upper,size\n0,0,3,8\n1,4,3,8\n", r"row 1 \(id '1'\): end \(3\) must be greater than start \(4\)"),
    ("id,lower,upper,size\n0,0,3,8\n0,0,3,8\n", r"duplicate id"),
    ("id,lower,upper,size\n0,0,3,2.5\n", r"row 0 \(id '0'\): size must be an integer, got 2.5"),
    ("id,lower,upper,size,lower\n0,0,3,8,0\n", r"given twice"),
    ("id,lower,upper,end,size\n0,0,3,2,8\n", r"given twice"),
    ("id,lower,upper,size,offset\n0,0,3,8,3\n1,0,3,8,5\n", r"fixed buffers .* overlap"),
])
def test_csv_errors(tmp_path, text, match):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=match) as exc:
        dsa.read_csv(path)
    assert str(path) in str(exc.value)  # the message names the file


def test_gaps_column_blank_is_fine(tmp_path):
    p = dsa.read_csv(write(tmp_path, "id,lower,upper,size,gaps\n0,0,3,8,\n"))
    assert len(p) == 1


# ---------------------------------------------------------------- JSON
def test_json_round_trip(tmp_path):
    p = Problem([0, 2, 5], [4, 9, 6], [10, 20, 0], ids=["a", "b", "c"], alignments=[1, 4, 8],
                fixed_offsets=[None, 16, None], capacity=100)
    path = tmp_path / "p.json"
    dsa.write_json(path, p)
    assert dsa.read_json(path) == p
    assert dsa.read(path) == p
    assert dsa.read(path, capacity=200) == p.replace(capacity=200)


def test_json_round_trip_default_ids(tmp_path):
    p = Problem([0, 2], [4, 9], [10, 20])
    path = tmp_path / "p.json"
    dsa.write_json(path, p)
    assert dsa.read_json(path) == p


def test_json_with_solution(tmp_path):
    p = Problem([0, 1, 4], [3, 5, 6], [4, 4, 2], capacity=10)
    sol = dsa.solve(p)
    path = tmp_path / "plan.json"
    dsa.write_json(path, p, sol)
    doc = json.loads(path.read_text())
    assert doc["capacity"] == 10 and len(doc["buffers"]) == 3
    assert doc["solution"]["offsets"] == sol.offsets.tolist()
    assert doc["solution"]["peak"] == sol.peak and doc["solution"]["status"] == str(sol.status)
    assert dsa.read_json(path) == p
    q, offsets = dsa.read_plan(path)
    assert q == p and offsets.tolist() == sol.offsets.tolist()


@pytest.mark.parametrize("text, match", [
    ("{not json", r"not valid JSON"),
    ("[1, 2]", r"expected an object with a 'buffers' list"),
    ('{"buffers": 3}', r"expected an object with a 'buffers' list"),
    ('{"buffers": [{"start": 0, "end": 1}]}', r"row 0: missing key 'size'"),
    ('{"buffers": [{"start": 0, "end": 1, "size": -1}]}', r"row 0: size must be >= 0"),
])
def test_json_errors(tmp_path, text, match):
    path = write(tmp_path, text, "bad.json")
    with pytest.raises(ValueError, match=match) as exc:
        dsa.read_json(path)
    assert str(path) in str(exc.value)


def test_read_plan_json_without_solution(tmp_path):
    path = tmp_path / "p.json"
    dsa.write_json(path, Problem([0], [1], [1]))
    with pytest.raises(ValueError, match="no solution offsets"):
        dsa.read_plan(path)


# ---------------------------------------------------------------- bundled data
def test_every_bundled_file_reads():
    paths = dsa.data.paths("all")
    assert len(paths) >= 11 + 1
    assert len(dsa.data.paths("minimalloc")) == 11
    assert set(paths) == set(dsa.data.paths("minimalloc")) | set(dsa.data.paths("traces"))
    for path in paths:
        p = dsa.read_csv(path)
        assert len(p) > 0, path
        assert (p.ends > p.starts).all() and (p.sizes >= 0).all()


def test_unknown_collection_and_instance():
    with pytest.raises(ValueError, match="unknown collection"):
        dsa.data.paths("nope")
    with pytest.raises(ValueError, match="no bundled instance named 'nope'"):
        dsa.data.load("nope")


# LOAD per instance from MiniMalloc's challenging suite: the "max live" column of the suite's
# README (shared/data/minimalloc/README.md), computed independently of dsa.
@pytest.mark.parametrize("name, load", [("A.1048576", 1048576), ("C.1048576", 1039360),
                                        ("D.1048576", 986112), ("J.1048576", 989184)])
def test_minimalloc_loads(name, load):
    p = dsa.data.load(name)
    assert dsa.lower_bound(p) == load
    assert dsa.bounds.load(p) == load
    assert p.capacity == 1048576


def test_minimalloc_load_matches_naive():
    p = dsa.data.load("A.1048576")
    assert len(p) == 154
    assert naive_load(p.starts, p.ends, p.sizes) == 1048576


def test_bundled_capacity():
    assert dsa.data.load("A.1048576").capacity == 1048576
    trace = dsa.data.paths("traces")[0]
    assert dsa.data.load(trace.stem).capacity is None


def test_bundled_instances_solve_validly():
    for name in ("A.1048576", "D.1048576"):
        p = dsa.data.load(name)
        sol = dsa.solve(p, capacity=None)
        sol2 = dsa.solve(p.replace(capacity=None))
        assert sol2.peak == sol.peak
        dsa.validate(p.replace(capacity=None), sol2)
        assert sol2.peak >= dsa.lower_bound(p)


def test_a_utf8_bom_is_not_part_of_the_first_column(tmp_path):
    # Excel's "CSV UTF-8" starts the file with a byte-order mark (before: unknown column '\ufeffid')
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffid,lower,upper,size,offset\r\nä,0,3,4,0\r\nb,1,4,8,4\r\n".encode("utf-8"))
    p = dsa.read_csv(path)
    assert list(p.ids) == ["ä", "b"] and p.sizes.tolist() == [4, 8]
    problem, offsets = dsa.read_plan(path)
    assert offsets.tolist() == [0, 4]
    doc = tmp_path / "notepad.json"
    doc.write_bytes(b"\xef\xbb\xbf" + b'{"buffers": [{"id": "a", "start": 0, "end": 2, "size": 4}]}')
    assert dsa.read_json(doc).sizes.tolist() == [4]


def test_files_are_read_and_written_as_utf8_whatever_the_locale(tmp_path):
    import os
    import subprocess
    import sys

    code = ("import sys, dsa\n"
            "assert __import__('locale').getpreferredencoding(False) != 'UTF-8'\n"
            "p = dsa.Problem([0, 1], [2, 3], [4, 4], ids=['\\u00e9', '\\u6f22'])\n"
            "dsa.write_csv(sys.argv[1], p)\n"
            "assert list(dsa.read_csv(sys.argv[1]).ids) == ['\\u00e9', '\\u6f22']\n")  # ASCII code
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    path = tmp_path / "p.csv"
    subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True, timeout=120)
    assert path.read_bytes().decode("utf-8").splitlines()[1] == "\u00e9,0,2,4"
