#!/bin/sh
# Build the OCI image without pulling any base image:  sh scripts/build-image.sh [cpu|cuda] [OUTDIR]
# Writes OUTDIR/ffwatchd-<version>-<variant>.oci.tar (default OUTDIR: dist), loadable with
# `podman load -i` / `docker load -i`, and prints its size and the build time.
#   1. the wheel set: this checkout and its dependencies (`pip wheel`, the host's pip cache), for
#      the image's Python (Debian bookworm's 3.11; the host's python3 must be 3.11 too);
#   2. the root file system from Debian packages (`mmdebstrap --variant=minbase`: python3, tini);
#      ffmpeg is imageio-ffmpeg's static binary from its wheel, not Debian's (hundreds of MB less);
#   3. the wheels into /opt/ffwatchd/venv, then one owner of onnxruntime/ (onnxruntime, or
#      onnxruntime-gpu[cuda,cudnn] for cuda) and of cv2/ (ffwatchd.install's steps); pip removed;
#   4. the user ffwatchd (uid/gid 10001), the volumes' folders, the licences of what it ships;
#   5. one layer written with umoci, its config (user, entrypoint, volumes, labels), then the tar.
# Needs root (mmdebstrap's root mode), mmdebstrap and umoci (Debian packages). Mirror: $FFWATCHD_DEBIAN_MIRROR,
# else the first deb.debian.org-style URI of apt's sources. Models are never baked in (a volume).
set -eu
start=$(date +%s)
here=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-cpu}
out=${2:-$here/dist}
case "$variant" in
    cpu|cuda) ;;
    *) echo "build-image.sh: variant must be cpu or cuda, not $variant" >&2; exit 2 ;;
esac
for tool in mmdebstrap umoci; do
    command -v "$tool" >/dev/null 2>&1 || { echo "build-image.sh: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build-image.sh: run as root (mmdebstrap builds the root file system in root mode)" >&2; exit 1; }
