"""Credentials masked in task logs: the built-in patterns and ``[task_log] redact``, compiled once.

A pattern's match is replaced by ``***``; when the pattern has named groups, only what they matched is
(``password=(?P<value>\\S+)`` keeps the key and masks the value). Patterns are matched within one line of
the log (``Scrubber`` in ``output_capture`` hands them whole lines). Each built-in pattern names the
lower-case words one of which every match holds, so a line holding none of them costs no regex at all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from luigi.configuration import ConfigError
from luigi.worker.config import task_log

MASK = "***"

# A key whose value is a secret: the key ends with one of these words (``db_password``, ``PGPASSWORD``,
# ``access_token``, ``client_secret``, ``api-key``, ``AWS_SECRET_ACCESS_KEY``); ``pass`` and ``pwd`` only as
# a word of their own (``MYSQL_PWD``, ``--pass``), not as the end of ``bypass`` or ``compass``.
_KEY = (
    r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key"
    r"|(?<![a-z0-9])(?:pass|pwd))"
)
# The value after it: quoted (the quotes stay), or up to a blank, a quote or ``&`` (a URL's next argument).
_VALUE = r"""(?:"(?P<double_quoted>[^"\n]*)"|'(?P<single_quoted>[^'\n]*)'|(?P<bare>[^\s"'&]+))"""


@dataclass(frozen=True)
class BuiltInPattern:
    """One of the patterns ``[task_log] redact_defaults`` turns on (each is listed in doc/security.md)."""

    name: str
    regex: str
    keywords: tuple[str, ...]  # lower-case; every match holds one of them (the cheap check before the regex)


BUILT_IN_PATTERNS = (
    BuiltInPattern(  # password=hunter2, "passwd": "x", MYSQL_PWD=x, api_key: x, access_token=x
        "key_value",
        rf"(?i){_KEY}[\"']?[ \t]*[:=][ \t]*{_VALUE}",
        ("pass", "pwd", "secret", "token", "key"),
    ),
    BuiltInPattern(  # a command line's --password hunter2, --api-key x
        "option_value",
        rf"(?i)(?<![\w-])--[\w-]*?{_KEY}[ \t]+{_VALUE}",
        ("pass", "pwd", "secret", "token", "key"),
    ),
    BuiltInPattern(  # Authorization: Bearer x, Authorization: Basic x, authorization=x
        "authorization",
        r"(?i)\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|digest|token)[ \t]+)?"
        r"(?P<credentials>[^\s\"',;]+)",
        ("authorization",),
    ),
    BuiltInPattern(  # a bare bearer token: eight characters or more, one of them not a letter (not prose)
        "bearer",
        r"(?i)\bbearer[ \t]+(?P<token>(?=[a-z]*[0-9\-._~+/])[a-z0-9\-._~+/]{8,}=*)",
        ("bearer",),
    ),
    BuiltInPattern(  # aws_secret_access_key = <40 characters>, also with a blank between (aws configure)
        "aws_secret_access_key",
        r"(?i)secret_?(?:access_?)?key[\"']?(?:[ \t]*[:=][ \t]*|[ \t]+)[\"']?"
        r"(?P<key>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        ("secret",),
    ),
    BuiltInPattern(  # an AWS access key id, long-term (AKIA...) or temporary (ASIA...), wherever it is
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
        ("akia", "asia"),
    ),
    BuiltInPattern(  # postgresql://ann:hunter2@db/x: only the password goes
        "url_password",
        r"(?i)\b[a-z][a-z0-9+.-]*://[^\s/:@]*:(?P<password>[^\s/@]+)@",
        ("://",),
    ),
)
BUILT_IN_SOURCES = tuple(pattern.regex for pattern in BUILT_IN_PATTERNS)
_KEYWORDS = {pattern.regex: pattern.keywords for pattern in BUILT_IN_PATTERNS}


class RedactPatternError(ConfigError, ValueError):
    """A ``[task_log] redact`` line that is not a regular expression (``luigi`` prints it in one line)."""


def configured_patterns() -> tuple[str, ...]:
    """The patterns ``[task_log]`` asks for: the built-in ones (unless ``redact_defaults = false``), then
    each line of ``redact``; a line that does not compile raises ``RedactPatternError``."""
    section = task_log()
    own = tuple(line.strip() for line in section.redact.splitlines() if line.strip())
    for source in own:
        try:
            re.compile(source)
        except re.error as error:
            problem = f"{source!r} is not a regular expression ({error})"
            raise RedactPatternError(f"[task_log] redact: {problem}; fix or remove that line") from None
    return (BUILT_IN_SOURCES if section.redact_defaults else ()) + own


@functools.lru_cache(maxsize=16)
def compiled(patterns: tuple[str, ...]) -> Redaction:
    """The ``Redaction`` of ``patterns``, compiled once per process (a forked task slot reuses it)."""
    return Redaction(patterns)


_Step = tuple[re.Pattern[str], tuple[str, ...], Callable[[re.Match[str]], str]]


class Redaction:
    """Patterns compiled, each with its pre-check words (none for a user's pattern: it always runs).

    When every pattern has words (the built-in ones alone), a text holding none of them is returned as it
    is after one scan per distinct word: the usual line costs no regex at all.
    """

    __slots__ = ("_steps", "_gate")

    def __init__(self, patterns: Sequence[str]) -> None:
        self._steps: list[_Step] = []
        for source in patterns:
            regex = re.compile(source)
            self._steps.append((regex, _KEYWORDS.get(source, ()), _masker(regex)))
        every_word = [word for _, words, _ in self._steps for word in words]
        gated = all(words for _, words, _ in self._steps)
        self._gate = tuple(dict.fromkeys(every_word)) if gated else ()

    def __bool__(self) -> bool:
        return bool(self._steps)

    def redact(self, text: str) -> str:
        """``text`` with every match masked (whole lines: no pattern looks past a line's end)."""
        lowered = text.lower()  # (stale after a mask: a word masked away only costs a search)
        if self._gate and not _holds_any(lowered, self._gate):
            return text
        for regex, keywords, mask in self._steps:
            if keywords and not _holds_any(lowered, keywords):
                continue
            text = regex.sub(mask, text)
        return text


def _holds_any(text: str, words: tuple[str, ...]) -> bool:
    for word in words:
        if word in text:
            return True
    return False


def _masker(regex: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    """The replacement of ``regex``'s matches: ``***`` for the whole, or for each named group's text."""
    groups = sorted(regex.groupindex.values())
    if not groups:
        return lambda match: MASK

    def mask_groups(match: re.Match[str]) -> str:
        whole, start = match.group(), match.start()
        pieces: list[str] = []
        at = 0
        for group in groups:
            begin, end = match.span(group)
            if begin - start >= at and end > begin:  # took part in the match, not nested in one masked
                pieces += (whole[at : begin - start], MASK)
                at = end - start
        pieces.append(whole[at:])
        return "".join(pieces)

    return mask_groups
