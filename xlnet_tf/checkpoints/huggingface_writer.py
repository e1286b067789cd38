"""Writes a model or head as a Hugging Face PyTorch XLNet directory: `config.json` +
`model.safetensors`, under the names transformers loads without missing or unexpected weights,
and, when the model carries its tokenizer, the files transformers' XLNetTokenizer and
AutoTokenizer load (spiece.model, tokenizer_config.json, special_tokens_map.json).

    ours                      transformers
    XLNetModel                XLNetModel
    XLNetPretrainer           XLNetLMHeadModel (lm_loss.weight tied to the word embedding)
    XLNetClassifier           XLNetForSequenceClassification (num_classes 1: regression)
    XLNetMultipleChoice       XLNetForMultipleChoice
    XLNetTokenClassifier      XLNetForTokenClassification
    XLNetQuestionAnswering    XLNetForQuestionAnswering (start/end logits, answer class)

The names are the reader's read backwards (huggingface.py's backbone table and each head's
`huggingface_head_names()`), so the two directions cannot drift apart.

transformers tokenizes as xlnet_tf does (`A <sep> B <sep> <cls>`, the same ids and segment
ids), except where transformers 5's XLNetTokenizer (tokenizers-based) departs from the original
preprocessing: it does not re-split pieces ending in a digit and a comma ("2000," stays one
piece), it strips accents even with keep_accents, and it reads `<sep>`, `<cls>`, ... written in
the text as those symbols.
"""

import os
from typing import Dict, Optional, Sequence

import numpy as np

from xlnet_tf import numerics
from xlnet_tf.checkpoints.huggingface import STACKED_PER_LAYER, huggingface_weight_name
from xlnet_tf.checkpoints.naming import BACKBONE_SCOPE, backbone_of, original_variable_map
from xlnet_tf.checkpoints.own import check_replaceable
from xlnet_tf.checkpoints.safetensors_io import write_safetensors
from xlnet_tf.text.tokenizer import TOKENIZER_CONFIG_FILE, XLNetTokenizer
from xlnet_tf.utils.errors import UserInputError, require
from xlnet_tf.utils.json_files import write_json
from xlnet_tf.utils.whole_directories import staged_directory

HUGGINGFACE_CONFIG_FILE = "config.json"
HUGGINGFACE_WEIGHTS_FILE = "model.safetensors"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
# transformers' XLNetTokenizer arguments: the special token of each of our SpecialIds fields.
_SPECIAL_TOKEN_ARGUMENTS = {"bos_token": "bos", "eos_token": "eos", "unk_token": "unk",
                            "sep_token": "sep", "pad_token": "pad", "cls_token": "cls",
                            "mask_token": "mask"}
_ADDITIONAL_SPECIAL_IDS = ("eop", "eod")  # in transformers' default order
# The transformers class of each of ours, by class name (checkpoints sit below the heads).
HUGGINGFACE_ARCHITECTURES = {
    "XLNetModel": "XLNetModel",
    "XLNetPretrainer": "XLNetLMHeadModel",
    "XLNetClassifier": "XLNetForSequenceClassification",
    "XLNetMultipleChoice": "XLNetForMultipleChoice",
    "XLNetTokenClassifier": "XLNetForTokenClassification",
    "XLNetQuestionAnswering": "XLNetForQuestionAnswering",
}
# Ours -> transformers': its "gelu" is the erf form, "gelu_new" the original's tanh form.
_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu"}
_FLAG = "the model for --output_format=huggingface"


def huggingface_architecture(model_or_head) -> str:
  """The transformers class that holds `model_or_head`; UserInputError naming the head (and the
  output format) when transformers has none."""
  name = type(model_or_head).__name__
  supported = ", ".join(HUGGINGFACE_ARCHITECTURES)
  require(name in HUGGINGFACE_ARCHITECTURES, _FLAG,
          f"one transformers has a class for ({supported})", name)
  require(getattr(model_or_head, "summary_type", "last") != "attn", _FLAG,
          "pooled by last, first or mean (transformers' XLNetSequenceSummary has no 'attn')",
          f"{name} with summary_type='attn'")
  require(not getattr(model_or_head, "next_sentence", False), _FLAG,
          "without a next-sentence classifier (XLNetLMHeadModel has none)",
          f"{name} with next_sentence=True")
  config = backbone_of(model_or_head).config
  require(config.d_head * config.n_head == config.d_model, _FLAG,
          "a model with d_head * n_head == d_model (transformers derives d_head from them)",
          f"d_head {config.d_head}, n_head {config.n_head}, d_model {config.d_model}")
  return HUGGINGFACE_ARCHITECTURES[name]


