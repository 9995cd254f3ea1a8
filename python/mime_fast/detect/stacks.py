"""Which model stack runs: the paper stack's files found (:func:`find_paper_models`) and loaded
(:func:`load_paper_stack`), the choice between it and the offline stack (:func:`stack_choice`,
:func:`load_stack`), the stack a process loads, once per thread or, on a GPU, once per process
(:func:`default_stack`), and ``mime-fast models`` (:func:`paper_models_status`,
:func:`fetch_paper_models`).  The models themselves: :mod:`mime_fast.detect.paper` and
:mod:`mime_fast.detect.models`.

Discovery (:func:`find_paper_models`): each file is looked up in, in order, the ``root`` argument,
the folder named by ``MIME_FAST_MODELS`` (each followed by its ``buffalo_l`` subfolder), and
``~/.insightface/models/buffalo_l``.  The person detector is the file named by ``MIME_FAST_YOLO``, else the
first ``yolov8*.onnx`` (by name) in those folders; without one the paper stack uses the offline HOG
people detector and says so.  :func:`load_stack` picks a stack: ``"auto"`` is the paper stack when
its face models are found, else the offline stack; ``MIME_FAST_STACK`` (``auto`` / ``paper`` /
``offline``) overrides what ``"auto"`` means.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .batching import shared_stack
from .interface import FaceDetector, FaceEmbedder, LandmarkModel, PersonDetector
from .models import HogPersonDetector, load_offline_stack, person_detectors
from .paper import PAPER_FILES, ArcFaceEmbedder, Landmark106, ScrfdDetector, YoloV8PersonDetector
from .weights import ModelNotAvailable

__all__ = [
    "PaperStack",
    "default_stack",
    "fetch_paper_models",
    "find_paper_models",
    "load_paper_stack",
    "load_stack",
    "paper_models_status",
    "paper_search_dirs",
    "stack_choice",
]


def paper_search_dirs(root: str | Path | None = None) -> list[Path]:
    """Folders searched for the paper stack, in order: ``root`` and ``$MIME_FAST_MODELS`` (each
    followed by its ``buffalo_l`` subfolder), then ``~/.insightface/models/buffalo_l``."""
    out: list[Path] = []
    for b in (Path(p).expanduser() for p in (root, os.environ.get("MIME_FAST_MODELS")) if p):
        out += [d for d in (b, b / "buffalo_l") if d not in out]
    home = Path("~/.insightface/models/buffalo_l").expanduser()
    return out + ([home] if home not in out else [])


def find_paper_models(root: str | Path | None = None) -> dict[str, Path | None]:
    """Paths of the paper stack's files (role -> path, ``None`` when not found) for ``detector``,
    ``landmarks``, ``embedder`` (first folder of :func:`paper_search_dirs` holding the file) and
    ``persons`` (``$MIME_FAST_YOLO`` if it names a file, else the first ``yolov8*.onnx`` by name in
    those folders)."""
    dirs = paper_search_dirs(root)
    found: dict[str, Path | None] = {}
    for role in ("detector", "landmarks", "embedder"):
        name = PAPER_FILES[role][0]
        found[role] = next((d / name for d in dirs if (d / name).is_file()), None)
    env = os.environ.get("MIME_FAST_YOLO")
    if env:
        found["persons"] = Path(env).expanduser() if Path(env).expanduser().is_file() else None
    else:
        found["persons"] = next((p for d in dirs if d.is_dir() for p in sorted(d.glob("yolov8*.onnx")) if p.is_file()),
                                None)
    return found


def _where(root) -> str:
    yolo = os.environ.get("MIME_FAST_YOLO")
    return ", ".join(str(d) for d in paper_search_dirs(root)) + (f"; YOLOv8: $MIME_FAST_YOLO={yolo}" if yolo else "")


@dataclass
class PaperStack:
    """The paper stack (same attributes as :class:`~mime_fast.detect.OfflineStack`, plus ``files``:
    role -> path used, and ``notes``: what was substituted)."""

    detector: FaceDetector
    landmarks: LandmarkModel
    embedder: FaceEmbedder | None
    persons: PersonDetector | None
    name: str = "paper"
    files: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def load_paper_stack(root: str | Path | None = None, *, embedder: bool = True, persons: bool = True,
                     threads: int | None = None) -> PaperStack:
    """Load the paper stack from the files :func:`find_paper_models` finds.  Raises
    :class:`ModelNotAvailable` naming the missing files and the folders searched.  Without a YOLOv8
    file the offline HOG people detector is used (a warning says so, and ``notes``).
    ``embedder=False`` / ``persons=False`` skip those models (attribute ``None``)."""
    found = find_paper_models(root)
    need = ["detector", "landmarks"] + (["embedder"] if embedder else [])
    missing = [PAPER_FILES[r][0] for r in need if found[r] is None]
    if missing:
        raise ModelNotAvailable(
            f"paper stack: {', '.join(missing)} not found (looked in {_where(root)}); get InsightFace's "
            f"buffalo_l (mime-fast models --fetch, or copy the files into $MIME_FAST_MODELS)")
    files = {r: found[r] for r in need}
    notes = []
    det = ScrfdDetector(found["detector"], threads=threads)
    lmk = Landmark106(found["landmarks"], threads=threads)
    emb = ArcFaceEmbedder(found["embedder"], threads=threads) if embedder else None
    per = None
    if persons and found["persons"] is not None:
        per = YoloV8PersonDetector(found["persons"], threads=threads)
        files["persons"] = found["persons"]
    elif persons:
        per = person_detectors(HogPersonDetector)
        notes.append(f"no YOLOv8 ONNX found ($MIME_FAST_YOLO or yolov8*.onnx in {_where(root)}): "
                     f"using the offline person detectors (BlazePose, HOG)")
        warnings.warn("paper stack: " + notes[-1], stacklevel=2)
    return PaperStack(det, lmk, emb, per, files=files, notes=notes)


STACKS = ("auto", "paper", "offline")


def stack_choice(name: str = "auto", root: str | Path | None = None, *, embedder: bool = True) -> str:
    """Which stack :func:`load_stack` loads for ``name`` (nothing is loaded): ``"paper"`` or
    ``"offline"``.  ``"auto"`` reads ``$MIME_FAST_STACK`` (``auto``/``paper``/``offline``) and, when
    that is unset or ``auto``, is ``"paper"`` when the paper stack's face models are found."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        name = (os.environ.get("MIME_FAST_STACK") or "auto").strip().lower()
    if name not in STACKS:
        raise ValueError(f"unknown model stack {name!r} (MIME_FAST_STACK or argument): one of {STACKS}")
    if name != "auto":
        return name
    found = find_paper_models(root)
    need = ("detector", "landmarks", "embedder") if embedder else ("detector", "landmarks")
    return "paper" if all(found[r] is not None for r in need) else "offline"


