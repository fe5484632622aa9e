"""Across a video's frames: a selected face stays selected while its box overlaps its box of the
frame before, so a selection does not flicker between people where the recognizer (or the
classifier, or the face sizes) hesitates for a frame or two."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ffwatchd.faces.types import Face, Traits


def box_overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boxes (x1, y1, x2, y2): 0 apart, 1 the same box."""
    ix = max(0.0, min(float(a[2]), float(b[2])) - max(float(a[0]), float(b[0])))
    iy = max(0.0, min(float(a[3]), float(b[3])) - max(float(a[1]), float(b[1])))
    inter = ix * iy
    union = (float(a[2]) - float(a[0])) * (float(a[3]) - float(a[1])) \
        + (float(b[2]) - float(b[0])) * (float(b[3]) - float(b[1])) - inter
    return inter / union if union > 0 else 0.0


@dataclass(frozen=True)
class _Track:
    bbox: np.ndarray
    selected: bool
    traits: Traits | None = None
    number: int = 0


class FaceTracker:
    """One video's tracks, frame by frame (a job's frames come in order, one at a time).

    1. Each face of the frame continues the track of the frame before whose box it overlaps most,
       at least `min_overlap` (each track continued by one face at most, best overlaps first).
    2. A face continuing a selected track stays selected. In a mode that picks one face (`single`),
       while one does no other face is taken; otherwise the frame's own choice is added to them.
    3. The faces of this frame become the tracks of the next, each marked selected or not; each
       face carries its track's number (`Face.track`), a new one for a face continuing none.
    A face continuing a track also inherits its traits (`inherit`, before the filters), so the
    classifier runs once per track, not once per frame.
    """

    def __init__(self, min_overlap: float, single: bool) -> None:
        if not 0.0 < min_overlap <= 1.0:
            raise ValueError(f"a tracker's overlap threshold is in (0, 1], not {min_overlap}")
        self.min_overlap = min_overlap
        self.single = single
        self._tracks: list[_Track] = []
        self._numbers = 0                 # tracks begun so far: a new face's track is the next number

    def inherit(self, faces: list[Face]) -> None:
        """Give each face continuing a track the traits the classifier gave that track."""
        for face, track in self._continued(faces):
            if face.traits is None and track.traits is not None:
                face.traits = track.traits

    def follow(self, faces: list[Face], chosen: list[Face]) -> list[Face]:
        """The faces to process in this frame: `chosen` (this frame's own selection among `faces`)
        corrected by the tracks of the frame before."""
        continued = self._continued(faces)
        kept = [f for f, track in continued if track.selected]
        if self.single and kept:
            picked = kept[:1]
        else:
            picked = list(chosen) + [f for f in kept if not any(f is c for c in chosen)]
        for f, track in continued:          # numbered: a face continuing a track keeps its number
            f.track = track.number
        for f in faces:
            if f.track is None:
                self._numbers += 1
                f.track = self._numbers
        self._tracks = [_Track(np.asarray(f.bbox, np.float32).copy(), any(f is p for p in picked), f.traits,
                               f.track or 0) for f in faces]
        return picked

    def _continued(self, faces: list[Face]) -> list[tuple[Face, _Track]]:
        """(face, the track it continues), best overlap first."""
        pairs = sorted(((box_overlap(f.bbox, t.bbox), i, j) for i, f in enumerate(faces)
                        for j, t in enumerate(self._tracks)), key=lambda p: -p[0])
        used_faces: set[int] = set()
        used_tracks: set[int] = set()
        out = []
        for score, i, j in pairs:
            if score < self.min_overlap or i in used_faces or j in used_tracks:
                continue
            used_faces.add(i)
            used_tracks.add(j)
            out.append((faces[i], self._tracks[j]))
        return out
