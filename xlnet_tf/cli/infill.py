r"""Fills the blanks of texts with a language model trained by run/pretrain.py (the LM head it
saves under model/lm; or --model_dir=DIR_OR_HUB_ID in any layout, e.g. transformers'
XLNetLMHeadModel, its tokenizer coming with it), in any order, or ranks candidates for a blank.

  python run/pretrain.py                                  # -> pretrain_output/ (perm)
  python run/infill.py --text="The <mask> <mask> returns the length of an object."
  python run/infill.py --text="Use ___ to leave a loop." --blank_pieces=2 --order=confidence
  python run/infill.py --text="Use the ___ statement to leave a loop." \
      --candidates=break,continue,return
  python run/infill.py --evaluate        # span infilling and cloze ranking on held-out text

A blank is a `<mask>` (one piece) or `___` (--blank_pieces pieces). The permutation LM
predicts each blank from the text on both sides and the blanks filled before it (--order); a
masked LM (--objective=mlm runs) fills them mask-predict style; a left-to-right LM (clm) from
the left context only. See xlnet_tf/inference/infilling.py.
"""

import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.inference import infilling
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.studies import infilling_evaluation

from xlnet_tf.cli import lm_flags

lm_flags.define_lm_flags(default_output_dir="pretrain_output")
flags.DEFINE_multi_string("text", ["The built-in function <mask> <mask> returns the length of "
                                   "an object."], "A text with blanks (repeat for a batch).")
flags.DEFINE_integer("blank_pieces", 1, "Pieces of each `___` blank.")
flags.DEFINE_enum("order", "left_to_right", list(infilling.ORDERS), "The order the blanks "
                  "are filled in.")
lm_flags.define_sampling_flags("Makes sampling and the random order reproducible.")
flags.DEFINE_bool("use_cache", True, "perm: reuse the context's states between steps.")
flags.DEFINE_list("candidates", None, "Rank these completions of the one `___` blank of each "
                  "--text by log-probability instead of filling it.")
flags.DEFINE_bool("per_piece", False, "With --candidates: log-probability per piece.")
flags.DEFINE_bool("evaluate", False, "Instead of filling --text: span infilling (1-4 whole "
                  "words, every order) and cloze ranking on held-out text, by span length.")
flags.DEFINE_string("evaluate_glob", None, "With --evaluate: text files, one sentence a line "
                    "(default: the run's held-out documents, --output_dir/data/corpus/"
                    "valid-*.txt).")
flags.DEFINE_integer("examples", 100, "With --evaluate: sentences per span length.",
                     lower_bound=1)
flags.DEFINE_integer("distractors", 4, "With --evaluate: distractor spans per cloze example.",
                     lower_bound=1)
flags.DEFINE_string("results_json", None, "With --evaluate: also write the scores here.")
FLAGS = flags.FLAGS


def evaluate(model, tokenizer):
  pattern = FLAGS.evaluate_glob or os.path.join(FLAGS.output_dir, "data", "corpus",
                                                "valid-*.txt")
  scores = infilling_evaluation.intrinsic_evaluation(
      model, tokenizer, infilling_evaluation.held_out_sentences(pattern),
      count=FLAGS.examples, distractors=FLAGS.distractors, seed=FLAGS.seed or 0)
  if FLAGS.results_json:
    write_json(FLAGS.results_json, scores)
  print(infilling_evaluation.intrinsic_markdown({FLAGS.model_dir or FLAGS.output_dir: scores}))


def main(argv):
  del argv
  if FLAGS.blank_pieces < 1:
    raise app.UsageError(f"--blank_pieces must be at least 1; got {FLAGS.blank_pieces}")
  place = lm_flags.lm_place()
  tokenizer = lm_flags.lm_tokenizer(place)
  model = lm_flags.language_model(place, tokenizer, bi_data=False, same_length=False)
  if FLAGS.evaluate:
    evaluate(model, tokenizer)
    return
  if FLAGS.candidates:
    for text in FLAGS.text:
      ranked = infilling.score_candidates(model, tokenizer, text, FLAGS.candidates,
                                          per_piece=FLAGS.per_piece, order=FLAGS.order)
      print(f"text: {text}")
      for candidate, score in ranked:
        print(f"  {score:10.3f}  {candidate}")
    return
  parts = [infilling.text_with_blanks(tokenizer, text, FLAGS.blank_pieces)
           for text in FLAGS.text]
  for index, text_parts in enumerate(parts):
    if not any(isinstance(part, int) for part in text_parts):
      raise app.UsageError(f"--text number {index + 1} ({FLAGS.text[index]!r}) has no blank: "
                           "write one as <mask> or ___")
  batch = infilling.packed_with_blanks(tokenizer, parts)
  filled = infilling.fill(model, **batch.inputs(), order=FLAGS.order,
                          temperature=FLAGS.temperature, top_k=FLAGS.top_k, top_p=FLAGS.top_p,
                          seed=FLAGS.seed, use_cache=FLAGS.use_cache,
                          **infilling.special_id_arguments(tokenizer))
  for text, result in zip(FLAGS.text, infilling.filled_texts(tokenizer, filled, batch)):
    print(f"text: {text}\nfilled: {result}\n")


def entry():
  """The console script (setup.cfg) and run/infill.py."""
  cli.run(main, usage=__doc__)
