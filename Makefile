# Set-up and checks; every target creates the venv it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO := demo

.PHONY: demo test test-slow test-bench test-pythons test-slurm test-gpu soak examples lint-docs bench bench-gpu clean

$(BIN)/ddpgen: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# Generate a project and train it for a few steps as 2 CPU processes.
demo: $(BIN)/ddpgen
	rm -rf $(DEMO)
	$(BIN)/ddpgen new $(DEMO)/ddp-demo --mode mp --model-parallel
	cd $(DEMO)/ddp-demo && ../../$(BIN)/python train.py --nprocs 2 --device cpu \
		--epochs 2 --train-size 512 --metrics-file metrics.json
	cat $(DEMO)/ddp-demo/metrics.json

# Two pytest workers keep both cores busy: one test's processes wait on each
# other (rendezvous, barriers, start-up I/O) a quarter of the time. JOBS=1 runs
# them one at a time. loadgroup keeps an xdist_group's tests on one worker.
JOBS ?= 2

test: $(BIN)/ddpgen
	$(BIN)/pytest -q -n $(JOBS) --dist loadgroup --durations=15 -m "not bench and not slow"

# Cases whose code path make test already takes on a sibling (another signal,
# mode or combination): about 2 minutes; CI runs them.
test-slow: $(BIN)/ddpgen
	$(BIN)/pytest -q -n $(JOBS) --dist loadgroup -m slow -rs

# The benchmarks' own code on a small run each (about 3 minutes; CI runs it).
test-bench: $(BIN)/ddpgen
	$(BIN)/pytest -q -m bench -rs

# The generator's tests (no torch) on every supported Python; a version whose
# interpreter is missing here is skipped, saying so.
test-pythons:
	$(PYTHON) tools/test_pythons.py 3.10 3.12 3.13

# The generated Slurm script on a real two-node cluster on this machine: installs
# Slurm (root, apt) if missing, starts munged, slurmctld and two slurmd, and
# stops them afterwards whatever the tests did.
test-slurm: $(BIN)/ddpgen
	tests/slurm/cluster.sh start
	$(BIN)/pytest -q -m slurm -rs --durations=10 tests/test_slurm.py; status=$$?; \
		tests/slurm/cluster.sh stop; exit $$status

# The fault scenarios 20 times in a row beside a busy-looping process (slow).
soak: $(BIN)/ddpgen
	$(BIN)/python tools/soak_faults.py 20

# Only the nccl runs; they skip with a reason without CUDA.
test-gpu: $(BIN)/ddpgen
	$(BIN)/pytest -q -m gpu -rs

# Regenerate generated_examples/ through the real CLI.
examples: $(BIN)/ddpgen
	$(BIN)/python tools/make_examples.py generated_examples

# docs/lint.md's rule sections, from ddpgen/lint/rules/.
lint-docs: $(BIN)/ddpgen
	$(BIN)/python tools/lint_docs.py

# Every CPU benchmark (about 25 minutes on 2 cores); benchmarks/results.md
# holds a recorded run.
bench: $(BIN)/ddpgen
	$(BIN)/python benchmarks/run_all.py

# DDP against one GPU, and all_reduce bandwidth; skips with the reason without CUDA.
bench-gpu: $(BIN)/ddpgen
	$(BIN)/python benchmarks/gpu.py

clean:
	rm -rf $(VENV) .venv-3.* $(DEMO) dist build .pytest_cache