def huggingface_tensors(model_or_head) -> Dict[str, np.ndarray]:
  """{transformers parameter name: array} of every weight: torch Linear weights [out, in], the
  attention biases and segment embeddings split per layer (a tied copy repeated)."""
  config = backbone_of(model_or_head).config
  head_names = getattr(model_or_head, "huggingface_head_names", dict)()
  by_original = {original: (name, transpose) for name, (original, transpose) in head_names.items()}
  tensors, unnamed = {}, []
  for original, variable in original_variable_map(model_or_head).items():
    value = np.asarray(variable.numpy(), np.float32)
    inner = original[len(BACKBONE_SCOPE):]
    if original.startswith(BACKBONE_SCOPE) and inner in STACKED_PER_LAYER:
      for layer in range(config.n_layer):
        stacked = inner == "seg_embed" or config.untie_r
        tensors[f"transformer.layer.{layer}.rel_attn.{inner}"] = value[layer] if stacked else value
      continue
    named = by_original.get(original) or huggingface_weight_name(original)
    if named is None:
      unnamed.append(original)
      continue
    name, transpose = named
    tensors[name] = value.T if transpose else value
  if unnamed:
    raise UserInputError(f"{_FLAG}: no Hugging Face name for {', '.join(sorted(unnamed))} of "
                         f"{type(model_or_head).__name__}")
  return tensors


def huggingface_config(model_or_head, labels: Optional[Sequence[str]] = None) -> Dict:
  """config.json's fields: transformers' XLNetConfig keys, plus the head's (summary_*,
  num_labels / id2label from `labels`, start_n_top / end_n_top)."""
  config = backbone_of(model_or_head).config
  values = {
      "architectures": [huggingface_architecture(model_or_head)], "model_type": "xlnet",
      "vocab_size": config.n_token, "d_model": config.d_model, "n_layer": config.n_layer,
      "n_head": config.n_head, "d_head": config.d_head, "d_inner": config.d_inner,
      "ff_activation": _ACTIVATIONS[config.ff_activation], "untie_r": config.untie_r,
      # bi_data and reuse_len lay out pretraining batches (bi_data: the second half of the
      # batch read backwards): a pretrained model is used without them, as for_finetuning().
      "attn_type": config.attn_type, "mem_len": config.mem_len or None,
      "reuse_len": None, "bi_data": False,
      "clamp_len": config.clamp_len, "same_length": config.same_length,
      "dropout": config.dropout, "initializer_range": config.init_std,
      "layer_norm_eps": numerics.LAYER_NORM_EPSILON, "tie_word_embeddings": True,
      "dtype": "float32"}
  values.update(_head_fields(model_or_head, labels))
  return values


def _head_fields(head, labels) -> Dict:
  fields = {}
  if hasattr(head, "summary_type"):
    # The summary projects to d_model (summary_proj_to_labels off): logits_proj follows it.
    fields.update(summary_type=head.summary_type, summary_use_proj=True,
                  summary_activation="tanh", summary_proj_to_labels=False,
                  summary_last_dropout=backbone_of(head).config.dropout)
  if hasattr(head, "start_n_top"):
    fields.update(start_n_top=head.start_n_top, end_n_top=head.end_n_top)
  count = getattr(head, "num_classes", None) or getattr(head, "num_labels", None)
  if count is not None:
    fields["num_labels"] = count
    if count == 1 and type(head).__name__ == "XLNetClassifier":
      fields["problem_type"] = "regression"
    elif getattr(head, "multi_label", False):  # sigmoid per label (BCE) in transformers too
      fields["problem_type"] = "multi_label_classification"
    names = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(count)]
    fields["id2label"] = {str(i): label for i, label in enumerate(names)}
    fields["label2id"] = {label: i for i, label in enumerate(names)}
  return fields


