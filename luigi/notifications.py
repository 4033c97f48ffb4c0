"""Error e-mails: who gets them, what they say, and how they are sent (SMTP, SendGrid, Amazon SES or SNS).

The worker calls ``send_error_email`` when a task fails; the body comes from ``format_task_error``. Nothing
is sent without recipients, with ``[email] format = none``, or from an interactive terminal (unless
``[email] force_send``), so running a pipeline by hand does not spam anyone.
"""

from __future__ import annotations

import base64
import html
import logging
import os
import socket
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from luigi import parameter
from luigi.task import Config, Task

if TYPE_CHECKING:
    from email.mime.multipart import MIMEMultipart

__all__ = [
    "DEBUG",
    "EmailSetupError",
    "TestNotificationsTask",
    "email",
    "format_task_error",
    "generate_email",
    "send_email",
    "send_error_email",
    "sendgrid",
    "smtp",
    "wrap_traceback",
]

logger = logging.getLogger("luigi-interface")

DEFAULT_CLIENT_EMAIL = f"luigi-client@{socket.gethostname()}"

# Tests may set this; when true every e-mail is also logged in full at debug level.
DEBUG = False

_TRUNCATION_NOTE = "...Traceback exceeds max length and has been truncated."


class EmailSetupError(RuntimeError):
    """The configured ``[email] method`` cannot be used: its library is missing or a setting is empty."""


class TestNotificationsTask(Task):
    """Always fails (in ``run()``, or in ``complete()`` with ``--raise-in-complete``) to try out e-mails."""

    __test__ = False  # not a pytest test class, despite the name users know it by

    raise_in_complete = parameter.BoolParameter(description="If true, fail in complete() instead of run()")

    def run(self) -> None:
        raise ValueError("Testing notifications triggering")

    def complete(self) -> bool:
        if self.raise_in_complete:
            raise ValueError("Testing notifications triggering")
        return False


class email(Config):
    """``[email]``: whether, how and to whom error e-mails are sent (older ``[core]`` names still work)."""

    force_send = parameter.BoolParameter(default=False, description="Send e-mail even from a tty")
    format = parameter.ChoiceParameter(
        default="plain",
        config_path=dict(section="core", name="email-type"),
        choices=("plain", "html", "none"),
        description="Format type for sent e-mails",
    )
    method = parameter.ChoiceParameter(
        default="smtp",
        config_path=dict(section="email", name="type"),
        choices=("smtp", "sendgrid", "ses", "sns"),
        description="Method for sending e-mail",
    )
    prefix = parameter.Parameter(
        default="",
        config_path=dict(section="core", name="email-prefix"),
        description="Prefix for subject lines of all e-mails",
    )
    receiver = parameter.Parameter(
        default="",
        config_path=dict(section="core", name="error-email"),
        description="Address to send error e-mails to",
    )
    sender = parameter.Parameter(
        default=DEFAULT_CLIENT_EMAIL,
        config_path=dict(section="core", name="email-sender"),
        description="Address to send e-mails from",
    )
    traceback_max_length = parameter.IntParameter(default=5000, description="Max length for error traceback")


class smtp(Config):
    """``[smtp]``: the SMTP server used by ``[email] method = smtp``."""

    host = parameter.Parameter(
        default="localhost",
        config_path=dict(section="core", name="smtp_host"),
        description="Hostname of smtp server",
    )
    local_hostname = parameter.OptionalParameter(
        default=None,
        config_path=dict(section="core", name="smtp_local_hostname"),
        description="If specified, used as the FQDN of the local host in the HELO/EHLO command",
    )
    no_tls = parameter.BoolParameter(
        default=False,
        config_path=dict(section="core", name="smtp_without_tls"),
        description="Do not use TLS in SMTP connections",
    )
    password = parameter.OptionalParameter(
        default=None,
        config_path=dict(section="core", name="smtp_password"),
        description="Password for the SMTP server login",
    )
    port = parameter.IntParameter(
        default=0,
        config_path=dict(section="core", name="smtp_port"),
        description="Port number for smtp server",
    )
    ssl = parameter.BoolParameter(
        default=False,
        config_path=dict(section="core", name="smtp_ssl"),
        description="Use SSL for the SMTP connection.",
    )
    timeout = parameter.FloatParameter(
        default=10.0,
        config_path=dict(section="core", name="smtp_timeout"),
        description="Number of seconds before timing out the smtp connection",
    )
    username = parameter.OptionalParameter(
        default=None,
        config_path=dict(section="core", name="smtp_login"),
        description="Username used to log in to the SMTP host",
    )


class sendgrid(Config):
    """``[sendgrid]``: the API key used by ``[email] method = sendgrid``."""

    apikey = parameter.OptionalParameter(default=None, description="API key for SendGrid login")


# -- composing ------------------------------------------------------------------------------------------


