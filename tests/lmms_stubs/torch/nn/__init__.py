"""Stand-in for torch.nn (tests/lmms_stubs/README.md): lmms_eval.api.model's ``nn.Module``."""

from _stub import missing


class Module:
    pass


__getattr__ = missing("torch.nn")
