"""Errors that reach users: each carries a kind and a plain sentence."""

from __future__ import annotations

import reprlib

# Error kinds recorded on failed jobs (docs/daemon.md, docs/operations.md).
PERMANENT_KINDS = frozenset({
    "bad_input", "no_face", "too_large", "no_sidecar", "bad_sidecar", "model_missing",
    "cancelled", "outside_inbox", "memory", "duplicate", "unreadable", "provenance", "source_changed",
    "licence",            # a model's licence is not in models.licences_allowed
    "truncated",          # its content still ended early after unfinished_wait (the copy never finished)
    "vanished",           # the original left its inbox (the inbox being there) before it was processed
    "superseded",         # the original changed after it was queued or while it was processed: its new
                          # content is its own job; not a failure of the file (batches do not count it failed)
})
#: failed jobs that are not failures of the file: left out of a batch's failed count and notifications
NOT_A_FILE_FAILURE = frozenset({"superseded"})
#: refusals on arrival for what the sidecar says or lacks: `jobs retry` takes such a job once the
#: sidecar is fixed
SIDECAR_KINDS = frozenset({"no_sidecar", "bad_sidecar"})
#: refusals on arrival for the file's own content: `jobs retry` cannot help, a new copy is needed
CONTENT_KINDS = frozenset({"bad_input", "truncated", "unreadable"})
TRANSIENT_KINDS = frozenset({
    "timeout", "worker_crashed", "internal", "io", "disk_full",
})


class JobError(Exception):
    """A job failed; `kind` is machine-readable, the message is for people."""

    def __init__(self, kind: str, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.transient = kind in TRANSIENT_KINDS if transient is None else transient

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class ConfigError(Exception):
    """A config file was refused; `problems` lists every `key.path: reason`."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        if source == "<config>":          # no file at all: nothing was invalid
            super().__init__("; ".join(problems))
        else:
            super().__init__(f"{source}: invalid config:\n" + "\n".join(f"  - {p}" for p in problems))


class NoConfigGiven(ConfigError):
    """No config named at all (no -c, no $FFWATCHD_CONFIG): a usage error, not an invalid config."""

    def __init__(self, how: str) -> None:
        super().__init__("<config>", [f"no config given: {how}"])



REPR_LIMIT = 200


def short_repr(value: object, limit: int = REPR_LIMIT) -> str:
    """repr() of a value cut to about `limit` characters: no message quotes an unbounded value
    (a hostile sidecar or config may hold megabytes in one key)."""
    r = reprlib.Repr()
    r.maxstring = r.maxother = max(20, limit // 2)
    r.maxlist = r.maxtuple = r.maxdict = r.maxset = 8
    r.maxlevel = 3
    try:
        text = r.repr(value)
    except RecursionError:
        return "<too deeply nested>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
