#!/bin/sh
# One command for a working install:  sh scripts/install.sh [--gpu] [VENV] [-- ARGS FOR ffwatchd.install]
#   CPU:  sh scripts/install.sh /opt/ffwatchd/venv
#   GPU:  sh scripts/install.sh --gpu /opt/ffwatchd/venv -- --config /etc/ffwatchd/config.yaml
# Creates VENV (default .venv) if needed, installs this checkout into it, then leaves one package
# owning onnxruntime (onnxruntime-gpu with --gpu) and one owning cv2, and checks the result.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: sh scripts/install.sh [--gpu] [VENV] [-- ARGS FOR ffwatchd.install, e.g. --config C, --dry-run]"
gpu=""
if [ "${1:-}" = "--gpu" ]; then gpu="--gpu"; shift; fi
case "${1:-}" in
    -h|--help) echo "$usage"; exit 0 ;;
    --) ;;
    -*) echo "install.sh: unknown option ${1}; options for the step after pip install go after --" >&2
        echo "$usage" >&2; exit 2 ;;
esac
[ "${1:-}" = "--" ] && set -- .venv "$@"
venv=${1:-.venv}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install "$here"
exec "$venv/bin/python" -m ffwatchd.install $gpu "$@"
