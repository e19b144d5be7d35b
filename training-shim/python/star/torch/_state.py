"""A model's state as one flat float32 buffer: the trainable parameters (the gradient's
part, in the order of module.parameters()), then frozen floating-point parameters and
floating-point buffers (BatchNorm statistics). The engine exchanges and reconciles it."""

import numpy as np
import torch


class ModelState:
    def __init__(self, module):
        trainable = [p for p in module.parameters() if p.requires_grad]
        others = [p for p in module.parameters() if not p.requires_grad and p.is_floating_point()]
        others += [b for b in module.buffers() if b.is_floating_point()]
        self.tensors = trainable + others
        self.slices = []
        offset = 0
        for t in self.tensors:
            self.slices.append(slice(offset, offset + t.numel()))
            offset += t.numel()
        self.grad_size = sum(t.numel() for t in trainable)
        self._grad_slices = {id(p): s for p, s in zip(trainable, self.slices)}
        self.flat = np.zeros(max(offset, 1), dtype=np.float32)
        self._flat = torch.from_numpy(self.flat)  # shares memory

    def grad_slice(self, param):
        """Where `param`'s gradient lies in the flat gradient."""
        return self._grad_slices[id(param)]

    def gather(self):
        """Model -> flat."""
        with torch.no_grad():
            for t, s in zip(self.tensors, self.slices):
                self._flat[s].copy_(t.detach().reshape(-1))

    def scatter(self):
        """Flat -> model."""
        with torch.no_grad():
            for t, s in zip(self.tensors, self.slices):
                t.copy_(self._flat[s].view_as(t))
