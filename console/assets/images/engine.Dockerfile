# Engine image: the pinned base (by image ID), the compiler and tool assertions, the
# engine's tree and its build, then the profile's harness built against it. The console
# always builds with --no-cache, so the assertions and builds run every time and neither
# build inherits the other's artifacts; only the base is shared, and it is pinned by ID.
# A finished image is labelled with its build key (engine/buildkey.py: everything that went
# in) and the round that built it: a later round with the same key reuses the whole image.
# Few instructions on purpose: the classic builder commits a layer per instruction (1 to 2.5 s
# each on a small node, for every build of every round), so the engine's tree and the compiler
# cache arrive in one COPY, the assertions and the engine's build share one RUN, and the labels
# one LABEL (labels given with the build request would cost a layer each). Runs set their
# working directory (/engine) themselves.
ARG BASE
FROM ${BASE}
# TOOLS: every other tool the profile names (cmake, ...), one "name<TAB>expected<TAB>probe" per line
ARG COMPILER_EXPECTED COMPILER_PROBE TOOLS BUILD_CMD HARNESS_BUILD=true BUILD_NAME BUILD_KEY ORIGIN \
    COMPILER_CACHE=none
# /src: the engine's tree. /ccache: ccache's store from earlier builds on this node (empty unless
# image.compiler_cache is "ccache"); what the engine's build reused from it is echoed for the receipt.
COPY engine/ /
# The assertions first: a compiler or tool that moved stops the build before anything compiles.
# Then the build contract both runtimes keep: install under $PREFIX, scratch space in $BUILD_DIR.
RUN set -e; \
    found="$(${COMPILER_PROBE} 2>&1 | head -n 1)"; \
    if [ "$found" != "$COMPILER_EXPECTED" ]; then \
      echo "bench-console: compiler mismatch: expected '$COMPILER_EXPECTED', found '$found'"; exit 86; \
    fi; \
    echo "bench-console: compiler ok: $found"; \
    printf '%s\n' "$TOOLS" | while IFS="$(printf '\t')" read -r name expected probe; do \
      [ -n "$name" ] || continue; \
      found="$(sh -c "$probe" 2>&1 | head -n 1)"; \
      if [ "$found" != "$expected" ]; then \
        echo "bench-console: tool mismatch: $name: expected '$expected', found '$found'"; exit 87; \
      fi; \
      echo "bench-console: tool ok: $name: $found"; \
    done; \
    mkdir -p /engine; cd /src; export PREFIX=/engine BUILD_DIR=/tmp/build; \
    if [ "$COMPILER_CACHE" = ccache ]; then \
      export CCACHE_DIR=/ccache CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=256M; \
      ccache --zero-stats >/dev/null; \
    fi; \
    sh -ec "$BUILD_CMD"; \
    if [ "$COMPILER_CACHE" = ccache ]; then ccache --print-stats | sed 's/^/bench-console: ccache: /'; fi
# The harness arrives only now, from the profile: the engine's build never sees it.
COPY harness/ /harness/
RUN cd /harness && export PREFIX=/engine BUILD_DIR=/tmp/build && sh -ec "$HARNESS_BUILD"
LABEL bench-console=1 bench-console.build="${BUILD_NAME}" bench-console.compiler="${COMPILER_EXPECTED}" \
      bench-console.key="${BUILD_KEY}" bench-console.origin="${ORIGIN}"
