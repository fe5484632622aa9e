#!/bin/sh
# One command for a working install:  sh scripts/install.sh [--gpu] [VENV] [-- ARGS FOR ffwatchd.install]
#   CPU:  sh scripts/install.sh /opt/ffwatchd/venv
#   GPU:  sh scripts/install.sh --gpu /opt/ffwatchd/venv -- --config /etc/ffwatchd/config.yaml
# Creates VENV (default .venv) if needed, installs this checkout into it, then leaves one package
# owning onnxruntime (onnxruntime-gpu with --gpu) and one owning cv2, and checks the result.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
gpu=""
if [ "${1:-}" = "--gpu" ]; then gpu="--gpu"; shift; fi
venv=${1:-.venv}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install "$here"
exec "$venv/bin/python" -m ffwatchd.install $gpu "$@"
