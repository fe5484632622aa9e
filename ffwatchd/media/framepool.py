"""What a video job's frame pipeline shares out: frame-sized arrays for reuse, and the CPU cores
between the encoder, the decoder and the frame processor."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np


class FramePool:
    """Frame-sized arrays given back after use, so a job in its stride allocates none of its own:
    a fresh multi-megabyte array costs page faults and the kernel zeroing it, the largest single
    item of the pipeline's own CPU time in the profile (docs/benchmarks.md, bench:video)."""

    def __init__(self, shape: tuple[int, ...], keep: int) -> None:
        self.shape, self.keep = shape, keep
        self._free: collections.deque[np.ndarray] = collections.deque()
        self.allocated = 0

    def take(self) -> np.ndarray:
        try:
            return self._free.pop()
        except IndexError:
            self.allocated += 1
            return np.empty(self.shape, np.uint8)

    def give(self, frame: np.ndarray) -> None:
        """Keep `frame` for reuse if it is a whole array of the pool's shape (not a view)."""
        if (frame.base is None and frame.shape == self.shape and frame.dtype == np.uint8
                and frame.flags.c_contiguous and frame.flags.writeable and len(self._free) < self.keep):
            self._free.append(frame)


@dataclass(frozen=True)
class CoreSplit:
    """How a CPU-bound job shares the cores: threads for the encoder, for the decoder, and for
    OpenCV in the frame processor (set for the job, restored after)."""
    encoder: int
    decoder: int
    processor: int

    @classmethod
    def for_cpu(cls, cores: int) -> "CoreSplit":
        """Half the cores to the encoder, the rest to the frame processor, but at least two threads
        each where there are two cores: with one thread each on two cores, a core stood idle
        whenever one side waited for the other (up to 14 % of the time, docs/video.md); the decoder
        one thread."""
        if cores <= 1:
            return cls(encoder=1, decoder=1, processor=1)
        encoder = max(2, cores // 2)
        return cls(encoder=encoder, decoder=1, processor=max(2, cores - encoder))
