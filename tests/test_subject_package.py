"""The package split of issue 37: ``mime_fast.detect`` holds the models, ``mime_fast.subject`` who
the subject is and where he is.  The models never reach up into the subject's modules, and the
names ``mime_fast.detect`` exported before the split still resolve, with a warning naming the new
home."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mime_fast
import mime_fast.detect as detect
import mime_fast.subject as subject

DETECT = Path(detect.__file__).parent


def test_the_models_import_nothing_of_the_subject() -> None:
    # (the one exception: detect's __getattr__, which forwards the old names when asked)
    for path in sorted(DETECT.glob("*.py")):
        tree = ast.parse(path.read_text())
        forwarder = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
                     for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and id(node) not in forwarder:
                target = "." * node.level + (node.module or "")
                names = [a.name for a in node.names]
                assert "subject" not in target.split(".") and not (target == ".." and "subject" in names), \
                    f"{path.name} imports {target} {names}"


@pytest.mark.parametrize("name", ["SubjectTracker", "select_primary_subject", "TrackingStats", "fill_gaps",
                                  "AllFaceTracker", "FrameTrack"])
def test_the_old_names_resolve_with_a_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"mime_fast.subject.{name}"):
        old = getattr(detect, name)
    assert old is getattr(subject, name)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        detect.no_such_name  # noqa: B018
    assert "SubjectTracker" not in detect.__all__ and "SubjectTracker" in subject.__all__
    assert Path(mime_fast.__file__).parent / "subject" == Path(subject.__file__).parent
