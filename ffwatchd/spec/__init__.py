"""spec: what a job asks for. The sidecar schema and its validation (jobspec), sidecars on disk
(sidecar), YAML people write (safeyaml), a file's type by its first bytes (sniff), and the value
parsers the sidecar and the config share (values).

May import: fs, errors. Watch settings are taken as parameters (typed under TYPE_CHECKING only)."""
