"""Long-context evaluation of a left-to-right LM trained with `run/pretrain.py --objective=clm`.

Reads a held-out text segment by segment with memory (Transformer-XL) and prints perplexity
and bits per character for each evaluation memory length, then the per-token time with memory
against a vanilla evaluation that re-runs a window of the same attention length for every
prediction. With no flags it evaluates the main job's LM on its held-out documents:

  python run/pretrain.py --objective=clm       # -> pretrain_output_clm/
  python run/evaluate_lm.py --eval_mem_len=0,32,64,128,256,512 --speed_lengths=128,400,800,1600,3200
"""

import glob
import os

from absl import app
from absl import flags
from xlnet_tf import cli  # before TensorFlow loads: see xlnet_tf/cli.py

from xlnet_tf import XLNetPretrainer, XLNetTokenizer, checkpoints
from xlnet_tf.json_files import write_json
from xlnet_tf.pretraining import default_data, lm_evaluation
from xlnet_tf.studies.evaluation_speed import evaluation_speed
from xlnet_tf.text.tokenizer import check_vocabulary

import lm_flags

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
FLAGS = flags.FLAGS


def _lengths(flag_name):
  values = []
  for text in FLAGS[flag_name].value:
    if not text.strip().isdigit():
      raise app.UsageError(f"--{flag_name}: {text!r} is not a non-negative integer")
    values.append(int(text))
  return values


def main(argv):
  del argv
  model_dir, sp_path = lm_flags.lm_paths()
  pattern = FLAGS.input_glob or os.path.join(FLAGS.output_dir, "data", "corpus", "valid-*.txt")
  paths = sorted(glob.glob(pattern))
  if not paths:
    raise app.UsageError(f"--input_glob={pattern!r} matches no file")
  memory_lengths, speed_lengths = _lengths("eval_mem_len"), _lengths("speed_lengths")
  model = checkpoints.load_pretrained_head(model_dir, XLNetPretrainer)
  tokenizer = XLNetTokenizer(sp_path)
  check_vocabulary(tokenizer, model.backbone.config,
                   os.path.join(model_dir, checkpoints.own.CONFIG_FILE))
  ids, characters = lm_evaluation.text_stream(default_data.read_text_files(paths), tokenizer)
  print(f"Held-out text: {len(paths)} file(s), {len(ids):,} tokens, {characters:,} characters;"
        f" segments of {FLAGS.eval_tgt_len} tokens, {FLAGS.eval_batch_size} stream(s).")
  print("| memory | attention length | loss | perplexity | bits/char | seconds |")
  print("|---:|---:|---:|---:|---:|---:|")
  evaluations = []
  for mem_len in memory_lengths:
    result = lm_evaluation.evaluate_stream(
        model, ids, FLAGS.eval_tgt_len, mem_len, batch_size=FLAGS.eval_batch_size,
        clamp_len=FLAGS.clamp_len, characters=characters)
    evaluations.append(result.as_dict())
    print(f"| {mem_len} | {mem_len + FLAGS.eval_tgt_len} | {result.loss:.4f} | "
          f"{result.perplexity:.2f} | {result.bits_per_character:.4f} | {result.seconds:.1f} |")
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
    write_json(FLAGS.results_json, {"model_dir": model_dir, "inputs": paths,
                                    "evaluations": evaluations, "speed": speed})


if __name__ == "__main__":
  cli.run(main)
