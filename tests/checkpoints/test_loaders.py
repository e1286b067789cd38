"""Original TF1 and Hugging Face loaders reproduce the reference; mismatches fail loudly."""

import os

import numpy as np
import pytest
import tensorflow as tf

from checkpoint_files import (assert_matches_reference, convert_checkpoint, huggingface_tensors,
                              original_weights,
                              read_tf1_checkpoint, write_huggingface_directory,
                              write_tf1_checkpoint)
from model_inputs import tiny_config
from xlnet_tf import XLNetModel, checkpoints
from xlnet_tf.checkpoints.huggingface_writer import save_huggingface_checkpoint
from xlnet_tf.utils.errors import UserInputError


@pytest.mark.parametrize("untie_r", [True, False])
def test_original_checkpoint_loads_and_reproduces_reference(tmp_path, rng, untie_r):
  config = tiny_config(untie_r=untie_r)
  weights = original_weights(config, seed=1)
  extras = {"global_step": np.int64(1000), "model/lm_loss/bias": np.zeros(config.n_token,
                                                                         np.float32),
            "model/transformer/layer_0/ff/layer_1/kernel/adam_m": np.zeros([32, 48], np.float32)}
  prefix = write_tf1_checkpoint({**weights, **extras}, str(tmp_path / "xlnet_model.ckpt"))
  model = XLNetModel(config)
  report = checkpoints.load_original_checkpoint(model, prefix)
  assert len(report.loaded) == len(weights)
  assert set(report.skipped) == set(extras)
  assert "head" in report.skipped["model/lm_loss/bias"]
  assert_matches_reference(model, weights, config, rng)
  # A directory with a `checkpoint` file resolves to its latest checkpoint.
  checkpoints.load_original_checkpoint(XLNetModel(config), str(tmp_path))


def _corrupt(weights, how):
  weights = dict(weights)
  if how == "missing":
    del weights["model/transformer/layer_1/rel_attn/r/kernel"]
  elif how == "misnamed":
    weights["model/transformer/layer_1/rel_attn/q/kernal"] = weights.pop(
        "model/transformer/layer_1/rel_attn/q/kernel")
  elif how == "misshaped":
    weights["model/transformer/layer_0/ff/layer_2/bias"] = np.zeros([31], np.float32)
  elif how == "extra_layer":
    weights["model/transformer/layer_2/ff/layer_2/bias"] = np.zeros([32], np.float32)
  return weights


EXPECTED_MESSAGE = {
    "missing": r"missing: model/transformer/layer_1/rel_attn/r/kernel",
    "misnamed": r"(?s)missing: model/transformer/layer_1/rel_attn/q/kernel.*"
                r"unexpected: model/transformer/layer_1/rel_attn/q/kernal",
    "misshaped": r"misshaped: model/transformer/layer_0/ff/layer_2/bias: checkpoint \[31\]",
    "extra_layer": r"unexpected: model/transformer/layer_2/ff/layer_2/bias",
}


@pytest.mark.parametrize("how", sorted(EXPECTED_MESSAGE))
def test_original_checkpoint_mismatch_names_the_variable_and_loads_nothing(tmp_path, how):
  config = tiny_config()
  prefix = write_tf1_checkpoint(_corrupt(original_weights(config), how),
                                str(tmp_path / "bad.ckpt"))
  model = XLNetModel(config)
  before = [w.numpy().copy() for w in model.weights]
  with pytest.raises(checkpoints.CheckpointMismatchError, match=EXPECTED_MESSAGE[how]):
    checkpoints.load_original_checkpoint(model, prefix)
  for old, variable in zip(before, model.weights):
    np.testing.assert_array_equal(old, variable.numpy())


def test_tied_checkpoint_into_untied_model_says_how_to_fix(tmp_path):
  prefix = write_tf1_checkpoint(original_weights(tiny_config(untie_r=False)),
                                str(tmp_path / "tied.ckpt"))
  with pytest.raises(checkpoints.CheckpointMismatchError, match="set untie_r=False"):
    checkpoints.load_original_checkpoint(XLNetModel(tiny_config(untie_r=True)), prefix)


