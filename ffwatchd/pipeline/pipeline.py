"""The pipeline a worker process builds once: models load lazily on first use and stay loaded;
`prepare` turns a job's spec into a per-frame processor (frames.py) from the processors it names;
`process_image` runs one file. It implements contract.py's JobPipeline.

The daemon's workers and `ffwatchd process` both call exactly this.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import cv2
import numpy as np
import onnxruntime as ort

from ffwatchd.cache import BoundedCache
from ffwatchd.config.settings import C2paSettings, Settings, WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.faces import registry
from ffwatchd.faces.analysis import CLASSIFIER, DETECTOR, LANDMARKER, OCCLUDER, PARSER, RECOGNIZER
from ffwatchd.faces.detect import Detector
from ffwatchd.faces.embed import Recognizer, combine_embeddings, cosine_similarity
from ffwatchd.faces.masks import FaceMasks
from ffwatchd.faces.maskspec import MaskType
from ffwatchd.faces.models import CATALOGUE, Model, ModelKind
from ffwatchd.faces.order import REFERENCE_MODES, SelectorMode
from ffwatchd.faces.sessions import SessionConfig, probe_providers, provider_kind
from ffwatchd.faces.types import Embedding, Face, Frame
from ffwatchd.fs.hashing import sha256_file
from ffwatchd.fs.version import FileVersion
from ffwatchd.media.c2pa_sign import ManifestSigner, load_credentials
from ffwatchd.media.image import (
    ALPHA_FORMATS,
    SUFFIXES,
    DecodedImage,
    encode_image,
    exif_resized,
    output_format,
    read_image,
    sniff_format,
    write_image,
)
from ffwatchd.media.identifying import strip_identifying_exif
from ffwatchd.media.provenance import ModelFile, Provenance
from ffwatchd.pipeline.contract import ImageResult, PhotoProblem, RenderedImage
from ffwatchd.pipeline.frames import FrameProcessor
from ffwatchd.pipeline.noface import no_face_reason
from ffwatchd.processors import FaceScore, Processor, Scope
from ffwatchd.spec.jobspec import JobSpec, OnNoFace
from ffwatchd.spec.sidecar import PhotoRole

if TYPE_CHECKING:
    from ffwatchd.media.c2pa_sign import ManifestSigner

log = logging.getLogger(__name__)

_SUFFIX_ALIASES = {"JPEG": (".jpg", ".jpeg", ".jpe", ".jfif"), "PNG": (".png",), "WEBP": (".webp",),
                   "TIFF": (".tif", ".tiff")}
_IDENTITY_CACHE_SIZE = 32
_SOURCE_FACE_CACHE_SIZE = 2           # whole decoded photos: few


def output_suffix(target: Path, spec: JobSpec) -> str:
    """The suffix the result of `target` gets: its own when the format is kept, else the new one's."""
    fmt = output_format(sniff_format(Path(target)), spec.output.format)
    own = Path(target).suffix
    return own if own.lower() in _SUFFIX_ALIASES.get(fmt, ()) else SUFFIXES[fmt]


