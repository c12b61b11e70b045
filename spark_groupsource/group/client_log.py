"""The group client's (kafka-python's) repeated log lines, collapsed into counted ones.

With its coordinator's connections reset, kafka-python logs every failed connect, reset and
"coordinator dead" (measured on Kafka 4.3.1: about 270 lines in 20 s): the member
installs :class:`RepeatFilter` on kafka-python's loggers. The first record of each kind (logger,
level, message template) in a window passes as it is; the others of the window are counted, and
once the window is over one line says how many there were ("... repeated 41 times in the last
10s"), with the last one's text. :meth:`RepeatFilter.flush` (called by the member's loop) writes
the counts of windows that ended with no record after them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: seconds of a window: at most one line per kind of record, plus one count line
WINDOW_S = 10.0
#: the attribute that marks a count line (so the filter passes its own lines)
_MARK = "groupkafka_repeats"


class RepeatFilter(logging.Filter):
    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.window_s = window_s
        self._clock = clock  # monotonic: a stepped wall clock neither floods nor silences the log
        self._lock = threading.Lock()
        #: (logger, level, template) -> [window start, suppressed count, last suppressed record]
        self._windows: dict[tuple[str, int, str], list] = {}
        self.suppressed_total = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _MARK, False) or record.levelno < logging.INFO:
            return True  # DEBUG is asked for: every line of it (a test counted re-authentications)
        key = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        due = None
        with self._lock:
            w = self._windows.get(key)
            if w is not None and now - w[0] < self.window_s:
                w[1] += 1
                w[2] = record
                self.suppressed_total += 1
                return False
            if w is not None and w[1]:
                due = (w[1], w[2], now - w[0])
            self._windows[key] = [now, 0, None]
        if due is not None:
            _say(*due, self.window_s)
        return True

    def flush(self) -> None:
        """Write the counts of windows that are over (no record of their kind came after)."""
        now = self._clock()
        due = []
        with self._lock:
            for key, w in list(self._windows.items()):
                if now - w[0] >= self.window_s:
                    if w[1]:
                        due.append((w[1], w[2], now - w[0]))
                    del self._windows[key]
        for count, record, span in due:
            _say(count, record, span, self.window_s)


def _say(count: int, record: logging.LogRecord, span: float, window_s: float) -> None:
    try:
        text = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad record's template is still worth counting
        text = str(record.msg)
    logging.getLogger(record.name).log(
        record.levelno, "%s (repeated %d times in the last %.0fs; collapsed by groupkafka, one line per %.0fs)",
        text, count, min(span, window_s), window_s, extra={_MARK: True})


_INSTALLED: RepeatFilter | None = None
_INSTALL_LOCK = threading.Lock()


def install(window_s: float = WINDOW_S) -> RepeatFilter:
    """The process's one filter, on ``kafka`` and every ``kafka.*`` logger that exists (kafka-python
    creates them as its modules are imported: call this after importing it). Idempotent."""
    global _INSTALLED
    with _INSTALL_LOCK:
        if _INSTALLED is None:
            _INSTALLED = RepeatFilter(window_s)
        f = _INSTALLED
        names = ["kafka", *(n for n in list(logging.Logger.manager.loggerDict) if n.startswith("kafka."))]
        for name in names:
            logger = logging.getLogger(name)
            if f not in logger.filters:
                logger.addFilter(f)
        return f
