"""What `jobs list` and `batches show` print for people: columns aligned by display width (a
Japanese name put them out of line), the priority as the table says it in `--json` too (an
integer there, `normal` in the table), the `queued` column the file's arrival (it showed a
retry's re-queue), a batch's counts as words (raw JSON)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ffwatchd.cli import main
from ffwatchd.cli.common import display_width
from ffwatchd.store import SqliteJobStore
from tests.helpers.configs import write_config

NAMES = ("写真/花火大会.jpg", "a.jpg", "é́.jpg")      # wide, narrow, a combining accent


def test_jobs_list_aligns_wide_names_and_says_priority_and_arrival_as_the_json_does(tmp_path: Path, capsys) -> None:
    cfg = write_config(tmp_path, None)
    (tmp_path / "state").mkdir()
    arrived = time.mktime((2026, 11, 30, 9, 0, 0, 0, 0, -1))
    clock = [arrived]
    s = SqliteJobStore(tmp_path / "state" / "ffwatchd.db", clock=lambda: clock[0])
    ids = [s.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=str(i), kind="image", spec={},
                     priority=10 * (i == 0))[0].id for i, name in enumerate(NAMES)]
    job = s.claim("h:1/cpu", 60)                   # the high one
    s.fail(job.id, "h:1/cpu", error_kind="bad_input", message="x", transient=False)
    clock[0] = arrived + 3 * 3600                  # retried three hours later
    s.retry(job.id)
    s.close()

    assert main(["jobs", "list", "-c", str(cfg)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[2:5]
    for col in ("kind", "priority", "queued"):        # every row's next column starts under its header
        at = display_width(header[:header.index(col)])
        for row in rows:
            cells = row.split()
            value = {"kind": "image", "priority": cells[5], "queued": "2026-11-30"}[col]
            assert display_width(row[:row.index(value)]) == at, (col, lines)
    assert all("2026-11-30 09:00:00" in row for row in rows), lines   # arrival, not the 12:00 re-queue
    by_id = {int(r.split()[0]): r for r in rows}
    assert " high " in by_id[ids[0]] and " normal " in by_id[ids[1]]

    assert main(["jobs", "list", "-c", str(cfg), "--json"]) == 0
    doc = {j["id"]: j for j in json.loads(capsys.readouterr().out)}
    assert (doc[ids[0]]["priority"], doc[ids[0]]["priority_value"]) == ("high", 10)
    assert (doc[ids[1]]["priority"], doc[ids[1]]["priority_value"]) == ("normal", 0)
    assert doc[ids[0]]["created_at"] == arrived and doc[ids[0]]["queued_at"] == arrived + 3 * 3600
    assert main(["jobs", "show", str(ids[0]), "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["priority"] == "high"


def test_display_width_counts_columns() -> None:
    assert [display_width(n) for n in NAMES] == [17, 5, 5]


def test_batches_show_and_list_say_the_counts_in_words(tmp_path: Path, capsys) -> None:
    cfg = write_config(tmp_path, None)
    (tmp_path / "state").mkdir()
    with SqliteJobStore(tmp_path / "state" / "ffwatchd.db") as s:
        b = s.touch_batch("studio", "shoot", 1000.0)
        s.finish_batch(b.id, activity=1000.0, report_path=None, package_path=None, deliveries=[],
                       counts={"queued": 0, "running": 0, "done": 3, "failed": 1, "cancelled": 0, "total": 4})
    assert main(["batches", "show", str(b.id), "-c", str(cfg)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("counts")]
    assert line.split(None, 1)[1] == "3 done, 1 failed (4 in all)"
    assert main(["batches", "list", "-c", str(cfg)]) == 0
    assert "3 done, 1 failed (4 in all)" in capsys.readouterr().out
    assert main(["batches", "show", str(b.id), "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["done"] == 3       # the document keeps its numbers
