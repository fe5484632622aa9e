"""ops: what operators look at and the housekeeping rules. The documents `status`, `jobs` and
`batches` print with --json, also served by the page (documents); the operator's verbs (jobverbs);
Prometheus metrics (metrics, metrics_labels, metrics_scrape); reads of the job table with a deadline
(tablereads); retention by the filing ledger (retention); the disk guard (diskguard); `ffwatchd
check` (checks); worker counts per GPU (gpusizing) and the GPU install checks (install); the job
table's schema upgraded, the one place that migrates it (upgrade); the status file (statusfile);
the orchestrator's probes /livez and /readyz (health).

May import: batches, watch, filing, faces, media, config, spec, store, fs, errors, logs."""
