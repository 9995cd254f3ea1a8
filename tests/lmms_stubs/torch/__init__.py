"""Stand-in for torch (tests/lmms_stubs/README.md): the names lmms-eval 0.7.3 and datasets touch
at import time. lmms_eval.utils annotates with ``torch.Tensor`` and ``torch.dtype``; datasets'
pickler checks ``torch.Tensor``, ``torch.Generator`` and ``torch.nn.Module`` when "torch" is in
sys.modules."""

from _stub import missing

from . import nn, utils  # noqa: F401

__version__ = "0.0.0+lmms-stub"
STUB = True


class Tensor:
    pass


class dtype:  # noqa: N801 - torch's name
    pass


class Generator:
    pass


__getattr__ = missing("torch")
