"""The face analysis every face job runs before its processors (detect, recognise, classify, and
the face_mask's occluder, parser and landmarker): its model kinds with their engines, families and
models, declared as a processor declares its own (the registry gathers this set first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ffwatchd.faces.models import (
    NON_COMMERCIAL,
    Batch,
    Classes,
    Colour,
    Crop,
    Gender,
    KindSpec,
    Layout,
    Licence,
    Model,
    ModelFamily,
    ModelKind,
    ModelSet,
    Readout,
    facefusion_url,
)

DETECTOR = ModelKind("detector")
RECOGNIZER = ModelKind("recognizer")
CLASSIFIER = ModelKind("classifier")     # a face's gender and age, for face_selector's filters (faces/classify.py)
OCCLUDER = ModelKind("occluder")         # face_mask occlusion: what covers the face (xseg)
PARSER = ModelKind("parser")             # face_mask region: which part of the face each pixel is (bisenet)
LANDMARKER = ModelKind("landmarker")     # 68 points, for the face_mask area (2dfan4)



# The engines import cv2 and onnxruntime, which load in the worker only: each is imported when a
# model of its kind is first loaded (the config, the command line and the supervisor read this set).
def _detector(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.detect import load_detector
    return load_detector(model, path, cfg)


def _recognizer(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.embed import Recognizer
    return Recognizer(model, path, cfg)


def _classifier(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.classify import Classifier
    return Classifier(model, path, cfg)


def _occluder(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.masks import Occluder
    return Occluder(model, path, cfg)


def _parser(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.masks import Parser
    return Parser(model, path, cfg)


def _landmarker(model: Model, path: Path, cfg: Any) -> Any:
    from ffwatchd.faces.masks import Landmarker
    return Landmarker(model, path, cfg)


_HF_INSIGHTFACE = "https://huggingface.co/public-data/insightface/resolve/main/models"
INSIGHTFACE_TERMS = Licence(NON_COMMERCIAL, "https://github.com/deepinsight/insightface#license")
# The mask models: FaceFusion's files and the licences its model set states (it publishes CRC32
# hashes, not sha256, so theirs are recorded on first fetch).
_XSEG_TERMS = Licence("GPL-3.0", "https://github.com/iperov/DeepFaceLab/blob/master/LICENSE")
_BISENET_TERMS = Licence("MIT", "https://github.com/yakhyo/face-parsing/blob/main/LICENSE")
_2DFAN4_TERMS = Licence("MIT", "https://github.com/facefusion/facefusion/blob/master/facefusion/face_landmarker.py")

# Mask models see the face on the FFHQ crop (a superset of every processor's crop); conventions as
# FaceFusion's face_masker.py / face_landmarker.py feed them. Hashes and sizes are the ones published
# with (or pinned by many users of) the official files; docs/pipeline.md lists where each comes from.
MODEL_SET = ModelSet(
    kinds=(
        KindSpec(DETECTOR, _detector, "scrfd", "finds faces and their five points"),
        KindSpec(RECOGNIZER, _recognizer, "arcface", "a face's identity embedding"),
        KindSpec(CLASSIFIER, _classifier, "fairface", "a face's gender and age"),
        KindSpec(OCCLUDER, _occluder, "xseg", "what covers a face (face_mask occlusion)"),
        KindSpec(PARSER, _parser, "bisenet", "which part of the face each pixel is (face_mask region)"),
        KindSpec(LANDMARKER, _landmarker, "2dfan4", "68 points (face_mask area, face_landmarker.refine)"),
    ),
    families=(
        ModelFamily("yunet", DETECTOR, colour=Colour.BGR,
                    reference="https://github.com/opencv/opencv_zoo/tree/main/models/face_detection_yunet"),
        ModelFamily("scrfd", DETECTOR, colour=Colour.RGB, mean=(0.5,) * 3, std=(0.5,) * 3,
                    batch=Batch.DYNAMIC,
                    reference="https://github.com/deepinsight/insightface/tree/master/detection/scrfd"),
        ModelFamily("arcface", RECOGNIZER, size=112, template="arcface_112_v2",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), batch=Batch.DYNAMIC,
                    reference="https://github.com/deepinsight/insightface/tree/master/recognition/arcface_torch"),
        ModelFamily("xseg", OCCLUDER, size=256, template="ffhq_512", colour=Colour.BGR,
                    layout=Layout.NHWC, reference="https://github.com/iperov/DeepFaceLab (XSeg)"),
        ModelFamily("bisenet", PARSER, size=512, template="ffhq_512",
                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                    reference="https://github.com/yakhyo/face-parsing"),
        ModelFamily("2dfan4", LANDMARKER, size=256, colour=Colour.BGR,
                    reference="https://github.com/1adrianb/face-alignment (FAN, as FaceFusion's 2dfan4)"),
        # FairFace's ResNet-34 as FaceFusion exports it: three argmax outputs, race first.
        ModelFamily("fairface", CLASSIFIER, size=224, template="arcface_112_v2",
                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                    classes=Classes(("race", "gender", "age"), (Gender.MALE, Gender.FEMALE),
                                    ((0, 2), (3, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, 59),
                                     (60, 69), (70, 100))),
                    reference="https://github.com/dchen236/FairFace"),
        # insightface's attribute model: raw 0..255 RGB pixels (an mxnet graph that normalises itself).
        ModelFamily("genderage", CLASSIFIER, size=96, crop=Crop.BOX, box_scale=1.5,
                    std=(1 / 255,) * 3,
                    classes=Classes(("gender_age",), (Gender.FEMALE, Gender.MALE), readout=Readout.GENDER_AGE),
                    reference="https://github.com/deepinsight/insightface/blob/master/python-package/"
                              "insightface/model_zoo/attribute.py"),
    ),
    models=(
        Model("yunet", "yunet", "face_detection_yunet_2023mar.onnx",
              Licence("MIT", "https://github.com/opencv/opencv_zoo/blob/main/models/face_detection_yunet/LICENSE"),
              "https://huggingface.co/opencv/face_detection_yunet/resolve/main/face_detection_yunet_2023mar.onnx",
              "8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4", 232589),
        Model("scrfd_10g", "scrfd", "det_10g.onnx", INSIGHTFACE_TERMS, f"{_HF_INSIGHTFACE}/buffalo_l/det_10g.onnx",
              "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91", 16923827),
        Model("scrfd_500m", "scrfd", "det_500m.onnx", INSIGHTFACE_TERMS, f"{_HF_INSIGHTFACE}/buffalo_s/det_500m.onnx",
              "5e4447f50245bbd7966bd6c0fa52938c61474a04ec7def48753668a9d8b4ea3a", 2524817),
        Model("arcface_w600k_r50", "arcface", "w600k_r50.onnx", INSIGHTFACE_TERMS,
              f"{_HF_INSIGHTFACE}/buffalo_l/w600k_r50.onnx",
              "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43", 174383860),
        *(Model(f"xseg_{n}", "xseg", f"xseg_{n}.onnx", _XSEG_TERMS,
                facefusion_url(f"models-{release}", f"xseg_{n}.onnx"))
          for n, release in ((1, "3.1.0"), (2, "3.1.0"), (3, "3.2.0"))),
        *(Model(f"bisenet_resnet_{n}", "bisenet", f"bisenet_resnet_{n}.onnx", _BISENET_TERMS,
                facefusion_url(f"models-{release}", f"bisenet_resnet_{n}.onnx"))
          for n, release in ((18, "3.1.0"), (34, "3.0.0"))),
        Model("2dfan4", "2dfan4", "2dfan4.onnx", _2DFAN4_TERMS, facefusion_url("models-3.0.0", "2dfan4.onnx")),
        Model("fairface", "fairface", "fairface.onnx",
              Licence("CC-BY-4.0", "https://github.com/dchen236/FairFace/blob/master/LICENSE"),
              facefusion_url("models-3.0.0", "fairface.onnx")),
        Model("genderage", "genderage", "genderage.onnx", INSIGHTFACE_TERMS,
              f"{_HF_INSIGHTFACE}/buffalo_l/genderage.onnx"),
    ),
)
