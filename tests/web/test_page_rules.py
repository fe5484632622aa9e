"""The web page's rules without a daemon: the token, CSRF, what is redacted, the `web:` config
keys, and the listener itself (in this process, on a real socket and a real job table)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.config.load import load_config
from ffwatchd.errors import ConfigError
from ffwatchd.store import JobStore, Use, open_store
from ffwatchd.web.auth import check_action, operator_of, same_origin
from ffwatchd.web.redact import REDACTED, redact, redact_url
from ffwatchd.web.server import WebApp, WebServer
from tests.helpers.configs import studio_config

TOKEN = "t0ken-for-the-tests-0123456789"
HOOK = "https://hooks.example.com/services/T000/B000/XXXXsecretXXXX"


# -- the token and CSRF ----------------------------------------------------------------------

def test_no_token_configured_refuses_every_action_even_with_a_token_given() -> None:
    v = check_action(None, {"Authorization": f"Bearer {TOKEN}", "Host": "h:1"})
    assert not v.ok and "read-only" in v.reason


@pytest.mark.parametrize("auth, reason", [
    (None, "no token given"), ("Basic abc", "no token given"), ("Bearer ", "no token given"),
    ("Bearer wrong-token-of-the-same-kind", "wrong token"), (f"Bearer {TOKEN}x", "wrong token"),
])
def test_a_missing_or_wrong_token_is_refused(auth: str | None, reason: str) -> None:
    headers = {"Host": "127.0.0.1:9810", **({"Authorization": auth} if auth else {})}
    v = check_action(TOKEN, headers)
    assert not v.ok and reason in v.reason


def test_the_right_token_from_the_pages_origin_or_a_script_is_allowed() -> None:
    assert check_action(TOKEN, {"Host": "127.0.0.1:9810", "Authorization": f"Bearer {TOKEN}"}).ok   # curl
    assert check_action(TOKEN, {"Host": "127.0.0.1:9810", "Authorization": f"bearer  {TOKEN} ",
                                "Origin": "http://127.0.0.1:9810", "Sec-Fetch-Site": "same-origin"}).ok


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://127.0.0.1:9811"},
    {"Origin": "file://"}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
])
def test_a_request_another_site_made_is_refused_even_with_the_token(headers: dict) -> None:
    v = check_action(TOKEN, {"Host": "127.0.0.1:9810", "Authorization": f"Bearer {TOKEN}", **headers})
    assert not v.ok and ("origin" in v.reason or "another site" in v.reason)


def test_same_origin_reads_the_host_a_proxy_passes_on() -> None:
    assert same_origin("https://ffwatchd.studio.example", "ffwatchd.studio.example")
    assert not same_origin("https://ffwatchd.studio.example", None)
    assert not same_origin("https://other.example", "ffwatchd.studio.example")


def test_who_asked_is_the_name_given_the_peer_and_the_forwarded_address() -> None:
    who = operator_of({"X-Ffwatchd-Operator": "alice\nforged line", "X-Forwarded-For": "10.0.0.7"}, "127.0.0.1")
    assert who == "'aliceforged line' from 127.0.0.1 (forwarded for 10.0.0.7)"
    assert operator_of({}, "::1") == "an unnamed operator from ::1"


# -- redaction -------------------------------------------------------------------------------

def test_webhook_urls_and_credentials_never_leave_the_listener() -> None:
    doc = {"spec": {"notify": {"webhook": HOOK, "email": ["ops@studio.example"]}},
           "deliveries": [{"channel": "webhook", "target": HOOK, "last_error": f"POST {HOOK} -> 500"},
                          {"channel": "email", "target": "ops@studio.example"}],
           "queue": "postgresql://ffwatchd:pw@db.example:5432/ffwatchd",
           "smtp": {"password": "hunter2", "credentials_file": "/etc/ffwatchd/smtp"}, "token": TOKEN,
           "path": "a/b.jpg", "n": 3}
    out = redact(doc)
    text = json.dumps(out)
    for secret in ("services", "XXXXsecretXXXX", "hunter2", "pw@", ":pw", TOKEN, "/etc/ffwatchd/smtp"):
        assert secret not in text
    assert out["spec"]["notify"]["webhook"] == f"https://hooks.example.com/{REDACTED}"
    assert out["deliveries"][0]["last_error"] == f"POST https://hooks.example.com/{REDACTED} -> 500"
    assert out["deliveries"][1]["target"] == "ops@studio.example"
    assert out["queue"] == f"postgresql://db.example:5432/{REDACTED}"
    assert out["path"] == "a/b.jpg" and out["n"] == 3
    assert redact_url("http://[::1]:8080") == "http://[::1]:8080"



def test_a_built_in_models_public_download_address_is_shown_whole(tmp_path: Path) -> None:
    """Issue 42, item 14: a job's model_missing hint on the page read `https://huggingface.co/[redacted]`;
    the built-in models' addresses and licence pages are ffwatchd's own public constants."""
    from ffwatchd.errors import JobError
    from ffwatchd.faces.models import BUILTIN_MODELS
    from ffwatchd.faces.registry import licence_problem, resolve_model

    with pytest.raises(JobError) as e:
        resolve_model("inswapper_128", tmp_path)
    url = BUILTIN_MODELS["inswapper_128"].url
    assert url in e.value.message and redact({"error": e.value.message}) == {"error": e.value.message}
    refused = licence_problem([BUILTIN_MODELS["inswapper_128"]], ["MIT"])
    assert redact(refused) == refused and "https://" in refused
    # the same host with another path, or a public address with a query after it, is cut as before
    assert redact(f"{url}?token=x") == f"https://huggingface.co/{REDACTED}"
    assert redact(f"see {url}x.") == f"see https://huggingface.co/{REDACTED}"

# -- the web: section ------------------------------------------------------------------------

def _config(tmp_path: Path, web: str) -> Path:
    return studio_config(tmp_path, web)


def _token_file(tmp_path: Path, text: str = TOKEN + "\n", mode: int = 0o600) -> Path:
    p = tmp_path / "web.token"
    p.write_text(text)
    p.chmod(mode)
    return p


def test_web_is_off_without_its_section_and_on_127_0_0_1_with_it(tmp_path: Path) -> None:
    assert not load_config(_config(tmp_path, "")).web.enabled
    w = load_config(_config(tmp_path, "web: {}\n")).web
    assert (w.enabled, w.host, w.port, w.token) == (True, "127.0.0.1", 9810, None)
    _token_file(tmp_path)
    w = load_config(_config(tmp_path, "web: {listen: '0.0.0.0:8080', token_file: web.token}\n")).web
    assert (w.host, w.port, w.token, w.token_file) == ("0.0.0.0", 8080, TOKEN, tmp_path / "web.token")
    assert TOKEN not in repr(w)


@pytest.mark.parametrize("web, text, mode, problem", [
    ("web: {listne: x}", None, 0o600, "web.listne: unknown key"),
    ("web: {listen: nope}", None, 0o600, "web.listen: 'nope' is not host:port"),
    ("web: [1]", None, 0o600, "web: must be a mapping"),
    ("web: {enabled: maybe}", None, 0o600, "web.enabled:"),
    ("web: {token_file: missing.token}", None, 0o600, "web.token_file: {tmp}/missing.token does not exist"),
    ("web: {token_file: web.token}", TOKEN, 0o644,
     "web.token_file: {tmp}/web.token is readable by every user (mode 0644)"),
    ("web: {token_file: web.token}", "short", 0o600, "the first line must be a token of at least 16"),
    ("web: {token_file: web.token}", "", 0o600, "the first line must be a token"),
])
def test_every_problem_of_the_web_section_by_key_path(tmp_path: Path, web: str, text: str | None, mode: int,
                                                      problem: str) -> None:
    if text is not None:
        _token_file(tmp_path, text, mode)
    with pytest.raises(ConfigError) as e:
        load_config(_config(tmp_path, web + "\n"))
    assert problem.format(tmp=tmp_path) in str(e.value)


def test_the_page_and_the_metrics_cannot_share_a_port(tmp_path: Path) -> None:
    p = _config(tmp_path, "web: {listen: '127.0.0.1:9808'}\n")
    p.write_text(p.read_text().replace("metrics: {enabled: false}", "metrics: {listen: '127.0.0.1:9808'}"))
    with pytest.raises(ConfigError, match="web.listen: 127.0.0.1:9808 is metrics.listen too"):
        load_config(p)


# -- the listener ----------------------------------------------------------------------------

@pytest.fixture
def served(tmp_path: Path):
    """(config path, base URL, settings holder): a listener on a free port over a real table."""
    _token_file(tmp_path)
    cfg = _config(tmp_path, "web: {listen: '127.0.0.1:0'}\n")
    holder = {"settings": load_config(cfg)}
    s = holder["settings"]
    with open_store(s, Use.WRITE) as store:
        store.enqueue(watch="studio", rel_path="<img src=x onerror=alert(1)>.jpg", size=3, mtime=1.0,
                      content_hash="h1", kind="image", spec={"notify": {"webhook": HOOK}})
    server = WebServer(WebApp(settings=lambda: holder["settings"], store=open_store(s, Use.UNCHECKED)))
    host, port = server.start("127.0.0.1", 0)
    yield cfg, f"http://{host}:{port}", holder
    server.stop()
    server.app.store.close()


def _get(url: str) -> tuple[int, dict, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def _post(url: str, headers: dict | None = None, body: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, method="POST", data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_every_response_carries_a_strict_csp_and_no_external_asset(served) -> None:
    _, base, _ = served
    for path in ("/", "/jobs/1", "/api/overview", "/static/app.js", "/static/app.css", "/nowhere"):
        status, headers, body = _get(base + path)
        csp = headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"
        assert "http://" not in body.replace(base, "")
        assert "https://" not in body.replace("https://hooks.example.com", "")
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as raw:      # the header as sent
        raw.sendall(b"GET /api/overview HTTP/1.0\r\nHost: x\r\n\r\n")
        head = b"".join(iter(lambda: raw.recv(65536), b"")).split(b"\r\n\r\n")[0]
    assert b"\r\nServer: ffwatchd\r\n" in head, "the product alone: no Python version, no trailing space"
    status, _, page = _get(base + "/")
    assert status == 200 and "<script src=\"/static/app.js\"" in page and "<script>" not in page
    assert " style=" not in page and " on" + "click=" not in page


def test_a_file_name_with_markup_is_text_and_the_webhook_is_not_shown(served) -> None:
    _, base, _ = served
    for path in ("/", "/jobs/1", "/fragment/jobs/1"):
        _, _, body = _get(base + path)
        assert "<img src=x" not in body
        assert "hooks.example.com/services" not in body
    _, _, body = _get(base + "/jobs/1")
    assert "&lt;img src=x onerror=alert(1)&gt;.jpg" in body
    assert f"https://hooks.example.com/{REDACTED}" in body


def test_the_json_endpoints_are_the_commands_documents(served, capsys) -> None:
    cfg, base, _ = served
    assert main(["jobs", "list", "-c", str(cfg), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    _, _, api = _get(base + "/api/jobs")
    assert json.loads(api) == redact(cli)
    assert main(["jobs", "show", "1", "-c", str(cfg), "--json"]) == 0
    cli_job = capsys.readouterr().out
    assert HOOK in cli_job                              # the command is for the host's operator: unredacted
    _, _, api_job = _get(base + "/api/jobs/1")
    assert json.loads(api_job) == redact(json.loads(cli_job))
    assert main(["status", "-c", str(cfg), "--json"]) == 0
    cli_status = json.loads(capsys.readouterr().out)
    api_status = json.loads(_get(base + "/api/status")[2])
    assert api_status["counts"] == cli_status["counts"] and api_status["running"] == cli_status["running"]
    assert json.loads(_get(base + "/api/batches")[2]) == []
    assert _get(base + "/api/jobs?state=nope")[0] == 400
    missing = _get(base + "/api/jobs/99")
    assert missing[0] == 404 and json.loads(missing[2])["message"] == "no job 99"      # as `jobs show 99` says


def test_without_a_token_configured_an_action_is_403_and_nothing_changes(served) -> None:
    cfg, base, _ = served
    for path, body in (("/api/jobs/1/cancel", None), ("/api/jobs/1/priority", {"priority": "high"}),
                       ("/api/watches/studio/pause", None)):
        status, answer = _post(base + path, {"Authorization": f"Bearer {TOKEN}"}, body)
        assert status == 403 and "read-only" in answer["message"]
    with JobStore(load_config(cfg).db_path) as s:
        job = s.get(1)
        assert (job.state, job.priority) == ("queued", 0) and s.paused_watches() == {}


def test_with_the_token_actions_work_and_a_foreign_origin_is_refused(served, tmp_path: Path, caplog) -> None:
    cfg, base, holder = served
    holder["settings"] = load_config(_config(tmp_path, "web: {listen: '127.0.0.1:0', token_file: web.token}\n"))
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Ffwatchd-Operator": "alice"}
    status, answer = _post(base + "/api/jobs/1/priority", {**auth, "Origin": "http://evil.example"},
                           {"priority": "high"})
    assert status == 403 and "another origin" in answer["message"]
    status, answer = _post(base + "/api/jobs/1/priority", {**auth, "Authorization": "Bearer nope-nope-nope"},
                           {"priority": "high"})
    assert status == 403 and answer["message"] == "wrong token"
    with JobStore(holder["settings"].db_path) as s:
        assert s.get(1).priority == 0
    caplog.set_level("INFO", logger="ffwatchd.web")
    status, answer = _post(base + "/api/jobs/1/priority", {**auth, "Origin": base}, {"priority": "high"})
    assert (status, answer) == (200, {"ok": True, "message": "priority high"})
    assert _post(base + "/api/jobs/1/priority", auth, {"priority": "urgent"})[0] == 400
    assert _post(base + "/api/watches/studio/pause", auth)[0] == 200
    assert _post(base + "/api/watches/nowhere/pause", auth)[0] == 404
    status, answer = _post(base + "/api/jobs/1/retry", auth)
    assert status == 409 and "only failed or cancelled jobs can be retried" in answer["message"]
    assert _post(base + "/api/jobs/1/cancel", auth)[0] == 200
    with JobStore(holder["settings"].db_path) as s:
        assert s.get(1).state == "cancelled" and list(s.paused_watches()) == ["studio"]
    log = caplog.text
    assert "web: priority of job 1, asked by 'alice' from 127.0.0.1: priority high" in log
    assert "web: priority of job 1 refused, asked by 'alice' from 127.0.0.1: wrong token" in log
    assert "web: cancel of job 1, asked by 'alice' from 127.0.0.1: cancelled" in log
    assert TOKEN not in log
    overview = json.loads(_get(base + "/api/overview")[2])
    assert overview["actions"] is True and "studio" in overview["paused"]


def test_status_says_which_watches_an_operator_paused(served, capsys) -> None:
    cfg, _, _ = served
    assert main(["status", "-c", str(cfg)]) == 0
    assert "CLAIMING PAUSED" not in capsys.readouterr().out
    with JobStore(load_config(cfg).db_path) as s:
        s.set_watch_paused("studio", True, "paused by 'alice' from 127.0.0.1 at 2026-12-01 12:00:00")
    assert main(["status", "-c", str(cfg)]) == 0
    assert ("CLAIMING PAUSED for watch studio on every host (paused by 'alice' from 127.0.0.1 at "
            "2026-12-01 12:00:00); resume it with `ffwatchd watches resume studio` or on the web page") \
        in capsys.readouterr().out


def test_watches_pause_and_resume_on_the_command_line_as_on_the_page(served, tmp_path: Path, capsys,
                                                                      caplog) -> None:
    """Pausing needed the page and a token; `ffwatchd watches pause|resume NAME` keeps the page's
    rules (a watch of the config), its note (who, when) and its log line."""
    cfg, base, holder = served
    holder["settings"] = load_config(_config(tmp_path, "web: {listen: '127.0.0.1:0', token_file: web.token}\n"))
    caplog.set_level("INFO")
    assert main(["watches", "pause", "studio", "-c", str(cfg)]) == 0
    assert capsys.readouterr().out == "claiming of watch studio paused on every host; running jobs go on\n"
    with JobStore(load_config(cfg).db_path) as s:
        note = s.paused_watches()["studio"]
    assert note.startswith("paused by '") and f" on {socket.gethostname()} at " in note
    cli_line = next(r.getMessage() for r in caplog.records if "pause of watch studio" in r.getMessage())
    assert cli_line.startswith("command line: pause of watch studio, asked by '") and cli_line.endswith(
        ": claiming of watch studio paused on every host; running jobs go on")
    assert main(["status", "-c", str(cfg)]) == 0
    assert "CLAIMING PAUSED for watch studio" in capsys.readouterr().out
    assert main(["watches", "-c", str(cfg), "resume", "studio", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "watch": "studio",
                                                   "message": "claiming of watch studio resumed"}
    with JobStore(load_config(cfg).db_path) as s:
        assert s.paused_watches() == {}
    assert main(["watches", "pause", "nowhere", "-c", str(cfg)]) == 1
    assert "no watch named 'nowhere' in the config (watches: studio)" in capsys.readouterr().err
    caplog.clear()
    assert _post(base + "/api/watches/studio/pause", {"Authorization": f"Bearer {TOKEN}",
                                                      "X-Ffwatchd-Operator": "alice"})[0] == 200
    web_line = next(r.getMessage() for r in caplog.records if "pause of watch studio" in r.getMessage())
    assert web_line == ("web: pause of watch studio, asked by 'alice' from 127.0.0.1: claiming of watch studio "
                        "paused on every host; running jobs go on")


def test_the_overview_shows_failed_jobs_and_workers_without_their_secrets(served) -> None:
    cfg, base, _ = served
    with JobStore(load_config(cfg).db_path) as s:
        job, _ = s.enqueue(watch="studio", rel_path="hooked.jpg", size=3, mtime=1.0, content_hash="h2",
                           kind="image", spec={"notify": {"webhook": HOOK}})
        s.set_priority(1, 10)                      # job 1 runs first; this one fails
        s.claim("w:1/cpu", 60)
        s.claim("w:1/cpu", 60)
        s.fail(job.id, "w:1/cpu", error_kind="bad_input", message=f"refused by {HOOK}", transient=False)
        s.register_worker("other-host:7/0", host="other-host", pid=7, device="0", requested_provider="cuda",
                          provider="cpu")
    overview = _get(base + "/api/overview")[2]
    assert "XXXXsecretXXXX" not in overview and f"https://hooks.example.com/{REDACTED}" in overview
    doc = json.loads(overview)
    assert [j["rel_path"] for j in doc["failed"]] == ["hooked.jpg"]
    assert [(w["name"], w["counts"]["failed"]) for w in doc["watches"]] == [("studio", 1)]
    assert doc["throughput"]["failed"] == 1
    page = _get(base + "/")[2]                    # a worker of another host: no local state, still shown
    assert "other-host" in page and "(asked cuda)" in page and "XXXXsecretXXXX" not in page
    assert f"refused by https://hooks.example.com/{REDACTED}" in page


def test_a_bad_content_length_is_refused_without_reading(served, tmp_path: Path) -> None:
    import socket

    cfg, base, holder = served
    holder["settings"] = load_config(_config(tmp_path, "web: {listen: '127.0.0.1:0', token_file: web.token}\n"))
    host, port = base.removeprefix("http://").split(":")
    for length, status in (("-1", b"400"), ("x", b"400"), ("100000", b"413")):
        with socket.create_connection((host, int(port)), timeout=30) as c:
            c.sendall(f"POST /api/jobs/1/cancel HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                      f"Content-Length: {length}\r\n\r\n".encode())
            assert c.recv(100).split()[1] == status
    with JobStore(holder["settings"].db_path) as s:
        assert s.get(1).state == "queued"


def test_a_reload_takes_a_new_token_but_keeps_the_listener(tmp_path: Path) -> None:
    from ffwatchd.daemon.reloading import keep_what_needs_a_restart as _keep

    old = load_config(_config(tmp_path, "web: {listen: '127.0.0.1:9811'}\n"))
    _token_file(tmp_path)
    new = load_config(_config(tmp_path, "web: {listen: '127.0.0.1:9999', token_file: web.token}\n"))
    kept = _keep(new, old).web
    assert (kept.host, kept.port, kept.token, kept.token_file) == ("127.0.0.1", 9811, TOKEN, tmp_path / "web.token")
    assert _keep(old, new).web.token is None                 # the token file taken out: read-only again
    off = load_config(_config(tmp_path, ""))
    assert not _keep(new, off).web.enabled                   # no listener was started: none appears on reload
    from ffwatchd.daemon.reloading import needs_restart

    assert needs_restart(new, old) == ["web.listen"]          # and the reload says it needs a restart


def test_only_ip_addresses_localhost_and_the_configured_names_may_be_the_host(served, tmp_path: Path) -> None:
    import http.client

    from ffwatchd.web.auth import host_allowed

    assert host_allowed("127.0.0.1:9810", ()) and host_allowed("[::1]:9810", ()) and host_allowed("localhost", ())
    assert host_allowed("10.1.2.3", ()) and host_allowed("FFWATCHD.studio.example", ("ffwatchd.studio.example",))
    assert not host_allowed("evil.example:9810", ()) and not host_allowed(None, ()) and not host_allowed("", ())
    cfg, base, holder = served
    host, port = base.removeprefix("http://").split(":")

    def get(name: str) -> int:
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("GET", "/api/jobs", headers={"Host": name})
        status = c.getresponse().status
        c.close()
        return status
    assert get("rebound.evil.example") == 421                  # DNS rebinding: the page is not read
    assert get(f"localhost:{port}") == 200
    holder["settings"] = load_config(_config(tmp_path, "web: {hosts: [ffwatchd.studio.example]}\n"))
    assert get("ffwatchd.studio.example") == 200


def test_web_hosts_must_be_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"web.hosts: 'https://x.example' is not a host name"):
        load_config(_config(tmp_path, "web: {hosts: ['https://x.example']}\n"))
    with pytest.raises(ConfigError, match=r"web.hosts: must be a list of host names"):
        load_config(_config(tmp_path, "web: {hosts: x.example}\n"))


def test_a_client_gone_mid_answer_is_a_debug_line_and_other_errors_are_logged_not_printed(capsys, caplog) -> None:
    """A browser closing its tab while a POST was answered printed a ConnectionResetError traceback
    on the daemon's stderr (the journal): the base server's handle_error. Now a client that went
    away is one debug line; anything else is logged with its traceback, never printed raw."""
    import logging
    from http.server import BaseHTTPRequestHandler

    from ffwatchd.web.server import _HTTPServer

    server = _HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        with caplog.at_level(logging.DEBUG, logger="ffwatchd.web"):
            for exc in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe"),
                        ValueError("a bug")):
                try:
                    raise exc
                except Exception:  # noqa: BLE001 - the handler is given what a request raised
                    server.handle_error(None, ("127.0.0.1", 5555))
    finally:
        server.server_close()
    assert capsys.readouterr().err == ""
    levels = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("ffwatchd.web")]
    assert [lv for lv, _ in levels] == ["DEBUG", "DEBUG", "ERROR"], levels
    assert "127.0.0.1 went away" in levels[0][1] and caplog.records[-1].exc_info is not None


def test_a_watch_waiting_for_its_folders_is_on_the_page(served) -> None:
    import os
    import time

    from ffwatchd.ops.statusfile import write_status

    cfg, base, _ = served
    why = "output folder /srv/share/output: No such file or directory"
    write_status(load_config(cfg).state_dir, {"pid": os.getpid(), "host": "here", "started_at": time.time(),
                                              "updated_at": time.time(), "workers": [], "warnings": [],
                                              "folders_waiting": {"studio": why}})
    page = _get(base + "/")[2]
    assert f'data-folders-waiting="studio">watch studio waits for its folders: {why}' in page
    doc = json.loads(_get(base + "/api/status")[2])
    assert doc["daemon"]["folders_waiting"] == {"studio": why}
