"""deploy/kubernetes/: what `kustomize build` makes of each overlay validates offline against the
Kubernetes schemas (kubernetes-validate --strict), its KEDA objects against KEDA's own CRDs and
its ServiceMonitor against the Prometheus Operator's (check-jsonschema; the CRDs vendored in
tests/deploy/keda/ and tests/deploy/prometheus-operator/, strict as the API server's field
validation: no field a schema does not name); the ConfigMaps are configs ffwatchd itself loads,
and what ties the manifests to them holds (grace periods, GPU per pod, KEDA's jobs per pod, the
share's mount, the systemd unit's hardening). kustomize: a `kustomize` on PATH, else `kubectl
kustomize` of the kubectl .ci/run unpacks from PyPI into .ci/tools (Debian bookworm has no kustomize)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ffwatchd.config.load import load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
HERE = Path(__file__).parent
OVERLAYS = ("cpu", "gpu")
# The custom resources, each against its project's own CRD (vendored with its licence beside it).
CRD_FILES = {"ScaledObject": HERE / "keda" / "keda.sh_scaledobjects.yaml",
             "TriggerAuthentication": HERE / "keda" / "keda.sh_triggerauthentications.yaml",
             "ServiceMonitor": HERE / "prometheus-operator" / "monitoring.coreos.com_servicemonitors.yaml"}
SECRETS_AT = "/run/secrets/ffwatchd"          # the Secret's mount in the pods


KUBECTL = ROOT / ".ci" / "tools" / "kubectl" / "kubectl"      # unpacked by .ci/run


def kustomize_command() -> list[str]:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if KUBECTL.is_file():
        return [str(KUBECTL), "kustomize"]
    pytest.skip(f"no kustomize on PATH and no {KUBECTL} (.ci/run unpacks it from PyPI)")


def build(overlay: str) -> list[dict]:
    out = subprocess.run([*kustomize_command(), str(DEPLOY / "overlays" / overlay)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs: list[dict], kind: str, name: str) -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name)]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def strict(schema: object) -> object:
    """The CRD's structural schema as JSON Schema that refuses unknown fields (as the API server prunes them)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_schema(kind: str, version: str) -> dict:
    crd = yaml.safe_load(CRD_FILES[kind].read_text())
    assert crd["spec"]["names"]["kind"] == kind
    v = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema = strict(v["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request, tmp_path_factory) -> tuple[str, list[dict], Path]:
    docs = build(request.param)
    folder = tmp_path_factory.mktemp(f"k8s-{request.param}")
    return request.param, docs, folder


def test_every_kubernetes_object_validates_strictly(rendered) -> None:
    overlay, docs, folder = rendered
    core = [d for d in docs if d["kind"] not in CRD_FILES]
    paths = []
    for i, d in enumerate(core):
        p = folder / f"{i:02d}-{d['kind']}.yaml"
        p.write_text(yaml.safe_dump(d))
        paths.append(str(p))
    out = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "--no-warn", *paths],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("passed") == len(core), out.stdout
    assert {d["kind"] for d in core} >= {"Deployment", "ConfigMap", "Secret", "Service", "PodDisruptionBudget",
                                         "PersistentVolume", "PersistentVolumeClaim"}


def test_the_custom_resources_validate_against_their_crds(rendered) -> None:
    overlay, docs, folder = rendered
    custom = [d for d in docs if d["kind"] in CRD_FILES]
    assert sorted(d["kind"] for d in custom) == sorted(CRD_FILES)
    for d in custom:
        schema, instance = folder / f"{d['kind']}.schema.json", folder / f"{d['kind']}.json"
        schema.write_text(json.dumps(crd_schema(d["kind"], d["apiVersion"].split("/")[1])))
        instance.write_text(json.dumps(d))
        out = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(instance)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        wrong = {**d, "spec": {**d["spec"], "minReplicas": 0}}        # a misspelt field is caught
        instance.write_text(json.dumps(wrong))
        out = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(instance)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 1, out.stdout


def test_the_configs_load_and_the_manifests_agree_with_them(rendered, monkeypatch) -> None:
    overlay, docs, folder = rendered
    monkeypatch.setenv("FFWATCHD_QUEUE_PASSWORD", "x")
    secret = one(docs, "Secret", "ffwatchd-secrets")
    assert {"queue-password", "queue-dsn", "webhook-secret"} <= set(secret["stringData"])
    (folder / "webhook-secret").write_text(secret["stringData"]["webhook-secret"])   # where the pod mounts it
    loaded = {}
    for role in ("ingest", "worker"):
        cm = one(docs, "ConfigMap", f"ffwatchd-{role}-config")
        text = cm["data"]["config.yaml"]
        assert SECRETS_AT + "/webhook-secret" in text
        (folder / f"{role}.yaml").write_text(text.replace(SECRETS_AT, str(folder)))
        loaded[role] = load_config(folder / f"{role}.yaml")
    ingest, worker = loaded["ingest"], loaded["worker"]
    assert ingest.workers.devices == () and all(w.ingest for w in ingest.watches)
    assert not any(w.ingest for w in worker.watches)
    assert worker.log.format == "json" and worker.log.stream == "stdout"

    deployment = one(docs, "Deployment", "ffwatchd-worker")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["terminationGracePeriodSeconds"] > worker.workers.grace_period + 10      # the drain ends first
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    for c in [*pod["initContainers"], container]:
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
        assert sc["capabilities"]["drop"] == ["ALL"]
    assert {p["httpGet"]["path"] for p in (container["livenessProbe"], container["readinessProbe"])} == \
        {"/livez", "/readyz"}
    assert container["ports"][0]["containerPort"] == worker.metrics.port
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[SECRETS_AT]]["secret"]["secretName"] == secret["metadata"]["name"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["FFWATCHD_QUEUE_PASSWORD"] == {"name": secret["metadata"]["name"], "key": "queue-password"}
    share = volumes[mounts["/srv/share"]]["persistentVolumeClaim"]["claimName"]
    for w in worker.watches:
        assert all(Path(p).is_relative_to("/srv/share") for p in w.folders().values())
    pv = one(docs, "PersistentVolume", share)
    assert pv["spec"]["csi"]["driver"] in ("nfs.csi.k8s.io", "smb.csi.k8s.io")
    assert "ReadWriteMany" in pv["spec"]["accessModes"]
    for path in (worker.state_dir, worker.temp_dir, worker.models_dir):
        assert str(path) in mounts, f"{path}: a volume (the root file system is read-only)"
    assert volumes[mounts[str(worker.models_dir)]]["persistentVolumeClaim"]["readOnly"]

    scaled = one(docs, "ScaledObject", "ffwatchd-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] == 0 < scaled["spec"]["maxReplicaCount"]
    assert scaled["spec"]["cooldownPeriod"] > worker.workers.job_timeout        # longer than any job
    per_pod = int(scaled["spec"]["triggers"][0]["metadata"]["targetQueryValue"])
    gpus = container["resources"].get("limits", {}).get("nvidia.com/gpu")
    if overlay == "gpu":
        assert gpus == 1 and worker.workers.devices == ("0",) and worker.workers.per_gpu == 1
        assert per_pod == worker.workers.per_gpu * gpus
    else:
        assert gpus is None and per_pod == len(worker.workers.devices)
    monitor = one(docs, "ServiceMonitor", "ffwatchd")
    service = one(docs, "Service", "ffwatchd-metrics")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