def generate_email(
    sender: str,
    subject: str,
    message: str,
    recipients: Iterable[str],
    image_png: str | Iterable[str] | None = None,
) -> MIMEMultipart:
    """A MIME multipart message: the body as ``text/<[email] format>`` plus any PNG files attached inline."""
    # Imported here: the email package is a tenth of a run's imports, and most runs send no e-mail.
    from email.mime.image import MIMEImage
    from email.mime.multipart import MIMEMultipart
    from email.mime.text import MIMEText

    root = MIMEMultipart("related")
    root.attach(MIMEText(message, email().format, "utf-8"))
    for path in _as_paths(image_png):
        with open(path, "rb") as fh:
            root.attach(MIMEImage(fh.read(), "png"))
    root["Subject"] = subject
    root["From"] = sender
    root["To"] = ",".join(recipients)
    return root


def _as_paths(image_png: str | Iterable[str] | None) -> list[str]:
    if not image_png:
        return []
    if isinstance(image_png, str):
        return [image_png]
    return list(image_png)


def wrap_traceback(traceback: str) -> str:
    """The traceback cut to ``[email] traceback_max_length``, and for html highlighted or in ``<pre>``."""
    limit = email().traceback_max_length
    if limit >= 0 and len(traceback) > limit:
        traceback = traceback[:limit] + _TRUNCATION_NOTE
    if email().format != "html":
        return traceback
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonTracebackLexer
    except ImportError:  # pygments is optional: plain escaped <pre> is still readable
        return f"<pre>{html.escape(traceback)}</pre>"
    return highlight(traceback, PythonTracebackLexer(), HtmlFormatter(noclasses=True))


_PLAIN_TEMPLATE = """\
{headline}
Name: {name}
Parameters:
{params}
Command line:
  {command}
{traceback}
"""

_HTML_TEMPLATE = """\
<html>
<body>
<h2>{headline}</h2>
<table style="border-top: 1px solid black; border-bottom: 1px solid black">
<thead>
<tr><th>name</th><td>{name}</td></tr>
</thead>
<tbody>
{param_rows}
</tbody>
</table>
<h2>Command line</h2>
<pre>
{command}
</pre>
<h2>Traceback</h2>
{traceback}
</body>
</html>
"""


def format_task_error(headline: str, task: Task, command: str, formatted_exception: str | None = None) -> str:
    """The body of a task error e-mail: what failed, with which parameters, how it was run, and why."""
    traceback = wrap_traceback(formatted_exception) if formatted_exception else ""
    params: Mapping[str, str] = task.to_str_params()
    if email().format == "html":
        rows = "\n".join(
            f"<tr><th>{html.escape(str(name))}</th><td>{html.escape(str(value))}</td></tr>"
            for name, value in params.items()
        )
        return _HTML_TEMPLATE.format(
            headline=html.escape(headline),
            name=html.escape(task.task_family),
            param_rows=rows,
            command=html.escape(command),
            traceback=traceback,
        )
    width = max((len(name) for name in params), default=0)
    lines = "\n".join(f"  {name:{width}}: {value}" for name, value in params.items())
    return _PLAIN_TEMPLATE.format(
        headline=headline, name=task.task_family, params=lines, command=command, traceback=traceback
    )


# -- deciding -------------------------------------------------------------------------------------------


def _email_disabled_reason() -> str | None:
    """Why no e-mail should go out right now, or None when sending is fine."""
    config = email()
    if config.format == "none":
        return "email format is 'none'"
    if config.force_send:
        return None
    if _stdout_is_tty():
        return "running from a tty"
    return None


def _stdout_is_tty() -> bool:
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stdout is no terminal
        return False


def _email_recipients(additional_recipients: str | Iterable[str] | None = None) -> list[str]:
    receiver = email().receiver
    recipients = [receiver] if receiver else []
    if isinstance(additional_recipients, str):
        recipients.append(additional_recipients)
    elif additional_recipients:
        recipients.extend(additional_recipients)
    return recipients


def _split_addresses(recipients: Iterable[str | None]) -> list[str]:
    """Each entry may hold several comma-separated addresses (as written in luigi.cfg)."""
    return [
        address.strip() for entry in recipients if entry for address in entry.split(",") if address.strip()
    ]


def _prefix(subject: str) -> str:
    """``<[email] prefix> <subject>`` when a prefix is set."""
    prefix = email().prefix
    return f"{prefix} {subject}" if prefix else subject


# -- sending --------------------------------------------------------------------------------------------


def send_email(
    subject: str,
    message: str,
    sender: str,
    recipients: Iterable[str | None],
    image_png: str | Iterable[str] | None = None,
) -> None:
    """Send through ``[email] method`` unless sending is disabled; failures are logged, never raised.

    The sender (``send_email_<method>``) is looked up in this module at each call, so a test may replace
    it. A notification that cannot be delivered must not hide the failure it was reporting, so transport
    errors end up in the log (naming the method and the problem) rather than propagating.
    """
    subject = _prefix(subject)
    if not isinstance(recipients, (list, tuple)):
        recipients = tuple(recipients)  # read an iterator once; lists and tuples are logged as given
    if not recipients or tuple(recipients) == (None,):
        return
    reason = _email_disabled_reason()
    if reason:
        logger.info("Not sending email to %r because %s", recipients, reason)
        return
    addresses = _split_addresses(recipients)
    logger.info("Sending email to %r", addresses)
    if DEBUG:
        logger.debug("Email from %s, subject %r:\n%s", sender, subject, message)
    method = email().method
    try:
        transport = globals()[_TRANSPORTS[method]]  # looked up per call so tests can patch send_email_*
        transport(sender, subject, message, addresses, image_png)
    except (OSError, EmailSetupError) as exc:
        logger.error("Failed to send email to %r with [email] method=%s: %s", addresses, method, exc)


