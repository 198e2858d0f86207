# Engine image: the pinned base (by image ID), a compiler assertion, the engine's
# tree and its build. The console always builds with --no-cache, so the
# assertion and the build run every time and neither build inherits the other's
# artifacts; only the base is shared, and it is pinned by ID.
ARG BASE
FROM ${BASE}
ARG COMPILER_EXPECTED
ARG COMPILER_PROBE
RUN found="$(${COMPILER_PROBE} 2>&1 | head -n 1)"; \
    if [ "$found" != "$COMPILER_EXPECTED" ]; then \
      echo "bench-console: compiler mismatch: expected '$COMPILER_EXPECTED', found '$found'"; exit 86; \
    fi; \
    echo "bench-console: compiler ok: $found"
COPY src/ /src/
WORKDIR /src
ARG BUILD_CMD
RUN mkdir -p /engine && sh -ec "$BUILD_CMD"
WORKDIR /engine
