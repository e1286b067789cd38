r"""Long-context evaluation of a left-to-right LM trained with `run/pretrain.py --objective=clm`.

Reads a held-out text segment by segment with memory (Transformer-XL) and prints perplexity
and bits per character for each evaluation memory length, then the per-token time with memory
against a vanilla evaluation that re-runs a window of the same attention length for every
prediction. With no flags it evaluates the main job's LM on its held-out documents:

  python run/pretrain.py --objective=clm       # -> pretrain_output_clm/
  python run/evaluate_lm.py --eval_mem_len=0,32,64,128,256,512 --speed_lengths=128,400,800,1600,3200

The memory table ends with Transformer-XL's Table 5 columns: the perplexity at the training
attention length (PPL init), the best (PPL best) and the shortest attention length reaching it.
With --models (two or more LMs of one vocabulary) it computes instead their Relative Effective
Context Length (RECL, the paper's Table 6 and Appendix C) on the same held-out tokens:

  python run/evaluate_lm.py --models=runA/model/lm,runB/model/lm --recl_lengths=32,64,96,128 \
      --recl_r=0.1 --recl_png=recl.png
"""

import glob
import os
from typing import Optional

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

import numpy as np

from xlnet_tf.utils import plots
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.pretraining import context_length, lm_evaluation
from xlnet_tf.pretraining.data import default_data
from xlnet_tf.pretraining.loop import LM_DIR
from xlnet_tf.pretraining.data.records import RECORD_INFO_FILE, load_record_info
from xlnet_tf.studies.evaluation_speed import evaluation_speed

from xlnet_tf.cli import lm_flags

lm_flags.define_lm_flags()
flags.DEFINE_string("input_glob", None, "Held-out text, one sentence a line, a blank line "
                    "between documents (default: --output_dir/data/corpus/valid-*.txt).")
flags.DEFINE_integer("eval_tgt_len", 32, "Tokens per segment.")
flags.DEFINE_list("eval_mem_len", ["0", "32", "64", "128", "256", "512"], "Memory lengths to "
                  "evaluate with (one row each).")
flags.DEFINE_integer("clamp_len", None, "Clamp relative distances (default: the model's).")
flags.DEFINE_integer("eval_batch_size", 1, "Parallel streams the text is cut into.")
flags.DEFINE_list("speed_lengths", ["128", "400", "800", "1600", "3200"], "Attention "
                  "lengths of the speed table (empty: none).")
flags.DEFINE_integer("speed_tgt_len", 128, "Segment length of the timed evaluation with memory.")
flags.DEFINE_string("results_json", None, "Also write the tables here.")
flags.DEFINE_integer("train_attention_length", None, "The attention length the model was "
                     "trained with, for PPL init (default: its mem_len plus the training "
                     "data's seq_len, --output_dir/data/train/record_info.json).")
flags.DEFINE_list("models", None, "RECL of this group of LMs (each as --model_dir takes it, or "
                  "a run/pretrain.py output directory), instead of the memory table.")
flags.DEFINE_list("recl_lengths", ["32", "64", "96", "128", "160", "192", "224", "256"],
                  "Evenly spaced context lengths of RECL (the step is the paper's Delta).")
flags.DEFINE_float("recl_r", 0.1, "RECL compares the top r share of the hardest tokens.")
flags.DEFINE_integer("recl_tokens", 1000, "Held-out tokens scored at every context length.",
                     lower_bound=1)
flags.DEFINE_string("recl_png", None, "RECL: the relative gains as a PNG (the paper's Figure 3).")
FLAGS = flags.FLAGS


def _lengths(flag_name):
  values = []
  for text in FLAGS[flag_name].value:
    if not text.strip().isdigit():
      raise app.UsageError(f"--{flag_name}: {text!r} is not a non-negative integer")
    values.append(int(text))
  return values


def _lm_place(path):
  """An LM (a directory or hub id, as --model_dir takes it), or run/pretrain.py's output
  directory holding one."""
  inside = os.path.join(path, "model", LM_DIR)
  return lm_flags.lm_place(inside if os.path.isdir(inside) else path)


def train_attention_length(model) -> Optional[int]:
  if FLAGS.train_attention_length is not None:
    return FLAGS.train_attention_length
  info_path = os.path.join(FLAGS.output_dir, "data", "train", RECORD_INFO_FILE)
  if not os.path.exists(info_path):
    return None
  return model.backbone.config.mem_len + load_record_info(info_path)["settings"]["seq_len"]


