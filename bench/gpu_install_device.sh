#!/bin/bash
# The device side of bench/GPU_RUN.md "The one-command GPU install, end to end": run
# `sh scripts/install.sh --gpu ENV -- --config C` on the lent machine, with pip reading the wheels
# carried over in .whl/house.part.* (the machine reaches no index), LD_LIBRARY_PATH unset, then
# `ffwatchd check` and one real image through `ffwatchd process` on CUDA device 0.
#   bash bench/gpu_install_device.sh OUTDIR
set -uo pipefail
out=${1:?OUTDIR}
h=$(mktemp -d /tmp/ffwatchd-house.XXXX)
cat .whl/house.part.* > "$h/house.tar"
echo "$(cat .whl/house.sha256)  $h/house.tar" | sha256sum -c - || exit 3
tar -xf "$h/house.tar" -C "$h" && rm "$h/house.tar"
env_dir=$(python3 -c 'import sys; print(sys.prefix)')
py=$env_dir/bin/python
echo "environment: $env_dir ($($py --version)); its nvidia-* wheels:"
$py -m pip list 2>/dev/null | grep -iE '^(nvidia|onnxruntime|opencv)' | tr -s ' ' | paste -sd ';'
$py -m pip list --format=freeze > "$out/pip-before.txt" 2>/dev/null
unset LD_LIBRARY_PATH
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$h/house" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
w=/tmp/ffw-install; rm -rf "$w"; mkdir -p "$w/share/inbox" "$w/share/output" "$w/share/done" "$w/share/failed" "$w/models"
cp .whl/assets/det_500m.onnx "$w/models/"
cat > "$w/config.yaml" <<EOF
state_dir: state
temp_dir: tmp
models_dir: models
watches:
  - name: gpu
    inbox: share/inbox
    output: share/output
    done: share/done
    failed: share/failed
    defaults: {processors: [face_anonymizer], face_detector: {model: scrfd_500m}}
workers: {devices: [0], providers: [cuda, cpu]}
metrics: {enabled: false}
EOF
t0=$(date +%s)
sh scripts/install.sh --gpu "$env_dir" -- --config "$w/config.yaml" > "$out/install.log" 2>&1
rc=$?
echo "== scripts/install.sh --gpu exit $rc in $(( $(date +%s) - t0 )) s (log: install.log); its last lines:"
grep -vE '^(Requirement already satisfied|  )' "$out/install.log" | tail -30
$py -m pip list --format=freeze > "$out/pip-after.txt" 2>/dev/null
echo "== pip list, before -> after:"; diff "$out/pip-before.txt" "$out/pip-after.txt" | grep '^[<>]'
echo "== ffwatchd check (LD_LIBRARY_PATH unset):"
"$env_dir/bin/ffwatchd" check -c "$w/config.yaml" > "$out/check.txt" 2>&1; echo "check exit $?"; cat "$out/check.txt"
echo "== one image through ffwatchd process on device 0:"
"$env_dir/bin/ffwatchd" process -t .whl/assets/astronaut.png -o "$w/" --processors face_anonymizer \
  --models-dir "$w/models" --detector scrfd_500m --device 0 --providers cuda,cpu --json \
  > "$out/process.json" 2> "$out/process.err"; echo "process exit $?"
grep -A4 '"execution_providers"' "$out/process.json"; grep -E '"faces|"provider"' "$out/process.json"; tail -5 "$out/process.err"
$py -c "import onnxruntime as o, cv2; print('import onnxruntime', o.__version__, o.__file__); print('import cv2', cv2.__version__, cv2.__file__)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
exit $rc
