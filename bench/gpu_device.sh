#!/bin/bash
# The device side of bench/GPU_RUN.md: put onnxruntime-gpu (reassembled from .whl/ort.part.*),
# insightface and watchdog in a private folder ahead of the machine's own packages, point the
# loader at the nvidia-* wheels' CUDA 13 and cuDNN 9 libraries, then run bench/gpu.py.
#   bash bench/gpu_device.sh OUTDIR [bench/gpu.py arguments]
set -euo pipefail
out=${1:?OUTDIR}; shift
w=$(mktemp -d /tmp/ffwatchd-gpu-run.XXXX)
wheel=$w/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
cat .whl/ort.part.* > "$wheel"
echo "05d548956197b9d01f59b625de740e0d6be3593f874e241a12dc0362650ecdf7  $wheel" | sha256sum -c -
python3 -m pip install -q --no-deps --no-index --target "$w/site" "$wheel" .whl/small/*.whl
sp=$(python3 -c "import site; print(site.getsitepackages()[0])")
export PYTHONPATH=$w/site
export LD_LIBRARY_PATH=$sp/nvidia/cu13/lib:$sp/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
export FFWATCHD_ASSETS=${FFWATCHD_ASSETS:-$PWD/.whl/assets}
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.__file__, o.get_available_providers())"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# --require-cuda: a CUDA set-up that failed stops here (exit 3) instead of spending the lease on a CPU dry run
python3 bench/gpu.py --out "$out/gpu.json" --require-cuda "$@" 2>&1 | tee "$out/gpu.md"
