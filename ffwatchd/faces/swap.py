"""Face swap by any swapper family: its source input made by the family's identity rule, the
aligned crop fed by its conventions, optionally boosted (swapped as model-sized tiles)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.convention import crop_family, from_blob, to_blob
from ffwatchd.faces.masks import FaceMasks
from ffwatchd.faces.models import Identity, Model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Affine, Embedding, Face, Frame

log = logging.getLogger(__name__)


def read_emap(path: Path) -> np.ndarray:
    """inswapper's identity map: its graph's last initializer (as insightface reads it)."""
    # Imported here: onnx is needed only when a model file is read here.
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    if not model.graph.initializer:
        raise JobError("model_missing", f"{path.name} has no initializers, so no emap")
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.ndim != 2 or emap.shape[0] != emap.shape[1]:
        raise JobError("model_missing", f"{path.name}: last initializer has shape {emap.shape}, "
                       "not the square emap of an inswapper model")
    return emap


class Converter:
    """An embedding converter (family crossface): a 1 x 512 embedding in, the swapper's 1 x 512 out."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.session = create_session(path, cfg, f"model {model.name}")
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1 or len(inputs[0].shape) != 2 or len(outputs) != 1:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not an embedding converter "
                           "(one N x 512 input, one output)")
        self.input_name, self.output_name = inputs[0].name, outputs[0].name
        self.providers = list(self.session.get_providers())

    def convert(self, embedding: np.ndarray) -> np.ndarray:
        out = self.session.run([self.output_name], {self.input_name: embedding.reshape(1, -1).astype(np.float32)})
        return np.asarray(out[0], np.float32).reshape(-1)


def _is_fixed(dim: object) -> bool:
    return isinstance(dim, int)


def tiles_of(crop: Frame, size: int) -> np.ndarray:
    """Pixel boost: an n*size crop as n*n interleaved size x size tiles, each the whole face at
    a sub-pixel offset (tile i*n+j holds pixels [y*n+i, x*n+j]), as FaceFusion's pixel_boost."""
    n = crop.shape[0] // size
    return crop.reshape(size, n, size, n, 3).transpose(1, 3, 0, 2, 4).reshape(n * n, size, size, 3)


def crop_of(tiles: np.ndarray, size: int) -> Frame:
    """The inverse of `tiles_of`: n*n tiles back into one n*size crop, pixel for pixel."""
    n = int(round(np.sqrt(len(tiles))))
    out = np.asarray(tiles).reshape(n, n, size, size, 3).transpose(2, 0, 3, 1, 4).reshape(n * size, n * size, 3)
    return np.ascontiguousarray(out)


class Swapper:
    """A swapper model fed by its family's conventions (faces/models.py)."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.family = fam = crop_family(model)
        self.session = create_session(path, cfg, f"model {model.name}")
        inputs = self.session.get_inputs()
        by_name = {i.name: i for i in inputs}
        # Bound by name as the reference code does (hyperswap lists `source` first); else crop first.
        target, source = (by_name["target"], by_name["source"]) if {"target", "source"} <= set(by_name) \
            else (inputs + [None, None])[:2]
        src_shape = [3, fam.source_size, fam.source_size] if fam.identity is Identity.SOURCE_CROP else None
        if len(inputs) != 2 or list(target.shape[1:]) != [3, fam.size, fam.size] \
                or (src_shape is not None and list(source.shape[1:]) != src_shape) \
                or (src_shape is None and len(source.shape) != 2) or not self.session.get_outputs():
            want = (f"N x {' x '.join(map(str, src_shape))}" if src_shape else "N x D")
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} swapper "
                           f"(inputs: the target crop N x 3 x {fam.size} x {fam.size} and the source {want}; "
                           f"found {', '.join(f'{i.name} {i.shape}' for i in inputs)})")
        self.target_name, self.source_name = target.name, source.name
        self.output_name = self.session.get_outputs()[0].name      # hyperswap's second output is a mask
        self.size = fam.size
        self.batched = not _is_fixed(target.shape[0]) and not _is_fixed(source.shape[0])
        # fp16 exports (inswapper_128_fp16) may take half-precision inputs
        self.target_type, self.source_type = (np.float16 if i.type == "tensor(float16)" else np.float32
                                              for i in (target, source))
        self.emap = read_emap(path) if fam.identity is Identity.EMAP else None
        self.providers = list(self.session.get_providers())

    def latent(self, identity: Embedding, converter: "Converter | None" = None) -> np.ndarray:
        """The model's source input for a source identity (normalised), as its family makes it."""
        rule = self.family.identity
        e = identity.reshape(1, -1).astype(np.float32)
        if rule is Identity.EMAP and self.emap is not None:
            lat = e @ self.emap
        elif rule is Identity.EMBEDDING:
            lat = e
        elif rule in (Identity.CONVERTED, Identity.CONVERTED_NORM) and converter is not None:
            lat = converter.convert(e).reshape(1, -1)
            if rule is Identity.CONVERTED:
                return lat.astype(np.float32)
        else:
            raise JobError("internal", f"model {self.name}: family {self.family.name} makes its identity by "
                           f"{rule}, which needs " + ("a source crop" if rule is Identity.SOURCE_CROP
                                                      else "its converter"))
        return (lat / np.linalg.norm(lat)).astype(np.float32)

    def source_crop(self, frame: Frame, face: Face) -> np.ndarray:
        """Identity.SOURCE_CROP: the source face aligned by the family's source template, RGB 0..1."""
        fam = self.family
        if fam.source_template is None or fam.source_size is None:
            raise JobError("internal", f"model {self.name}: family {fam.name} states no source crop")
        crop, _ = warp_face(frame, face.kps, fam.source_size, template_points(fam.source_template, fam.source_size))
        x = crop[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255.0
        return np.ascontiguousarray(x)

    def swap_crop(self, frame: Frame, face: Face, latent: np.ndarray,
                  boost: int | None = None) -> tuple[Frame, Affine]:
        """The swapped aligned crop (BGR uint8, `boost` px, default the model's size) and its
        matrix frame -> crop; a boosted crop is swapped as model-sized tiles."""
        side = boost or self.size
        if side % self.size:
            raise JobError("bad_sidecar", f"pixel boost {side} is not a multiple of model {self.name}'s "
                           f"{self.size} px crop")
        crop, m = warp_face(frame, face.kps, side, template_points(self.family.template, side))
        blobs = to_blob(tiles_of(crop, self.size) if side != self.size else crop, self.family)
        if self.batched:
            preds = self._run(blobs, np.repeat(latent, len(blobs), axis=0))
        else:
            preds = np.concatenate([self._run(b[None], latent) for b in blobs])
        outs = from_blob(preds, self.family)
        return (crop_of(outs, self.size) if side != self.size else outs[0]), m

    def _run(self, blobs: np.ndarray, latent: np.ndarray) -> np.ndarray:
        feed = {self.target_name: blobs.astype(self.target_type, copy=False),
                self.source_name: latent.astype(self.source_type, copy=False)}
        return np.asarray(self.session.run([self.output_name], feed)[0], np.float32)

    def swap(self, frame: Frame, face: Face, latent: np.ndarray,
             touched: list[tuple[int, int, int, int]] | None = None, boost: int | None = None,
             masks: FaceMasks | None = None) -> Frame:
        """Swap one face in place; returns `frame` (the region changed goes into `touched`),
        pasted back through the job's face mask (the plain box without `masks`)."""
        out, m = self.swap_crop(frame, face, latent, boost)
        mask = masks.crop_mask(face, m, out.shape[0]) if masks is not None else None
        return paste_back(frame, out, m, mask, touched=touched)