def relative_effective_context(ids, tokenizer):
  """RECL of the --models group; prints the table (and writes --results_json, --recl_png)."""
  if len(FLAGS.models) < 2:
    raise app.UsageError(f"--models: RECL needs a group of at least two models; got "
                         f"{FLAGS.models}")
  if not 0 < FLAGS.recl_r <= 1:
    raise app.UsageError(f"--recl_r={FLAGS.recl_r}: must be in (0, 1]")
  models = {path: lm_flags.language_model(_lm_place(path), tokenizer, "models")
            for path in FLAGS.models}
  lengths = _lengths("recl_lengths")
  losses = context_length.group_token_losses(models, ids, lengths, FLAGS.recl_tokens,
                                             FLAGS.eval_tgt_len)
  result = context_length.relative_context(losses, r=FLAGS.recl_r)
  print(f"RECL (r = {FLAGS.recl_r:g}, Delta = {result.step}, {FLAGS.recl_tokens} tokens):")
  print("| model | RECL | relative gain at each c -> c + Delta |")
  print("|---|---:|---|")
  for name, recl in result.recl.items():
    gains = ", ".join(f"{row[0]}: {100 * row[3]:.1f}%" for row in result.gains[name])
    print(f"| {name} | {recl} | {gains} |")
  if FLAGS.recl_png:
    context_length.plot_relative_gains(result, FLAGS.recl_png)
  if FLAGS.results_json:
    write_json(FLAGS.results_json, {"models": FLAGS.models, "r": result.r, "step": result.step,
                                    "recl": result.recl, "gains": result.gains,
                                    "mean_losses": {name: {c: float(np.mean(values))
                                                           for c, values in by_c.items()}
                                                    for name, by_c in losses.items()}})


def main(argv):
  del argv
  if FLAGS.recl_png:
    plots.check_matplotlib("--recl_png")
  pattern = FLAGS.input_glob or os.path.join(FLAGS.output_dir, "data", "corpus", "valid-*.txt")
  paths = sorted(glob.glob(pattern))
  if not paths:
    raise app.UsageError(f"--input_glob={pattern!r} matches no file")
  memory_lengths, speed_lengths = _lengths("eval_mem_len"), _lengths("speed_lengths")
  # The tokenizer: --sp_path, else the LM's (RECL: the first model's), else the run's.
  place = _lm_place(FLAGS.models[0]) if FLAGS.models else lm_flags.lm_place()
  tokenizer = lm_flags.lm_tokenizer(place, "models" if FLAGS.models else "model_dir")
  ids, characters = lm_evaluation.text_stream(default_data.read_text_files(paths), tokenizer)
  if FLAGS.models:
    relative_effective_context(ids, tokenizer)
    return
  model = lm_flags.language_model(place, tokenizer)
  print(f"Held-out text: {len(paths)} file(s), {len(ids):,} tokens, {characters:,} characters;"
        f" segments of {FLAGS.eval_tgt_len} tokens, {FLAGS.eval_batch_size} stream(s).")
  print("| memory | attention length | loss | perplexity | bits/char | seconds |")
  print("|---:|---:|---:|---:|---:|---:|")
  evaluations = []
  for mem_len in memory_lengths:
    result = lm_evaluation.evaluate_stream(
        model, ids, FLAGS.eval_tgt_len, mem_len, batch_size=FLAGS.eval_batch_size,
        clamp_len=FLAGS.clamp_len, characters=characters)
    evaluations.append(dict(result.as_dict(), attention_length=mem_len + FLAGS.eval_tgt_len))
    print(f"| {mem_len} | {mem_len + FLAGS.eval_tgt_len} | {result.loss:.4f} | "
          f"{result.perplexity:.2f} | {result.bits_per_character:.4f} | {result.seconds:.1f} |")
  trained_length = train_attention_length(model)
  columns = context_length.table5_columns(evaluations, trained_length)
  init = ("not evaluated" if columns["ppl_init"] is None else f"{columns['ppl_init']:.2f}")
  print(f"\nTable 5's columns: PPL init {init} (the training attention length, "
        f"{trained_length}); PPL best {columns['ppl_best']:.2f} at attention length "
        f"{columns['attention_length_best']}.")
  speed = []
  if speed_lengths:
    print(f"\nPer-token evaluation time, batch 1: memory (segments of {FLAGS.speed_tgt_len}) "
          "against re-running a window of the attention length for each prediction.")
    print("| attention length | with memory (ms/token) | vanilla (ms/token) | speed-up |")
    print("|---:|---:|---:|---:|")
    for row in evaluation_speed(model, speed_lengths, FLAGS.speed_tgt_len):
      speed.append(dict(vars(row), speedup=row.speedup))
      print(f"| {row.attention_length} | {row.memory_seconds_per_token * 1e3:.3f} | "
            f"{row.vanilla_seconds_per_token * 1e3:.2f} | {row.speedup:.0f}x |")
  if FLAGS.results_json:
    write_json(FLAGS.results_json, {"model_dir": place.name, "inputs": paths,
                                    "evaluations": evaluations, "table5": columns,
                                    "speed": speed})


def entry():
  """The console script (setup.cfg) and run/evaluate_lm.py."""
  cli.run(main, usage=__doc__)
