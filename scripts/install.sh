#!/bin/sh
# One command for a working install:
#   sh scripts/install.sh [--gpu] [--extras LIST] [--editable] [VENV] [-- ARGS FOR ffwatchd.install]
#   CPU:  sh scripts/install.sh /opt/ffwatchd/venv
#   GPU:  sh scripts/install.sh --gpu /opt/ffwatchd/venv -- --config /etc/ffwatchd/config.yaml
#   PostgreSQL queue:  sh scripts/install.sh --extras postgres /opt/ffwatchd/venv
#   tests:  sh scripts/install.sh --editable --extras test
# Creates VENV (default .venv) if needed, installs this checkout (with the extras) into it, then
# leaves one package owning onnxruntime (onnxruntime-gpu with --gpu) and one owning cv2, and checks
# the result. The extras go in first: a later `pip install '.[EXTRA]'` pulls opencv-python back in.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: sh scripts/install.sh [--gpu] [--extras LIST] [--editable] [VENV] [-- ARGS FOR ffwatchd.install, e.g. --config C, --dry-run]"
gpu=""
extras=""
editable=""
while [ $# -gt 0 ]; do
    case "$1" in
        --gpu) gpu="--gpu"; shift ;;
        --editable) editable="-e"; shift ;;
        --extras)
            [ $# -ge 2 ] || { echo "install.sh: --extras needs a list, e.g. --extras postgres,test" >&2; exit 2; }
            case "$2" in
                ""|-*|*[!a-z0-9,_-]*) echo "install.sh: --extras ${2}: a comma-separated list of pyproject extras (postgres, test, mutation)" >&2; exit 2 ;;
            esac
            extras="$2"; shift 2 ;;
        *) break ;;
    esac
done
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
target="$here"
[ -n "$extras" ] && target="$here[$extras]"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ -n "$editable" ]; then
    "$venv/bin/python" -m pip install -e "$target"
else
    "$venv/bin/python" -m pip install "$target"
fi
exec "$venv/bin/python" -m ffwatchd.install $gpu "$@"
