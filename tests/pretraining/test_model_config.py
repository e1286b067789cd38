"""config_for_data: the backbone config for a set of pretraining records."""

import pytest

from xlnet_tf import XLNetConfig
from xlnet_tf.pretraining.data.settings import PretrainingDataConfig
from xlnet_tf.pretraining.model_config import config_for_data


def test_the_data_set_memory_reuse_bi_data_and_attention():
  settings = PretrainingDataConfig(seq_len=32, reuse_len=16, bi_data=True).to_dict()
  config = config_for_data(settings, 500, model_size="tiny")
  assert (config.n_token, config.n_layer, config.d_model) == (500, 2, 32)
  assert (config.mem_len, config.reuse_len, config.bi_data, config.attn_type) == (16, 16, True,
                                                                                   "bi")
  assert config.dropout == 0.1, "dropout 0 is the demo size's only"
  assert config_for_data(settings, 500, model_size="tiny", mem_len=0).mem_len == 0
  clm = PretrainingDataConfig(seq_len=16, reuse_len=0, bi_data=False, objective="clm").to_dict()
  assert config_for_data(clm, 500, model_size="tiny", mem_len=64).attn_type == "uni"


def test_demo_has_no_dropout_and_overrides_come_last():
  settings = PretrainingDataConfig().to_dict()
  demo = config_for_data(settings, 800, model_size="demo")
  assert (demo.d_model, demo.dropout, demo.dropatt) == (128, 0.0, 0.0)
  custom = config_for_data(settings, 800, n_layer=3, d_model=16, n_head=2, d_head=8,
                           d_inner=32, dropout=0.2)
  assert (custom.n_layer, custom.d_model, custom.dropout, custom.n_token) == (3, 16, 0.2, 800)


def test_a_config_file_gives_the_architecture(tmp_path):
  path = str(tmp_path / "xlnet_config.json")
  XLNetConfig.preset("tiny", n_token=321).to_json_file(path, original_keys_only=True)
  settings = PretrainingDataConfig(seq_len=32, reuse_len=16, bi_data=False).to_dict()
  config = config_for_data(settings, 999, model_config_file=path)
  assert (config.n_token, config.mem_len, config.bi_data) == (321, 16, False)
  with pytest.raises(ValueError, match="missing the XLNet config key"):
    (tmp_path / "partial.json").write_text('{"n_layer": 2}')
    config_for_data(settings, 999, model_config_file=str(tmp_path / "partial.json"))
