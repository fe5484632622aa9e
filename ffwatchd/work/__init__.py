"""work: a worker process and the job it runs. The worker process (worker) and its loop: claims,
claim-ahead, filings in the background (workloop); what it tells the supervisor (events); one job
from claim to filing (runner) and what became of it (outcome), videos (videojob), lease heartbeats
(heartbeats), what a failure becomes (failing), re-checks before a job runs (verify), the next image
decoded ahead (prefetch), the jobs it works on, readable after it died (touched), bench timings
(benchstage).

May import: ops (disk guard), batches (thumbnails), filing, faces, media, config, spec, store, fs,
errors, logs."""
