"""Parity with Hugging Face's PyTorch XLNet, when torch and transformers are importable.

Never required: CI installs neither, and the test is skipped there.
"""

import numpy as np
import pytest

from model_inputs import factorization_perm_mask, padded_pair_batch, target_mapping_for, tiny_config
from xlnet_tf import XLNetModel, checkpoints

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_matches_huggingface_pytorch_xlnet(tmp_path, rng):
  config = tiny_config()
  hf_config = transformers.XLNetConfig(
      vocab_size=config.n_token, d_model=config.d_model, n_layer=config.n_layer,
      n_head=config.n_head, d_inner=config.d_inner, ff_activation="gelu_new",  # tanh gelu
      untie_r=True, attn_type="bi", dropout=0.0, initializer_range=0.3)
  torch.manual_seed(0)
  hf_model = transformers.XLNetLMHeadModel(hf_config).eval()
  with torch.no_grad():  # HF initialises the biases to zero: give every term a value
    for name, parameter in hf_model.named_parameters():
      if "bias" in name or "seg_embed" in name or "mask_emb" in name:
        parameter.normal_(0.0, 0.3)
  hf_model.save_pretrained(str(tmp_path), safe_serialization=True)
  model = XLNetModel(config)
  checkpoints.load_huggingface_checkpoint(model, str(tmp_path))

  inputs = padded_pair_batch(rng, 3, 8, config.n_token, pad_lengths=[0, 2, 1])
  perm_mask, targets, _ = factorization_perm_mask(rng, 3, 8, num_targets=3)
  tm = target_mapping_for(targets, 8)
  with torch.no_grad():
    hf_inputs = dict(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["input_mask"]))
    content = hf_model.transformer(**hf_inputs).last_hidden_state.numpy()
    query = hf_model.transformer(**hf_inputs, perm_mask=torch.tensor(perm_mask),
                                 target_mapping=torch.tensor(tm)).last_hidden_state.numpy()
  ours = model(dict(inputs, perm_mask=perm_mask, target_mapping=tm))
  np.testing.assert_allclose(model(inputs)["sequence_output"].numpy(), content, atol=1e-4)
  np.testing.assert_allclose(ours["query_output"].numpy(), query, atol=1e-4)
