import json

import numpy as np
import pytest

from xlnet_tf import XLNetConfig
from xlnet_tf.checkpoints.huggingface import config_from_huggingface
from xlnet_tf.config import ARCHITECTURE_KEYS
from xlnet_tf.utils.errors import UserInputError

ORIGINAL_BASE = {"d_head": 64, "d_inner": 3072, "d_model": 768, "ff_activation": "gelu",
                 "n_head": 12, "n_layer": 12, "n_token": 32000, "untie_r": True}


def test_original_config_file_round_trip(tmp_path):
  path = tmp_path / "xlnet_config.json"
  path.write_text(json.dumps(ORIGINAL_BASE))
  config = XLNetConfig.from_json_file(str(path), mem_len=384)
  assert config.to_dict(original_keys_only=True) == ORIGINAL_BASE
  assert config.mem_len == 384 and config == XLNetConfig.preset("base", mem_len=384)
  out = tmp_path / "out.json"
  config.to_json_file(str(out), original_keys_only=True)
  assert json.loads(out.read_text()) == ORIGINAL_BASE
  config.to_json_file(str(out))
  assert XLNetConfig.from_json_file(str(out)) == config


@pytest.mark.parametrize("field,value", [("n_layer", 0), ("d_model", 33),
                                         ("ff_activation", "swish"),
                                         ("attn_type", "both"), ("dropout", 1.5),
                                         ("clamp_len", -2), ("untie_r", "yes"), ("n_head", 2.0)])
def test_invalid_values_name_the_field(field, value):
  with pytest.raises(ValueError, match=f"XLNetConfig.{field}"):
    XLNetConfig(**{field: value})


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("field,value,message", [
    ("d_model", NAN, "XLNetConfig.d_model must be a positive integer up to 2^31 - 1; got nan"),
    ("n_layer", -3, "XLNetConfig.n_layer must be a positive integer up to 2^31 - 1; got -3"),
    ("n_token", 2 ** 40, "XLNetConfig.n_token must be a positive integer up to 2^31 - 1; got "
     "1099511627776"),
    ("mem_len", 2 ** 31, "XLNetConfig.mem_len must be an integer >= 0 (up to 2^31 - 1); got "
     "2147483648"),
    ("dropout", NAN, "XLNetConfig.dropout must be a rate in [0, 1); got nan"),
    ("dropatt", -INF, "XLNetConfig.dropatt must be a rate in [0, 1); got -inf"),
    ("init_std", INF, "XLNetConfig.init_std must be a positive finite float; got inf"),
    ("init_std", NAN, "XLNetConfig.init_std must be a positive finite float; got nan"),
    ("d_inner", 2_000_000_000, "XLNetConfig.d_inner: each feed-forward kernel (d_model 768 x "
     "d_inner 2000000000 = 1.5e+12 values) exceeds 2^31 - 1 values, more than one tensor holds; "
     "check the sizes"),
    ("n_token", 3_000_000, "XLNetConfig.n_token: the word embedding (n_token 3000000 x d_model "
     "768 = 2.3e+09 values) exceeds 2^31 - 1 values"),
])
def test_values_no_model_can_have_are_refused_naming_the_file(tmp_path, field, value, message):
  """NaN and Infinity (which Python's json reads), a size out of range, a weight past what one
  tensor holds: one line naming the file and the field, before any weight is made."""
  path = tmp_path / "xlnet_config.json"
  path.write_text(json.dumps({**ORIGINAL_BASE, field: value}))
  with pytest.raises(UserInputError) as raised:
    XLNetConfig.from_json_file(str(path))
  assert str(raised.value).startswith(f"{path}: {message}"), str(raised.value)


def test_a_huggingface_config_of_zero_heads_names_the_field():
  values = {"vocab_size": 100, "n_layer": 2, "d_model": 32, "n_head": 0, "d_inner": 64}
  with pytest.raises(UserInputError, match=r"^config.json: XLNetConfig.n_head must be a "
                     r"positive integer up to 2\^31 - 1; got 0$"):
    config_from_huggingface(values)


@pytest.mark.parametrize("values,field,says", [
    (dict(pos_encoding="rotary"), "pos_encoding", "one of ('relative', 'shaw'"),
    (dict(pos_encoding="shaw", clamp_len=4), "pos_encoding", "attn_type is 'uni'"),
    (dict(pos_encoding="absolute_sinusoid", attn_type="uni", bi_data=True), "pos_encoding",
     "without bi_data"),
    (dict(pos_encoding="shaw", attn_type="uni"), "clamp_len", "the largest distance"),
    (dict(pos_encoding="absolute_learned", attn_type="uni", clamp_len=0), "clamp_len",
     "position its learned table holds")])
