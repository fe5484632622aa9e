"""Power cuts of the daemon's host, simulated (tests/powerfs.py): kill -9 and every write not
fsynced forgotten, at a spread of moments of a batch; what survives is finished without a loss."""

from __future__ import annotations

import pytest

from tests.e2e.powercut import FINISH_CUTS, SHORT_CUTS, UNSYNCED_CUTS, CutRun
from tests.powerfs import unavailable


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
@pytest.mark.parametrize("half", sorted(SHORT_CUTS))
@pytest.mark.slow(60)
def test_power_cuts_at_every_step_of_a_batch_lose_and_double_nothing(synth_models, tmp_path, half) -> None:
    cuts = SHORT_CUTS[half]
    run = CutRun(tmp_path, synth_models, files=10)
    try:
        for cut in cuts:
            run.cut(cut, timeout=120 if cut in FINISH_CUTS else 90)    # generous: a loaded machine
        o = run.finish()
    finally:
        run.close()
    report = "\n".join(o.labels)
    assert o.cuts_hit == o.cuts_tried == len(cuts), f"cut points not reached:\n{report}"
    assert not o.lost, f"originals lost: {o.lost}"
    assert not o.doubled, f"originals filed twice: {o.doubled}"
    assert not o.problems, "\n".join(o.problems)
    assert o.announced, "the batch's finish was announced"
    assert not o.unknown_to_ledger, f"filed files the ledger does not know: {o.unknown_to_ledger}"


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
@pytest.mark.parametrize("half", sorted(UNSYNCED_CUTS))
@pytest.mark.slow(60)
def test_power_cuts_with_originals_never_fsynced_keep_custody(synth_models, tmp_path, half) -> None:
    """Custody (issue 41): an original is durable before the daemon relies on it. The originals'
    writer never fsynced them (most SMB copies), so each cut takes their bytes unless the daemon
    synced them; whatever a cut at each filing step takes, no done job's original in done/ differs
    from its recorded sha256, no original is in two of inbox/done/failed, no job that is not done
    has a result, and no temp of ours stays after the next start (a refused file's report is
    written again)."""
    cuts = UNSYNCED_CUTS[half]
    run = CutRun(tmp_path, synth_models, files=14, unsynced=True, refused=3)
    try:
        for cut in cuts:
            run.cut(cut, timeout=120 if cut in FINISH_CUTS else 90)
        o = run.finish()
    finally:
        run.close()
    report = "\n".join(o.labels)
    print(f"{half}: {o.cuts_hit} of {o.cuts_tried} cut points reached\n{report}")
    assert o.cuts_hit == o.cuts_tried == len(cuts), f"cut points not reached:\n{report}"
    assert not o.doubled, f"originals in two folders: {o.doubled}"
    assert not o.problems, "\n".join(o.problems)
