#!/usr/bin/env bash
# Installs everything Baton's build and tests need on a fresh Debian 12 machine (run as root).
# Idempotent: packages already present are not fetched again; a second run takes about a second.
# The CUDA toolkit, when present, is used as found under /usr/local/cuda; nothing here installs it.
set -euo pipefail

# clang, libclang-rt-14-dev (libFuzzer and the sanitizer runtimes) and llvm (llvm-symbolizer) build
# and run the fuzz targets (fuzz/, `make fuzz`).
DEBIAN_PACKAGES=(
  cmake g++ make ninja-build pkg-config
  flatbuffers-compiler libflatbuffers-dev
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libcli11-dev libfmt-dev nlohmann-json3-dev libxxhash-dev
  libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev llvm
  python3 python3-venv python3-dev libpython3.11
)
# Test oracles and model generators, and what the Python package builds and tests with (nanobind,
# scikit-build-core, pytest), from PyPI. Versions are pinned so results are reproducible.
# nvidia-pytriton ships Triton Inference Server's binary, libraries and Python-backend stubs, and
# tritonclient talks to it: tests/serving starts a real tritonserver on the loopback
# (docs/serving.md; the stub for Python 3.11 links Debian's libpython3.11).
PYTHON_PACKAGES=(numpy==1.26.4 onnx==1.17.0 onnxruntime==1.20.1
                 nanobind==2.9.2 scikit-build-core==0.11.6 pytest==8.4.2
                 nvidia-pytriton==0.7.0 "tritonclient[http,grpc]==2.73.0")

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install packages (run: sudo $0)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages go into the project's virtual environment, .venv/ (gitignored): Debian's Python
# refuses `pip install` into the system (PEP 668, "externally-managed-environment"). CMake finds
# .venv/bin/python3 by itself; to run the benchmark or model scripts by hand, `. .venv/bin/activate`.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python3" ]; then
  echo "setup: creating the Python virtual environment $VENV" >&2
  rm -rf "$VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
fi
PY="$VENV/bin/python3"
if ! "$PY" - "${PYTHON_PACKAGES[@]}" <<'PYEOF' 2>/dev/null; then
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name.split("[")[0]) != want:
        sys.exit(1)
PYEOF
  echo "setup: installing Python packages into $VENV: ${PYTHON_PACKAGES[*]}" >&2
  "$PY" -m pip install -q --disable-pip-version-check "${PYTHON_PACKAGES[@]}"
fi
# Header-only C++ libraries Debian lacks, from their PyPI wheels into .deps/ (gitignored): only the
# wheel's include/ folder is kept. cudnn-frontend (MIT) is cuDNN's C++ graph API, compiled into the
# CUDA backend's convolution and attention steps (it loads libcudnn at run time).
CUDNN_FRONTEND_VERSION=1.32.0
FE_DIR="$ROOT/.deps/cudnn-frontend-$CUDNN_FRONTEND_VERSION"
if [ ! -f "$FE_DIR/include/cudnn_frontend.h" ]; then
  echo "setup: fetching cudnn-frontend $CUDNN_FRONTEND_VERSION headers (PyPI nvidia-cudnn-frontend)" >&2
  WHEELS=$(mktemp -d)
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$WHEELS" \
    "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
  rm -rf "$FE_DIR.tmp" && mkdir -p "$FE_DIR.tmp"
  "$PY" - "$WHEELS" "$FE_DIR.tmp" <<'PYEOF'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cudnn_frontend-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("include/") or "/licenses/" in n]
    z.extractall(sys.argv[2], names)
PYEOF
  rm -rf "$WHEELS" "$FE_DIR" && mv "$FE_DIR.tmp" "$FE_DIR"
fi
echo "setup: ok" >&2
