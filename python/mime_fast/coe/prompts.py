"""The paper's prompts as Jinja2 templates (``prompts/*.j2``, see ``prompts/README.md``).

A stage's prompt is two templates: ``<stage>_system.j2`` (the system prompt) and
``<stage>_input.j2`` (the text of the user turn, after the media). :func:`template_hash` is part of
every request's cache key, so editing a template invalidates exactly the requests it renders.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..spec import SUBSETS

__all__ = ["LEVEL", "RETRY_TEMPLATE", "STAGES", "SUBSET_NAMES", "TEMPLATE_DIR", "render", "render_retry",
           "template_hash"]

TEMPLATE_DIR = Path(__file__).with_name("prompts")

#: The prompts, by stage: (system template, input template).
STAGES = {
    "stage1": ("stage1_system.j2", "stage1_input.j2"),
    "stage2_light": ("stage2_light_system.j2", "stage2_input.j2"),
    "stage2_heavy": ("stage2_heavy_system.j2", "stage2_input.j2"),
    "stage3": ("stage3_system.j2", "stage3_input.j2"),
    "stage4": ("stage4_system.j2", "stage4_input.j2"),
}

#: The user turn that asks again after a reply that does not match its schema.
RETRY_TEMPLATE = "retry_input.j2"

#: The paper's blur levels (its stage II/IV prompts say "Level 2/3").
LEVEL = {"none": 1, "light": 2, "heavy": 3}

#: The subsets' names in the paper (:attr:`mime_fast.spec.SubsetSpec.name`).
SUBSET_NAMES = {c.value: s.name for c, s in SUBSETS.items()}


@lru_cache(maxsize=None)
def _environment(directory: str):
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(directory), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=False, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def template_hash(stage: str, directory: Path = TEMPLATE_DIR) -> str:
    """SHA-256 of the stage's two template files (their bytes), hex."""
    h = hashlib.sha256()
    for name in STAGES[stage]:
        data = (Path(directory) / name).read_bytes()
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def render(stage: str, directory: Path = TEMPLATE_DIR, **slots: Any) -> tuple[str, str]:
    """The stage's (system prompt, user text) with ``slots`` filled (a missing slot raises)."""
    env = _environment(str(directory))
    system, user = (env.get_template(name).render(**slots).strip() for name in STAGES[stage])
    return system, user


def render_retry(error: str, schema: str, directory: Path = TEMPLATE_DIR) -> str:
    """The user turn asking again after an invalid reply (``error``: what was wrong)."""
    return _environment(str(directory)).get_template(RETRY_TEMPLATE).render(error=error, schema=schema).strip()
