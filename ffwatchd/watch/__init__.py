"""watch: how a file gets into the job table. One loop per inbox (loop) over inotify or polling
(observer), start-up and periodic scans (scan), the settle tracker (settle), ingest (ingest:
sidecar, sniff, hash, dedupe, enqueue), the name rules of an inbox (inboxnames), notices for the
people on the share (notices), refusals that could not be filed yet (unfiled); all watches of a
config together (service).

May import: filing, faces, media, config, spec, store, fs, errors, logs."""
