"""Stand-in for sacrebleu (tests/lmms_stubs/README.md): lmms_eval.api.metrics imports it for its
BLEU, chrF and TER metrics, which mime-fast's tasks do not use."""

from _stub import missing, unavailable

__version__ = "0.0.0+lmms-stub"
STUB = True

corpus_bleu = unavailable("sacrebleu.corpus_bleu")
corpus_chrf = unavailable("sacrebleu.corpus_chrf")
corpus_ter = unavailable("sacrebleu.corpus_ter")

__getattr__ = missing("sacrebleu")
