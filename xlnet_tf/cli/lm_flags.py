"""Flags the tools that read a language model share (evaluate_lm.py, generate.py, infill.py):
where run/pretrain.py's output is, and the LM and SentencePiece model, under it by default.

--model_dir takes an LM in any layout XLNetPretrainer.from_pretrained reads, or a hub id
(read by pretrained_flags, as the fine-tuning tools read --init_checkpoint): run/pretrain.py's
model/lm, transformers' XLNetLMHeadModel, the original pretraining's TF1 checkpoint; its
spiece.model (with tokenizer_config.json) is the tokenizer unless --sp_path says otherwise."""

import os
from typing import Optional

from absl import flags

from xlnet_tf.checkpoints import pretrained
from xlnet_tf.heads.pretrainer import XLNetPretrainer
from xlnet_tf.pretraining.loop import LM_DIR
from xlnet_tf.text.tokenizer import XLNetTokenizer, check_vocabulary

from xlnet_tf.cli import pretrained_flags

HELP_GROUP = "Language model (the LM tools' shared flags)"  # in --help
LANGUAGE_MODEL = ("a language model (an XLNetPretrainer: run/pretrain.py's model/lm, "
                  "transformers' XLNetLMHeadModel or the original pretraining's checkpoint)")


def define_lm_flags(default_output_dir: str = "pretrain_output_clm"):
  flags.DEFINE_string("output_dir", default_output_dir, "What run/pretrain.py wrote; gives "
                      "the defaults of --model_dir, --sp_path and other paths under it.")
  flags.DEFINE_string("model_dir", None, "The LM: a directory holding one (run/pretrain.py's "
                      "model/lm, Hugging Face's XLNetLMHeadModel, the original's pretraining "
                      "checkpoint) or a Hugging Face hub id (default: --output_dir/model/lm).")
  flags.DEFINE_string("sp_path", None, "SentencePiece model (default: --model_dir's "
                      "spiece.model, else --output_dir/data/spiece.model).")


def lm_place(name: Optional[str] = None) -> pretrained.Pretrained:
  """Where the LM `name` (default: --model_dir, else run/pretrain.py's under --output_dir)
  lies, and its layout."""
  values = flags.FLAGS
  return pretrained_flags.located(
      name or values.model_dir or os.path.join(values.output_dir, "model", LM_DIR))


def lm_tokenizer(place: pretrained.Pretrained, model_flag: str = "model_dir") -> XLNetTokenizer:
  """--sp_path, else the LM directory's tokenizer, else --output_dir/data/spiece.model."""
  return pretrained_flags.tokenizer(
      place, model_flag, default_sp_path=os.path.join(flags.FLAGS.output_dir, "data",
                                                      "spiece.model"))


def language_model(place: pretrained.Pretrained, tokenizer: XLNetTokenizer,
                   model_flag: str = "model_dir", **config_overrides) -> XLNetPretrainer:
  """The XLNetPretrainer `place` holds, its LM head's weights loaded, checked first to fit
  `tokenizer`; `config_overrides`: run-time options (bi_data, mem_len, ...)."""
  check_vocabulary(tokenizer, pretrained.stored_config(place, config_overrides),
                   f"--{model_flag}={place.name}")
  return pretrained_flags.stored_head(place, XLNetPretrainer, model_flag, LANGUAGE_MODEL,
                                      **config_overrides)


def define_sampling_flags(seed_help: str = "Makes sampling reproducible."):
  """Greedy or sampled token choice (inference.sampling.choose_tokens): generate.py, infill.py."""
  flags.DEFINE_float("temperature", 0.0, "0: greedy; > 0: sample from softmax(logits / t).")
  flags.DEFINE_integer("top_k", 0, "Sample among the k most likely tokens (0: all).")
  flags.DEFINE_float("top_p", 1.0, "Sample among the most likely tokens holding this much "
                     "probability, in (0, 1].")
  flags.DEFINE_integer("seed", None, seed_help)
