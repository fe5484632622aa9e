"""watch: how a file gets into the job table. One loop per inbox (loop) over inotify or polling
(observer), its files one record each (files), start-up and periodic scans (scan), the settle
tracker (settle), ingest (ingest: sidecar, sniff, hash, dedupe, enqueue), a file read once for its
head and hash (hashing), the name rules of an inbox (inboxnames), notices for the people on the
share (notices), files not finished yet (unfinished), refusals that could not be filed yet
(unfiled), the waits kept over a restart (waitbook), what it counts (metrics); all watches of a
config together (service).

May import: filing, faces, media, config, spec, store, fs, errors, logs."""
