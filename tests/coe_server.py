"""A small OpenAI-compatible chat server for the coe tests: real HTTP on localhost, replies from a
script, every request recorded (body, headers, the media it carried, decoded)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

STAGE_MARKERS = {
    "Multimodal Emotion Analysis Expert": "stage1",
    "Light Blur Specialist": "stage2_light",
    "Heavy Blur Specialist": "stage2_heavy",
    "Blind Emotion Inference Engine": "stage3",
    "Multimodal CoT Generator": "stage4",
}


@dataclass
class Request:
    n: int  # 1-based arrival order
    body: dict[str, Any]
    headers: dict[str, str]
    stage: str
    videos: list[str]  # corpus paths of the videos sent (by content), or URLs
    audios: list[str]
    images: list[bytes]
    user_text: str
    history: list[dict[str, Any]]  # messages after the first user turn (schema retries)

    @property
    def system(self) -> str:
        return self.body["messages"][0]["content"]


@dataclass
class Reply:
    status: int = 200
    content: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def _ground_truth(text: str) -> str:
    m = re.search(r"EMOTION=(\w+)", text) or re.search(r"\*\*(\w+)\*\*", text)
    return m.group(1) if m else "Neutral"


def default_reply(req: Request) -> Reply:
    """Stage I names the video it saw and the ground truth; stage II wraps the cues it was given;
    stage III predicts the ground truth carried along; stage IV is valid JSON."""
    video = req.videos[0] if req.videos else f"{len(req.images)} frames"
    if req.stage == "stage1":
        m = re.search(r"ground truth emotion is \*\*(\w+)\*\*", req.system)
        return Reply(content=f"cues of {video} EMOTION={m.group(1) if m else '?'} audio={bool(req.audios)}")
    if req.stage.startswith("stage2"):
        return Reply(content=f"[REMAINED] {req.stage} on {video} of ({req.user_text.splitlines()[-1]})")
    if req.stage == "stage3":
        return Reply(content=json.dumps({"predicted_emotion": _ground_truth(req.user_text), "confidence": "High",
                                         "emotion_cues": f"emotion cues of ({req.user_text.splitlines()[-1]})",
                                         "reasoning": "scripted"}))
    if req.stage == "stage4":
        m = re.search(r"expresses \*\*(\w+)\*\*", req.system)
        return Reply(content="```json\n" + json.dumps({"scene_understanding": f"scene of {video}",
                                                       "emotional_analysis": "analysis",
                                                       "predicted_emotion": m.group(1)}) + "\n```")
    return Reply(status=400, body={"error": {"message": "unknown prompt"}})


class FakeChatServer:
    """``url`` is the base URL (``http://127.0.0.1:PORT/v1``); ``script(request) -> Reply``
    (default :func:`default_reply`); ``media_by_sha`` maps a file's SHA-256 to its corpus path."""

    def __init__(self, media_by_sha: dict[str, str] | None = None,
                 script: Callable[[Request], Reply] | None = None):
        self.media_by_sha = media_by_sha or {}
        self.script = script or default_reply
        self.requests: list[Request] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def by_stage(self, stage: str) -> list[Request]:
        return [r for r in self.requests if r.stage == stage]

    def _decode(self, body: dict[str, Any], n: int, headers: dict[str, str]) -> Request:
        system = body["messages"][0]["content"]
        stage = next((s for marker, s in STAGE_MARKERS.items() if marker in system), "unknown")
        user = body["messages"][1]["content"]
        videos: list[str] = []
        audios: list[str] = []
        images: list[bytes] = []
        text = user if isinstance(user, str) else ""
        name = lambda data: self.media_by_sha.get(hashlib.sha256(data).hexdigest(), "<unknown media>")  # noqa: E731
        if isinstance(user, list):
            for part in user:
                if part["type"] == "text":
                    text = part["text"]
                elif part["type"] == "video_url":
                    url = part["video_url"]["url"]
                    videos.append(name(base64.b64decode(url.split(",", 1)[1])) if url.startswith("data:") else url)
                elif part["type"] == "image_url":
                    images.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
                elif part["type"] == "input_audio":
                    audios.append(name(base64.b64decode(part["input_audio"]["data"])))
                elif part["type"] == "audio_url":
                    audios.append(part["audio_url"]["url"])
        return Request(n, body, headers, stage, videos, audios, images, text, body["messages"][2:])

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                with server._lock:
                    n = len(server.requests) + 1
                    req = server._decode(json.loads(raw), n, {k.lower(): v for k, v in self.headers.items()})
                    server.requests.append(req)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server.script(req)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if reply.status == 200 and reply.body is None:
                    body = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                            "model": req.body["model"],
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply.content}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}
                else:
                    body = reply.body if reply.body is not None else {"error": {"message": f"HTTP {reply.status}"}}
                data = json.dumps(body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client is gone (killed)

        return Handler


def media_index(corpus: Path) -> dict[str, str]:
    """SHA-256 -> corpus path of every output file of a built corpus."""
    return {hashlib.sha256(p.read_bytes()).hexdigest(): str(p.relative_to(corpus))
            for p in corpus.rglob("*") if p.suffix in (".mp4", ".wav")}
