"""docs/alerts.yml and the dashboard's queries on a real Prometheus (the server from Debian's
prometheus package, as .ci/run unpacks it) scraping a real daemon: every rule loads and
evaluates, every query runs and every series it reads exists from the start, at 0 for every
known label (a restart counter born at its first restart made `increase()` miss a crash loop);
a worker killed once shows in `increase()`; a watch added by reload has its series; no
`_created` series; the daemon stopped makes FfwatchdDown pending."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from ffwatchd.ops.metrics_labels import ERROR_KINDS, JOB_KINDS, OUTCOMES, RESTART_REASONS
from tests.e2e.harness import ROOT, wait_for
from tests.helpers.ports import free_port

DOCS = ROOT / "docs"
PROMETHEUS = shutil.which("prometheus") or next(
    (str(p) for p in [ROOT / ".ci/tools/usr/bin/prometheus"] if p.exists()), None)
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus server is not installed (Debian package "
                                                           "prometheus; .ci/run unpacks it into .ci/tools)")


class Prometheus:
    """One Prometheus server scraping `target` every second, with docs/alerts.yml loaded."""

    def __init__(self, root: Path, target: str) -> None:
        root.mkdir()
        self.port = free_port()
        config = root / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(DOCS / "alerts.yml")],
            "scrape_configs": [{"job_name": "ffwatchd", "static_configs": [{"targets": [target]}]}]}))
        self.log = root / "prometheus.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
                                          f"--web.listen-address=127.0.0.1:{self.port}"],
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self.ready, 60, "prometheus to be ready", interval=0.2)

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> dict:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        return data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def prometheus(tmp_path):
    servers: list[Prometheus] = []

    def start(target: str) -> Prometheus:
        servers.append(Prometheus(tmp_path / f"prom{len(servers)}", target))
        return servers[-1]
    yield start
    for p in servers:
        p.stop()


def dashboard_exprs() -> list[str]:
    d = json.loads((DOCS / "grafana-dashboard.json").read_text())
    return [t["expr"] for p in d["panels"] for t in p.get("targets", [])]


def alert_rules() -> list[dict]:
    return [r for g in yaml.safe_load((DOCS / "alerts.yml").read_text())["groups"] for r in g["rules"]]


def as_grafana_runs_it(expr: str) -> str:
    return expr.replace("$instance", ".+").replace("$__rate_interval", "1m")


def test_a_real_prometheus_runs_the_rules_and_the_dashboard_over_a_real_daemon(make_daemon, prometheus) -> None:
    d = make_daemon(metrics=True)
    d.start()
    prom = prometheus(f"127.0.0.1:{d.metrics_port}")
    wait_for(lambda: prom.value('up{job="ffwatchd"}') == 1, 60, "the daemon scraped")

    # 1. every rule loads and evaluates without an error
    def evaluated() -> list[dict] | None:
        rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
        return rules if rules and all(not r["lastEvaluation"].startswith("0001") for r in rules) else None
    rules = wait_for(evaluated, 60, "every rule evaluated", interval=0.5)
    assert sorted(r["name"] for r in rules) == sorted(r["alert"] for r in alert_rules())
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []

    # 2. every dashboard query runs, and every series a query or rule reads is there from the start
    for expr in dashboard_exprs():
        prom.query(as_grafana_runs_it(expr))
    used = {n for expr in dashboard_exprs() + [r["expr"] for r in alert_rules()]
            for n in re.findall(r"\b(?:ffwatchd|process)_[a-z0-9_]+\b", expr)}
    assert "ffwatchd_worker_restarts_total" in used and "ffwatchd_job_errors_total" in used
    missing = sorted(n for n in used if not prom.query(f'count({{__name__="{n}", job="ffwatchd"}})'))
    assert missing == [], f"read by an alert or a panel, but no series before the first event: {missing}"
    for reason in RESTART_REASONS:
        assert prom.value(f'ffwatchd_worker_restarts_total{{device="cpu", reason="{reason}"}}') == 0, reason
    assert prom.value('count(ffwatchd_job_errors_total{watch="studio"})') == len(ERROR_KINDS) * 2
    assert prom.query('count({__name__=~"ffwatchd_.+_created"})') == []

    # 3. a worker killed once: increase() sees the restart (it saw 0 when the series was born at 1)
    (pid,) = d.worker_pids()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (now := d.worker_pids()) and now != [pid], 120, "a new worker")
    d.wait_ready()
    restarts = 'sum(increase(ffwatchd_worker_restarts_total{reason!~"recycled|reload"}[5m]))'
    wait_for(lambda: prom.value('sum(ffwatchd_worker_restarts_total)') == 1, 60, "the restart scraped", interval=0.5)
    assert prom.value(restarts) > 0.5, prom.query('ffwatchd_worker_restarts_total != 0')

    # 4. a watch added by reload has every series of a watch from the start
    added = {k: d.root / "added" / k for k in ("inbox", "output", "done", "failed")}
    for folder in added.values():
        folder.mkdir(parents=True)
    d.config["watches"].append({**d.config["watches"][0], "name": "added", **{k: str(v) for k, v in added.items()}})
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for(lambda: prom.value('count(ffwatchd_jobs_finished_total{watch="added"})') == len(JOB_KINDS) * len(OUTCOMES),
             60, "the added watch's counters", interval=0.5)
    assert prom.value('count(ffwatchd_job_errors_total{watch="added"})') == len(ERROR_KINDS) * 2
    assert prom.value('count(ffwatchd_retries_total{watch="added"})') == prom.value(
        'count(ffwatchd_retries_total{watch="studio"})')

    # 5. the daemon stops: FfwatchdDown is pending (then firing after its `for`)
    d.stop()
    wait_for(lambda: prom.value('up{job="ffwatchd"}') == 0, 60, "the scrape to fail")

    def down_alert() -> list[dict] | None:
        alerts = [a for a in prom.api("alerts")["alerts"] if a["labels"]["alertname"] == "FfwatchdDown"]
        return alerts or None
    (alert,) = wait_for(down_alert, 60, "FfwatchdDown pending", interval=0.5)
    assert alert["state"] in ("pending", "firing") and alert["labels"]["instance"] == f"127.0.0.1:{d.metrics_port}"