def test_missing_checkpoint_file_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="No TF checkpoint"):
    checkpoints.load_original_checkpoint(XLNetModel(tiny_config()), str(tmp_path / "nope.ckpt"))


@pytest.mark.parametrize("prefix", ["transformer.", ""])
def test_huggingface_safetensors_loads_and_reproduces_reference(tmp_path, rng, prefix):
  config = tiny_config()
  weights = original_weights(config, seed=2)
  tensors = huggingface_tensors(weights, config, prefix)
  tensors["lm_loss.bias"] = np.zeros(config.n_token, np.float32)
  tensors["sequence_summary.summary.weight"] = np.zeros([32, 32], np.float32)
  write_huggingface_directory(str(tmp_path), tensors, config)
  model = XLNetModel(config)
  report = checkpoints.load_huggingface_checkpoint(model, str(tmp_path))
  assert "sequence_summary.summary.weight" in report.skipped
  assert_matches_reference(model, weights, config, rng)


def test_huggingface_into_tied_model_needs_equal_layers(tmp_path, rng):
  config = tiny_config(untie_r=False)
  weights = original_weights(config, seed=3)  # tied: every HF layer gets the same bias
  write_huggingface_directory(str(tmp_path / "same"), huggingface_tensors(weights, config), config)
  model = XLNetModel(config)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path / "same"))
  assert_matches_reference(model, weights, config, rng)
  untied = original_weights(tiny_config(), seed=3)
  write_huggingface_directory(str(tmp_path / "differ"), huggingface_tensors(untied, config),
                              config)
  with pytest.raises(checkpoints.CheckpointMismatchError, match="differs across layers"):
    checkpoints.load_huggingface_checkpoint(XLNetModel(config), str(tmp_path / "differ"))


@pytest.mark.parametrize("how,message", [
    ("drop", r"missing: model/transformer/layer_1/ff/layer_1/kernel \(transformer.layer.1.ff"),
    ("rename", r"unexpected: transformer.layer.0.rel_attn.qq"),
    ("reshape", r"misshaped: model/transformer/mask_emb/mask_emb \(transformer.mask_emb\)"),
    ("bias", r"missing: layer.1.rel_attn.r_s_bias"),
])
def test_huggingface_mismatch_names_the_weight(tmp_path, how, message):
  config = tiny_config()
  tensors = huggingface_tensors(original_weights(config), config)
  if how == "drop":
    del tensors["transformer.layer.1.ff.layer_1.weight"]
  elif how == "rename":
    tensors["transformer.layer.0.rel_attn.qq"] = tensors.pop("transformer.layer.0.rel_attn.q")
  elif how == "reshape":
    tensors["transformer.mask_emb"] = np.zeros([1, 32], np.float32)
  else:
    del tensors["transformer.layer.1.rel_attn.r_s_bias"]
  write_huggingface_directory(str(tmp_path), tensors, config)
  with pytest.raises(checkpoints.CheckpointMismatchError, match=message):
    checkpoints.load_huggingface_checkpoint(XLNetModel(config), str(tmp_path))


def test_huggingface_config_mismatch_and_legacy_pytorch_file(tmp_path):
  config = tiny_config()
  write_huggingface_directory(str(tmp_path / "hf"), huggingface_tensors(
      original_weights(config), config), config)
  with pytest.raises(checkpoints.CheckpointMismatchError, match="d_inner: checkpoint 48, model 64"):
    checkpoints.load_huggingface_checkpoint(XLNetModel(tiny_config(d_inner=64)),
                                            str(tmp_path / "hf"))
  os.makedirs(tmp_path / "torch")
  (tmp_path / "torch" / "pytorch_model.bin").write_bytes(b"\x80\x02pickle")
  with pytest.raises(ValueError, match="safe_serialization=True"):
    checkpoints.load_huggingface_checkpoint(XLNetModel(config), str(tmp_path / "torch"))


