"""Power cuts of the daemon's host, simulated (tests/powerfs.py): kill -9 and every write not
fsynced forgotten, at a spread of moments of a batch; what survives is finished without a loss."""

from __future__ import annotations

import pytest

from tests.e2e.powercut import FINISH_CUTS, SHORT_CUTS, CutRun
from tests.powerfs import unavailable


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
@pytest.mark.parametrize("half", sorted(SHORT_CUTS))
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
