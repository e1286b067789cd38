"""Builds the long-document corpus of the language-modelling studies from the machine's
manual pages (see xlnet_tf.studies.long_document_corpus): whole pages of at least
--min_words words, held-out pages apart.

  python data/make_long_document_corpus.py --output_dir=long_pages
  python run/pretrain.py --objective=clm --input_glob='long_pages/train/*.txt' --output_dir=lm
  python run/evaluate_lm.py --output_dir=lm --input_glob='long_pages/valid/*.txt'
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.studies.long_document_corpus import build_long_document_corpus

flags.DEFINE_string("output_dir", "long_pages", "Where train/ and valid/ go.")
flags.DEFINE_string("man_root", "/usr/share/man", "Manual pages (roff, gzip or plain).")
flags.DEFINE_integer("min_words", 2000, "Pages shorter than this are left out.", lower_bound=1)
flags.DEFINE_integer("held_out_percent", 10, "Share of the pages held out (by name hash).",
                     lower_bound=1, upper_bound=99)
FLAGS = flags.FLAGS


def main(argv):
  del argv
  corpus = build_long_document_corpus(FLAGS.output_dir, FLAGS.man_root, FLAGS.min_words,
                                      FLAGS.held_out_percent)
  for split, files in corpus.files.items():
    print(f"{split}: {corpus.documents[split]} documents, {corpus.words[split]:,} words "
          f"({corpus.words[split] / max(corpus.documents[split], 1):,.0f} a document) -> "
          f"{', '.join(files)}")


def entry():
  """The console script (setup.cfg) and data/make_long_document_corpus.py."""
  cli.run(main, usage=__doc__)
