"""Fine-tunes a tiny token tagger for a few steps under strategies in a fresh process (logical
CPU devices and TF_CONFIG must be set before TensorFlow starts) and prints what each run did.

  python distributed_finetuning_run.py CPU_REPLICAS OUT RUN[,RUN...]

RUN: STRATEGY:K[:HEAD] (K gradient accumulation steps; HEAD tagger, the default: the head's own
loss over scored tokens, or classifier: a Keras cross-entropy), e.g. one_device:1,mirrored:2.
Every run of a head starts from the same weights (OUT/initial-HEAD.npz, written by the first
process to start) and trains on the same batches (tagging_features); it prints
`RESULT {"run": RUN, "losses": [...], "dev": [...]}` (the training loss and a dev score per
step) and writes its final weights to OUT/STRATEGY-K[-HEAD]-WORKER.npz (WORKER: this process's
task index, 0 without TF_CONFIG).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

STEPS, BATCH = 3, 8


def tagging_features(rows, length=8, labels=3, seed=0):
  """Left-padded rows in three segments, labels -1 at padding and at some later pieces, so
  the number of scored tokens differs from batch to batch and from replica to replica."""
  import numpy as np
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, length + 1, rows)
  mask = (np.arange(length)[None, :] >= length - lengths[:, None]).astype(np.float32)
  input_ids = np.where(mask > 0, rng.integers(5, 50, (rows, length)), 0).astype(np.int32)
  segment_ids = np.where(mask > 0, rng.integers(0, 3, (rows, length)), 4).astype(np.int32)
  label_ids = rng.integers(0, labels, (rows, length)).astype(np.int32)
  label_ids[(mask == 0) | (rng.random((rows, length)) < 0.3)] = -1
  return {"input_ids": input_ids, "segment_ids": segment_ids, "input_mask": mask,
          "label_ids": label_ids}


def tiny_tagger():
  from xlnet_tf import XLNetConfig, XLNetModel, XLNetTokenClassifier
  config = XLNetConfig.preset("tiny", n_token=50, dropout=0.0, dropatt=0.0)
  return XLNetTokenClassifier(XLNetModel(config), num_labels=3)


def tiny_head(head):
  """(model, label key, Keras loss or None) of a run: the tagger, or a 3-class classifier of
  the same rows (labels: each row's first scored tag, 0 without one)."""
  if head == "tagger":
    return tiny_tagger(), "label_ids", None
  import keras
  from xlnet_tf import XLNetClassifier
  return (XLNetClassifier(tiny_tagger().backbone, 3), "label",
          keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def with_class_labels(features):
  first = (features["label_ids"] >= 0).argmax(-1)
  return dict(features, label=features["label_ids"][range(len(first)), first].clip(0))


def main():
  cpu_replicas, out, runs = sys.argv[1:4]
  import keras
  import numpy as np
  from xlnet_tf.tasks import finetuning
  from xlnet_tf.training import strategy as strategy_lib
  if int(cpu_replicas):
    strategy_lib.split_cpu(int(cpu_replicas))
  config = json.loads(os.environ.get("TF_CONFIG", "{}"))
  worker = config.get("task", {}).get("index", 0)
  train = with_class_labels(tagging_features(BATCH * STEPS))
  dev = tagging_features(12, seed=1)
  strategies = {}  # one of each: a process can hold only one multi-worker strategy
  for run in runs.split(","):
    name, steps, *head = run.split(":")
    head = head[0] if head else "tagger"
    initial = os.path.join(out, f"initial-{head}.npz")
    if name not in strategies:
      strategies[name] = strategy_lib.create_strategy(name)
    strategy = strategies[name]
    keras.utils.set_random_seed(0)
    with strategy.scope():
      model, label_key, loss = tiny_head(head)
      if not os.path.exists(initial):
        np.savez(initial, *model.get_weights())
      with np.load(initial) as weights:
        model.set_weights([weights[f"arr_{i}"] for i in range(len(weights.files))])
      options = finetuning.FinetuningOptions(
          train_steps=STEPS, batch_size=BATCH, learning_rate=1e-2, eval_every=1,
          jit_compile=True, progress="none", gradient_accumulation_steps=int(steps))
      dataset = finetuning.feature_dataset(train, BATCH, label_key=label_key, repeat=True)
      result = finetuning.finetune(
          model, dataset, options, loss=loss, metric="step",  # the latest weights are the best
          evaluate=lambda model=model: {
              "mean_logit": float(np.mean(finetuning.predict(model, dev, 4)))},
          best_dir=os.path.join(out, f"best-{run.replace(':', '-')}"))
    np.savez(os.path.join(out, f"{run.replace(':', '-')}-{worker}.npz"), *model.get_weights())
    print("RESULT " + json.dumps({"run": run, "losses": [h["loss"] for h in result["history"]],
                                  "dev": [h["mean_logit"] for h in result["history"]]}),
          flush=True)


if __name__ == "__main__":
  main()
