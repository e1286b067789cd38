"""Builds a transfer-study domain from the machine's manual pages (/usr/share/man): an
unlabelled corpus and two labelled classification tasks (see xlnet_tf.studies.manual_pages).

  python data/make_manual_page_tasks.py --output_dir=man
  # -> man/corpus/man-*.txt (about 2 M words), man/man_section/{train,dev,test}.jsonl,
  #    man/man_heading/{train,dev,test}.jsonl
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.studies.manual_pages import build_manual_page_data

flags.DEFINE_string("output_dir", "man", "Where the corpus and the tasks go.")
flags.DEFINE_string("man_root", "/usr/share/man", "Manual pages (roff, gzip or plain).")
flags.DEFINE_integer("corpus_words", 2_000_000, "Words of unlabelled text (training pages).")
flags.DEFINE_integer("train_examples", 1000, "Labelled training examples per task.")
flags.DEFINE_integer("dev_examples", 1000, "Dev examples per task (held-out pages).")
flags.DEFINE_integer("test_examples", 2000, "Test examples per task (held-out pages).")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  data = build_manual_page_data(FLAGS.output_dir, FLAGS.man_root, FLAGS.corpus_words,
                                FLAGS.train_examples, FLAGS.dev_examples, FLAGS.test_examples,
                                seed=FLAGS.seed)
  print(f"Corpus: {data.corpus_words:,} words in {len(data.corpus_files)} files "
        f"({FLAGS.output_dir}/corpus)")
  for task, counts in data.counts.items():
    print(f"{task}: " + ", ".join(f"{split} {count}" for split, count in counts.items()))


def entry():
  """The console script (setup.cfg) and data/make_manual_page_tasks.py."""
  cli.run(main, usage=__doc__)
