"""The command line: output a person can read, exit codes 0 / 1 / 2, one-line errors."""
import subprocess
import sys

import pytest

import dsa
from dsa.cli import main


def _write(tmp_path, text, name="in.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


SIMPLE = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n"


def test_solve_writes_plan_that_validates(tmp_path, capsys):
    src = _write(tmp_path, SIMPLE)
    plan = tmp_path / "plan.csv"
    assert main(["solve", str(src), "--strategy", "greedy_by_size", "-o", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "peak=12" in out and "status=optimal" in out
    problem, offsets = dsa.read_plan(plan)
    dsa.validate(dsa.read_csv(src), offsets)
    assert main(["validate", str(src), str(plan)]) == 0
    assert "valid: peak 12" in capsys.readouterr().out


def test_validate_matches_rows_by_id_and_reports_invalid(tmp_path, capsys):
    src = _write(tmp_path, SIMPLE)
    # same plan, rows listed in another order: still valid
    shuffled = _write(tmp_path, "id,lower,upper,size,offset\nb5,0,21,4,0\nb4,9,21,4,4\nb3,0,9,4,4\n"
                                "b2,3,9,4,8\nb1,0,3,4,8\n", "shuffled.csv")
    assert main(["validate", str(src), str(shuffled)]) == 0
    overlapping = _write(tmp_path, "id,lower,upper,size,offset\nb1,0,3,4,0\nb2,3,9,4,0\nb3,0,9,4,0\n"
                                   "b4,9,21,4,0\nb5,0,21,4,8\n", "bad.csv")
    assert main(["validate", str(src), str(overlapping)]) == 1
    out = capsys.readouterr().out
    assert "invalid:" in out and "'b1'" in out and "'b3'" in out


def test_validate_rejects_plan_of_other_buffers(tmp_path, capsys):
    src = _write(tmp_path, SIMPLE)
    other = _write(tmp_path, "id,lower,upper,size,offset\nb1,0,3,8,0\nb2,3,9,4,0\nb3,0,9,4,8\n"
                             "b4,9,21,4,0\nb5,0,21,4,12\n", "other.csv")
    assert main(["validate", str(src), str(other)]) == 2
    assert "size of id 'b1' differs" in capsys.readouterr().err


def test_compare_prints_table_and_plot(tmp_path, capsys):
    src = _write(tmp_path, SIMPLE)
    png = tmp_path / "heap.png"
    assert main(["compare", str(src), "--strategies", "bump,gbs", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    for word in ("instance", "LOAD", "peak/LOAD", "bump", "greedy_by_size", "yes"):
        assert word in out
    assert png.stat().st_size > 1000


def test_compare_bundled_marks_no_fit(capsys):
    assert main(["compare", "--bundled", "minimalloc", "--strategies", "greedy_by_size"]) == 0
    out = capsys.readouterr().out
    assert out.count("no_fit") == 11  # greedy does not fit any challenging instance in 1048576
    assert "mean over 11 instances" in out


@pytest.mark.parametrize("argv, needle", [
    (["solve", "missing.csv"], "missing.csv"),
    (["compare"], "no instances"),
    (["solve", "{src}", "--strategy", "nope"], "unknown strategy 'nope'"),
    (["solve", "{src}", "--capacity", "3"], "capacity 3 is smaller"),
    (["bogus"], "invalid choice"),
])
def test_errors_are_one_line_exit_2(tmp_path, capsys, argv, needle):
    src = _write(tmp_path, SIMPLE)
    with pytest.raises(SystemExit) if argv == ["bogus"] else _nullcontext() as exc:
        code = main([a.format(src=src) for a in argv])
    if argv == ["bogus"]:
        code = exc.value.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.startswith("error:") and err.strip().count("\n") == 0


def test_solve_exit_1_when_plan_does_not_fit(tmp_path, capsys):
    src = _write(tmp_path, "id,lower,upper,size\na,0,2,4\nb,0,2,4\n")
    assert main(["solve", str(src), "--capacity", "4"]) == 1
    assert "status=infeasible" in capsys.readouterr().out


def test_bad_input_file_names_row(tmp_path, capsys):
    src = _write(tmp_path, "id,lower,upper,size\na,0,2,4\nb,5,2,4\n")
    assert main(["solve", str(src)]) == 2
    err = capsys.readouterr().err
    assert "row 1 (id 'b')" in err and "end (2) must be greater than start (5)" in err


def test_python_dash_m_entry_point(tmp_path):
    src = _write(tmp_path, SIMPLE)
    proc = subprocess.run([sys.executable, "-m", "dsa", "solve", str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "peak=12" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "dsa", "strategies"], capture_output=True, text=True)
    assert proc.stdout.split() == dsa.available_strategies()
    proc = subprocess.run([sys.executable, "-m", "dsa", "strategies", "-v"], capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == dsa.available_strategies()
    assert any(line.startswith("best") and "takes a time limit" in line for line in lines)


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_compare_runs_each_installed_strategy_within_its_size_limit(capsys, monkeypatch):
    from dsa import strategies
    from dsa.strategies import StrategyInfo

    missing = StrategyInfo(name="needs_it", module="dsa.strategies.bump", kind="exact",
                           requires=("no_such_module_xyz",), extra="nothere", summary="test")
    tiny_only = StrategyInfo(name="tiny_only", module="dsa.strategies.bump", kind="baseline", max_n=100,
                             summary="test")
    monkeypatch.setitem(strategies._REGISTRY, "needs_it", missing)
    monkeypatch.setitem(strategies._REGISTRY, "tiny_only", tiny_only)
    monkeypatch.setattr(strategies, "available_strategies",
                        lambda **kw: [n for n in ("bump", "needs_it", "tiny_only")
                                      if not kw.get("installed") or strategies._REGISTRY[n].available])
    monkeypatch.setattr(dsa, "available_strategies", strategies.available_strategies)
    assert main(["compare", "--bundled", "traces"]) == 0
    out = capsys.readouterr().out
    assert "needs_it" not in out
    rows = [line.split() for line in out.splitlines() if line.split()[3:4] == ["tiny_only"]]
    assert rows and all(int(r[1]) <= 100 for r in rows)  # only the 78-buffer transformer traces


def test_solve_verbose_logs_the_search_on_stderr(tmp_path, capsys):
    src = tmp_path / "in.csv"
    dsa.write_csv(src, dsa.data.load("C.1048576"))
    assert main(["solve", str(src), "--strategy", "exact", "--time-limit", "10", "--verbose"]) == 0
    out, err = capsys.readouterr()
    assert "status=optimal" in out and "LOAD=1039360" in out and err.strip()
    assert main(["solve", str(src), "--strategy", "exact", "--time-limit", "10", "--no-verbose"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["solve", str(src), "--strategy", "greedy_by_size", "--verbose"]) == 0  # takes no verbose
