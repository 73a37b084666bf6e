"""Every bad-input message of dsa.problem: the row and the rule must be named."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dsa
from dsa import Problem


def raises(match):
    return pytest.raises(ValueError, match=match)


# ---------------------------------------------------------------- values
@pytest.mark.parametrize("starts, ends, sizes, match", [
    ([0, 5], [3, 5], [1, 1], r"row 1: end \(5\) must be greater than start \(5\)"),
    ([0, 5], [3, 4], [1, 1], r"row 1: end \(4\) must be greater than start \(5\).*half-open"),
    ([0, 0, 0], [1, 1, 1], [1, 2, -3], r"row 2: size must be >= 0, got -3"),
    ([0, 0], [1, 1], [1, 1.5], r"row 1: size must be an integer, got 1.5"),
    ([0, 0.5], [1, 1], [1, 1], r"row 1: start must be an integer, got 0.5"),
    ([0, 0], [1, math.nan], [1, 1], r"row 1: end must be a finite integer, got nan"),
    ([0, 0], [1, 1], [math.inf, 1], r"row 0: size must be a finite integer, got inf"),
    ([0, -math.inf], [1, 1], [1, 1], r"row 1: start must be a finite integer, got -inf"),
    ([0, 0], [1, 1], [1, "a"], r"row 1: size must be an integer, got 'a'"),
    ([0, 0], [1, "2"], [1, 1], r"row 1: end must be an integer, got '2'"),
    ([0, 0], [1, 1], [True, 1], r"row 0: size must be an integer, got True"),
    ([0, 0], [1, 1], [1, np.True_], r"row 1: size must be an integer, got (np\.)?True"),
    ([0, 0], [1, 1], [1.0, False], r"row 1: size must be an integer, got False"),
    ([0, 0], [1, 1], [1, None], r"row 1: size must be an integer, got None"),
    ([0, 0], [1, 1], [1, 2**63], r"row 1: size 9.2\d*e\+18 is too large \(limit 2\*\*62\)"),
    ([0, 0], [1, 1], [1, 2.0**70], r"row 1: size .* is too large \(limit 2\*\*62\)"),
    ([0, 0, 0], [1, 1, 1], [2**61, 2**61, 2**61], r"the sizes add up to more than 2\*\*62 bytes"),
])
def test_bad_values(starts, ends, sizes, match):
    with raises(match):
        Problem(starts, ends, sizes)


@pytest.mark.parametrize("column", ["starts", "ends", "sizes"])
def test_numpy_float_columns(column):
    cols = {"starts": np.array([0.0, 1.0, 2.0]), "ends": np.array([5.0, 5.0, 5.0]), "sizes": np.array([1.0, 2.0, 3.0])}
    name = column[:-1]
    assert Problem(**cols).sizes.tolist() == [1, 2, 3]  # integral floats are fine
    for bad, word in ((np.nan, "a finite integer, got nan"), (np.inf, "a finite integer, got inf"),
                      (2.5, "an integer, got 2.5")):
        c = {k: v.copy() for k, v in cols.items()}
        c[column][2] = bad
        with raises(rf"row 2: {name} must be {word}"):
            Problem(**c)


def test_numpy_bool_and_string_and_unsigned_columns():
    with raises(r"row 0: size must be an integer, got True"):
        Problem([0, 0], [1, 1], np.array([True, False]))
    with raises(r"row 0: size must be an integer, got '1'"):
        Problem([0, 0], [1, 1], np.array(["1", "2"]))
    with raises(r"row 1: size \d+ is too large \(limit 2\*\*62\)"):
        Problem([0, 0], [1, 1], np.array([1, 2**63], dtype=np.uint64))
    assert Problem([0], [1], np.array([3], dtype=np.uint8)).sizes.dtype == np.int64


def test_ids_appear_in_messages():
    with raises(r"row 1 \(id 'b'\): size must be >= 0, got -1"):
        Problem([0, 0], [1, 1], [1, -1], ids=["a", "b"])
    with raises(r"row 1 \(id 'b'\): end \(0\) must be greater than start \(0\)"):
        Problem([0, 0], [1, 0], [1, 1], ids=["a", "b"])


def test_duplicate_id():
    with raises(r"row 2 \(id 'x'\): duplicate id \(first used at row 0\)"):
        Problem([0, 0, 0], [1, 1, 1], [1, 1, 1], ids=["x", "y", "x"])


def test_unhashable_id():
    with raises(r"row 1: id must be hashable"):
        Problem([0, 0], [1, 1], [1, 1], ids=["x", ["y"]])


@pytest.mark.parametrize("kwargs, match", [
    ({"starts": [0, 0], "ends": [1], "sizes": [1, 1]}, r"end has 1 entries but there are 2 buffers"),
    ({"starts": [0, 0], "ends": [1, 1], "sizes": [1, 1, 1]}, r"size has 3 entries but there are 2 buffers"),
    ({"starts": [0, 0], "ends": [1, 1], "sizes": [1, 1], "ids": ["a"]}, r"ids has 1 entries but there are 2 buffers"),
    ({"starts": [0, 0], "ends": [1, 1], "sizes": [1, 1], "alignments": [1, 2, 4]},
     r"alignment has 3 entries but there are 2 buffers"),
    ({"starts": [0, 0], "ends": [1, 1], "sizes": [1, 1], "fixed_offsets": [0]},
     r"fixed offset has 1 entries but there are 2 buffers"),
    ({"starts": [[0, 0]], "ends": [[1, 1]], "sizes": [[1, 1]]}, r"start must be one-dimensional"),
    ({"starts": 0, "ends": 1, "sizes": 1}, r"start must be one-dimensional"),
])
def test_length_and_shape_mismatch(kwargs, match):
    starts, ends, sizes = kwargs.pop("starts"), kwargs.pop("ends"), kwargs.pop("sizes")
    with raises(match):
        Problem(starts, ends, sizes, **kwargs)


# ---------------------------------------------------------------- alignment and fixed offsets
@pytest.mark.parametrize("alignments, match", [
    ([1, 0], r"row 1: alignment must be >= 1, got 0"),
    ([-4, 1], r"row 0: alignment must be >= 1, got -4"),
    (0, r"row 0: alignment must be >= 1, got 0"),
    ([1, 2.5], r"row 1: alignment must be an integer, got 2.5"),
])
def test_bad_alignment(alignments, match):
    with raises(match):
        Problem([0, 0], [1, 1], [1, 1], alignments=alignments)


def test_fixed_offset_negative():
    with raises(r"row 1: fixed offset must be >= 0, got -5"):
        Problem([0, 0], [1, 1], [1, 1], fixed_offsets=[None, -5])


def test_fixed_offset_not_aligned():
    with raises(r"row 0: fixed offset 6 is not a multiple of its alignment 4"):
        Problem([0, 0], [1, 1], [1, 1], alignments=[4, 1], fixed_offsets=[6, None])


def test_fixed_offset_non_integer():
    with raises(r"row 0: fixed offset must be an integer, got 1.5"):
        Problem([0, 0], [1, 1], [1, 1], fixed_offsets=[1.5, None])
    with raises(r"row 1: fixed offset must be a finite integer"):
        Problem([0, 0], [1, 1], [1, 1], fixed_offsets=np.array([np.nan, np.inf]))


def test_free_markers():
    p = Problem([0, 0, 0], [1, 1, 1], [1, 1, 1], fixed_offsets=np.array([np.nan, 3.0, -1.0]))
    assert p.fixed_offsets.tolist() == [-1, 3, -1]
    assert p.is_fixed.tolist() == [False, True, False]


def test_two_fixed_buffers_overlap():
    # rows 0 and 2 are alive together at [2, 3) and [0, 4) meets [3, 5); row 1 is elsewhere in time
    with raises(r"row 0 and row 2: fixed buffers are alive at the same time and overlap in address"):
        Problem([0, 5, 2], [3, 9, 6], [4, 4, 2], fixed_offsets=[0, 0, 3])


def test_fixed_buffers_touching_are_fine():
    Problem([0, 3, 0], [3, 9, 9], [4, 4, 2], fixed_offsets=[0, 0, 4])        # touching in time / address
    Problem([0, 0], [5, 5], [0, 4], fixed_offsets=[2, 0])                   # zero size overlaps nothing


# ---------------------------------------------------------------- capacity
def test_capacity_below_largest_buffer():
    with raises(r"capacity 9 is smaller than the buffer at row 1 \(size 10\)"):
        Problem([0, 0], [1, 1], [5, 10], capacity=9)
    with raises(r"capacity 9 is smaller than the buffer at row 1 \(id 'big'\) \(size 10\)"):
        Problem([0, 0], [1, 1], [5, 10], ids=["small", "big"], capacity=9)


def test_capacity_negative_or_non_integer():
    with raises(r"capacity must be >= 0, got -1"):
        Problem([], [], [], capacity=-1)
    with raises(r"capacity must be an integer, got 2.5"):
        Problem([0], [1], [1], capacity=2.5)
    with raises(r"capacity must be an integer, got 'big'"):
        Problem([0], [1], [1], capacity="big")


def test_fixed_buffer_beyond_capacity():
    with raises(r"row 1: fixed buffer \[8, 12\) does not fit in capacity 10"):
        Problem([0, 0], [1, 1], [4, 4], fixed_offsets=[None, 8], capacity=10)


def test_capacity_replace_rechecks():
    p = Problem([0, 0], [1, 1], [4, 4])
    with raises(r"capacity 3 is smaller"):
        p.replace(capacity=3)
    assert p.replace(capacity=4).capacity == 4
    with pytest.raises(TypeError, match="unknown fields"):
        p.replace(sise=3)


# ---------------------------------------------------------------- from_intervals
def test_mixed_list_blames_the_right_row():
    with raises(r"row 1: size must be an integer, got 'a'"):
        Problem.from_intervals([(0, 1, 1), (0, 1, "a")])
    with raises(r"row 1: size must be an integer, got 1.5"):
        Problem.from_intervals([(0, 1, 1), (0, 1, 1.5)])
    with raises(r"row 2: start must be a finite integer, got nan"):
        Problem.from_intervals([(0, 1, 1), (0, 1, 2), (math.nan, 1, 1)])
    with raises(r"row 1: end \(1\) must be greater than start \(2\)"):
        dsa.solve([(0, 1, 1), (2, 1, 1)])


@pytest.mark.parametrize("rows, match", [
    ([(0, 1, 1), (0, 1)], r"row 1: expected \(start, end, size\[, id\]\), got 2 items"),
    ([(0, 1, 1, "a", "b")], r"row 0: expected \(start, end, size\[, id\]\), got 5 items"),
    ([(0, 1, 1), 7], r"row 1: expected \(start, end, size\) or a mapping, got 7"),
    ([{"start": 0, "end": 1}], r"row 0: missing key 'size'"),
    ([{"start": 0, "size": 1}], r"row 0: missing key 'end' \(accepted: end, upper\)"),
    ([{"end": 1, "size": 1}], r"row 0: missing key 'start' \(accepted: start, lower, begin\)"),
    ([{"start": 0, "end": 1, "size": 1, "colour": "red"}], r"row 0: unknown keys \['colour'\]"),
    ([{"start": 0, "lower": 0, "end": 1, "size": 1}], r"row 0: give the start once"),
    ([(0, 1, 1, "a"), (0, 1, 1, "a")], r"row 1 \(id 'a'\): duplicate id \(first used at row 0\)"),
    ([{"start": 0, "end": 1, "size": 1, "alignment": 0}], r"row 0: alignment must be >= 1, got 0"),
    ([{"start": 0, "end": 1, "size": 1, "alignment": 4, "offset": 2}],
     r"row 0: fixed offset 2 is not a multiple of its alignment 4"),
    ([{"start": 0, "end": 1, "size": 1, "offset": -3}], r"row 0: fixed offset must be >= 0, got -3"),
])
def test_from_intervals_errors(rows, match):
    with raises(match):
        Problem.from_intervals(rows)


def test_from_intervals_ok():
    p = Problem.from_intervals([{"id": "a", "lower": 0, "upper": 3, "size": 2, "alignment": 2, "offset": 4},
                                {"id": "b", "begin": 1, "end": 2, "size": 1}], capacity=10)
    assert list(p.ids) == ["a", "b"]
    assert p.starts.tolist() == [0, 1] and p.ends.tolist() == [3, 2]
    assert p.alignments.tolist() == [2, 1] and p.fixed_offsets.tolist() == [4, -1]
    assert p.capacity == 10
    q = Problem.from_intervals([(0, 3, 2, "x"), (1, 2, 1, "y")])
    assert list(q.ids) == ["x", "y"]
    assert list(Problem.from_intervals([(0, 3, 2)]).ids) == [0]


def test_as_problem_type_errors():
    with pytest.raises(TypeError):
        dsa.lower_bound("abc")
    with pytest.raises(TypeError):
        dsa.validate(3, [0])


# ---------------------------------------------------------------- from_events
@pytest.mark.parametrize("events, match", [
    ([("alloc", "a", 4), ("alloc", "a", 4)], r"event 1: key 'a' allocated again while still live"),
    ([("alloc", "a", 4), ("free", "b")], r"event 1: free of key 'b' that is not allocated"),
    ([("alloc", "a", 4), ("free", "a"), ("free", "a")], r"event 2: free of key 'a' that is not allocated"),
    ([("alloc", "a")], r"event 0: expected \('alloc', key, size\)"),
    ([("alloc", "a", 4), ("free", "a", 4)], r"event 1: expected \('free', key\)"),
    ([("alloc", "a", 4), ("realloc", "a", 8)], r"event 1: kind must be 'alloc' or 'free', got 'realloc'"),
    ([()], r"event 0: kind must be 'alloc' or 'free', got None"),
    ([("alloc", "a", -4)], r"row 0: size must be >= 0, got -4"),
    ([("alloc", "a", 1.5)], r"row 0: size must be an integer, got 1.5"),
])
def test_from_events_errors(events, match):
    with raises(match):
        Problem.from_events(events)


def test_from_events_ok():
    events = [("alloc", "a", 4), ("alloc", "b", 2), ("free", "a"), ("alloc", "a", 8), ("free", "b")]
    p = Problem.from_events(events, alignment=2)
    # times are event positions; buffers never freed live until one past the last event
    assert p.starts.tolist() == [0, 1, 3]
    assert p.ends.tolist() == [2, 4, 5]
    assert p.sizes.tolist() == [4, 2, 8]
    assert p.alignments.tolist() == [2, 2, 2]
    assert dsa.lower_bound(p) == 10
    assert len(Problem.from_events([])) == 0


# ---------------------------------------------------------------- one range rule for every input path
@pytest.mark.parametrize("make", [
    lambda v: [v],                                  # Python ints
    lambda v: np.array([v], dtype=np.int64),        # numpy int64
    lambda v: np.array([float(v)]),                 # floats
    lambda v: [{"start": 0, "end": 1, "size": v}],  # records
])
def test_the_value_limit_is_the_same_on_every_path(make):
    big = 2**62 + 2**40
    with raises(r"row 0: size .* is too large \(limit 2\*\*62\)"):
        col = make(big)
        if isinstance(col[0], dict):
            Problem.from_intervals(col)
        else:
            Problem([0], [1], col)
    with raises(r"row 0: start .* is too large \(limit 2\*\*62\)"):
        Problem(np.array([-big], dtype=np.int64), [1], [1])


def test_the_limit_holds_in_csv_files_too(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text(f"id,lower,upper,size\n0,0,1,{2**62 + 1}\n")
    with raises(r"big.csv: row 0 \(id '0'\): size \d+ is too large"):
        dsa.read_csv(path)


def test_lifetimes_and_fixed_buffers_stay_within_the_limit():
    with raises(r"row 0: lifetime \[-\d+, \d+\) is longer than 2\*\*62"):
        Problem([-(2**62)], [2**62], [1])
    assert len(Problem([-(2**61)], [2**61], [1])) == 1  # exactly 2**62 long is fine
    with raises(r"row 0: fixed buffer \[\d+, \d+ \+ 8\) ends beyond 2\*\*62"):
        Problem([0], [1], [8], fixed_offsets=[2**62 - 4])


def test_building_a_problem_does_not_import_numpy_ma():
    """A masked array cannot exist before numpy.ma is imported, so the check must not import it
    (about 0.5 MB that an attached model's serving process would keep)."""
    import subprocess
    import sys

    code = ("import sys, numpy, dsa; dsa.validate(dsa.Problem([0, 1], [2, 3], [4, 5]), [0, 4]); "
            "print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_masked_values_are_refused_not_read_through():
    sizes = np.ma.array([4, -5], mask=[False, True])
    with raises(r"row 1: size is masked"):
        Problem([0, 0], [1, 1], sizes)
    unmasked = Problem(np.ma.array([0, 1]), np.ma.array([2, 3]), np.ma.array([4, 5]))
    assert unmasked.sizes.tolist() == [4, 5] and dsa.lower_bound(unmasked) == 9


# ---------------------------------------------------------------- the worst-case peak
WORST = r"the worst-case peak, the sum of size \+ alignment - 1 over the rows that are not fixed .* exceeds 2\*\*62"


def test_a_worst_case_peak_beyond_2_62_is_refused_at_input():
    """Alignment 2**62 passed every per-value check, then plans wrapped around int64 (exact gave
    offset -2**63, bump and greedy_by_size raised OverflowError)."""
    with raises(WORST + r", the largest peak dsa can plan \(the largest term is row 0: size 3, "
                        r"alignment 4611686018427387904\)"):
        Problem([0, 0, 0], [1, 1, 1], [3, 3, 3], alignments=2**62)
    with raises(WORST + r".*row 1 \(id 'b'\): size 3, alignment 4611686018427387904"):
        Problem([0, 0], [1, 1], [1, 3], ids=["a", "b"], alignments=[1, 2**62])
    with raises(WORST):  # every path that builds a Problem goes through the rule
        Problem.from_intervals([(0, 1, 3), (0, 1, 3)], alignment=2**61 + 1)
    with raises(WORST):
        Problem([0, 0], [1, 1], [3, 3]).replace(alignments=2**62)


def test_the_worst_case_peak_counts_padding_and_fixed_buffers():
    # a free row may sit above the highest fixed buffer: 2**61 + 2**61 (fixed top) + 1 > 2**62
    with raises(WORST + r".*row 1: size 1, alignment 1"):
        Problem([0, 0], [1, 1], [2**61, 1], fixed_offsets=[2**61, None])
    # padding: two rows of size 2**61 fit exactly, with up to one byte of alignment padding they do not
    assert len(Problem([0, 0], [1, 1], [2**61, 2**61])) == 2
    with raises(WORST + r".*row 0: size 2305843009213693952, alignment 2"):
        Problem([0, 0], [1, 1], [2**61, 2**61], alignments=[2, 1])
    # the sum is exact (no int64 or float rounding): 2**62 is fine, 2**62 + 1 is not
    assert len(Problem([0, 0, 0], [1, 1, 1], [2**61, 2**61 - 2, 1], alignments=[1, 1, 2])) == 3
    with raises(WORST):
        Problem([0, 0, 0], [1, 1, 1], [2**61, 2**61 - 2, 1], alignments=[1, 1, 3])
    # a fixed row alone counts its end only
    assert len(Problem([0], [1], [2**61], alignments=[2**61], fixed_offsets=[2**61])) == 1


def test_the_worst_case_peak_rule_holds_in_csv_files_too(tmp_path):
    path = tmp_path / "aligned.csv"
    path.write_text(f"id,lower,upper,size,alignment\n0,0,1,3,{2**62}\n1,0,1,3,{2**62}\n")
    with raises(r"aligned.csv: .*worst-case peak.* exceeds 2\*\*62"):
        dsa.read_csv(path)


def test_no_bundled_problem_comes_near_the_worst_case_peak_rule():
    from pathlib import Path

    files = [f for f in Path(dsa.__file__).parent.joinpath("data").rglob("*") if f.suffix in (".csv", ".json")]
    assert files
    for f in files:
        p = dsa.read(f)
        assert int(p.sizes.sum()) + int((p.alignments - 1).sum()) < 2**40, f
