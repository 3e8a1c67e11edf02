"""Wrong answers made on purpose (tests only: the spec's ``perturb*`` faults), for the answer check to catch.

- ``perturb``: every step's logits rolled by one token (a wrong vocabulary mapping);
- ``perturb-swap``: at step 5 the top logit trades places with the lowest one (a wrong token, once);
- ``perturb-drift``: the first step as computed, later steps with noise growing to the logits' own spread (a
  decode path that drifts while the prompt is right);
- ``perturb-weight``: the first decoder layer's MLP output weights lost (zero) before the capture (a weight that
  never loaded).
"""

from __future__ import annotations

from typing import Any

#: The step ``perturb-swap`` swaps at.
SWAP_STEP = 5


def lose_weight(model: Any) -> None:
    """Zero the MLP output projection of the model's first decoder layer (in place)."""
    import torch

    for name, parameter in model.named_parameters():
        if ".layers.0." in name and "mlp" in name and ("down_proj" in name or "fc2" in name):
            with torch.no_grad():
                parameter.zero_()
            return
    raise RuntimeError("perturb-weight: no first-layer MLP output weight found")


def perturb_logits(logits: Any, fault: str) -> Any:
    """``logits`` (``[steps, batch, vocab]``) as the fault makes them."""
    import torch

    if fault == "perturb-swap":
        out = logits.clone()
        step = min(SWAP_STEP, out.shape[0] - 1)
        top, low = out[step].argmax(-1), out[step].argmin(-1)
        for row in range(out.shape[1]):
            high_value, low_value = out[step, row, top[row]].clone(), out[step, row, low[row]].clone()
            out[step, row, top[row]], out[step, row, low[row]] = low_value, high_value
        return out
    if fault == "perturb-drift":
        generator = torch.Generator().manual_seed(0)
        noise = torch.randn(logits.shape, generator=generator, dtype=logits.dtype)
        ramp = torch.linspace(0, 1, logits.shape[0], dtype=logits.dtype)[:, None, None]
        return logits + noise * ramp * logits.std(dim=-1, keepdim=True)
    if fault == "perturb":
        return torch.roll(logits, shifts=1, dims=-1)
    return logits
