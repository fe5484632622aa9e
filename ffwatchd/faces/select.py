"""Which detected faces a job processes: all, the largest, those matching a reference, or all but
the people of a reference image (`except_reference`)."""

from __future__ import annotations

from typing import Callable

from ffwatchd.faces.embed import cosine_similarity
from ffwatchd.faces.types import Embedding, Face, Frame


def select_faces(faces: list[Face], mode: str, frame: Frame | None = None,
                 embed: Callable[[Frame, Face], Embedding] | None = None,
                 reference: Embedding | list[Embedding] | None = None, max_distance: float = 0.6) -> list[Face]:
    """The faces to process, best first. `reference` mode needs `frame`, `embed` and `reference`;
    it keeps every face whose cosine distance (1 - similarity) is at most `max_distance`.
    `except_reference` takes `reference` as the list of the people to leave alone (every face of
    the reference image) and keeps every face farther than `max_distance` from all of them."""
    if not faces:
        return []
    if mode == "all":
        return list(faces)
    if mode == "largest":
        return [max(faces, key=lambda f: f.area)]
    if mode == "reference":
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
    if mode == "except_reference":
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
