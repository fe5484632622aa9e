"""web: the operator's page, served by the daemon on its own listener (`web:` in the config).
The listener and its routes (server), what the page shows, built from the documents the
commands print with --json (pages, over ops/documents.py), the templates and static files
(render), the actions an operator may take with the configured token (actions, auth), and
what the page never shows (redact).

May import: work, ops, batches, watch, filing, faces, media, config, spec, store, fs, errors,
logs. Only daemon and cli import web."""
