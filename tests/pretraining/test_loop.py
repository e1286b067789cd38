"""The pretraining loop: resume, memory, XLA, distribution, overfitting, bad input."""

import glob
import json
import os
import re
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from cli_output import run_tool, tensorflow_log_lines
from local_cluster import free_ports
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetConfig, checkpoints
from xlnet_tf.pretraining.records import load_record_info, pretraining_dataset
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.heads.pretrainer import masked_lm_loss
from xlnet_tf.errors import UserInputError
from xlnet_tf.pretraining.loop import PretrainingOptions, PretrainingRun, TrainingDivergedError
from xlnet_tf.training import run_lock

RUNNER = os.path.join(os.path.dirname(__file__), "distributed_run.py")


def config_for(data, **overrides):
  info = load_record_info(data)
  values = dict(n_token=info["tokenizer"]["vocab_size"], n_layer=2, d_model=32, n_head=4,
                d_head=8, d_inner=64, dropout=0.0, dropatt=0.0, mem_len=16, reuse_len=16,
                bi_data=info["settings"]["bi_data"])
  values.update(overrides)
  return XLNetConfig(**values)


def make_run(data, model_dir, steps, seed=0, model=None, **option_overrides):
  """A one-device run of the tiny model (`model`: config overrides) on `data`."""
  keras.utils.set_random_seed(seed)
  options = dict(model_dir=str(model_dir), train_data=data, train_steps=steps,
                 learning_rate=1e-2, warmup_steps=2, log_steps=1, save_steps=3, summaries=False)
  options.update(option_overrides)
  return PretrainingRun(tf.distribute.OneDeviceStrategy("/cpu:0"),
                        config_for(data, **(model or {})), PretrainingOptions(**options))


def test_killed_run_resumes_to_the_same_weights(small_data, tmp_path):
  data = small_data["bi"]
  straight = make_run(data, tmp_path / "straight", 6)
  straight.train()
  assert not os.path.exists(tmp_path / "straight" / "pretrained")  # the caller exports
  assert straight.export() == {"pretrained": str(tmp_path / "straight" / "pretrained"),
                               "lm": str(tmp_path / "straight" / "lm")}
  assert checkpoints.load_pretrained(str(tmp_path / "straight" / "pretrained")).config == (
      straight.config)
  interrupted = make_run(data, tmp_path / "interrupted", 6)
  interrupted.train(stop_after=4)  # checkpoint at 3; step 4 is lost with the "kill"
  assert interrupted.checkpoints.manager.latest_checkpoint.endswith("ckpt-3")
  resumed = make_run(data, tmp_path / "interrupted", 6, seed=99)  # other init: restored anyway
  result = resumed.train()
  assert result["history"][0]["step"] == 4
  for a, b in zip(straight.model.weights, resumed.model.weights):
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
  saved = sorted(f for f in os.listdir(tmp_path / "interrupted") if f.startswith("mems-"))
  assert saved == ["mems-3-worker0.npz", "mems-6-worker0.npz"]


DROPOUT = {"dropout": 0.1, "dropatt": 0.1}


def _runner_options(**options):
  """distributed_run.py's arguments for 6 steps with make_run's options and dropout."""
  return ["--model=" + json.dumps(DROPOUT),
          "--options=" + json.dumps(dict(save_steps=3, warmup_steps=2, **options))]


def _kill_at_step_4(strategy, cpu_replicas, data, model_dir, **options):
  """A process training 6 steps with dropout (checkpoints every 3, as make_run's) killed with
  SIGKILL right after step 4: resuming repeats step 4 from the checkpoint of step 3."""
  killed = subprocess.run(
      [sys.executable, RUNNER, strategy, str(cpu_replicas), data, str(model_dir), "6",
       "--kill_after=4", *_runner_options(**options)],
      capture_output=True, text=True, timeout=600)
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-3")
  assert os.path.exists(os.path.join(model_dir, run_lock.LOCK_FILE))  # left by the dead run


def _assert_same_weights(expected, actual):
  assert len(expected) == len(actual)
  for path, value in expected.items():
    np.testing.assert_allclose(actual[path], value, atol=1e-6, rtol=0, err_msg=path)


