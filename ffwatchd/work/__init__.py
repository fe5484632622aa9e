"""work: a worker process and the job it runs. The worker's main loop (worker), one job from claim
to filing (runner) and what became of it (outcome), videos (videojob), lease heartbeats
(heartbeats), what a failure becomes (failing), re-checks before a job runs (verify), claiming
ahead (prefetch), bench timings (benchstage).

May import: ops (disk guard), batches (thumbnails), watch (hashing), filing, faces, media,
config, spec, store, fs, errors, logs."""
