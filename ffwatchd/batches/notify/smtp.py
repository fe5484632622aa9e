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
    client = smtplib.SMTP(timeout=smtp.timeout)         # not connected yet: the deadline covers it
    client._host = smtp.server          # what SMTP(host) sets: STARTTLS checks the certificate for it
    expired = threading.Event()

    def cut_off() -> None:              # the deadline: whatever the exchange waits on ends now
        expired.set()
        sock = client.sock             # after STARTTLS, the TLS socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    timer = threading.Timer(limit, cut_off)
    timer.daemon = True
    timer.start()
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
