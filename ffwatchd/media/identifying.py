"""Metadata that identifies a person, a place or a camera (GPS, maker notes, serial numbers, owner
names), stripped from anonymized outputs unless the sidecar keeps it (`keep_metadata`)."""

from __future__ import annotations

_GPS_IFD, _EXIF_IFD = 0x8825, 0x8769

#: IFD0 tags: the GPS position (its sub-directory), the camera's serial (DNG), Windows' free-text comment;
#: the photographer's credit (Artist, XPAuthor, Copyright) stays
IFD0_TAGS = {_GPS_IFD: "GPSInfo", 0xC62F: "CameraSerialNumber", 0x9C9C: "XPComment"}
#: Exif sub-directory tags: the maker note (serials, owner, lens, often a position), free text,
#: the owner's name, the serial numbers and the picture's unique id (ties copies together)
EXIF_TAGS = {0x927C: "MakerNote", 0x9286: "UserComment", 0xA420: "ImageUniqueID", 0xA430: "CameraOwnerName",
             0xA431: "BodySerialNumber", 0xA435: "LensSerialNumber"}


def strip_identifying_exif(exif: bytes | None) -> bytes | None:
    """`exif` without the tags above (None when nothing is left)."""
    if not exif:
        return exif
    # Imported here: Pillow loads only where a picture is read or written.
    from PIL import Image

    ex = Image.Exif()
    ex.load(exif)
    sub = dict(ex.get_ifd(_EXIF_IFD))           # read before IFD0 changes (Pillow loads it lazily)
    for tag in IFD0_TAGS:
        ex.pop(tag, None)
    ex.pop(_EXIF_IFD, None)
    kept = {t: v for t, v in sub.items() if t not in EXIF_TAGS}
    if kept:
        ex.get_ifd(_EXIF_IFD).update(kept)
    return ex.tobytes() if len(ex) or kept else None


#: container tags of a video that locate or identify (ffmpeg's names, lower case as it lists them)
VIDEO_TAGS = ("location", "location-eng", "com.apple.quicktime.location.iso6709", "com.apple.quicktime.make",
              "com.apple.quicktime.model", "com.android.manufacturer", "com.android.model", "artist", "author")
