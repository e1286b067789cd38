"""XLNetModel: serialization, XLA, mixed precision and input errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from layer_checks import assert_keras_file_round_trip
from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import XLNetModel

LENGTH = 8


def pretraining_batch(rng, batch=2, n_token=50):
  inputs = padded_pair_batch(rng, batch, LENGTH, n_token, pad_lengths=[1] + [0] * (batch - 1))
  perm_mask, targets, _ = factorization_perm_mask(rng, batch, LENGTH, num_targets=3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, LENGTH, 1))
  return inputs


def test_keras_file_round_trip(tmp_path, rng):
  model = XLNetModel(tiny_config(mem_len=4, bi_data=True))
  randomize_weights(model, 1)
  inputs = pretraining_batch(rng)
  restored = assert_keras_file_round_trip(
      model, lambda m: [m(inputs)[key] for key in ("sequence_output", "query_output")],
      tmp_path / "xlnet.keras", atol=0)
  assert restored.config == model.config


def test_xla_forward_and_train_step_agree_with_eager(rng):
  model = XLNetModel(tiny_config(dropout=0.1, dropatt=0.1, mem_len=4))
  randomize_weights(model, 2)
  inputs = {k: tf.constant(v) for k, v in pretraining_batch(rng).items()}
  eager = model(inputs)["query_output"].numpy()
  compiled = tf.function(lambda x: model(x)["query_output"], jit_compile=True)
  np.testing.assert_allclose(compiled(inputs).numpy(), eager, atol=1e-5)

  optimizer = keras.optimizers.Adam(1e-3)
  embedding = model.word_embedding

  @tf.function(jit_compile=True)
  def train_step(batch):
    with tf.GradientTape() as tape:
      outputs = model(batch, training=True)
      logits = tf.einsum("bpd,nd->bpn", outputs["query_output"], embedding)
      targets = tf.gather(batch["input_ids"], tf.argmax(batch["target_mapping"], -1,
                                                         output_type=tf.int32), batch_dims=1)
      losses = tf.keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
      loss = tf.reduce_sum(losses * tf.reduce_sum(batch["target_mapping"], -1)) / 3.0
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss, gradients

  first, gradients = train_step(inputs)
  for variable, gradient in zip(model.trainable_variables, gradients):
    assert np.isfinite(gradient.numpy()).all(), variable.path
    if "word_embedding" not in variable.path:
      assert np.abs(gradient.numpy()).max() > 0, f"no gradient reaches {variable.path}"
  for _ in range(30):
    loss, _ = train_step(inputs)
  assert float(loss) < float(first)


@pytest.mark.parametrize("name,tolerance", [("mixed_bfloat16", 0.08), ("mixed_float16", 0.02)])
def test_mixed_precision_agrees_with_float32(policy, rng, name, tolerance):
  reference_model = XLNetModel(tiny_config())
  randomize_weights(reference_model, 4, scale=0.2)
  inputs = pretraining_batch(rng, batch=3)
  expected = reference_model(inputs)
  policy(name)
  model = XLNetModel(tiny_config())
  model.set_weights(reference_model.get_weights())
  outputs = model(inputs)
  xla = tf.function(lambda x: model(x), jit_compile=True)(inputs)
  for key in ("sequence_output", "query_output"):
    assert outputs[key].dtype == keras.mixed_precision.global_policy().compute_dtype
    got = outputs[key].numpy().astype(np.float32)
    assert np.isfinite(got).all()
    assert np.max(np.abs(got - expected[key].numpy())) < tolerance, key
    np.testing.assert_allclose(xla[key].numpy().astype(np.float32), got, atol=tolerance)
  assert model.word_embedding.dtype == "float32"


BAD_INPUTS = {
    "float ids": (lambda x: dict(x, input_ids=x["input_ids"].astype(np.float32)), "input_ids"),
    "rank 1 ids": (lambda x: dict(x, input_ids=x["input_ids"][0]), "input_ids"),
    "id >= n_token": (lambda x: dict(x, input_ids=x["input_ids"] + 50), r"n_token=50"),
    "negative id": (lambda x: dict(x, input_ids=-x["input_ids"]), r"outside \[0"),
    "segment shape": (lambda x: dict(x, segment_ids=x["segment_ids"][:, :4]), "segment_ids"),
    "perm_mask shape": (lambda x: dict(x, perm_mask=x["perm_mask"][:, :, :5]), "perm_mask"),
    "target_mapping length": (lambda x: dict(x, target_mapping=x["target_mapping"][:, :, :6]),
                              "target_mapping"),
    "mems count": (lambda x: dict(x, mems=[np.zeros([2, 3, 32], np.float32)]), "n_layer=2"),
    "mems width": (lambda x: dict(x, mems=[np.zeros([2, 3, 16], np.float32)] * 2), r"mems\[0\]"),
    "unknown key": (lambda x: dict(x, attention_mask=x["input_mask"]), "attention_mask"),
    "memory_mask without mems": (lambda x: dict(x, memory_mask=np.ones([2, 3], np.float32)),
                                 "'memory_mask' must be given only with 'mems'"),
    "memory_mask length": (lambda x: dict(x, mems=[np.zeros([2, 3, 32], np.float32)] * 2,
                                          memory_mask=np.ones([2, 4], np.float32)),
                           r"memory_mask' must be of shape \[B, M\]"),
}
# Call keywords of decoding (memory_keys_values, position_keys): tiny config, B 2, T 8, N 4, H 8.
BAD_CACHE_PROJECTIONS = {
    "keys_values with mems": (dict(memory_keys_values=[(np.zeros([2, 4, 3, 8]),) * 2] * 2),
                              lambda x: dict(x, mems=[np.zeros([2, 3, 32], np.float32)] * 2),
                              "'mems' must be left out"),
    "keys_values count": (dict(memory_keys_values=[(np.zeros([2, 4, 3, 8]),) * 2]), dict,
                          "n_layer=2"),
    "keys_values heads": (dict(memory_keys_values=[(np.zeros([2, 2, 3, 8]),) * 2] * 2), dict,
                          r"memory_keys_values\[0\]' must be of shape \[B, N, M, H\]"),
    "position_keys length": (dict(position_keys=[np.zeros([1, 4, 15, 8])] * 2), dict,
                             r"position_keys\[0\]' must be .* = \['\?', 4, 16, 8\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_inputs_name_the_input(case, rng):
  model = XLNetModel(tiny_config())
  make_bad, message = BAD_INPUTS[case]
  with pytest.raises(ValueError, match=message):
    model(make_bad(pretraining_batch(rng)))


@pytest.mark.parametrize("case", sorted(BAD_CACHE_PROJECTIONS))
def test_bad_cache_projections_name_the_keyword(case, rng):
  model = XLNetModel(tiny_config())
  keywords, change_inputs, message = BAD_CACHE_PROJECTIONS[case]
  inputs = {key: value for key, value in pretraining_batch(rng).items()
            if key in ("input_ids", "input_mask")}
  with pytest.raises(ValueError, match=message):
    model(change_inputs(inputs), **keywords)


def test_bi_data_needs_an_even_batch(rng):
  model = XLNetModel(tiny_config(bi_data=True))
  with pytest.raises(ValueError, match="even batch"):
    model(pretraining_batch(rng, batch=3))


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_recomputed_blocks_give_the_same_gradients(rng, dropout):
  """With dropout the recomputed pass must redraw the forward's masks (derived block seeds)."""
  config = tiny_config(mem_len=4, dropout=dropout, dropatt=dropout / 2)
  keras.utils.set_random_seed(3)  # same dropout generators in both models
  model = XLNetModel(config)
  randomize_weights(model, 5)
  keras.utils.set_random_seed(3)
  recomputing = XLNetModel(config, recompute_blocks=True)
  recomputing.set_weights(model.get_weights())
  inputs = {k: tf.constant(v) for k, v in pretraining_batch(rng).items()}

  def compiled_loss_and_gradients(network):
    @tf.function(jit_compile=True)
    def compute(batch):
      with tf.GradientTape() as tape:
        out = network(batch, training=True)
        loss = tf.reduce_sum(out["query_output"] ** 2) + tf.reduce_sum(out["sequence_output"])
      return loss, tape.gradient(loss, network.trainable_variables)
    return compute

  model_step = compiled_loss_and_gradients(model)  # compiled once, called twice below
  (loss, expected) = model_step(inputs)
  (recomputed_loss, got) = compiled_loss_and_gradients(recomputing)(inputs)
  np.testing.assert_allclose(recomputed_loss.numpy(), loss.numpy(), rtol=1e-6)
  for a, b in zip(expected, got):
    np.testing.assert_allclose(tf.convert_to_tensor(b).numpy(), tf.convert_to_tensor(a).numpy(),
                               atol=1e-4)
  if dropout:  # the masks are live: another step draws different ones
    again, _ = model_step(inputs)
    assert abs(again.numpy() - loss.numpy()) > 1e-3


def test_a_new_model_draws_every_random_weight_on_its_own():
  """Each randomly initialized weight has its own draw: no two start equal (or share a first
  row), as one reused unseeded initializer would make q, k, v, r and o of a layer."""
  model = XLNetModel(tiny_config(pos_encoding="shaw", clamp_len=8, attn_type="uni", bi_data=False))
  model.build()
  drawn = {w.path: w.numpy().ravel() for w in model.weights
           if np.unique(w.numpy()).size > 1}  # not ones/zeros (LayerNorm, biases)
  assert {"q", "k", "v", "r", "o", "r_w_bias", "r_r_bias", "r_s_bias", "seg_embed",
          "relative_key_embedding"} <= {path.split("/")[-1] for path in drawn}
  starts = {}
  for path, values in drawn.items():
    starts.setdefault(tuple(values[:4]), []).append(path)
  assert [paths for paths in starts.values() if len(paths) > 1] == []
