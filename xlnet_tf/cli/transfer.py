r"""Transfer benchmark: XLNet's Table 6 in miniature on your corpus and tasks.

Pretrains each variant with the same budget (steps x tokens), fine-tunes each and a random-init
row on every task (several seeds, the same learning-rate sweep for every row), and writes
results.md, results.json and held_out_loss.png to --output_dir. Interrupted, it resumes:
finished pretraining and fine-tuning runs are kept.

  python run/transfer.py --input_glob='corpus/*.txt' \\
      --task=man_section:man/man_section --task=man_heading:man/man_heading \\
      --variants=perm,mlm,perm_no_memory,perm_token_level,perm_no_bi_data,perm_next_sentence \\
      --pretrain_steps=2000 --seeds=0,1,2 --learning_rates=1e-4,3e-4,1e-3 --output_dir=study

A task is NAME:DIR with DIR/train.jsonl, dev.jsonl and test.jsonl (or .tsv/.csv, the generic
format of run/classifier.py: text[, text_b], label); labels are the training file's.
data/make_manual_page_tasks.py builds such a corpus and tasks from the machine's manual pages.
"""

import glob
import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.utils import plots
from xlnet_tf.utils.json_files import read_json_object
from xlnet_tf.pretraining import recipes
from xlnet_tf.studies import transfer
from xlnet_tf.tasks.finetuning import FinetuningOptions

flags.DEFINE_string("input_glob", None, "Pretraining corpus: text files, one sentence a line, "
                    "a blank line between documents.")
flags.DEFINE_multi_string("task", [], "NAME:DIR of a downstream task (repeatable).")
flags.DEFINE_list("variants", ["perm", "mlm"], f"Variants, from {sorted(transfer.VARIANTS)}.")
flags.DEFINE_string("variants_json", None, "A JSON file {name: {setting: value}} of more "
                    f"variants; settings: {transfer.DATA_KEYS + transfer.RUN_KEYS}.")
flags.DEFINE_string("output_dir", "transfer_output", "Results, data, pretrained backbones.")
# Defaults None: the --input_glob recipe's (recipes.FROM_TEXT, which this study chose).
flags.DEFINE_enum("model_size", None, sorted(SIZE_PRESETS), "Backbone size preset.")
flags.DEFINE_integer("vocab_size", None, "SentencePiece vocabulary.")
flags.DEFINE_integer("seq_len", None, "Pretraining sequence length.")
flags.DEFINE_integer("reuse_len", None, "Pretraining reuse (memory) length.")
flags.DEFINE_integer("num_predict", None, "Predicted tokens per pretraining sequence.")
flags.DEFINE_integer("bsz_per_host", None, "Pretraining batch.")
flags.DEFINE_integer("pretrain_steps", 2000, "Pretraining steps of every variant (the equal "
                     "budget: steps x batch x seq_len tokens).")
flags.DEFINE_float("pretrain_learning_rate", None, "Peak pretraining learning rate.")
flags.DEFINE_integer("pretrain_warmup_steps", None, "Pretraining warmup.")
flags.DEFINE_integer("eval_every", 500, "Held-out loss every this many pretraining steps.")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Fine-tuning seeds.")
flags.DEFINE_list("learning_rates", ["1e-4", "3e-4", "1e-3"], "Fine-tuning learning rates.")
flags.DEFINE_integer("finetune_steps", 300, "Fine-tuning steps.")
flags.DEFINE_integer("finetune_batch_size", 32, "Fine-tuning batch.")
flags.DEFINE_integer("finetune_eval_every", 100, "Dev evaluation every this many steps.")
flags.DEFINE_integer("max_seq_length", 128, "Fine-tuning sequence length.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"],
                  "The classifier's pooling (last: XLNet's <cls> state).")
flags.DEFINE_integer("seed", 0, "Data and pretraining seed.")
flags.DEFINE_integer("intrinsic_examples", 100, "Held-out sentences per span length (1-4 "
                     "words) for span infilling and cloze ranking of every variant (0: none).",
                     lower_bound=0)
flags.DEFINE_integer("cloze_distractors", 4, "Distractor spans per cloze example.",
                     lower_bound=1)
flags.DEFINE_list("snapshots", [], "Pretraining steps at which every variant's backbone is also "
                  "kept and evaluated as a row NAME@STEP (the budget trend along one run).")
flags.DEFINE_bool("jit_compile", True, "XLA for pretraining and fine-tuning (off: short runs "
                  "start sooner).")
FLAGS = flags.FLAGS


