"""XLNetModel: the XLNet backbone (Transformer-XL with two-stream attention) as a Keras model.

Shapes: B batch, T sequence length, P predictions, M memory length, D d_model, L layers,
N heads, H head size.
"""

import contextlib
from typing import Any, Dict, Optional

import keras
import tensorflow as tf

# BACKBONE_INPUTS and backbone_inputs stay importable from here (the public API).
from xlnet_tf.modeling.inputs import (BACKBONE_INPUTS, backbone_inputs, checked_backbone_inputs)  # noqa: F401
from xlnet_tf.checkpoints import own, pretrained
from xlnet_tf.config import XLNetConfig
from xlnet_tf.modeling import freezing
from xlnet_tf.modeling.int8_inference import Int8InferenceTraces
from xlnet_tf.modeling.one_batch_predict import OneBatchPredict
from xlnet_tf.modeling.layers import masks as mask_lib
from xlnet_tf.modeling.layers import position_ablations, quantization
from xlnet_tf.modeling.layers.dropout import FastDropout
from xlnet_tf.modeling.layers.position_encoding import RelativePositionEncoding
from xlnet_tf.modeling.layers.two_stream_block import TwoStreamBlock
from xlnet_tf.modeling.memory import next_memory
from xlnet_tf.modeling.ops import int8_packing
from xlnet_tf.modeling.ops import random as random_ops
from xlnet_tf.modeling.ops.shapes import static_or_dynamic_dim


