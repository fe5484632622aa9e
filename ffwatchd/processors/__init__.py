"""Processors as plug-ins: each one module implementing `Processor`; one registry lists them."""

from ffwatchd.processors.protocol import Box, Change, FaceScore, JobContext, Processor, Scope, Step
from ffwatchd.processors.registry import (
    ENTRY_POINT_GROUP,
    ProcessorError,
    check_processor,
    default_processors,
    names,
    processor,
    processors,
)

__all__ = ["Box", "Change", "FaceScore", "ENTRY_POINT_GROUP", "JobContext", "Processor", "ProcessorError", "Scope", "Step",
           "check_processor", "default_processors", "names", "processor", "processors"]
