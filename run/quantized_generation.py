"""`xlnet-quantized-generation` from the checkout:
xlnet_tf/cli/quantized_generation.py."""

from xlnet_tf.cli import quantized_generation

if __name__ == "__main__":
  quantized_generation.entry()
