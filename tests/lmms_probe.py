"""Run lmms-eval's real TaskManager over an exported task folder and write what it found as JSON.

    python tests/lmms_probe.py DEST OUT.json      (PYTHONPATH=tests/lmms_stubs, as test_export.py runs it)

Started by tests/test_export.py in a subprocess whose ``PYTHONPATH`` puts tests/lmms_stubs first:
lmms-eval 0.7.3 (installed with --no-deps) imports torch, transformers, accelerate and sacrebleu at
module level, and the stand-ins there take their place (tests/lmms_stubs/README.md). Exit status 3:
lmms_eval itself is not installed (the test skips, or fails in CI); any other failure is an error.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

dest, out = sys.argv[1], Path(sys.argv[2])

if importlib.util.find_spec("lmms_eval") is None:
    print("lmms_eval is not installed", file=sys.stderr)
    sys.exit(3)

stubs = Path(__file__).resolve().parent / "lmms_stubs"
import accelerate  # noqa: E402
import sacrebleu  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

for module in (torch, transformers, accelerate, sacrebleu):  # the stand-ins, never the real ones
    assert Path(module.__file__).resolve().is_relative_to(stubs), module.__file__

import lmms_eval  # noqa: E402
from lmms_eval.tasks import TaskManager, get_task_dict  # noqa: E402

assert not Path(lmms_eval.__file__).resolve().is_relative_to(stubs)  # the real lmms-eval
manager = TaskManager(include_path=dest, include_defaults=False)
found = {
    "lmms_eval": str(Path(lmms_eval.__file__).parent),
    "all_groups": manager.all_groups,
    "all_subtasks": manager.all_subtasks,
    "all_tasks": manager.all_tasks,
    "groups": {},
}
for group, tasks in get_task_dict(["mime"], manager).items():
    name = getattr(group, "group_name", None) or getattr(group, "group", None) or str(group)
    built = found["groups"][name] = {}
    for task_name, task in tasks.items():
        docs = list(task.test_docs())
        doc = docs[0]
        target = task.doc_to_target(doc)
        results = task.process_results(doc, [f"The person is {target.lower()}."])
        aggregation = task.aggregation()
        built[task_name] = {
            "class": type(task).__name__,
            "task": task.config.task,
            "docs": docs,
            "visual": task.doc_to_visual(doc),
            "text": task.doc_to_text(doc),
            "target": target,
            "results": results,
            "scores": {metric: aggregation[metric]([results[metric]]) for metric in results},
            "higher_is_better": task.higher_is_better(),
        }
out.write_text(json.dumps(found, default=str))
