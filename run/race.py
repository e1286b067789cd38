"""Fine-tunes XLNet on RACE (multiple-choice reading comprehension).

  python run/race.py --data_dir=RACE --sp_path=spiece.model --model_config=xlnet_config.json \
      --init_checkpoint=xlnet_model.ckpt --init_checkpoint_format=original \
      --max_seq_length=512 --output_dir=out/race --do_train --do_eval
"""

import json
import os

from absl import app
from absl import flags
import keras
import numpy as np
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.data.classification import ReadReport
from xlnet_tf.data.race import ANSWERS, encode_race, read_race
from xlnet_tf.heads.multiple_choice import XLNetMultipleChoice
from xlnet_tf.training.optimization import create_optimizer

import common_flags

flags.DEFINE_string("data_dir", None, "RACE directory: {train,dev,test}/{middle,high}/*.txt.")
common_flags.define_finetuning_flags(max_seq_length=512, train_batch_size=8, train_steps=12000,
                                    learning_rate=2e-5, warmup_steps=1000)
flags.mark_flags_as_required(["data_dir", "sp_path", "model_config", "output_dir"])
FLAGS = flags.FLAGS

INPUT_KEYS = ("input_ids", "segment_ids", "input_mask")


def load(tokenizer, split):
  report = ReadReport()
  questions = read_race(FLAGS.data_dir, split, report)
  features = encode_race(tokenizer, questions, FLAGS.max_seq_length, report)
  print(f"{split}: {report.summary()}")
  return questions, features


def race_accuracy(logits, features):
  correct = np.asarray(logits).argmax(-1) == features["label"]
  high = features["level"] == 1
  return {"accuracy": float(correct.mean()),
          "middle": float(correct[~high].mean()) if (~high).any() else float("nan"),
          "high": float(correct[high].mean()) if high.any() else float("nan")}


def main(argv):
  del argv
  strategy, tokenizer, config = common_flags.finetuning_setup()
  weights_dir = os.path.join(FLAGS.output_dir, "best")
  dev = load(tokenizer, "dev") if FLAGS.do_eval or FLAGS.do_train else None
  with strategy.scope():
    backbone = common_flags.pretrained_backbone(config)
    model = XLNetMultipleChoice(backbone)
    if FLAGS.do_train:
      _, train = load(tokenizer, "train")
      model.compile(optimizer=create_optimizer(model, FLAGS.learning_rate, FLAGS.train_steps,
                                               FLAGS.warmup_steps,
                                               lr_layer_decay_rate=FLAGS.lr_layer_decay_rate),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
      dataset = tf.data.Dataset.from_tensor_slices(({k: train[k] for k in INPUT_KEYS},
                                                    train["label"]))
      dataset = dataset.shuffle(len(train["label"]), seed=FLAGS.seed).repeat().batch(
          FLAGS.train_batch_size, drop_remainder=True)
      every = FLAGS.eval_every or FLAGS.train_steps
      best = None
      for round_index in range(max(FLAGS.train_steps // every, 1)):
        model.fit(dataset, steps_per_epoch=every, epochs=1, verbose=0)
        scores = race_accuracy(predict(model, dev[1]), dev[1])
        scores["step"] = (round_index + 1) * every
        print(f"dev at step {scores['step']}: {scores}")
        if best is None or scores["accuracy"] > best["accuracy"]:
          best = scores
          checkpoints.save_pretrained(model, weights_dir)
      print(f"Best dev accuracy {best['accuracy']:.4f} at step {best['step']}")
    if os.path.exists(os.path.join(weights_dir, checkpoints.own.WEIGHTS_FILE)):
      checkpoints.load_own_checkpoint(model, weights_dir)
    if FLAGS.do_eval:
      scores = race_accuracy(predict(model, dev[1]), dev[1])
      json.dump(scores, open(os.path.join(FLAGS.output_dir, "dev_metrics.json"), "w"))
      print(f"dev: {scores}")
    if FLAGS.do_predict:
      questions, features = load(tokenizer, "test")
      logits = predict(model, features)
      answers = {q.where: ANSWERS[int(i)] for q, i in zip(questions, np.argmax(logits, -1))}
      path = os.path.join(FLAGS.output_dir, "test_predictions.json")
      json.dump(answers, open(path, "w"), indent=1)
      print(f"Wrote {len(answers)} answers to {path}")


def predict(model, features):
  return model.predict({k: features[k] for k in INPUT_KEYS}, batch_size=FLAGS.train_batch_size,
                       verbose=0)


if __name__ == "__main__":
  app.run(main)
