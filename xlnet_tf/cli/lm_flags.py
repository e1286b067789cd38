"""Flags the tools that read run/pretrain.py's LM share (evaluate_lm.py, generate.py): where
the run's output is, and the LM and SentencePiece model under it by default."""

import os

from absl import flags

from xlnet_tf.pretraining.loop import LM_DIR


def define_lm_flags(default_output_dir: str = "pretrain_output_clm"):
  flags.DEFINE_string("output_dir", default_output_dir, "What run/pretrain.py wrote; gives "
                      "the defaults of --model_dir, --sp_path and other paths under it.")
  flags.DEFINE_string("model_dir", None, "The LM (default: --output_dir/model/lm).")
  flags.DEFINE_string("sp_path", None, "SentencePiece model (default: --output_dir/data/"
                      "spiece.model).")


def lm_paths():
  """(model_dir, sp_path) from the flags above."""
  values = flags.FLAGS
  return (values.model_dir or os.path.join(values.output_dir, "model", LM_DIR),
          values.sp_path or os.path.join(values.output_dir, "data", "spiece.model"))


def define_sampling_flags(seed_help: str = "Makes sampling reproducible."):
  """Greedy or sampled token choice (inference.sampling.choose_tokens): generate.py, infill.py."""
  flags.DEFINE_float("temperature", 0.0, "0: greedy; > 0: sample from softmax(logits / t).")
  flags.DEFINE_integer("top_k", 0, "Sample among the k most likely tokens (0: all).")
  flags.DEFINE_float("top_p", 1.0, "Sample among the most likely tokens holding this much "
                     "probability, in (0, 1].")
  flags.DEFINE_integer("seed", None, seed_help)
