"""Stand-in for torch.utils.collect_env (tests/lmms_stubs/README.md): lmms_eval.loggers.utils
imports ``get_pretty_env_info`` (called when a run's results are logged)."""

from _stub import unavailable

get_pretty_env_info = unavailable("torch.utils.collect_env.get_pretty_env_info")
