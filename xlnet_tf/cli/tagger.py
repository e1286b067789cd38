r"""Fine-tunes XLNet for token tagging on CoNLL-format files (e.g. CoNLL-2003 NER).

  python run/tagger.py --train_file=conll/eng.train --dev_file=conll/eng.testa \
      --test_file=conll/eng.testb --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 \
      --output_dir=out/ner

trains (3 epochs: --num_train_epochs, or --train_steps), evaluates on --dev_file and tags
--test_file: what the files given ask for, unless --do_train, --do_eval or --do_predict say.
"""

import os

from absl import app
from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py
from xlnet_tf.utils import files

from xlnet_tf.checkpoints.labels import LABELS_FILE, saved_labels
from xlnet_tf.heads.token_classifier import XLNetTokenClassifier
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.tagging import encode_tagged, label_list, read_conll, tagging_scores
from xlnet_tf.text.read_report import ReadReport

from xlnet_tf.cli import common_flags

flags.DEFINE_string("train_file", None, "CoNLL training file.")
flags.DEFINE_string("dev_file", None, "CoNLL evaluation file.")
flags.DEFINE_string("test_file", None, "CoNLL file to tag.")
flags.DEFINE_integer("tag_column", -1, "Column of the tag (CoNLL-2003 NER: the last).")
common_flags.define_finetuning_flags(learning_rate=3e-5, implying_files={
    "do_train": "train_file", "do_eval": "dev_file", "do_predict": "test_file"})
flags.mark_flags_as_required(["output_dir"])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  common_flags.imply_actions()
  common_flags.require_files({"do_train": "train_file", "do_eval": "dev_file",
                              "do_predict": "test_file"})
  strategy, tokenizer, config, options, pretrained = common_flags.finetuning_setup()
  best_dir = common_flags.best_dir()
  data = {}
  for split, path in (("train", FLAGS.train_file), ("dev", FLAGS.dev_file),
                      ("test", FLAGS.test_file)):
    if path:
      report = ReadReport()
      data[split] = [read_conll(path, report, FLAGS.tag_column), report]
  if FLAGS.do_train:
    labels = label_list(data["train"][0])  # saved beside the best weights after training
  else:
    labels = saved_labels(best_dir)
    if labels is None:
      raise app.UsageError(f"No --train_file and no {LABELS_FILE} in {best_dir}")
  for split, (sentences, report) in data.items():
    data[split] = (sentences, encode_tagged(tokenizer, sentences, FLAGS.max_seq_length, labels,
                                            report))
    print(f"{split}: {report.summary()}")
  if FLAGS.do_train:
    options = common_flags.training_length(options, len(data["train"][1]["label_ids"]),
                                           "sentences")
  with strategy.scope():
    model = XLNetTokenClassifier(common_flags.pretrained_backbone(config, pretrained),
                                 len(labels))
    finetuning.attach_tokenizer(model, tokenizer, FLAGS.max_seq_length)  # saved in best/
    run(model, data, labels, options)


def evaluate(model, split_data, labels):
  sentences, features = split_data
  logits = finetuning.predict(model, features, FLAGS.train_batch_size)
  return tagging_scores(logits, features, sentences, labels)


def run(model, data, labels, options):
  best_dir = common_flags.best_dir()
  if FLAGS.do_train:
    features = data["train"][1]
    dataset = finetuning.feature_dataset(features, FLAGS.train_batch_size, label_key="label_ids",
                                         shuffle=True, seed=FLAGS.seed, repeat=True)
    model.labels = list(labels)  # saved with the weights: best/ is whole at every save
    result = finetuning.finetune(
        model, dataset, options,
        evaluate=(lambda: evaluate(model, data["dev"], labels)[0]) if "dev" in data else None,
        metric="f1", best_dir=best_dir)
    write_json(os.path.join(FLAGS.output_dir, "train_history.json"), result["history"])
    if result["best"]:
      print(f"Best dev entity F1: {result['best']['f1']:.4f} at step {result['best']['step']}")
  else:
    finetuning.restore_best(model, best_dir)
  if FLAGS.do_eval:
    scores, _ = evaluate(model, data["dev"], labels)
    write_json(os.path.join(FLAGS.output_dir, "dev_metrics.json"), scores)
    print(f"dev: {scores}")
  if FLAGS.do_predict:
    sentences, _ = data["test"]
    _, predicted = evaluate(model, data["test"], labels)
    path = os.path.join(FLAGS.output_dir, "test_predictions.conll")
    files.makedirs(FLAGS.output_dir)
    with files.open_file(path, "w") as handle:
      for sentence, tags in zip(sentences, predicted):
        for word, gold, tag in zip(sentence.words, sentence.tags, tags):
          handle.write(f"{word} {gold} {tag}\n")
        handle.write("\n")
    print(f"Wrote {path} (word gold predicted: the input of conlleval)")


def entry():
  """The console script (setup.cfg) and run/tagger.py."""
  cli.run(main, usage=__doc__)
