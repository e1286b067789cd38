r"""Fine-tunes XLNet for token tagging on CoNLL-format files (e.g. CoNLL-2003 NER).

  python run/tagger.py --train_file=conll/eng.train --dev_file=conll/eng.testa \
      --test_file=conll/eng.testb --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
      --output_dir=out/ner

trains (3 epochs: --num_train_epochs, or --train_steps), evaluates on --dev_file and tags
--test_file: what the files given ask for, unless --do_train, --do_eval or --do_predict say.
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.tasks.tagging import TaggingOptions, TaggingTask

from xlnet_tf.cli import common_flags

flags.DEFINE_string("train_file", None, "CoNLL training file.")
flags.DEFINE_string("dev_file", None, "CoNLL evaluation file.")
flags.DEFINE_string("test_file", None, "CoNLL file to tag.")
flags.DEFINE_integer("tag_column", -1, "Column of the tag (CoNLL-2003 NER: the last).")
common_flags.define_finetuning_flags(learning_rate=3e-5, implying_files={
    "do_train": "train_file", "do_eval": "dev_file", "do_predict": "test_file"})
flags.mark_flags_as_required(["output_dir"])
# {flag: the field of TaggingOptions it sets}, besides every fine-tuning tool's.
FLAG_FIELDS = {name: name for name in ("train_file", "dev_file", "test_file", "tag_column")}
PATH_FLAGS = ("train_file", "dev_file", "test_file")


def main(argv):
  del argv
  common_flags.imply_actions()
  options = common_flags.task_options(TaggingOptions, FLAG_FIELDS, PATH_FLAGS)
  common_flags.run(TaggingTask(options), FLAG_FIELDS)


def entry():
  """The console script (setup.cfg) and run/tagger.py."""
  cli.run(main, usage=__doc__)
