"""An on-disk cache of judge verdicts, keyed by the hash of the rendered request (messages with
their images, model, sampling parameters, schema): any change to what the judge would be asked
makes a new key.

Lives in the run folder (``<run>/judge_cache/<judge>/<key>.json``), so re-running `realbench
judge` costs nothing for trajectories already judged with the same judge and prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from realbench.outcome import Verdict

log = logging.getLogger(__name__)


class JudgeCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def request_key(judge: str, request: dict[str, Any]) -> str:
        blob = json.dumps(request, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{judge}\0{blob}".encode()).hexdigest()[:32]

    def _path(self, judge: str, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in judge)
        return self.root / safe / f"{key}.json"

    def get(self, judge: str, key: str) -> Verdict | None:
        path = self._path(judge, key)
        try:
            verdict = Verdict.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            with self._lock:
                self.misses += 1
            return None
        except (ValidationError, json.JSONDecodeError, OSError):
            log.warning("ignoring unreadable judge cache entry %s", path)
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return verdict

    def put(self, judge: str, key: str, verdict: Verdict) -> None:
        path = self._path(judge, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(verdict.model_dump_json(), encoding="utf-8")
        os.replace(tmp, path)
