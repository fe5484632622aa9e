"""The operations docs: alert rules pass promtool (and fire when they should), the dashboard
is valid JSON with its panels, and every metric they use is one the code exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ffwatchd.ops.metrics import Metrics
from ffwatchd.store import JobStore

DOCS = Path(__file__).resolve().parent.parent / "docs"
ALERTS = DOCS / "alerts.yml"
DASHBOARD = DOCS / "grafana-dashboard.json"
REQUIRED_PANELS = ("Queue depth", "Throughput", "Failures by kind", "Job duration percentiles",
                   "Disk free", "Execution providers")
REQUIRED_ALERTS = ("FfwatchdDown", "FfwatchdNoSuccess", "FfwatchdFailureRatio", "FfwatchdDiskLow",
                   "FfwatchdWorkerRestarts", "FfwatchdQueueUnreachable")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian: apt-get install prometheus)")


def dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def alert_exprs() -> list[str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def exported_names(tmp_path: Path) -> set[str]:
    """Every sample name the daemon's registry can produce, labelled series or not."""
    with JobStore(tmp_path / "m.db") as store:
        text = Metrics(store=store, folders={"w": {"output": tmp_path}}).render().decode()
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
                "info": ("_info",), "summary": ("_count", "_sum", "_created")}
    names = set()
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        names.update(fam.name + s for s in suffixes.get(fam.type, ()))
    return names


# -- alerts -----------------------------------------------------------------------------------

@needs_promtool
def test_alert_rules_pass_promtool_check():
    r = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_the_required_alerts_exist():
    doc = yaml.safe_load(ALERTS.read_text())
    names = [r.get("alert") for g in doc["groups"] for r in g["rules"]]
    assert set(REQUIRED_ALERTS) <= set(names)
    assert len(names) == len(set(names))


SERIES = 'instance="h:9808",job="ffwatchd"'
ALERT_TESTS = f"""
evaluation_interval: 1m
tests:
  - interval: 1m     # jobs queued, never a success: fires after 30 min + 5 min `for`
    input_series:
      - {{series: 'ffwatchd_jobs{{{SERIES},state="queued"}}', values: '5x60'}}
      - {{series: 'ffwatchd_last_success_timestamp_seconds{{{SERIES}}}', values: '0x60'}}
      - {{series: 'ffwatchd_oldest_queued_job_age_seconds{{{SERIES}}}', values: '0+60x60'}}
      - {{series: 'ffwatchd_claiming_paused{{{SERIES}}}', values: '0x60'}}
    alert_rule_test:
      - {{eval_time: 20m, alertname: FfwatchdNoSuccess, exp_alerts: []}}
      - eval_time: 40m
        alertname: FfwatchdNoSuccess
        exp_alerts: [{{exp_labels: {{severity: critical, instance: "h:9808"}}}}]
  - interval: 1m     # the same, but the disk guard paused claiming: that is FfwatchdDiskLow's job
    input_series:
      - {{series: 'ffwatchd_jobs{{{SERIES},state="queued"}}', values: '5x60'}}
      - {{series: 'ffwatchd_last_success_timestamp_seconds{{{SERIES}}}', values: '0x60'}}
      - {{series: 'ffwatchd_oldest_queued_job_age_seconds{{{SERIES}}}', values: '0+60x60'}}
      - {{series: 'ffwatchd_claiming_paused{{{SERIES}}}', values: '1x60'}}
    alert_rule_test:
      - {{eval_time: 40m, alertname: FfwatchdNoSuccess, exp_alerts: []}}
      - eval_time: 40m
        alertname: FfwatchdDiskLow
        exp_alerts: [{{exp_labels: {{severity: critical, instance: "h:9808"}}}}]
  - interval: 1m     # half the jobs fail for good: fires; a trickle of failures does not
    input_series:
      - series: 'ffwatchd_jobs_finished_total{{{SERIES},watch="studio",kind="image",outcome="done"}}'
        values: '0+1x60'
      - series: 'ffwatchd_jobs_finished_total{{{SERIES},watch="studio",kind="image",outcome="failed"}}'
        values: '0+1x60'
      - series: 'ffwatchd_jobs_finished_total{{{SERIES},watch="quiet",kind="image",outcome="done"}}'
        values: '0x60'
      - series: 'ffwatchd_jobs_finished_total{{{SERIES},watch="quiet",kind="image",outcome="failed"}}'
        values: '0 1 2 2x57'
    alert_rule_test:
      - eval_time: 45m
        alertname: FfwatchdFailureRatio
        exp_alerts: [{{exp_labels: {{severity: warning, instance: "h:9808", watch: studio}}}}]
  - interval: 1m     # free space below 5 GiB and falling fast
    input_series:
      - series: 'ffwatchd_disk_free_bytes{{{SERIES},watch="studio",folder="output"}}'
        values: '4000000000-20000000x90'
      - {{series: 'ffwatchd_disk_free_bytes{{{SERIES},watch="studio",folder="done"}}', values: '4000000000x90'}}
      - {{series: 'ffwatchd_claiming_paused{{{SERIES}}}', values: '0x90'}}
    alert_rule_test:
      - eval_time: 70m
        alertname: FfwatchdDiskLow
        exp_alerts: [{{exp_labels: {{severity: critical, instance: "h:9808", watch: studio, folder: output}}}}]
  - interval: 1m     # a crash a minute fires; planned recycling never does
    input_series:
      - {{series: 'ffwatchd_worker_restarts_total{{{SERIES},device="0",reason="crashed"}}', values: '0+1x30'}}
      - {{series: 'ffwatchd_worker_restarts_total{{{SERIES},device="1",reason="recycled"}}', values: '0+1x30'}}
    alert_rule_test:
      - eval_time: 20m
        alertname: FfwatchdWorkerRestarts
        exp_alerts: [{{exp_labels: {{severity: warning, instance: "h:9808", device: "0"}}}}]
  - interval: 1m     # the endpoint stops answering: fires after the 2 min `for`; up again: quiet
    input_series:
      - {{series: 'up{{{SERIES}}}', values: '1x5 0x10 1x5'}}
    alert_rule_test:
      - {{eval_time: 4m, alertname: FfwatchdDown, exp_alerts: []}}
      - eval_time: 10m
        alertname: FfwatchdDown
        exp_alerts: [{{exp_labels: {{severity: critical, instance: "h:9808", job: ffwatchd}}}}]
      - {{eval_time: 19m, alertname: FfwatchdDown, exp_alerts: []}}
  - interval: 1m     # no ffwatchd target scraped at all: fires too
    input_series:
      - {{series: 'up{{instance="other:9100",job="node"}}', values: '1x10'}}
    alert_rule_test:
      - eval_time: 5m
        alertname: FfwatchdDown
        exp_alerts: [{{exp_labels: {{severity: critical, job: ffwatchd}}}}]
  - interval: 1m     # the queue away for 10 minutes fires after 2; a one-minute blip never does
    input_series:
      - {{series: 'ffwatchd_queue_unreachable_since_timestamp_seconds{{{SERIES}}}', values: '0x5 600x10 0x10'}}
      - series: 'ffwatchd_queue_unreachable_since_timestamp_seconds{{instance="g:9808",job="ffwatchd"}}'
        values: '0x5 300 0x20'
    alert_rule_test:
      - {{eval_time: 6m, alertname: FfwatchdQueueUnreachable, exp_alerts: []}}
      - eval_time: 10m
        alertname: FfwatchdQueueUnreachable
        exp_alerts: [{{exp_labels: {{severity: critical, instance: "h:9808"}}}}]
      - {{eval_time: 20m, alertname: FfwatchdQueueUnreachable, exp_alerts: []}}
"""


