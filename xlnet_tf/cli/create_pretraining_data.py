r"""Creates XLNet pretraining TFRecords with pre-computed factorization orders.

With no --input_glob, the corpus is the Python reference documentation that ships with every
Python (pydoc_data), written as text files under save_dir/corpus; with no --sp_path, a
SentencePiece model is trained on it first.

  python data/create_pretraining_data.py --input_glob='corpus/*.txt' --sp_path=spiece.model \
      --save_dir=proc_data --seq_len=512 --reuse_len=256 --num_predict=85 --bsz_per_host=32
"""

import functools
import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
from xlnet_tf.utils import files

from xlnet_tf.pretraining.data import corpus
from xlnet_tf import objectives
from xlnet_tf.pretraining.data.settings import default_num_predict, default_reuse_len
from xlnet_tf.pretraining.data.stage import create_pretraining_data, data_config_from_flags
from xlnet_tf.text.sentencepiece_training import train_sentencepiece

flags.DEFINE_string("input_glob", None, "Text files: one sentence per line, a blank line "
                    "between documents. Default: the Python documentation corpus.")
flags.DEFINE_string("sp_path", None, "SentencePiece model. Default: train one on the corpus.")
flags.DEFINE_string("save_dir", "proc_data", "Output directory (TFRecords + record_info.json).")
flags.DEFINE_enum("split", "train", ["train", "valid", "test"], "Split name of the output.")
flags.DEFINE_integer("seq_len", 128, "Sequence length.")
flags.DEFINE_integer("reuse_len", None, "Tokens reused as memory by the next step (default: "
                     "half of --seq_len, 64 at 128; 0 for clm).")
flags.DEFINE_integer("num_predict", None, "Tokens to predict per example (default: 21 of every "
                     "128 tokens, what the parts hold).")
flags.DEFINE_integer("perm_size", None, "Permutation chunk size (default reuse_len).")
flags.DEFINE_integer("bsz_per_host", 16, "Rows per batch (the global batch of one host).")
flags.DEFINE_integer("num_core_per_host", 1, "Replicas per host (bi_data halves per core).")
flags.DEFINE_bool("bi_data", True, "Write forward and backward rows.")
flags.DEFINE_integer("mask_alpha", 6, "Context tokens per predicted span (numerator).")
flags.DEFINE_integer("mask_beta", 1, "Context tokens per predicted span (denominator).")
flags.DEFINE_enum("objective", "perm", objectives.NAMES, "perm: factorization orders for the "
                  "permutation LM; mlm: BERT's 80/10/10 corruption for the masked LM; clm: "
                  "consecutive segments for the left-to-right LM (with --reuse_len=0 "
                  "--nobi_data).")
flags.DEFINE_bool("span_prediction", True, "Targets are whole-word spans (False: single "
                  "tokens).")
flags.DEFINE_bool("unspaced_pieces_as_words", True, "Spans and whole-word masks take each "
                  "piece of a script written without spaces (Chinese, Japanese, Thai, ...) as a "
                  "word (its SentencePiece 'words' run to the next space: whole sentences).")
flags.DEFINE_integer("max_word_pieces", 32, "A word of more pieces than this is predicted as "
                     "pieces (spans and whole-word masks count each as a word). 1: every piece "
                     "a word; 0: no limit.")
flags.DEFINE_bool("uncased", False, "Lower-case the text.")
flags.DEFINE_bool("use_eod", True, "Append <eod> at the end of each document.")
flags.DEFINE_integer("num_task", 1, "Number of machines sharing the input files.")
flags.DEFINE_integer("task", 0, "This machine's index in [0, num_task).")
flags.DEFINE_integer("seed", 0, "Random seed; the same seed gives byte-identical files.")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: CPU count); they share "
                     "even a single input file, and the output is the same for any number.")
flags.DEFINE_integer("vocab_size", 2000, "Vocabulary size when training a SentencePiece model.")
flags.DEFINE_integer("corpus_copies", 1, "Default corpus only: repeat it this many times "
                     "(for speed measurements).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  values = FLAGS.flag_values_dict()
  if values["reuse_len"] is None:  # the layout follows --seq_len where it is not given
    reads_pairs = objectives.named(values["objective"]).has_pairs  # clm: segments, no reuse
    values["reuse_len"] = default_reuse_len(values["seq_len"]) if reads_pairs else 0
  if values["num_predict"] is None:
    values["num_predict"] = default_num_predict(values["seq_len"], values["reuse_len"])
  settings = data_config_from_flags(values)  # refused before any work
  if FLAGS.input_glob:
    input_files = sorted(files.glob(FLAGS.input_glob))
    if not input_files:
      raise app.UsageError(f"--input_glob={FLAGS.input_glob!r} matches no file")
  else:
    documents = corpus.python_docs_documents() * FLAGS.corpus_copies
    input_files = corpus.write_corpus_files(documents, os.path.join(FLAGS.save_dir, "corpus"),
                                            num_files=4)
    print(f"Default corpus: {len(documents)} documents of the Python documentation in "
          f"{os.path.dirname(input_files[0])}")
  sp_path = FLAGS.sp_path
  if not sp_path:
    sp_path = train_sentencepiece(input_files, os.path.join(FLAGS.save_dir, "spiece"),
                                  vocab_size=FLAGS.vocab_size, uncased=FLAGS.uncased,
                                  seed=FLAGS.seed)
    print(f"Trained a SentencePiece model: {sp_path}")
  summary = create_pretraining_data(input_files, sp_path, FLAGS.save_dir, settings,
                                    seed=FLAGS.seed, split=FLAGS.split, task=FLAGS.task,
                                    num_task=FLAGS.num_task, num_workers=FLAGS.num_workers,
                                    progress=functools.partial(print, flush=True))
  print(summary.report())


def entry():
  """The console script (setup.cfg) and data/create_pretraining_data.py."""
  cli.run(main, usage=__doc__)
