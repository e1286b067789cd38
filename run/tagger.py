"""Fine-tunes XLNet for token tagging on CoNLL-format files (e.g. CoNLL-2003 NER).

  python run/tagger.py --train_file=conll/eng.train --dev_file=conll/eng.testa \
      --test_file=conll/eng.testb --sp_path=spiece.model --model_config=xlnet_config.json \
      --init_checkpoint=xlnet_model.ckpt --init_checkpoint_format=original \
      --output_dir=out/ner --do_train --do_eval --do_predict
"""

import json
import os

from absl import app
from absl import flags
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.data.classification import ReadReport
from xlnet_tf.data.tagging import encode_tagged, label_list, read_conll, word_predictions
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.metrics import entity_f1
from xlnet_tf.training.optimization import create_optimizer

import common_flags

flags.DEFINE_string("train_file", None, "CoNLL training file.")
flags.DEFINE_string("dev_file", None, "CoNLL evaluation file.")
flags.DEFINE_string("test_file", None, "CoNLL file to tag.")
flags.DEFINE_integer("tag_column", -1, "Column of the tag (CoNLL-2003 NER: the last).")
common_flags.define_finetuning_flags(learning_rate=3e-5)
flags.mark_flags_as_required(["sp_path", "model_config", "output_dir"])
FLAGS = flags.FLAGS


def _inputs(features):
  return {k: features[k] for k in ("input_ids", "segment_ids", "input_mask")}


def _evaluate(model, data, labels):
  sentences, features = data
  logits = model.predict(_inputs(features), batch_size=FLAGS.train_batch_size, verbose=0)
  predicted = word_predictions(logits, features["word_index"], sentences, labels)
  return entity_f1([s.tags for s in sentences], predicted), predicted


def main(argv):
  del argv
  strategy, tokenizer, config = common_flags.finetuning_setup()
  labels_path = os.path.join(FLAGS.output_dir, "labels.json")
  data, labels = {}, None
  for split, path in (("train", FLAGS.train_file), ("dev", FLAGS.dev_file),
                      ("test", FLAGS.test_file)):
    if path:
      report = ReadReport()
      data[split] = [read_conll(path, report, FLAGS.tag_column), report]
  if "train" in data:
    labels = label_list(data["train"][0])
    json.dump(labels, open(labels_path, "w"))
  elif os.path.exists(labels_path):
    labels = json.load(open(labels_path))
  else:
    raise app.UsageError("No --train_file and no labels.json in --output_dir")
  for split, (sentences, report) in data.items():
    data[split] = (sentences, encode_tagged(tokenizer, sentences, FLAGS.max_seq_length, labels,
                                            report))
    print(f"{split}: {report.summary()}")
  with strategy.scope():
    backbone = common_flags.pretrained_backbone(config)
    model = XLNetTokenClassifier(backbone, len(labels))
    run(model, data, labels)


def run(model, data, labels):
  best_dir = os.path.join(FLAGS.output_dir, "best")
  if FLAGS.do_train:
    model.compile(optimizer=create_optimizer(model, FLAGS.learning_rate, FLAGS.train_steps,
                                             FLAGS.warmup_steps,
                                             lr_layer_decay_rate=FLAGS.lr_layer_decay_rate))
    features = data["train"][1]
    dataset = tf.data.Dataset.from_tensor_slices((_inputs(features), features["label_ids"]))
    dataset = dataset.shuffle(len(features["label_ids"]), seed=FLAGS.seed).repeat().batch(
        FLAGS.train_batch_size, drop_remainder=True)
    every = FLAGS.eval_every or FLAGS.train_steps
    best, history = None, []
    for round_index in range(max(FLAGS.train_steps // every, 1)):
      model.fit(dataset, steps_per_epoch=every, epochs=1, verbose=0)
      if "dev" in data:
        scores, _ = _evaluate(model, data["dev"], labels)
        scores["step"] = (round_index + 1) * every
        history.append(scores)
        if best is None or scores["f1"] > best["f1"]:
          best = scores
          checkpoints.save_pretrained(model, best_dir)
      else:
        checkpoints.save_pretrained(model, best_dir)
    json.dump(history, open(os.path.join(FLAGS.output_dir, "train_history.json"), "w"))
    if best:
      print(f"Best dev entity F1: {best['f1']:.4f} at step {best['step']}")
  if os.path.exists(os.path.join(best_dir, checkpoints.own.WEIGHTS_FILE)):
    checkpoints.load_own_checkpoint(model, best_dir)
  if FLAGS.do_eval:
    scores, _ = _evaluate(model, data["dev"], labels)
    json.dump(scores, open(os.path.join(FLAGS.output_dir, "dev_metrics.json"), "w"))
    print(f"dev: {scores}")
  if FLAGS.do_predict:
    sentences, _ = data["test"]
    _, predicted = _evaluate(model, data["test"], labels)
    path = os.path.join(FLAGS.output_dir, "test_predictions.conll")
    with open(path, "w", encoding="utf-8") as handle:
      for sentence, tags in zip(sentences, predicted):
        for word, gold, tag in zip(sentence.words, sentence.tags, tags):
          handle.write(f"{word} {gold} {tag}\n")
        handle.write("\n")
    print(f"Wrote {path} (word gold predicted: the input of conlleval)")


if __name__ == "__main__":
  app.run(main)
