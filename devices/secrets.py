"""Keeping rig secrets out of everything a run writes.

Values are taken from the environment variables a rig names; `Redactor` replaces them in text and
as a logging filter (uiautomator2 logs JSON-RPC payloads at debug level, which would include a
typed password otherwise).
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterable

MASK = "•••"
_MIN_LEN = 4  # shorter values would mask ordinary words; rigs should not use them as secrets


class Redactor(logging.Filter):
    """Replaces known secret values in log records (message and arguments) and in text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if s and len(s) >= _MIN_LEN}
        # uiautomator2 types through AdbKeyboard with `am broadcast … --es text <base64>` and logs
        # that shell line at debug level: the encoded form is a secret too.
        values |= {base64.b64encode(s.encode()).decode() for s in values}
        with self._lock:
            self._secrets |= values

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def redact(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix; let logging report it
            return True
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_GLOBAL = Redactor()


def global_redactor() -> Redactor:
    return _GLOBAL


def install_redaction(secrets: Iterable[str]) -> Redactor:
    """Register secrets and redact them in every log record created from now on, whatever handler
    (present or added later, in any library) ends up writing it."""
    global _factory_installed
    _GLOBAL.add(secrets)
    with _factory_lock:
        if not _factory_installed:
            previous = logging.getLogRecordFactory()

            def factory(*args: object, **kwargs: object) -> logging.LogRecord:
                record = previous(*args, **kwargs)
                _GLOBAL.filter(record)
                return record

            logging.setLogRecordFactory(factory)
            _factory_installed = True
    return _GLOBAL


_factory_lock = threading.Lock()
_factory_installed = False
