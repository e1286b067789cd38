"""Fine-tuning on the shared distributed step (tasks.finetuning_steps): a step equals today's
Model.fit step, gradient accumulation equals the whole batch, and mirrored replicas and two
worker processes equal one device on the same global batch (dropout off)."""

import json
import os

import keras
import numpy as np
import pytest

from distributed_finetuning_run import STEPS, tagging_features, tiny_tagger
from forked_tools import start_forked
from local_cluster import free_ports
from xlnet_tf import XLNetClassifier, XLNetConfig, XLNetModel
from xlnet_tf.utils.errors import UserInputError
from xlnet_tf.tasks.finetuning import FinetuningOptions, feature_dataset, finetune
from xlnet_tf.training.optimization import create_optimizer

RUNNER = os.path.join(os.path.dirname(__file__), "distributed_finetuning_run.py")


def classification_features(rows=16, length=8, seed=0):
  """Left-padded pairs in three segments, with class labels and real-valued targets."""
  features = tagging_features(rows, length, seed=seed)
  del features["label_ids"]
  rng = np.random.default_rng(seed)
  features["label"] = rng.integers(0, 3, rows).astype(np.int32)
  features["score"] = rng.normal(size=rows).astype(np.float32)
  return features


def classifier(num_classes):
  keras.utils.set_random_seed(0)
  config = XLNetConfig.preset("tiny", n_token=50, dropout=0.0, dropatt=0.0)
  return XLNetClassifier(XLNetModel(config), num_classes)


def options(steps=2, batch=8, accumulation=1):
  return FinetuningOptions(train_steps=steps, batch_size=batch, learning_rate=1e-2,
                           warmup_steps=1, weight_decay=0.01, jit_compile=True,
                           progress="none", gradient_accumulation_steps=accumulation)


def trained(model, features, label_key, loss, run_options):
  dataset = feature_dataset(features, run_options.batch_size, label_key=label_key, repeat=True)
  finetune(model, dataset, run_options, loss=loss)
  return [w.numpy() for w in model.trainable_weights]


def fitted(model, features, label_key, loss, run_options):
  """The reference: Keras' Model.fit with the optimizer of XLNet runs (as finetune was)."""
  model.compile(optimizer=create_optimizer(model, run_options.optimizer,
                                           run_options.train_steps), loss=loss)
  dataset = feature_dataset(features, run_options.batch_size, label_key=label_key, repeat=True)
  model.fit(dataset, steps_per_epoch=run_options.train_steps, epochs=1, verbose=0)
  return [w.numpy() for w in model.trainable_weights]


def assert_weights_close(actual, expected, atol=2e-6):
  assert len(actual) == len(expected)
  for got, want in zip(actual, expected):
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)


@pytest.mark.parametrize("head", ["classifier", "tagger"])
def test_steps_equal_model_fit_with_the_same_optimizer(head):
  """Two steps (warmup, clipping, weight decay) of a Keras loss (classification) and of a
  head's own loss (tagging: the mean over scored tokens) equal Model.fit's."""
  if head == "classifier":
    features, label_key = classification_features(), "label"
    make, loss = (lambda: classifier(3)), keras.losses.SparseCategoricalCrossentropy(
        from_logits=True)
  else:
    features, label_key, loss = tagging_features(16), "label_ids", None
    make = lambda: (keras.utils.set_random_seed(0), tiny_tagger())[1]
  ours = trained(make(), features, label_key, loss, options())
  reference = fitted(make(), features, label_key, loss, options())
  assert_weights_close(ours, reference)
  assert max(np.abs(w - r).max() for w, r in zip(ours, [w.numpy() for w in
                                                        make().trainable_weights])) > 1e-3


@pytest.fixture(scope="module")
def whole_batch():
  """The weights after two steps of regression (squared error) on whole batches of 8 rows."""
  return trained(classifier(1), classification_features(), "score",
                 keras.losses.MeanSquaredError(), options())


