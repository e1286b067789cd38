import numpy as np
import pytest
import tensorflow as tf

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_reference import randomize_weights
from xlnet_tf import checkpoints
from xlnet_tf.heads import XLNetPretrainer
from xlnet_tf.heads.pretrainer import masked_lm_loss


def test_logits_are_tied_to_the_embedding_plus_bias(rng):
  model = XLNetPretrainer(tiny_config())
  randomize_weights(model.backbone, 0)
  model.lm_bias.assign(rng.standard_normal(50).astype(np.float32))
  inputs = padded_pair_batch(rng, 2, 8, 50, pad_lengths=[0, 2])
  perm_mask, targets, _ = factorization_perm_mask(rng, 2, 8, 3)
  inputs.update(perm_mask=perm_mask, target_mapping=target_mapping_for(targets, 8, 1))
  logits = model(inputs)["logits"].numpy()
  query = model.backbone(inputs)["query_output"].numpy()
  expected = query @ model.backbone.word_embedding.numpy().T + model.lm_bias.numpy()
  np.testing.assert_allclose(logits, expected, atol=1e-5)
  with pytest.raises(ValueError, match="target_mapping"):
    model({k: v for k, v in inputs.items() if k != "target_mapping"})


def test_masked_loss_ignores_padded_slots():
  logits = tf.constant(np.log([[[0.5, 0.5], [0.9, 0.1]]]), tf.float32)
  loss = masked_lm_loss(logits, [[0, 1]], [[1.0, 0.0]])
  np.testing.assert_allclose(float(loss), np.log(2.0), rtol=1e-6)


def test_loads_the_original_lm_bias(tmp_path):
  from checkpoint_files import original_weights, write_tf1_checkpoint
  config = tiny_config()
  weights = original_weights(config)
  bias = np.arange(50, dtype=np.float32)
  prefix = write_tf1_checkpoint({**weights, "model/lm_loss/bias": bias}, str(tmp_path / "c"))
  model = XLNetPretrainer(config)
  report = checkpoints.load_original_checkpoint(model, prefix)
  assert "model/lm_loss/bias" in report.loaded
  np.testing.assert_array_equal(model.lm_bias.numpy(), bias)
  with pytest.raises(checkpoints.CheckpointMismatchError, match="missing: model/lm_loss/bias"):
    checkpoints.load_original_checkpoint(XLNetPretrainer(config),
                                         write_tf1_checkpoint(weights, str(tmp_path / "d")))
