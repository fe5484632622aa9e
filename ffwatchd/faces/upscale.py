"""Whole-frame upscaling (Real-ESRGAN x2/x4) in overlapping tiles, so any frame fits the worker's
memory: the tile's side comes from the memory limit (workers.ram_limit on CPU, vram_limit on
CUDA) and the family's working memory per output pixel.

Seamless by construction: every tile lies inside the frame (the last one of a row or column is
moved back to end at the frame's edge, never padded), and of each tile only its core is kept,
`tile_margin` pixels away from any edge that is not the frame's own. A model whose reach is
within the margin gives the same picture tiled as run on the whole frame at once.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.convention import from_blob, to_blob
from ffwatchd.faces.models import Model, ModelFamily
from ffwatchd.faces.sessions import CUDA, SessionConfig, create_session
from ffwatchd.faces.types import Frame

log = logging.getLogger(__name__)

TILE_SHARE = 0.25          # of the memory limit, what one tile's inference may take
MAX_TILE = 1024            # input pixels; larger tiles buy little and hold the memory longer
ALIGN = 8                  # tile sides are multiples of this (models that unshuffle need even sides)
PROBE = 16                 # side of the tile run at load to read the model's scale
MAX_SCALE = 8
OUTPUT_COPIES = 2          # the upscaled frame and its encoding, both held in RAM


@dataclass(frozen=True)
class Window:
    """One tile along one axis: the input span [start, end) and the core [keep_from, keep_to) kept."""
    start: int
    end: int
    keep_from: int
    keep_to: int


def windows(length: int, tile: int, margin: int) -> list[Window]:
    """The tiles covering [0, length): each `tile` long (or the whole length when shorter), cores
    meeting exactly, every core at least `margin` from a tile edge that is not the frame's."""
    if length <= tile:
        return [Window(0, length, 0, length)]
    step = tile - 2 * margin
    if step <= 0:
        raise ValueError(f"tile {tile} leaves no core inside a margin of {margin}")
    out: list[Window] = []
    start, keep_from = 0, 0
    while True:
        end = start + tile
        last = end >= length
        keep_to = length if last else end - margin
        out.append(Window(start, end, keep_from, keep_to))
        if last:
            return out
        start, keep_from = min(start + step, length - tile), keep_to


