"""Media I/O through ffmpeg pipes: finding ffmpeg, probing, and the video pipeline."""