def test_killed_process_resumes_to_the_weights_of_an_uninterrupted_run_with_dropout(
    small_data, tmp_path):
  """Dropout 0.1: the masks of a step depend on (seed, step, replica) only, so the resumed
  run redraws step 4's masks; its lock is taken over."""
  data = small_data["bi"]
  _kill_at_step_4("one_device", 0, data, tmp_path / "killed")
  resumed = make_run(data, tmp_path / "killed", 6, seed=99, model=DROPOUT)  # other init
  assert resumed.train()["history"][0]["step"] == 4
  assert not os.path.exists(tmp_path / "killed" / run_lock.LOCK_FILE)
  straight = make_run(data, tmp_path / "straight", 6, model=DROPOUT)
  straight.train()
  _assert_same_weights({v.path: v.numpy() for v in straight.model.weights},
                       {v.path: v.numpy() for v in resumed.model.weights})


@pytest.mark.slow
def test_killed_mirrored_run_resumes_to_the_weights_of_an_uninterrupted_run_with_dropout(
    small_data, tmp_path):
  """Two replicas (each its own masks): killed at step 4, resumed in a new process, equal to
  an uninterrupted run (without XLA, which compiles slowly per replica; the one-device test
  covers it)."""
  data = small_data["uni"]
  _kill_at_step_4("mirrored", 2, data, tmp_path / "killed", jit_compile=False)
  _run_subprocess(["mirrored", 2, data, f"{tmp_path / 'killed'},{tmp_path / 'straight'}", 6,
                   "--weights", *_runner_options(jit_compile=False)])
  with np.load(tmp_path / "straight.npz") as straight, np.load(tmp_path / "killed.npz") as resumed:
    _assert_same_weights(dict(straight), dict(resumed))


def test_a_non_finite_loss_stops_the_run_before_anything_is_saved(small_data, tmp_path):
  """Learning rate 1e30: step 1's update makes step 2's loss NaN; the run stops naming step 2,
  keeps the checkpoint of step 1 (finite weights) and saves nothing more."""
  run = make_run(small_data["bi"], tmp_path / "run", 6, learning_rate=1e30, warmup_steps=0,
                 save_steps=1, log_steps=3, jit_compile=False)
  latest = str(tmp_path / "run" / "ckpt-1")
  with pytest.raises(TrainingDivergedError) as raised:
    run.train()
  assert str(raised.value) == (
      f"step 2: the training loss is nan; stopped without saving (latest checkpoint: {latest});"
      " lower the learning rate or check the data")
  assert tf.train.latest_checkpoint(str(tmp_path / "run")) == latest
  assert sorted(os.listdir(tmp_path / "run")) == [
      "checkpoint", "checkpoint_model.json", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
      "mems-1-worker0.npz"]
  reader = tf.train.load_checkpoint(latest)
  for name, dtype in reader.get_variable_to_dtype_map().items():
    if dtype.is_floating:
      assert np.isfinite(reader.get_tensor(name)).all(), name


def test_resuming_with_another_model_is_refused_by_name(small_data, tmp_path):
  data = small_data["bi"]
  make_run(data, tmp_path / "run", 1, jit_compile=False).train()
  smaller = dict(d_model=16, d_head=4, dropout=0.1)
  with pytest.raises(UserInputError) as raised:
    make_run(data, tmp_path / "run", 2, model=smaller, jit_compile=False).train()
  assert str(raised.value) == (
      f"{tmp_path / 'run'}: its checkpoints are of another model: d_head 8 (checkpoints) vs 4 "
      "(this run); d_model 32 (checkpoints) vs 16 (this run); dropout 0.0 (checkpoints) vs 0.1 "
      "(this run); resume with the same model config or train into another model directory")
  # Checkpoints written before the model was recorded: the first variable that differs.
  os.remove(tmp_path / "run" / "checkpoint_model.json")
  with pytest.raises(UserInputError, match=r"^\S+/ckpt-1: cannot resume from this checkpoint: "
                     r".*incompatible tensor with shape \(1, 1, 32\) .* shape \(1, 1, 16\)"):
    make_run(data, tmp_path / "run", 2, model=smaller, jit_compile=False).train()