@needs_promtool
def test_alerts_fire_when_they_should(tmp_path):
    """promtool's rule unit tests, on a copy of the rules without annotations (so that the
    test pins down the expressions, not the wording)."""
    doc = yaml.safe_load(ALERTS.read_text())
    for g in doc["groups"]:
        for r in g["rules"]:
            r.pop("annotations", None)
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(doc))
    tests = tmp_path / "tests.yml"
    tests.write_text(f"rule_files: [{rules}]\n" + ALERT_TESTS)
    r = subprocess.run([PROMTOOL, "test", "rules", str(tests)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_exposition_passes_promtool_lint(tmp_path):
    with JobStore(tmp_path / "m.db") as store:
        m = Metrics(store=store, folders={"studio": {"output": tmp_path}})
        m.set_worker_provider("0", "cuda")
        m.worker_restarted("0", "crashed")
        m.job_finished("studio", "image", "failed", 1.0, 1.0, "no_face")
        text = m.render()
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True)
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


# -- dashboard ------------------------------------------------------------------------------

def test_dashboard_is_valid_json_with_the_required_panels():
    d = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in d["panels"]}
    for title in REQUIRED_PANELS:
        assert title in panels, title
        assert panels[title]["targets"] and all(t["expr"].strip() for t in panels[title]["targets"])
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    assert all({"x", "y", "w", "h"} <= set(p["gridPos"]) for p in d["panels"])
    assert "histogram_quantile" in panels["Job duration percentiles"]["targets"][0]["expr"]
    assert panels["Disk free"]["fieldConfig"]["defaults"]["unit"] == "bytes"


def test_docs_use_only_metrics_the_code_exports(tmp_path):
    exported = exported_names(tmp_path)
    used = set()
    for expr in dashboard_exprs() + alert_exprs():
        used.update(re.findall(r"\b(?:ffwatchd|process)_[a-z0-9_]+\b", expr))
    operations = (DOCS / "operations.md").read_text()
    used.update(re.findall(r"`(ffwatchd_[a-z0-9_]+)", operations))
    missing = sorted(used - exported)
    assert not missing, f"used in docs but not exported: {missing}"
    assert {"ffwatchd_jobs", "ffwatchd_disk_free_bytes", "ffwatchd_worker_execution_provider"} <= used


def test_operations_doc_explains_every_exported_ffwatchd_metric(tmp_path):
    text = (DOCS / "operations.md").read_text()
    families = set()
    with JobStore(tmp_path / "m.db") as store:
        rendered = Metrics(store=store, folders={"w": {"output": tmp_path}}).render().decode()
    for fam in text_string_to_metric_families(rendered):
        if fam.name.startswith("ffwatchd_") and not fam.name.endswith("_created"):
            families.add(fam.name + ("_total" if fam.type == "counter" else "")
                         + ("_info" if fam.type == "info" else ""))
    missing = sorted(n for n in families if f"`{n}" not in text)
    assert not missing, f"exported but not explained in docs/operations.md: {missing}"