class Pipeline:
    """Built once per worker process; sessions are created on first use and reused for every job."""

    def __init__(self, models_dir: Path, custom_models: tuple[Model, ...] = (),
                 workers: WorkerSettings | None = None, device: str | None = None, *, provenance: bool = True,
                 c2pa: C2paSettings | None = None, licences_allowed: tuple[str, ...] | None = None) -> None:
        """`workers`: the config's worker settings, whole (None: their defaults); `device`: this process's
        (None: the workers' first, CPU where they list none: a watch-only host's config)."""
        self.models_dir = Path(models_dir)
        self.custom_models = tuple(custom_models)
        self.licences_allowed = licences_allowed
        self.workers = workers if workers is not None else WorkerSettings()
        device = device if device is not None else (self.workers.devices or ("cpu",))[0]
        self.session_config = SessionConfig(self.workers, str(device))
        self.max_pixels = self.workers.max_pixels
        self.provenance = bool(provenance)
        self.c2pa = c2pa
        self._signer: "ManifestSigner | None" = None
        self._models: dict[str, object] = {}
        self._model_hashes: dict[str, str] = {}
        self._lock = threading.Lock()
        self._probe: list[str] | None = None
        self._identities: BoundedCache[Any] = BoundedCache(_IDENTITY_CACHE_SIZE)   # Embedding, or a list of them
        self._source_faces: BoundedCache[tuple[Frame, Face]] = BoundedCache(_SOURCE_FACE_CACHE_SIZE)

    @classmethod
    def for_settings(cls, settings: Settings, device: str | None, models_dir: Path | None = None, *,
                     workers: WorkerSettings | None = None, provenance: bool = True) -> "Pipeline":
        """The pipeline a config asks for: every path that runs jobs under a config (the workers,
        `process -c`) is built here, so none leaves out its licence rule or its limits. `workers`:
        in place of the config's (`process`'s flags over them); provenance False: none written or signed."""
        return cls(models_dir or settings.models_dir, settings.models, workers or settings.workers, device,
                   provenance=settings.provenance and provenance, c2pa=settings.c2pa if provenance else None,
                   licences_allowed=settings.licences_allowed)

    # -- models and providers --------------------------------------------------------

    def load_model(self, name: str, kind: ModelKind) -> Any:
        """The loaded engine of model `name` (created once per process); JobError model_missing
        if absent or not of `kind`."""
        with self._lock:
            model = self._models.get(name)
            if model is not None:
                return model
            info = registry.find_model(name, self.custom_models)
            if info.kind != kind:
                raise JobError("model_missing", f"model {name} is a {info.kind}, not a {kind}")
            path = registry.resolve_model(name, self.models_dir, self.custom_models)
            model = CATALOGUE.kind_spec(info.kind).engine(info, path, self.session_config)  # its declarer's engine
            self._models[name] = model
            self._model_hashes[name] = sha256_file(path)
            log.info("loaded model %s (%s, family %s) from %s on %s", name, kind, info.family, path,
                     ", ".join(model.providers))
            return model

    def check_models(self, names: list[str]) -> None:
        """JobError naming every model in `names` that is missing or corrupt (model_missing), or
        whose licence models.licences_allowed does not list (licence)."""
        why = registry.licence_problem([registry.find_model(n, self.custom_models) for n in dict.fromkeys(names)
                                        if n in registry.all_models(self.custom_models)], self.licences_allowed)
        if why:
            raise JobError("licence", f"this job's pipeline uses {why}")
        problems, missing = [], []
        for name in dict.fromkeys(names):
            if name in self._models:
                continue
            try:
                registry.resolve_model(name, self.models_dir, self.custom_models)
            except JobError as e:
                problems.append(e.message)
                missing.append(name)
        if len(problems) == 1:
            raise JobError("model_missing", problems[0])
        if problems:
            fetchable = [n for n in missing if registry.find_model(n, self.custom_models).url]
            head = f"{len(problems)} models are missing ({', '.join(missing)})"
            if fetchable:
                head += (f"; `ffwatchd models fetch {' '.join(fetchable)}` gets "
                         + ("them" if len(fetchable) == len(missing) else "the built-in ones"))
            raise JobError("model_missing", head + ": " + "; ".join(problems))

    def model_hashes(self) -> dict[str, str]:
        """Model name -> sha256 of the file loaded for it."""
        with self._lock:
            return dict(self._model_hashes)

    def model_files(self, names: list[str]) -> tuple[ModelFile, ...]:
        """What provenance says of each model used: its file's sha256 and its licence."""
        hashes = self.model_hashes()
        out = []
        for name in names:
            info = registry.find_model(name, self.custom_models)
            out.append(ModelFile(name, hashes.get(name, ""), info.licence.id, info.licence.url))
        return tuple(out)

    def signer(self) -> "ManifestSigner | None":
        """The C2PA signer (credentials read once), or None when signing is off; JobError provenance."""
        if self.c2pa is None:
            return None
        if self._signer is None:

            try:
                creds = load_credentials(self.c2pa.cert, self.c2pa.key, self.c2pa.timestamp_url)
            except ValueError as e:
                raise JobError("provenance", f"C2PA signing is configured but its credentials are "
                                             f"unusable: {e}") from e
            self._signer = ManifestSigner(creds)
        return self._signer

    def provenance_for(self, processor: FrameProcessor, faces: int) -> Provenance | None:
        """What the output of a job that processed `faces` faces says about itself; None when
        nothing changed it (no claim at all)."""
        applied = processor.applied(faces)
        if not applied:
            return None
        models = processor.models_used if any(p.scope is Scope.FACES or p.model_kinds for p in applied) else []
        notes = ((p.name, p.provenance_note(processor.spec.settings_of(p.name))) for p in applied)
        return Provenance(tuple(p.name for p in applied), tuple(models), self.model_files(models),
                          ai=any(p.generates_pixels for p in applied),
                          made=tuple(sorted({"faces" if p.scope is Scope.FACES else "frame"
                                             for p in applied if p.generates_pixels})) or ("faces",),
                          settings="; ".join(f"{name}: {note}" for name, note in notes if note))

    def execution_providers(self) -> dict[str, list[str]]:
        """Model name -> the providers its session really runs on."""
        with self._lock:
            return {name: list(m.providers) for name, m in self._models.items()}

    def active_provider(self) -> str:
        """"cuda" when every onnxruntime session runs CUDA first, else "cpu" (from a probe
        session before any model is loaded)."""
        sessions = [p for p in self.execution_providers().values() if p and p[0].endswith("ExecutionProvider")]
        if sessions:
            return "cuda" if all(provider_kind(p) == "cuda" for p in sessions) else "cpu"
        if self._probe is None:
            self._probe = probe_providers(self.session_config)
        return provider_kind(self._probe)

    # -- identities ------------------------------------------------------------------

    def largest_face(self, path: Path, what: str, spec: JobSpec, detector: Detector) -> tuple[Frame, Face]:
        """Image `path` and its largest face; JobError naming the file when it has none."""
        try:
            image = read_image(path, self.max_pixels)
        except JobError as e:
            raise PhotoProblem(e.kind, f"{what} {path}: {e.message}", path, PhotoRole(what)) from e
        d = spec.face_detector
        faces = detector.detect(image.bgr, d.score, d.size)
        if not faces:
            raise PhotoProblem("no_face", f"no face found in {what} {path} (detector {detector.name}, "
                               f"score >= {d.score})", path, PhotoRole(what))
        if len(faces) > 1:
            log.info("%s %s has %d faces; using the largest", what, path.name, len(faces))
        return image.bgr, max(faces, key=lambda f: f.area)

    def source_face(self, path: Path, spec: JobSpec, detector: Detector) -> tuple[Frame, Face]:
        """`largest_face` of a source photo, cached across jobs while the file is unchanged."""
        try:
            st = os.stat(path)
        except OSError as e:
            raise JobError("bad_input", f"cannot read source {e.filename}: {e.strerror}") from e
        d = spec.face_detector
        key = (str(path), FileVersion.from_stat(st), detector.name, d.score, d.size)
        return self._source_faces.get_or_make(key, lambda: self.largest_face(path, "source", spec, detector))

    def _largest_face_embedding(self, path: Path, what: str, spec: JobSpec,
                                detector: Detector, recognizer: Recognizer) -> Embedding:
        frame, face = self.largest_face(path, what, spec, detector)
        return recognizer.embed(frame, face)

    def identity(self, paths: list[Path], what: str, spec: JobSpec,
                          detector: Detector, recognizer: Recognizer) -> Embedding:
        try:
            stats = tuple((str(p), FileVersion.from_stat(os.stat(p))) for p in paths)
        except OSError as e:
            raise JobError("bad_input", f"cannot read {what} {e.filename}: {e.strerror}") from e
        key = (what, stats, detector.name, recognizer.name, spec.face_detector.score, spec.face_detector.size)
        return self._identities.get_or_make(key, lambda: combine_embeddings(
            [self._largest_face_embedding(p, what, spec, detector, recognizer) for p in paths]))

    def _people(self, path: Path, spec: JobSpec, detector: Detector, recognizer: Recognizer) -> list[Embedding]:
        """Every face of `path`, each a person to leave alone (`except_reference`): one photo may
        show everyone who consented. Cached like the source identity."""
        try:
            st = os.stat(path)
        except OSError as e:
            raise JobError("bad_input", f"cannot read reference {e.filename}: {e.strerror}") from e
        d = spec.face_detector
        key = ("people", str(path), FileVersion.from_stat(st), detector.name, recognizer.name, d.score, d.size)
        cached = self._identities.get(key)
        if cached is None:
            try:
                image = read_image(path, self.max_pixels)
            except JobError as e:
                raise PhotoProblem(e.kind, f"reference {path}: {e.message}", path, PhotoRole.REFERENCE) from e
            faces = detector.detect(image.bgr, d.score, d.size)
            if not faces:
                raise PhotoProblem("no_face", f"no face found in reference {path} (detector {detector.name}, "
                                   f"score >= {d.score}): except_reference would leave nobody out", path,
                                   PhotoRole.REFERENCE)
            cached = [recognizer.embed(image.bgr, f) for f in faces]
            self._identities.put(key, cached)
        return cached

    # -- jobs ------------------------------------------------------------------------

    def prepare(self, spec: JobSpec) -> FrameProcessor:
        """Load what the spec needs, compute its source identity and reference once, and let each
        of its processors prepare its step."""
        processors = spec.installed()
        names = registry.with_converters(spec.models_used(), self.custom_models)
        self.check_models(names)
        detector = recognizer = reference = None
        if spec.works_on_faces():
            detector = self.load_model(spec.face_detector.model, DETECTOR)
        if spec.face_recognizer.model in names:
            recognizer = self.load_model(spec.face_recognizer.model, RECOGNIZER)
        classifier = None
        if detector is not None and spec.face_selector.filters():
            classifier = self.load_model(spec.face_selector.classifier, CLASSIFIER)
        job = _Job(self, spec, tuple(processors), detector, recognizer)
        steps = [(p, p.prepare(spec.settings_of(p.name), job)) for p in processors]
        mode = spec.face_selector.mode
        if detector is not None and mode in REFERENCE_MODES:
            if not spec.face_selector.reference:
                raise JobError("bad_sidecar", f"face_selector.mode is {mode} but no reference image is given")
            photos = [Path(p) for p in spec.face_selector.reference]
            if mode == SelectorMode.REFERENCE:     # several photos of one person: averaged as sources are
                reference = self.identity(photos, "reference", spec, detector, recognizer)
            else:                              # everyone in every photo is left alone
                reference = [e for p in photos for e in self._people(p, spec, detector, recognizer)]
        refiner = (self.load_model(spec.face_landmarker.model, LANDMARKER)
                   if detector is not None and spec.face_landmarker.refine else None)
        # what the result's provenance names: not a model only a copy beside it used (a debugger's landmarker)
        output_spec = replace(spec, processors=tuple(p.name for p in processors if p.changes_output))
        shown = [n for n in registry.with_converters(output_spec.models_used(), self.custom_models) if n in names]
        return FrameProcessor(spec, detector, recognizer, reference, steps, shown, job.scores, classifier,
                              masks=job.masks, refiner=refiner, alpha=job.alpha, debug=job.debug,
                              begin_frame=job.begin_frame,
                              makes_alpha=[p.name for p in processors if p.makes_alpha(spec.settings_of(p.name))])

    def output_suffix(self, target: Path, spec: JobSpec) -> str:
        return output_suffix(target, spec)

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> ImageResult:
        """Run one image job, writing exactly `output`; JobError on failure."""
        return self.render_image(target, self.decode_image(target), spec).write(output)

    # The three stages of `process_image`, which a worker runs in different threads so the decode
    # of the next image and the encode of the last overlap with this one's inference.

    def decode_image(self, target: Path) -> DecodedImage:
        """Stage 1: read and decode (size checked from the header first)."""
        target = Path(target)
        with _job_errors(target):
            return read_image(target, self.max_pixels)

    def render_image(self, target: Path, image: DecodedImage, spec: JobSpec) -> RenderedImage:
        """Stage 2: inference on the decoded image; returns stage 3, the writer of the output
        (encode, provenance), to call with the output path. `no_face` is raised here."""
        target = Path(target)
        with _job_errors(target):
            return self._render_image(target, image, spec)

    def _render_image(self, target: Path, image: DecodedImage, spec: JobSpec) -> RenderedImage:
        processor = self.prepare(spec)
        frame, faces = processor.process_frame(image.bgr)
        fmt = output_format(image.format, spec.output.format)
        strip = strips_metadata(spec)
        exif = strip_identifying_exif(image.exif) if strip else image.exif
        face_job = spec.works_on_faces()
        # except_reference: faces found, all of them people to leave alone -- nothing to do, no failure
        everyone_left_alone = spec.face_selector.mode == SelectorMode.EXCEPT_REFERENCE and processor.detected > 0
        if face_job and faces == 0 and not everyone_left_alone:
            reason = no_face_reason(spec, target.name, processor.count)
            if spec.on_no_face == OnNoFace.FAIL:
                raise JobError("no_face", f"{reason}; on_no_face: copy would pass it through unchanged")
            log.info("%s; on_no_face: copy", reason)

            def write_copy(output: Path) -> ImageResult:
                with _job_errors(target):
                    if fmt == image.format and not strip:
                        copy_file(target, Path(output))
                    else:                       # re-encoded: also what an anonymize job strips goes
                        write_image(Path(output), image.bgr, fmt, alpha=image.alpha,
                                    quality=spec.output.image_quality, exif=exif,
                                    icc_profile=image.icc_profile)
                return ImageResult(0, [], [], fmt.lower(), copied=True, faces_found=processor.detected)
            return RenderedImage(write_copy, image.bgr, image.bgr)
        prov = self.provenance_for(processor, faces)
        alpha = image.alpha             # `exif`: already stripped where the job anonymizes
        if processor.makes_alpha:
            if fmt not in ALPHA_FORMATS:
                raise JobError("bad_sidecar", f"{target.name}: {', '.join(processor.makes_alpha)} gives the output an "
                                              f"alpha channel, which {fmt} cannot keep: set output.format: png "
                                              "or webp (or a background that is not cut out)")
            if processor.alpha:                 # the lower of the input's alpha and the step's
                alpha = processor.alpha[0] if alpha is None else np.minimum(alpha, processor.alpha[0])
        if frame.shape != image.bgr.shape:            # resized (an upscaler): alpha and EXIF follow
            size = (frame.shape[1], frame.shape[0])
            if alpha is not None:
                alpha = cv2.resize(alpha, size, interpolation=cv2.INTER_LINEAR)
            exif = exif_resized(exif, *size)
            if prov is not None:
                prov = dataclasses.replace(prov, output_size=size)

        def write(output: Path) -> ImageResult:
            output = Path(output)
            with _job_errors(target):
                signer = self.signer() if prov is not None else None
                data = encode_image(frame, fmt, alpha=alpha, quality=spec.output.image_quality,
                                    exif=exif, icc_profile=image.icc_profile,
                                    provenance=prov if self.provenance else None)
                if signer is not None:
                    signer.sign(data, output, original=target, original_sha256=sha256_file(target), provenance=prov)
                else:
                    write_bytes(output, data)
            return ImageResult(faces, list(spec.processors), list(processor.models_used), fmt.lower(),
                               provenance=prov.as_dict() if prov else None, signed=signer is not None,
                               faces_found=processor.detected if processor.detector is not None else None,
                               scores=[sc.as_dict() for sc in processor.scores])
        return RenderedImage(write, frame, image.bgr, write_debug=debug_writer(processor))


