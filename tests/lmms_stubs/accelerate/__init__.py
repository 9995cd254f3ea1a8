"""Stand-in for accelerate (tests/lmms_stubs/README.md): lmms_eval.api.task imports ``Accelerator``,
which it makes only for tasks whose data are downloaded videos (``dataset_kwargs`` ``video`` or
``From_YouTube``), not for the json tasks of mime-fast's export."""

from _stub import missing, unavailable

__version__ = "0.0.0+lmms-stub"
STUB = True


class Accelerator:
    __init__ = unavailable("accelerate.Accelerator")


__getattr__ = missing("accelerate")