@pytest.mark.parametrize("accumulation", [2, 4])
def test_accumulation_equals_the_whole_batch(whole_batch, accumulation):
  """Regression (squared error) on micro-batches of 4 or 2 rows: the same update as 8 rows."""
  micro = trained(classifier(1), classification_features(), "score",
                  keras.losses.MeanSquaredError(), options(accumulation=accumulation))
  assert_weights_close(micro, whole_batch)


@pytest.mark.parametrize("steps, batch, message", [
    (0, 8, "--gradient_accumulation_steps must be at least 1; got 0"),
    (3, 8, "--gradient_accumulation_steps=3 must divide --train_batch_size=8: each step's "
           "batch is split into that many equal micro-batches")])
def test_accumulation_steps_that_cannot_split_the_batch_are_refused(steps, batch, message):
  with pytest.raises(UserInputError) as raised:
    options(batch=batch, accumulation=steps)
  assert str(raised.value) == message


def _results(processes):
  """{run: RESULT} of each process, after all ended."""
  outputs = []
  for process in processes:
    stdout, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stderr[-3000:]
    outputs.append({result["run"]: result for result in (
        json.loads(line[len("RESULT "):]) for line in stdout.splitlines()
        if line.startswith("RESULT "))})
  return outputs


def _weights(path):
  with np.load(path) as weights:
    return [weights[f"arr_{i}"] for i in range(len(weights.files))]


def _assert_same_run(result, weights_path, reference, reference_weights_path):
  np.testing.assert_allclose(result["losses"], reference["losses"], rtol=1e-5)
  np.testing.assert_allclose(result["dev"], reference["dev"], rtol=1e-4, atol=1e-6)
  assert_weights_close(_weights(weights_path), _weights(reference_weights_path))


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
  """(OUT, {run: RESULT}) of the one-device runs (tagger and classifier) that both tests below
  compare with, in one process: the first in OUT, so it writes the initial weights every later
  run in OUT starts from."""
  out = tmp_path_factory.mktemp("distributed_finetuning")
  results, = _results([start_forked([RUNNER, "0", str(out),
                                     "one_device:1,one_device:1:classifier"])])
  return out, results


@pytest.mark.slow
def test_mirrored_and_accumulation_equal_one_device(one_device):
  """A tagger with 2 micro-batches (the loss a mean over scored tokens, which differ per
  replica and micro-batch) and a classifier without (a Keras loss) on two logical CPU devices
  equal one device: losses (a mean, not a replica's share), dev scores, weights."""
  # (one device with micro-batches: test_accumulation_equals_the_whole_batch, in process)
  out, one = one_device
  runs = ["mirrored:2", "mirrored:1:classifier"]
  process = start_forked([RUNNER, "2", str(out), ",".join(runs)])
  results, = _results([process])
  for run in runs:
    reference = "one_device:1:classifier" if run.endswith("classifier") else "one_device:1"
    assert len(one[reference]["losses"]) == STEPS
    _assert_same_run(results[run], out / f"{run.replace(':', '-')}-0.npz",
                     one[reference], out / f"{reference.replace(':', '-')}-0.npz")
  assert 0.9 < results["mirrored:1:classifier"]["losses"][0] / np.log(3) < 1.1  # a mean


@pytest.mark.slow
def test_two_workers_equal_one_device(one_device):
  """Two worker processes on 127.0.0.1 (each half of every global batch), with and without
  micro-batches: the losses, dev scores (evaluated on every worker) and weights of one device;
  only the chief writes the best weights (both would otherwise hold the same run lock)."""
  out, one = one_device
  runs = "multi_worker_mirrored:1,multi_worker_mirrored:2:classifier"
  workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
  processes = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
    processes.append(start_forked([RUNNER, "0", str(out), runs], env=env))
  for worker, results in enumerate(_results(processes)):
    for run in runs.split(","):
      reference = "one_device:1:classifier" if run.endswith("classifier") else "one_device:1"
      _assert_same_run(results[run], out / f"{run.replace(':', '-')}-{worker}.npz",
                       one[reference], out / f"{reference.replace(':', '-')}-0.npz")
  assert os.path.exists(out / "best-multi_worker_mirrored-2-classifier" / "model.weights.h5")
  assert 0.9 < one["one_device:1"]["losses"][0] / np.log(3) < 1.1  # a mean over the tokens
