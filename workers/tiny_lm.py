"""The tiny causal language model that the CPU workers serve and train.

A 2-layer pre-norm transformer over a 64-token vocabulary (see toy_task.py for what the tokens
mean), small enough to generate and train in milliseconds on one CPU core. The rollout server and
the trainer build the same model from the same seed, and exchange weights as a PyTorch state dict:
on disk (save_weights / load_weights) or broadcast over torch.distributed (tensor_specs gives the
names, dtypes and shapes in broadcast order).
"""

from __future__ import annotations

import os
import tempfile
from typing import Dict, List, Optional

import torch
from torch import nn

VOCAB_SIZE = 64
DEFAULT_MAX_LEN = 256


class TinyLM(nn.Module):
    """Token ids (batch, time) -> next-token logits (batch, time, VOCAB_SIZE).

    Causal: position t sees positions <= t only, so right-padded batches need no padding mask
    (positions past a sequence's end are simply not read).
    """

    def __init__(self, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 max_len: int = DEFAULT_MAX_LEN) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(VOCAB_SIZE, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence of {length} tokens exceeds max_len {self.max_len}")
        positions = torch.arange(length, device=ids.device)
        hidden = self.embed(ids) + self.pos(positions)[None, :, :]
        causal = torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        hidden = self.blocks(hidden, mask=causal)
        return self.head(self.norm(hidden))


def build_model(seed: int, max_len: int = DEFAULT_MAX_LEN) -> TinyLM:
    """A freshly initialised model; the same seed gives the same weights."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    model = TinyLM(max_len=max_len)
    torch.random.set_rng_state(generator_state)
    model.eval()
    return model


def save_weights(model: nn.Module, path: str) -> None:
    """Writes the state dict atomically (a reader never sees a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".weights-")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(model.state_dict(), file)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def load_weights(model: nn.Module, path: str) -> None:
    """Loads a state dict written by save_weights. Raises ValueError naming the path when the
    file is missing, unreadable or holds other tensors."""
    try:
        state = torch.load(path, map_location="cpu")
    except (OSError, RuntimeError, EOFError) as error:
        raise ValueError(f"cannot read weights from {path}: {error}") from error
    if not isinstance(state, dict):
        raise ValueError(f"{path} does not hold a state dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise ValueError(f"weights in {path} do not fit the model: {error}") from error


DTYPE_NAMES: Dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}
DTYPES_BY_NAME: Dict[str, torch.dtype] = {name: dtype for dtype, name in DTYPE_NAMES.items()}


def tensor_specs(model: nn.Module) -> List[Dict[str, object]]:
    """Every tensor of the state dict as {name, dtype, shape}, in state-dict order: the order in
    which the trainer broadcasts them and engines receive them."""
    return [{"name": name, "dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape)}
            for name, tensor in model.state_dict().items()]


def check_tensor_specs(model: nn.Module, names: List[str], dtypes: List[str],
                       shapes: List[List[int]]) -> Optional[str]:
    """Why the announced tensors differ from the model's, or None when they match exactly."""
    expected = tensor_specs(model)
    if not (len(names) == len(dtypes) == len(shapes)):
        return (f"names, dtypes and shapes differ in length "
                f"({len(names)}, {len(dtypes)}, {len(shapes)})")
    if len(names) != len(expected):
        return f"{len(names)} tensors announced, the model has {len(expected)}"
    for spec, name, dtype, shape in zip(expected, names, dtypes, shapes):
        if (name, dtype, list(shape)) != (spec["name"], spec["dtype"], spec["shape"]):
            return (f"tensor {name} {dtype} {list(shape)} announced where the model has "
                    f"{spec['name']} {spec['dtype']} {spec['shape']}")
    return None
