"""Stand-in for transformers (tests/lmms_stubs/README.md): lmms_eval.utils subclasses
``StoppingCriteria`` and annotates with ``PreTrainedTokenizer`` and ``StoppingCriteriaList``;
lmms_eval.loggers.utils reads ``__version__``; datasets' pickler checks ``PreTrainedTokenizerBase``
when "transformers" is in sys.modules."""

from _stub import missing

__version__ = "0.0.0+lmms-stub"
STUB = True


class StoppingCriteria:
    pass


class StoppingCriteriaList(list):
    pass


class PreTrainedTokenizerBase:
    pass


class PreTrainedTokenizer(PreTrainedTokenizerBase):
    pass


__getattr__ = missing("transformers")
