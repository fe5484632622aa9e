"""E-mail delivery over SMTP: STARTTLS when configured, credentials from a file read at send time.

smtplib's timeout, like http.client's, applies to each socket operation, so a server that answers
one byte at a time holds a try for as long as it likes; an overall deadline is kept here, as for
webhooks: a timer shuts the connection's socket when it is over, whatever the exchange waits on."""

from __future__ import annotations

import contextlib
import smtplib
import socket
import ssl
import threading
import time
from email.message import EmailMessage
from email.utils import formatdate

from ffwatchd.batches.notify.webhook import DeliveryError
from ffwatchd.config.notify import SmtpSettings
from ffwatchd.store.names import printable, shown


def read_credentials(smtp: SmtpSettings) -> tuple[str, str] | None:
    if smtp.credentials_file is None:
        return None
    try:
        line = smtp.credentials_file.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError) as e:
        raise DeliveryError(f"SMTP credentials file {smtp.credentials_file} cannot be read: {e}") from e
    user, sep, password = line.partition(":")
    if not sep:
        raise DeliveryError(f"SMTP credentials file {smtp.credentials_file}: the first line must be USER:PASSWORD")
    return user, password


class _DeadlineSMTP(smtplib.SMTP):
    """smtplib.SMTP ended at an overall deadline: `cut_off` (the timer) shuts the socket whatever
    the exchange waits on; the connect gets no more than the time left, and a socket that comes
    after the deadline (the name resolved slowly: getaddrinfo cannot be interrupted) is closed
    before a word is said, so nothing is sent once the sender's claim may have passed on."""

    def __init__(self, deadline_at: float, **kwargs: object) -> None:
        self.deadline_at = deadline_at
        self.expired = threading.Event()
        super().__init__(**kwargs)  # type: ignore[arg-type]

    def cut_off(self) -> None:
        self.expired.set()
        sock = self.sock                # after STARTTLS, the TLS socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        left = self.deadline_at - time.monotonic()
        if left <= 0:
            self.expired.set()
            raise TimeoutError("the deadline passed before connecting")
        sock = super()._get_socket(host, port, min(timeout, left))
        self.sock = sock                # from here on the timer's cut_off reaches it
        if self.expired.is_set() or time.monotonic() >= self.deadline_at:
            self.expired.set()
            sock.close()
            raise TimeoutError("the deadline passed while connecting")
        return sock


#: the steps of one exchange that may each take `smtp.timeout`: connect and greeting, EHLO and
#: STARTTLS, AUTH, the message
SMTP_STEPS = 4


def deadline(smtp: SmtpSettings) -> float:
    """How long one try may take in all (the sender's claim on the row outlasts it)."""
    return SMTP_STEPS * smtp.timeout


def send(smtp: SmtpSettings, to: list[str], subject: str, text: str, message_id: str) -> list[str]:
    """Send one plain-text message within `deadline(smtp)`; returns the recipients the server
    refused (when it took the others). Raises DeliveryError when nothing was sent."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = smtp.sender, ", ".join(to), shown(subject)   # one line, always
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = message_id
    msg.set_content(printable(text))          # a file name that is not UTF-8 shows as \xHH
    creds = read_credentials(smtp)
    limit = deadline(smtp)
    client = _DeadlineSMTP(time.monotonic() + limit, timeout=smtp.timeout)   # not connected yet
    client._host = smtp.server          # what SMTP(host) sets: STARTTLS checks the certificate for it
    timer = threading.Timer(limit, client.cut_off)
    timer.daemon = True
    timer.start()
    expired = client.expired
    try:
        with client:
            client.connect(smtp.server, smtp.port)
            client.ehlo()
            if smtp.starttls:
                context = ssl.create_default_context(cafile=str(smtp.ca_file) if smtp.ca_file else None)
                client.starttls(context=context)
                client.ehlo()
            if creds is not None:
                client.login(*creds)
            refused = client.send_message(msg)
    except (OSError, smtplib.SMTPException, ssl.SSLError) as e:
        if expired.is_set():
            raise DeliveryError(f"SMTP {smtp.server}:{smtp.port}: no complete exchange within {limit:g} s") from e
        raise DeliveryError(f"SMTP {smtp.server}:{smtp.port}: {e.__class__.__name__}: {e}") from e
    finally:
        timer.cancel()
    return sorted(refused)
