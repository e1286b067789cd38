r"""Fine-tunes XLNet on RACE (multiple-choice reading comprehension).

  python run/race.py --data_dir=RACE --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
      --output_dir=out/race --do_train --do_eval

trains for 3 epochs (--num_train_epochs, or --train_steps) and evaluates on dev.
"""

import os

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
import keras
import numpy as np

from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.race import ANSWERS, encode_race, race_accuracy, read_race
from xlnet_tf.text.read_report import ReadReport

from xlnet_tf.cli import common_flags

flags.DEFINE_string("data_dir", None, "RACE directory: {train,dev,test}/{middle,high}/*.txt.")
common_flags.define_finetuning_flags(max_seq_length=512, train_batch_size=8,
                                    learning_rate=2e-5, warmup_steps=1000)
flags.mark_flags_as_required(["data_dir", "output_dir"])
FLAGS = flags.FLAGS


def load(tokenizer, split):
  report = ReadReport()
  questions = read_race(FLAGS.data_dir, split, report)
  features = encode_race(tokenizer, questions, FLAGS.max_seq_length, report)
  print(f"{split}: {report.summary()}")
  return questions, features


def main(argv):
  del argv
  strategy, tokenizer, config, options, pretrained = common_flags.finetuning_setup(
      examples_per_row=4)
  best_dir = common_flags.best_dir()
  dev = load(tokenizer, "dev")[1] if FLAGS.do_eval or FLAGS.do_train else None
  with strategy.scope():
    model = XLNetMultipleChoice(common_flags.pretrained_backbone(config, pretrained))
    finetuning.attach_tokenizer(model, tokenizer, FLAGS.max_seq_length)  # saved in best/
    evaluate = lambda: race_accuracy(finetuning.predict(model, dev, FLAGS.train_batch_size), dev)
    if FLAGS.do_train:
      _, train = load(tokenizer, "train")
      options = common_flags.training_length(options, len(train["label"]), "questions")
      dataset = finetuning.feature_dataset(train, FLAGS.train_batch_size, label_key="label",
                                           shuffle=True, seed=FLAGS.seed, repeat=True)
      result = finetuning.finetune(
          model, dataset, options, evaluate=evaluate,
          metric="accuracy", best_dir=best_dir,
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
      write_json(os.path.join(FLAGS.output_dir, "train_history.json"), result)
      print(f"Best dev accuracy {result['best']['accuracy']:.4f} at step "
            f"{result['best']['step']}")
    else:
      finetuning.restore_best(model, best_dir)
    if FLAGS.do_eval:
      scores = evaluate()
      write_json(os.path.join(FLAGS.output_dir, "dev_metrics.json"), scores)
      print(f"dev: {scores}")
    if FLAGS.do_predict:
      questions, features = load(tokenizer, "test")
      logits = finetuning.predict(model, features, FLAGS.train_batch_size)
      answers = {q.where: ANSWERS[int(i)] for q, i in zip(questions, np.argmax(logits, -1))}
      path = write_json(os.path.join(FLAGS.output_dir, "test_predictions.json"), answers)
      print(f"Wrote {len(answers)} answers to {path}")


def entry():
  """The console script (setup.cfg) and run/race.py."""
  cli.run(main, usage=__doc__)
