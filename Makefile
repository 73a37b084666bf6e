# Every target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: demo test bench bench-exact docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PIP) -e ".[plot,torch]"
	$(PY) -m dsa compare --bundled all --plot out/heap_map.png
	$(PY) -m dsa.adapters.torch --plot out/torch_heap_map.png

test: $(PY)
	$(PIP) -e ".[test,torch]"
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(PY)
	$(PIP) -e ".[bench]"
	$(PY) -m pytest benchmarks -q -p no:cacheprovider --benchmark-columns=mean,stddev,rounds \
		--benchmark-sort=name --benchmark-json=out/bench.json

# opt-in: exact on the 11 challenging instances, 60 s each (about 2 minutes)
bench-exact: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/exact_challenging.py --time-limit 60 --json out/exact.json

docs: $(PY)
	$(PIP) -e ".[docs]"
	$(PY) -m mkdocs build --strict -d out/site

clean:
	rm -rf $(VENV) out build *.egg-info .pytest_cache
