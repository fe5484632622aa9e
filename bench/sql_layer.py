"""What a SQL layer costs per statement: the store's shared SQL run through `dialect.Tx` against the
same statement through SQLAlchemy Core, on SQLite, same run, alternating.

    pip install sqlalchemy   # not a dependency of ffwatchd: only this measurement needs it
    python bench/sql_layer.py [--n 20000] [--rounds 5] [--record]

Issue 20 let the measurement choose between SQLAlchemy Core and one module of shared SQL with
small dialect shims for stating the job table's rules once. The statement measured is the one a
worker runs most, the fenced lease confirmation (`jobrules.fenced_sql(CONFIRM)`: an UPDATE ...
RETURNING on one row), inside one open transaction so that no commit or fsync hides the layer:

- `Tx`: the shared SQL rendered for SQLite (cached), bound by name on sqlite3;
- SQLAlchemy `text()`: the same SQL text on a SQLAlchemy connection (compiled once, cached);
- SQLAlchemy Core expression: `update(jobs).where(...).values(...).returning(jobs.c.id)`, built
  once and executed with new parameters (its compiled cache warm).

Printed: CPU µs per statement (process time), the median of `--rounds`, and each layer's ratio to `Tx`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _record import EXIT_UNAVAILABLE, add_smoke, record  # noqa: E402

from ffwatchd.store import jobrules  # noqa: E402
from ffwatchd.store.dialect import SQLITE, Tx  # noqa: E402
from ffwatchd.store.sqlite import SqliteJobStore  # noqa: E402

OWNER = "host:1/cpu"


def prepared_table(folder: Path) -> tuple[Path, int, int]:
    """A table with one running job (leased to OWNER); its id and attempt."""
    path = folder / "jobs.db"
    store = SqliteJobStore(path)
    store.enqueue(watch="w", rel_path="a.jpg", size=1, mtime=1.0, content_hash="h", kind="image", spec={})
    job = store.claim(OWNER, 3600)
    store.close()
    return path, job.id, job.attempts


def per_statement(layer, n: int) -> float:
    begin, run, end = layer
    begin()
    try:
        t0 = time.process_time()
        for _ in range(n):
            run()
        return (time.process_time() - t0) / n * 1e6
    finally:
        end()


def layers(path: Path, job_id: int, attempt: int):
    """{name: (begin, run once, end)}: each layer on its own connection, in a transaction of its
    own per round (rolled back), so that no commit is measured; and a function closing them."""
    import sqlalchemy as sa

    store = SqliteJobStore(path, migrate_schema=False)
    db = store._db
    sql = jobrules.fenced_sql(jobrules.CONFIRM, True, "id")

    def tx_layer() -> None:
        Tx(db, SQLITE, time.time()).one(sql, id=job_id, owner=OWNER, attempt=attempt, lease=60.0)

    engine = sa.create_engine(f"sqlite:///{path}")
    conn = engine.connect()
    text = sa.text(SQLITE.render(sql))
    jobs = sa.Table("jobs", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("state", sa.Text),
                    sa.Column("lease_owner", sa.Text), sa.Column("attempts", sa.Integer),
                    sa.Column("lease_until", sa.Float))
    now, lease, owner, att = (sa.bindparam(k) for k in ("now", "lease", "owner", "attempt"))
    core = (sa.update(jobs).where(jobs.c.id == sa.bindparam("job"), jobs.c.state == "running",
                                  jobs.c.lease_owner == owner, jobs.c.attempts == att, jobs.c.lease_until >= now)
            .values(lease_until=now + lease).returning(jobs.c.id))

    def text_layer() -> None:
        assert conn.execute(text, {"id": job_id, "owner": OWNER, "attempt": attempt, "lease": 60.0,
                                   "now": time.time()}).fetchone() is not None

    def core_layer() -> None:
        assert conn.execute(core, {"job": job_id, "owner": OWNER, "attempt": attempt, "lease": 60.0,
                                   "now": time.time()}).fetchone() is not None

    sa_tx: list = []
    sa_round = (lambda: sa_tx.append(conn.begin()), lambda: sa_tx.pop().rollback())

    def close() -> None:
        store.close()
        conn.close()
        engine.dispose()
    return {"Tx (shared SQL on sqlite3)": (lambda: db.execute("BEGIN IMMEDIATE"), tx_layer,
                                           lambda: db.execute("ROLLBACK")),
            "SQLAlchemy text()": (sa_round[0], text_layer, sa_round[1]),
            "SQLAlchemy Core expression": (sa_round[0], core_layer, sa_round[1])}, close


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.n, args.rounds, args.record = 200, 1, False
    try:
        import sqlalchemy
    except ImportError:
        print("bench/sql_layer.py needs SQLAlchemy: pip install sqlalchemy (this measurement only)")
        return EXIT_UNAVAILABLE
    with tempfile.TemporaryDirectory() as d:
        path, job_id, attempt = prepared_table(Path(d))
        runs, close = layers(path, job_id, attempt)
        try:
            figures: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, layer in runs.items():
                    figures[name].append(per_statement(layer, args.n))
        finally:
            close()
    base = statistics.median(figures["Tx (shared SQL on sqlite3)"])
    lines = [f"SQLAlchemy {sqlalchemy.__version__}, {args.n} statements per round, {args.rounds} rounds "
             "(median CPU µs per statement; ratio to Tx):", "",
             "| layer | µs per statement | ratio |", "|---|---|---|"]
    for name, values in figures.items():
        lines.append(f"| {name} | {statistics.median(values):.1f} | {statistics.median(values) / base:.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.record:
        record("sql-layer",
               "## SQL layer: shared SQL on sqlite3 against SQLAlchemy Core (`bench/sql_layer.py`)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
