"""The reply cache: one JSON file per request, keyed by everything that makes the request.

The key (:func:`request_key`) is the SHA-256 of the stage's template hash, the model, the media's
content hashes and how they are sent, the conversation's text (prompts and previous stages'
outputs, a schema retry's error) and the sampling parameters; never the API key or the endpoint's
address, so one cache serves a local server and a hosted API of the same model. Entries are written
atomically as soon as a reply arrives: a rerun, or a run resumed after a kill, repeats no call
that completed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..media.outputs import check_writable

__all__ = ["ReplyCache", "request_key"]


def request_key(**parts: Any) -> str:
    """SHA-256 (hex) of ``parts`` as canonical JSON."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplyCache:
    """Replies on disk under ``root/<key[:2]>/<key>.json``; ``root=None``: nothing is kept."""

    def __init__(self, root: str | os.PathLike | None):
        self.root = Path(root) if root is not None else None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if self.root is None:
            return None
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def check_writable(self) -> None:
        """Make the folder if missing and write (then remove) a file in it
        (:func:`mime_fast.media.check_writable`): raises the ``OSError`` that writing an entry
        would meet -- before a paid request, not after."""
        if self.root is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        check_writable(self.root)

    def put(self, key: str, entry: dict[str, Any]) -> None:
        if self.root is None:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the corpus's temporary naming (.<name>.tmp-<pid>.<n>): a killed run's are cleaned by the next build
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.{threading.get_ident()}")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entry, f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
