"""E-mail delivery over SMTP: STARTTLS when configured, credentials from a file read at send time."""

from __future__ import annotations

import smtplib
import ssl
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


def send(smtp: SmtpSettings, to: list[str], subject: str, text: str, message_id: str) -> list[str]:
    """Send one plain-text message; returns the recipients the server refused (when it took
    the others). Raises DeliveryError when nothing was sent."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = smtp.sender, ", ".join(to), shown(subject)   # one line, always
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = message_id
    msg.set_content(printable(text))          # a file name that is not UTF-8 shows as \xHH
    creds = read_credentials(smtp)
    try:
        with smtplib.SMTP(smtp.server, smtp.port, timeout=smtp.timeout) as client:
            client.ehlo()
            if smtp.starttls:
                context = ssl.create_default_context(cafile=str(smtp.ca_file) if smtp.ca_file else None)
                client.starttls(context=context)
                client.ehlo()
            if creds is not None:
                client.login(*creds)
            refused = client.send_message(msg)
    except (OSError, smtplib.SMTPException, ssl.SSLError) as e:
        raise DeliveryError(f"SMTP {smtp.server}:{smtp.port}: {e.__class__.__name__}: {e}") from e
    return sorted(refused)