def load_stack(name: str = "auto", root: str | Path | None = None, *, embedder: bool = True,
               persons: bool = True):
    """Load a model stack: ``"paper"`` (:func:`load_paper_stack`), ``"offline"``
    (:func:`~mime_fast.detect.load_offline_stack`) or ``"auto"`` (:func:`stack_choice`).  The result
    has ``detector``, ``landmarks``, ``embedder``, ``persons`` and ``name``."""
    if stack_choice(name, root, embedder=embedder) == "paper":
        return load_paper_stack(root, embedder=embedder, persons=persons)
    return load_offline_stack(embedder=embedder, persons=persons)


_STACKS = None
_SHARED_STACKS: dict = {}  # device -> the process's brokered GPU stack
_SHARED_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


def _load_stack(device: str):
    if device == "cuda" and stack_choice() == "offline":
        try:  # lazy: the torch models need torch, an optional package
            from .torch_models import load_torch_stack, torch_cuda_available
        except Exception as e:  # noqa: BLE001 - torch absent or broken: the CPU models
            _log.info("device='cuda': torch not importable (%s); the models run on the CPU", e)
        else:
            if torch_cuda_available():
                return load_torch_stack("cuda")
            _log.info("device='cuda': torch sees no CUDA device; the models run on the CPU")
    return load_stack()


