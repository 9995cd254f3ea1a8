"""Stand-in for torch.utils (tests/lmms_stubs/README.md)."""

from _stub import missing

__getattr__ = missing("torch.utils")
