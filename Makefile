# Every target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: demo test bench bench-batch bench-executorch bench-cold-start bench-exact bench-generalise bench-time-limits bench-pools bench-mip bench-peers bench-peers-other bench-peers-omnimalloc bench-peers-random bench-peers-large bench-peers-tall bench-peers-balanced bench-peers-random-large bench-peers-huge bench-cpsat bench-memory bench-profile bench-latency docs docs-figures docs-tables clean

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PIP) -e ".[plot,torch]"
	$(PY) -m dsa warmup
	$(PY) -m dsa compare --bundled all --jobs 2 --plot out/heap_map.png
	$(PY) -m dsa solve dsa/data/traces/efficientnet_b0_b1_224.csv -s best --time-limit 1 \
		--pool sram:2911072:1 --pool dram:none:10 --plot out/pools_heap_map.png
	$(PY) -m dsa.adapters.torch --plot out/torch_heap_map.png

test: $(PY)
	$(PIP) -e ".[test,torch]"
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(PY)
	$(PIP) -e ".[bench,mip]"
	mkdir -p out
	$(PY) -m pytest benchmarks -q -p no:cacheprovider --benchmark-columns=mean,stddev,rounds \
		--benchmark-sort=name --benchmark-json=out/bench.json; status=$$?; \
	$(PY) benchmarks/report_strategies.py out/bench.json docs/results && exit $$status

# opt-in: dsa.solve_many on 16 problems of 1,500 buffers: serial, n_jobs=2 and a local Dask cluster with
# two workers, identical peaks (about 2 minutes). Writes out/batch.json.
bench-batch: $(PY)
	$(PIP) -e ".[dask]"
	$(PY) benchmarks/batch.py --json out/batch.json

# opt-in: ExecuTorch arenas planned by dsa (best, exact) against ExecuTorch's greedy and naive and LOAD on
# 8+ exported models, each dsa plan run in ExecuTorch's runtime (about 3 minutes). Writes
# docs/results/executorch.{json,md,png}.
bench-executorch: $(PY)
	$(PIP) -e ".[executorch,plot]"
	$(PY) benchmarks/executorch_arenas.py --out docs/results/executorch

# opt-in: best on the 11 MiniMalloc instances at time_limit=2 from an empty numba cache (compile time per
# call) and after `dsa warmup`, side by side with a worktree of HEAD, cold runs 3 times, the trees taking
# turns (about 5 minutes); --baseline-src DIR compares with another tree (issue 20: a worktree of f44a1d3)
bench-cold-start: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/cold_start.py --baseline-src HEAD --repeat 3 --json out/cold_start.json

# opt-in: memory pools on the DNN traces, SRAM at 1/4 and 1/2 of LOAD: fastest first against best (2 s)
# and exact (10 s), every plan validated per pool (about 3 minutes). Writes docs/results/pools.{json,md}
# and docs/img/pools_heap_map.png.
bench-pools: $(PY)
	$(PIP) -e ".[mip,plot]"
	$(PY) benchmarks/pools.py --time-limit 2 --exact-time-limit 10 --out docs/results/pools \
		--plot docs/img/pools_heap_map.png

# opt-in: exact on the 11 challenging instances, 60 s each (about 2 minutes)
bench-exact: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/exact_challenging.py --time-limit 60 --json out/exact.json

# opt-in: best and exact at 5 s on rectangle-cut instances with a known optimum (LOAD), two families x
# 1,500 / 3,000 / 5,000 buffers x 2 seeds (about 2 minutes). Writes out/generalise.json.
bench-generalise: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/generalise.py --time-limit 5 --json out/generalise.json

# opt-in: how far past its time limit each of best and exact returns, on rectangle cuts of 1,000-20,000
# buffers at limits of 0.1-3 s (about 3 minutes). Writes docs/results/time_limits.{json,md}.
bench-time-limits: $(PY)
	$(PIP) -e .
	$(PY) benchmarks/time_limits.py --out docs/results/time_limits

