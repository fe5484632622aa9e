"""Media in and out. Images decoded and encoded (image; JPEG outputs through OpenCV: jpegout;
camera RAW: raw), identifying metadata stripped (identifying), provenance and C2PA signing
(provenance, c2pa_sign); video through ffmpeg pipes: finding ffmpeg (ffmpeg), probing (probe), the
file handed over as a descriptor (source), the segmented pipeline and its resume manifest (video,
segments, framepipe), frame buffers and cores shared out (framepool), changed boxes written back
into yuv420p (yuvpatch)."""
