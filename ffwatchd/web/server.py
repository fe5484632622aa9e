"""The web listener: the page, its JSON endpoints and its actions, on a listener of its own
(`web: {listen, token_file}`), in threads of the supervisor. It reads the job table through a
store of its own, so a page left open costs the workers nothing but its queries."""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

from ffwatchd.config.settings import Settings
from ffwatchd.fs.safefs import read_regular
from ffwatchd.ops.documents import to_json
from ffwatchd.ops.tablereads import TableReads
from ffwatchd.store import STATES, JobQueue, NotFound, Unreachable, store_errors
from ffwatchd.web import pages
from ffwatchd.web.actions import ActionError, run_action
from ffwatchd.web.auth import check_action, host_allowed, operator_of
from ffwatchd.web.render import Renderer

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
REPORT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'none'; sandbox"
MAX_BODY = 4096
MAX_LIMIT = 10000
REPORT_MAX = 256 * 2**20

GET_ROUTES: list[tuple[re.Pattern, str]] = [(re.compile(p), name) for p, name in [
    (r"/", "page_overview"), (r"/fragment/overview", "fragment_overview"),
    (r"/jobs/(\d+)", "page_job"), (r"/fragment/jobs/(\d+)", "fragment_job"),
    (r"/batches/(\d+)/report", "report"), (r"/static/([a-z]+\.(?:js|css))", "static"),
    (r"/api/overview", "api_overview"), (r"/api/status", "api_status"),
    (r"/api/jobs", "api_jobs"), (r"/api/jobs/(\d+)", "api_job"),
    (r"/api/batches", "api_batches"), (r"/api/batches/(\d+)", "api_batch")]]
POST_ROUTE = re.compile(r"/api/(jobs|watches)/([^/]+)/(retry|cancel|priority|pause|resume)")
NOUN = {"jobs": "job", "watches": "watch"}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class WebApp:
    """What the handlers need: the current settings (a reload changes them), a store, and a
    callback when an action may have made work (wakes this host's idle workers)."""
    settings: Callable[[], Settings]
    store: JobQueue
    on_change: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        self.renderer = Renderer()
        self.reads = TableReads()                 # the page never hangs on a table that is away
        self._last_overview: dict[str, Any] | None = None

    @property
    def lease(self) -> float:
        return self.settings().workers.lease

    def overview(self) -> dict[str, Any]:
        """The overview; while the job table is out of reach, the last one read with since when."""
        s = self.settings()
        try:
            doc = self.reads.read(lambda: pages.overview(self.store, s.state_dir, s.workers.lease,
                                                         actions=bool(s.web.token), watches=s.watches))
        except (TimeoutError, *store_errors()) as e:
            away = self.store.unreachable() or Unreachable(time.time(), str(e))
            return pages.unreachable_overview(self._last_overview, self.store, s.state_dir, away,
                                              actions=bool(s.web.token))
        self._last_overview = doc
        return doc


