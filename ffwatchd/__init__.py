"""ffwatchd: shared folders in, face-processed files out."""

__version__ = "0.1.0"