@keras.saving.register_keras_serializable(package="xlnet_tf")
class XLNetModel(Int8InferenceTraces, OneBatchPredict, keras.Model):
  """The XLNet backbone, numerically the original `transformer_xl` of zihangdai/xlnet.

  Call with a dict (batch-major):
    input_ids      int [B, T]
    segment_ids    int [B, T], optional. Without it there is no segment term, which equals
                   all-zero segments: a term constant along each attention row cancels in the
                   softmax.
    input_mask     [B, T], 1 = real token, 0 = padding; optional. Also taken under Hugging
                   Face's name attention_mask or keras-hub's padding_mask, with the same
                   polarity (1 = real token); one of the three at most.
    perm_mask      [B, T, T], 1 = position i may not attend position j; optional.
    target_mapping [B, P, T] one-hot rows (zero rows = padded slots); optional, enables the
                   query stream, whose input is `mask_emb` at each prediction.
    mems           list of L tensors [B, M, D]; optional.
    memory_mask    [B, M], 1 = a real memory slot, 0 = padding; optional (default: all of the
                   memory is visible). For memory holding left-padded rows, such as the
                   cache of xlnet_tf.inference.generation.

  Returns a dict: sequence_output [B, T, D] (content stream, last layer); query_output
  [B, P, D] with target_mapping; new_mems (list of L [B, M', D]) when config.mem_len > 0;
  attention (list of L [B, N, T, K], the content stream's probabilities) when called with
  return_attention=True; keys_values when called with memory_keys_values (below).
  Each layer's memory is that layer's input: the first reuse_len tokens (all if 0) appended
  to the old memory, the last mem_len kept, gradient stopped (modeling.memory, whose
  RecurrenceMemory makes and keeps it between calls).

  For decoding one token at a time (xlnet_tf.inference.generation), call keywords cache projections:
    memory_keys_values  list of L (keys, values), each [B, N, M, H]: the memory as each
                        layer's attention projects it (a key/value cache), instead of the
                        input 'mems' (a step then skips re-projecting the whole memory). The
                        outputs add keys_values, the same for this call's T tokens (to append).
    position_keys       list of L [1, N, R, H] from `layer_position_keys(T, M + T)`: calls
                        with equal lengths share them.

  Args:
    config: the XLNetConfig, or a dict of its fields (XLNetConfig.from_dict: every
      architecture key named).
    recompute_blocks: in training, keep only each block's inputs and recompute the rest during
      the backward pass (less memory for long sequences, about a third more compute). Each
      block's dropout seeds derive from one seed per block and step, so the recomputed pass
      draws the forward's masks (with or without recompute_blocks alike).
    fused: True computes with the compiled kernels of xlnet_tf.modeling.ops; False with
      ordinary TensorFlow ops, the attention score as one function that reads like the paper
      (layers.attention.relative_attention_probabilities). Same weights and results; slower.
    frozen_layers: None trains every weight; else `freeze_layers(frozen_layers)` is applied.
    **kwargs: Keras Model arguments (name, default "transformer", the original's scope; dtype).

  Raises:
    UserInputError: for an invalid config (a dict missing an architecture key) or
      frozen_layers outside 0..n_layer.

  >>> import numpy as np
  >>> from xlnet_tf import XLNetConfig, XLNetModel
  >>> model = XLNetModel(XLNetConfig.preset("tiny", mem_len=4))  # 2 layers, d_model 32
  >>> target_mapping = np.zeros([2, 1, 5], np.float32); target_mapping[:, 0, 2] = 1
  >>> outputs = model({"input_ids": np.array([[5, 17, 42, 8, 3], [0, 0, 12, 9, 3]]),
  ...                  "input_mask": np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]),
  ...                  "target_mapping": target_mapping})  # predict position 2
  >>> {key: tuple(value.shape) for key, value in outputs.items() if key != "new_mems"}
  {'sequence_output': (2, 5, 32), 'query_output': (2, 1, 32)}
  >>> [tuple(memory.shape) for memory in outputs["new_mems"]]  # each layer's, mem_len kept
  [(2, 4, 32), (2, 4, 32)]
  """

  def __init__(self, config, recompute_blocks: bool = False, fused: bool = True,
               frozen_layers: Optional[int] = None, **kwargs):
    if isinstance(config, dict):
      config = XLNetConfig.from_dict(config)
    kwargs.setdefault("name", "transformer")
    super().__init__(**kwargs)
    self.config = config
    self.recompute_blocks = recompute_blocks
    self.fused = fused
    self.position_encoding = RelativePositionEncoding(
        config.d_model, config.attn_type, config.bi_data, config.clamp_len,
        name="position_encoding")
    self.blocks = [
        TwoStreamBlock(config.n_head, config.d_head, config.d_inner, config.ff_activation,
                       dropout=config.dropout, dropatt=config.dropatt,
                       init_std=config.init_std, fused=fused, name=f"layer_{index}")
        for index in range(config.n_layer)]
    self.embedding_dropout = FastDropout(config.dropout)
    self.position_dropout = FastDropout(config.dropout)
    self.output_dropout = FastDropout(config.dropout)
    self.block_seed_generator = keras.random.SeedGenerator(name="block_seed_generator")
    self.frozen_layers = None
    # The XLNetTokenizer of the pretrained directory the model came from (from_pretrained),
    # written beside its weights by save_pretrained; None when unknown.
    self.tokenizer = None
    self.build()
    if frozen_layers is not None:
      self.freeze_layers(frozen_layers)

  def freeze_layers(self, frozen_layers: Optional[int]) -> None:
    """Stops training the embedding and the first `frozen_layers` blocks.

    Frozen: the embedding (word_embedding, mask_emb) and blocks 0..frozen_layers-1, their rows
    of the stacked per-layer variables included. Call it before the optimizer is built;
    Model.fit, custom loops and XLNetAdamW (weight decay included) then leave them
    bit-identical (see xlnet_tf.modeling.freezing).

    Args:
      frozen_layers: 0 freezes the embedding only, n the embedding and the first n blocks;
        None trains everything again.

    Raises:
      UserInputError: for a count outside 0..n_layer.
    """
    freezing.freeze(self, frozen_layers)
    self.frozen_layers = frozen_layers

  def build(self, input_shape=None):
    """Creates every weight from the config alone, so a new model can load weights at once.

    The constructor calls it; later calls do nothing.

    Args:
      input_shape: ignored (Keras' argument): the shapes come from the config.
    """
    if self.built:
      return
    config = self.config
    # A new initializer per weight: one unseeded Keras initializer draws the same values at
    # every call (the three attention biases would start equal).
    normal = lambda: keras.initializers.RandomNormal(stddev=config.init_std)  # noqa: E731
    bias_shape = ((config.n_layer, config.n_head, config.d_head) if config.untie_r
                  else (config.n_head, config.d_head))
    # Read as float32 even under mixed precision: the lookup casts the gathered rows, not the
    # whole table (the LM head casts the table itself).
    self.word_embedding = self.add_weight(name="word_embedding",
                                          shape=(config.n_token, config.d_model),
                                          initializer=normal(), autocast=False)
    self.mask_emb = self.add_weight(name="mask_emb", shape=(1, 1, config.d_model),
                                    initializer=normal())
    self.r_w_bias = self.add_weight(name="r_w_bias", shape=bias_shape, initializer=normal())
    self.r_r_bias = self.add_weight(name="r_r_bias", shape=bias_shape, initializer=normal())
    self.r_s_bias = self.add_weight(name="r_s_bias", shape=bias_shape, initializer=normal())
    self.seg_embed = self.add_weight(
        name="seg_embed", shape=(config.n_layer, 2, config.n_head, config.d_head),
        initializer=normal())
    # Transformer-XL's ablation encodings (config.pos_encoding): their learned table, if any.
    self.position_table = position_ablations.add_table(self, config, normal())
    for block in self.blocks:
      block.build((None, None, config.d_model))
    self.built = True

  # ---- forward ---------------------------------------------------------------------------
  def call(self, inputs: Dict[str, Any], training=False, return_attention=False,
           memory_keys_values=None, position_keys=None):
    """Runs the two streams over a batch of inputs (the class docstring describes each).

    Args:
      inputs: a dict of BACKBONE_INPUTS: input_ids int [B, T], and optionally segment_ids,
        input_mask (or attention_mask / padding_mask), perm_mask, target_mapping, mems and
        memory_mask. Entries that are None are left out.
      training: apply dropout (and, with recompute_blocks, recompute the blocks' activations
        in the backward pass).
      return_attention: also return each layer's attention probabilities (content stream).
      memory_keys_values: for cached decoding, list of L (keys, values) [B, N, M, H]: the
        memory as each layer's attention projects it, instead of `mems`.
      position_keys: list of L [1, N, R, H] from `layer_position_keys(T, M + T)`; computed
        here when None.

    Returns:
      A dict: sequence_output [B, T, D] (content stream, last layer); query_output [B, P, D]
      with target_mapping; new_mems (list of L [B, M', D]) when config.mem_len > 0; attention
      (list of L [B, N, T, K]) with return_attention; keys_values (list of L (keys, values)
      [B, N, T, H], this call's tokens) with memory_keys_values.

    Raises:
      UserInputError: naming the input whose key, rank, dtype or shape is wrong, or (eager
        calls) a token id outside [0, n_token).
      TypeError: when `inputs` is not a dict.
    """
    config = self.config
    inputs = checked_backbone_inputs(config, inputs, memory_keys_values, position_keys)
    dtype = self.compute_dtype
    input_ids = tf.convert_to_tensor(inputs["input_ids"])
    mems = inputs.get("mems")

    # Known lengths as Python ints (ops.shapes): constants the graph optimizer folds.
    batch_size = tf.shape(input_ids)[0]
    length = static_or_dynamic_dim(input_ids, 1)
    memory_length = static_or_dynamic_dim(mems[0], 1) if mems else 0
    if memory_keys_values is not None:
      memory_length = static_or_dynamic_dim(memory_keys_values[0][0], 2)
    masks = _attention_masks(config, inputs, batch_size, length, memory_length, dtype)
    position_encoding = None
    if position_keys is None and config.pos_encoding != "relative":
      position_keys = self.layer_position_keys(length, memory_length + length)
    if position_keys is None:
      position_encoding = self.position_encoding(query_length=length,
                                                 key_length=memory_length + length,
                                                 batch_size=batch_size)
      # Cast once here, not in every layer (each layer's cast is then a no-op).
      position_encoding = tf.cast(self.position_dropout(position_encoding, training=training),
                                  dtype)
    content = tf.cast(tf.gather(self.word_embedding, input_ids), dtype)  # [B, T, D]
    if config.pos_encoding in position_ablations.ABSOLUTE:
      content = position_ablations.with_absolute_positions(config, content, length,
                                                           self.position_table)
    content = self.embedding_dropout(content, training=training)
    query = None
    if masks.query is not None:  # the query stream: mask_emb at each prediction
      predictions = tf.shape(masks.query.positions)[1]
      query = tf.tile(tf.cast(self.mask_emb, dtype), tf.stack([batch_size, predictions, 1]))
      query = self.embedding_dropout(query, training=training)  # [B, P, D]

    content, query, new_mems, attention_maps, new_keys_values = self._run_blocks(
        content, query, position_encoding, mems, masks, memory_keys_values, position_keys,
        training, return_attention)
    outputs = {"sequence_output": self.output_dropout(content, training=training)}
    if query is not None:
      outputs["query_output"] = self.output_dropout(query, training=training)
    if config.mem_len > 0:
      outputs["new_mems"] = new_mems
    if return_attention:
      outputs["attention"] = attention_maps
    if memory_keys_values is not None:
      outputs["keys_values"] = new_keys_values
    return outputs

  def _run_blocks(self, content, query, position_encoding, mems, masks, memory_keys_values,
                  position_keys, training, return_attention):
    """The L blocks in turn: (content, query, new_mems, attention maps, new keys_values)."""
    config = self.config
    new_mems, attention_maps, new_keys_values = [], [], []
    for index, block in enumerate(self.blocks):
      memory = mems[index] if mems else None
      keys_values, current = _layer_keys_values(block, index, content, memory_keys_values)
      layer_position_keys = None if position_keys is None else position_keys[index]
      if current is not None:
        new_keys_values.append(current)
      if config.mem_len > 0:
        new_mems.append(next_memory(content, memory, config.reuse_len, config.mem_len))
      biases = self.layer_biases(index, masks.with_segments)
      block_seed = None
      if training and (config.dropout or config.dropatt):
        block_seed = random_ops.next_seed(self.block_seed_generator)

      def run_block(content, query, biases, block=block, memory=memory, seed=block_seed,
                    keys_values=keys_values, layer_position_keys=layer_position_keys):
        seeds = (contextlib.nullcontext() if seed is None
                 else random_ops.seeds_derived_from(seed))
        with seeds:
          return block(content, position_encoding, masks=masks, memory=memory, query=query,
                       keys_values=keys_values, position_keys=layer_position_keys,
                       training=training, return_attention=return_attention, **biases)

      if self.recompute_blocks and training and not return_attention:
        content, query = _recomputed(run_block, content, query, biases)
      else:
        content, query, *attention = run_block(content, query, biases)
        attention_maps.extend(attention)
    return content, query, new_mems, attention_maps, new_keys_values

  def layer_biases(self, index: int, with_segments: bool) -> Dict[str, Any]:
    """Block `index`'s attention biases: its own slices with untie_r, else the shared ones.

    Args:
      index: the block, 0..n_layer-1 (a frozen block's slices take no gradient).
      with_segments: also the segment terms r_s_bias and seg_embed (calls with segment_ids).

    Returns:
      {"r_w_bias", "r_r_bias" [N, H], with_segments also "r_s_bias" [N, H] and "seg_embed"
      [2, N, H]}; r_w_bias and r_r_bias are zeros for the ablation position encodings.
    """
    # A frozen block's rows of the stacked variables take no gradient (layer_freezing).
    row = lambda variable: freezing.held_row(variable, index, self.frozen_layers)
    layer_bias = row if self.config.untie_r else (lambda bias: bias)
    biases = {"r_w_bias": layer_bias(self.r_w_bias), "r_r_bias": layer_bias(self.r_r_bias)}
    if self.config.pos_encoding != "relative":  # the ablations have no global bias terms
      biases = {name: tf.zeros_like(bias) for name, bias in biases.items()}
    if with_segments:
      biases.update(r_s_bias=layer_bias(self.r_s_bias), seg_embed=row(self.seg_embed))
    return biases

  def layer_position_keys(self, query_length: int, key_length: int):
    """Each layer's projected position encoding, which `call(..., position_keys=...)` takes.

    Without dropout and bi_data; calls with the same lengths can share it. For
    config.pos_encoding other than "relative", the ablation encoding's keys
    (position_ablations).

    Args:
      query_length: T, the tokens a call feeds.
      key_length: K = M + T, the memory and those tokens.

    Returns:
      A list of L tensors [1, N, R, H].
    """
    if self.config.pos_encoding != "relative":
      return position_ablations.layer_position_keys(self.config, self.position_table,
                                                    key_length, self.compute_dtype)
    encoding = self.position_encoding(query_length=query_length, key_length=key_length,
                                      batch_size=2)[:1]  # bi_data: the forward half
    return [block.attention.project_position_keys(encoding) for block in self.blocks]

  def serving_outputs(self, features):
    """What a SavedModel of the backbone returns (see xlnet_tf.serving.saved_model).

    Args:
      features: the packed inputs: input_ids, segment_ids, input_mask [B, T].

    Returns:
      {"pooled_output": [B, D], the last position's (<cls>) state; "sequence_output":
      [B, T, D]}.
    """
    sequence = self(backbone_inputs(features), training=False)["sequence_output"]
    return {"pooled_output": sequence[:, -1], "sequence_output": sequence}

  # ---- pretrained directories --------------------------------------------------------------
  @classmethod
  def from_pretrained(cls, path: str, **arguments) -> "XLNetModel":
    """The backbone of a pretrained directory or Hugging Face hub id, in any layout.

    Layouts: own (save_pretrained), Hugging Face (config.json + model.safetensors,
    pytorch_model.bin or tf_model.h5) or the original's (xlnet_config.json + TF1 checkpoint).
    From a head's directory, its backbone. An own directory of a quantized backbone
    (quantization.json, see save_pretrained) gives the model quantized; one of a quantized head
    is refused (its weights load only into that head).

    Args:
      path: a local or remote (gs://...) directory, a TF1 checkpoint prefix
        (DIR/xlnet_model.ckpt, xlnet_config.json beside it), or a Hugging Face hub id (fetched
        through huggingface_hub's cache).
      **arguments: this class's constructor arguments (recompute_blocks, fused,
        frozen_layers) and XLNetConfig run-time options (mem_len, dropout, ...; also
        ff_activation); the architecture comes from the checkpoint.

    Returns:
      The XLNetModel with the stored weights. Its `.tokenizer` is the directory's
      XLNetTokenizer (spiece.model), or None.

    Raises:
      FileNotFoundError: when `path` is neither a directory nor a hub id that can be fetched.
      UserInputError: when `path` is no pretrained directory, an argument is unknown or sets
        an architecture key, or the tokenizer has more pieces than the model's n_token.
      CheckpointMismatchError: when the weights do not fit the stored config (nothing is
        loaded), or the directory holds a quantized head.

    >>> import tempfile
    >>> from xlnet_tf import XLNetConfig, XLNetModel
    >>> folder = tempfile.TemporaryDirectory()
    >>> _ = XLNetModel(XLNetConfig.preset("tiny")).save_pretrained(folder.name)
    >>> model = XLNetModel.from_pretrained(folder.name, dropout=0.0)
    >>> model.config.n_layer, model.config.dropout, model.tokenizer
    (2, 0.0, None)
    >>> folder.cleanup()
    """
    constructor_arguments, config_overrides = pretrained.split_arguments(
        cls.__init__, arguments, f"{cls.__name__}.from_pretrained")
    place = pretrained.locate(path)
    config = pretrained.stored_config(place, config_overrides)
    model = cls(config, **constructor_arguments)
    pretrained.load_backbone(model, place)
    model.tokenizer = pretrained.stored_tokenizer(place, config)
    return model

  def save_pretrained(self, directory: str) -> str:
    """Writes a directory that `from_pretrained` reads back.

    The directory holds xlnet_config.json (every config field), model.weights.h5 and, when
    `.tokenizer` is set, its spiece.model + tokenizer_config.json. It appears whole or not at
    all; an existing model directory there is replaced whole (checkpoints.save_pretrained).

    A quantized model (after `quantize("int8")`) is saved as it is: model.weights.h5 holds its
    int8 kernels and float32 scales, and quantization.json ({"mode": "int8"}) says so.
    `from_pretrained` builds the float model, quantizes it and loads those weights
    (checkpoints.load_own_checkpoint): the model comes back quantized, computing the same
    outputs; so does a new head's backbone (a head's from_pretrained). The conversion to the
    original or Hugging Face format and fine-tuning's --init_checkpoint refuse such a
    directory: they take float weights.

    Args:
      directory: where to write (local or remote); created, or replaced if it holds a model.

    Returns:
      `directory`.

    Raises:
      UserInputError: when `directory` holds files that are not a model's.
    """
    return own.save_pretrained(self, directory)

  # ---- quantization ------------------------------------------------------------------------
  def quantize(self, mode=None, config=None, filters=None, **kwargs):
    """Quantizes the blocks' projections to int8 in place, for inference (Keras' API).

    "int8": every block's attention projections (q, k, v, r, o) and feed-forward Dense layers
    hold int8 weights with a float32 scale per output channel and multiply int8 activations
    quantized per token (xlnet_tf.modeling.ops.int8_products); the embeddings, mask_emb,
    attention biases, segment embeddings, LayerNorms and Dense biases stay float.

    The quantized model is saved either way, and loads back quantized: `model.save("x.keras")`
    (get_config records the mode; keras.models.load_model) or `save_pretrained` (the int8
    weights and quantization.json; from_pretrained). The original and Hugging Face formats
    hold float weights only and refuse it.

    Args:
      mode: "int8", the one mode implemented (None when `config` gives it).
      config: None, or Keras' default Int8QuantizationConfig(); a custom one is refused.
      filters: must be None: every block is quantized.
      **kwargs: Keras' type_check is accepted and ignored; any other is refused.

    Raises:
      NotImplementedError: for another mode (int4, float8, ...) or a custom config.
      ValueError: for `filters`, a model already quantized, or an unexpected argument.
        Nothing is changed when it raises (layers.quantization.check_request).
    """
    kwargs.pop("type_check", None)
    if kwargs:
      raise ValueError(f"XLNetModel.quantize: unexpected arguments {sorted(kwargs)}")
    quantization.check_request(self, mode, config, filters, quantized_mode=self.quantization)
    int8_packing.warn_without_onednn()
    with quantization.one_garbage_collection():
      for block in self.blocks:
        block.attention.quantize(mode, config=config)
        block.feed_forward.quantize(mode, config=config)
    # Keras' own Model.quantize does the same: the next fit/predict traces the new layers.
    self.train_function = self.test_function = self.predict_function = None

  @property
  def quantization(self) -> Optional[str]:
    """The quantization mode of the blocks' layers ("int8"), or None for a float model."""
    modes = sorted({layer.quantization_mode for block in self.blocks
                    for layer in block._flatten_layers() if layer.quantization_mode})
    return modes[0] if modes else None

  # ---- serialization ---------------------------------------------------------------------
  def get_config(self):
    """The constructor's arguments, for Keras' serialization (.keras files, clone_model).

    Returns:
      {"config": the XLNetConfig's fields, "name", "recompute_blocks", "fused",
      "frozen_layers"}, and "quantization" (the mode) for a quantized model only.
    """
    config = {"config": self.config.to_dict(), "name": self.name,
              "recompute_blocks": self.recompute_blocks, "fused": self.fused,
              "frozen_layers": self.frozen_layers}
    if self.quantization is not None:  # only then: a float model's config stays as it was
      config["quantization"] = self.quantization
    return config

  @classmethod
  def from_config(cls, config):
    """The model a `get_config` dict describes, quantized when it records a mode.

    Args:
      config: a dict `get_config` returned.

    Returns:
      A new XLNetModel with initialized weights (Keras loads the stored ones next; for a
      quantized one, into its int8 variables).
    """
    model = cls(XLNetConfig.from_dict(config["config"]), name=config.get("name", "transformer"),
                recompute_blocks=config.get("recompute_blocks", False),
                fused=config.get("fused", True), frozen_layers=config.get("frozen_layers"))
    if config.get("quantization") is not None:  # the int8 variables the weights load into
      model.quantize(config["quantization"])
    return model


