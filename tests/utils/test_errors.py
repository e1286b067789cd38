"""The library's integer check (xlnet_tf.utils.errors.is_int), shared by the config and by
decoding's settings."""

import numpy as np
import pytest

from xlnet_tf.utils.errors import is_int


@pytest.mark.parametrize("value", [0, -3, 2 ** 40, np.int32(7), np.int64(-1), np.uint8(4)])
def test_python_and_numpy_integers_are_integers(value):
  assert is_int(value)


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 1.0, np.float32(2), "3", None,
                                   [1], np.array([1])])
def test_bools_floats_and_other_values_are_not(value):
  assert not is_int(value)
