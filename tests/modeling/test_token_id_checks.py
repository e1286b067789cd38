"""The one token-id check (xlnet_tf.modeling.inputs), shared by the backbone's call and by
decoding's arguments: the first id outside the vocabulary named, the array's type and shape."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.modeling.inputs import check_token_id, check_token_ids, checked_token_ids
from xlnet_tf.utils.errors import UserInputError


def test_the_first_id_outside_the_vocabulary_is_named():
  check_token_ids(np.array([[0, 9]]), 10, "fill: input_ids")
  with pytest.raises(UserInputError, match=r"^fill: input_ids must be token ids in "
                     r"\[0, n_token=10\); got input_ids\[1, 0\] = 10, outside \[0, 10\)$"):
    check_token_ids(np.array([[0, 9], [10, -1]]), 10, "fill: input_ids")


@pytest.mark.parametrize("input_ids", [[[1, 2]], np.array([[1, 2]], np.int64),
                                       tf.constant([[1, 2]])])
def test_arrays_lists_and_tensors_become_int32(input_ids):
  ids = checked_token_ids(input_ids, 5, "generate: input_ids")
  assert ids.dtype == np.int32 and ids.tolist() == [[1, 2]]


@pytest.mark.parametrize("input_ids,message", [
    ([[1.0, 2.0]], "an integer array"), ([1, 2], r"of shape \[B, T\]"),
    (np.zeros([1, 0], np.int32), r"of shape \[B, T\]"), ([[1, 5]], r"input_ids\[0, 1\] = 5")])
def test_bad_arrays_name_the_argument(input_ids, message):
  with pytest.raises(UserInputError, match="generate: input_ids must be .*" + message):
    checked_token_ids(input_ids, 5, "generate: input_ids")


@pytest.mark.parametrize("token_id", [0, 4, np.int64(3)])
def test_one_token_id_in_the_vocabulary_passes(token_id):
  check_token_id(token_id, 5, "fill: mask_id")


@pytest.mark.parametrize("token_id", [5, -1, 2.0, True, None])
def test_one_token_id_outside_or_not_an_integer_is_refused(token_id):
  with pytest.raises(UserInputError, match=r"fill: mask_id must be a token id in \[0, "):
    check_token_id(token_id, 5, "fill: mask_id")