suite=bookworm
pyver=3.11              # bookworm's python3: the wheels are built for it
hostpy=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$hostpy" = "$pyver" ] || { echo "build-image.sh: the host's python3 is $hostpy; the image's is $pyver (wheels must match)" >&2; exit 1; }
mirror=${FFWATCHD_DEBIAN_MIRROR:-$(grep -hoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | head -1 | awk '{print $2}')}
mirror=${mirror:-http://deb.debian.org/debian}
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$here/ffwatchd/__init__.py")
name="ffwatchd-$version-$variant"
work=$(mktemp -d "${TMPDIR:-/tmp}/ffwatchd-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# 1. wheels (the CUDA variant adds onnxruntime-gpu with its CUDA and cuDNN wheels, ~1.4 GB)
extra=""   # the cuda variant: the very pin `python -m ffwatchd.install --gpu` installs (ffwatchd/ops/install.py)
[ "$variant" = cuda ] && extra=$(PYTHONPATH="$here" python3 -c 'from ffwatchd.ops.install import ORT_GPU; print(ORT_GPU)')
# shellcheck disable=SC2086
python3 -m pip wheel --quiet --wheel-dir "$work/wheels" "$here[postgres]" $extra
# ffwatchd.install swaps opencv-python for the headless build of the same version: its wheel too
cvver=$(ls "$work/wheels" | sed -n 's/^opencv_python-\([^-]*\)-.*/\1/p' | head -1)
[ -z "$cvver" ] || python3 -m pip wheel --quiet --no-deps --wheel-dir "$work/wheels" "opencv-python-headless==$cvver"

# 2-4. the root file system; hooks run inside it with /proc and /dev mounted by mmdebstrap
cat > "$work/setup.sh" <<EOF
set -eu
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheels PIP_DISABLE_PIP_VERSION_CHECK=1    # the wheel set only: no index
export PIP_NO_COMPILE=1    # no .pyc: the hook below deletes every __pycache__ anyway (a read-only root)
python3 -m venv /opt/ffwatchd/venv
pip=/opt/ffwatchd/venv/bin/pip
\$pip install --quiet 'ffwatchd[postgres]'
# one owner of onnxruntime/ and cv2/: the steps of \`python -m ffwatchd.install [--gpu]\`, from the wheel set;
# for cuda without its CUDA session probe (no GPU at build time: \`ffwatchd check\` on a GPU node does it)
/opt/ffwatchd/venv/bin/python - >/tmp/install.log 2>&1 <<'PY' || { cat /tmp/install.log; exit 1; }
import sys
from ffwatchd.ops.install import owners, pip, plan, verify
gpu = "$variant" == "cuda"
for step in plan(gpu, owners("onnxruntime"), owners("cv2")):
    if pip(step, False):
        sys.exit(f"pip {' '.join(step)} failed")
problems = verify(False, 0)
sys.exit("; ".join(problems) or None)
PY
/opt/ffwatchd/venv/bin/python - <<'PY'
import importlib.metadata as md, json
def licence(m):
    text = (m.get("License-Expression") or m.get("License") or "").strip()
    if text and len(text) < 80 and "\n" not in text:
        return text
    classified = [c.split("::")[-1].strip() for c in m.get_all("Classifier") or [] if c.startswith("License ::")]
    return " / ".join(classified) or "see its licence file in the venv"
rows = sorted({(d.metadata["Name"], d.version, licence(d.metadata))
               for d in md.distributions(path=["/opt/ffwatchd/venv/lib/python$pyver/site-packages"])})
with open("/usr/share/doc/ffwatchd/python-licences.json", "w") as f:
    json.dump([{"name": n, "version": v, "licence": l} for n, v, l in rows], f, indent=1)
PY
\$pip uninstall --quiet --yes pip
groupadd --system --gid 10001 ffwatchd
useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ffwatchd --no-create-home --shell /usr/sbin/nologin ffwatchd
install -d -o 10001 -g 10001 -m 0750 /var/lib/ffwatchd /var/cache/ffwatchd /var/lib/ffwatchd-models
install -d -m 0755 /etc/ffwatchd /srv/share
ln -s /opt/ffwatchd/venv/bin/ffwatchd /usr/local/bin/ffwatchd
dpkg-query -W -f '\${Package} \${Version}\n' > /usr/share/doc/ffwatchd/debian-packages.txt
EOF
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,tini,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="mkdir -p \"\$1/usr/share/doc/ffwatchd\" && cp $here/README.md \"\$1/usr/share/doc/ffwatchd/\"" \
    --customize-hook="copy-in $work/wheels /tmp" \
    --customize-hook="copy-in $work/setup.sh /tmp" \
    --customize-hook='chroot "$1" sh /tmp/setup.sh' \
    --customize-hook='rm -rf "$1/tmp/wheels" "$1/tmp/setup.sh" "$1/tmp/install.log" "$1/var/cache/apt"/*.bin "$1/var/lib/apt/lists"/* "$1/root/.cache"' \
    --customize-hook='find "$1/opt/ffwatchd/venv" -name __pycache__ -prune -exec rm -rf {} +' \
    "$suite" "$work/rootfs" "$mirror"
licences=$(python3 -c 'import json,sys; print(", ".join(sorted({r["licence"] for r in json.load(open(sys.argv[1]))})))' \
    "$work/rootfs/usr/share/doc/ffwatchd/python-licences.json")

# 5. the image: one layer, its config, a tagged OCI layout, tarred
oci="$work/oci"
umoci init --layout "$oci"
umoci new --image "$oci:$name"
tar --numeric-owner --xattrs -C "$work/rootfs" -cf "$work/layer.tar" .
umoci raw add-layer --image "$oci:$name" "$work/layer.tar"
rm -f "$work/layer.tar"
umoci config --image "$oci:$name" --config.user 10001:10001 --config.workingdir /var/lib/ffwatchd \
    --config.entrypoint /usr/bin/tini --config.entrypoint -- --config.entrypoint /opt/ffwatchd/venv/bin/ffwatchd \
    --config.cmd run --config.cmd -c --config.cmd /etc/ffwatchd/config.yaml \
    --config.env PATH=/opt/ffwatchd/venv/bin:/usr/local/bin:/usr/bin:/bin --config.env PYTHONUNBUFFERED=1 \
    --config.env FFWATCHD_CONFIG=/etc/ffwatchd/config.yaml --config.exposedports 9808/tcp \
    --config.volume /var/lib/ffwatchd --config.volume /var/cache/ffwatchd --config.volume /var/lib/ffwatchd-models \
    --config.label "org.opencontainers.image.title=ffwatchd" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.licenses=MIT" \
    --config.label "io.ffwatchd.variant=$variant" \
    --config.label "io.ffwatchd.python-licences=$licences" \
    --config.label "io.ffwatchd.licences-files=/usr/share/doc/ffwatchd/python-licences.json /usr/share/doc/*/copyright" \
    --tag "$name"
umoci gc --layout "$oci"
tar -C "$oci" -cf "$out/$name.oci.tar" .
size=$(stat -c %s "$out/$name.oci.tar")
echo "$out/$name.oci.tar: $size bytes ($(numfmt --to=iec "$size")), built in $(( $(date +%s) - start )) s"
