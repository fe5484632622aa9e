"""config: the config file -> validated, frozen settings (load), its value parsers and the
reader that records every problem by key path (values), the notification sections (notify) and
the settings dataclasses (settings).

May import: spec, store (queue URLs), fs, errors."""
