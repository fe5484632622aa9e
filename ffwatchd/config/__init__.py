"""config: the config file -> validated, frozen settings (load); each key stated once on the
settings field it fills (keys, settings), the docs' key tables made from them (docs); value parsers
and the reader that records every problem by key path (values); the notification sections (notify),
`web:` (web), public paths (public).

May import: spec, store (queue URLs), fs, errors."""