def default_stack(device: str = "cpu"):
    """The model stack :func:`load_stack` picks (``"auto"``: MIME's paper stack when
    its face models are found, else the offline stack; ``MIME_FAST_STACK`` overrides), loaded once
    per thread (the OpenCV DNN and dlib models are not safe to share between threads).

    ``device="cuda"``: where that choice is the offline stack and torch sees a CUDA device, the
    same models on the GPU (:func:`mime_fast.detect.torch_models.load_torch_stack`, name
    ``"offline-torch"``: the same selection and tracking within the tolerances its tests measure),
    loaded once per process and shared by its threads through a model broker
    (:func:`~mime_fast.detect.batching.shared_stack`: the calls of clips built at once are batched
    across them, at fixed batch sizes, with the results each clip gets alone); otherwise the CPU
    stack.  ``"cpu"`` is always exactly the CPU stack.  The stack loaded is logged
    (``mime_fast.detect.stacks``, INFO) and is the ``name`` of the result."""
    global _STACKS
    if device != "cpu" and device in _SHARED_STACKS:
        return _SHARED_STACKS[device]
    if _STACKS is None:
        _STACKS = threading.local()
    attr = "stack" if device == "cpu" else f"stack_{device}"
    st = getattr(_STACKS, attr, None)
    if st is None:
        if device == "cpu":
            st = _load_stack(device)
        else:
            with _SHARED_LOCK:  # one thread loads the process's GPU models; the others wait for them
                if device in _SHARED_STACKS:
                    return _SHARED_STACKS[device]
                st = _load_stack(device)
                if getattr(st, "name", "") == "offline-torch":
                    st = _SHARED_STACKS[device] = shared_stack(st)
                    _log.info("detection models: %s stack (device=%s), shared by this process's clips", st.name, device)
                    return st
        setattr(_STACKS, attr, st)
        _log.info("detection models: %s stack (device=%s)", getattr(st, "name", "?"), device)
    return st


def paper_models_status(root: str | Path | None = None) -> list[dict]:
    """The paper stack's files, found or not (rows shaped as :func:`~mime_fast.detect.models_status`'s:
    ``role``, ``package``, ``ok``, ``path``, ``hint`` -- where it looked when not found).  Nothing is
    loaded."""
    found = find_paper_models(root)
    rows = []
    for role, (name, what) in PAPER_FILES.items():
        p = found[role]
        hint = f"{name} not found in {_where(root)}"
        if role == "persons":
            hint += " (the offline person detectors stand in: BlazePose, HOG)"
        rows.append({"role": what, "package": "ultralytics (AGPL-3.0)" if role == "persons" else
                     "insightface buffalo_l (non-commercial)", "ok": p is not None,
                     "path": None if p is None else str(p), "hint": "" if p is not None else hint})
    return rows


def _have_internet(host: str = "github.com", port: int = 443, timeout: float = 3.0) -> bool:
    import socket

    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def fetch_paper_models(dest: str | Path | None = None, *, yolo: str = "yolov8n", timeout: float = 3.0) -> dict[str, Path]:
    """Download the paper stack: InsightFace's ``buffalo_l`` as ``FaceAnalysis`` does (its
    ``ensure_available`` download into ``dest/models/buffalo_l``, ``dest`` default ``~/.insightface``) and, when ultralytics is
    importable, ``{yolo}.pt`` exported to ONNX next to it.  Returns role -> path of what is there
    afterwards.  Raises :class:`ModelNotAvailable` with the reason (insightface / onnx not importable,
    no internet within ``timeout`` seconds) before downloading anything."""
    import importlib.util
    import shutil

    missing = [m for m in ("insightface", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelNotAvailable(f"fetching the paper stack needs {' and '.join(missing)} "
                                f"(pip install --no-deps insightface==2.1 && pip install onnx); or copy "
                                f"det_10g.onnx, 2d106det.onnx, w600k_r50.onnx into $MIME_FAST_MODELS")
    if not _have_internet(timeout=timeout):
        raise ModelNotAvailable(f"no internet connection (github.com:443 not reachable within {timeout:g} s): "
                                f"copy det_10g.onnx, 2d106det.onnx, w600k_r50.onnx (InsightFace buffalo_l) and a "
                                f"yolov8*.onnx into $MIME_FAST_MODELS or ~/.insightface/models/buffalo_l")
    from insightface.utils import ensure_available  # FaceAnalysis(name="buffalo_l")'s download step

    root = Path(dest or "~/.insightface").expanduser()
    folder = Path(ensure_available("models", "buffalo_l", root=str(root)))
    if importlib.util.find_spec("ultralytics") is not None and not list(folder.glob("yolov8*.onnx")):
        from ultralytics import YOLO

        onnx_path = Path(YOLO(f"{yolo}.pt").export(format="onnx", imgsz=640))
        shutil.move(str(onnx_path), folder / onnx_path.name)
    found = find_paper_models(folder)
    return {r: p for r, p in found.items() if p is not None}
