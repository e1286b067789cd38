"""The pretraining objectives (perm, mlm, clm), one object each, with the data-side helpers
they own: factorization ranks <-> perm_mask / target_mapping (`permutation`), BERT's 80/10/10
replacements (`masked_lm`), consecutive left-to-right segments (`lm_streams`).

Below the heads: the pretraining head asks its objective which stream predicts; nothing here
imports the model, the heads, the records or the loop.
"""

from xlnet_tf.objectives.objective import (CONTENT_STREAM, DEFAULT, IDS, LEFT_TO_RIGHT_LM,
                                           LOSS_POSITIONS, MASKED_LM, NAMES, OBJECTIVES,
                                           PAIR_FEATURES, PERMUTATION_LM, QUERY_STREAM,
                                           LeftToRightLM, MaskedLM, Objective, PermutationLM,
                                           StoredFeature, check_loss_positions, named,
                                           recent_half_targets)

__all__ = ["CONTENT_STREAM", "DEFAULT", "IDS", "LEFT_TO_RIGHT_LM", "LOSS_POSITIONS", "MASKED_LM",
           "NAMES", "OBJECTIVES", "PAIR_FEATURES", "PERMUTATION_LM", "QUERY_STREAM",
           "LeftToRightLM", "MaskedLM", "Objective", "PermutationLM", "StoredFeature",
           "check_loss_positions", "named", "recent_half_targets"]
