r"""Fine-tunes XLNet on SQuAD 1.1 / 2.0 and writes predictions the official script reads.

  python run/squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --init_checkpoint=xlnet_cased_L-24_H-1024_A-16 --output_dir=out/squad

trains (3 epochs of the context windows: --num_train_epochs, or --train_steps) and answers
--predict_file: what the files given ask for, unless --do_train or --do_predict say.
"""

import os

from absl import flags
from xlnet_tf.utils import cli  # before TensorFlow loads: see xlnet_tf/utils/cli.py

from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.tasks import finetuning
from xlnet_tf.tasks.squad import build_features, read_squad
from xlnet_tf.tasks.squad.metrics import evaluate_predictions
from xlnet_tf.text.read_report import ReadReport

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
FLAGS = flags.FLAGS


def features_for(tokenizer, path, training):
  report = ReadReport()
  examples = read_squad(path, report)
  arrays, windows = build_features(tokenizer, examples, FLAGS.max_seq_length, FLAGS.doc_stride,
                                   FLAGS.max_query_length, training=training, report=report)
  print(f"{os.path.basename(path)}: {report.summary()}; {len(windows)} windows")
  return examples, arrays, windows


def predict_and_score(model, examples, arrays, windows, threshold=None):
  outputs = finetuning.predict(model, arrays, FLAGS.train_batch_size,
                               extra_keys=XLNetQuestionAnswering.extra_inputs)
  return evaluate_predictions(examples, windows, outputs, FLAGS.max_answer_length, threshold)


def main(argv):
  del argv
  common_flags.imply_actions()
  common_flags.require_files({"do_train": "train_file", "do_eval": "predict_file",
                              "do_predict": "predict_file"})
  strategy, tokenizer, config, options, pretrained = common_flags.finetuning_setup()
  best_dir = common_flags.best_dir()
  predict_data = (features_for(tokenizer, FLAGS.predict_file, training=False)
                  if FLAGS.predict_file else None)
  with strategy.scope():
    model = XLNetQuestionAnswering(common_flags.pretrained_backbone(config, pretrained),
                                   FLAGS.start_n_top, FLAGS.end_n_top)
    finetuning.attach_tokenizer(model, tokenizer, FLAGS.max_seq_length)  # saved in best/
    if FLAGS.do_train:
      _, arrays, _ = features_for(tokenizer, FLAGS.train_file, training=True)
      options = common_flags.training_length(options, len(arrays["input_ids"]), "windows")
      evaluate = None
      if predict_data is not None and any(e.answers for e in predict_data[0]):
        evaluate = lambda: predict_and_score(model, *predict_data)[2]["scores"]
      train = finetuning.feature_dataset(
          arrays, FLAGS.train_batch_size, shuffle=True, seed=FLAGS.seed, repeat=True,
          extra_keys=XLNetQuestionAnswering.extra_inputs
          + XLNetQuestionAnswering.training_targets)
      result = finetuning.finetune(model, train, options,
                                   evaluate=evaluate, metric="f1", best_dir=best_dir)
      write_json(os.path.join(FLAGS.output_dir, "train_history.json"), result)
      if result["best"]:
        print(f"Best dev F1 {result['best']['f1']:.2f} at step {result['best']['step']}")
    else:
      finetuning.restore_best(model, best_dir)
    if FLAGS.do_predict or FLAGS.do_eval:
      predictions, nulls, result = predict_and_score(model, *predict_data,
                                                     threshold=FLAGS.null_score_threshold)
      if result["has_answers"]:
        print(f"EM {result['scores']['exact']:.2f}  F1 {result['scores']['f1']:.2f}")
      write_json(os.path.join(FLAGS.output_dir, "predictions.json"), predictions)
      write_json(os.path.join(FLAGS.output_dir, "null_odds.json"),
                 {k: float(v) for k, v in nulls.items()})
      write_json(os.path.join(FLAGS.output_dir, "results.json"), result)
      print(f"Wrote predictions.json and null_odds.json (the official script's inputs) to "
            f"{FLAGS.output_dir}")


def entry():
  """The console script (setup.cfg) and run/squad.py."""
  cli.run(main, usage=__doc__)
