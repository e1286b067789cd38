r"""Trains a SentencePiece unigram model with XLNet's control and user-defined symbols.

  python data/train_sentencepiece.py --input_glob='corpus/*.txt' --model_prefix=spiece \
      --vocab_size=32000
"""


from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
from xlnet_tf.utils import files

from xlnet_tf.text.sentencepiece_training import train_sentencepiece
from xlnet_tf.text.tokenizer import XLNetTokenizer

flags.DEFINE_string("input_glob", None, "Text files to train on.")
flags.DEFINE_string("model_prefix", "spiece", "Writes <prefix>.model and <prefix>.vocab.")
flags.DEFINE_integer("vocab_size", 32000, "Vocabulary size.")
flags.DEFINE_bool("uncased", False, "Lower-case the text first.")
flags.DEFINE_float("character_coverage", 0.99995, "Characters the model must cover.")
flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.")
flags.DEFINE_integer("seed", 0, "Random seed.")
flags.mark_flag_as_required("input_glob")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  paths = sorted(files.glob(FLAGS.input_glob))
  if not paths:
    raise app.UsageError(f"--input_glob={FLAGS.input_glob!r} matches no file")
  path = train_sentencepiece(paths, FLAGS.model_prefix, FLAGS.vocab_size, FLAGS.uncased,
                             character_coverage=FLAGS.character_coverage,
                             input_sentence_size=FLAGS.input_sentence_size, seed=FLAGS.seed)
  tokenizer = XLNetTokenizer(path, lower=FLAGS.uncased)
  print(f"Wrote {path}: {tokenizer.vocab_size} pieces; special ids "
        f"{tokenizer.special_ids.as_dict()}")


def entry():
  """The console script (setup.cfg) and data/train_sentencepiece.py."""
  cli.run(main, usage=__doc__)