def test_bfloat16_safetensors_are_read_exactly(tmp_path):
  from xlnet_tf.checkpoints.safetensors_io import read_safetensors
  import ml_dtypes
  from safetensors.numpy import save_file
  values = np.array([[1.5, -2.25], [3.0e-3, 7.0e4]], np.float32).astype(ml_dtypes.bfloat16)
  save_file({"x": values}, str(tmp_path / "b.safetensors"))
  np.testing.assert_array_equal(read_safetensors(str(tmp_path / "b.safetensors"))["x"],
                                values.astype(np.float32))


def test_convert_round_trip_is_lossless(tmp_path, rng):
  config = tiny_config()
  weights = original_weights(config, seed=4)
  original_dir = tmp_path / "original"
  prefix = write_tf1_checkpoint(weights, str(original_dir / "xlnet_model.ckpt"))
  config.to_json_file(str(original_dir / "xlnet_config.json"), original_keys_only=True)
  report = convert_checkpoint(prefix, "original", str(tmp_path / "own"), "own")
  assert "max |diff| = 0.0" in report
  convert_checkpoint(str(tmp_path / "own"), "own", str(tmp_path / "back"), "original")
  back = read_tf1_checkpoint(str(tmp_path / "back" / "xlnet_model.ckpt"),
                             {name: value.shape for name, value in weights.items()})
  for name, value in weights.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  names = tf.train.load_checkpoint(str(tmp_path / "back" / "xlnet_model.ckpt")
                                   ).get_variable_to_shape_map()
  assert set(names) == set(weights)
  hf_dir = tmp_path / "hf"
  write_huggingface_directory(str(hf_dir), huggingface_tensors(weights, config), config)
  convert_checkpoint(str(hf_dir), "huggingface", str(tmp_path / "from_hf"), "own")
  model = XLNetModel.from_pretrained(str(tmp_path / "from_hf"), dropout=0.0, dropatt=0.0)
  assert_matches_reference(model, weights, config, rng)


def test_own_format_refuses_another_architecture(tmp_path):
  checkpoints.save_pretrained(XLNetModel(tiny_config()), str(tmp_path))
  with pytest.raises(checkpoints.CheckpointMismatchError, match="n_layer: checkpoint 2, model 3"):
    checkpoints.load_own_checkpoint(XLNetModel(tiny_config(n_layer=3)), str(tmp_path))


def test_ablation_encodings_live_in_the_own_format_only(tmp_path):
  """Transformer-XL's ablation models (XLNetConfig.pos_encoding): the original and Hugging
  Face formats refuse them in both directions, naming the field; the own format round-trips
  their learned table (a relative model of the same sizes is refused)."""
  config = tiny_config(attn_type="uni", pos_encoding="shaw", clamp_len=4)
  model = XLNetModel(config)
  prefix = write_tf1_checkpoint(original_weights(tiny_config()), str(tmp_path / "xlnet.ckpt"))
  refusals = [lambda: checkpoints.load_original_checkpoint(model, prefix),
              lambda: checkpoints.save_original_checkpoint(model, str(tmp_path / "out.ckpt")),
              lambda: save_huggingface_checkpoint(model, str(tmp_path / "hf"))]
  for refuse in refusals:
    with pytest.raises(UserInputError, match="XLNetConfig.pos_encoding='shaw': the original "
                       "and Hugging Face checkpoint formats hold XLNet's relative encoding"):
      refuse()
  assert not os.path.exists(tmp_path / "hf") and not os.path.exists(tmp_path / "out.ckpt.index")
  model.position_table.assign(np.arange(model.position_table.numpy().size, dtype=np.float32)
                              .reshape(model.position_table.shape))
  checkpoints.save_pretrained(model, str(tmp_path / "own"))
  loaded = XLNetModel(config)
  checkpoints.load_own_checkpoint(loaded, str(tmp_path / "own"))
  np.testing.assert_array_equal(loaded.position_table.numpy(), model.position_table.numpy())
  with pytest.raises(checkpoints.CheckpointMismatchError, match="pos_encoding"):
    checkpoints.load_own_checkpoint(XLNetModel(tiny_config(attn_type="uni")), str(tmp_path / "own"))
