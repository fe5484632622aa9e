"""Before a worker uses a job's files: are the sources still the ones ingest recorded?

Sources are recorded by real path and sha256 at ingest; a worker checks both again (and the
allowed roots, and that no link lies on the way) so that provenance never names a file that
was not the one used.
"""

from __future__ import annotations

import errno
from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.filing.sharepaths import folder_roots
from ffwatchd.fs import safefs
from ffwatchd.fs.hashing import TRANSIENT_ERRNOS, SourceHashes
from ffwatchd.fs.safefs import is_within
from ffwatchd.spec.sidecar import allowed_roots
from ffwatchd.store import Job

_HINT = "run `ffwatchd jobs retry {id}` to run it with the sidecar and sources as they are now"


def check_sources(watch: WatchSettings, job: Job, hashes: SourceHashes) -> JobError | None:
    """None when every recorded source is still inside an allowed root, reached without links
    and has its recorded sha256; else `source_changed` (permanent), or `io` (transient) when
    the share is in trouble."""
    roots = allowed_roots(watch)
    here = {k: Path(v) for k, v in folder_roots(watch, real=True).items()
            if k == "inbox" or k.startswith("source_roots[")}
    for entry in job.sources:
        path, want, role = Path(str(entry.get("path"))), entry.get("sha256"), entry.get("role", "source")
        root = here.get(str(entry.get("root")))
        if root is not None and entry.get("rel") is not None:     # recorded portably: this host's mount
            path = root / str(entry["rel"])
        else:
            root = next((r for r in roots if path != r and is_within(path, r)), None)
        what = f"{role} {path}"
        if root is None or path == root or not is_within(path, root):
            return _changed(job, f"{what} is no longer inside the inbox or a configured source root")
        try:
            digest = hashes.sha256(path, root)
        except safefs.LinkInPath as e:
            return _changed(job, f"{what}: {e.filename} is now a symbolic link; it was not followed")
        except safefs.NotRegular as e:
            return _changed(job, f"{what} is now {e.what}")
        except FileNotFoundError:
            return _changed(job, f"{what} is gone")
        except OSError as e:
            if e.errno in TRANSIENT_ERRNOS or e.errno == errno.EINTR:
                return JobError("io", f"{what} cannot be read now: {e.strerror or e}", transient=True)
            return _changed(job, f"{what} cannot be read: {e.strerror or e}")
        if digest != want:
            return _changed(job, f"{what} changed after the job was queued (sha256 {str(want)[:12]}… "
                                 f"recorded, {digest[:12]}… now)")
    return None


def _changed(job: Job, message: str) -> JobError:
    return JobError("source_changed", f"{message}; {_HINT.format(id=job.id)}", transient=False)
