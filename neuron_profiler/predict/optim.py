"""Optimizers as the dry run prices them: one element-wise update per parameter (the for-loop form, which the
simulated runtime prices op by op; ``torch.optim``'s ``foreach`` ops carry no TensorList shapes yet, issue 22).
``LAMB`` (You et al. 2019, as BERT pretraining uses it) is written out here: torch has none."""
from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["make_optimizer", "LAMB"]


class LAMB(torch.optim.Optimizer):
    """LAMB: Adam moments, then the update scaled per tensor by ||w|| / ||update|| (the trust ratio)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.01) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["m"], st["v"] = torch.zeros_like(p), torch.zeros_like(p)
                m, v = st["m"], st["v"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                u = m / (v.sqrt() + g["eps"]) + g["weight_decay"] * p
                ratio = p.norm() / u.norm().clamp_min(1e-12)
                p.sub_(u * (g["lr"] * ratio))
        return None


def make_optimizer(name: str, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """``adamw``, ``lamb`` or ``sgd`` (momentum) over ``params``, in the for-loop form."""
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=False)
    if name == "lamb":
        return LAMB(params)
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=False)
