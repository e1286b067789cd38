"""Transformer-XL's Table 7 timing (studies/evaluation_speed.py) on a tiny left-to-right LM."""

from xlnet_tf import XLNetConfig, XLNetModel
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.studies.evaluation_speed import evaluation_speed


def test_speed_rows_time_both_evaluations():
  config = XLNetConfig.preset("tiny", attn_type="uni", dropout=0.0, dropatt=0.0)
  rows = evaluation_speed(XLNetPretrainer(XLNetModel(config), objective="clm"), [24, 48],
                          tgt_len=8, timed_segments=1, timed_windows=2)
  assert [row.attention_length for row in rows] == [24, 48]
  assert all(row.memory_seconds_per_token > 0 and row.vanilla_seconds_per_token > 0
             for row in rows)
  assert all(row.speedup == row.vanilla_seconds_per_token / row.memory_seconds_per_token
             for row in rows)
