"""A face's gender and age from a classifier model (fairface, insightface's genderage), for
face_selector's filters."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.convention import to_blob
from ffwatchd.faces.models import Crop, Model, Readout
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Face, Frame, Traits


class Classifier:
    """A classifier model fed by its family's conventions (faces/models.py)."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.family = fam = model.conventions
        if fam.size is None or fam.classes is None or (fam.crop is Crop.TEMPLATE and fam.template is None):
            raise JobError("model_missing", f"model {model.name}: family {fam.name} states no crop, "
                                            "template or classes")
        self.session = create_session(path, cfg, f"model {model.name}")
        inp, outs = self.session.get_inputs(), self.session.get_outputs()
        if len(inp) != 1 or list(inp[0].shape[1:]) != [3, fam.size, fam.size] \
                or len(outs) != len(fam.classes.outputs):
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} classifier "
                           f"(input {inp[0].shape if inp else None}, {len(outs)} outputs; expected "
                           f"1 x 3 x {fam.size} x {fam.size} and {len(fam.classes.outputs)} outputs)")
        self.input_name = inp[0].name
        self.output_names = [o.name for o in outs]
        self.classes = fam.classes
        self.size = fam.size
        self.template = template_points(fam.template, fam.size) if fam.template else None
        self.providers = list(self.session.get_providers())

    def classify(self, frame: Frame, face: Face) -> Traits:
        """`face`'s traits (also stored on it)."""
        results = self.session.run(self.output_names, {self.input_name: to_blob(self._crop(frame, face), self.family)})
        genders = self.classes.genders
        if self.classes.readout is Readout.GENDER_AGE:
            pred = np.asarray(results[0], np.float32).reshape(-1)
            if pred.size != 3:
                raise JobError("internal", f"model {self.name} gave {pred.size} values, not two gender scores "
                                           "and an age")
            years = int(np.clip(np.round(pred[2] * 100), 0, 120))
            face.traits = Traits(genders[int(np.argmax(pred[:2]))], (years, years))
            return face.traits
        index = {name: _class_index(value, name, self.name)
                 for name, value in zip(self.classes.outputs, results)}
        ages = self.classes.ages
        if not (0 <= index["gender"] < len(genders) and 0 <= index["age"] < len(ages)):
            raise JobError("internal", f"model {self.name} gave gender class {index['gender']} and age class "
                                       f"{index['age']} (known: {len(genders)} and {len(ages)})")
        face.traits = Traits(genders[index["gender"]], ages[index["age"]])
        return face.traits

    def _crop(self, frame: Frame, face: Face) -> Frame:
        """The family's input crop of `face` (BGR uint8, size x size)."""
        if self.template is not None and self.family.crop is Crop.TEMPLATE:
            return warp_face(frame, face.kps, self.size, self.template)[0]
        x1, y1, x2, y2 = (float(v) for v in face.bbox)
        scale = self.size / (max(x2 - x1, y2 - y1) * self.family.box_scale)
        m = np.array([[scale, 0.0, self.size / 2 - scale * (x1 + x2) / 2],
                      [0.0, scale, self.size / 2 - scale * (y1 + y2) / 2]])
        return cv2.warpAffine(frame, m, (self.size, self.size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)


def _class_index(value: np.ndarray, output: str, model: str) -> int:
    """One output as a class index: an argmax already (integers) or scores (the largest wins)."""
    arr = np.asarray(value)
    if np.issubdtype(arr.dtype, np.integer):
        return int(arr.reshape(-1)[0])
    if arr.ndim >= 1 and arr.size > 1:
        return int(np.argmax(arr.reshape(arr.shape[0], -1)[0]))
    raise JobError("internal", f"model {model}: its {output} output {arr.shape} {arr.dtype} is neither "
                               "class indices nor class scores")