def test_memory_is_used_and_carried(small_data, tmp_path):
  data = small_data["bi"]
  run = make_run(data, tmp_path / "run", 2, learning_rate=0.0, warmup_steps=0, weight_decay=0.0)
  randomize_weights(run.model.backbone, 0)  # weights that make every input matter; lr 0 keeps them
  history = run.train()["history"]
  batches = list(pretraining_dataset(data, repeat=False).take(2))
  model = run.model
  keys = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
  zero_mems = [tf.zeros([4, 16, 32])] * 2
  first = model({**{k: batches[0][k] for k in keys}, "mems": zero_mems})
  with_memory = model({**{k: batches[1][k] for k in keys}, "mems": first["new_mems"]})
  without = model({**{k: batches[1][k] for k in keys}, "mems": zero_mems})
  loss_with = float(masked_lm_loss(with_memory["logits"], batches[1]["target"],
                                   batches[1]["target_mask"]))
  loss_without = float(masked_lm_loss(without["logits"], batches[1]["target"],
                                      batches[1]["target_mask"]))
  np.testing.assert_allclose(history[1]["loss"], loss_with, rtol=1e-5)
  assert abs(loss_with - loss_without) > 1e-3


def test_tiny_model_overfits_a_fixed_batch(small_data):
  data = small_data["uni"]
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(config_for(data, mem_len=0))
  model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
  fixed = pretraining_dataset(data, repeat=False).take(1).cache().repeat()
  initial = model.evaluate(fixed, steps=1, verbose=0, return_dict=True)["loss"]
  assert initial > 3.0
  model.fit(fixed, steps_per_epoch=150, epochs=1, verbose=0)
  final = model.evaluate(fixed, steps=1, verbose=0, return_dict=True)["loss"]
  assert final < 0.05


def test_fit_carries_memory(small_data):
  data = small_data["bi"]
  keras.utils.set_random_seed(0)
  model = XLNetPretrainer(config_for(data))
  model.compile(optimizer=keras.optimizers.Adam(1e-3))
  model.fit(pretraining_dataset(data), steps_per_epoch=3, epochs=1, verbose=0)
  memory = model._memory.numpy()
  assert memory.shape == (2, 4, 16, 32) and np.abs(memory).max() > 0