def _attention_masks(config, inputs, batch_size, length, memory_length,
                     dtype) -> mask_lib.AttentionMasks:
  """This call's masks, built once for every block: the content stream's blocked keys and
  segment mismatch (with segment_ids) and, with target_mapping, the query stream's prediction
  positions [B, P] and its masks gathered at them."""
  content_mask, query_mask = mask_lib.attention_masks(
      length, memory_length, config.attn_type, config.same_length,
      inputs.get("input_mask"), inputs.get("perm_mask"), inputs.get("memory_mask"))
  mismatch = None
  if inputs.get("segment_ids") is not None:
    mismatch = mask_lib.segment_mismatch(tf.cast(inputs["segment_ids"], tf.int32),
                                         memory_length)
  content = mask_lib.RowMasks(blocked=content_mask, segment_mismatch=mismatch)
  if inputs.get("target_mapping") is None:
    return mask_lib.AttentionMasks(content)
  positions, valid = mask_lib.prediction_positions(tf.cast(inputs["target_mapping"], dtype))
  if query_mask is not None:
    query_mask = tf.broadcast_to(query_mask, tf.stack(
        [batch_size, length, memory_length + length]))
    query_mask = tf.gather(query_mask, positions, batch_dims=1)
  query_mismatch = None
  if mismatch is not None:
    query_mismatch = tf.gather(mismatch, positions, batch_dims=1)
  return mask_lib.AttentionMasks(content, mask_lib.RowMasks(
      blocked=query_mask, segment_mismatch=query_mismatch, positions=positions, valid=valid))


def _layer_keys_values(block, index, content, memory_keys_values):
  """(Block `index`'s keys_values: the cache, then this call's tokens; this call's own
  (keys, values)), or (None, None) without memory_keys_values."""
  if memory_keys_values is None:
    return None, None
  current = block.attention.project_keys_values(content)  # this call's tokens
  keys_values = tuple(tf.concat([tf.cast(cached, tensor.dtype), tensor], axis=2)
                      for cached, tensor in zip(memory_keys_values[index], current))
  return keys_values, current


def _recomputed(run_block, content, query, biases):
  """run_block under tf.recompute_grad. Everything that needs a gradient (the streams, the
  attention biases sliced from the model's variables) is an explicit input."""
  names = sorted(biases)

  def forward(content, query, *bias_values):
    outputs = run_block(content, query, dict(zip(names, bias_values)))
    return outputs if query is not None else outputs[0]

  if query is None:
    wrapped = lambda h, *b: forward(h, None, *b)
    return tf.recompute_grad(wrapped)(content, *[biases[n] for n in names]), None
  outputs = tf.recompute_grad(lambda h, g, *b: tuple(forward(h, g, *b)))(
      content, query, *[biases[n] for n in names])
  return outputs[0], outputs[1]

