"""`xlnet-quantized-speed` from the checkout:
xlnet_tf/cli/quantized_speed.py."""

from xlnet_tf.cli import quantized_speed

if __name__ == "__main__":
  quantized_speed.entry()
