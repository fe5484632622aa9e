"""filing's seams: the error reports are their own module, and what filing needs of the filings
ledger is a protocol the store satisfies (it was `Any`: any object, or a typo, passed)."""

from __future__ import annotations

import ast
from pathlib import Path

from ffwatchd.filing.plan import Ledger
from ffwatchd.store import JobStore

FILING = Path(__file__).resolve().parents[2] / "ffwatchd" / "filing"


def test_the_store_is_a_ledger_and_a_stand_in_without_its_verbs_is_not(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "q.db")
    try:
        assert isinstance(store, Ledger)
    finally:
        store.close()

    class OnlyReads:
        def filings(self, watch: str, folder: str) -> dict:
            return {}

    assert not isinstance(OnlyReads(), Ledger), "a ledger that cannot record checks nothing"


def _ledger_annotations(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg) and node.arg == "ledger" and node.annotation is not None:
            found.append(ast.unparse(node.annotation))
    return found


def test_filing_takes_a_ledger_never_any() -> None:
    seen = {p.name: _ledger_annotations(p.read_text(encoding="utf-8")) for p in FILING.glob("*.py")}
    assert seen["plan.py"], "plan.py names its ledger parameters"
    wrong = {name: notes for name, notes in seen.items() if any("Any" in n for n in notes)}
    assert not wrong, wrong
    assert _ledger_annotations("def f(ledger: Any = None): pass") == ["Any"]


def test_the_reports_are_written_by_their_own_module() -> None:
    """plan.py plans and moves; what a report says is reports.py's (plan.py only calls it)."""
    plan = ast.parse((FILING / "plan.py").read_text(encoding="utf-8"))
    defined = {n.name for n in plan.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    moved = {"retry_advice", "error_report", "duplicate_report", "duplicate_message", "report_path",
             "redo_missing_report", "report_is_for", "ReportNotWritten"}
    assert not defined & moved
    from ffwatchd.filing import reports
    assert all(callable(getattr(reports, name)) for name in moved)
