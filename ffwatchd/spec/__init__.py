"""spec: what a job asks for. The sidecar schema and its validation (jobspec), sidecars on disk
(sidecar), YAML people write (safeyaml), a file's type by its first bytes (sniff), whether a file's
content is all there (complete), and the value parsers the sidecar and the config share (values).

May import: fs, errors. What it reads of a watch's settings is a Protocol (sidecar.SidecarWatch)."""
