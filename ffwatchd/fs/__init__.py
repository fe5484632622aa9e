"""fs: safe file-system primitives every stage shares: opening below a root without following
links (safefs), atomic writes, modes and fsync (writefs), which filesystem a path is on (mounts),
the version of a file (version) and its sha256 (hashing).

Owns no state but bounded caches of hashes. May import: ffwatchd.errors and ffwatchd.cache only."""
