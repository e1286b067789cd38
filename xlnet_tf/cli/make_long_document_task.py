"""Builds the long-document task from the machine's manual pages: a whole page (NAME and
SYNOPSIS dropped) -> its manual section (see xlnet_tf.studies.long_manual_pages), for the
--max_segments measurement in docs/long_documents.md.

  python data/make_long_document_task.py --output_dir=man_long
  # -> man_long/train.jsonl, man_long/dev.jsonl ({"text", "label", "page"} a line),
  #    man_long/train.txt (the training documents, one a line, for SentencePiece)
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.studies.long_manual_pages import build_long_page_task

flags.DEFINE_string("output_dir", "man_long", "Where train.jsonl and dev.jsonl go.")
flags.DEFINE_string("man_root", "/usr/share/man", "Manual pages (roff, gzip or plain).")
flags.DEFINE_integer("train_per_section", 200, "Training documents per section (at most).")
flags.DEFINE_integer("dev_per_section", 60, "Dev documents per section (held-out pages).")
flags.DEFINE_integer("min_words", 300, "Pages shorter than this are left out.")
flags.DEFINE_integer("max_words", 2000, "Longer pages are cut to their first this many words.")
flags.DEFINE_integer("seed", 0, "Sampling seed.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  task = build_long_page_task(FLAGS.output_dir, FLAGS.man_root, FLAGS.train_per_section,
                              FLAGS.dev_per_section, FLAGS.min_words, FLAGS.max_words,
                              FLAGS.seed)
  for split, counts in task.counts.items():
    print(f"{split}: {sum(counts.values())} documents ("
          + ", ".join(f"section {s}: {n}" for s, n in counts.items())
          + f"), {task.mean_words[split]:.0f} words on average -> {task.files[split]}")


def entry():
  """The console script (setup.cfg) and data/make_long_document_task.py."""
  cli.run(main, usage=__doc__)
