"""Which jobs a worker process is working on right now, in memory its supervisor reads after the
process died: the job it runs, and the job whose original its prefetch stage decodes (native code
that a bad file can crash). A shared array, written before the work starts, so no message that
died with the process can hide a job from it.

After a worker died, a job it held and had touched counts an attempt and backs off (a file that
kills its worker fails after max_attempts instead of looping); a job it had only claimed ahead
(the next image, or one a filing claimed with its finish) goes back to the queue uncounted, due at
once: its neighbour's crash is not its fault."""

from __future__ import annotations

from typing import Any

SLOTS = 2          # [the job running, the job being decoded ahead]


class Touched:
    def __init__(self, array: Any) -> None:
        self._a = array

    @classmethod
    def new(cls, ctx: Any) -> "Touched":
        """A fresh one in memory shared with a process of `ctx` (a multiprocessing context)."""
        return cls(ctx.Array("q", SLOTS, lock=False))

    def running(self, job_id: int) -> None:
        self._a[0] = job_id

    def decoding(self, job_id: int) -> None:
        self._a[1] = job_id

    def done_decoding(self) -> None:
        self._a[1] = 0

    def ids(self) -> set[int]:
        return {int(x) for x in self._a if x}
