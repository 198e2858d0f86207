#!/usr/bin/env bash
# A whole llama.cpp round on a GPU node from a bundle alone: no Docker, no network.
#
#   benchmarks/gpu_round.sh BUNDLE [WORK [console run options...]]
#
# BUNDLE is made on a connected machine (docs/GPU.md):
#   console bundle --profile llama-cpp-cuda --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 llama-cpp-cuda.bundle
#
# It installs the console from the bundle's wheels into WORK/venv, copies the bundle's profile to
# WORK/profile and pins there the host toolchain it finds (`[image.host]`: g++, cmake, nvcc and, if
# present, ccache; the receipt records them), captures the GPU reference with main's own build
# (kept by its key, so the round reuses it), runs the round of main against the bundle's candidate
# under --runtime local with NVML telemetry, and prints build seconds, KL per depth, reps and the
# verdict. Each step's seconds are printed as it ends.
#
# A bundle of the CPU profile (llama-cpp) runs the same way on a CPU node: the tests do that, with
# the package index unreachable. CUDA_HOME (default /usr/local/cuda) is where nvcc is looked for.
set -euo pipefail

bundle=$(cd "${1:?usage: gpu_round.sh BUNDLE [WORK [console run options...]]}" && pwd)
work=$(mkdir -p "${2:-$PWD/gpu-round}" && cd "${2:-$PWD/gpu-round}" && pwd)
shift $(( $# < 2 ? $# : 2 ))
python=${PYTHON:-python3}
cuda=${CUDA_HOME:-/usr/local/cuda}
start=$(date +%s)
step() { printf '[%4ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }

# Nothing from the network, whatever the node's pip configuration says.
export PIP_NO_INDEX=1 PIP_INDEX_URL=http://127.0.0.1:9/unreachable PIP_FIND_LINKS="$bundle/wheels"
export BENCH_CONSOLE_CACHE="${BENCH_CONSOLE_CACHE:-$work/cache}"

step "installing the console from $bundle/wheels"
[ -x "$work/venv/bin/console" ] || "$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index --find-links "$bundle/wheels" bench-console
console="$work/venv/bin/console"
py="$work/venv/bin/python"

step "copying the bundle's profile and pinning this host's toolchain"
profile=$("$py" - "$bundle" "$work/profile" "$cuda" <<'EOF'
import json, shutil, subprocess, sys
from pathlib import Path
import tomlkit

bundle, dest, cuda = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
manifest = json.loads((bundle / "manifest.json").read_text())
src = bundle / manifest["profile"]
if dest.exists():
    shutil.rmtree(dest)
shutil.copytree(bundle / "profile", dest)      # the profile and the files its paths name
path = dest / src.relative_to(bundle / "profile")
doc = tomlkit.parse(path.read_text())
extra = [str(cuda / "bin")] if (cuda / "bin" / "nvcc").exists() else []
env_path = ":".join(extra + ["/usr/local/bin", "/usr/bin", "/bin"])

def first(cmd):
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env={"PATH": env_path})
    lines = (r.stdout or r.stderr).splitlines()
    return lines[0].strip() if r.returncode == 0 and lines else ""

image = doc["image"]
host = tomlkit.table()
host["compiler"] = first(" ".join(image["compiler_probe"]))
host["path"] = extra
tools = tomlkit.array()
for t in image.get("tools", []):
    probe = " ".join(t["probe"]) if t["probe"][:2] != ["sh", "-c"] else t["probe"][2]
    found = first(probe)
    if not found:
        continue
    pin = tomlkit.inline_table()
    pin.update({"name": t["name"], "probe": list(t["probe"]), "expect": found})
    tools.append(pin)
host["tools"] = tools
if image.get("compiler_cache") == "ccache" and not first("ccache --version"):
    image["compiler_cache"] = "none"       # said in the receipt: builds.*.compiler_cache is absent
image["host"] = host
path.write_text(tomlkit.dumps(doc))
print(path)
EOF
)
grep -A12 '^\[image.host\]' "$profile" | sed 's/^/    /' || true

step "capturing the reference on this node's backend (builds main once, kept by its key)"
"$console" reference capture --bundle "$bundle" --profile "$profile" --runtime local --write-profile | tail -n 4

step "the round: main against the bundle's candidate"
set +e
"$console" run --bundle "$bundle" --profile "$profile" --runtime local --headless --out "$work/results" "$@" \
    > "$work/round.log" 2>&1
code=$?
set -e
tail -n 5 "$work/round.log"

step "what it measured (exit $code)"
"$py" - "$work/results" <<'EOF'
import json, sys
from pathlib import Path
r = json.loads((Path(sys.argv[1]) / "receipt.json").read_text())
for b, x in r.get("builds", {}).items():
    cache = x.get("compiler_cache") or {}
    print(f"  build {b}: {x.get('build_s')} s{', reused' if x.get('reused_from') else ''}"
          f"{', ccache %s hits / %s misses' % (cache.get('hits'), cache.get('misses')) if cache else ''}")
for b in ("main", "candidate"):
    depths = ((r.get("parity") or {}).get(b) or {}).get("depths") or []
    print(f"  parity {b}: " + "  ".join(f"{d['depth']}: KL {d.get('kl', float('nan')):.2e} top-1 "
                                        f"{d.get('top1', float('nan')):.3f}" for d in depths))
timed = [x for x in r.get("reps", []) if x["phase"] == "timed"]
gpu = sum(1 for x in timed if (x.get("telemetry") or {}).get("gpus"))
print(f"  timed reps: {len(timed)} ({gpu} with GPU telemetry); sizing: {r.get('sizing')}")
v = r.get("verdict") or {}
print(f"  verdict: {v.get('outcome')} {v.get('tier') or ''} {v.get('headline') or ''}".rstrip())
print(f"  gpu: {[g.get('name') for g in (r.get('preflight') or {}).get('gpus', [])]}")
EOF
step "done"
exit $code
