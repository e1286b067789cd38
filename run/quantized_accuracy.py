"""`xlnet-quantized-accuracy` from the checkout:
xlnet_tf/cli/quantized_accuracy.py."""

from xlnet_tf.cli import quantized_accuracy

if __name__ == "__main__":
  quantized_accuracy.entry()
