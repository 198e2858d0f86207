# Two commands do all the set-up on a fresh machine:
#   make demo   - a demo round: pinned base image, both demo builds, parity, interleaved reps, receipt
#   make test   - the test suite (needs the Docker daemon; Docker tests fail, never skip, without it)
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CANDIDATE ?= fast
ARGS    ?=

.PHONY: setup demo test test-fast bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $(STAMP)

# debootstrap makes the base image once; tmux runs the end-to-end terminal test.
setup: $(STAMP)
	@for tool in debootstrap tmux; do command -v $$tool >/dev/null || { echo "installing $$tool"; \
	  (apt-get update -qq && apt-get install -y -qq $$tool) >/dev/null || \
	  echo "could not install $$tool: run 'sudo apt-get install $$tool'"; }; done

demo: setup
	$(BIN)/console demo --candidate $(CANDIDATE) $(ARGS)

test: setup
	$(BIN)/console images bootstrap --profile profiles/demo.toml
	$(BIN)/pytest -q

test-fast: setup
	$(BIN)/pytest -q -m "not docker and not slow"

bench: setup
	$(BIN)/python benchmarks/parity_throughput.py
	$(BIN)/python benchmarks/round_overhead.py
	$(BIN)/python benchmarks/tui_latency.py

clean:
	rm -rf $(VENV) results .pytest_cache
