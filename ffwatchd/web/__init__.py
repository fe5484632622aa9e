"""web: the operator's page, served by the daemon on its own listener (`web:` in the config).
The documents behind `status`, `jobs list|show` and `batches list|show --json` (documents), the
same documents as JSON endpoints and as a page rendered from Jinja2 templates (server, pages),
the actions an operator may take with the configured token (actions, auth), and what the page
never shows (redact).

May import: work, ops, batches, watch, filing, faces, media, config, spec, store, fs, errors,
logs. Only daemon and cli import web; this module imports nothing, so a command that only needs
the documents does not load Jinja2."""
