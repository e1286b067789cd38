"""labels.json, the label order saved with a model (checkpoints.labels)."""

import json

import pytest

from xlnet_tf.checkpoints.labels import LABELS_FILE, save_labels, saved_labels
from xlnet_tf.utils.errors import UserInputError


def test_labels_round_trip_and_absence_is_none(tmp_path):
  path = save_labels(str(tmp_path / "best"), ("neg", "neutral", "pos"))
  assert path == str(tmp_path / "best" / LABELS_FILE)
  assert json.load(open(path)) == ["neg", "neutral", "pos"]
  assert saved_labels(str(tmp_path / "best")) == ["neg", "neutral", "pos"]
  assert saved_labels(str(tmp_path / "nothing")) is None


@pytest.mark.parametrize("content", ['{"0": "neg"}', '["neg", 1]'])
def test_labels_that_are_not_a_list_of_strings_are_refused(tmp_path, content):
  (tmp_path / LABELS_FILE).write_text(content)
  with pytest.raises(UserInputError, match=rf"^{tmp_path}/labels.json: expected a JSON list of "
                     "label strings"):
    saved_labels(str(tmp_path))
