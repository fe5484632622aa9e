"""ops: what operators look at and the housekeeping rules. Prometheus metrics (metrics,
metrics_labels, metrics_scrape), reads of the job table with a deadline (tablereads), retention by
the filing ledger (retention), the disk guard (diskguard), `ffwatchd check` (checks), the GPU
install checks (install).

May import: batches, watch, filing, faces, media, config, spec, store, fs, errors, logs."""
