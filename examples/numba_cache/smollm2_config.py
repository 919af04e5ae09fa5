"""SmolLM2-135M's dimensions (its config.json), written out here so the
example reads nothing at run time."""
HIDDEN = 576
N_HEADS = 9
N_KV_HEADS = 3
HEAD_DIM = HIDDEN // N_HEADS  # 64
INTERMEDIATE = 1536
ROPE_THETA = 100000.0
RMS_EPS = 1e-5