# opt-in: dsa side by side with omnimalloc (installed from PyPI into its own venv, .venv-peers, never
# into dsa's). exact against supermalloc on MiniMalloc's challenging instances, 20 s per instance each,
# supermalloc on 2 and on 8 threads (about 10 minutes); writes docs/results/peers_exact_{2,8}threads.{json,md}.
# Then best and exact against omnimalloc's tabu search, TelaMalloc, supermalloc and simulated annealing
# on 16 rectangle-cut instances (optimum = LOAD, 250-5,000 buffers), 20 s each, the peers also at 1 and
# 5 s (about 35 minutes); writes docs/results/peers_generated.{json,md,png} and out/peers_generated.json.
PEERS_VENV ?= .venv-peers
# dsa's plotting extra, and omnimalloc in its own venv: the first lines of every bench-peers* recipe
define peers-env
	$(PIP) -e ".[plot]"
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check omnimalloc
endef
bench-peers: $(PY)
	$(peers-env)
	$(PY) benchmarks/peers_exact.py --peer-python $(PEERS_VENV)/bin/python --time-limit 20 --threads 2 \
		--out docs/results/peers_exact_2threads
	$(PY) benchmarks/peers_exact.py --peer-python $(PEERS_VENV)/bin/python --time-limit 20 --threads 8 \
		--out docs/results/peers_exact_8threads
	$(PY) benchmarks/peers_generated.py --peer-python $(PEERS_VENV)/bin/python --time-limit 20 --threads 2 \
		--out docs/results/peers_generated --summary out/peers_generated.json

# opt-in: the same on six other sets (benchmarks/peers_generated.py --set SET), against supermalloc
# and tabu search only, 20 s each; each writes docs/results/peers_SET.{json,md,png} and
# out/peers_SET.json:
# - bench-peers-other: 14 instances of thirteen other generator settings (about 15 minutes);
# - bench-peers-omnimalloc: 12 instances drawn by omnimalloc's own generators of known optimum
#   (guillotine tilings and pinwheel tilings of 300-5,000 buffers, drawn in the peers' environment;
#   about 12 minutes);
# - bench-peers-random: 12 rectangle cuts whose generator settings are drawn at random from their
#   seeds (200-5,000 buffers, every argument of the generator drawn over its range; about 10 minutes);
# - bench-peers-large: 7 rectangle cuts of 10,000-20,000 buffers of the main set's families (about
#   10 minutes);
# - bench-peers-tall: 6 tall rectangle cuts (aspect 0.06-0.1) of 64-256 cells per buffer, 400-2,500
#   buffers, where the mean target is furthest (about 8 minutes);
# - bench-peers-balanced: 5 rectangle cuts with balanced lifetimes (pieces of similar shape) of 64-1,024
#   cells per buffer, 1,200-4,000 buffers, where dsa is furthest from LOAD (about 7 minutes).
bench-peers-other bench-peers-omnimalloc bench-peers-random bench-peers-large bench-peers-tall bench-peers-balanced: bench-peers-%: $(PY)
	$(peers-env)
	$(PY) benchmarks/peers_generated.py --set $* --peer-python $(PEERS_VENV)/bin/python \
		--time-limit 20 --threads 2 --peers supermalloc tabu_search --peer-budgets \
		--out docs/results/peers_$* --summary out/peers_$*.json

# opt-in: 16 rectangle cuts of generator settings drawn at random (seeds 700-715, as bench-peers-random
# draws them) with 5,000-20,000 buffers, against supermalloc, 20 s each (about 17 minutes)
bench-peers-random-large: $(PY)
	$(peers-env)
	$(PY) benchmarks/peers_generated.py --set random --random-seeds 700-715 --random-sizes 5000-20000 \
		--peer-python $(PEERS_VENV)/bin/python --time-limit 20 --threads 2 --peers supermalloc --peer-budgets \
		--out docs/results/peers_random_large --summary out/peers_random_large.json

# opt-in: 5 rectangle cuts of 50,000-100,000 buffers of the main set's families, against supermalloc,
# 20 s each (about 6 minutes)
bench-peers-huge: $(PY)
	$(peers-env)
	$(PY) benchmarks/peers_generated.py --set huge --peer-python $(PEERS_VENV)/bin/python --time-limit 20 \
		--threads 2 --peers supermalloc --peer-budgets --out docs/results/peers_huge --summary out/peers_huge.json