def test_ablation_encodings_need_a_left_to_right_model(values, field, says):
  with pytest.raises(UserInputError) as raised:
    XLNetConfig(**values)
  assert str(raised.value).startswith(f"XLNetConfig.{field} must be") and says in str(raised.value)


def test_bad_files_name_the_file_and_key(tmp_path):
  path = tmp_path / "bad.json"
  path.write_text(json.dumps({**ORIGINAL_BASE, "n_laye": 3}))
  with pytest.raises(ValueError, match=r"bad.json.*n_laye"):
    XLNetConfig.from_json_file(str(path))
  path.write_text("{not json")
  with pytest.raises(ValueError, match="bad.json: not valid JSON"):
    XLNetConfig.from_json_file(str(path))


def test_presets():
  assert XLNetConfig.preset("large").n_layer == 24 and XLNetConfig.preset("large").d_model == 1024
  assert XLNetConfig.preset("tiny").d_model == 32
  with pytest.raises(ValueError, match="preset"):
    XLNetConfig.preset("huge")


@pytest.mark.parametrize("missing", [("d_model",), ("n_layer", "untie_r"), ARCHITECTURE_KEYS])
def test_config_file_without_an_architecture_key_names_the_file_and_keys(tmp_path, missing):
  path = tmp_path / "xlnet_config.json"
  path.write_text(json.dumps({key: value for key, value in ORIGINAL_BASE.items()
                              if key not in missing}))
  expected = [key for key in ARCHITECTURE_KEYS if key in missing]
  with pytest.raises(UserInputError) as raised:
    XLNetConfig.from_json_file(str(path), mem_len=384)
  assert str(raised.value).startswith(
      f"{path}: missing the XLNet config key(s) {expected}; a config must name every "
      "architecture key (n_layer d_model n_head d_head d_inner ff_activation untie_r n_token)")
  with pytest.raises(UserInputError, match=r"^model.get_config\(\): missing .*'d_model'"):
    XLNetConfig.from_dict({"n_token": 50}, source="model.get_config()")


def test_run_time_keys_default_and_sizes_come_from_a_preset_only_when_named(tmp_path):
  path = tmp_path / "xlnet_config.json"
  path.write_text(json.dumps(ORIGINAL_BASE))
  assert XLNetConfig.from_json_file(str(path)).dropout == XLNetConfig().dropout
  # An override names the key as the file would.
  partial = {key: value for key, value in ORIGINAL_BASE.items() if key != "n_token"}
  assert XLNetConfig.from_dict(partial, n_token=7).n_token == 7
  XLNetConfig.preset("tiny").to_json_file(str(path))
  assert XLNetConfig.from_json_file(str(path)) == XLNetConfig.preset("tiny")


def test_for_finetuning_drops_memory_and_bi_data_and_keeps_the_rest():
  pretraining = XLNetConfig.preset("tiny", mem_len=16, reuse_len=8, bi_data=True, dropout=0.0,
                                   attn_type="uni", clamp_len=12)
  finetuning = pretraining.for_finetuning(dropout=0.1)
  assert (finetuning.mem_len, finetuning.reuse_len, finetuning.bi_data) == (0, 0, False)
  assert finetuning.dropout == 0.1
  assert finetuning.to_dict() == dict(pretraining.to_dict(), mem_len=0, reuse_len=0,
                                      bi_data=False, dropout=0.1)
  assert pretraining.mem_len == 16, "a copy: the original is unchanged"
  with pytest.raises(UserInputError, match="dropout"):
    pretraining.for_finetuning(dropout=1.5)


def test_numpy_integers_are_stored_as_python_ints(tmp_path):
  config = XLNetConfig(n_token=np.int64(50), n_layer=np.int32(2), d_model=32, n_head=4,
                       d_head=8, d_inner=48, mem_len=np.int64(3))
  assert type(config.n_token) is int and type(config.mem_len) is int
  path = str(tmp_path / "config.json")
  config.to_json_file(path)
  assert '"n_token": 50,' in open(path).read()
  assert XLNetConfig.from_json_file(path) == config
