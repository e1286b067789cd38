"""Transformer-XL's Table 5 (recurrence x position encoding x loss) and Table 6 (RECL) in
miniature, on the machine's long manual pages (see xlnet_tf/studies/context_ablation.py):

  python run/context_study.py --output_dir=context --train_steps=3000 --seeds=0,1
  # -> context/results.md, results.json, perplexity.png, recl.png

The corpus is made first if --corpus_dir has none (data/make_long_document_corpus.py).
"""

import glob
import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.config import SIZE_PRESETS
from xlnet_tf.utils import plots
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.pretraining import context_length
from xlnet_tf.studies import context_ablation
from xlnet_tf.studies.long_document_corpus import build_long_document_corpus

flags.DEFINE_string("corpus_dir", "long_pages", "The long-document corpus (train/, valid/).")
flags.DEFINE_string("output_dir", "context_study", "Runs, results and plots.")
flags.DEFINE_list("variants", list(context_ablation.VARIANTS), "Table 5's rows to train.")
flags.DEFINE_list("seeds", ["0", "1"], "Pretraining seeds of every variant.")
flags.DEFINE_integer("train_steps", 3000, "Steps of every run (the equal budget).",
                     lower_bound=1)
flags.DEFINE_enum("model_size", "demo", sorted(SIZE_PRESETS), "Backbone size.")
flags.DEFINE_list("attention_lengths", ["32", "64", "128", "160", "256", "384", "512", "640"],
                  "Evaluation attention lengths (the first is the training segment or more).")
flags.DEFINE_list("recl_lengths", [str(32 * k) for k in range(1, 13)],
                  "Evenly spaced context lengths of RECL (the step is the paper's Delta).")
flags.DEFINE_integer("eval_tokens", 60_000, "Held-out tokens of each perplexity.",
                     lower_bound=100)
flags.DEFINE_integer("recl_tokens", 1000, "Held-out tokens RECL scores.", lower_bound=10)
flags.DEFINE_integer("eval_batch_size", 8, "Parallel streams of each perplexity evaluation.",
                     lower_bound=1)
FLAGS = flags.FLAGS


def main(argv):
  del argv
  plots.check_matplotlib("run/context_study.py (perplexity.png, recl.png)")
  unknown = [name for name in FLAGS.variants if name not in context_ablation.VARIANTS]
  if unknown:
    raise app.UsageError(f"--variants: unknown {unknown}; known: "
                         f"{sorted(context_ablation.VARIANTS)}")
  try:
    context_length.check_context_lengths(cli.list_flag("recl_lengths"))
  except UserInputError as error:
    raise app.UsageError(f"--recl_lengths: {error}") from None
  if not glob.glob(os.path.join(FLAGS.corpus_dir, "train", "*.txt")):
    corpus = build_long_document_corpus(FLAGS.corpus_dir)
    print(f"Corpus: {corpus.documents} documents, {corpus.words} words -> {FLAGS.corpus_dir}")
  study = context_ablation.ContextStudyOptions(
      output_dir=FLAGS.output_dir,
      train_files=sorted(glob.glob(os.path.join(FLAGS.corpus_dir, "train", "*.txt"))),
      held_out_files=sorted(glob.glob(os.path.join(FLAGS.corpus_dir, "valid", "*.txt"))),
      variants={name: context_ablation.VARIANTS[name] for name in FLAGS.variants},
      pretraining=context_ablation.RECIPE.replace(train_steps=FLAGS.train_steps,
                                                  model_size=FLAGS.model_size),
      seeds=cli.list_flag("seeds"), attention_lengths=cli.list_flag("attention_lengths"),
      recl_lengths=cli.list_flag("recl_lengths"), eval_tokens=FLAGS.eval_tokens,
      recl_tokens=FLAGS.recl_tokens, eval_batch_size=FLAGS.eval_batch_size)
  context_ablation.run_study(study)
  print(open(os.path.join(FLAGS.output_dir, "results.md"), encoding="utf-8").read())
  print(f"Results: {FLAGS.output_dir}/results.md, results.json, perplexity.png, recl.png")


def entry():
  """The console script (setup.cfg) and run/context_study.py."""
  cli.run(main, usage=__doc__)