def tile_side(budget: int, scale: int, family: ModelFamily) -> int:
    """The largest tile (input pixels, a multiple of ALIGN, at most MAX_TILE) whose working memory
    fits `budget` bytes; ValueError when not even a tile with a usable core does."""
    per_pixel = max(1, family.bytes_per_output_pixel) * scale * scale
    side = min(MAX_TILE, int(math.isqrt(max(0, budget) // per_pixel)) // ALIGN * ALIGN)
    smallest = 2 * family.tile_margin + ALIGN
    if side < smallest:
        raise ValueError(f"{budget} bytes allow tiles of {side} pixels; family {family.name} needs at "
                         f"least {smallest} (2 x its margin of {family.tile_margin} and a core)")
    return side


def _spatial(dim: object) -> int | None:
    """A static height/width of the model's input, or None when dynamic."""
    return dim if isinstance(dim, int) and dim > 0 else None


class Upscaler:
    """An upscaler model fed by its family's conventions (faces/models.py), tile by tile."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig, tile: int | None = None) -> None:
        self.name = model.name
        self.family = fam = model.conventions
        self.session = create_session(path, cfg, f"model {model.name}")
        self.providers = list(self.session.get_providers())
        inp = self.session.get_inputs()
        if len(inp) != 1 or len(inp[0].shape) != 4 or inp[0].shape[1] != 3:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} upscaler "
                           f"(inputs {[i.shape for i in inp]}; expected one N x 3 x H x W)")
        self.input_name = inp[0].name
        self.output_name = self.session.get_outputs()[0].name
        fixed = [_spatial(d) for d in inp[0].shape[2:]]
        if any(fixed) and fixed[0] != fixed[1]:
            raise JobError("model_missing", f"model {model.name} ({path.name}) takes {fixed[0]} x {fixed[1]} "
                           "tiles; only square or dynamic inputs can be tiled")
        self.fixed = fixed[0]
        self.scale = self._probe_scale(model, path)
        on_cuda = bool(self.providers) and self.providers[0] == CUDA
        self.memory_limit = cfg.vram_limit if on_cuda else cfg.ram_limit
        self.ram_limit = cfg.ram_limit
        if self.fixed:
            if self.fixed <= 2 * fam.tile_margin:
                raise JobError("model_missing", f"model {model.name} ({path.name}) takes {self.fixed} px tiles, "
                               f"too small for family {fam.name}'s margin of {fam.tile_margin} px each side")
            self.tile = self.fixed
        elif tile is not None:
            self.tile = int(tile)
        else:
            try:
                self.tile = tile_side(int(self.memory_limit * TILE_SHARE), self.scale, fam)
            except ValueError as e:
                limit = "workers.vram_limit" if on_cuda else "workers.ram_limit"
                raise JobError("memory", f"model {model.name}: {limit} ({self.memory_limit} bytes) is too "
                               f"small to tile with: {e}") from e
        log.info("upscaler %s: x%d, tiles of %d px (margin %d) for a memory limit of %d bytes",
                 self.name, self.scale, self.tile, fam.tile_margin, self.memory_limit)

    def _probe_scale(self, model: Model, path: Path) -> int:
        side = self.fixed or PROBE
        probe = np.zeros((1, 3, side, side), np.float32)
        shape = tuple(self.session.run([self.output_name], {self.input_name: probe})[0].shape)
        scale = shape[2] // side if len(shape) == 4 else 0
        if shape != (1, 3, side * scale, side * scale) or not 1 < scale <= MAX_SCALE:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {self.family.name} "
                           f"upscaler: a 1 x 3 x {side} x {side} tile gave {shape}")
        return scale

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        return width * self.scale, height * self.scale

    def run_tile(self, tile: Frame) -> Frame:
        """One BGR uint8 tile through the model, as the BGR uint8 tile `scale` times its size."""
        h, w = tile.shape[:2]
        side = self.fixed
        pad_h = (side - h) if side else -h % ALIGN
        pad_w = (side - w) if side else -w % ALIGN
        if pad_h or pad_w:               # a frame smaller than a tile, or of an odd size
            tile = cv2.copyMakeBorder(tile, 0, pad_h, 0, pad_w, cv2.BORDER_REPLICATE)
        pred = self.session.run([self.output_name], {self.input_name: to_blob(tile, self.family)})[0][0]
        return from_blob(pred, self.family)[:h * self.scale, :w * self.scale]

    def upscale(self, frame: Frame, blend: float = 1.0) -> Frame:
        """A new frame `scale` times the size of `frame`; `blend` 1.0 is all model, 0.0 the frame
        resized (bilinear), tile by tile so the resized frame is never held whole."""
        h, w = frame.shape[:2]
        s, margin = self.scale, self.family.tile_margin
        need = OUTPUT_COPIES * h * s * w * s * 3
        if need > self.ram_limit:
            raise JobError("memory", f"{w} x {h} upscaled x{s} by {self.name} is {w * s} x {h * s}: the result "
                           f"and its encoding need about {need >> 20} MiB, more than workers.ram_limit "
                           f"({self.ram_limit >> 20} MiB); use a smaller scale or raise ram_limit")
        out = np.empty((h * s, w * s, 3), np.uint8)
        for r in windows(h, self.tile, margin):
            for c in windows(w, self.tile, margin):
                window = frame[r.start:r.end, c.start:c.end]
                up = self.run_tile(window)
                if blend < 1.0:
                    plain = cv2.resize(window, (up.shape[1], up.shape[0]), interpolation=cv2.INTER_LINEAR)
                    up = cv2.addWeighted(up, float(blend), plain, 1.0 - float(blend), 0.0)
                y0, x0 = (r.keep_from - r.start) * s, (c.keep_from - c.start) * s
                y1, x1 = (r.keep_to - r.start) * s, (c.keep_to - c.start) * s
                out[r.keep_from * s:r.keep_to * s, c.keep_from * s:c.keep_to * s] = up[y0:y1, x0:x1]
        return out
