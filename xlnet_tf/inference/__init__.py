"""Decoding with a trained pretraining head: generation (`generate`, cached or recomputed
steps, sampling), infilling in any order (`fill`, `span_log_prob`, `score_candidates`) and the
key/value cache both run their steps over."""

from xlnet_tf.inference.generation import generate
from xlnet_tf.inference.infilling import fill, score_candidates, span_log_prob

__all__ = ["fill", "generate", "score_candidates", "span_log_prob"]
