"""Error e-mails, delivered to a real SMTP server (aiosmtpd) started on localhost by each test."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword
from helpers.luigid import free_port
from helpers.smtp_server import Mailbox, smtp_on_localhost

from luigi import configuration, notifications, parameter
from luigi.task import Task


@pytest.fixture
def start_smtp():
    """Start SMTP servers on free localhost ports (keyword arguments go to aiosmtpd's Controller).

    Each call points ``[smtp]`` at the new server and returns its Mailbox; all are stopped afterwards.
    """
    with contextlib.ExitStack() as servers:

        def start(**controller_kwargs: Any) -> Mailbox:
            mailbox = servers.enter_context(smtp_on_localhost(**controller_kwargs))
            _set("smtp", "host", "127.0.0.1")
            _set("smtp", "port", str(mailbox.port))
            return mailbox

        yield start


@pytest.fixture
def smtp_server(start_smtp):
    """A plain SMTP server; e-mails are forced out even if pytest's stdout is a terminal (``-s``)."""
    _set("email", "force_send", "true")
    return start_smtp()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a self-signed certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _server_tls_context(tls_files) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, tls_files))
    return context


def _set(section: str, option: str, value: str) -> None:
    configuration.get_config().set(section, option, value)


@pytest.fixture
def failing() -> type[Task]:
    """A task class for error e-mails, defined per test so the registry restore drops it afterwards."""

    class Failing(Task):
        day = parameter.Parameter()
        count = parameter.IntParameter()

    return Failing


def _unserved_local_address(sock: socket.socket) -> tuple[str, int] | None:
    """The TCP address ``sock`` holds without listening on it (as a port probed free does), if any."""
    if sock.fileno() == -1 or sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
        return None
    host, port = sock.getsockname()
    if port == 0 or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        return None
    return host, port


@pytest.fixture
def ports_taken_once_let_go(monkeypatch):
    """Another server takes each local port a socket lets go of without having served on it, at once: the
    race that a port probed free, then closed and bound again later, loses on a busy machine."""
    let_go = socket.socket.close
    competitors: list[socket.socket] = []

    def close_and_lose_the_port(sock: socket.socket) -> None:
        address = _unserved_local_address(sock)
        let_go(sock)
        if address is not None:
            competitor = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                competitor.bind(address)
                competitor.listen()
                competitors.append(competitor)
            except OSError:  # the port is not free yet (a connection's end in TIME_WAIT): nothing to take
                let_go(competitor)

    monkeypatch.setattr(socket.socket, "close", close_and_lose_the_port)
    yield
    monkeypatch.undo()
    for competitor in competitors:
        competitor.close()


# -- delivery -------------------------------------------------------------------------------------------


def test_error_email_reaches_receiver_and_additional_recipients(smtp_server):
    _set("email", "receiver", "ops@example.com, oncall@example.com")
    _set("email", "sender", "luigi@example.com")
    _set("email", "prefix", "[prod]")
    notifications.send_error_email("Luigi: Task FAILED", "it broke", additional_recipients=["owner@x.org"])
    delivery = smtp_server.only()
    assert delivery.mail_from == "luigi@example.com"
    assert delivery.rcpt_tos == ["ops@example.com", "oncall@example.com", "owner@x.org"]
    assert delivery.message["Subject"] == "[prod] Luigi: Task FAILED"
    assert delivery.message["To"] == "ops@example.com,oncall@example.com,owner@x.org"
    assert delivery.body == "it broke"
    assert delivery.message.get_content_type() == "multipart/related"
    assert delivery.message.get_payload()[0].get_content_type() == "text/plain"


def test_the_test_smtp_server_never_lets_go_of_its_port_before_it_serves(
    ports_taken_once_let_go, smtp_server
):
    _set("email", "receiver", "ops@example.com")
    notifications.send_error_email("subject", "delivered although every let-go port was taken")
    assert smtp_server.only().body == "delivered although every let-go port was taken"