def _run_subprocess(args, env=None):
  result = subprocess.run([sys.executable, RUNNER] + [str(a) for a in args], env=env,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  line = [out for out in result.stdout.splitlines() if out.startswith("LOSSES ")][-1]
  return json.loads(line[len("LOSSES "):])


@pytest.mark.slow
def test_mirrored_equals_one_device(small_data, tmp_path):
  data = small_data["uni"]
  one = _run_subprocess(["one_device", 0, data, tmp_path / "one", 5])
  mirrored = _run_subprocess(["mirrored", 2, data, tmp_path / "mirrored", 5])
  assert len(one) == 5
  np.testing.assert_allclose(mirrored, one, rtol=2e-5)


@pytest.mark.slow
def test_two_workers_equal_one_device(small_data, tmp_path):
  """Two worker processes on 127.0.0.1, each reading one of two identical shards: the global
  batch holds every row twice, so loss and update equal one device on one copy."""
  data = small_data["twin"]
  one = _run_subprocess(["one_device", 0, data, tmp_path / "one", 4])
  workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
  processes = []
  for index in range(2):
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}))
    processes.append(subprocess.Popen(
        [sys.executable, RUNNER, "multi_worker_mirrored", "0", data, str(tmp_path / "mw"), "4"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  outputs = []
  for process in processes:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    outputs.append(json.loads([out for out in stdout.splitlines()
                               if out.startswith("LOSSES ")][-1][len("LOSSES "):]))
  np.testing.assert_allclose(outputs[0], one, rtol=2e-5)
  np.testing.assert_allclose(outputs[1], one, rtol=2e-5)


def test_bad_settings_fail_before_training(small_data, tmp_path):
  data = small_data["bi"]
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  options = PretrainingOptions(model_dir=str(tmp_path), train_data=data, summaries=False)
  with pytest.raises(ValueError, match="reuse_len: data 16, model 8"):
    PretrainingRun(strategy, config_for(data, reuse_len=8), options)
  with pytest.raises(ValueError, match="bi_data: data True, model False"):
    PretrainingRun(strategy, config_for(data, bi_data=False), options)
  with pytest.raises(ValueError, match="global batch 8 must be the data's bsz_per_host"):
    PretrainingRun(strategy, config_for(data),
                   PretrainingOptions(model_dir=str(tmp_path), train_data=data,
                                      global_batch_size=8))
  with pytest.raises(FileNotFoundError, match="no record info"):
    PretrainingRun(strategy, config_for(data),
                   PretrainingOptions(model_dir=str(tmp_path), train_data=str(tmp_path / "x")))
  small = XLNetPretrainer(config_for(data, d_model=16, d_head=4, d_inner=32))
  checkpoints.save_pretrained(small.backbone, str(tmp_path / "small"))
  run = PretrainingRun(strategy, config_for(data), PretrainingOptions(
      model_dir=str(tmp_path / "m"), train_data=data, summaries=False,
      init_checkpoint=str(tmp_path / "small")))
  with pytest.raises(checkpoints.CheckpointMismatchError, match="d_model: checkpoint 16, model 32"):
    run.train()


def test_train_step_compiles_with_xla(small_data, tmp_path):
  run = make_run(small_data["bi"], tmp_path / "xla", 1)
  batch = next(iter(pretraining_dataset(small_data["bi"])))
  mems = tuple(tf.zeros([4, 16, 32]) for _ in range(2))
  normalizers = tf.constant([24.0, 4.0])  # global target and example counts
  dropout_seed = tf.constant([0, 0], tf.int64)
  hlo = run.steps.compute.experimental_get_compiler_ir(batch, mems, normalizers, None,
                                                  dropout_seed)(stage="hlo")
  assert "HloModule" in hlo


@pytest.mark.slow
def test_cli_main_job_builds_data_trains_evaluates_and_resumes(tmp_path):
  script = os.path.join(os.path.dirname(__file__), "..", "..", "run", "pretrain.py")
  common = [sys.executable, script, f"--output_dir={tmp_path}",
            "--save_steps=10", "--log_steps=10", "--eval_batches=3", "--warmup_steps=5",
            "--model_size=tiny", "--vocab_size=500", "--seq_len=32", "--reuse_len=16",
            "--num_predict=5", "--bsz_per_host=4"]
  first = subprocess.run(common + ["--train_steps=20"], capture_output=True, text=True,
                         timeout=600)
  assert first.returncode == 0, first.stderr[-3000:]
  assert "[train] Read 4 files" in first.stdout and "[valid] Read 1 files" in first.stdout
  assert "Held-out permutation-LM loss:" in first.stdout
  summary = json.load(open(tmp_path / "model" / "run_summary.json"))
  assert summary["held_out_after"]["loss"] < summary["held_out_before"]["loss"]
  assert os.listdir(tmp_path / "model" / "train"), "TensorBoard events"
  second = subprocess.run(common + ["--train_steps=30"], capture_output=True, text=True,
                          timeout=600)
  assert second.returncode == 0, second.stderr[-3000:]
  assert "Reusing the data" in second.stdout
  assert "Resumed from" in second.stderr and "ckpt-20" in second.stderr
  assert "Trained to step 30" in second.stdout


def test_cli_pretrains_from_raw_text_within_a_time_budget(tmp_path):
  """--input_glob --objective=mlm --max_minutes: the SentencePiece model, the records and the
  backbone in the main job's layout, the step count fitted to the budget; TensorFlow's logs
  silenced."""
  from xlnet_tf.pretraining import corpus
  corpus.write_corpus_files(corpus.python_docs_documents()[:60], str(tmp_path / "text"),
                            num_files=2)
  budget_minutes = 0.75
  result = run_tool(
      "run/pretrain.py", f"--input_glob={tmp_path}/text/*.txt", f"--output_dir={tmp_path}/out",
      "--objective=mlm", f"--max_minutes={budget_minutes}", "--model_size=tiny",
      "--vocab_size=500", "--seq_len=32", "--reuse_len=16", "--num_predict=5",
      "--bsz_per_host=4", "--eval_batches=2", "--log_steps=50")
  assert result.returncode == 0, result.stderr[-3000:]
  assert not tensorflow_log_lines(result.stderr)  # only the run's own progress
  out = tmp_path / "out"
  assert (out / "data" / "spiece.model").exists()
  assert load_record_info(str(out / "data" / "train"))["settings"]["objective"] == "mlm"
  assert (out / "model" / "pretrained" / "xlnet_config.json").exists()
  assert "Held-out masked-LM loss:" in result.stdout
  planned = re.search(r"Time budget: .* -> (\d+) steps in all", result.stderr)
  summary = json.load(open(out / "model" / "run_summary.json"))
  assert planned and summary["train_steps"] == int(planned.group(1)) > 20
  assert summary["seconds"] < budget_minutes * 60 + 15
  assert summary["held_out_after"]["loss"] < summary["held_out_before"]["loss"]


@pytest.mark.parametrize("policy,options", [("mixed_bfloat16", {}),
                                            ("mixed_float16", {"loss_scale": 1024.0}),
                                            ("float32", {"recompute_blocks": True})])
def test_precisions_and_recomputation_train(small_data, tmp_path, policy, options):
  keras.mixed_precision.set_global_policy(policy)
  try:
    run = make_run(small_data["bi"], tmp_path / policy, 8, **options)
    history = run.train()["history"]
  finally:
    keras.mixed_precision.set_global_policy("float32")
  losses = [record["loss"] for record in history]
  assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_final_evaluation_reuses_the_compiled_step(small_data, tmp_path):
  """Evaluations before and after training (run/pretrain.py's) trace each step function once,
  so the final one compiles nothing (XLA compiles per trace and shape; off here, for speed)."""
  data = small_data["bi"]
  run = make_run(data, tmp_path / "run", 4, valid_data=data, eval_batches=3, jit_compile=False)
  run.evaluate()
  run.train()
  run.evaluate()
  assert run.steps.eval_step.experimental_get_tracing_count() == 1
  assert run.steps.evaluate_replica.experimental_get_tracing_count() == 1
  assert run.steps.train_step.experimental_get_tracing_count() == 1
  assert run.steps.compute.experimental_get_tracing_count() == 1
  assert run.evaluation_seconds > 0


def _scalars(directory):
  """{tag: [values in step order]} of a TensorBoard event directory."""
  values = {}
  for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.HasField("tensor") and not value.tensor.string_val:
          values.setdefault(value.tag, []).append(float(tf.make_ndarray(value.tensor)))
  return values


def test_float16_overflow_skips_the_step_halves_the_scale_and_good_steps_double_it(
    small_data, tmp_path, policy):
  policy("mixed_float16")
  run = make_run(small_data["bi"], tmp_path / "run", 10, loss_scale="dynamic",
                 loss_scale_growth_steps=2)
  iterator = run._distributed_data(small_data["bi"])
  mems = run._zero_mems()
  state = run.model.trainable_variables + run.optimizer.variables
  run.loss_scale.scale.assign(2.0 ** 40)  # float16 gradients of a loss times 2^40 overflow
  before = [v.numpy().copy() for v in state if v is not run.optimizer.iterations]
  _, norm, mems = run.steps.train_step(iterator, mems)
  assert not np.isfinite(float(norm))
  for value, variable in zip(before, [v for v in state if v is not run.optimizer.iterations]):
    np.testing.assert_array_equal(variable.numpy(), value, err_msg=variable.path)
  assert float(run.loss_scale.scale.numpy()) == 2.0 ** 39
  assert int(run.loss_scale.skipped_steps.numpy()) == 1
  assert int(run.optimizer.iterations.numpy()) == 1  # the batch was consumed
  run.loss_scale.scale.assign(2.0 ** 10)
  for _ in range(2):
    _, norm, mems = run.steps.train_step(iterator, mems)
    assert np.isfinite(float(norm))
  assert float(run.loss_scale.scale.numpy()) == 2.0 ** 11  # doubled after 2 good steps
  assert int(run.loss_scale.skipped_steps.numpy()) == 1
  moved = [np.abs(v.numpy() - value).max() for v, value in zip(run.model.trainable_variables,
                                                               before)]
  assert min(moved) > 0


def test_float16_with_a_dynamic_scale_trains_and_reports_skipped_steps(small_data, tmp_path,
                                                                        policy):
  """From a scale that overflows (2^30), the run skips steps until the scale fits, counts them
  in its log records, result and TensorBoard, and the loss still falls."""
  policy("mixed_float16")
  run = make_run(small_data["bi"], tmp_path / "run", 40, loss_scale="dynamic",
                 initial_loss_scale=2.0 ** 30, summaries=True)
  result = run.train()
  skipped = result["skipped_steps"]
  assert 1 <= skipped < 30
  history = result["history"]
  assert history[-1]["skipped_steps"] == skipped
  assert [record["skipped_steps"] for record in history] == sorted(
      record["skipped_steps"] for record in history)
  assert history[-1]["loss_scale"] == 2.0 ** 30 / 2 ** skipped  # 40 steps: no growth yet
  losses = [record["loss"] for record in history]
  assert all(np.isfinite(losses)) and np.mean(losses[-5:]) < np.mean(losses[:5])
  scalars = _scalars(str(tmp_path / "run" / "train"))
  assert scalars["skipped_steps"][-1] == skipped
  assert scalars["loss_scale"][-1] == history[-1]["loss_scale"]