# opt-in: a general constraint solver as a reference: OR-Tools' CP-SAT (in its own venv, .venv-cpsat,
# never in dsa's) beside dsa's best on the main set's 16 rectangle cuts, 20 s each, from nothing and from
# best's plan as its hint (about 16 minutes). Writes docs/results/cpsat_reference.{json,md}.
CPSAT_VENV ?= .venv-cpsat
bench-cpsat: $(PY)
	$(PIP) -e .
	test -x $(CPSAT_VENV)/bin/python || $(PYTHON) -m venv $(CPSAT_VENV)
	$(CPSAT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check ortools
	$(PY) benchmarks/cpsat_reference.py --cpsat-python $(CPSAT_VENV)/bin/python --time-limit 20 --threads 2 \
		--out docs/results/cpsat_reference

# opt-in: exact against the mip strategy (HiGHS) on windows of 20-40 buffers of the challenging
# instances, 20 s per window each (about 1 minute). Writes docs/results/exact_vs_mip.{json,md}.
bench-mip: $(PY)
	$(PIP) -e ".[mip]"
	$(PY) benchmarks/exact_vs_mip.py --per-instance 4 --time-limit 20 --out docs/results/exact_vs_mip

# opt-in: peak RSS of a fresh serving process, eager vs attach planning in its helper process or inline
# (about 7 minutes). Writes docs/results/planner_memory.{json,md}.
bench-memory: $(PY)
	$(PIP) -e ".[torch]"
	$(PY) benchmarks/planner_memory.py

# opt-in: perf profiles (software cpu-clock samples) of eager and attached forwards (glibc, tcmalloc) of the
# allocation-heavy models, grouped by what the code does (about 3 minutes; needs Debian's linux-perf and
# perf_event_paranoid <= 2). Writes docs/results/latency_profile.{json,md}.
bench-profile: $(PY)
	$(PIP) -e ".[torch]"
	$(PY) benchmarks/latency_profile.py

# the interactive heap map of docs/concepts.md (assets/resnet_heap_map.html) is rendered during the
# build by the hook docs/scripts/heap_map_page.py (a ResNet forward traced with torch); not committed
docs: $(PY)
	$(PIP) -e ".[docs]"
	$(PY) docs/scripts/strategy_tables.py --write
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d out/site

clean:
	rm -rf $(VENV) out build *.egg-info .pytest_cache

# the heap maps of the docs (docs/img/*.png, docs/snippets/strategies_E.md), committed: make docs
# does not redraw them. About half a minute (mip runs to its 10 s limit).
docs-figures: $(PY)
	$(PIP) -e ".[plot,mip]"
	$(PY) docs/scripts/make_figures.py

# the strategy tables of README.md, docs/strategies/index.md, docs/api.md and docs/cli.md, generated from the registry
# in dsa/strategies/__init__.py (make docs runs it too; tests/test_strategy_tables.py fails when stale)
docs-tables: $(PY)
	$(PIP) -e .
	$(PY) docs/scripts/strategy_tables.py --write

# opt-in: the latency study of the torch adapter (issue 10): eager vs attach on glibc, jemalloc (defaults
# and the thesis's MALLOC_CONF) and tcmalloc; about 31 minutes on 2 idle cores (LATENCY_PRESET=quick: about
# 2 minutes). Installs Debian's libjemalloc2 and libgoogle-perftools4 when missing (needs root and apt-get);
# without them the study skips those allocators. Writes docs/results/latency.{json,md} and latency_*.png.
LATENCY_PRESET ?= default
bench-latency: $(PY)
	$(PIP) -e ".[torch,plot]"
	@$(PY) benchmarks/latency_study.py --check-allocators >/dev/null 2>&1 || { \
	  echo "bench-latency: installing libjemalloc2 and libgoogle-perftools4 with apt-get"; \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      libjemalloc2 libgoogle-perftools4 >/dev/null; } || \
	  echo "bench-latency: WARNING: could not install them (not root, no apt-get or no network);" \
	    "the study runs without the allocators it cannot find"; }
	@$(PY) benchmarks/latency_study.py --check-allocators || true
	$(PY) benchmarks/latency_study.py --preset $(LATENCY_PRESET)
