"""Whole-frame upscaling in overlapping tiles, tiled as FaceFusion 3.8.1 tiles each model
(facefusion/vision.py create_tile_frames / merge_tile_frames, the model's `size`: tile, pad,
overlap): the frame gets a black border of pad + overlap px (more at the bottom and right, up to
a whole core), tiles of `size` px step by their core (size - 2 x overlap), and of each tile only
the core is kept. The border matters to the output at the frame's edges, the tile size to models
that look far; a model whose reach is within the overlap gives the same picture tiled as run once
on the bordered frame.

The family's tile is used when its working memory fits the memory limit (workers.ram_limit on
CPU, vram_limit on CUDA, a share of it per tile); otherwise the largest tile that fits, with a
warning: the picture then differs from FaceFusion's only along the tile seams of far-looking models.
A tile is fed the float type the file declares (an fp16 export may take float16 or float32).
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
from ffwatchd.faces.models import Model, ModelFamily, Tiling
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
    overlap = _tiling(family).overlap
    smallest = 2 * overlap + ALIGN
    if side < smallest:
        raise ValueError(f"{budget} bytes allow tiles of {side} pixels; family {family.name} needs at "
                         f"least {smallest} (2 x its overlap of {overlap} and a core)")
    return side


def fits(budget: int, side: int, scale: int, family: ModelFamily) -> bool:
    """Whether one tile of `side` input pixels fits `budget` bytes of working memory."""
    return max(1, family.bytes_per_output_pixel) * (side * scale) ** 2 <= budget


def border(length: int, tile: int, tiling: Tiling) -> tuple[int, int]:
    """The black border before and after an axis of `length`, as create_tile_frames pads it: pad +
    overlap before; after, as much and up to a core more, so the cores tile the bordered axis."""
    core = tile - 2 * tiling.overlap
    before = tiling.pad + tiling.overlap
    return before, before + core - (length + 2 * tiling.pad) % core


def _tiling(family: ModelFamily) -> Tiling:
    if family.tiling is None:
        raise ValueError(f"family {family.name} states no tiling")
    return family.tiling


_FEED = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def _spatial(dim: object) -> int | None:
    """A static height/width of the model's input, or None when dynamic."""
    return dim if isinstance(dim, int) and dim > 0 else None


