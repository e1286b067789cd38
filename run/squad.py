"""Fine-tunes XLNet on SQuAD 1.1 / 2.0 and writes predictions the official script reads.

  python run/squad.py --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
      --sp_path=spiece.model --model_config=xlnet_config.json \
      --init_checkpoint=xlnet_model.ckpt --init_checkpoint_format=original \
      --max_seq_length=512 --output_dir=out/squad --do_train --do_predict
"""

import json
import os

from absl import app
from absl import flags
import tensorflow as tf

from xlnet_tf import checkpoints
from xlnet_tf.data.classification import ReadReport
from xlnet_tf.data.squad import build_features, read_squad
from xlnet_tf.heads.question_answering import XLNetQuestionAnswering
from xlnet_tf.squad_metrics import (apply_null_threshold, best_null_threshold, decode,
                                    squad_scores)
from xlnet_tf.training.optimization import create_optimizer

import common_flags

flags.DEFINE_string("train_file", None, "SQuAD training JSON.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to answer (dev: also scored).")
flags.DEFINE_integer("doc_stride", 128, "Step between context windows (pieces).")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept.")
flags.DEFINE_integer("max_answer_length", 64, "Longest answer (pieces).")
flags.DEFINE_integer("start_n_top", 5, "Starts kept when decoding.")
flags.DEFINE_integer("end_n_top", 5, "Ends kept per start.")
flags.DEFINE_float("null_score_threshold", None, "SQuAD 2.0: answer '' above this null score "
                   "(default: the best on --predict_file when it has answers).")
common_flags.define_finetuning_flags(max_seq_length=512, train_batch_size=48, train_steps=8000,
                                    learning_rate=3e-5, warmup_steps=1000,
                                    lr_layer_decay_rate=0.75)
flags.mark_flags_as_required(["sp_path", "model_config", "output_dir"])
FLAGS = flags.FLAGS

MODEL_KEYS = ("input_ids", "segment_ids", "input_mask", "p_mask", "cls_index")


def features_for(tokenizer, path, training):
  report = ReadReport()
  examples = read_squad(path, report)
  arrays, windows = build_features(tokenizer, examples, FLAGS.max_seq_length, FLAGS.doc_stride,
                                   FLAGS.max_query_length, training=training, report=report)
  print(f"{os.path.basename(path)}: {report.summary()}; {len(windows)} windows")
  return examples, arrays, windows


def predict_and_score(model, tokenizer, examples, arrays, windows, threshold=None):
  outputs = model.predict({k: arrays[k] for k in MODEL_KEYS}, batch_size=FLAGS.train_batch_size,
                          verbose=0)
  predictions, nulls = decode(examples, windows, outputs, FLAGS.max_answer_length)
  result = {"has_answers": any(e.answers or e.is_impossible for e in examples)}
  if result["has_answers"]:
    result["without_null"] = squad_scores(examples, predictions)
    if threshold is None and any(e.is_impossible for e in examples):
      threshold, result["best_threshold_scores"] = best_null_threshold(examples, predictions,
                                                                        nulls)
  if threshold is not None:
    predictions = apply_null_threshold(predictions, nulls, threshold)
    result["null_score_threshold"] = threshold
  if result["has_answers"]:
    result["scores"] = squad_scores(examples, predictions)
  return predictions, nulls, result


def main(argv):
  del argv
  strategy, tokenizer, config = common_flags.finetuning_setup()
  weights_dir = os.path.join(FLAGS.output_dir, "best")
  predict_data = (features_for(tokenizer, FLAGS.predict_file, training=False)
                  if FLAGS.predict_file else None)
  with strategy.scope():
    backbone = common_flags.pretrained_backbone(config)
    model = XLNetQuestionAnswering(backbone, FLAGS.start_n_top, FLAGS.end_n_top)
    if FLAGS.do_train:
      _, arrays, _ = features_for(tokenizer, FLAGS.train_file, training=True)
      model.compile(optimizer=create_optimizer(model, FLAGS.learning_rate, FLAGS.train_steps,
                                               FLAGS.warmup_steps,
                                               lr_layer_decay_rate=FLAGS.lr_layer_decay_rate))
      dataset = tf.data.Dataset.from_tensor_slices(arrays).shuffle(
          len(arrays["input_ids"]), seed=FLAGS.seed).repeat().batch(FLAGS.train_batch_size,
                                                                    drop_remainder=True)
      every = FLAGS.eval_every or FLAGS.train_steps
      best = None
      for round_index in range(max(FLAGS.train_steps // every, 1)):
        history = model.fit(dataset, steps_per_epoch=every, epochs=1, verbose=0).history
        step = (round_index + 1) * every
        score = None
        if predict_data is not None and predict_data[0] and any(
            e.answers for e in predict_data[0]):
          score = predict_and_score(model, tokenizer, *predict_data)[2]["scores"]["f1"]
        print(f"step {step}: loss {history['loss'][-1]:.4f}"
              + ("" if score is None else f", dev F1 {score:.2f}"), flush=True)
        if best is None or score is None or score > best:
          best = score
          checkpoints.save_pretrained(model, weights_dir)
    if os.path.exists(os.path.join(weights_dir, checkpoints.own.WEIGHTS_FILE)):
      checkpoints.load_own_checkpoint(model, weights_dir)
    if FLAGS.do_predict or FLAGS.do_eval:
      predictions, nulls, result = predict_and_score(model, tokenizer, *predict_data,
                                                     threshold=FLAGS.null_score_threshold)
      if result["has_answers"]:
        print(f"EM {result['scores']['exact']:.2f}  F1 {result['scores']['f1']:.2f}")
      json.dump(predictions, open(os.path.join(FLAGS.output_dir, "predictions.json"), "w"),
                indent=1)
      json.dump({k: float(v) for k, v in nulls.items()},
                open(os.path.join(FLAGS.output_dir, "null_odds.json"), "w"), indent=1)
      json.dump(result, open(os.path.join(FLAGS.output_dir, "results.json"), "w"), indent=1,
                default=float)
      print(f"Wrote predictions.json and null_odds.json (the official script's inputs) to "
            f"{FLAGS.output_dir}")


if __name__ == "__main__":
  app.run(main)