DEBUG_QUALITY = 90


def debug_writer(processor: FrameProcessor) -> Callable[[Path], None] | None:
    """The writer of the job's debug copy (JobContext.set_debug), fsynced at exactly its path, or None
    when the debugger kept no picture (no face, or `when: flagged` and none flagged)."""
    if not processor.debug:
        return None
    picture = processor.debug[0][0]

    def write(path: Path) -> None:
        write_bytes(Path(path), encode_image(picture, "JPEG", quality=DEBUG_QUALITY))
    return write


def strips_metadata(spec: JobSpec) -> bool:
    """Whether a job's outputs lose what identifies a person, a place or a camera (a processor
    of it says so: an anonymizer, unless its settings keep them; media/identifying.py)."""
    return any(p.strips_metadata(spec.settings_of(p.name)) for p in spec.installed())


@contextmanager
def _job_errors(target: Path) -> Iterator[None]:
    """Library errors of one image's stages as JobErrors naming the file."""
    try:
        yield
    except MemoryError as e:
        raise JobError("memory", f"out of memory processing {target.name}") from e
    except (cv2.error, ort.capi.onnxruntime_pybind11_state.Fail,
            ort.capi.onnxruntime_pybind11_state.RuntimeException) as e:
        raise JobError("internal", f"processing {target.name} failed: {e}") from e


