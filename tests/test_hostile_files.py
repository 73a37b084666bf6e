"""Bad files through the command line: one line, exit code 2, no traceback, no partial output."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsa
from dsa.cli import main

GOOD_CSV = "id,lower,upper,size\na,0,3,4\nb,1,4,8\nc,3,6,4\n"


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code, err):
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


# ---------------------------------------------------------------- plan files read with the problem rules
@pytest.mark.parametrize("offset, rule", [
    ("4.7", "offset must be an integer, got 4.7"),
    ("1e400", "offset must be a finite integer"),
    (str(2**70), "offset .* is too large"),
    ("x", "offset must be an integer, got 'x'"),
])
def test_csv_plan_offsets_follow_the_problem_rules(tmp_path, capsys, offset, rule):
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    plan = tmp_path / "plan.csv"
    plan.write_text(f"id,lower,upper,size,offset\na,0,3,4,0\nb,1,4,8,{offset}\nc,3,6,4,0\n")
    code, _, err = _run(capsys, "validate", src, plan)
    _one_line_error(code, err)
    assert re.search(rule, err), err


@pytest.mark.parametrize("offset", [True, "4", 4.5, [4], {"o": 4}, float("inf")])
def test_json_plan_offsets_follow_the_problem_rules(tmp_path, capsys, offset):
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    doc = {"buffers": [{"id": "a", "start": 0, "end": 3, "size": 4}, {"id": "b", "start": 1, "end": 4, "size": 8},
                       {"id": "c", "start": 3, "end": 6, "size": 4}],
           "solution": {"offsets": [0, offset, 0]}}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc))
    code, _, err = _run(capsys, "validate", src, plan)
    _one_line_error(code, err)
    assert "row 1 (id 'b'): offset" in err


def test_ids_one_and_text_one_are_different_ids(tmp_path, capsys):
    buffers = [{"id": 1, "start": 0, "end": 2, "size": 4}, {"id": "1", "start": 0, "end": 2, "size": 4}]
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"buffers": buffers}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"buffers": buffers[::-1], "solution": {"offsets": [4, 0]}}))
    code, out, _ = _run(capsys, "validate", src, plan)
    assert code == 0 and out.startswith("valid")          # a valid plan, rows in another order
    # an invalid plan: both rows at offset 0 while alive together
    plan.write_text(json.dumps({"buffers": buffers, "solution": {"offsets": [0, 0]}}))
    code, out, _ = _run(capsys, "validate", src, plan)
    assert code == 1 and out.startswith("invalid")


def test_a_csv_input_matches_a_json_plan_by_the_text_of_the_ids(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("id,lower,upper,size\n1,0,2,4\n2,0,2,4\n")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"buffers": [{"id": 2, "start": 0, "end": 2, "size": 4},
                                            {"id": 1, "start": 0, "end": 2, "size": 4}],
                                "solution": {"offsets": [0, 4]}}))
    code, out, _ = _run(capsys, "validate", src, plan)
    assert code == 0 and out.startswith("valid")


# ---------------------------------------------------------------- malformed files
@pytest.mark.parametrize("name, text", [
    ("shape1.json", '{"buffers": 3}'),
    ("shape2.json", '{"buffers": [1, 2]}'),
    ("shape3.json", '[1, 2, 3]'),
    ("shape4.json", '{"buffers": [{"start": 0, "end": 1}]}'),
    ("nested.json", "[" * 100_000 + "]" * 100_000),
    ("bad.json", '{"buffers": [}'),
    ("huge.csv", "id,lower,upper,size\n" + "a" * 200_000 + ",0,1,1\n"),
    ("binary.csv", b"\xff\xfe\x00\x01garbage"),
    ("empty.csv", ""),
    ("short.csv", "id,lower,upper,size\na,0,1\n"),
])
def test_malformed_problem_files(tmp_path, capsys, name, text):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    code, _, err = _run(capsys, "solve", path)
    _one_line_error(code, err)


def test_a_solution_of_the_wrong_shape(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text(GOOD_CSV)
    for solution in ([0, 1, 2], {"offsets": 3}, {"offsets": [0, 0]}, "none"):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"buffers": [{"id": "a", "start": 0, "end": 3, "size": 4},
                                                {"id": "b", "start": 1, "end": 4, "size": 8},
                                                {"id": "c", "start": 3, "end": 6, "size": 4}],
                                    "solution": solution}))
        code, _, err = _run(capsys, "validate", src, plan)
        _one_line_error(code, err)


@given(data=st.data())
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mangled_csv_files_give_a_plan_or_one_line(tmp_path_factory, capsys, data):
    """Random edits of a good file: the CLI either plans it or prints one error line, exit 2."""
    text = list(GOOD_CSV)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text) - 1))
        op = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        char = data.draw(st.sampled_from(list(",\n\"-.e0159x \t;\x00é")))
        if op == "delete":
            del text[i]
        elif op == "replace":
            text[i] = char
        else:
            text.insert(i, char)
    path = tmp_path_factory.mktemp("mangled") / "in.csv"
    path.write_text("".join(text))
    code, out, err = _run(capsys, "solve", path)
    if code == 2:
        _one_line_error(code, err)
    else:
        assert code == 0 and "peak=" in out and err == ""


@given(doc=st.recursive(st.none() | st.booleans() | st.integers(-5, 2**64) | st.floats() | st.text(max_size=3),
                        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                            st.sampled_from(["buffers", "solution", "offsets", "id", "start", "end", "size",
                                             "offset", "alignment", "capacity", "x"]), kids, max_size=4),
                        max_leaves=12))
@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_json_documents_give_a_plan_or_one_line(tmp_path_factory, capsys, doc):
    path = tmp_path_factory.mktemp("doc") / "in.json"
    path.write_text(json.dumps(doc))
    code, out, err = _run(capsys, "solve", path)
    if code == 2:
        _one_line_error(code, err)
    else:
        assert code in (0, 1) and "peak=" in out


# ---------------------------------------------------------------- writers leave no partial files
def test_write_json_takes_numpy_ids(tmp_path):
    p = dsa.Problem([0, 1], [2, 3], [4, 4], ids=[np.int64(7), np.int64(9)])
    dsa.write_json(tmp_path / "p.json", p, dsa.solve(p))
    assert [b["id"] for b in json.loads((tmp_path / "p.json").read_text())["buffers"]] == [7, 9]


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    p = dsa.Problem([0, 1], [2, 3], [4, 4], ids=[object(), "b"])
    with pytest.raises(ValueError, match="cannot write .* as JSON"):
        dsa.write_json(tmp_path / "p.json", p)
    assert list(tmp_path.iterdir()) == []

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    good = dsa.Problem([0, 1], [2, 3], [4, 4])
    monkeypatch.setattr(os, "replace", full_disk)
    for write, name in ((dsa.write_csv, "p.csv"), (dsa.write_json, "p.json")):
        with pytest.raises(OSError, match="No space left"):
            write(tmp_path / name, good)
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary one


def test_a_written_plan_replaces_the_old_file_whole(tmp_path):
    p = dsa.Problem([0, 1], [2, 3], [4, 4])
    path = tmp_path / "plan.csv"
    path.write_text("old contents that are longer than the new file will be\n" * 20)
    dsa.write_csv(path, p, dsa.solve(p))
    problem, offsets = dsa.read_plan(path)
    assert problem.sizes.tolist() == [4, 4] and offsets.tolist() == dsa.solve(p).offsets.tolist()
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)  # a normal file's mode, not mkstemp's
