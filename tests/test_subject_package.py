"""The package split of issue 37: ``mime_fast.detect`` holds the models, ``mime_fast.subject`` who
the subject is and where he is.  The models never reach up into the subject's modules, and the
names that moved to ``mime_fast.subject`` are no attributes of ``mime_fast.detect`` any more (its
forwarder of the old names went with issue 53)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mime_fast
import mime_fast.detect as detect
import mime_fast.subject as subject

DETECT = Path(detect.__file__).parent


def test_the_models_import_nothing_of_the_subject() -> None:
    # every import, those inside functions too
    for path in sorted(DETECT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = "." * node.level + (node.module or "")
                names = [a.name for a in node.names]
                assert "subject" not in target.split(".") and not (target == ".." and "subject" in names), \
                    f"{path.name} imports {target} {names}"
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("mime_fast.subject") for a in node.names), path.name


@pytest.mark.parametrize("name", ["SubjectTracker", "select_primary_subject", "TrackingStats", "fill_gaps",
                                  "AllFaceTracker", "FrameTrack"])
def test_the_old_names_are_not_attributes_of_detect(name: str) -> None:
    assert name in subject.__all__ and name not in detect.__all__
    assert not hasattr(detect, name)
    with pytest.raises(AttributeError, match=name):
        getattr(detect, name)
    assert not hasattr(detect, "__getattr__")  # no forwarder of moved names


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        detect.no_such_name  # noqa: B018
    assert Path(mime_fast.__file__).parent / "subject" == Path(subject.__file__).parent