class Upscaler:
    """An upscaler model fed by its family's conventions (faces/models.py), tile by tile."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig, tile: int | None = None) -> None:
        self.name = model.name
        self.family = fam = model.conventions
        if fam.tiling is None:
            raise JobError("model_missing", f"model {model.name}: family {fam.name} states no tiling")
        self.session = create_session(path, cfg, f"model {model.name}")
        self.providers = list(self.session.get_providers())
        inp = self.session.get_inputs()
        if len(inp) != 1 or len(inp[0].shape) != 4 or inp[0].shape[1] != 3:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} upscaler "
                           f"(inputs {[i.shape for i in inp]}; expected one N x 3 x H x W)")
        if inp[0].type not in _FEED:
            raise JobError("model_missing", f"model {model.name} ({path.name}) takes {inp[0].type}; an upscaler "
                           "takes tensor(float) or tensor(float16)")
        self.feed = _FEED[inp[0].type]
        self.input_name = inp[0].name
        self.output_name = self.session.get_outputs()[0].name
        fixed = [_spatial(d) for d in inp[0].shape[2:]]
        if any(fixed) and fixed[0] != fixed[1]:
            raise JobError("model_missing", f"model {model.name} ({path.name}) takes {fixed[0]} x {fixed[1]} "
                           "tiles; only square or dynamic inputs can be tiled")
        self.fixed = fixed[0]
        self.scale = self._probe_scale(model, path)
        if model.scale is not None and self.scale != model.scale:
            raise JobError("model_missing", f"model {model.name} ({path.name}) upscales x{self.scale}; "
                           f"{model.name} is x{model.scale}")
        on_cuda = bool(self.providers) and self.providers[0] == CUDA
        self.memory_limit = cfg.vram_limit if on_cuda else cfg.ram_limit
        self.ram_limit = cfg.ram_limit
        overlap = fam.tiling.overlap
        budget = int(self.memory_limit * TILE_SHARE)
        if self.fixed:
            if self.fixed <= 2 * overlap:
                raise JobError("model_missing", f"model {model.name} ({path.name}) takes {self.fixed} px tiles, "
                               f"too small for family {fam.name}'s overlap of {overlap} px each side")
            self.tile = self.fixed
        elif tile is not None:
            self.tile = int(tile)
        elif fits(budget, fam.tiling.size, self.scale, fam):
            self.tile = fam.tiling.size
        else:
            try:
                self.tile = tile_side(budget, self.scale, fam)
            except ValueError as e:
                limit = "workers.vram_limit" if on_cuda else "workers.ram_limit"
                raise JobError("memory", f"model {model.name}: {limit} ({self.memory_limit} bytes) is too "
                               f"small to tile with: {e}") from e
            log.warning("upscaler %s: FaceFusion's %d px tiles do not fit a memory limit of %d bytes; "
                        "%d px tiles instead (the seams of far-looking models differ from FaceFusion's)",
                        self.name, fam.tiling.size, self.memory_limit, self.tile)
        log.info("upscaler %s: x%d, %s input, tiles of %d px (overlap %d, border %d) for a memory limit of "
                 "%d bytes", self.name, self.scale, inp[0].type, self.tile, overlap, fam.tiling.pad,
                 self.memory_limit)

    def _probe_scale(self, model: Model, path: Path) -> int:
        side = self.fixed or PROBE
        probe = np.zeros((1, 3, side, side), self.feed)
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
        if pad_h or pad_w:               # a tile override of an odd size
            tile = cv2.copyMakeBorder(tile, 0, pad_h, 0, pad_w, cv2.BORDER_REPLICATE)
        blob = to_blob(tile, self.family).astype(self.feed)
        pred = self.session.run([self.output_name], {self.input_name: blob})[0][0]
        return from_blob(pred.astype(np.float32), self.family)[:h * self.scale, :w * self.scale]

    def upscale(self, frame: Frame, blend: float = 1.0) -> Frame:
        """A new frame `scale` times the size of `frame`; `blend` 1.0 is all model, 0.0 the frame
        resized (bilinear), tile by tile so the resized frame is never held whole."""
        h, w = frame.shape[:2]
        s = self.scale
        tiling = _tiling(self.family)
        need = OUTPUT_COPIES * h * s * w * s * 3
        if need > self.ram_limit:
            raise JobError("memory", f"{w} x {h} upscaled x{s} by {self.name} is {w * s} x {h * s}: the result "
                           f"and its encoding need about {need >> 20} MiB, more than workers.ram_limit "
                           f"({self.ram_limit >> 20} MiB); use a smaller scale or raise ram_limit")
        (top, bottom), (left, right) = border(h, self.tile, tiling), border(w, self.tile, tiling)
        black = cv2.copyMakeBorder(frame, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(0, 0, 0))
        # The plain resize sees the frame's own edge, as a whole-frame resize does, not the black.
        plain_src = (cv2.copyMakeBorder(frame, top, bottom, left, right, cv2.BORDER_REPLICATE)
                     if blend < 1.0 else None)
        out = np.empty((h * s, w * s, 3), np.uint8)
        for r in windows(black.shape[0], self.tile, tiling.overlap):
            y0, y1 = max(r.keep_from, top), min(r.keep_to, top + h)
            if y0 >= y1:                 # a core all in the border
                continue
            for c in windows(black.shape[1], self.tile, tiling.overlap):
                x0, x1 = max(c.keep_from, left), min(c.keep_to, left + w)
                if x0 >= x1:
                    continue
                up = self.run_tile(black[r.start:r.end, c.start:c.end])
                if plain_src is not None:
                    window = plain_src[r.start:r.end, c.start:c.end]
                    plain = cv2.resize(window, (up.shape[1], up.shape[0]), interpolation=cv2.INTER_LINEAR)
                    up = cv2.addWeighted(up, float(blend), plain, 1.0 - float(blend), 0.0)
                out[(y0 - top) * s:(y1 - top) * s, (x0 - left) * s:(x1 - left) * s] = \
                    up[(y0 - r.start) * s:(y1 - r.start) * s, (x0 - c.start) * s:(x1 - c.start) * s]
        return out
