"""Numerical constants of the original implementation, named once."""

# Every LayerNorm of XLNet (attention, feed-forward, QA end logits, attention summary).
LAYER_NORM_EPSILON = 1e-12

# The score of a blocked attention position, in float32 (the original subtracts 1e30 * mask;
# setting the score instead gives the same softmax and stays finite under 16-bit policies).
MASKED_SCORE = -1e30