def parse_tasks(values):
  tasks = []
  for value in values:
    name, _, directory = value.partition(":")
    if not name or not directory:
      raise app.UsageError(f"--task={value!r}: expected NAME:DIR")
    paths = {}
    for split in ("train", "dev", "test"):
      found = [os.path.join(directory, f"{split}.{ext}") for ext in ("jsonl", "tsv", "csv")
               if os.path.exists(os.path.join(directory, f"{split}.{ext}"))]
      if not found:
        raise app.UsageError(f"--task={value!r}: {directory} has no {split}.jsonl/.tsv/.csv")
      paths[split] = found[0]
    tasks.append(transfer.Task(name, **paths))
  return tasks


def parse_variants():
  variants = {}
  for name in FLAGS.variants:
    if name not in transfer.VARIANTS:
      raise app.UsageError(f"--variants: unknown {name!r}; known: {sorted(transfer.VARIANTS)} "
                           "(others through --variants_json)")
    variants[name] = transfer.VARIANTS[name]
  if FLAGS.variants_json:
    more = read_json_object(FLAGS.variants_json, "an object {name: {setting: value}}")
    for name, settings in more.items():
      if not isinstance(settings, dict):
        raise app.UsageError(f"--variants_json={FLAGS.variants_json}: variant {name!r} is not "
                             "an object {setting: value}")
    variants.update(more)
  return variants


def parse_snapshots(values, pretrain_steps):
  steps = []
  for value in values:
    if not value.isdigit() or not 0 < int(value) < pretrain_steps:
      raise app.UsageError(f"--snapshots: {value!r} is not a step between 0 and "
                           f"--pretrain_steps={pretrain_steps}")
    steps.append(int(value))
  return steps


def pretraining_recipe() -> recipes.PretrainingRecipeOptions:
  """recipes.FROM_TEXT with what the flags give."""
  given = {field: FLAGS[flag].value for field, flag in (
      ("model_size", "model_size"), ("vocab_size", "vocab_size"), ("seq_len", "seq_len"),
      ("reuse_len", "reuse_len"), ("num_predict", "num_predict"),
      ("bsz_per_host", "bsz_per_host"), ("train_steps", "pretrain_steps"),
      ("learning_rate", "pretrain_learning_rate"), ("warmup_steps", "pretrain_warmup_steps"),
      ("eval_every", "eval_every"), ("jit_compile", "jit_compile"))}
  return recipes.FROM_TEXT.replace(**{k: v for k, v in given.items() if v is not None})


def finetuning_options() -> FinetuningOptions:
  """Every fine-tuning run's options (each sets its learning rate, seed and warmup)."""
  return FinetuningOptions(train_steps=FLAGS.finetune_steps,
                           batch_size=FLAGS.finetune_batch_size,
                           eval_every=FLAGS.finetune_eval_every, jit_compile=FLAGS.jit_compile)


def main(argv):
  del argv
  plots.check_matplotlib("run/transfer.py (held_out_loss.png, variants.png)")
  if not FLAGS.input_glob:
    raise app.UsageError("--input_glob (the pretraining corpus) is required")
  corpus_files = sorted(glob.glob(FLAGS.input_glob))
  if not corpus_files:
    raise app.UsageError(f"--input_glob={FLAGS.input_glob!r} matches no file")
  if not FLAGS.task:
    raise app.UsageError("--task=NAME:DIR is required (at least one)")
  study = transfer.TransferStudyOptions(
      output_dir=FLAGS.output_dir, corpus_files=corpus_files, tasks=parse_tasks(FLAGS.task),
      variants=parse_variants(),
      pretraining=pretraining_recipe(), seeds=cli.list_flag("seeds"),
      learning_rates=cli.list_flag("learning_rates", float, "numbers"),
      finetuning=finetuning_options(), max_seq_length=FLAGS.max_seq_length,
      summary_type=FLAGS.summary_type, seed=FLAGS.seed,
      intrinsic_examples=FLAGS.intrinsic_examples, cloze_distractors=FLAGS.cloze_distractors,
      snapshots=parse_snapshots(FLAGS.snapshots, FLAGS.pretrain_steps))
  transfer.run_study(study)
  print(open(os.path.join(FLAGS.output_dir, "results.md"), encoding="utf-8").read())
  print(f"Results: {FLAGS.output_dir}/results.md, results.json, held_out_loss.png")


def entry():
  """The console script (setup.cfg) and run/transfer.py."""
  cli.run(main, usage=__doc__)
