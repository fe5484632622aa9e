"""Which detected faces a job processes: all, the largest, the first in an order, those matching a
reference, or all but the people of a reference image (`except_reference`); first narrowed by
the filters (age, gender) where the job gives them, then put in the job's order."""

from __future__ import annotations

from typing import Callable

from ffwatchd.faces.embed import cosine_similarity
from ffwatchd.faces.models import Gender
from ffwatchd.faces.order import Order, SelectorMode, in_order
from ffwatchd.faces.types import Embedding, Face, Frame, Traits


def traits_match(traits: Traits, age: tuple[int, int] | None, gender: Gender | str | None) -> bool:
    """Whether a face of `traits` passes the filters: its age span overlaps `age` (min, max years,
    both included) and its gender is `gender`; a filter that is None passes every face."""
    if gender is not None and traits.gender != Gender(gender):
        return False
    return age is None or (traits.age[0] <= age[1] and age[0] <= traits.age[1])


def select_faces(faces: list[Face], mode: SelectorMode | str, frame: Frame | None = None,
                 embed: Callable[[Frame, Face], Embedding] | None = None,
                 reference: Embedding | list[Embedding] | None = None, max_distance: float = 0.6,
                 order: Order | str | None = None, keep: Callable[[Face], bool] | None = None) -> list[Face]:
    """The faces to process. `keep` (the filters) narrows `faces` first. `one` takes the first face
    in `order` (large-small when none is given). `reference` mode needs `frame`, `embed` and
    `reference`; it keeps every face whose cosine distance (1 - similarity) is at most
    `max_distance`, nearest first unless an order is given. `except_reference` takes `reference`
    as the list of the people to leave alone (every face of the reference image) and keeps every
    face farther than `max_distance` from all of them."""
    if keep is not None:
        faces = [f for f in faces if keep(f)]
    if not faces:
        return []
    if mode == SelectorMode.ONE:
        return in_order(faces, order or Order.LARGE_SMALL)[:1]
    if order is not None and mode != SelectorMode.LARGEST:
        return in_order(select_faces(faces, mode, frame, embed, reference, max_distance), order)
    if mode == SelectorMode.ALL:
        return list(faces)
    if mode == SelectorMode.LARGEST:
        return [max(faces, key=lambda f: f.area)]
    if mode == SelectorMode.REFERENCE:
        if reference is None or embed is None or frame is None:
            raise ValueError("reference selection needs the frame, a recognizer and a reference embedding")
        scored = []
        for face in faces:
            emb = face.embedding if face.embedding is not None else embed(frame, face)
            distance = 1.0 - cosine_similarity(emb, reference)
            if distance <= max_distance:
                scored.append((distance, face))
        scored.sort(key=lambda t: t[0])
        return [f for _, f in scored]
    if mode == SelectorMode.EXCEPT_REFERENCE:
        if reference is None or embed is None or frame is None:
            raise ValueError("except_reference selection needs the frame, a recognizer and the reference embeddings")
        people = reference if isinstance(reference, list) else [reference]
        kept = []
        for face in faces:
            emb = face.embedding if face.embedding is not None else embed(frame, face)
            if all(1.0 - cosine_similarity(emb, person) > max_distance for person in people):
                kept.append(face)
        return kept
    raise ValueError(f"unknown face selector mode {mode!r}")