def carried_tokenizer(model_or_head) -> Optional[XLNetTokenizer]:
  """The tokenizer a model carries, as save_pretrained writes it: its preprocessor's, else its
  own `.tokenizer`, else its backbone's; None without one."""
  preprocessor = getattr(model_or_head, "preprocessor", None)
  if preprocessor is not None:
    return preprocessor.tokenizer
  return (getattr(model_or_head, "tokenizer", None)
          or getattr(backbone_of(model_or_head), "tokenizer", None))


def huggingface_tokenizer_config(tokenizer: XLNetTokenizer) -> Dict:
  """tokenizer_config.json's fields for transformers' XLNetTokenizer: the text settings and
  the special tokens the SentencePiece model holds (None for one it lacks), left padding, and
  token_type_ids among the model inputs (transformers 5's XLNetTokenizer returns none by
  default, and its XLNet then computes without segments, unlike the original and xlnet_tf)."""
  special = {name: None if getattr(tokenizer.special_ids, field) < 0 else
             tokenizer.processor.IdToPiece(getattr(tokenizer.special_ids, field))
             for name, field in _SPECIAL_TOKEN_ARGUMENTS.items()}
  additional = [tokenizer.processor.IdToPiece(getattr(tokenizer.special_ids, field))
                for field in _ADDITIONAL_SPECIAL_IDS if getattr(tokenizer.special_ids, field) >= 0]
  return {"tokenizer_class": "XLNetTokenizer", "do_lower_case": tokenizer.lower,
          "remove_space": True, "keep_accents": tokenizer.keep_accents, **special,
          "additional_special_tokens": additional, "padding_side": "left",
          "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}


def save_huggingface_tokenizer(tokenizer: XLNetTokenizer, directory: str) -> str:
  """Writes spiece.model, tokenizer_config.json (huggingface_tokenizer_config) and
  special_tokens_map.json into `directory`, the files transformers' XLNetTokenizer (4 and 5)
  and AutoTokenizer load; xlnet_tf's readers take do_lower_case and keep_accents from the
  same tokenizer_config.json. Returns `directory`."""
  tokenizer.save_pretrained(directory)  # spiece.model; its tokenizer_config.json replaced here
  values = huggingface_tokenizer_config(tokenizer)
  write_json(os.path.join(directory, TOKENIZER_CONFIG_FILE), values)
  special = {name: values[name] for name in _SPECIAL_TOKEN_ARGUMENTS if values[name]}
  write_json(os.path.join(directory, SPECIAL_TOKENS_MAP_FILE),
             {**special, "additional_special_tokens": values["additional_special_tokens"]})
  return directory


def save_huggingface_checkpoint(model_or_head, directory: str,
                                labels: Optional[Sequence[str]] = None,
                                tokenizer: Optional[XLNetTokenizer] = None) -> str:
  """Writes `directory/config.json` and `directory/model.safetensors` (float32) for
  transformers' `from_pretrained(directory)`; `labels` (a classifier's or tagger's classes in
  order) become id2label; `tokenizer` (default: the one the model carries, carried_tokenizer)
  is written as save_huggingface_tokenizer writes it. Checks everything before writing a file;
  the directory appears whole or not at all, as save_pretrained's (over a model directory:
  swapped in whole). Returns `directory`."""
  tokenizer = tokenizer or carried_tokenizer(model_or_head)
  values = huggingface_config(model_or_head, labels)
  count = values.get("num_labels")
  if labels is not None and count is not None:
    require(len(labels) == count, "labels", f"one per output class ({count})", len(labels))
  tensors = huggingface_tensors(model_or_head)
  check_replaceable(directory)
  with staged_directory(directory, last=HUGGINGFACE_CONFIG_FILE) as staging:  # whole or absent
    write_json(os.path.join(staging, HUGGINGFACE_CONFIG_FILE), values)
    write_safetensors(os.path.join(staging, HUGGINGFACE_WEIGHTS_FILE), tensors,
                      {"format": "pt"})
    if tokenizer is not None:
      save_huggingface_tokenizer(tokenizer, staging)
  return directory
