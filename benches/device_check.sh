#!/bin/bash
# The GPU checks of session 15, as one script for a lent CUDA machine (run from the repo root;
# results go to $OUT, or ./device-out when OUT is unset). About 3 minutes on an H200.
#
# Prepare here first (both folders are git-ignored through .git/info/exclude):
#   .whl/      cp312 wheels of what the device image lacks (the peers for cuda_bench.py):
#              python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                --implementation cp --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
#                --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#                xgrammar==0.2.9 llguidance==1.9.1 apache-tvm-ffi pydantic pydantic_core \
#                annotated-types typing-inspection
#   .devdata/  _native.abi3.so: the extension built for the stable ABI, since the device image
#              runs Python 3.12 and `make build` builds for this machine's 3.11 only (session 20):
#                cargo build --release -p corral-py --features pyo3/abi3-py39 &&
#                cp target/release/lib_native.so .devdata/_native.abi3.so
#              (`strip --strip-debug` it to travel light),
#              tokenizers/llama3 and the JSONSchemaBench files batch_fill_bench.py samples
#              (copied from ../shared/data, same layout), for CORRAL_BENCH_DATA.
# Then call the device tool with carry [".whl", ".devdata"] and `bash benches/device_check.sh`.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-device-out}
mkdir -p "$OUT"
cp .devdata/_native.abi3.so python/corral/_native.abi3.so
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > "$OUT/env.txt" 2>&1 || echo "wheel install failed" >> "$OUT/env.txt"
export PYTHONPATH=$PWD/python:/tmp/site
{ nvidia-smi -L; nproc; python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))"; } >> "$OUT/env.txt" 2>&1
echo "== CUDA tests"; date
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short -m cuda tests/test_cuda.py tests/test_logits.py 2>&1 | tee "$OUT/cuda_tests.log" | tail -15
echo "== mask application on the GPU"; date
timeout 240 python3 benches/cuda_bench.py --batches 1,32,128,512 --densities 0.5,0.002,0.98 --pipeline --out "$OUT/cuda_bench.json" > "$OUT/cuda_bench.md" 2> "$OUT/cuda_bench.err"; echo rc=$?
echo "== batch fill scaling"; date
CORRAL_BENCH_DATA=$PWD/.devdata timeout 150 python3 benches/batch_fill_bench.py --threads 1,4,16 --batches 1,16,64,128,256 --iters 100 > "$OUT/batch_fill.md" 2>&1; echo rc=$?
date
