"""The frozen settings dataclasses a validated config becomes (built by load.py, read everywhere)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ffwatchd.config.notify import NotifySettings, SmtpSettings, WatchNotify
from ffwatchd.config.web import WebSettings
from ffwatchd.faces.models import Model
from ffwatchd.faces.registry import known_models
from ffwatchd.fs.writefs import Perms
from ffwatchd.store.urls import redact_url

DEFAULT_INCLUDE = ("*.jpg", "*.jpeg", "*.png", "*.webp", "*.bmp", "*.tif", "*.tiff",
                   "*.heic", "*.heif", "*.hif",                          # phones (pillow-heif)
                   "*.dng", "*.nef", "*.nrw", "*.cr2", "*.arw", "*.pef", "*.orf", "*.rw2", "*.raf",  # RAW (rawpy)
                   "*.mp4", "*.mov", "*.mkv", "*.webm")
# Partial copies and what SMB clients leave beside files (macOS: `._*` AppleDouble, `.DS_Store`,
# `.localized`, all under `.*`; Windows: Thumbs.db, desktop.ini, the recycle bin; Office: `~$*`,
# `~*.tmp`): never inputs, left alone, not logged.
DEFAULT_IGNORE = (".*", "*.part", "*.tmp", "*.crdownload", "~$*", "Thumbs.db", "ehthumbs.db",
                  "desktop.ini", "$RECYCLE.BIN", "System Volume Information")


@dataclass(frozen=True)
class WatchSettings:
    name: str
    inbox: Path
    output: Path
    done: Path
    failed: Path
    mode: str = "auto"
    poll_interval: float = 5.0
    rescan_interval: float = 600.0
    settle: float = 10.0
    sidecar_wait: float = 120.0
    unfinished_wait: float = 600.0            # a file whose content ends early waits at most this long
    include: tuple[str, ...] = DEFAULT_INCLUDE
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    source_roots: tuple[Path, ...] = ()
    ingest: bool = True                       # false: this host's workers serve the watch, others watch it
    make_folders: bool = True                 # output/, done/, failed/ are the daemon's: made when missing
    batch_quiet: float = 60.0                 # a batch is finished after this long without news
    batch_quiet_max: float = 3600.0           # the most a sidecar's batch_quiet may ask for
    priority_max: int = 10                    # sidecar priorities above it are lowered to it
    starvation_age: float = 1800.0            # a low-priority job queued this long is raised to normal
    notify: WatchNotify = WatchNotify()
    public: dict = field(default_factory=dict, hash=False, compare=True)   # role -> what people open it by
    # A sidecar mapping (see sidecar.py); deep-copied, never shared with callers.
    defaults: dict = field(default_factory=dict, hash=False, compare=True)
    file_mode: int = 0o664        # what ffwatchd writes on the share, set explicitly (not by umask)
    dir_mode: int = 0o775
    group: int | None = None      # gid given to what ffwatchd writes there (None: the process's)

    @property
    def perms(self) -> Perms:
        return Perms(self.file_mode, self.dir_mode, self.group)

    def folders(self) -> dict[str, Path]:
        return {"inbox": self.inbox, "output": self.output, "done": self.done, "failed": self.failed}

    def shown_path(self, path: str | Path | None) -> str | None:
        """`path` as people on the share open it (the watch's `public:` prefixes), else as is."""
        from ffwatchd.config.public import public_path

        return public_path(self.folders(), self.public, path)


@dataclass(frozen=True)
class WorkerSettings:
    devices: tuple[str, ...] = ("cpu",)       # "cpu" or a CUDA device id as a string
    per_gpu: int | None = None                # worker processes per CUDA device; None: auto (ops/gpusizing.py)
    providers: tuple[str, ...] = ("cuda", "cpu")
    cpu_threads: int = 0                      # 0: onnxruntime's choice
    max_attempts: int = 3
    retry_backoff: float = 30.0
    lease: float = 60.0
    job_timeout: float = 1800.0
    grace_period: float = 30.0                # SIGTERM: how long a running job may finish
    ram_limit: int = 8 * 2**30
    vram_limit: int = 12 * 2**30
    max_pixels: int = 80_000_000
    recycle_after: int = 500
    video_segment: float = 30.0               # longest video segment (seconds of video; resume unit)


@dataclass(frozen=True)
class MetricsSettings:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 9808


@dataclass(frozen=True)
class RetentionSettings:
    interval: float = 600.0
    temp_max_age: float = 6 * 3600.0
    done_max_age: float = 7 * 86400.0
    failed_max_age: float = 30 * 86400.0
    jobs_max_age: float = 90 * 86400.0
    output_max_age: float = 0.0               # results in output/, counted from their filing; 0: kept
    min_free_disk: int = 5 * 2**30


@dataclass(frozen=True)
class LogSettings:
    level: str = "info"
    format: str = "text"


@dataclass(frozen=True)
class QueueSettings:
    """Where the job table lives: SQLite in state_dir (url None) or a PostgreSQL URL."""
    url: str | None = None
    password_file: Path | None = None

    @property
    def kind(self) -> str:
        return "sqlite" if self.url is None else "postgres"

    def describe(self) -> str:
        """Safe to log and show: the URL without its password."""

        return "sqlite (state_dir/ffwatchd.db)" if self.url is None else redact_url(self.url)


@dataclass(frozen=True)
class C2paSettings:
    """`provenance.c2pa`: sign every changed output with this certificate chain and key."""
    cert: Path
    key: Path
    timestamp_url: str | None = None


@dataclass(frozen=True)
class Settings:
    source: Path | None
    state_dir: Path
    temp_dir: Path
    models_dir: Path
    watches: tuple[WatchSettings, ...]
    workers: WorkerSettings = WorkerSettings()
    metrics: MetricsSettings = MetricsSettings()
    retention: RetentionSettings = RetentionSettings()
    log: LogSettings = LogSettings()
    models: tuple[Model, ...] = ()            # the config's custom models (faces/models.py)
    licences_allowed: tuple[str, ...] | None = None   # models.licences_allowed; None: any licence
    ffmpeg: str | None = None
    provenance: bool = True               # XMP/IPTC/PNG/MP4-tag provenance on changed outputs
    c2pa: C2paSettings | None = None      # None: C2PA signing is off
    smtp: SmtpSettings | None = None
    notify: NotifySettings = NotifySettings()
    queue: QueueSettings = QueueSettings()
    web: WebSettings = WebSettings()

    def known_models(self) -> dict[str, str]:
        """Model name -> kind, built-in and custom."""
        return known_models(self.models)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "ffwatchd.db"

    def watch(self, name: str) -> WatchSettings:
        for w in self.watches:
            if w.name == name:
                return w
        raise KeyError(name)
