"""Decoding with a trained pretraining head: generation (`generate`, cached or recomputed
steps), infilling in any order (`fill`, `span_log_prob`, `score_candidates`), and what both
share: the token choice (sampling: greedy, temperature, top-k, top-p), the key/value cache
their steps run over and their compiled functions, kept per model (compile_cache)."""

from xlnet_tf.inference.generation import generate
from xlnet_tf.inference.infilling import fill, score_candidates, span_log_prob

__all__ = ["fill", "generate", "score_candidates", "span_log_prob"]
