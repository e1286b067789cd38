r"""Fine-tunes XLNet on RACE (multiple-choice reading comprehension).

  python run/race.py --data_dir=RACE --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
      --output_dir=out/race --do_train --do_eval

trains for 3 epochs (--num_train_epochs, or --train_steps) and evaluates on dev.
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.tasks.race import RaceOptions, RaceTask

from xlnet_tf.cli import common_flags

flags.DEFINE_string("data_dir", None, "RACE directory: {train,dev,test}/{middle,high}/*.txt.")
common_flags.define_finetuning_flags(max_seq_length=512, train_batch_size=8,
                                    learning_rate=2e-5, warmup_steps=1000)
flags.mark_flags_as_required(["data_dir", "output_dir"])
FLAG_FIELDS = {"data_dir": "data_dir"}  # besides every fine-tuning tool's
PATH_FLAGS = ("data_dir",)


def main(argv):
  del argv
  options = common_flags.task_options(RaceOptions, FLAG_FIELDS, PATH_FLAGS, data_dir="")
  common_flags.run(RaceTask(options), FLAG_FIELDS)


def entry():
  """The console script (setup.cfg) and run/race.py."""
  cli.run(main, usage=__doc__)
