# Engine image: the pinned base (by image ID), the compiler and tool assertions, the
# engine's tree and its build, then the profile's harness built against it. The console
# always builds with --no-cache, so the assertions and builds run every time and neither
# build inherits the other's artifacts; only the base is shared, and it is pinned by ID.
ARG BASE
FROM ${BASE}
ARG COMPILER_EXPECTED
ARG COMPILER_PROBE
RUN found="$(${COMPILER_PROBE} 2>&1 | head -n 1)"; \
    if [ "$found" != "$COMPILER_EXPECTED" ]; then \
      echo "bench-console: compiler mismatch: expected '$COMPILER_EXPECTED', found '$found'"; exit 86; \
    fi; \
    echo "bench-console: compiler ok: $found"
# every other tool the profile names (cmake, ...): one "name<TAB>expected<TAB>probe" per line
COPY tools.tsv /tmp/bench-console-tools.tsv
RUN while IFS="$(printf '\t')" read -r name expected probe; do \
      [ -n "$name" ] || continue; \
      found="$(sh -c "$probe" 2>&1 | head -n 1)"; \
      if [ "$found" != "$expected" ]; then \
        echo "bench-console: tool mismatch: $name: expected '$expected', found '$found'"; exit 87; \
      fi; \
      echo "bench-console: tool ok: $name: $found"; \
    done < /tmp/bench-console-tools.tsv
COPY src/ /src/
WORKDIR /src
ARG BUILD_CMD
RUN mkdir -p /engine && sh -ec "$BUILD_CMD"
# The harness arrives only now, from the profile: the engine's build never sees it.
COPY harness/ /harness/
WORKDIR /harness
ARG HARNESS_BUILD=true
RUN sh -ec "$HARNESS_BUILD"
WORKDIR /engine
