"""Five-point similarity alignment: the crops each model expects, and their inverse."""

from __future__ import annotations

from functools import lru_cache

import cv2
import numpy as np

from ffwatchd.faces.types import Affine, Frame

# ArcFace's 112x112 template (insightface `arcface_dst`); the 128 inswapper crop shifts it by 8 px.
ARCFACE_112 = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                        [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float64)
# GFPGAN's FFHQ 512x512 template (facexlib's FaceRestoreHelper).
FFHQ_512 = np.array([[192.98138, 239.94708], [318.90277, 240.1936], [256.63416, 314.01935],
                     [201.26117, 371.41043], [313.08905, 371.15118]], dtype=np.float64)


@lru_cache(maxsize=8)
def arcface_template(size: int) -> np.ndarray:
    """A recognizer's ArcFace template, by insightface's rule for its input size (112 or 128 px);
    a swapper's crop names its template (template_points), never guesses it from the size."""
    if size % 112 == 0:
        return template_points("arcface_112_v2", size)
    if size % 128 == 0:
        return template_points("arcface_128", size)
    raise ValueError(f"no ArcFace template for a {size} px crop")


# Templates as fractions of the crop's side (FaceFusion's face_helper.py): the older ArcFace
# crop simswap and ghost were trained on, the MTCNN crop of hififace, and styleganex's 384 crop
# (the face smaller, with the background around it).
ARCFACE_112_V1 = np.array([[0.35473214, 0.45658929], [0.64526786, 0.45658929], [0.50000000, 0.61154464],
                           [0.37913393, 0.77687500], [0.62086607, 0.77687500]], dtype=np.float64)
MTCNN_512 = np.array([[0.36562865, 0.46733799], [0.63305391, 0.46585885], [0.50019127, 0.61942959],
                      [0.39032951, 0.77598822], [0.61178945, 0.77476328]], dtype=np.float64)
STYLEGANEX_384 = np.array([[0.42353745, 0.52289879], [0.57725008, 0.52319972], [0.50123859, 0.61331904],
                           [0.43364461, 0.68337652], [0.57015325, 0.68306005]], dtype=np.float64)

TEMPLATES = ("arcface_112_v1", "arcface_112_v2", "arcface_128", "ffhq_512", "mtcnn_512", "styleganex_384")


@lru_cache(maxsize=32)
def template_points(name: str, size: int) -> np.ndarray:
    """The five points of alignment template `name` (TEMPLATES) for a crop of `size` px."""
    if name == "arcface_112_v2":
        return ARCFACE_112 * (size / 112.0)
    if name == "arcface_128":      # the 112 template scaled to 128 and shifted 8 px right, then to `size`
        ratio = size / 128.0
        dst = ARCFACE_112 * ratio
        dst[:, 0] += 8.0 * ratio
        return dst
    if name == "ffhq_512":
        return FFHQ_512 * (size / 512.0)
    if name == "arcface_112_v1":
        return ARCFACE_112_V1 * size
    if name == "mtcnn_512":
        return MTCNN_512 * size
    if name == "styleganex_384":
        return STYLEGANEX_384 * size
    raise ValueError(f"no alignment template {name!r} (known: {', '.join(TEMPLATES)})")


def estimate_similarity(src: np.ndarray, dst: np.ndarray) -> Affine:
    """Least-squares similarity (Umeyama) mapping points `src` onto `dst`, as a 2x3 matrix."""
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    n = src.shape[0]
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    cov = dst_c.T @ src_c / n
    u, s, vt = np.linalg.svd(cov)
    d = np.ones(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[1] = -1
    rot = u @ np.diag(d) @ vt
    var = (src_c ** 2).sum() / n
    scale = (s * d).sum() / var if var > 0 else 1.0
    m = np.zeros((2, 3), dtype=np.float64)
    m[:, :2] = scale * rot
    m[:, 2] = dst_mean - scale * rot @ src_mean
    return m


def warp_face(frame: Frame, kps: np.ndarray, size: int, template: np.ndarray) -> tuple[Frame, Affine]:
    """The aligned `size` x `size` crop of a face and the matrix frame -> crop."""
    m = estimate_similarity(kps, template)
    crop = cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
    return crop, m
