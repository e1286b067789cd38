"""Serving: SavedModels for TF Serving (the tokenizer and packing in the graph, warm-up
requests; checked in a fresh process by check_saved_model) and the ids signature as ONNX or
LiteRT files, each checked against the Keras model before it is moved into place."""

from xlnet_tf.serving.onnx_litert import export_file, write_litert, write_onnx
from xlnet_tf.serving.saved_model import export_saved_model, load_exportable_model
from xlnet_tf.serving.saved_model_check import check_saved_model

__all__ = ["check_saved_model", "export_file", "export_saved_model", "load_exportable_model",
           "write_litert", "write_onnx"]
