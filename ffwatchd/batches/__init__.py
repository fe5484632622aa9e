"""batches: a folder with its sidecar as one batch. The tracker that keeps reports fresh and
finishes batches (tracker); the report page and JSON (report), its thumbnails (thumbs) and its list
of files the batch did not take (nottaken); the zip (package); the durable outbox with its senders
(notify/).

May import: filing, config, spec, store, fs, errors."""