def test_additional_recipient_may_be_a_single_string(smtp_server):
    notifications.send_error_email("subject", "body", additional_recipients="owner@example.com")
    assert smtp_server.only().rcpt_tos == ["owner@example.com"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the other deprecation notices
def test_legacy_core_options_still_configure_email(smtp_server):
    _set("core", "error-email", "legacy@example.com")
    _set("core", "email-prefix", "LEGACY")
    _set("core", "email-sender", "old@example.com")
    with pytest.warns(
        DeprecationWarning, match=r"\[core\] error-email is deprecated. Please use \[email\] receiver"
    ):
        notifications.send_error_email("subject", "body")
    assert smtp_server.only().rcpt_tos == ["legacy@example.com"]
    assert smtp_server.only().mail_from == "old@example.com"
    assert smtp_server.only().message["Subject"] == "LEGACY subject"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the other deprecation notices
def test_legacy_core_smtp_options_still_configure_the_server(smtp_server):
    config = configuration.get_config()
    _set("core", "smtp_port", config.get("smtp", "port"))
    config.remove_option("smtp", "port")  # only the legacy option now says where the server is
    with pytest.warns(
        DeprecationWarning, match=r"\[core\] smtp_port is deprecated. Please use \[smtp\] port"
    ):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert smtp_server.only().rcpt_tos == ["a@example.com"]


def test_no_recipients_sends_nothing(smtp_server):
    notifications.send_error_email("subject", "body")
    assert smtp_server.deliveries == []


def test_format_none_sends_nothing(smtp_server, caplog):
    _set("email", "format", "none")
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert smtp_server.deliveries == []
    assert "email format is 'none'" in caplog.text


@contextlib.contextmanager
def terminal_stdout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make sys.stdout a real pseudo-terminal, as when a user runs luigi by hand.

    A context manager used inside the test body: pytest re-installs its own stdout between phases.
    """
    leader, follower = os.openpty()
    with open(follower, "w") as stream, monkeypatch.context() as patch:
        patch.setattr(sys, "stdout", stream)
        try:
            yield
        finally:
            os.close(leader)


def test_running_from_a_terminal_sends_nothing_unless_forced(smtp_server, monkeypatch, caplog):
    _set("email", "force_send", "false")
    with caplog.at_level(logging.INFO, logger="luigi-interface"), terminal_stdout(monkeypatch):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert smtp_server.deliveries == []
    assert "running from a tty" in caplog.text
    _set("email", "force_send", "true")
    with terminal_stdout(monkeypatch):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert smtp_server.only().rcpt_tos == ["a@example.com"]


def _accept_me_pw(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (b"me", b"pw")
    return AuthResult(success=ok, auth_data=auth_data)


def test_login_is_used_when_username_and_password_are_set(start_smtp):
    _set("email", "force_send", "true")
    mailbox = start_smtp(authenticator=_accept_me_pw, auth_require_tls=False)
    _set("smtp", "username", "me")
    _set("smtp", "password", "pw")
    notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert mailbox.only().login == "me"
    assert mailbox.only().over_tls is False


def test_starttls_is_used_when_the_server_offers_it(start_smtp, tls_files):
    _set("email", "force_send", "true")
    mailbox = start_smtp(tls_context=_server_tls_context(tls_files), require_starttls=True)
    notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert mailbox.only().over_tls is True


def test_no_tls_skips_starttls(start_smtp, tls_files):
    _set("email", "force_send", "true")
    _set("smtp", "no_tls", "true")
    mailbox = start_smtp(tls_context=_server_tls_context(tls_files), require_starttls=False)
    notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert mailbox.only().over_tls is False


def test_ssl_connects_with_smtp_over_ssl(start_smtp, tls_files):
    _set("email", "force_send", "true")
    _set("smtp", "ssl", "true")
    mailbox = start_smtp(ssl_context=_server_tls_context(tls_files))
    notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert mailbox.only().rcpt_tos == ["a@example.com"]


def test_unreachable_server_is_logged_not_raised(caplog):
    _set("email", "force_send", "true")
    _set("smtp", "host", "127.0.0.1")
    _set("smtp", "port", str(free_port()))
    with caplog.at_level(logging.ERROR, logger="luigi-interface"):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert "Not able to connect to smtp server: [Errno 111] Connection refused" in caplog.text


@pytest.mark.parametrize(
    ("method", "package"), [("ses", "boto3"), ("sns", "boto3"), ("sendgrid", "sendgrid")]
)
def test_method_whose_library_is_missing_logs_a_clear_error(method, package, caplog):
    pytest.importorskip("sys")  # the check below needs the library to be absent
    if _importable(package):
        pytest.skip(f"{package} is installed here")
    _set("email", "force_send", "true")
    _set("email", "method", method)
    with caplog.at_level(logging.ERROR, logger="luigi-interface"):
        notifications.send_error_email("subject", "body", additional_recipients="a@example.com")
    assert f"[email] method={method} needs the '{package}' package" in caplog.text


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_html_format_sends_an_html_part(smtp_server):
    _set("email", "format", "html")
    notifications.send_error_email("subject", "<p>hi</p>", additional_recipients="a@example.com")
    part = smtp_server.only().message.get_payload()[0]
    assert part.get_content_type() == "text/html"
    assert smtp_server.only().body == "<p>hi</p>"


# -- composing ------------------------------------------------------------------------------------------


def test_generate_email_attaches_png_images(tmp_path):
    image = tmp_path / "graph.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    message = notifications.generate_email("from@x", "subj", "body", ["a@x", "b@x"], str(image))
    text, picture = message.get_payload()
    assert picture.get_content_type() == "image/png"
    assert picture.get_payload(decode=True) == image.read_bytes()
    assert (message["From"], message["To"], message["Subject"]) == ("from@x", "a@x,b@x", "subj")


def test_plain_task_error_lists_name_aligned_parameters_command_and_traceback(failing):
    body = notifications.format_task_error(
        "Runtime error:", failing(day="2024-01-01", count=3), "luigi Failing", "Traceback: boom"
    )
    assert body == (
        "Runtime error:\n"
        "Name: Failing\n"
        "Parameters:\n"
        "  day  : 2024-01-01\n"
        "  count: 3\n"
        "Command line:\n"
        "  luigi Failing\n"
        "Traceback: boom\n"
    )


def test_html_task_error_escapes_everything(failing):
    _set("email", "format", "html")
    body = notifications.format_task_error(
        "<b>bad</b>", failing(day="<script>", count=1), "luigi --x '<y>'", "Error: <z> & more"
    )
    assert "<script>" not in body and "<b>bad</b>" not in body and "<y>" not in body and "<z>" not in body
    assert "&lt;script&gt;" in body
    assert "<h2>&lt;b&gt;bad&lt;/b&gt;</h2>" in body
    assert "<tr><th>count</th><td>1</td></tr>" in body
    assert "luigi --x &#x27;&lt;y&gt;&#x27;" in body


def test_traceback_is_truncated_to_the_configured_length():
    _set("email", "traceback_max_length", "10")
    wrapped = notifications.wrap_traceback("0123456789abcdef")
    assert wrapped == "0123456789...Traceback exceeds max length and has been truncated."


def test_html_traceback_is_highlighted_or_preformatted():
    _set("email", "format", "html")
    wrapped = notifications.wrap_traceback("Traceback (most recent call last):\nValueError: <oops>")
    assert "<oops>" not in wrapped
    assert "&lt;oops&gt;" in wrapped
    assert "<pre" in wrapped


def test_notifications_test_task_fails_in_run_or_in_complete():
    with pytest.raises(ValueError, match="Testing notifications triggering"):
        notifications.TestNotificationsTask().run()
    assert notifications.TestNotificationsTask().complete() is False
    with pytest.raises(ValueError, match="Testing notifications triggering"):
        notifications.TestNotificationsTask(raise_in_complete=True).complete()


def test_debug_flag_is_a_plain_module_attribute(smtp_server, monkeypatch, caplog):
    assert notifications.DEBUG is False
    monkeypatch.setattr(notifications, "DEBUG", True)
    with caplog.at_level(logging.DEBUG, logger="luigi-interface"):
        notifications.send_error_email("subject", "the body", additional_recipients="a@example.com")
    assert "the body" in caplog.text
    assert smtp_server.only().body == "the body"


# -- the hooks users' tests patch (LUIGI_COMPAT j.8) -------------------------------------------------------


class RecordingSMTP:
    """Stands in for ``smtplib.SMTP`` the way users' tests replace it: records each call on the object."""

    instances: list[RecordingSMTP] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        RecordingSMTP.instances.append(self)

    def __getattr__(self, name: str) -> Any:
        if name in ("__enter__", "__exit__"):
            raise AttributeError(name)

        def record(*args: Any) -> Any:
            self.calls.append((name, args))
            return name == "has_extn"  # the server offers STARTTLS

        return record


def test_send_email_smtp_uses_the_connection_without_with_in_luigis_order_and_never_quits(monkeypatch):
    import smtplib

    RecordingSMTP.instances = []
    monkeypatch.setattr(smtplib, "SMTP", RecordingSMTP)  # imported inside send_email_smtp: the patch holds
    _set("smtp", "host", "mail.example.com")
    _set("smtp", "port", "2525")
    _set("smtp", "username", "me")
    _set("smtp", "password", "pw")
    notifications.send_email_smtp("from@x", "subject", "body", ["a@x"], None)
    (connection,) = RecordingSMTP.instances
    assert connection.kwargs == {
        "host": "mail.example.com",
        "port": 2525,
        "local_hostname": None,
        "timeout": 10.0,
    }
    names = [name for name, _ in connection.calls]
    assert names == ["ehlo_or_helo_if_needed", "has_extn", "starttls", "login", "sendmail"]
    assert connection.calls[3] == ("login", ("me", "pw"))
    sender, recipients, text = connection.calls[4][1]
    assert (sender, recipients) == ("from@x", ["a@x"]) and "Subject: subject" in text


def test_send_email_looks_up_the_method_sender_at_call_time(monkeypatch, caplog):
    _set("email", "force_send", "true")
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(notifications, "send_email_smtp", lambda *args: sent.append(args))
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        notifications.send_email("subject", "body", "from@x", ["a@x, b@x", "c@x"])
    assert sent == [("from@x", "subject", "body", ["a@x", "b@x", "c@x"], None)]
    assert "Sending email to ['a@x', 'b@x', 'c@x']" in caplog.text


def test_disabled_sending_names_the_recipients_as_given_and_the_reason(caplog):
    _set("email", "format", "none")
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        notifications.send_email("subject", "body", "from@x", ("a@x, b@x",))
    assert "Not sending email to ('a@x, b@x',) because email format is 'none'" in caplog.text


def test_no_recipients_or_only_none_returns_before_anything_is_logged(caplog):
    _set("email", "format", "none")
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        notifications.send_email("subject", "body", "from@x", ())
        notifications.send_email("subject", "body", "from@x", (None,))
    assert caplog.text == ""


class FakeBoto3:
    """A ``boto3`` module stand-in in ``sys.modules``, as users stub it: records what is published."""

    def __init__(self) -> None:
        self.published: list[tuple[str, dict[str, Any]]] = []
        self.raw: list[dict[str, Any]] = []

    def resource(self, name: str) -> Any:
        assert name == "sns"
        fake = self

        class Topic:
            def __init__(self, arn: str) -> None:
                self.arn = arn

            def publish(self, **kwargs: Any) -> dict[str, str]:
                fake.published.append((self.arn, kwargs))
                return {"MessageId": "1"}

        return type("Resource", (), {"Topic": staticmethod(Topic)})()

    def client(self, name: str) -> Any:
        assert name == "ses"
        fake = self

        class Ses:
            def send_raw_email(self, **kwargs: Any) -> dict[str, str]:
                fake.raw.append(kwargs)
                return {"MessageId": "2"}

        return Ses()


def test_sns_publishes_to_the_topic_and_keeps_both_ends_of_a_long_subject(monkeypatch):
    boto3 = FakeBoto3()
    monkeypatch.setitem(sys.modules, "boto3", boto3)
    subject = "S" * 60 + "E" * 60
    notifications.send_email_sns("from@x", subject, "body", ["arn:aws:sns:eu-west-1:1:topic"], None)
    ((arn, kwargs),) = boto3.published
    assert arn == "arn:aws:sns:eu-west-1:1:topic"
    assert kwargs == {"Subject": "S" * 48 + "..." + "E" * 49, "Message": "body"}
    assert len(kwargs["Subject"]) == 100


def test_ses_sends_the_raw_mime_message(monkeypatch):
    boto3 = FakeBoto3()
    monkeypatch.setitem(sys.modules, "boto3", boto3)
    notifications.send_email_ses("from@x", "subject", "body", ["a@x"], None)
    ((kwargs),) = boto3.raw
    assert (kwargs["Source"], kwargs["Destinations"]) == ("from@x", ["a@x"])
    assert "Subject: subject" in kwargs["RawMessage"]["Data"]


def test_sendgrid_builds_a_mail_and_sends_it_with_the_api_key(monkeypatch):
    sent: list[tuple[str, dict[str, Any]]] = []

    class Client:
        def __init__(self, apikey: str) -> None:
            self.apikey = apikey

        def send(self, mail: dict[str, Any]) -> None:
            sent.append((self.apikey, mail))

    module = type(sys)("sendgrid")
    module.SendGridAPIClient = Client  # type: ignore[attr-defined]
    module.Mail = lambda **kwargs: kwargs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sendgrid", module)
    _set("sendgrid", "apikey", "SG.key")
    notifications.send_email_sendgrid("from@x", "subject", "body", ["a@x"], None)
    assert sent == [
        (
            "SG.key",
            {
                "from_email": "from@x",
                "to_emails": ["a@x"],
                "subject": "subject",
                "html_content": None,
                "plain_text_content": "body",
            },
        )
    ]


def test_generate_email_takes_image_png_by_keyword_and_sets_the_text_subtype_from_the_format():
    _set("email", "format", "html")
    message = notifications.generate_email("from@x", "subj", "<b>hi</b>", ["a@x"], image_png=None)
    (text,) = message.get_payload()
    assert text.get_content_type() == "text/html"


def test_the_subject_prefix_and_the_disabled_reason_are_reachable_as_in_luigi():
    _set("email", "prefix", "[prod]")
    assert notifications._prefix("x") == "[prod] x"
    _set("email", "format", "none")
    assert notifications._email_disabled_reason() == "email format is 'none'"