class Handler(BaseHTTPRequestHandler):
    server_version = "ffwatchd"
    timeout = 30            # seconds a connection may idle (a slow client holds no thread for ever)
    app: WebApp          # set on the subclass made per server

    # -- plumbing --------------------------------------------------------------------------

    def version_string(self) -> str:
        """The Server header: the product alone (the base class adds Python's version after a space)."""
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:      # the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, ctype: str, csp: str = CSP) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, status: int = 200) -> None:
        self._send(status, (to_json(data) + "\n").encode(), "application/json; charset=utf-8")

    def _html(self, text: str, status: int = 200) -> None:
        self._send(status, text.encode(), "text/html; charset=utf-8")

    def _query(self) -> dict[str, str]:
        q = parse_qs(urlsplit(self.path).query)
        return {k: v[-1] for k, v in q.items()}

    def _dispatch(self, fn: Callable[[], None]) -> None:
        try:
            if not host_allowed(self.headers.get("Host"), self.app.settings().web.hosts):
                raise HttpError(421, "this page is not served under that name (add it to web.hosts)")
            fn()
        except HttpError as e:
            self._json({"ok": False, "message": str(e)}, e.status)
        except NotFound as e:                # as the command line says it: "no job 99"
            what = "batch" if "/batches/" in self.path else "job"
            self._json({"ok": False, "message": f"no {what} {e.args[0]}" if e.args else "not found"}, 404)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:                   # one bad request never stops the listener
            log.exception("web: %s %s failed", self.command, self.path[:200])
            self._json({"ok": False, "message": "internal error (see the daemon's log)"}, 500)

    def do_GET(self) -> None:           # http.server's names
        self._dispatch(self._get)

    do_HEAD = do_GET

    def do_POST(self) -> None:
        self._dispatch(self._post)

    def _get(self) -> None:
        path = urlsplit(self.path).path
        for pattern, name in GET_ROUTES:
            m = pattern.fullmatch(path)
            if m:
                return getattr(self, name)(*m.groups())
        raise HttpError(404, f"no page {path[:100]!r}")

    # -- pages -----------------------------------------------------------------------------

    def page_overview(self) -> None:
        self._html(self.app.renderer.page("overview.html", self.app.overview()))

    def fragment_overview(self) -> None:
        self._html(self.app.renderer.fragment("overview_body.html", self.app.overview()))

    def _job_context(self, job_id: str) -> dict[str, Any]:
        return {"job": pages.job(self.app.store, int(job_id)), "actions": bool(self.app.settings().web.token)}

    def page_job(self, job_id: str) -> None:
        self._html(self.app.renderer.page("job.html", self._job_context(job_id)))

    def fragment_job(self, job_id: str) -> None:
        self._html(self.app.renderer.fragment("job_body.html", self._job_context(job_id)))

    def static(self, name: str) -> None:
        body, ctype = self.app.renderer.static(name)
        if body is None:
            raise HttpError(404, f"no file {name!r}")
        self._send(200, body, ctype)

    def report(self, batch_id: str) -> None:
        # Imported here: the report's thumbnails need OpenCV and Pillow; loaded where one is made.
        from ffwatchd.batches.report import report_paths

        batch = self.app.store.get_batch(int(batch_id))
        try:
            watch = self.app.settings().watch(batch.watch)
        except KeyError:
            raise HttpError(404, f"batch {batch.id} belongs to watch {batch.watch!r}, not in this config") from None
        html_path = report_paths(watch, batch.folder, batch.generation)[0]
        try:                        # below output/, never through a link
            body = read_regular(watch.output, html_path, REPORT_MAX)
        except OSError:
            raise HttpError(404, f"batch {batch.id} has no report yet") from None
        self._send(200, body, "text/html; charset=utf-8", REPORT_CSP)

    # -- JSON: the CLI's --json documents --------------------------------------------------

    def api_overview(self) -> None:
        self._json(self.app.overview())

    def api_status(self) -> None:
        s = self.app.settings()
        self._json(pages.status(self.app.store, s.state_dir, s.workers.lease))

    def _filters(self, states: tuple[str, ...]) -> dict[str, Any]:
        q = self._query()
        state, watch = q.get("state") or None, q.get("watch") or None
        if state is not None and state not in states:
            raise HttpError(400, f"state must be one of {', '.join(states)}")
        if watch is not None and watch not in {w.name for w in self.app.settings().watches}:
            raise HttpError(400, f"no watch named {watch!r} in the config")
        try:
            limit = int(q.get("limit", "50"))
        except ValueError:
            raise HttpError(400, "limit must be a number") from None
        if not 1 <= limit <= MAX_LIMIT:
            raise HttpError(400, f"limit must be 1 to {MAX_LIMIT}")
        return {"state": state, "watch": watch, "limit": limit}

    def api_jobs(self) -> None:
        self._json(pages.jobs(self.app.store, **self._filters(STATES)))

    def api_job(self, job_id: str) -> None:
        self._json(pages.job(self.app.store, int(job_id)))

    def api_batches(self) -> None:
        self._json(pages.batches(self.app.store, **self._filters(("open", "finished"))))

    def api_batch(self, batch_id: str) -> None:
        self._json(pages.batch(self.app.store, int(batch_id)))

    # -- actions ---------------------------------------------------------------------------

    def _post(self) -> None:
        path = urlsplit(self.path).path
        m = POST_ROUTE.fullmatch(path)
        if not m:
            raise HttpError(404, f"no action {path[:100]!r}")
        what, target, verb = m.group(1), unquote(m.group(2)), m.group(3)
        settings = self.app.settings()
        who = operator_of(self.headers, self.client_address[0])
        verdict = check_action(settings.web.token, self.headers)
        if not verdict.ok:
            log.warning("web: %s of %s %s refused, asked by %s: %s", verb, NOUN[what], target[:100], who,
                        verdict.reason)
            raise HttpError(403, verdict.reason)
        body = self._body()
        try:
            message = run_action(self.app.store, settings, what, target, verb, body, who)
        except ActionError as e:
            log.warning("web: %s of %s %s not done, asked by %s: %s", verb, NOUN[what], target[:100], who, e)
            raise HttpError(e.status, str(e)) from None
        if what == "jobs":                  # a watch's verb logs its own line (ops/jobverbs.py)
            log.info("web: %s of %s %s, asked by %s: %s", verb, NOUN[what], target, who, message)
        self.app.on_change()
        self._json({"ok": True, "message": message})

    def _body(self) -> dict[str, Any]:
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise HttpError(400, "Content-Length is no number") from None
        if n < 0:
            raise HttpError(400, "Content-Length is negative")
        if n > MAX_BODY:
            raise HttpError(413, "request body too large")
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            raise HttpError(400, "the body must be JSON") from None
        if not isinstance(data, dict):
            raise HttpError(400, "the body must be a JSON object")
        return data


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer is no error of the daemon's (the base class printed
        its traceback on stderr, in the journal); anything else is logged with its traceback."""
        exc = sys.exc_info()[1]
        who = client_address[0] if isinstance(client_address, tuple) and client_address else client_address
        if isinstance(exc, (ConnectionError, TimeoutError)):
            log.debug("web: %s went away before its answer was sent: %s", who, exc)
        else:
            log.error("web: a request from %s failed", who, exc_info=True)


class WebServer:
    """The listener in a thread; `start` raises OSError when the address is taken."""

    def __init__(self, app: WebApp) -> None:
        self.app = app
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> tuple[str, int]:
        handler = type("BoundHandler", (Handler,), {"app": self.app})
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("WebHTTPServer", (_HTTPServer,), {"address_family": family})
        self._server = server_class((host, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="web", daemon=True)
        self._thread.start()
        bound_host, bound_port = self._server.server_address[:2]
        log.info("web page on http://%s:%d/", f"[{bound_host}]" if ":" in bound_host else bound_host, bound_port)
        return bound_host, bound_port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
