"""The KEDA trigger's query (deploy/kubernetes/base/keda.yaml, the one docs/scale-out.md gives) run
against a real PostgreSQL job table: it counts the queued and the running jobs, nothing else, and
that number over each overlay's jobs per pod is the worker replicas KEDA asks for."""

from __future__ import annotations

import math
from pathlib import Path

import psycopg
import pytest
import yaml

from ffwatchd.store.postgres import PostgresJobStore
from tests.helpers.jobs import add

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures: a throwaway cluster, a fresh database

ROOT = Path(__file__).resolve().parents[2]
KEDA = ROOT / "deploy" / "kubernetes" / "base" / "keda.yaml"


def trigger() -> dict:
    scaled = next(d for d in yaml.safe_load_all(KEDA.read_text()) if d["kind"] == "ScaledObject")
    (t,) = scaled["spec"]["triggers"]
    assert t["type"] == "postgresql"
    return t["metadata"]


def test_the_docs_give_the_manifest_s_query() -> None:
    assert trigger()["query"] in (ROOT / "docs" / "scale-out.md").read_text()


def test_the_query_counts_queued_and_running_jobs(pg_url) -> None:
    store = PostgresJobStore(pg_url)
    try:
        ids = [add(store, f"img{i}.jpg", content=f"h{i}")[0].id for i in range(9)]
        claimed = [store.claim("host-a", 60) for _ in range(3)]               # 3 running, 6 queued
        store.finish(claimed[0].id, "host-a", output_path="out/img0.jpg")     # done
        store.fail(claimed[1].id, "host-a", error_kind="bad_input", message="not a picture", transient=False)
        store.cancel(ids[-1])                                                 # an operator's cancel
        counts = store.counts()
    finally:
        store.close()
    assert (counts["queued"], counts["running"], counts["done"], counts["failed"], counts["cancelled"]) == \
        (5, 1, 1, 1, 1)
    with psycopg.connect(pg_url) as conn:
        (n,) = conn.execute(trigger()["query"]).fetchone()
    assert n == 6
    for overlay, per_pod, replicas in (("gpu", 1, 6), ("cpu", 2, 3)):
        text = (ROOT / "deploy" / "kubernetes" / "overlays" / overlay / "kustomization.yaml").read_text()
        assert f'value: "{per_pod}"' in text, overlay
        assert math.ceil(n / per_pod) == replicas      # KEDA's AverageValue target: ceil(metric / target)
