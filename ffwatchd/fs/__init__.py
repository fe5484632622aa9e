"""fs: safe file-system primitives every stage shares: opening below a root without following
links (safefs), atomic writes, modes and fsync (writefs), which filesystem a path is on (mounts).

Owns no state. May import: ffwatchd.errors only."""
