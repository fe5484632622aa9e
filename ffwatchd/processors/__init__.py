"""Processors as plug-ins: the `Processor` protocol (protocol), the one registry (registry) that
also gathers their model sets, the docs' generated tables (docs), the built-in processors, one
module each (builtin/), and any package's `ffwatchd.processors` entry point."""

from ffwatchd.processors.protocol import Box, Change, FaceScore, JobContext, Processor, ResizingStep, Scope, Step
from ffwatchd.processors.registry import (
    ENTRY_POINT_GROUP,
    BrokenPlugin,
    ProcessorError,
    broken_plugins,
    check_processor,
    default_processors,
    installed_since_start,
    names,
    order_problem,
    processor,
    processors,
    require_plugins,
    with_debug,
)

__all__ = ["BrokenPlugin", "Box", "Change", "ENTRY_POINT_GROUP", "FaceScore", "JobContext", "Processor",
           "ProcessorError", "ResizingStep", "Scope", "Step", "broken_plugins", "check_processor",
           "default_processors", "installed_since_start", "names", "order_problem", "processor", "processors",
           "require_plugins", "with_debug"]
