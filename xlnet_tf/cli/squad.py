r"""Fine-tunes XLNet on SQuAD 1.1 / 2.0 and writes predictions the official script reads.

  python run/squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 --output_dir=out/squad

trains (3 epochs of the context windows: --num_train_epochs, or --train_steps) and answers
--predict_file: what the files given ask for, unless --do_train or --do_predict say.
"""

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.tasks.squad import SquadOptions, SquadTask

from xlnet_tf.cli import common_flags

flags.DEFINE_string("train_file", None, "SQuAD training JSON.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to answer (dev: also scored).")
flags.DEFINE_integer("doc_stride", 128, "Step between context windows (pieces).")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
flags.DEFINE_integer("max_answer_length", 64, "Longest answer (pieces).")
flags.DEFINE_integer("start_n_top", 5, "Starts kept when decoding.")
flags.DEFINE_integer("end_n_top", 5, "Ends kept per start.")
flags.DEFINE_float("null_score_threshold", None, "SQuAD 2.0: answer '' above this null score "
                   "(default: the best on --predict_file when it has answers).")
common_flags.define_finetuning_flags(max_seq_length=512, train_batch_size=48,
                                    learning_rate=3e-5, warmup_steps=1000,
                                    lr_layer_decay_rate=0.75, implying_files={
                                        "do_train": "train_file",
                                        "do_predict": "predict_file"})
flags.mark_flags_as_required(["output_dir"])
# {flag: the field of SquadOptions it sets}, besides every fine-tuning tool's.
FLAG_FIELDS = {name: name for name in (
    "train_file", "predict_file", "doc_stride", "max_query_length", "max_answer_length",
    "start_n_top", "end_n_top", "null_score_threshold")}
PATH_FLAGS = ("train_file", "predict_file")


def main(argv):
  del argv
  common_flags.imply_actions()
  options = common_flags.task_options(SquadOptions, FLAG_FIELDS, PATH_FLAGS)
  common_flags.run(SquadTask(options), FLAG_FIELDS)


def entry():
  """The console script (setup.cfg) and run/squad.py."""
  cli.run(main, usage=__doc__)
