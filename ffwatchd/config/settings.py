"""The frozen settings dataclasses a validated config becomes (built by load.py, read everywhere);
each field that is a config key states it once (keys.setting)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ffwatchd.config.keys import REQUIRED, setting
from ffwatchd.config.notify import NotifySettings, SmtpSettings, WatchNotify
from ffwatchd.config.values import (
    Reader,
    boolean,
    choice,
    ffmpeg_path,
    glob_patterns,
    group_id,
    http_url,
    int_at_least,
    listen_address,
    octal_mode,
    per_gpu_value,
    positive_duration,
)
from ffwatchd.config.web import WebSettings
from ffwatchd.faces.models import Model
from ffwatchd.faces.registry import known_models
from ffwatchd.fs.writefs import Perms
from ffwatchd.spec.values import parse_duration, parse_size, priority_value
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


WATCH_MODES = ("auto", "inotify", "poll")
PROVIDERS = ("cuda", "cpu")
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
LOG_STREAMS = ("stderr", "stdout")
_PATH = Reader.path_value                 # a path; relative ones resolve against the config's folder


@dataclass(frozen=True)
class WatchSettings:
    name: str = setting(REQUIRED, None, "letters, digits, _ . -; unique", shown="watchN (N: its place in the list)")
    inbox: Path = setting(REQUIRED, _PATH, "where people drop files (subfolders too) and ffwatch.yaml sidecars")
    output: Path = setting(REQUIRED, _PATH, "results, at the same relative path as the input")
    done: Path = setting(REQUIRED, _PATH, "originals after success")
    failed: Path = setting(REQUIRED, _PATH, "originals after final failure, with <name>.error.json")
    mode: str = setting("auto", choice(WATCH_MODES), f"{' | '.join(WATCH_MODES)}; auto polls on nfs, cifs/smb3 "
                                                     "and fuse mounts")
    poll_interval: float = setting(5.0, positive_duration, "how often polling mode looks (poll mode only)")
    rescan_interval: float = setting(600.0, positive_duration, "full rescan as a safety net for missed events")
    settle: float = setting(10.0, parse_duration, "size, mtime and inode unchanged this long: the copy has finished")
    sidecar_wait: float = setting(120.0, parse_duration, "a file without a sidecar waits this long for one, "
                                                         "then fails as no_sidecar")
    unfinished_wait: float = setting(600.0, parse_duration, "a file whose content ends early waits at most this "
                                                            "long in all, then fails as truncated")
    include: tuple[str, ...] = setting(DEFAULT_INCLUDE, glob_patterns, "glob patterns of the files that are inputs")
    ignore: tuple[str, ...] = setting(DEFAULT_IGNORE, glob_patterns, "glob patterns never treated as inputs, "
                                                                     "nor logged (partial copies, SMB clients' files)")
    source_roots: tuple[Path, ...] = setting((), None, "extra folders sidecar `sources:` may point into "
                                                       "(besides the inbox)")
    ingest: bool = setting(True, boolean, "false: another host watches this share; this host's workers only "
                                          "process its jobs")
    make_folders: bool = setting(True, boolean, "output/, done/, failed/ are ffwatchd's: made when missing; "
                                                "false: their owner makes them, and jobs wait")
    batch_quiet: float = setting(60.0, parse_duration, "a batch is finished after this long without news "
                                                       "(a sidecar may change it)")
    batch_quiet_max: float = setting(3600.0, parse_duration, "the most a sidecar's batch_quiet may ask for")
    priority_max: int = setting(10, priority_value, "high | normal | low: sidecar priorities above it are "
                                                    "lowered to it", shown="high")
    starvation_age: float = setting(1800.0, positive_duration, "a low-priority job queued this long is raised "
                                                               "to normal")
    notify: WatchNotify = setting(WatchNotify(), None, "what sidecars may ask for (watches[].notify); "
                                                       "without it: no notifications")
    public: dict = setting(None, None, "role (inbox, output, done, failed) -> the prefix people open it by",
                           factory=dict)
    defaults: dict = setting(None, None, "sidecar settings every ffwatch.yaml in this watch merges over "
                                         "(deep-copied, never shared)", factory=dict)
    file_mode: int = setting(0o664, octal_mode(0o666), "mode of what ffwatchd writes on the share "
                                                       "(quoted octal), set explicitly, not by the umask",
                             shown='"0664"')
    dir_mode: int = setting(0o775, octal_mode(0o7777), "mode of the folders ffwatchd makes there", shown='"0775"')
    group: int | None = setting(None, group_id, "group (name or gid) given to all of them; none: the process's")

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
    devices: tuple[str, ...] = setting(("cpu",), None, "cpu (one worker process an entry), or a CUDA device id "
                                                       "(0, 1, ...); [] = watch only")
    per_gpu: int | None = setting(None, per_gpu_value, "worker processes per CUDA device: auto (from cores, host "
                                                       "and GPU memory; see `ffwatchd check`) or 1..64", shown="auto")
    providers: tuple[str, ...] = setting(PROVIDERS, None, f"onnxruntime providers in order ({', '.join(PROVIDERS)})")
    cpu_threads: int = setting(0, int_at_least(0), "onnxruntime intra-op threads on CPU; 0: its own choice")
    max_attempts: int = setting(3, int_at_least(1), "transient failures retry up to this many attempts in all")
    retry_backoff: float = setting(30.0, parse_duration, "wait before a retry (doubles with each attempt)")
    lease: float = setting(60.0, positive_duration, "a claimed job goes back to the queue if its worker stops "
                                                    "heartbeating this long")
    job_timeout: float = setting(1800.0, positive_duration, "a job running longer fails as timeout and its worker "
                                                            "is replaced")
    grace_period: float = setting(30.0, parse_duration, "on SIGTERM a running job may finish this long, else it "
                                                        "goes back to the queue")
    ram_limit: int = setting(8 * 2**30, parse_size, "per worker process (address space); over it the job fails "
                                                    "as memory")
    vram_limit: int = setting(12 * 2**30, parse_size, "per worker, handed to the CUDA provider as gpu_mem_limit")
    max_pixels: int = setting(80_000_000, int_at_least(1), "per image or video frame; bigger inputs fail as "
                                                           "too_large before decoding")
    recycle_after: int = setting(500, int_at_least(1), "a worker process is replaced after this many jobs "
                                                       "(bounds leaks)")
    video_segment: float = setting(30.0, positive_duration, "longest video segment (seconds of video); a crashed "
                                                            "job resumes at its first unfinished one")


@dataclass(frozen=True)
class MetricsSettings:
    enabled: bool = setting(True, boolean, "false: no metrics endpoint")
    host: str = setting("127.0.0.1", listen_address, "host:port of the Prometheus endpoint (/metrics)",
                        name="listen", into=("host", "port"), shown='"127.0.0.1:9808"')
    port: int = 9808


@dataclass(frozen=True)
class RetentionSettings:
    interval: float = setting(600.0, positive_duration, "how often housekeeping runs")
    temp_max_age: float = setting(6 * 3600.0, parse_duration, "temp folders of finished or abandoned jobs")
    done_max_age: float = setting(7 * 86400.0, parse_duration, "originals in done/, counted from their filing "
                                                               "(never mtime)")
    failed_max_age: float = setting(30 * 86400.0, parse_duration, "originals and error reports in failed/, "
                                                                  "likewise")
    jobs_max_age: float = setting(90 * 86400.0, parse_duration, "finished job rows, sent or given-up "
                                                                "notifications, and the numbered reports of "
                                                                "inbox root batches finished so long ago")
    output_max_age: float = setting(0.0, parse_duration, "results in output/, counted from their filing; 0: kept",
                                    shown="0")
    min_free_disk: int = setting(5 * 2**30, parse_size, "below this on the output or temp filesystem, no new "
                                                        "job is claimed")


@dataclass(frozen=True)
class LogSettings:
    level: str = setting("info", choice(LOG_LEVELS), " | ".join(LOG_LEVELS))
    format: str = setting("text", choice(LOG_FORMATS), f"{' | '.join(LOG_FORMATS)}")
    stream: str = setting("stderr", choice(LOG_STREAMS), f"{' | '.join(LOG_STREAMS)}: stderr for journald, stdout "
                                                         "for a container's log collector")


@dataclass(frozen=True)
class QueueSettings:
    """Where the job table lives: SQLite in state_dir (url None) or a PostgreSQL URL."""
    url: str | None = setting(None, None, "postgresql://user@host:5432/dbname (never logged with its password)")
    password_file: Path | None = setting(None, None, "a file holding the password; else $FFWATCHD_QUEUE_PASSWORD, "
                                                     "else libpq's $PGPASSWORD or ~/.pgpass")

    @property
    def kind(self) -> str:
        return "sqlite" if self.url is None else "postgres"

    def describe(self) -> str:
        """Safe to log and show: the URL without its password."""

        return "sqlite (state_dir/ffwatchd.db)" if self.url is None else redact_url(self.url)


@dataclass(frozen=True)
class C2paSettings:
    """`provenance.c2pa`: sign every changed output with this certificate chain and key."""
    cert: Path = setting(REQUIRED, _PATH, "the certificate chain (PEM)")
    key: Path = setting(REQUIRED, _PATH, "its private key (PEM)")
    timestamp_url: str | None = setting(None, http_url, "an RFC 3161 time-stamp authority")


@dataclass(frozen=True)
class Settings:
    source: Path | None
    state_dir: Path = setting(REQUIRED, _PATH, "ffwatchd.db (SQLite, WAL) lives here: a local disk, never the share")
    temp_dir: Path = setting(REQUIRED, _PATH, "per-job temp folders; local disk, outside every inbox")
    models_dir: Path = setting(REQUIRED, _PATH, "model files (`ffwatchd models list`, `ffwatchd models fetch`)")
    watches: tuple[WatchSettings, ...] = setting(REQUIRED, None, "the watched folders, a list (watches[])")
    workers: WorkerSettings = setting(WorkerSettings(), None, "the worker processes (workers)")
    metrics: MetricsSettings = setting(MetricsSettings(), None, "the Prometheus endpoint (metrics)")
    retention: RetentionSettings = setting(RetentionSettings(), None, "what housekeeping removes (retention)")
    log: LogSettings = setting(LogSettings(), None, "the log (log)")
    models: tuple[Model, ...] = setting((), None, "custom models besides the built-in ones (models.NAME), and "
                                                  "licences_allowed", shown="{}")
    licences_allowed: tuple[str, ...] | None = None   # models.licences_allowed; None: any licence
    ffmpeg: str | None = setting(None, ffmpeg_path, "the ffmpeg executable; else $FFMPEG_BINARY, `ffmpeg` on PATH, "
                                                    "then imageio-ffmpeg's")
    provenance: bool = setting(True, None, "true | false (what was done, in every changed output's metadata), "
                                           "or {metadata, c2pa} (provenance)")
    c2pa: C2paSettings | None = None      # provenance.c2pa; None: C2PA signing is off
    smtp: SmtpSettings | None = setting(None, None, "the mail server for e-mail notifications (smtp)")
    notify: NotifySettings = setting(NotifySettings(), None, "delivery of webhooks and e-mails (notify)")
    queue: QueueSettings = setting(QueueSettings(), None, "the job table: sqlite (state_dir/ffwatchd.db, one host) "
                                                          "or {url, password_file} (queue)", shown="sqlite")
    web: WebSettings = setting(WebSettings(), None, "the operator's page (web); without the section: no page")

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