def send_error_email(
    subject: str, message: str, additional_recipients: str | Iterable[str] | None = None
) -> None:
    """Send an error e-mail to ``[email] receiver`` plus ``additional_recipients`` (e.g. task owners)."""
    send_email(
        subject=subject,
        message=message,
        sender=email().sender,
        recipients=_email_recipients(additional_recipients),
    )


def send_email_smtp(
    sender: str,
    subject: str,
    message: str,
    recipients: list[str],
    image_png: str | Iterable[str] | None = None,
) -> None:
    """Deliver over SMTP (or SMTP over SSL), upgrading with STARTTLS when offered unless ``no_tls``.

    Shaped as Luigi's, because users' tests replace ``smtplib.SMTP`` with a mock and check the calls:
    ``smtplib`` is imported here, the connection object is used without ``with`` and never sent
    ``quit()``, and a connection error is logged, not raised.
    """
    import smtplib

    config = smtp()
    kwargs: dict[str, Any] = dict(host=config.host, port=config.port, local_hostname=config.local_hostname)
    if config.timeout:
        kwargs["timeout"] = config.timeout
    try:
        connection = smtplib.SMTP_SSL(**kwargs) if config.ssl else smtplib.SMTP(**kwargs)
        connection.ehlo_or_helo_if_needed()
        if connection.has_extn("starttls") and not config.no_tls:
            connection.starttls()
        if config.username and config.password:
            connection.login(config.username, config.password)
        mail = generate_email(sender, subject, message, recipients, image_png)
        connection.sendmail(sender, recipients, mail.as_string())
    except OSError as exc:  # socket errors, and smtplib's own (SMTPException is an OSError)
        logger.error("Not able to connect to smtp server: %s", exc)


def send_email_ses(
    sender: str,
    subject: str,
    message: str,
    recipients: list[str],
    image_png: str | Iterable[str] | None = None,
) -> None:
    """Deliver through Amazon SES (credentials come from boto3's usual sources)."""
    boto3 = _import_for_method("boto3", "ses")
    mail = generate_email(sender, subject, message, recipients, image_png)
    response = boto3.client("ses").send_raw_email(
        Source=sender, Destinations=recipients, RawMessage={"Data": mail.as_string()}
    )
    logger.debug("Message sent to SES. MessageId: %s", response.get("MessageId"))


_SNS_SUBJECT_LIMIT = 100


def send_email_sns(
    sender: str,
    subject: str,
    message: str,
    topic_ARN: list[str],  # Luigi's keyword name
    image_png: str | Iterable[str] | None = None,
) -> None:
    """Publish to the Amazon SNS topic whose ARN is the first recipient (SNS caps subjects at 100)."""
    boto3 = _import_for_method("boto3", "sns")
    if len(subject) > _SNS_SUBJECT_LIMIT:
        subject = subject[:48] + "..." + subject[-49:]  # keeps both ends, within the limit
    response = boto3.resource("sns").Topic(topic_ARN[0]).publish(Subject=subject, Message=message)
    logger.debug("Message sent to SNS. MessageId: %s", response.get("MessageId"))


def send_email_sendgrid(
    sender: str,
    subject: str,
    message: str,
    recipients: list[str],
    image_png: str | Iterable[str] | None = None,
) -> None:
    """Deliver through the SendGrid API with ``[sendgrid] apikey``."""
    sendgrid_module = _import_for_method("sendgrid", "sendgrid")
    apikey = sendgrid().apikey
    if not apikey:
        raise EmailSetupError("[email] method=sendgrid needs [sendgrid] apikey to be set")
    is_html = email().format == "html"
    mail = sendgrid_module.Mail(
        from_email=sender,
        to_emails=recipients,
        subject=subject,
        html_content=message if is_html else None,
        plain_text_content=None if is_html else message,
    )
    for path in _as_paths(image_png):
        mail.add_attachment(_sendgrid_png_attachment(sendgrid_module, path))
    sendgrid_module.SendGridAPIClient(apikey).send(mail)


def _sendgrid_png_attachment(helpers: Any, path: str) -> Any:
    with open(path, "rb") as fh:
        content = base64.b64encode(fh.read()).decode("ascii")
    return helpers.Attachment(
        helpers.FileContent(content),
        helpers.FileName(os.path.basename(path)),
        helpers.FileType("image/png"),
        helpers.Disposition("inline"),
    )


def _import_for_method(module_name: str, method: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module_name)
    except ImportError:
        package = module_name.split(".")[0]
        raise EmailSetupError(
            f"[email] method={method} needs the '{package}' package, which is not installed "
            f"(pip install {package}), or choose another method"
        ) from None


_TRANSPORTS = {method: f"send_email_{method}" for method in ("smtp", "ses", "sns", "sendgrid")}