class _Job:
    """One job's JobContext for its processors' `prepare`."""

    def __init__(self, pipeline: Pipeline, spec: JobSpec, processors: tuple[Processor, ...],
                 detector: Detector | None, recognizer: Recognizer | None) -> None:
        self.pipeline, self.spec, self.processors = pipeline, spec, processors
        self.detector, self.recognizer = detector, recognizer
        self.masks: FaceMasks | None = None
        self.scores: list[FaceScore] = []
        self.alpha: list[Any] = []       # the last frame's alpha a step set (set_alpha); the FrameProcessor's too
        self.debug: list[tuple[Any, bool]] = []   # the debug picture (set_debug) and whether it is flagged
        self._frame_first = 0            # where this frame's swap scores start in `scores`
        self._landmarker: Any = None

    def load(self, name: str, kind: ModelKind) -> Any:
        return self.pipeline.load_model(name, kind)

    def source_identity(self) -> Embedding:
        if not self.spec.sources:
            needs = ", ".join(p.name for p in self.processors if p.needs_sources)
            raise JobError("bad_sidecar", f"{needs} needs at least one source image (`sources`)")
        if self.detector is None or self.recognizer is None:
            raise JobError("internal", "a source identity needs the detector and the recognizer")
        return self.pipeline.identity([Path(s) for s in self.spec.sources], "source", self.spec,
                                      self.detector, self.recognizer)

    def source_face(self) -> tuple[Frame, Face]:
        if not self.spec.sources:
            needs = ", ".join(p.name for p in self.processors if p.needs_sources)
            raise JobError("bad_sidecar", f"{needs} needs at least one source image (`sources`)")
        if self.detector is None:
            raise JobError("internal", "a source face needs the detector")
        return self.pipeline.source_face(Path(self.spec.sources[0]), self.spec, self.detector)

    def face_masks(self) -> FaceMasks:
        """Built on the first ask; loads only the models the mask types need (box: none)."""
        if self.masks is None:
            fm = self.spec.face_mask
            need = fm.needs
            self.masks = FaceMasks(
                fm,
                occluder=[self.load(n, OCCLUDER) for n in fm.occluder] if need(MaskType.OCCLUSION) else None,
                parser=self.load(fm.parser, PARSER) if need(MaskType.REGION) else None,
                landmarker=(self.load(self.spec.face_landmarker.model, LANDMARKER)
                            if need(MaskType.AREA) else None))
        return self.masks

    def similarity(self, frame: Frame, face: Face, identity: Embedding) -> float:
        if self.recognizer is None:
            raise JobError("internal", "a face's similarity needs the recognizer")
        return cosine_similarity(self.recognizer.embed(frame, replace(face)), identity)

    def record(self, score: FaceScore) -> None:
        self.scores.append(score)

    def begin_frame(self) -> None:
        self._frame_first = len(self.scores)

    def frame_scores(self) -> list[FaceScore]:
        return self.scores[self._frame_first:]

    def landmarks(self, frame: Frame, face: Face) -> tuple[Any, float]:
        if self._landmarker is None:
            self._landmarker = self.load(self.spec.face_landmarker.model, LANDMARKER)
        return self._landmarker.landmarks(frame, replace(face))

    def set_debug(self, picture: Any, flagged: bool) -> None:
        if not self.debug or (flagged and not self.debug[0][1]):
            self.debug[:] = [(picture, flagged)]

    def set_alpha(self, alpha: Any) -> None:
        self.alpha[:] = [alpha]


def write_bytes(path: Path, data: bytes) -> None:
    """Write exactly `path`, fsynced (the caller renames it into place)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def copy_file(src: Path, dst: Path) -> None:
    """Copy bytes to exactly `dst`, fsynced (the caller renames it into place)."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        shutil.copyfileobj(fi, fo, 4 * 2**20)
        fo.flush()
        os.fsync(fo.fileno())
