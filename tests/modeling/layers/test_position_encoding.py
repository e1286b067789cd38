import numpy as np
import pytest

from layer_checks import assert_config_round_trip
from xlnet_tf.modeling.layers.position_encoding import (RelativePositionEncoding,
                                                        relative_distances,
                                                        relative_position_encoding)


def test_distances_bi_and_uni():
  np.testing.assert_array_equal(relative_distances(3, 5, "bi").numpy(), [5, 4, 3, 2, 1, 0, -1, -2])
  np.testing.assert_array_equal(relative_distances(3, 5, "uni").numpy(), [5, 4, 3, 2, 1, 0])
  with pytest.raises(ValueError, match="attn_type"):
    relative_distances(3, 5, "both")


def test_sinusoid_values_clamp_and_bi_data_halves():
  d_model = 6
  encoding = relative_position_encoding(2, 4, 4, d_model, "bi", bi_data=True, clamp_len=2).numpy()
  assert encoding.shape == (4, 6, d_model)
  inv_freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)
  for row, distance in enumerate([4, 3, 2, 1, 0, -1]):
    clamped = np.clip(distance, -2, 2)
    forward = np.concatenate([np.sin(clamped * inv_freq), np.cos(clamped * inv_freq)])
    backward = np.concatenate([np.sin(-clamped * inv_freq), np.cos(-clamped * inv_freq)])
    np.testing.assert_allclose(encoding[0, row], forward, atol=1e-6)
    np.testing.assert_allclose(encoding[1, row], forward, atol=1e-6)
    np.testing.assert_allclose(encoding[2, row], backward, atol=1e-6)
    np.testing.assert_allclose(encoding[3, row], backward, atol=1e-6)


def test_layer_config_round_trip():
  layer = RelativePositionEncoding(8, attn_type="uni", bi_data=False, clamp_len=3)
  sizes = dict(query_length=3, key_length=5, batch_size=2)
  clone = assert_config_round_trip(layer, lambda a: a(**sizes), atol=0)
  assert clone.get_config()["clamp_len"] == 3
